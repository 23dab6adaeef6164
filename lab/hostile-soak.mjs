// The hostile soak: ordinary clients beside hostile and odd ones, open loop,
// through the built Worker in workerd against two loopback origins, for a
// bounded time. It passes when:
// - the Worker made no 5xx (an origin's own 500 on its failing path is
//   passed on and is not the Worker's; anything else 5xx is),
// - its wasm memory after the first slice grows by at most --wasm-growth-mib,
// - the cache keeps answering ordinary clients (cache hits in every slice),
// - both origins stay healthy (never degraded in the stats, read every slice):
//   broken uploads and failing paths are the clients' doing, never an origin's,
// - the billed events a client can cause stay within the isolate's cap:
//   error log lines and 5xx data points at most 60 a minute (plus the
//   first minute's burst of 60), counted from the runtime's own output.
//
// The mix, per request drawn at random (seeded):
//   ordinary  25%  GET /page/<20 pages> (cacheable 5 s) and /api/items/<n>
//   writes    20%  POST to a distinct 8 KB URL (each answered 201 + Location)
//   directives 10% GET /page/<k> with a Cache-Control of 1,000 directives
//   spellings 10%  PUT /%70ay/.., /PAY/.., //pay/.. (a route that hedges no PUT)
//   failing   10%  GET /boom/<n> (the origins answer 500)
//   scanner   15%  GET /scan-<random>/x (new first segments)
//   odd        5%  GET /odd/<n> (Connection: close, bad token, x-hop)
//   override   4%  GET /items/<n> with X-HTTP-Method-Override: DELETE
//   broken     6%  POST or PUT whose body breaks off (short of its
//                  Content-Length, or a bad chunk), on a raw socket
// and one WebSocket upgrade (opened, one message read, closed) a second.
//
//   node lab/hostile-soak.mjs [--minutes 5] [--rate 100] [--slice-seconds 30] [--wasm-growth-mib 4]
import crypto from "node:crypto";
import { parseArgs } from "node:util";
import { startOrigin } from "../tests/support/origin.mjs";
import { startWorker, origins } from "../tests/support/worker.mjs";
import { captureLogs } from "../tests/support/logs.mjs";
import { captureEntry, pointsIn } from "../tests/support/analytics-capture.mjs";
import { brokenUpload } from "../tests/support/broken_upload.mjs";
import { seededRandom } from "./rng.mjs";

const log = (msg) => process.stderr.write(`[hostile-soak] ${msg}\n`);
const TOKEN = "hostile-soak-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

function originHandler(name) {
  return (req) => {
    if (req.method === "POST") return { status: 201, headers: { location: `/created/${crypto.randomUUID()}` }, body: "created" };
    if (req.url.startsWith("/boom")) return { status: 500, body: "boom" };
    if (req.url.startsWith("/odd")) return { headers: { connection: "close, bad token, x-hop", "x-hop": "1" }, body: "odd" };
    if (req.url.startsWith("/page")) return { headers: { "cache-control": "public, max-age=5" }, body: `page from ${name}` };
    return { delayMs: Math.random() < 0.02 ? 60 : 1, body: "ok" };
  };
}

function acceptWebSockets(o) {
  o.server.on("upgrade", (req, socket) => {
    const accept = crypto.createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    const text = Buffer.from(`hello from ${o.name}`);
    socket.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
    socket.on("error", () => {});
    setTimeout(() => socket.destroy(), 200);
  });
}

const KINDS = [
  ["ordinary", 0.25],
  ["writes", 0.2],
  ["directives", 0.1],
  ["spellings", 0.1],
  ["failing", 0.1],
  ["scanner", 0.15],
  ["odd", 0.05],
  ["override", 0.04],
  ["broken", 0.06],
];
const manyDirectives = Array.from({ length: 1_000 }, (_, i) => `x${i}`).join(",");

/** One request of `kind`: [path, init]. */
function draw(kind, rand, n) {
  const pad = "p".repeat(8_192);
  switch (kind) {
    case "ordinary":
      return rand() < 0.7 ? [`/page/${Math.floor(rand() * 20)}`, {}] : [`/api/items/${n}`, {}];
    case "writes":
      return [`/w/${n}?pad=${pad}`, { method: "POST", body: "x" }];
    case "directives":
      return [`/page/${Math.floor(rand() * 20)}`, { headers: { "cache-control": manyDirectives } }];
    case "spellings": {
      const spelling = ["/%70ay", "/PAY", "//pay", "/Pay"][n % 4];
      return [`${spelling}/charge-${n}`, { method: "PUT", body: "charge" }];
    }
    case "failing":
      return [`/boom/${n}`, {}];
    case "scanner":
      return [`/scan-${Math.floor(rand() * 1e9).toString(36)}/x`, {}];
    case "odd":
      return [`/odd/${n}`, {}];
    case "broken":
      return [`/up/${n}`, { method: n % 2 ? "PUT" : "POST", how: n % 4 < 2 ? "short" : "bad-chunk" }];
    default:
      return [`/items/${n}`, { headers: { "x-http-method-override": "DELETE" } }];
  }
}

