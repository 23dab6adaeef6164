// What the edge cache costs the isolate: workerd CPU per request for a cache
// miss (the origin says no-store: the lab's overhead path) and a cache hit
// (one URL, stored), for this build and a baseline build, side by side in
// one run. Closed loop against an instant origin; the four Workers run at
// once and rounds alternate between them, so drift in the machine's load hits
// each alike.
//
//   node lab/cache-cost.mjs --baseline <build dir of another commit> [--seconds 4] [--rounds 5]
//
// A baseline build: git worktree add /tmp/base <commit> && (cd /tmp/base &&
// ln -s "$PWD/node_modules" . && bash scripts/build.sh), then copy its build/
// into a folder inside this repository (workerd loads modules below the cwd).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cpuMs, spawnJson, workerdPids } from "./run.mjs";
import { startWorker } from "../tests/support/worker.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const log = (msg) => process.stderr.write(`[cache-cost ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

const { values } = parseArgs({
  options: {
    baseline: { type: "string" },
    seconds: { type: "string", default: "4" },
    rounds: { type: "string", default: "5" },
    concurrency: { type: "string", default: "32" },
  },
});
if (!values.baseline) throw new Error("--baseline <build dir> is required");
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);

const uncached = spawnJson(["lab/origin-sim.mjs", "--scenario", "instant"], { keepAlive: true });
const cached = spawnJson(["lab/origin-sim.mjs", "--scenario", "instant", "--cache-control", "public, max-age=3600"], {
  keepAlive: true,
});
const [{ origins: missOrigins }, { origins: hitOrigins }] = await Promise.all([uncached.firstLine, cached.firstLine]);
const builds = [
  { build: "baseline", dir: path.resolve(values.baseline) },
  { build: "this build", dir: path.join(root, "build") },
];
// Hits with coalescing off: 32 clients on one URL would otherwise mostly
// wait on each other's lookups (x-hedge: coalesced), a timer-driven path
// whose cost swamps the hit's own.
const targets = builds.flatMap(({ build, dir }) => [
  { build, kind: "miss", dir, origins: missOrigins, path: null, vars: {} },
  { build, kind: "hit", dir, origins: hitOrigins, path: "/static/img/hit", vars: { HEDGE_COALESCE: "false" } },
]);
const closedLoop = async (t, secs) => {
  const args = ["lab/loadgen.mjs", "--url", t.worker.url, "--closed", "--concurrency", values.concurrency, "--seconds", String(secs)];
  if (t.path) args.push("--path", t.path);
  return spawnJson(args).firstLine;
};
try {
  for (const t of targets) {
    const before = new Set(workerdPids());
    t.worker = await startWorker(
      { HEDGE_ORIGINS: t.origins, ...t.vars },
      { cache: true, scriptPath: path.join(t.dir, "index.js") },
    );
    t.pids = workerdPids().filter((p) => !before.has(p));
    Object.assign(t, { cpuMs: 0, requests: 0, rps: [], xHedge: {} });
  }
  for (const t of targets) await closedLoop(t, 3); // warm-up: V8 tiers up, the hit URL is stored
  for (let round = 1; round <= rounds; round++) {
    for (const t of targets) {
      const cpuBefore = cpuMs(t.pids);
      const r = await closedLoop(t, seconds);
      t.cpuMs += cpuMs(t.pids) - cpuBefore;
      t.requests += r.ok + r.errors;
      t.rps.push(r.ok / seconds);
      for (const [k, n] of Object.entries(r.xHedge)) t.xHedge[k] = (t.xHedge[k] ?? 0) + n;
      log(`round ${round}/${rounds}: ${t.build}, ${t.kind}: ${(r.ok / seconds).toFixed(0)} rps`);
    }
  }
} finally {
  for (const t of targets) if (t.worker) await t.worker.dispose();
  for (const o of [uncached, cached]) {
    o.child.stdin.end();
    o.child.kill();
  }
}
const lines = [
  `Closed loop, ${values.concurrency} connections, ${rounds} alternating rounds of ${seconds} s; workerd CPU (user + system) per request.`,
  "",
  "| build | path | workerd CPU us/request | requests/s (median round) | x-hedge |",
  "|---|---|---|---|---|",
];
const usPerRequest = (t) => (t.cpuMs * 1000) / t.requests;
for (const t of targets) {
  const median = [...t.rps].sort((a, b) => a - b)[Math.floor(t.rps.length / 2)];
  const via = Object.entries(t.xHedge)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ");
  lines.push(`| ${t.build} | ${t.kind} | ${usPerRequest(t).toFixed(0)} | ${median.toFixed(0)} | ${via} |`);
}
lines.push("");
for (const kind of ["miss", "hit"]) {
  const [base, mine] = ["baseline", "this build"].map((b) => targets.find((t) => t.build === b && t.kind === kind));
  lines.push(`${kind}: this build / baseline CPU per request = ${(usPerRequest(mine) / usPerRequest(base)).toFixed(3)}`);
}
process.stdout.write(lines.join("\n") + "\n");
