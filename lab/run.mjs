// The tail-latency lab: simulated origins, the built Worker in workerd, an
// open-loop load, and a side-by-side report of every configuration on the
// same scenario and load, in one run.
//
//   node lab/run.mjs [--scenario heavy-tail|gc-pause|bimodal-cache|slow-origin|fast-503|cliff|rare-stalls|recovery|busy-isolate|fast-503-both|shedding-tail|all|none]
//                    [--rate 200 (busy-isolate: 650)] [--seconds 15] [--warmup 3] [--seed 1] [--out lab-results]
//                    [--overhead] [--overhead-seconds 4] [--overhead-rounds 5] [--overhead-baseline [LABEL=]DIR,...] [--health-off]
//                    [--configs "hedging off,fixed-quantile,default,unguarded,JS pass-through,workers-rs"]
//                    [--pop] [--pop-rate 50] [--pop-isolates 8] [--pop-seconds 2]
//                    [--budgets 4,8,16 (the default at these HEDGE_BUDGET_PERCENT too)]
//                    [--requests (every request of each Worker configuration, with its
//                     Server-Timing, to OUT/requests-SCENARIO.jsonl: what the report's five
//                     slowest cannot show, such as the requests around p99)]
//
// The default configuration's stats page (with its latency, what the advisor
// reads) is saved as OUT/stats-SCENARIO.json.
import { execFileSync, spawn } from "node:child_process";
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Miniflare } from "../tests/support/miniflare.mjs";
import { Histogram } from "./histogram.mjs";
import { oracleBound } from "./oracle.mjs";
import { boundPointText, replayRun } from "./hindsight.mjs";
import { markdownTable, percentileSvg } from "./report.mjs";
import { SLOWEST_SHARE } from "./loadgen.mjs";
import { originModel, rateOf, scenario, spellOf, SCENARIO_NAMES } from "./scenarios.mjs";
import { secondsOf, spellMarkdown } from "./spell.mjs";
import { startWorker } from "../tests/support/worker.mjs";
import { popMarkdown, runColdIsolates } from "./pop-lab.mjs";
import { summaryMarkdown } from "./summary.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The configurations compared, in report order. `vars: null` means no Worker. */
// The baselines run the previous policy (first-in-order primary), so each is
// what it was before the tail-aware policy; the default comes last.
const PREVIOUS = { HEDGE_POLICY: "fixed-quantile" };
export const DEFAULT_CONFIGURATION = "worker, tail-aware (default)";
export const CONFIGURATIONS = [
  { name: "direct to origin", vars: null },
  { name: "worker, hedging off", vars: { HEDGE_MODE: "off", ...PREVIOUS } },
  { name: "worker, 1 s timeout + 1 retry", vars: { HEDGE_MODE: "retry", HEDGE_TUNING: { retry_timeout_ms: "1000" }, ...PREVIOUS } },
  { name: "worker, static 10 ms hedge", vars: { HEDGE_MODE: "static", HEDGE_STATIC_DELAY_MS: "10", ...PREVIOUS } },
  { name: "worker, fixed-quantile p95 (previous default)", vars: PREVIOUS },
  { name: DEFAULT_CONFIGURATION, vars: {} },
];

/** Bare pass-through Workers, picked by name with --configs (not in the default list). */
export const PASS_THROUGHS = [
  { name: "minimal JS pass-through worker", start: (origins) => startJsPassthrough(origins[0].url) },
  { name: "minimal workers-rs pass-through", start: (origins) => startRustPassthrough(origins[0].url) },
];

/**
 * The default as it was before this round's guards (no isolate-busy rule, no
 * cutting of hedges that do not pay, no third attempt), picked with
 * --configs "unguarded" to show in the same run what the guards change.
 */
export const UNGUARDED = {
  name: "worker, tail-aware unguarded (before the isolate guards)",
  vars: { HEDGE_TUNING: { isolate_busy_lag_ms: "0", cut_unpaid: "false", third_attempt: "false" } },
};

