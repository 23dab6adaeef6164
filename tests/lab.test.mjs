// The lab's own logic: samplers against their definitions, the oracle against
// a closed form, the histogram, the load generator's intended-time accounting,
// and a short end-to-end lab run so the runner cannot rot.
import { test } from "node:test";
import assert from "node:assert/strict";
import { seededRandom } from "../lab/rng.mjs";
import { heavyTail, originModel, gcSchedule } from "../lab/scenarios.mjs";
import { oracleBound, quantile } from "../lab/oracle.mjs";
import { Histogram } from "../lab/histogram.mjs";
import { delayHedgeAt, runOpenLoop, tallySlowest, whyFromServerTiming } from "../lab/loadgen.mjs";
import { runScenario, CONFIGURATIONS, DEFAULT_CONFIGURATION } from "../lab/run.mjs";
import { backAfter, block, secondsOf } from "../lab/spell.mjs";
import { replayRun } from "../lab/hindsight.mjs";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/** Standard normal CDF (Abramowitz-Stegun 7.1.26, error < 1.5e-7). */
function phi(z) {
  const t = 1 / (1 + 0.3275911 * (Math.abs(z) / Math.SQRT2));
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-(z * z) / 2);
  return z >= 0 ? (1 + y) / 2 : (1 - y) / 2;
}

/** The heavy-tail scenario's CDF, from its definition. */
function heavyTailCdf(t) {
  const ln = (x) => (x <= 0 ? 0 : phi(Math.log(x / 40) / 0.35));
  return 0.98 * ln(t) + 0.02 * ln(t - 800);
}

function inverse(cdf, q) {
  let lo = 0;
  let hi = 10_000;
  for (let i = 0; i < 80; i++) {
    const mid = (lo + hi) / 2;
    if (cdf(mid) >= q) hi = mid;
    else lo = mid;
  }
  return hi;
}

test("heavy-tail sampler matches its definition at p50, p90, p97, p99.5", () => {
  const rng = seededRandom("sampler-test");
  const samples = Float64Array.from({ length: 400_000 }, () => heavyTail(rng)).sort();
  for (const q of [0.5, 0.9, 0.97, 0.995]) {
    const expected = inverse(heavyTailCdf, q);
    const got = quantile(samples, q);
    assert.ok(Math.abs(got - expected) / expected < 0.02, `q=${q}: ${got} vs ${expected}`);
  }
  const spikes = samples.filter((v) => v > 500).length / samples.length;
  assert.ok(Math.abs(spikes - 0.02) < 0.002, `spike fraction ${spikes}`);
});

test("fast-503 sheds 5% of the primary's requests; bimodal-cache misses 15%", () => {
  const shed = originModel("fast-503", 0, "t");
  let n503 = 0;
  for (let i = 0; i < 100_000; i++) if (shed.plan(0).status === 503) n503++;
  assert.ok(Math.abs(n503 / 100_000 - 0.05) < 0.003, `${n503}`);
  const cache = originModel("bimodal-cache", 0, "t");
  let misses = 0;
  for (let i = 0; i < 100_000; i++) if (cache.plan(0).delayMs > 50) misses++;
  assert.ok(Math.abs(misses / 100_000 - 0.15) < 0.005, `${misses}`);
});

test("a GC pause stretches every request in flight by its overlap", () => {
  const gc = gcSchedule({ meanIntervalMs: 1000, minMs: 200, maxMs: 200 }, seededRandom("gc"));
  const t0 = Date.now();
  gc.stretch(t0, 0); // build the schedule
  const [start, end] = gc.pauses[0];
  // Two requests both running across the first pause are both delayed by it.
  const a = gc.stretch(t0 + start - 10, 20);
  const b = gc.stretch(t0 + start - 5, 10);
  assert.ok(Math.abs(a - (20 + (end - start))) < 1e-6, `${a}`);
  assert.ok(Math.abs(b - (10 + (end - start))) < 1e-6, `${b}`);
  // A request finishing before the pause is untouched.
  assert.equal(gc.stretch(t0 + start - 50, 20), 20);
});

