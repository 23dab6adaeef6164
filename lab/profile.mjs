// A V8 CPU profile of the built Worker under load: workerd's inspector
// samples the isolate while a closed loop of clients goes through it to an
// instant origin; the report is self time by function (wasm functions by
// name when the build keeps its names: build with HEDGEHOG_KEEP_NAMES=1).
//
//   node lab/profile.mjs [--build build] [--seconds 4] [--vars '{"HEDGE_MODE":"off"}'] [--top 30]
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Miniflare } from "../tests/support/miniflare.mjs";
import { spawnJson } from "./run.mjs";
import { workerOptions } from "../tests/support/worker.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    build: { type: "string", default: "build" },
    seconds: { type: "string", default: "4" },
    vars: { type: "string", default: "{}" },
    top: { type: "string", default: "30" },
  },
});

/** A free loopback port (the inspector needs one up front). */
const freePort = () =>
  new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const sim = spawnJson(["lab/origin-sim.mjs", "--scenario", "instant"], { keepAlive: true });
const { origins } = await sim.firstLine;
const inspectorPort = await freePort();
const mf = new Miniflare({
  ...workerOptions({ HEDGE_ORIGINS: origins, ...JSON.parse(values.vars) }),
  scriptPath: path.join(path.resolve(values.build), "index.js"),
  inspectorPort,
});
try {
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id && pending.has(msg.id)) pending.get(msg.id)(msg);
  };
  const send = (method, params = {}) =>
    new Promise((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  const load = (secs) =>
    spawnJson(["lab/loadgen.mjs", "--url", url, "--closed", "--concurrency", "32", "--seconds", String(secs)]).firstLine;
  await load(3); // warm-up: V8 tiers wasm up
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 100 });
  await send("Profiler.start");
  const result = await load(Number(values.seconds));
  const { result: { profile } } = await send("Profiler.stop");
  ws.close();
  // Self time per function: samples whose leaf node is that function.
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const hits = new Map();
  for (const sample of profile.samples) {
    const f = byNode.get(sample).callFrame;
    const name = f.functionName || `(anonymous ${path.basename(f.url)}:${f.lineNumber})`;
    hits.set(name, (hits.get(name) ?? 0) + 1);
  }
  const total = profile.samples.length;
  const idle = (hits.get("(idle)") ?? 0) + (hits.get("(program)") ?? 0);
  console.log(`${result.ok} requests in ${values.seconds} s; ${total} samples, ${(100 * idle / total).toFixed(1)}% idle or program`);
  console.log("| self % of busy | function |");
  console.log("|---|---|");
  const busy = total - idle;
  for (const [name, n] of [...hits].filter(([k]) => !["(idle)", "(program)"].includes(k)).sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    console.log(`| ${(100 * n / busy).toFixed(1)} | ${name.replaceAll("|", "\\|").slice(0, 110)} |`);
  }
} finally {
  await mf.dispose();
  sim.child.stdin.end();
  sim.child.kill();
}
