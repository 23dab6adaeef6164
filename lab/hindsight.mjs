// The hindsight bound in the workerd lab: the best fixed hedge delay d, and
// probability q of hedging at it, chosen after the fact for one run of the
// Worker, at that run's own extra load (SingleR, SPAA 2017, randomised form).
// The same computation as the simulator's core/src/sim/hindsight.rs (read
// its comments for the rules); here the run is rebuilt from what the lab saw:
//
// - the load generator's latency of every request (from its intended send),
// - every origin's log of the requests it received (origin-sim.mjs /__log):
//   the request's number, the attempt at that origin, its arrival and the
//   service planned for it (known even for a leg the Worker then aborted),
// - the origins' models, rebuilt with the same seed and clock, which give the
//   service any request would have had at any time (draws keyed by request).
//
// Each request keeps its primary (the first leg to arrive), its arrival and
// the Worker's own time (its latency less the origin-side span from the
// primary's arrival to the answer it kept); the replay changes only whether
// and when a second leg goes out. A hedge decided at d reaches its origin
// after the Worker's own launch lag, as the run's hedges did: each request
// the run hedged by its delay keeps its own lag (its hedge's arrival less
// the primary's, less the delay its Server-Timing says was planned), every
// other one draws a lag from those (keyed by its number). Without the lag the
// bound's hedges left at d exactly, 1-3 ms before any this Worker sends (a
// static 60 ms hedge reached its origin 61.5 ms after its primary at the
// median, 63.4 at p90, 74-82 at p99). Loopback legs travel in no time.
// Where the origins are unlike, the sweep runs again with every hedge sent to
// the fastest origin (the primary itself, as a new request, when that is the
// fastest), and each percentile takes the better of the two.
import { originModel } from "./scenarios.mjs";

/** Coarse and fine sweep steps (as the simulator's). */
const COARSE_STEPS = 240;
const FINE_STEPS = 40;
/** Origins whose medians are this far apart try the fastest as the target (as the simulator's). */
const MEDIANS_APART = 1.25;

/**
 * Rebuilds a run: `perRequest` from the load generator ([number, latency ms,
 * status]), `logs` from each origin's /__log ({clock, requests}). Returns the
 * replay (`bound(extra)`), or null when no request reached an origin.
 */