/** With --health-off: the adaptive hedge with origin health and the 5xx-adaptive budget disabled. */
export const HEALTH_OFF = {
  name: "worker, adaptive, health off",
  vars: {
    HEDGE_TUNING: { health_consecutive_failures: "1000", health_failure_rate: "1", "5xx_reduce_rate": "1", "5xx_stop_rate": "1" },
  },
};

/** `{reason: count}` as "count reason, ..." with the most common first. */
const whyText = (tally) =>
  Object.entries(tally)
    .sort((a, b) => b[1] - a[1])
    .map(([why, n]) => `${n} ${why}`)
    .join(", ") || "-";

const log = (msg) => process.stderr.write(`[lab ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);

export function spawnJson(args, { keepAlive = false } = {}) {
  const child = spawn(process.execPath, args, { cwd: root, stdio: ["pipe", "pipe", "inherit"] });
  const firstLine = new Promise((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)));
    });
    child.on("exit", (code) => reject(new Error(`${args[0]} exited with ${code} before answering`)));
  });
  if (!keepAlive) child.stdin.end();
  return { child, firstLine };
}

/** The bearer token the lab's Workers serve their stats page with. */
const STATS_TOKEN = "lab-stats-token-not-secret";

/**
 * What the Worker says of itself after a run (its stats page): its event
 * loop's lag, hedges its guards left out, third attempts.
 */
async function workerView(url) {
  try {
    const res = await fetch(`${url}/__hedge/stats`, { headers: { authorization: `Bearer ${STATS_TOKEN}` } });
    if (!res.ok) return null;
    const stats = await res.json();
    const leftOut = (stats.origins ?? []).reduce(
      (n, o) => n + Object.values(o.hedge_payoff ?? {}).reduce((m, c) => m + (c.left_out ?? 0), 0),
      0,
    );
    const i = stats.isolate ?? {};
    return {
      lagMs: i.lag_ms,
      lagMaxMs: i.lag_max_ms,
      lagSamples: i.lag_samples,
      skippedBusy: i.hedges_skipped_busy,
      skippedNotPaying: leftOut,
      thirdAttempts: i.third_attempts,
    };
  } catch {
    return null;
  }
}

/** The Worker's whole stats page, as `npm run advise -- --from FILE` reads it. */
async function saveStats(url, file) {
  const res = await fetch(`${url}/__hedge/stats`, { headers: { authorization: `Bearer ${STATS_TOKEN}` } });
  if (!res.ok) throw new Error(`stats page: ${res.status}`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, await res.text());
}

/** The default configuration at each of `list` (comma-separated HEDGE_BUDGET_PERCENT). */
export function budgetConfigurations(list) {
  return (list ? list.split(",") : []).map((b) => {
    if (!(Number(b) > 0 && Number(b) <= 100)) throw new Error(`--budgets: ${b} is not a percentage in (0, 100]`);
    return { name: `worker, tail-aware at ${Number(b)}% budget`, vars: { HEDGE_BUDGET_PERCENT: String(Number(b)) } };
  });
}

export function workerViewText(v) {
  return `loop lag ${v.lagMs?.toFixed(2)} ms (max ${v.lagMaxMs?.toFixed(1)}, ${v.lagSamples} timers); hedges left out: ${v.skippedBusy} isolate-busy, ${v.skippedNotPaying} not-paying; ${v.thirdAttempts} third attempts`;
}

async function originStats(origins) {
  return Promise.all(origins.map((o) => fetch(`${o.url}/__stats`).then((r) => r.json())));
}
async function originLogs(origins) {
  return Promise.all(origins.map((o) => fetch(`${o.url}/__log`).then((r) => r.json())));
}
async function resetOrigins(origins) {
  await Promise.all(origins.map((o) => fetch(`${o.url}/__reset`, { method: "POST" }).then((r) => r.text())));
}

async function load(url, rate, seconds) {
  const { firstLine } = spawnJson(["lab/loadgen.mjs", "--url", url, "--rate", String(rate), "--seconds", String(seconds)]);
  return firstLine;
}

function summarize(name, result, stats) {
  const h = Histogram.fromJSON(result.histogram);
  const sum = (k) => stats.reduce((a, s) => a + s[k], 0);
  const received = sum("received");
  const hedgeWins = result.xHedge.hedge ?? 0;
  const primaryWins = result.xHedge.primary ?? 0;
  return {
    name,
    requests: result.sent,
    p50: h.percentile(50),
    p90: h.percentile(90),
    p95: h.percentile(95),
    p99: h.percentile(99),
    p999: h.percentile(99.9),
    extraPct: ((received - result.sent) / result.sent) * 100,
    hedgeRatePct: (sum("hedgeMarked") / result.sent) * 100,
    hedgeWinPct: hedgeWins + primaryWins > 0 ? (hedgeWins / (hedgeWins + primaryWins)) * 100 : null,
    abortedAtOrigin: sum("aborted"),
    hedgesToEachOrigin: stats.map((s) => s.hedgeMarked),
    originWorkMs: sum("workMs"),
    wastedWorkPct: sum("workMs") > 0 ? (sum("abortedWorkMs") / sum("workMs")) * 100 : 0,
    errors: result.errors,
    timeouts: result.timeouts,
    statuses: result.statuses,
    maxSendLagMs: result.maxLagMs,
    slowestWhy: result.slowestWhy ?? {},
    slowest: result.slowest ?? [],
    // Second by second (for scenarios with a spell): the load generator's
    // counts and the first origin's primaries.
    seconds: secondsOf(result.bySecond ?? [], stats[0]?.primariesBySecond ?? []),
    histogram: h,
  };
}

/**
 * Appends one configuration's requests to OUT/requests-SCENARIO.jsonl (the
 * file started afresh by the scenario's first configuration), one JSON line
 * each: {config, n, ms, status, serverTiming}, in the order they were sent.
 */
function saveRequests(dir, scenarioName, config, perRequest, first) {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `requests-${scenarioName}.jsonl`);
  const lines = [...perRequest]
    .sort((a, b) => a[0] - b[0])
    .map(([n, ms, status, , serverTiming]) => JSON.stringify({ config, n, ms, status, serverTiming }));
  const text = lines.join("\n") + "\n";
  if (first) writeFileSync(file, text);
  else appendFileSync(file, text);
}

/** Runs every configuration on one scenario; returns the report object. */
export async function runScenario({ scenarioName, rate, seconds, warmup, seed, configurations = CONFIGURATIONS, statsOut = null, requestsOut = null }) {
  const spec = scenario(scenarioName);
  log(`scenario ${scenarioName}: ${spec.description}`);
  const sim = spawnJson(["lab/origin-sim.mjs", "--scenario", scenarioName, "--seed", String(seed)], { keepAlive: true });
  const { origins } = await sim.firstLine;
  const rows = [];
  let defaultRun = null; // what the hindsight bound replays
  let requestsSaved = false; // OUT/requests-SCENARIO.jsonl started for this run
  try {
    for (const [i, config] of configurations.entries()) {
      log(`(${i + 1}/${configurations.length}) ${config.name}: ${warmup} s warm-up + ${seconds} s at ${rate} rps`);
      let worker = null;
      let url = origins[0].url;
      if (config.vars) {
        worker = await startWorker({ HEDGE_ORIGINS: origins, HEDGE_STATS_TOKEN: STATS_TOKEN, ...config.vars });
        url = worker.url;
      } else if (config.start) {
        worker = await config.start(origins);
        url = worker.url;
      }
      try {
        if (warmup > 0) await load(url, rate, warmup);
        await resetOrigins(origins);
        const result = await load(url, rate, seconds);
        const stats = await originStats(origins);
        const row = summarize(config.name, result, stats);
        if (config.name === DEFAULT_CONFIGURATION) {
          defaultRun = { perRequest: result.perRequest, logs: await originLogs(origins) };
          if (statsOut) await saveStats(url, path.join(statsOut, `stats-${scenarioName}.json`));
        }
        if (config.vars) row.worker = await workerView(url);
        if (requestsOut && config.vars) {
          saveRequests(requestsOut, scenarioName, config.name, result.perRequest, !requestsSaved);
          requestsSaved = true;
        }
        rows.push(row);
        log(`    p50 ${row.p50?.toFixed(1)} ms, p99 ${row.p99?.toFixed(1)} ms, p99.9 ${row.p999?.toFixed(1)} ms, extra ${row.extraPct.toFixed(1)}%, errors ${row.errors}; slowest: ${whyText(row.slowestWhy)}`);
        if (row.worker) log(`    the Worker's own view: ${workerViewText(row.worker)}`);
      } finally {
        if (worker) await worker.dispose();
      }
    }
  } finally {
    sim.child.stdin.end();
    sim.child.kill();
  }
  const adaptive = rows.find((r) => r.name === DEFAULT_CONFIGURATION);
  const passthrough = rows.find((r) => r.name === "worker, hedging off");
  let oracle = null;
  const spell = spellOf(scenarioName);
  // A spell changes the latency model mid-run: no one distribution to bound.
  if (adaptive && adaptive.extraPct > 0 && !spell) {
    // The oracle's legs come from the primary's own latency model (iid draws).
    const model = originModel(scenarioName, 0, `${seed}:oracle`);
    const samples = Array.from({ length: 200_000 }, (_, k) => model.plan(Date.now() + k).delayMs);
    oracle = { extraLoadPct: adaptive.extraPct, ...oracleBound(samples, adaptive.extraPct / 100) };
  }
  // The best fixed (d, q) in hindsight for the default's own run, at its own
  // extra load (every leg beyond the first: hedges, retries, third attempts).
  let bound = null;
  if (adaptive && defaultRun) {
    bound = replayRun({ scenarioName, seed, ...defaultRun }).bound(Math.max(0, adaptive.extraPct) / 100);
    const lag = bound?.launchLagMs;
    const lagText = lag?.hedges ? `; its hedges leave as late as the run's: ${lag.p50.toFixed(1)} / ${lag.p90.toFixed(1)} / ${lag.p99.toFixed(1)} ms after their delay (p50 / p90 / p99 of ${lag.hedges})` : "";
    if (bound) log(`    hindsight bound at ${bound.extraPct.toFixed(1)}%: p99 ${boundPointText(bound.p99)}, p99.9 ${boundPointText(bound.p999)}${lagText}`);
  }
  const comparison =
    adaptive && passthrough
      ? {
          p99ReductionPct: (1 - adaptive.p99 / passthrough.p99) * 100,
          p999ReductionPct: (1 - adaptive.p999 / passthrough.p999) * 100,
          p50DeltaMs: adaptive.p50 - passthrough.p50,
          // Aborting a slow primary can save more origin work than the hedge costs.
          originWorkVsPassthroughPct: (adaptive.originWorkMs / passthrough.originWorkMs - 1) * 100,
          p99VsOraclePct: oracle ? (adaptive.p99 / oracle.p99 - 1) * 100 : null,
          p999VsOraclePct: oracle ? (adaptive.p999 / oracle.p999 - 1) * 100 : null,
          p99ToBound: bound ? adaptive.p99 / bound.p99.latencyMs : null,
          p999ToBound: bound ? adaptive.p999 / bound.p999.latencyMs : null,
        }
      : null;
  return { scenario: scenarioName, description: spec.description, rate, seconds, warmup, seed, rows, oracle, bound, comparison, spell };
}