test("oracle bound matches the closed form for exponential legs", () => {
  const rate = 1 / 50; // mean 50 ms
  const rng = seededRandom("oracle");
  const samples = Array.from({ length: 400_000 }, () => rng.exponential(50));
  const b = 0.05;
  const got = oracleBound(samples, b);
  const d = -Math.log(b) / rate; // F^-1(1 - b)
  assert.ok(Math.abs(got.delayMs - d) / d < 0.02, `d ${got.delayMs} vs ${d}`);
  // P(T > t) = e^{-rate t} e^{-rate (t - d)} = 1 - q  =>  t = (d - ln(1 - q) / rate) / 2
  for (const [key, q] of [["p99", 0.99], ["p999", 0.999]]) {
    const expected = (d - Math.log(1 - q) / rate) / 2;
    assert.ok(Math.abs(got[key] - expected) / expected < 0.02, `${key}: ${got[key]} vs ${expected}`);
  }
});

test("histogram percentiles are within 0.1% of exact", () => {
  const rng = seededRandom("hist");
  const h = new Histogram();
  const values = Array.from({ length: 50_000 }, () => rng.lognormal(40, 1));
  for (const v of values) h.record(v);
  values.sort((x, y) => x - y);
  for (const p of [50, 90, 99, 99.9]) {
    const exact = quantile(values, p / 100);
    assert.ok(Math.abs(h.percentile(p) - exact) / exact < 0.001 + 0.002 / exact, `p${p}: ${h.percentile(p)} vs ${exact}`);
  }
});

test("load generator: latency counts from the intended send time, not the actual one", async () => {
  // The first send blocks the event loop for 300 ms. Requests meant to go out
  // during that time go late; an open-loop generator must charge them the wait.
  let first = true;
  const send = async () => {
    if (first) {
      first = false;
      const until = performance.now() + 300;
      while (performance.now() < until);
    }
    return { status: 200 };
  };
  const result = await runOpenLoop({ url: "unused", rate: 100, seconds: 1, send });
  assert.equal(result.sent, 100);
  const h = Histogram.fromJSON(result.histogram);
  assert.equal(h.total, 100);
  // Requests intended at 10, 20, ..., 290 ms were sent at about 300 ms: the
  // slowest 29% waited 10 ms or more. Measured from the actual send, all ~0.
  assert.ok(h.percentile(100) >= 280, `max ${h.percentile(100)}`);
  assert.ok(h.percentile(75) >= 5, `p75 ${h.percentile(75)} should include the stalled requests`);
});

test("the slowest responses are tallied by what Server-Timing says", () => {
  assert.equal(whyFromServerTiming(undefined), "none");
  assert.equal(whyFromServerTiming('origin;dur=3.0;desc="a", hedge-delay;dur=80.0;desc="benefit", hedge;desc="stall", total;dur=90.0'), "hedge:stall");
  assert.equal(whyFromServerTiming('hedge-delay;dur=80.0;desc="quantile", hedge-skip;desc="budget", total;dur=900.0'), "skip:budget");
  assert.equal(whyFromServerTiming('origin;dur=3.0;desc="a", hedge-delay;dur=80.0;desc="quantile", total;dur=40.0'), "unhedged, before the delay");
  const answered = [[10, "a"], [900, "skip:budget"], [20, "a"], [850, "hedge:delay"], [30, "a"]];
  assert.deepEqual(tallySlowest(answered, 0.4), { "skip:budget": 1, "hedge:delay": 1 });
  assert.deepEqual(tallySlowest(answered, 0.001), { "skip:budget": 1 });
  // The planned delay of a hedge its delay sent; none for a stall's hedge.
  assert.equal(delayHedgeAt('origin;dur=3.0;desc="b", hedge-delay;dur=71.5;desc="benefit", hedge;desc="delay", total;dur=90.0'), 71.5);
  assert.equal(delayHedgeAt('origin;dur=3.0;desc="a", hedge-delay;dur=80.0;desc="benefit", hedge;desc="stall", total;dur=90.0'), null);
  assert.equal(delayHedgeAt(undefined), null);
});

