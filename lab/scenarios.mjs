// Latency scenarios for the simulated origins. Each origin instance gets its
// own seeded model: `plan(nowMs)` says how long this request takes and what it
// answers. Times are milliseconds.
import { seededRandom } from "./rng.mjs";

/** Packet loss / retransmits: lognormal(40 ms, 0.35) and 2% of requests +800 ms. */
export function heavyTail(rng) {
  const base = rng.lognormal(40, 0.35);
  return rng.next() < 0.02 ? base + 800 : base;
}

const scenarios = {
  "heavy-tail": {
    description: "lognormal median 40 ms sigma 0.35, plus 2% of requests +800 ms (packet loss, retransmits)",
    origins: [{ latency: heavyTail }, { latency: heavyTail }],
  },
  "gc-pause": {
    description:
      "lognormal median 30 ms sigma 0.25; each origin stops the world for 150-300 ms about every 2 s, stalling every request in flight",
    origins: [
      { latency: (rng) => rng.lognormal(30, 0.25), gc: { meanIntervalMs: 2000, minMs: 150, maxMs: 300 } },
      { latency: (rng) => rng.lognormal(30, 0.25), gc: { meanIntervalMs: 2000, minMs: 150, maxMs: 300 } },
    ],
  },
  "bimodal-cache": {
    description: "origin cache: 85% hits lognormal(8 ms, 0.3), 15% misses lognormal(150 ms, 0.3)",
    origins: [{ latency: bimodal }, { latency: bimodal }],
  },
  "slow-origin": {
    description: "the primary is degraded (lognormal median 120 ms, sigma 0.5); the secondary is healthy heavy-tail",
    origins: [{ latency: (rng) => rng.lognormal(120, 0.5) }, { latency: heavyTail }],
  },
  fast: {
    description: "a fast origin with no tail of its own: lognormal(40 ms, 0.35) (for what a pass-through adds)",
    origins: [{ latency: (rng) => rng.lognormal(40, 0.35) }, { latency: (rng) => rng.lognormal(40, 0.35) }],
  },
  instant: {
    description: "answers at once (for throughput measurements)",
    origins: [{ latency: () => 0 }, { latency: () => 0 }],
  },
  cliff: {
    description:
      "a cliff: 90% of requests lognormal(30 ms, 0.25), 10% about 8x slower, lognormal(240 ms, 0.15) (a slow code path, a cold shard)",
    origins: [{ latency: cliff }, { latency: cliff }],
  },
  "rare-stalls": {
    description: "rare long stalls: lognormal(40 ms, 0.35), 0.6% of requests +200 ms to +1 s (lock waits, a lost SYN)",
    origins: [{ latency: rareStalls }, { latency: rareStalls }],
  },
  recovery: {
    description:
      "recovery: both heavy-tail; from 12 s to 27 s after measuring starts the primary turns slow (lognormal 160 ms, 0.5) and answers 20% of requests 503, then recovers",
    origins: [
      {
        latency: heavyTail,
        episode: { fromMs: 12_000, untilMs: 27_000, latency: (rng) => rng.lognormal(160, 0.5), fastFailure: { fraction: 0.2, status: 503, afterMs: 2 } },
      },
      { latency: heavyTail },
    ],
  },
  "busy-isolate": {
    // Its own rate unless --rate says otherwise: near what workerd serves
    // open-loop on this 2-core machine beside the load generator and the
    // origins (500 rps saturated it, 350 did not; docs/isolate-cost.md).
    rate: 350,
    description:
      "the isolate is the bottleneck: fast origins with spare capacity, lognormal(40 ms, 0.35) each; run it near the isolate's capacity (--rate 350 on the lab's machine)",
    origins: [{ latency: (rng) => rng.lognormal(40, 0.35) }, { latency: (rng) => rng.lognormal(40, 0.35) }],
  },
  "fast-503-both": {
    description: "both origins shed 2% of requests with a 503 after 2 ms, independently; otherwise lognormal(40 ms, 0.35)",
    origins: [
      { latency: (rng) => rng.lognormal(40, 0.35), fastFailure: { fraction: 0.02, status: 503, afterMs: 2 } },
      { latency: (rng) => rng.lognormal(40, 0.35), fastFailure: { fraction: 0.02, status: 503, afterMs: 2 } },
    ],
  },
  "shedding-tail": {
    description: "both origins heavy-tail (lognormal(40 ms, 0.35), 2% +800 ms) and each sheds 2% of requests with a 503 after 2 ms, independently",
    origins: [
      { latency: heavyTail, fastFailure: { fraction: 0.02, status: 503, afterMs: 2 } },
      { latency: heavyTail, fastFailure: { fraction: 0.02, status: 503, afterMs: 2 } },
    ],
  },
  "fast-503": {
    description: "the primary sheds 5% of requests with a 503 after 2 ms; otherwise both are heavy-tail",
    origins: [{ latency: heavyTail, fastFailure: { fraction: 0.05, status: 503, afterMs: 2 } }, { latency: heavyTail }],
  },
};