/**
 * Closed-loop maximum throughput of four Workers on the same workerd build
 * and origin (a JavaScript and a workers-rs pass-through, hedgehog-edge with
 * hedging off and by default). All run at once; rounds alternate between them so drift
 * in the machine's load hits each alike, and the median round is reported.
 */
export async function runOverhead({ seconds, rounds = 3, concurrency = 32, warmup = 3, baseline = null }) {
  const sim = spawnJson(["lab/origin-sim.mjs", "--scenario", "instant"], { keepAlive: true });
  const { origins } = await sim.firstLine;
  const targets = [
    { name: "minimal JS pass-through worker", start: () => startJsPassthrough(origins[0].url) },
    { name: "minimal workers-rs pass-through", start: () => startRustPassthrough(origins[0].url) },
    { name: "hedgehog-edge, hedging off", start: () => startWorker({ HEDGE_ORIGINS: origins, HEDGE_MODE: "off" }) },
    { name: "hedgehog-edge, default (tail-aware) hedging", start: () => startWorker({ HEDGE_ORIGINS: origins }) },
    // Hedging off through a route policy must cost what HEDGE_MODE=off costs.
    {
      name: "hedgehog-edge, hedging off by a route policy (HEDGE_ROUTES)",
      start: () => startWorker({ HEDGE_ORIGINS: origins, HEDGE_ROUTES: JSON.stringify([{ prefix: "/", mode: "off" }]) }),
    },
    // Every request hedged at once (and the loser aborted): its CPU above
    // "hedging off" is what a leg costs the isolate (the simulator's isolate
    // model is calibrated on it).
    {
      name: "hedgehog-edge, every request hedged (static 0 ms, budget 100%)",
      start: () =>
        startWorker({
          HEDGE_ORIGINS: origins,
          HEDGE_MODE: "static",
          HEDGE_STATIC_DELAY_MS: "0",
          HEDGE_BUDGET_PERCENT: "100",
          HEDGE_BUDGET_FLOOR_PER_SEC: "10000",
          HEDGE_TUNING: { budget_max_tokens: "1000000", "5xx_reduce_rate": "1", "5xx_stop_rate": "1" },
        }),
    },
  ];
  // Other builds (of an older commit, say) through the same path in the same
  // run: "label=dir,label=dir" (a bare dir is labelled "baseline build").
  for (const spec of (baseline ?? "").split(",").filter(Boolean)) {
    const [label, dir] = spec.includes("=") ? spec.split("=") : ["baseline build", spec];
    const scriptPath = path.join(path.resolve(dir), "index.js");
    targets.push(
      { name: `${label}, hedging off`, start: () => startWorker({ HEDGE_ORIGINS: origins, HEDGE_MODE: "off" }, { scriptPath }) },
      { name: `${label}, default hedging`, start: () => startWorker({ HEDGE_ORIGINS: origins }, { scriptPath }) },
    );
  }
  const closedLoop = async (url, secs) => {
    const { firstLine } = spawnJson(["lab/loadgen.mjs", "--url", url, "--closed", "--concurrency", String(concurrency), "--seconds", String(secs)]);
    return firstLine;
  };
  const results = targets.map((t) => ({ name: t.name, rounds: [], errors: 0, cpuMs: 0, requests: 0 }));
  try {
    for (const t of targets) {
      const before = new Set(workerdPids());
      t.worker = await t.start();
      t.pids = workerdPids().filter((p) => !before.has(p));
    }
    // Warm-up: V8 tiers wasm up from its baseline compiler after a while.
    for (const t of targets) await closedLoop(t.worker.url, warmup);
    for (let round = 1; round <= rounds; round++) {
      for (const [i, t] of targets.entries()) {
        const cpuBefore = cpuMs(t.pids);
        const r = await closedLoop(t.worker.url, seconds);
        results[i].cpuMs += cpuMs(t.pids) - cpuBefore;
        results[i].requests += r.ok + r.errors;
        const h = Histogram.fromJSON(r.histogram);
        results[i].rounds.push({ rps: r.ok / seconds, p50: h.percentile(50), p99: h.percentile(99) });
        results[i].errors += r.errors;
        log(`overhead round ${round}/${rounds}: ${t.name}: ${(r.ok / seconds).toFixed(0)} rps`);
      }
    }
  } finally {
    for (const t of targets) if (t.worker) await t.worker.dispose();
    sim.child.stdin.end();
    sim.child.kill();
  }
  for (const r of results) {
    const sorted = [...r.rounds].sort((a, b) => a.rps - b.rps);
    const median = sorted[Math.floor(sorted.length / 2)];
    Object.assign(r, { rps: median.rps, p50: median.p50, p99: median.p99 });
    r.workerdCpuUsPerRequest = r.requests > 0 ? (r.cpuMs * 1000) / r.requests : null;
  }
  const js = results[0];
  for (const r of results) {
    r.vsJsPct = (r.rps / js.rps) * 100;
    r.cpuVsJs = r.workerdCpuUsPerRequest && js.workerdCpuUsPerRequest ? r.workerdCpuUsPerRequest / js.workerdCpuUsPerRequest : null;
  }
  return { seconds, rounds, concurrency, results };
}

