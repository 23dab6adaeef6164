// What ordinary and hostile clients send, and what must never follow from it:
// bodies on GET/HEAD, keyed requests hedged unsafely, clients that hang up
// mid-race, WebSocket upgrades, piles of replayable bodies, and error bodies
// that leak configuration. Built Worker in workerd, real loopback origins.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Miniflare } from "./support/miniflare.mjs";
import crypto from "node:crypto";
import { origins, serverTiming, workerOptions } from "./support/worker.mjs";
import { origin, worker, TEST_DEFAULTS } from "./support/harness.mjs";
import { rawRequest } from "./support/raw.mjs";

const TOKEN = "test-token-0123456789abcdef";

async function stats(w) {
  const res = await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  return res.json();
}

test("GET and HEAD with an empty body (Content-Length: 0, empty chunked) go through, and no origin is blamed", async () => {
  const a = await origin("a", () => ({}));
  const b = await origin("b", () => ({}));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_STATS_TOKEN: TOKEN, HEDGE_CACHE: "false" });
  const sends = [
    { method: "GET", headers: { "content-length": "0" } },
    { method: "GET", headers: { "transfer-encoding": "chunked" }, body: "" },
    { method: "HEAD", headers: { "content-length": "0" } },
    { method: "HEAD", headers: { "transfer-encoding": "chunked" }, body: "" },
  ];
  for (let i = 0; i < 6; i++) {
    for (const [k, send] of sends.entries()) {
      const res = await rawRequest(w.url, { ...send, path: `/empty/${i}/${k}` });
      assert.equal(res.status, 200, `${send.method} ${JSON.stringify(send.headers)}`);
    }
  }
  assert.equal(a.requests.length, 24, "every request reached the primary once");
  assert.equal(b.requests.length, 0, "no fast-failure hedge was spent");
  const s = await stats(w);
  for (const o of s.origins) {
    assert.equal(o.degraded, false, o.name);
    assert.ok(!o.window_failure_rate, `${o.name} failure rate ${o.window_failure_rate}`);
  }
});

test("a GET with a real body is refused with a 400 and reaches no origin", async () => {
  const a = await origin("a", () => ({}));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: TOKEN });
  for (const send of [
    { headers: { "content-length": "5" }, body: "hello" },
    { headers: { "transfer-encoding": "chunked" }, body: "hello" },
  ]) {
    const res = await rawRequest(w.url, { ...send, method: "GET", path: "/with-body" });
    assert.equal(res.status, 400);
    assert.equal(JSON.parse(res.body.toString()).error, "bad_request");
  }
  assert.equal(a.requests.length, 0);
  assert.equal((await stats(w)).origins[0].window_requests, 0, "nothing booked on the origin");
});

