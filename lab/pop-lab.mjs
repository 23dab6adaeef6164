// Cold isolates with and without the PoP aggregate, in one run.
//
// One Worker warms the PoP aggregator (a SQLite-backed Durable Object whose
// storage persists to a temporary directory) and is stopped. Then fresh
// Workers (each a new workerd process: a cold isolate) take the same open-loop
// load for a short spell, alternately with the aggregator bound (they start
// from the PoP's quantiles) and without it (they start from the cold default).
// Their latencies are pooled per configuration. A second part counts the
// pushes one isolate makes per minute, and their size, at fixed rates.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Histogram } from "./histogram.mjs";
import { popAggregator, startWorker } from "../tests/support/worker.mjs";

export async function runColdIsolates({ origins, load, log, rate, warmSeconds, coldSeconds, isolates, pushRates, pushSecondsMax }) {
  const persistDir = await fs.mkdtemp(path.join(os.tmpdir(), "hedgehog-pop-lab-"));
  const withPop = popAggregator({ persistDir });
  const vars = { HEDGE_ORIGINS: origins };
  try {
    log(`PoP lab: warming the aggregator, ${warmSeconds} s at ${rate} rps`);
    const warm = await startWorker(vars, withPop);
    let warmStats;
    try {
      await load(warm.url, rate, warmSeconds);
      warmStats = await warm.popStats();
    } finally {
      await warm.dispose();
    }
    log(`    aggregator: ${warmStats.keys} keys, ${warmStats.samples} samples, ${warmStats.pushes} pushes`);

    const configs = [
      { name: "cold isolate, PoP aggregate", extra: withPop },
      { name: "cold isolate, local estimates only", extra: {} },
    ];
    const pooled = configs.map(() => ({ histogram: new Histogram(), sent: 0, errors: 0, hedges: 0 }));
    for (let k = 0; k < isolates; k++) {
      // Alternate the order so drift on the machine hits both alike.
      const order = k % 2 === 0 ? [0, 1] : [1, 0];
      for (const c of order) {
        log(`    isolate ${k + 1}/${isolates}: ${configs[c].name}, ${coldSeconds} s at ${rate} rps`);
        const w = await startWorker(vars, configs[c].extra);
        try {
          const result = await load(w.url, rate, coldSeconds);
          pooled[c].histogram.merge(Histogram.fromJSON(result.histogram));
          pooled[c].sent += result.sent;
          pooled[c].errors += result.errors;
          pooled[c].hedges += result.xHedge.hedge ?? 0;
        } finally {
          await w.dispose();
        }
      }
    }
    const rows = configs.map((c, i) => ({
      name: c.name,
      requests: pooled[i].sent,
      p50: pooled[i].histogram.percentile(50),
      p99: pooled[i].histogram.percentile(99),
      p999: pooled[i].histogram.percentile(99.9),
      hedgeWins: pooled[i].hedges,
      errors: pooled[i].errors,
    }));

    const pushes = [];
    for (const pushRate of pushRates) {
      // Bounded so a machine that cannot keep up does not pile up connections.
      const pushSeconds = Math.min(pushSecondsMax, Math.ceil(5_000 / pushRate));
      log(`    push rate: one isolate, ${pushSeconds} s at ${pushRate} rps`);
      const w = await startWorker(vars, withPop);
      try {
        const before = await w.popStats();
        const result = await load(w.url, pushRate, pushSeconds);
        // The last push may still be in flight when the load ends.
        await new Promise((r) => setTimeout(r, 500));
        const after = await w.popStats();
        const n = after.pushes - before.pushes;
        pushes.push({
          rate: pushRate,
          sent: result.sent,
          seconds: pushSeconds,
          pushes: n,
          perMinute: (n / pushSeconds) * 60,
          bytesPerPush: n > 0 ? (after.push_bytes - before.push_bytes) / n : null,
        });
      } finally {
        await w.dispose();
      }
    }
    return { rate, warmSeconds, coldSeconds, isolates, warmStats, rows, pushes };
  } finally {
    await fs.rm(persistDir, { recursive: true, force: true });
  }
}

export function popMarkdown(r) {
  const f = (v) => (v == null ? "-" : v.toFixed(1));
  const lines = [
    "## Cold isolates: PoP aggregate vs local estimates only (heavy-tail)",
    "",
    `The aggregator was warmed by one Worker for ${r.warmSeconds} s at ${r.rate} rps (${r.warmStats.samples} samples in ${r.warmStats.keys} keys), which was then stopped. ` +
      `Then ${r.isolates} fresh Workers per configuration (each a new workerd process), ${r.coldSeconds} s each at ${r.rate} rps, latencies pooled.`,
    "",
    "| configuration | requests | p50 ms | p99 ms | p99.9 ms | hedge wins | errors |",
    "|---|---|---|---|---|---|---|",
    ...r.rows.map((x) => `| ${x.name} | ${x.requests} | ${f(x.p50)} | ${f(x.p99)} | ${f(x.p999)} | ${x.hedgeWins} | ${x.errors} |`),
    "",
    "| load on one isolate | requests | pushes | pushes per minute | bytes per push |",
    "|---|---|---|---|---|",
    ...r.pushes.map((p) => `| ${p.rate} rps for ${p.seconds} s | ${p.sent} | ${p.pushes} | ${f(p.perMinute)} | ${f(p.bytesPerPush)} |`),
    "",
  ];
  return lines.join("\n");
}