/** PIDs of running workerd processes (Linux). */
export function workerdPids() {
  try {
    return execFileSync("pgrep", ["-x", "workerd"]).toString().trim().split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** User + system CPU time of these processes, in milliseconds (Linux /proc). */
export function cpuMs(pids) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process is gone; it used nothing more.
    }
  }
  return ticks * 10; // USER_HZ is 100 on Linux
}

/** The minimal workers-rs pass-through (lab/rust-passthrough), built on first use. */
async function startRustPassthrough(originUrl) {
  execFileSync("bash", [path.join(root, "scripts/build-rust-passthrough.sh")], { stdio: "inherit" });
  const mf = new Miniflare({
    scriptPath: path.join(root, "lab/rust-passthrough/build/index.js"),
    modules: true,
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: "2026-07-01",
    bindings: { ORIGIN: originUrl },
  });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { url, dispose: () => mf.dispose() };
}

async function startJsPassthrough(originUrl) {
  const mf = new Miniflare({
    modules: true,
    compatibilityDate: "2026-07-01",
    bindings: { ORIGIN: originUrl },
    script: `export default { async fetch(req, env) {
      const u = new URL(req.url);
      return fetch(env.ORIGIN + u.pathname + u.search, { method: req.method, headers: req.headers });
    } }`,
  });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  return { url, dispose: () => mf.dispose() };
}