test("a keyed POST is not hedged unless the operator opted in", async () => {
  const a = await origin("a", () => ({ delayMs: 300, body: "created" }));
  const b = await origin("b", () => ({ body: "duplicate!" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_MODE: "static", HEDGE_STATIC_DELAY_MS: "10" });
  const res = await w.fetch("/orders", { method: "POST", body: "x", headers: { "idempotency-key": "k-default" } });
  assert.equal(await res.text(), "created");
  assert.equal(serverTiming(res.headers.get("server-timing"))["hedge-skip"]?.desc, "not-idempotent");
  assert.equal(b.requests.length, 0);
});

for (const status of [409, 425, 429]) {
  test(`a hedge answered ${status} never reaches the client: the primary, which may have committed, answers`, async () => {
    const a = await origin("a", () => ({ delayMs: 400, body: "committed" }));
    const b = await origin("b", () => ({ status, body: "in progress elsewhere" }));
    const w = await worker({
      HEDGE_ORIGINS: origins(a, b),
      HEDGE_MODE: "static",
      HEDGE_STATIC_DELAY_MS: "20",
      HEDGE_IDEMPOTENCY_HEADER: "idempotency-key",
    });
    const res = await w.fetch("/pay", { method: "POST", body: "amount=5", headers: { "idempotency-key": `k-${status}` } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "committed");
    assert.equal(b.requests.length, 1, "the hedge went out");
    assert.equal(a.requests[0].abortedAt, null, "the primary was not aborted");
  });
}

test("a keyed request is never hedged to the same origin", async () => {
  const a = await origin("a", () => ({ delayMs: 300, body: "once" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "10",
    HEDGE_IDEMPOTENCY_HEADER: "idempotency-key",
  });
  const res = await w.fetch("/pay", { method: "POST", body: "amount=5", headers: { "idempotency-key": "k-same" } });
  assert.equal(await res.text(), "once");
  assert.equal(a.requests.length, 1, "one origin saw the key once");
  assert.equal(serverTiming(res.headers.get("server-timing"))["hedge-skip"]?.desc, "no-target");
  // An unkeyed GET may still be hedged to the same origin.
  const get = await w.fetch("/read");
  await get.text();
  assert.equal(a.requests.filter((r) => r.url === "/read").length, 2);
});

// workerd reports a client's disconnect to the Worker as an abort of the
// incoming request's signal where it can see it; its HTTP/1.1 server does not
// watch an idle client socket before the response starts, so here a front
// Worker plays the client: it calls the built Worker through a service binding
// and aborts that call, which workerd passes on as the same signal
// (request_signal_passthrough).
const FRONT = `export default { async fetch(req, env) {
  const hangUp = Number(new URL(req.url).searchParams.get("hang-up-ms"));
  const c = new AbortController();
  setTimeout(() => c.abort(), hangUp);
  try { return await env.EDGE.fetch(req.url, { signal: c.signal }); }
  catch { return new Response("client gone", { status: 499 }); }
} }`;

// The Worker does not listen for the disconnect (a listener cost a promise
// and two closures a request): workerd cancels the invocation and its
// subrequests when the client leaves. Both runs check that the legs are
// aborted at the origin all the same, hedged (the race looks at the signal
// when its hedge timer fires) and not hedged at all.
for (const [mode, vars] of [
  ["hedged after 400 ms", { HEDGE_MODE: "static", HEDGE_STATIC_DELAY_MS: "400" }],
  ["hedging off", { HEDGE_MODE: "off" }],
]) test(`clients that hang up mid-race (${mode}): the legs aborted, no hedge sent, wasm memory flat`, async () => {
  const CLIENTS = 200;
  const HANG_UP_MS = 100;
  const DELAY_MS = 400;
  const slow = (req) => ({ delayMs: req.url.startsWith("/warm") ? 0 : 30_000 });
  const a = await origin("a", slow);
  const b = await origin("b", slow);
  const edge = workerOptions({
    ...TEST_DEFAULTS,
    HEDGE_ORIGINS: origins(a, b),
    ...vars,
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_CACHE: "false",
    HEDGE_LOG_LEVEL: "off",
  });
  const flags = [...edge.compatibilityFlags, "request_signal_passthrough"];
  const mf = new Miniflare({
    workers: [
      { name: "front", modules: true, script: FRONT, compatibilityDate: edge.compatibilityDate, compatibilityFlags: flags, serviceBindings: { EDGE: "edge" } },
      { ...edge, name: "edge", compatibilityFlags: flags },
    ],
  });
  const edgeWorker = await mf.getWorker("edge");
  const statsOf = async () =>
    (await edgeWorker.fetch("http://edge.test/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
  try {
    // A first burst warms the isolate: on a cold one (workerd 1.20261117)
    // some of 200 simultaneous requests had not yet sent their primary when
    // their client left 100 ms later, so the test would prove less.
    await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => (await edgeWorker.fetch(`http://edge.test/warm/${i}`)).arrayBuffer()));
    const memoryBefore = (await statsOf()).wasm_memory_bytes;
    const started = Date.now();
    const statuses = await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const res = await mf.dispatchFetch(`http://edge.test/gone/${i}?hang-up-ms=${HANG_UP_MS}`);
        await res.arrayBuffer();
        return res.status;
      }),
    );
    assert.ok(statuses.every((s) => s === 499), "every client hung up");
    // Every primary that went out is aborted; one whose client left before
    // it was sent is never sent (allowed, but most must go out for the test
    // to show the aborts).
    const gone = () => a.requests.filter((r) => r.url.startsWith("/gone/"));
    await a.waitFor("request", () => gone().length >= 0.9 * CLIENTS, 5_000).catch(() => {});
    assert.ok(gone().length >= 0.9 * CLIENTS, `${gone().length} of ${CLIENTS} primaries went out`);
    await Promise.all(gone().map((sent) => a.waitFor("abort", (r) => r === sent, 10_000)));
    const abortedWithin = Date.now() - started;
    // No hedge may go out later either: wait until three hedge delays have passed.
    const wait = 3 * DELAY_MS - (Date.now() - started);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    assert.equal(b.requests.length, 0, `${b.requests.length} hedges sent for clients that were gone`);
    const memoryAfter = (await statsOf()).wasm_memory_bytes;
    console.log(`# ${CLIENTS} primaries aborted within ${abortedWithin} ms; wasm memory ${memoryBefore} -> ${memoryAfter} bytes`);
    assert.ok(memoryAfter - memoryBefore <= 1 << 20, `wasm memory grew by ${memoryAfter - memoryBefore} bytes`);
  } finally {
    await mf.dispose();
  }
});

