// The origin simulator: one process serving every origin of a scenario on
// loopback, each with its seeded latency model and its own counters.
//
//   node lab/origin-sim.mjs --scenario heavy-tail --seed 1
//
// Prints one JSON line {"origins":[{name,url,zone}]} once listening. Each origin
// serves GET /__stats (counters as JSON), GET /__log (every request since the
// reset that carried the load generator's x-lab-seq: its attempt at this
// origin, arrival, planned delay and status, whether the Worker then aborted
// it or not) and POST /__reset; every other request is answered after the
// scenario's latency, drawn for that request (keyed by x-lab-seq) when it
// carries one. The process exits when its stdin
// closes, so it never outlives the runner that started it.
import http from "node:http";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { originModel, scenario } from "./scenarios.mjs";

const NAMES = ["primary", "secondary"];
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

function freshCounters() {
  return {
    received: 0,
    completed: 0,
    aborted: 0, // the client closed the connection before the answer
    workMs: 0, // time spent on requests, answered or aborted
    abortedWorkMs: 0,
    hedgeMarked: 0, // requests carrying x-hedge-attempt
    nonIdempotent: 0,
    statuses: {},
    startedMs: performance.now(),
    primariesBySecond: [],
  };
}

/**
 * Starts the scenario's origins on loopback; `cacheControl` is what every
 * answer says (`no-store` unless a cache benchmark asks for more).
 */
export async function startOriginSim(name, seed, { cacheControl = "no-store" } = {}) {
  const spec = scenario(name);
  const servers = [];
  const origins = [];
  for (const [index] of spec.origins.entries()) {
    const model = originModel(name, index, seed);
    let counters = freshCounters();
    // Requests carrying x-lab-seq: [seq, attempt, arrived (epoch ms), delay, status, hedge-marked].
    let requestLog = [];
    let attempts = new Map();
    const body = Buffer.alloc(512, "o");
    const server = http.createServer((req, res) => {
      if (req.url === "/__stats") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(counters));
        return;
      }
      if (req.url === "/__log") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ clock: model.clock(), requests: requestLog }));
        return;
      }
      if (req.url === "/__reset") {
        counters = freshCounters();
        requestLog = [];
        attempts = new Map();
        model.restart(performance.timeOrigin + performance.now());
        res.end("reset");
        return;
      }
      const c = counters;
      const arrived = performance.now();
      c.received += 1;
      if (req.headers["x-hedge-attempt"]) c.hedgeMarked += 1;
      else {
        // Primaries by second since the reset, to read a spell by.
        const second = Math.floor((arrived - c.startedMs) / 1000);
        c.primariesBySecond[second] = (c.primariesBySecond[second] ?? 0) + 1;
      }
      if (!IDEMPOTENT.has(req.method)) c.nonIdempotent += 1;
      const seq = req.headers["x-lab-seq"];
      const nowMs = performance.timeOrigin + arrived;
      let key = null;
      if (seq !== undefined) {
        const attempt = attempts.get(seq) ?? 0;
        attempts.set(seq, attempt + 1);
        key = `${seq}:${attempt}`;
      }
      const { delayMs, status } = model.plan(nowMs, key);
      if (key !== null) requestLog.push([Number(seq), attempts.get(seq) - 1, nowMs, delayMs, status, req.headers["x-hedge-attempt"] ? 1 : 0]);
      let done = false;
      const timer = setTimeout(() => {
        done = true;
        c.completed += 1;
        c.workMs += performance.now() - arrived;
        c.statuses[status] = (c.statuses[status] ?? 0) + 1;
        res.writeHead(status, { "content-type": "text/plain", "cache-control": cacheControl });
        res.end(status === 200 ? body : "shed");
      }, delayMs);
      res.on("close", () => {
        if (done) return;
        clearTimeout(timer);
        const spent = performance.now() - arrived;
        c.aborted += 1;
        c.workMs += spent;
        c.abortedWorkMs += spent;
      });
      req.resume();
    });
    server.keepAliveTimeout = 60_000;
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push(server);
    origins.push({ name: NAMES[index] ?? `origin${index}`, url: `http://127.0.0.1:${server.address().port}`, zone: `zone-${index}` });
  }
  return {
    origins,
    close: () => Promise.all(servers.map((s) => new Promise((r) => (s.closeAllConnections(), s.close(r))))),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      scenario: { type: "string", default: "heavy-tail" },
      seed: { type: "string", default: "1" },
      "cache-control": { type: "string", default: "no-store" },
    },
  });
  const sim = await startOriginSim(values.scenario, values.seed, { cacheControl: values["cache-control"] });
  process.stdout.write(JSON.stringify({ origins: sim.origins }) + "\n");
  process.stdin.resume();
  process.stdin.on("end", () => sim.close().then(() => process.exit(0)));
  process.stdin.on("close", () => process.exit(0));
}