/** What the report's columns and words mean, printed once above the tables. */
export const REPORT_LEGEND = [
  "How to read this report. Latencies are what the load generator saw, in ms, over every request of the run (p99.9: the slowest 1 in 1,000).",
  "- extra origin req %: origin requests beyond one per client request (hedges, retries), as a share of client requests.",
  "- hedge rate %: requests that got a hedge; hedge wins %: of the races where a hedge went out, the share the hedge's answer won.",
  "- aborted at origin: legs the Worker cut short that the origin saw closed; wasted origin work %: origin time spent on those.",
  "- errors: client requests answered 5xx or not at all.",
  "- The Worker's words for its slowest responses come from its Server-Timing header: hedge:delay / hedge:stall / hedge:failure (a hedge went out, and why); skip:X (no hedge, because X: off = hedging off, budget = the hedge budget was empty, isolate-busy, not-paying, no-target, primary-erroring); unhedged, before the delay (it was slow but answered before its hedge delay).",
  "- Oracle bound: the best p99 any policy could reach with the same extra load, by hedging exactly the requests that would be slowest (computed from the origins' latency model; it leaves out the Worker's own time).",
  "- Hindsight bound: the best fixed hedge delay d, and probability q of hedging at it, chosen after the fact for the default's own run (same arrivals, primaries, origin draws and Worker time) at its extra load (lab/hindsight.mjs; docs/lab.md). default ÷ bound near 1: as good as a delay policy can be on that run.",
].join("\n");