test("a WebSocket upgrade reaches the origin with its Upgrade header and is answered 101", async () => {
  const a = await origin("a", () => ({}));
  // The origin's side of the handshake (RFC 6455 4.2.2), then one text frame.
  const upgrades = [];
  a.server.on("upgrade", (req, socket) => {
    upgrades.push(req.headers);
    const accept = crypto
      .createHash("sha1")
      .update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
      .digest("base64");
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    const text = Buffer.from("hello from the origin");
    socket.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
  });
  const w = await worker({ HEDGE_ORIGINS: origins(a) });
  const ws = new WebSocket(`${w.url.replace("http", "ws")}/socket`);
  const message = await new Promise((resolve, reject) => {
    ws.addEventListener("message", (e) => resolve(e.data));
    ws.addEventListener("error", () => reject(new Error("the WebSocket failed")));
  });
  ws.close();
  assert.equal(message, "hello from the origin");
  assert.equal(upgrades.length, 1);
  assert.equal(upgrades[0].upgrade, "websocket");
});

test("150 concurrent 1 MiB keyed uploads: held bodies stay under the cap, every body arrives whole", { timeout: 60_000 }, async () => {
  const MIB = 1 << 20;
  const a = await origin("a", () => ({ delayMs: 200, body: "stored" }));
  const b = await origin("b", () => ({ delayMs: 200, body: "stored" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "50",
    HEDGE_IDEMPOTENCY_HEADER: "idempotency-key",
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_LOG_LEVEL: "off",
  });
  const skips = {};
  await Promise.all(
    Array.from({ length: 150 }, async (_, i) => {
      const body = Buffer.alloc(MIB, i % 251);
      const res = await w.fetch(`/upload/${i}`, { method: "PUT", body, headers: { "idempotency-key": `u-${i}` } });
      assert.equal(await res.text(), "stored");
      const skip = serverTiming(res.headers.get("server-timing"))["hedge-skip"]?.desc ?? "none";
      skips[skip] = (skips[skip] ?? 0) + 1;
    }),
  );
  // A hedge aborted while its upload was under way may still be in the
  // origin's read when the clients have their answers: wait until each
  // recorded request has been read whole or cut off.
  const settled = (o, r) =>
    r.body !== null
      ? Promise.resolve()
      : new Promise((resolve) => {
          const done = (x) => {
            if (x !== r) return;
            o.events.off("request", done);
            o.events.off("abort", done);
            resolve();
          };
          o.events.on("request", done);
          o.events.on("abort", done);
        });
  await Promise.all([...a.requests.map((r) => settled(a, r)), ...b.requests.map((r) => settled(b, r))]);
  for (const r of [...a.requests, ...b.requests]) {
    const i = Number(r.url.split("/").at(-1));
    assert.ok(r.body.every((byte) => byte === i % 251), `${r.url}: body intact`);
    // Only a leg the Worker aborted may stop short of the whole body.
    if (r.abortedAt === null) assert.equal(r.body.length, MIB, r.url);
  }
  const s = await stats(w);
  console.log(`# hedge-skip reasons ${JSON.stringify(skips)}; held body bytes peak ${s.held_body_bytes_peak}`);
  assert.ok(s.held_body_bytes_peak <= 16 * MIB, `peak ${s.held_body_bytes_peak}`);
  assert.equal(s.held_body_bytes, 0, "every claim was given back");
  assert.ok((skips["held-bodies-full"] ?? 0) > 0, "over the cap, uploads are streamed once");
});

test("error bodies do not echo origin URLs or configuration values", async () => {
  const w = await worker({
    HEDGE_ORIGINS: [{ name: "a", url: "ftp://secret-origin.internal:2121/base" }],
  });
  const res = await w.fetch("/x");
  assert.equal(res.status, 500);
  const text = await res.text();
  assert.match(text, /HEDGE_ORIGINS/);
  assert.doesNotMatch(text, /secret-origin|2121|ftp/);
});

test("the production environment is not also exposed on workers.dev", () => {
  const toml = readFileSync(new URL("../wrangler.toml", import.meta.url), "utf8");
  const production = toml.split(/^\[env\.production\]$/m)[1]?.split(/^\[(?!env\.production)/m)[0] ?? "";
  assert.match(production, /^workers_dev\s*=\s*false\s*$/m);
});
