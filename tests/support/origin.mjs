// A real HTTP origin on loopback whose behaviour each test controls.
//
// `startOrigin(name, handle)` listens on an OS-chosen port. `handle(req, ctx)`
// returns what to do: { delayMs, status, headers, body, chunks, chunkGapMs,
// reset }; reset "before-headers" or "mid-body" destroys the connection there.
// Every request is recorded with its timings, and whether the client closed the
// connection before the answer was complete (an abort seen at the origin).
import http from "node:http";
import { EventEmitter } from "node:events";
import { performance } from "node:perf_hooks";

export async function startOrigin(name, handle) {
  const events = new EventEmitter();
  const requests = [];
  const sockets = new Set();
  const server = http.createServer(async (req, res) => {
    const record = {
      origin: name,
      index: requests.length,
      method: req.method,
      url: req.url,
      headers: req.headers,
      receivedAt: performance.now(),
      body: null,
      answeredAt: null, // response headers sent
      finishedAt: null, // response fully written
      abortedAt: null, // connection closed before the response finished
    };
    requests.push(record);
    const chunks = [];
    try {
      for await (const chunk of req) chunks.push(chunk);
    } catch {
      // The client (a leg the Worker aborted) went away while sending the body.
      record.body = Buffer.concat(chunks);
      record.abortedAt = performance.now();
      events.emit("abort", record);
      return;
    }
    record.body = Buffer.concat(chunks);
    events.emit("request", record);
    res.on("close", () => {
      if (!res.writableFinished) {
        record.abortedAt = performance.now();
        events.emit("abort", record);
      }
    });
    const plan = (await handle(req, record)) ?? {};
    if (plan.delayMs) await sleepUnlessClosed(res, plan.delayMs);
    if (res.destroyed || record.abortedAt !== null) return;
    if (plan.reset === "before-headers") {
      req.socket.destroy();
      return;
    }
    const headers = { "content-type": "text/plain", ...(plan.headers ?? {}) };
    res.writeHead(plan.status ?? 200, headers);
    res.flushHeaders();
    record.answeredAt = performance.now();
    events.emit("answer", record);
    if (plan.reset === "mid-body") {
      await write(res, plan.body ?? "partial body ");
      req.socket.destroy();
      return;
    }
    if (plan.chunks) {
      for (const [i, chunk] of plan.chunks.entries()) {
        if (res.destroyed) return;
        if (i > 0 && plan.chunkGapMs) await sleepUnlessClosed(res, plan.chunkGapMs);
        await write(res, chunk);
      }
      record.lastChunkAt = performance.now();
    }
    res.end(plan.body ?? (plan.chunks ? undefined : `${name}:${req.url}`), () => {
      record.finishedAt = performance.now();
      events.emit("finish", record);
    });
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    name,
    port,
    /** The node:http server, for tests that speak more than request/response. */
    server,
    url: `http://127.0.0.1:${port}`,
    requests,
    events,
    /** Resolves with the first recorded request matching `pred`, now or later. */
    waitFor(eventName, pred, timeoutMs) {
      const found = requests.find((r) => pred(r) && happened(eventName, r));
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          events.off(eventName, onEvent);
          reject(new Error(`${name}: no ${eventName} within ${timeoutMs} ms`));
        }, timeoutMs);
        function onEvent(r) {
          if (!pred(r)) return;
          clearTimeout(timer);
          events.off(eventName, onEvent);
          resolve(r);
        }
        events.on(eventName, onEvent);
      });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function happened(eventName, r) {
  return (
    (eventName === "request" && r.body !== null) ||
    (eventName === "abort" && r.abortedAt !== null) ||
    (eventName === "answer" && r.answeredAt !== null) ||
    (eventName === "finish" && r.finishedAt !== null)
  );
}

function sleepUnlessClosed(res, ms) {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    res.on("close", done);
    function done() {
      clearTimeout(timer);
      res.off("close", done);
      resolve();
    }
  });
}

function write(res, chunk) {
  return new Promise((resolve) => {
    if (res.write(chunk)) resolve();
    else {
      // Whichever comes first; the other listener goes, so a long body does
      // not pile up listeners on the response.
      const done = () => {
        res.off("drain", done);
        res.off("close", done);
        resolve();
      };
      res.on("drain", done);
      res.on("close", done);
    }
  });
}

/** A loopback port that nothing listens on (bound by the OS, then released). */
export async function closedPort() {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}