function writeReports(out, reports, overhead, pop = null) {
  mkdirSync(out, { recursive: true });
  const md = [REPORT_LEGEND, ""];
  for (const r of reports) {
    md.push(`## ${r.scenario}: ${r.description}`, "", `${r.rate} rps for ${r.seconds} s per configuration (after ${r.warmup} s warm-up), seed ${r.seed}.`, "");
    md.push(markdownTable(r.rows), "");
    md.push(
      `What the Worker said (Server-Timing) about its slowest ${(SLOWEST_SHARE * 100).toFixed(1)}% of responses: ` +
        r.rows.filter((row) => row.name.startsWith("worker, ")).map((row) => `${row.name.slice(8)}: ${whyText(row.slowestWhy)}`).join("; ") +
        ".",
      "",
    );
    const views = r.rows.filter((row) => row.worker);
    if (views.length) {
      md.push(`The Worker's own view after each run (its stats page): ${views.map((row) => `${row.name.slice(8)}: ${workerViewText(row.worker)}`).join("; ")}.`, "");
    }
    if (r.spell) {
      const workers = r.rows.filter((row) => row.name.startsWith("worker, ") && row.name !== "worker, hedging off");
      md.push(spellMarkdown(workers, Math.round(r.spell.fromMs / 1000), Math.round(r.spell.untilMs / 1000)), "");
    }
    if (r.oracle) {
      md.push(
        `Oracle bound at the default configuration's measured extra load (${r.oracle.extraLoadPct.toFixed(1)}%, hedge at ${r.oracle.delayMs.toFixed(1)} ms): p99 ${r.oracle.p99.toFixed(1)} ms, p99.9 ${r.oracle.p999.toFixed(1)} ms.`,
      );
    }
    if (r.bound) {
      const a = r.rows.find((row) => row.name === DEFAULT_CONFIGURATION);
      md.push(
        `Hindsight bound for the default's own run at its extra load (${r.bound.extraPct.toFixed(1)}%; ${r.bound.replayed} of ${r.bound.requests} requests replayed, ${r.bound.mismatched} whose rebuilt draw differed from the origin's): p99 ${boundPointText(r.bound.p99)}, p99.9 ${boundPointText(r.bound.p999)}; the default is ${(a.p99 / r.bound.p99.latencyMs).toFixed(2)} / ${(a.p999 / r.bound.p999.latencyMs).toFixed(2)} of it.`,
      );
    }
    if (r.comparison) {
      const c = r.comparison;
      md.push(
        `Default vs hedging off: p99 ${c.p99ReductionPct.toFixed(1)}% lower, p99.9 ${c.p999ReductionPct.toFixed(1)}% lower, p50 ${c.p50DeltaMs >= 0 ? "+" : ""}${c.p50DeltaMs.toFixed(1)} ms` +
          (c.p99VsOraclePct !== null ? `; vs oracle: p99 ${fmtPct(c.p99VsOraclePct)}, p99.9 ${fmtPct(c.p999VsOraclePct)}` : "") +
          `; total origin work ${fmtPct(c.originWorkVsPassthroughPct)} vs hedging off.`,
      );
    }
    md.push("", `Plot: ${path.join(out, `${r.scenario}.svg`)}`, "");
    const svg = percentileSvg(
      r.rows.map((row) => ({ name: row.name, points: row.histogram.cdf() })),
      `${r.scenario}: latency by percentile, ${r.rate} rps`,
    );
    writeFileSync(path.join(out, `${r.scenario}.svg`), svg);
  }
  if (reports.length > 1) md.push("## Summary", "", summaryMarkdown(reports), "");
  if (overhead) {
    md.push(
      "## Overhead: closed-loop maximum throughput against an instant origin",
      "",
      `${overhead.concurrency} connections, median of ${overhead.rounds} alternating rounds of ${overhead.seconds} s each; load generator, origin and workerd share this machine.`,
      "",
    );
    md.push(
      "| worker | requests/s (median) | % of JS pass-through | every round, requests/s | workerd CPU us/request | CPU ÷ JS pass-through | p50 ms | p99 ms | errors |",
      "|---|---|---|---|---|---|---|---|---|",
    );
    for (const r of overhead.results) {
      md.push(
        `| ${r.name} | ${r.rps.toFixed(0)} | ${r.vsJsPct.toFixed(1)} | ${r.rounds.map((x) => x.rps.toFixed(0)).join(", ")} | ${r.workerdCpuUsPerRequest?.toFixed(0) ?? "-"} | ${r.cpuVsJs?.toFixed(2) ?? "-"} | ${r.p50?.toFixed(2)} | ${r.p99?.toFixed(2)} | ${r.errors} |`,
      );
    }
    md.push("");
  }
  if (pop) md.push(popMarkdown(pop));
  const text = md.join("\n");
  writeFileSync(path.join(out, "report.md"), text);
  const json = {
    reports: reports.map((r) => ({ ...r, rows: r.rows.map(({ histogram, ...rest }) => ({ ...rest, histogram: histogram.toJSON() })) })),
    overhead,
    pop,
  };
  writeFileSync(path.join(out, "report.json"), JSON.stringify(json, null, 2));
  return text;
}

