// What a cold start costs: for this build and a baseline build, alternately,
// a fresh workerd (Miniflare) is started and its first request timed, then
// a second; and V8 (this Node) compiles each build's wasm on its own. Medians
// over the rounds; the instant origin answers at once, so the first answer's
// time is the isolate's own (module load, wasm instantiation, configuration).
//
//   node lab/cold-start.mjs --baseline <build dir inside the repo> [--rounds 7]
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Miniflare } from "../tests/support/miniflare.mjs";
import { spawnJson } from "./run.mjs";
import { workerOptions } from "../tests/support/worker.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const log = (msg) => process.stderr.write(`[cold-start ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const { values } = parseArgs({ options: { baseline: { type: "string" }, rounds: { type: "string", default: "7" } } });
if (!values.baseline) throw new Error("--baseline <build dir> is required");
const builds = [
  { name: "baseline", dir: path.resolve(values.baseline) },
  { name: "this build", dir: path.join(root, "build") },
];
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const sim = spawnJson(["lab/origin-sim.mjs", "--scenario", "instant"], { keepAlive: true });
const { origins } = await sim.firstLine;
const results = builds.map((b) => ({ ...b, ready: [], first: [], second: [], compile: [] }));
try {
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const r of results) {
      const bytes = readFileSync(path.join(r.dir, "index_bg.wasm"));
      let t = performance.now();
      await WebAssembly.compile(bytes);
      r.compile.push(performance.now() - t);
      t = performance.now();
      const mf = new Miniflare({ ...workerOptions({ HEDGE_ORIGINS: origins }), scriptPath: path.join(r.dir, "index.js") });
      await mf.ready;
      r.ready.push(performance.now() - t);
      for (const list of [r.first, r.second]) {
        t = performance.now();
        const res = await mf.dispatchFetch("http://edge.test/cold");
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`${r.name}: status ${res.status}`);
        list.push(performance.now() - t);
      }
      await mf.dispose();
    }
    log(`round ${round}: ${results.map((r) => `${r.name} first ${r.first.at(-1).toFixed(1)} ms`).join(", ")}`);
  }
} finally {
  sim.child.stdin.end();
  sim.child.kill();
}
console.log("| build | wasm gzipped bytes | V8 compile ms | workerd start to ready ms | first request ms | second request ms |");
console.log("|---|---|---|---|---|---|");
for (const r of results) {
  const { gzipSync } = await import("node:zlib");
  const gz = gzipSync(readFileSync(path.join(r.dir, "index_bg.wasm")), { level: 9 }).length;
  const f = (xs) => median(xs).toFixed(1);
  console.log(`| ${r.name} | ${gz} | ${f(r.compile)} | ${f(r.ready)} | ${f(r.first)} | ${f(r.second)} |`);
}
