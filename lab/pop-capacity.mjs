// How many pushes per second one PoP aggregator answers, in workerd.
//
//   node lab/pop-capacity.mjs [--rates 100,200,400,800] [--seconds 5] [--out DIR]
//
// The built Worker runs with its POP_AGGREGATOR bound to the lab's gate
// (lab/pop-gate.mjs), takes 8 s of heavy-tail load and pushes every 100
// requests (about what an isolate at 18 rps pushes every 5 s); the gate keeps
// those push bodies. Then the gate's driver pushes them at the real
// aggregator, open-loop, at each rate, and at an object that answers at once
// (the driver's and the dispatch's own cost, the baseline of the same run).
// For each rate: answer times from the intended send time (p50, p99, max),
// shed answers, and workerd CPU per push above the baseline's.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Miniflare } from "../tests/support/miniflare.mjs";
import { workerOptions } from "../tests/support/worker.mjs";
import { startOriginSim } from "./origin-sim.mjs";
import { cpuMs, spawnJson, workerdPids } from "./run.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The Worker and the gate in one workerd: the Worker's aggregator binding goes through the gate. */
export function gatedWorkers(vars, { persistDir } = {}) {
  return {
    ...(persistDir ? { durableObjectsPersist: persistDir } : {}),
    workers: [
      {
        name: "hedgehog",
        ...workerOptions(vars),
        cf: { colo: "TST" },
        // The real class is defined by the Worker's service (a binding it
        // does not read); the gate reaches it through REAL.
        durableObjects: { POP_AGGREGATOR: { className: "PopGate", scriptName: "gate" }, LAB_REAL_AGGREGATOR: { className: "PopAggregator", useSQLite: true } },
      },
      {
        name: "gate",
        scriptPath: path.join(root, "lab/pop-gate.mjs"),
        modules: true,
        compatibilityDate: "2026-07-01",
        durableObjects: {
          GATE: "PopGate",
          NULL: "Null",
          REAL: { className: "PopAggregator", scriptName: "hedgehog", useSQLite: true },
        },
      },
    ],
  };
}

/** Starts the gated pair; `gate(path, body)` talks to the gate worker. */
export async function startGated(vars, options) {
  const mf = new Miniflare(gatedWorkers(vars, options));
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const gateWorker = await mf.getWorker("gate");
  const gate = async (p, body) => {
    const res = await gateWorker.fetch(`http://gate${p}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`gate ${p}: ${res.status} ${await res.text()}`);
    return res.json();
  };
  return { mf, url, gate, dispose: () => mf.dispose() };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function runCapacity({ rates, seconds, log }) {
  const sim = await startOriginSim("heavy-tail", 1);
  const before = new Set(workerdPids());
  const w = await startGated({ HEDGE_ORIGINS: sim.origins, HEDGE_TUNING: { pop_push_every_requests: "100" } });
  const pids = workerdPids().filter((p) => !before.has(p));
  try {
    log("capturing pushes: 8 s at 100 rps through the Worker");
    const { firstLine } = spawnJson(["lab/loadgen.mjs", "--url", w.url, "--rate", "100", "--seconds", "8"]);
    await firstLine;
    const { bodies } = await w.gate("/captured");
    // The first push of a cold isolate only asks; keep the full ones.
    const full = bodies.filter((b) => b.length > 1000);
    if (full.length === 0) throw new Error(`no full push captured (${bodies.length} pushes)`);
    const bytes = full.reduce((a, b) => a + b.length, 0) / full.length;
    log(`    ${full.length} pushes captured, ${bytes.toFixed(0)} bytes on average`);
    const rows = [];
    for (const rate of rates) {
      const row = { rate };
      for (const target of ["null", "real"]) {
        // A warm object: its start-up is not what is measured.
        await w.gate("/drive", { target, name: `CAP-${rate}`, bodies: full, rate: 100, seconds: 1 });
        const cpu0 = cpuMs(pids);
        const r = await w.gate("/drive", { target, name: `CAP-${rate}`, bodies: full, rate, seconds });
        const cpu = cpuMs(pids) - cpu0;
        const times = r.times.sort((a, b) => a - b);
        row[target] = { sent: r.sent, answered: times.length, errors: r.errors, shed: r.shed, statuses: r.statuses, p50: percentile(times, 50), p99: percentile(times, 99), max: times.at(-1), cpuPerPushMs: cpu / r.sent, achieved: (r.sent * 1000) / r.elapsedMs };
      }
      row.aggregatorCpuPerPushMs = row.real.cpuPerPushMs - row.null.cpuPerPushMs;
      log(`    ${rate}/s: answers p50 ${row.real.p50} p99 ${row.real.p99} max ${row.real.max} ms, shed ${row.real.shed}, errors ${row.real.errors}; workerd CPU per push ${row.real.cpuPerPushMs.toFixed(3)} ms (baseline ${row.null.cpuPerPushMs.toFixed(3)}, p99 ${row.null.p99} ms)`);
      rows.push(row);
    }
    return { pushBytes: bytes, sample: full[0], rows };
  } finally {
    await w.dispose();
    await sim.close();
  }
}

export function capacityMarkdown(r) {
  const f = (v, d = 1) => (v == null ? "-" : Number(v).toFixed(d));
  return [
    `Push bodies captured from the Worker: ${f(r.pushBytes, 0)} bytes on average.`,
    "",
    "| pushes/s | answered | shed (503) | errors | answer p50 ms | p99 ms | max ms | workerd CPU per push ms | of which the aggregator | baseline p99 ms |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...r.rows.map((x) => `| ${x.rate} | ${x.real.answered - x.real.shed} | ${x.real.shed} | ${x.real.errors} | ${f(x.real.p50)} | ${f(x.real.p99)} | ${f(x.real.max)} | ${f(x.real.cpuPerPushMs, 3)} | ${f(x.aggregatorCpuPerPushMs, 3)} | ${f(x.null.p99)} |`),
    "",
  ].join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      rates: { type: "string", default: "100,200,400,800" },
      seconds: { type: "string", default: "5" },
      out: { type: "string" },
    },
  });
  const result = await runCapacity({ rates: values.rates.split(",").map(Number), seconds: Number(values.seconds), log: (m) => console.error(m) });
  const md = capacityMarkdown(result);
  console.log(md);
  if (values.out) {
    mkdirSync(values.out, { recursive: true });
    writeFileSync(path.join(values.out, "pop-capacity.json"), JSON.stringify(result, null, 2));
    writeFileSync(path.join(values.out, "pop-capacity.md"), md);
  }
}