test("a spell's report: blocks of seconds and how soon a figure came back", () => {
  // 40 s, 10 requests a second; one hedged a second except in the spell
  // (10-19 s, when origin 0 gets no primaries) and the 3 s after it.
  const bySecond = Array.from({ length: 40 }, (_, s) => ({
    requests: 10,
    hedged: s >= 10 && s < 23 ? 0 : 1,
    latencies: Array.from({ length: 10 }, (_, k) => (s >= 10 && s < 20 ? 500 : 40) + k),
  }));
  const primaries = [];
  for (let s = 0; s < 40; s++) if (s < 10 || s >= 20) primaries[s] = 5;
  const seconds = secondsOf(bySecond, primaries);
  const spell = block(seconds, 10, 15);
  assert.equal(spell.requests, 50);
  assert.equal(spell.hedgedPct, 0);
  assert.equal(spell.primary0Pct, 0);
  assert.equal(spell.p99, 509);
  assert.equal(block(seconds, 0, 5).primary0Pct, 50);
  // Hedging: 10% before; [23, 28) is the first 5 s block at 9% or more.
  assert.equal(backAfter(seconds, 10, 20, (b) => b.hedgedPct, { share: 0.9 }), 3);
  assert.equal(backAfter(seconds, 10, 20, (b) => b.primary0Pct), 0);
  assert.equal(backAfter(seconds, 10, 20, (b) => b.hedgedPct, { share: 2 }), null);
});