export async function runHostileSoak({ seconds, rate, sliceSeconds, wasmGrowthMib = 4, seed = 1 }) {
  const a = await startOrigin("a", originHandler("a"));
  const b = await startOrigin("b", originHandler("b"));
  acceptWebSockets(a);
  acceptWebSockets(b);
  // The runtime's output (error lines, and the data points a stand-in
  // dataset logs) is captured and counted, not printed.
  const logs = captureLogs();
  const w = await startWorker(
    {
      HEDGE_ORIGINS: origins(a, b),
      HEDGE_STATS_TOKEN: TOKEN,
      HEDGE_METHODS: "GET,HEAD,PUT",
      HEDGE_ROUTES: JSON.stringify([
        { prefix: "/pay", methods: ["GET", "HEAD"] },
        { prefix: "/api", name: "api" },
      ]),
    },
    { ...captureEntry(), handleRuntimeStdio: logs.handleRuntimeStdio },
  );
  const rand = seededRandom(seed).next;
  const stats = async () => (await fetch(`${w.url}/__hedge/stats`, { headers: auth })).json();
  const slices = [];
  const problems = [];
  let n = 0;
  let inFlight = 0;
  const MAX_IN_FLIGHT = 500;
  const broken = async (path, init) => {
    inFlight++;
    try {
      const res = await brokenUpload(w.url, { method: init.method, path, how: init.how });
      current.requests++;
      current.byKind.broken = (current.byKind.broken ?? 0) + 1;
      // A 400, or nothing when the runtime dropped the connection first.
      if (res.status !== 400 && res.status !== null) {
        current.workerErrors++;
        if (problems.length < 20) problems.push(`broken ${init.method} ${init.how} ${path}: ${res.status} ${res.text.slice(0, 120)}`);
      }
    } finally {
      inFlight--;
    }
  };
  const one = async (kind, path, init) => {
    if (kind === "broken") return broken(path, init);
    inFlight++;
    try {
      const res = await fetch(`${w.url}${path}`, { ...init, signal: AbortSignal.timeout(30_000) });
      const body = await res.text();
      current.requests++;
      current.byKind[kind] = (current.byKind[kind] ?? 0) + 1;
      const originsOwn500 = kind === "failing" && res.status === 500 && body === "boom";
      if (res.status >= 500 && !originsOwn500) {
        current.workerErrors++;
        if (problems.length < 20) problems.push(`${kind} ${init.method ?? "GET"} ${path.slice(0, 60)}: ${res.status} ${body.slice(0, 120)}`);
      }
      if (kind === "ordinary" && path.startsWith("/page")) {
        current.ordinaryPages++;
        current.cacheHits += res.headers.get("x-hedge") === "cache" ? 1 : 0;
      }
    } catch (e) {
      current.clientErrors++;
      if (problems.length < 20) problems.push(`${kind} ${path.slice(0, 60)}: ${e.message}`);
    } finally {
      inFlight--;
    }
  };
  const upgrade = () =>
    new Promise((resolve) => {
      const ws = new WebSocket(`${w.url.replace("http", "ws")}/api/socket`);
      const done = (ok) => {
        current.upgrades += ok ? 1 : 0;
        current.upgradeFailures += ok ? 0 : 1;
        try {
          ws.close();
        } catch {}
        resolve();
      };
      ws.addEventListener("message", () => done(true));
      ws.addEventListener("error", () => done(false));
    });
  const newSlice = () => ({ requests: 0, byKind: {}, workerErrors: 0, clientErrors: 0, skipped: 0, ordinaryPages: 0, cacheHits: 0, upgrades: 0, upgradeFailures: 0 });
  let current = newSlice();
  const pending = new Set();
  const track = (p) => {
    pending.add(p);
    p.finally(() => pending.delete(p));
  };
  const started = Date.now();
  try {
    for (let done = 0; done < seconds; done += sliceSeconds) {
      const s = Math.min(sliceSeconds, seconds - done);
      const sliceStart = Date.now();
      let sent = 0;
      // Open loop: the k-th request of the slice goes at k / rate seconds, whatever came back.
      while (Date.now() - sliceStart < s * 1000) {
        const due = Math.floor(((Date.now() - sliceStart) / 1000) * rate);
        for (; sent < due; sent++) {
          if (inFlight >= MAX_IN_FLIGHT) {
            current.skipped++;
            continue;
          }
          let r = rand();
          const kind = KINDS.find(([, p]) => (r -= p) < 0)?.[0] ?? "ordinary";
          const [path, init] = draw(kind, rand, n++);
          track(one(kind, path, init));
          if (sent % rate === 0) track(upgrade());
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      await Promise.all([...pending]);
      const st = await stats();
      const degraded = st.origins.filter((o) => o.degraded).map((o) => o.name);
      const errorLines = logs.lines.filter((l) => l.includes('"level":"error"')).length;
      // Unsampled 5xx points (weight 1); past the cap a 5xx is sampled like
      // a success and weighted, which the cap does not bound.
      const errorPoints = pointsIn(logs.lines).filter((p) => p.doubles[2] >= 500 && p.doubles[4] === 1).length;
      const slice = { ...current, at: Math.round((Date.now() - started) / 1000), wasmBytes: st.wasm_memory_bytes, degraded, heldPeak: st.held_body_bytes_peak, errorLines, errorPoints };
      slices.push(slice);
      current = newSlice();
      log(
        `${slice.at} s: ${slice.requests} requests (${slice.skipped} not sent: ${MAX_IN_FLIGHT} in flight), Worker 5xx ${slice.workerErrors}, client errors ${slice.clientErrors}, ` +
          `ordinary page hits ${slice.cacheHits}/${slice.ordinaryPages}, upgrades ${slice.upgrades} ok ${slice.upgradeFailures} failed, degraded [${degraded}], wasm memory ${(slice.wasmBytes / 1048576).toFixed(2)} MiB, ` +
          `error lines ${errorLines} and unsampled 5xx points ${errorPoints} so far`,
      );
    }
  } finally {
    await w.dispose();
    await a.close();
    await b.close();
  }
  const wasmFirst = slices[0].wasmBytes;
  const wasmMax = Math.max(...slices.map((s) => s.wasmBytes));
  const sum = (k) => slices.reduce((acc, s) => acc + s[k], 0);
  // The cap: a burst of 60, then 60 a minute (src: core/src/observe/error_events.rs).
  const elapsedS = (Date.now() - started) / 1000;
  const eventCap = 60 + Math.ceil(elapsedS) + 1;
  const last = slices.at(-1);
  const failing = slices.reduce((acc, s) => acc + (s.byKind.failing ?? 0), 0);
  const checks = {
    noWorkerErrors: sum("workerErrors") === 0 && sum("clientErrors") === 0,
    memoryBounded: wasmMax <= wasmFirst + wasmGrowthMib * 1048576,
    cacheStores: slices.every((s) => s.cacheHits > 0),
    originsHealthy: slices.every((s) => s.degraded.length === 0),
    upgradesWork: sum("upgradeFailures") === 0 && sum("upgrades") > 0,
    allSent: sum("skipped") === 0,
    billedEventsCapped: last.errorLines <= eventCap && last.errorPoints <= eventCap,
  };
  return {
    seconds,
    rate,
    requests: sum("requests"),
    workerErrors: sum("workerErrors"),
    clientErrors: sum("clientErrors"),
    cacheHitRatio: sum("cacheHits") / Math.max(1, sum("ordinaryPages")),
    upgrades: sum("upgrades"),
    failing5xx: failing,
    broken: slices.reduce((acc, s) => acc + (s.byKind.broken ?? 0), 0),
    errorLines: last.errorLines,
    errorPoints: last.errorPoints,
    eventCap,
    wasmFirstMib: wasmFirst / 1048576,
    wasmMaxMib: wasmMax / 1048576,
    wasmLastMib: slices.at(-1).wasmBytes / 1048576,
    checks,
    pass: Object.values(checks).every(Boolean),
    problems,
    slices,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      minutes: { type: "string", default: "5" },
      rate: { type: "string", default: "100" },
      "slice-seconds": { type: "string", default: "30" },
      "wasm-growth-mib": { type: "string", default: "4" },
    },
  });
  const r = await runHostileSoak({
    seconds: Math.round(Number(values.minutes) * 60),
    rate: Number(values.rate),
    sliceSeconds: Number(values["slice-seconds"]),
    wasmGrowthMib: Number(values["wasm-growth-mib"]),
  });
  const { slices, ...summary } = r;
  process.stdout.write(JSON.stringify(summary) + "\n");
  log(
    `${r.pass ? "PASS" : "FAIL"}: ${r.requests} requests in ${r.seconds} s at ${r.rate} rps; Worker 5xx ${r.workerErrors}, client errors ${r.clientErrors}; ` +
      `ordinary page cache hits ${(100 * r.cacheHitRatio).toFixed(1)}%; ${r.upgrades} upgrades; ${r.broken} broken uploads; ${r.failing5xx} 5xx from the failing path: ` +
      `${r.errorLines} error lines and ${r.errorPoints} unsampled 5xx points (cap ${r.eventCap}); wasm memory ${r.wasmFirstMib.toFixed(2)} MiB after the first slice, ` +
      `at most ${r.wasmMaxMib.toFixed(2)}, ${r.wasmLastMib.toFixed(2)} at the end; ${JSON.stringify(r.checks)}`,
  );
  process.exit(r.pass ? 0 : 1);
}
