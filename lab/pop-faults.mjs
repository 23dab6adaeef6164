// What a request pays when the PoP aggregator fails, in workerd, one run.
//
//   node lab/pop-faults.mjs [--rate 100] [--seconds 30] [--rounds 2] [--out DIR]
//
// The built Worker runs with its aggregator behind the lab's gate
// (lab/pop-gate.mjs), heavy-tail origins, open-loop load. Each round runs
// every configuration for `seconds`, in turn (so drift on the machine hits
// all alike): the aggregator healthy, down (503 at once), slow (2 s answers,
// past the Worker's 1 s push timeout), shedding (its 503 "shed"), and
// evicted half-way through (a fresh object: in-memory state and storage
// gone). Latencies are pooled per configuration. After each fault the gate
// is healed and the time until the Worker's next push is answered is
// measured (the aggregator back in service by itself). The hedge share is
// the origins' count of hedge-marked requests over the load.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { Histogram } from "./histogram.mjs";
import { startOriginSim } from "./origin-sim.mjs";
import { spawnJson } from "./run.mjs";
import { startGated } from "./pop-capacity.mjs";

const TOKEN = "lab-stats-token-not-secret";
const CONFIGS = [
  { name: "healthy", mode: "none" },
  { name: "down (503 at once)", mode: "down" },
  { name: "slow (2 s answers)", mode: "slow" },
  { name: "shedding (503 shed)", mode: "shed" },
  { name: "evicted half-way", mode: "evict", midway: true },
];

async function isolatePop(url) {
  const res = await fetch(`${url}/__hedge/stats`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.json()).pop;
}

export async function runFaults({ rate, seconds, rounds, log }) {
  const sim = await startOriginSim("heavy-tail", 1);
  const w = await startGated({ HEDGE_ORIGINS: sim.origins, HEDGE_STATS_TOKEN: TOKEN });
  const pooled = CONFIGS.map(() => ({ histogram: new Histogram(), sent: 0, errors: 0, received: 0, hedges: 0, recoveryS: [], roundP99: [] }));
  try {
    // Warm: the isolate and the aggregator hold data before anything is measured.
    await w.gate("/fault", { mode: "none" });
    await spawnJson(["lab/loadgen.mjs", "--url", w.url, "--rate", String(rate), "--seconds", "10"]).firstLine;
    for (let round = 0; round < rounds; round++) {
      for (const [i, c] of CONFIGS.entries()) {
        log(`round ${round + 1}/${rounds}: ${c.name}, ${seconds} s at ${rate} rps`);
        if (!c.midway) await w.gate("/fault", { mode: c.mode });
        const before = await Promise.all(sim.origins.map((o) => fetch(`${o.url}/__stats`).then((r) => r.json())));
        const load = spawnJson(["lab/loadgen.mjs", "--url", w.url, "--rate", String(rate), "--seconds", String(seconds)]).firstLine;
        if (c.midway) {
          await new Promise((r) => setTimeout(r, (seconds * 1000) / 2));
          await w.gate("/fault", { mode: "evict" });
        }
        const result = await load;
        const after = await Promise.all(sim.origins.map((o) => fetch(`${o.url}/__stats`).then((r) => r.json())));
        const p = pooled[i];
        p.histogram.merge(Histogram.fromJSON(result.histogram));
        p.roundP99.push(Histogram.fromJSON(result.histogram).percentile(99));
        p.sent += result.sent;
        p.errors += result.errors;
        p.received += after.reduce((a, s, k) => a + s.received - before[k].received, 0);
        p.hedges += after.reduce((a, s, k) => a + s.hedgeMarked - before[k].hedgeMarked, 0);
        // Heal, then keep light traffic going until a push is answered again.
        await w.gate("/fault", { mode: "none" });
        const healedAt = Date.now();
        const start = (await isolatePop(w.url)).pushes_succeeded;
        let recovered = null;
        for (let k = 0; k < 600 && recovered == null; k++) {
          await (await fetch(`${w.url}/api/recovery/${k}`)).arrayBuffer();
          if ((await isolatePop(w.url)).pushes_succeeded > start) recovered = (Date.now() - healedAt) / 1000;
          else await new Promise((r) => setTimeout(r, 100));
        }
        p.recoveryS.push(recovered);
        log(`    p99 ${Histogram.fromJSON(result.histogram).percentile(99).toFixed(1)} ms; next answered push ${recovered == null ? "none within 60 s" : `${recovered.toFixed(1)} s`} after healing`);
      }
    }
  } finally {
    await w.dispose();
    await sim.close();
  }
  const rows = CONFIGS.map((c, i) => {
    const p = pooled[i];
    return {
      name: c.name,
      requests: p.sent,
      errors: p.errors,
      p50: p.histogram.percentile(50),
      p99: p.histogram.percentile(99),
      p999: p.histogram.percentile(99.9),
      extra: p.sent > 0 ? p.hedges / p.sent : null,
      recoveryS: p.recoveryS,
      roundP99: p.roundP99,
    };
  });
  return { rate, seconds, rounds, rows };
}

export function faultsMarkdown(r) {
  const f = (v, d = 1) => (v == null ? "-" : Number(v).toFixed(d));
  const healthy = r.rows[0];
  return [
    `Heavy-tail origins, ${r.rate} rps open-loop, ${r.rounds} rounds of ${r.seconds} s per configuration, taken in turn; latencies pooled.`,
    "",
    "| aggregator | requests | errors | p50 ms | p99 ms | p99 / healthy | each round's p99 ms | p99.9 ms | hedges per request | next answered push after healing, s |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...r.rows.map((x) => `| ${x.name} | ${x.requests} | ${x.errors} | ${f(x.p50)} | ${f(x.p99)} | ${f(x.p99 / healthy.p99, 3)} | ${x.roundP99.map((v) => f(v)).join(", ")} | ${f(x.p999)} | ${f(x.extra * 100)}% | ${x.recoveryS.map((s) => f(s)).join(", ")} |`),
    "",
  ].join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      rate: { type: "string", default: "100" },
      seconds: { type: "string", default: "30" },
      rounds: { type: "string", default: "2" },
      out: { type: "string" },
    },
  });
  const result = await runFaults({ rate: Number(values.rate), seconds: Number(values.seconds), rounds: Number(values.rounds), log: (m) => console.error(m) });
  const md = faultsMarkdown(result);
  console.log(md);
  if (values.out) {
    mkdirSync(values.out, { recursive: true });
    writeFileSync(path.join(values.out, "pop-faults.json"), JSON.stringify(result, null, 2));
    writeFileSync(path.join(values.out, "pop-faults.md"), md);
  }
}