function cliff(rng) {
  return rng.next() < 0.9 ? rng.lognormal(30, 0.25) : rng.lognormal(240, 0.15);
}

function rareStalls(rng) {
  const base = rng.lognormal(40, 0.35);
  return rng.next() < 0.006 ? base + 200 + rng.next() * 800 : base;
}

function bimodal(rng) {
  return rng.next() < 0.85 ? rng.lognormal(8, 0.3) : rng.lognormal(150, 0.3);
}

/** The latency scenarios (the throughput-only "instant" origin is left out). */
export const SCENARIO_NAMES = Object.keys(scenarios).filter((n) => n !== "instant" && n !== "fast");

/** The rate a scenario runs at unless one is given: its own, else 200 rps. */
export function rateOf(name, given) {
  return given !== undefined ? Number(given) : (scenario(name).rate ?? 200);
}

export function scenario(name) {
  const s = scenarios[name];
  if (!s) throw new Error(`unknown scenario ${JSON.stringify(name)}; known: ${SCENARIO_NAMES.join(", ")}`);
  return s;
}

/** The scenarios with a spell (`episode`): its start and end, ms after measuring starts. */
export function spellOf(name) {
  const episode = scenario(name).origins.find((o) => o.episode)?.episode;
  return episode ? { fromMs: episode.fromMs, untilMs: episode.untilMs } : null;
}

/**
 * The model of origin `index` of `name`: `plan(nowMs, key)` gives { delayMs, status }.
 * With a `key` (the load generator's request number and the attempt at this
 * origin, "seq:attempt") the draws are that request's own, so every policy,
 * and the hindsight bound replaying a run (hindsight.mjs), meets the same
 * service for the same request; without one they are taken in turn.
 * `restart(nowMs)` marks the start of measuring, which a spell is timed from.
 * `plan` is pure in time: it may be asked about any time in any order.
 */
export function originModel(name, index, seed, epochMs = Date.now()) {
  const spec = scenario(name).origins[index];
  const inTurn = seededRandom(`${seed}:${name}:${index}`);
  const pauses = spec.gc ? gcSchedule(spec.gc, seededRandom(`${seed}:${name}:${index}:gc`), epochMs) : null;
  let startedMs = epochMs;
  return {
    /** What a replay needs to rebuild this model: its epoch and the start of measuring. */
    clock: () => ({ epochMs, startedMs }),
    restart(nowMs) {
      startedMs = nowMs;
    },
    plan(nowMs, key = null) {
      const rng = key === null ? inTurn : seededRandom(`${seed}:${name}:${index}:${key}`);
      const e = spec.episode;
      const inSpell = e && nowMs - startedMs >= e.fromMs && nowMs - startedMs < e.untilMs;
      const fastFailure = inSpell ? e.fastFailure : spec.fastFailure;
      if (fastFailure && rng.next() < fastFailure.fraction) {
        return { delayMs: fastFailure.afterMs, status: fastFailure.status };
      }
      let delayMs = (inSpell ? e.latency : spec.latency)(rng);
      if (pauses) delayMs = pauses.stretch(nowMs, delayMs);
      return { delayMs, status: 200 };
    },
  };
}

/**
 * Stop-the-world pauses at exponential intervals. A request running across a
 * pause is stretched by the part of the pause it overlaps: every request in
 * flight stalls together, which is what makes GC tails correlated.
 */
export function gcSchedule({ meanIntervalMs, minMs, maxMs }, rng, origin = Date.now()) {
  const pauses = []; // [start, end) relative to the schedule's origin
  let horizon = 0;
  const extend = (until) => {
    while (horizon < until) {
      const start = horizon + rng.exponential(meanIntervalMs);
      const end = start + minMs + rng.next() * (maxMs - minMs);
      pauses.push([start, end]);
      horizon = end;
    }
  };
  return {
    pauses,
    /** The service time of a request arriving at `nowMs` that needs `workMs` of running time. */
    stretch(nowMs, workMs) {
      const t0 = nowMs - origin;
      let end = t0 + workMs;
      extend(end + maxMs * 4);
      for (const [s, e] of pauses) {
        if (s >= end) break;
        if (e <= t0) continue;
        end += e - Math.max(s, t0);
        extend(end + maxMs * 4);
      }
      return end - t0;
    },
  };
}