export function replayRun({ scenarioName, seed, perRequest, logs }) {
  const models = logs.map((log, index) => {
    const m = originModel(scenarioName, index, seed, log.clock.epochMs);
    m.restart(log.clock.startedMs);
    return m;
  });
  const legsOf = new Map(); // number -> [{origin, attempt, arrived, delay, ok}]
  logs.forEach((log, origin) => {
    for (const [seq, attempt, arrived, delay, status] of log.requests) {
      if (!legsOf.has(seq)) legsOf.set(seq, []);
      legsOf.get(seq).push({ origin, attempt, arrived, delay, ok: status < 500 });
    }
  });
  // Each request's legs in the order they reached an origin: the first is
  // its primary, the second (when its delay sent one) its hedge.
  for (const legs of legsOf.values()) legs.sort((x, y) => x.arrived - y.arrived);
  const other = (o) => (o + 1) % models.length;
  /** A leg of request `seq` to `origin`, sent `at` ms after the primary arrived at `a`. */
  const leg = (seq, origin, attempt, a, at) => {
    const { delayMs, status } = models[origin].plan(a + at, `${seq}:${attempt}`);
    return [at + delayMs, status < 500];
  };
  // The run's launch lags: how long after its planned delay each hedge a
  // delay sent reached its origin.
  const ownLag = new Map();
  for (const [seq, , , plannedMs] of perRequest) {
    const legs = legsOf.get(seq);
    if (plannedMs === null || plannedMs === undefined || !legs || legs.length < 2) continue;
    ownLag.set(seq, Math.max(0, legs[1].arrived - legs[0].arrived - plannedMs));
  }
  const lags = Float64Array.from(ownLag.values()).sort();
  const lagAt = (p) => (lags.length ? lags[Math.floor(p * (lags.length - 1))] : null);
  const lagSummary = { hedges: lags.length, p50: lagAt(0.5), p90: lagAt(0.9), p99: lagAt(0.99) };
  const launchLag = (seq) => ownLag.get(seq) ?? (lags.length ? lags[(Math.imul(seq, 2654435761) >>> 0) % lags.length] : 0);
  const requests = [];
  let mismatched = 0;
  for (const [seq, latency] of perRequest) {
    const legs = legsOf.get(seq) ?? [];
    const first = legs[0];
    if (!first) {
      // It never reached an origin: the same under any delay.
      requests.push({ seq, fixed: latency });
      continue;
    }
    const a = first.arrived;
    // The rebuilt model must give the very service the origin planned.
    if (Math.abs(models[first.origin].plan(a, `${seq}:${first.attempt}`).delayMs - first.delay) > 1e-6) mismatched += 1;
    // The answer the Worker kept: the first good one, else the last.
    const ends = legs.map((l) => [l.arrived - a + l.delay, l.ok]);
    const good = ends.filter(([, ok]) => ok).map(([t]) => t);
    const span = good.length ? Math.min(...good) : Math.max(...ends.map(([t]) => t));
    const r = { seq, a, primary: first.origin, primaryMs: first.delay, primaryOk: first.ok, overhead: latency - span, lag: launchLag(seq) };
    const [ms, added] = play(r, null);
    r.alone = [ms + r.overhead, added];
    requests.push(r);
  }

  // Where hedges go: null, the next origin after the primary; else this one.
  let hedgeTo = null;

  /** The fastest origin when the medians of what each would have answered the `replayed` requests are apart, else null. */
  function fastestApart(replayed) {
    if (models.length < 2 || !replayed.length) return null;
    const medians = models.map((m) => {
      const answers = Float64Array.from(replayed.map((r) => m.plan(r.a, `${r.seq}:0`).delayMs)).sort();
      return answers[Math.floor(answers.length / 2)];
    });
    const low = Math.min(...medians);
    return Math.max(...medians) >= MEDIANS_APART * low ? medians.indexOf(low) : null;
  }

  /** The request under the bound's rules, hedged at `hedgeAt` (or not): [ms, legs added]. */
  function play(r, hedgeAt) {
    const p = r.primary;
    const h = other(p);
    const primary = [r.primaryMs, r.primaryOk];
    if (hedgeAt === null || hedgeAt >= r.primaryMs) {
      if (r.primaryOk) return [r.primaryMs, 0];
      const [ra, ok] = leg(r.seq, h, 0, r.a, r.primaryMs);
      if (ok) return [ra, 1];
      return [leg(r.seq, p, 1, r.a, ra)[0], 2];
    }
    const target = hedgeTo ?? h;
    const hedge = leg(r.seq, target, target === p ? 1 : 0, r.a, hedgeAt + r.lag);
    const [first, firstOrigin, second] = hedge[0] < r.primaryMs ? [hedge, target, primary] : [primary, p, hedge];
    if (first[1]) return [first[0], 1];
    // The retry's attempt at its origin follows the legs already sent there.
    const to = other(firstOrigin);
    const third = leg(r.seq, to, (to === p) + (to === target), r.a, first[0]);
    const goods = [second, third].filter(([, ok]) => ok).map(([t]) => t);
    return [goods.length ? Math.min(...goods) : Math.max(second[0], third[0]), 2];
  }

  function atDelay(d, extra) {
    const n = requests.length;
    let base = 0;
    let gain = 0;
    const hedged = new Map();
    for (const r of requests) {
      if (r.fixed !== undefined) continue;
      base += r.alone[1];
      if (r.primaryMs > d) {
        const [ms, added] = play(r, d);
        gain += added - r.alone[1];
        hedged.set(r, ms + r.overhead);
      }
    }
    const q = gain > 0 ? Math.min(1, Math.max(0, (extra * n - base) / gain)) : 0;
    const samples = [];
    for (const r of requests) {
      if (r.fixed !== undefined) samples.push([r.fixed, 1]);
      else if (q > 0 && hedged.has(r)) {
        samples.push([hedged.get(r), q]);
        if (q < 1) samples.push([r.alone[0], 1 - q]);
      } else samples.push([r.alone[0], 1]);
    }
    samples.sort((x, y) => x[0] - y[0]);
    const at = (p) => {
      const need = Math.ceil(p * n) - 1e-9;
      let sum = 0;
      for (const [v, w] of samples) {
        sum += w;
        if (sum >= need) return v;
      }
      return samples.at(-1)?.[0] ?? NaN;
    };
    return { q, p99: at(0.99), p999: at(0.999) };
  }

  /** The best (d, q) for p99 and for p99.9 at `extra` legs per request beyond the first (0-1). */
  function bound(extra) {
    const replayed = requests.filter((r) => r.fixed === undefined);
    if (!replayed.length) return null;
    const n = requests.length;
    const okTimes = Float64Array.from(replayed.filter((r) => r.primaryOk).map((r) => r.primaryMs)).sort();
    const retries = replayed.reduce((s, r) => s + r.alone[1], 0);
    const late = Math.min(okTimes.length, Math.ceil(Math.max(0, extra * n - retries)));
    const rank = okTimes.length - late - 1;
    const dMax = 1.2 * (rank >= 0 ? okTimes[rank] : 0);
    const best = { p99: null, p999: null };
    const step = dMax / COARSE_STEPS;
    const fastest = fastestApart(replayed);
    for (const target of fastest === null ? [null] : [null, fastest]) {
      hedgeTo = target;
      const own = { p99: null, p999: null };
      const tryDelay = (d) => {
        const { q, p99, p999 } = atDelay(d, extra);
        const delayMs = q > 0 ? d : Infinity;
        for (const [key, v] of [["p99", p99], ["p999", p999]]) {
          if (!own[key] || v < own[key].latencyMs) own[key] = { delayMs, q, latencyMs: v, toFastest: q > 0 && target !== null };
        }
      };
      for (let k = 0; k <= COARSE_STEPS; k++) tryDelay(step * k);
      for (const centre of [own.p99.delayMs, own.p999.delayMs]) {
        if (!Number.isFinite(centre)) continue;
        for (let k = 0; k <= FINE_STEPS; k++) {
          const d = centre - step + (2 * step * k) / FINE_STEPS;
          if (d >= 0 && d <= dMax) tryDelay(d);
        }
      }
      for (const key of ["p99", "p999"]) {
        if (!best[key] || own[key].latencyMs < best[key].latencyMs) best[key] = own[key];
      }
    }
    hedgeTo = null;
    return { extraPct: extra * 100, replayed: replayed.length, requests: n, mismatched, launchLagMs: lagSummary, ...best };
  }

  return { bound, atDelay, requests, mismatched, launchLagMs: lagSummary };
}

/** "110.9 ms (d 66.0 ms, q 0.95)", with ", fastest origin" when the hedges went there. */
export function boundPointText(b) {
  return Number.isFinite(b.delayMs)
    ? `${b.latencyMs.toFixed(1)} ms (d ${b.delayMs.toFixed(1)} ms, q ${b.q.toFixed(2)}${b.toFastest ? ", fastest origin" : ""})`
    : `${b.latencyMs.toFixed(1)} ms (no hedge)`;
}