/**
 * `--configs off,fixed,default`: a subset by short name (substring of the
 * configuration's name; "default" is the default policy). Empty: all.
 */
function pickConfigurations(configurations, list) {
  if (!list) return configurations;
  const all = [...configurations, ...PASS_THROUGHS, UNGUARDED];
  return list.split(",").map((want) => {
    const found = want === "default" ? all.find((c) => c.name === DEFAULT_CONFIGURATION) : all.find((c) => c.name.includes(want));
    if (!found) throw new Error(`--configs: no configuration matches "${want}"; names: ${all.map((c) => c.name).join("; ")}`);
    return found;
  });
}

const fmtPct = (v) => `${v >= 0 ? "+" : ""}${v.toFixed(1)}%`;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      scenario: { type: "string", default: "heavy-tail" },
      // Default: 200 rps, or the scenario's own (busy-isolate: 650).
      rate: { type: "string" },
      seconds: { type: "string", default: "15" },
      warmup: { type: "string", default: "3" },
      seed: { type: "string", default: "1" },
      out: { type: "string", default: "lab-results" },
      overhead: { type: "boolean", default: false },
      "overhead-seconds": { type: "string", default: "4" },
      "overhead-rounds": { type: "string", default: "5" },
      "overhead-baseline": { type: "string" },
      "health-off": { type: "boolean", default: false },
      configs: { type: "string", default: "" },
      pop: { type: "boolean", default: false },
      "pop-rate": { type: "string", default: "50" },
      "pop-isolates": { type: "string", default: "8" },
      "pop-seconds": { type: "string", default: "2" },
      budgets: { type: "string", default: "" },
      requests: { type: "boolean", default: false },
    },
  });
  const names = values.scenario === "all" ? SCENARIO_NAMES : values.scenario === "none" ? [] : values.scenario.split(",");
  const configurations = [
    ...pickConfigurations(values["health-off"] ? [...CONFIGURATIONS, HEALTH_OFF] : CONFIGURATIONS, values.configs),
    ...budgetConfigurations(values.budgets),
  ];
  const reports = [];
  for (const scenarioName of names) {
    reports.push(
      await runScenario({
        scenarioName,
        rate: rateOf(scenarioName, values.rate),
        seconds: Number(values.seconds),
        warmup: Number(values.warmup),
        seed: values.seed,
        configurations,
        statsOut: path.resolve(root, values.out),
        requestsOut: values.requests ? path.resolve(root, values.out) : null,
      }),
    );
  }
  const overhead = values.overhead ? await runOverhead({
        seconds: Number(values["overhead-seconds"]),
        rounds: Number(values["overhead-rounds"]),
        baseline: values["overhead-baseline"],
      }) : null;
  let pop = null;
  if (values.pop) {
    const sim = spawnJson(["lab/origin-sim.mjs", "--scenario", "heavy-tail", "--seed", values.seed], { keepAlive: true });
    try {
      const { origins } = await sim.firstLine;
      pop = await runColdIsolates({
        origins,
        load,
        log,
        rate: Number(values["pop-rate"]),
        warmSeconds: 10,
        coldSeconds: Number(values["pop-seconds"]),
        isolates: Number(values["pop-isolates"]),
        // 1,000 rps through workerd is beyond this 2-core machine (workerd runs out of
        // file descriptors as connections pile up); the push schedule at 1,000 rps is
        // covered by `cargo run -p hedgehog-core --example pop_figures`.
        pushRates: [100, 300],
        pushSecondsMax: 30,
      });
    } finally {
      sim.child.stdin.end();
      sim.child.kill();
    }
  }
  const text = writeReports(path.resolve(root, values.out), reports, overhead, pop);
  process.stdout.write("\n" + text + "\n");
  log(`report: ${path.join(values.out, "report.md")}, every figure: ${path.join(values.out, "report.json")}, plots: ${path.join(values.out, "*.svg")}`);
  process.exit(0);
}