test("a short lab run: pass-through and the default side by side", async () => {
  const configurations = CONFIGURATIONS.filter((c) => c.name === "worker, hedging off" || c.name === DEFAULT_CONFIGURATION);
  const requestsOut = mkdtempSync(path.join(tmpdir(), "lab-requests-"));
  const report = await runScenario({ scenarioName: "heavy-tail", rate: 100, seconds: 2, warmup: 1, seed: "ci", configurations, requestsOut });
  assert.equal(report.rows.length, 2);
  // --requests: every request of each configuration, with what the Worker said.
  const saved = readFileSync(path.join(requestsOut, "requests-heavy-tail.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  rmSync(requestsOut, { recursive: true });
  assert.equal(saved.length, 400);
  const ofDefault = saved.filter((r) => r.config === DEFAULT_CONFIGURATION);
  assert.deepEqual(ofDefault.map((r) => r.n), [...Array(200).keys()]);
  assert.ok(ofDefault.every((r) => r.status === 200 && /hedge-delay;dur=/.test(r.serverTiming)), JSON.stringify(ofDefault[0]));
  for (const row of report.rows) {
    assert.equal(row.requests, 200);
    assert.equal(row.errors, 0);
    assert.ok(row.p50 > 20 && row.p50 < 200, `${row.name} p50 ${row.p50}`);
  }
  const [off, adaptive] = report.rows;
  assert.equal(off.extraPct, 0);
  assert.equal(off.hedgeRatePct, 0);
  // Budget: 12% of 200 plus the floor (1/s over ~3 s) and the bank (10).
  assert.ok(adaptive.hedgeRatePct <= 12 + (10 + 3) / 2, `hedge rate ${adaptive.hedgeRatePct}`);
  assert.ok(report.comparison !== null);
});

/** The simulator's command, built (release) if it is not current; and the repository's root. */
function builtSimulate() {
  const root = path.resolve(import.meta.dirname, "..");
  execFileSync("cargo", ["build", "--quiet", "--release", "-p", "hedgehog-core", "--example", "simulate"], { cwd: root });
  return { root, simulate: path.join(root, "target/release/examples/simulate") };
}

test("the bound check fails when a scenario's default moved away from the bound", () => {
  // The test command's regression check, run against the committed figures
  // and against a copy where one ratio was better than the code now gives.
  const { root, simulate } = builtSimulate();
  const committed = path.join(root, "core/tests/bound-ratios.json");
  // One scratch directory for the reports and the doctored copy, removed after.
  const dir = mkdtempSync(path.join(tmpdir(), "bound-"));
  const run = (file) =>
    spawnSync(simulate, ["--scenario", "all", "--seconds", "30", "--routes", "4", "--bound-check", file, "--out", dir], {
      encoding: "utf8",
    });
  try {
    const ok = run(committed);
    assert.equal(ok.status, 0, ok.stderr);
    const doctored = JSON.parse(readFileSync(committed, "utf8"));
    const cliff = doctored.scenarios.cliff;
    cliff.p99_to_bound = cliff.p99_to_bound / 1.05;
    const file = path.join(dir, "ratios.json");
    writeFileSync(file, JSON.stringify(doctored));
    const worse = run(file);
    assert.equal(worse.status, 1, worse.stderr);
    assert.match(worse.stderr, /WORSE than committed: cliff: p99 ÷ bound/);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test("the static sweep sets fixed-delay runs beside the bound", () => {
  // `simulate --static-sweep`: the default in static mode on the same
  // arrivals and draws. On heavy-tail (no stalls, no queues, origins
  // alike) a fixed delay's run meets the bound replayed from the default's
  // run within a few percent, and never beats the bound replayed from its
  // own (docs/lab.md, "What the bound is conditioned on").
  const { simulate } = builtSimulate();
  const out = mkdtempSync(path.join(tmpdir(), "sweep-"));
  const args = ["--scenario", "heavy-tail", "--seconds", "20", "--routes", "4", "--out", out];
  const sweep = spawnSync(simulate, [...args, "--static-sweep", "60,80"], { encoding: "utf8" });
  const bad = spawnSync(simulate, [...args, "--static-sweep", "60,soon"], { encoding: "utf8" });
  rmSync(out, { recursive: true });
  assert.equal(sweep.status, 0, sweep.stderr);
  const rows = sweep.stdout
    .split("\n")
    .map((line) => line.match(/^\| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$/))
    .filter(Boolean)
    .map((m) => m.slice(1).map(Number));
  assert.deepEqual(
    rows.map((r) => r[0]),
    [60, 80],
    sweep.stdout,
  );
  // The delay is the static runs' own: a shorter one hedges more.
  assert.ok(rows[0][2] > rows[1][2] + 3, `extra ${rows[0][2]}% at 60 ms, ${rows[1][2]}% at 80 ms`);
  for (const [delay, p99, extra, theirs, ratio, own] of rows) {
    assert.ok(extra > 2 && extra < 30, `static ${delay} ms: extra ${extra}%`);
    assert.ok(Math.abs(ratio - p99 / theirs) < 0.002, `static ${delay} ms: ratio ${ratio}`);
    assert.ok(ratio > 0.97 && ratio < 1.05, `static ${delay} ms: ${p99} against the default's bound ${theirs}`);
    assert.ok(p99 >= own * 0.995, `static ${delay} ms: ${p99} below its own tape's bound ${own}`);
  }
  assert.match(sweep.stderr, /heavy-tail: \d of 2 static runs below the default's bound/);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--static-sweep expects delays in ms/);
});

/**
 * A run of `n` requests 5 ms apart made up from the scenario's own models:
 * every primary at origin `primary`, hedged at `hedgeAt` ms (or never) to
 * the other; the Worker's own time a constant 1 ms. Returns what the lab
 * would have collected and the latencies.
 */
function syntheticRun(name, n, hedgeAt, lag = 0, primary = 0) {
  const epochMs = 1_000_000;
  const models = [0, 1].map((i) => originModel(name, i, "t", epochMs));
  const logs = models.map((m) => ({ clock: m.clock(), requests: [] }));
  const perRequest = [];
  let legs = 0;
  for (let i = 0; i < n; i++) {
    const a = epochMs + 10 + i * 5;
    const p = models[primary].plan(a, `${i}:0`);
    logs[primary].requests.push([i, 0, a, p.delayMs, p.status, 0]);
    let done = p.delayMs;
    let planned = null;
    if (hedgeAt !== null && p.delayMs > hedgeAt) {
      const h = models[1 - primary].plan(a + hedgeAt + lag, `${i}:0`);
      logs[1 - primary].requests.push([i, 0, a + hedgeAt + lag, h.delayMs, h.status, 1]);
      done = Math.min(done, hedgeAt + lag + h.delayMs);
      legs += 1;
      planned = hedgeAt;
    }
    perRequest.push([i, done + 1, 200, planned]);
  }
  return { perRequest, logs, extra: legs / n, latencies: perRequest.map((r) => r[1]) };
}

test("the lab's hindsight bound: the run itself with nothing to spend, at least a fixed delay's own point", () => {
  const off = syntheticRun("heavy-tail", 4000, null);
  const replay = replayRun({ scenarioName: "heavy-tail", seed: "t", perRequest: off.perRequest, logs: off.logs });
  assert.equal(replay.mismatched, 0);
  const nothing = replay.bound(0);
  const sorted = Float64Array.from(off.latencies).sort();
  assert.ok(Math.abs(nothing.p99.latencyMs - quantile(sorted, 0.99)) < 1e-9, JSON.stringify(nothing.p99));
  // A fixed 60 ms hedge is one point the bound must meet or beat at its load.
  const fixed = syntheticRun("heavy-tail", 4000, 60);
  const b = replayRun({ scenarioName: "heavy-tail", seed: "t", perRequest: fixed.perRequest, logs: fixed.logs }).bound(fixed.extra);
  const fixedP99 = quantile(Float64Array.from(fixed.latencies).sort(), 0.99);
  assert.ok(fixed.extra > 0.05, `${fixed.extra}`);
  assert.ok(b.p99.latencyMs <= fixedP99 + 1e-9, `${b.p99.latencyMs} vs ${fixedP99}`);
  assert.ok(b.p99.latencyMs < 200, `${b.p99.latencyMs}`);
});

test("the lab's hindsight bound: its hedges leave as late after their delay as the run's did", () => {
  // Hedges decided at 60 ms reach their origin 20 ms later: replayed at
  // 60 ms, the run gives back its own p99, not one 20 ms kinder.
  const late = syntheticRun("heavy-tail", 4000, 60, 20);
  const replay = replayRun({ scenarioName: "heavy-tail", seed: "t", perRequest: late.perRequest, logs: late.logs });
  assert.equal(replay.launchLagMs.p50, 20);
  const own = replay.atDelay(60, late.extra);
  const lateP99 = quantile(Float64Array.from(late.latencies).sort(), 0.99);
  assert.equal(own.q, 1);
  assert.ok(Math.abs(own.p99 - lateP99) < 1e-9, `${own.p99} vs ${lateP99}`);
});

test("the lab's hindsight bound: on unlike origins its hedges may go to the fastest", () => {
  // slow-origin with every primary on the healthy origin: its stragglers are
  // hedged better on itself than on the 120 ms one. Like origins: one sweep.
  const healthy = syntheticRun("slow-origin", 4000, null, 0, 1);
  const b = replayRun({ scenarioName: "slow-origin", seed: "t", perRequest: healthy.perRequest, logs: healthy.logs }).bound(0.08);
  assert.equal(b.p99.toFastest, true, JSON.stringify(b.p99));
  assert.ok(b.p99.latencyMs < 150, JSON.stringify(b.p99));
  const like = syntheticRun("heavy-tail", 2000, null);
  const l = replayRun({ scenarioName: "heavy-tail", seed: "t", perRequest: like.perRequest, logs: like.logs }).bound(0.08);
  assert.equal(l.p99.toFastest, false);
});
