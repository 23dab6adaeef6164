// One line per scenario from a lab report (the same columns as the
// simulator's summary): the pass-through, fixed p95, the default, the oracle
// and the hindsight bound, and the default over the bound.
//
//   node lab/summary.mjs lab-results/report.json [more reports ...]
//
// lab/run.mjs prints it under the report when it ran more than one scenario.
import { readFileSync } from "node:fs";

const f1 = (v) => (v === null || v === undefined || Number.isNaN(v) ? "-" : v.toFixed(1));
const point = (b) => (Number.isFinite(b.delayMs) ? `${f1(b.latencyMs)} (${f1(b.delayMs)}, ${b.q.toFixed(2)}${b.toFastest ? ", fastest origin" : ""})` : `${f1(b.latencyMs)} (no hedge)`);
const errors = (row) => (row.errors > 0 ? `, ${row.errors} errors` : "");

/** The summary table of `reports` (as report.json keeps them). */
export function summaryMarkdown(reports) {
  const lines = [
    "| scenario | pass-through p50 / p99 / p99.9 | fixed p95 p50 / p99 / p99.9, extra | default p50 / p99 / p99.9, extra | oracle at the default's extra p99 / p99.9 | hindsight bound at the default's extra: p99 (d ms, q[, fastest origin]) / p99.9 (d ms, q[, fastest origin]) | default ÷ bound p99 / p99.9 |",
    "|---|---|---|---|---|---|---|",
  ];
  for (const r of reports) {
    const row = (name) => r.rows.find((x) => x.name.includes(name));
    const p = row("hedging off");
    const f = row("fixed-quantile");
    const d = row("(default)");
    if (!d) continue;
    const cell = (x, extra) => (x ? `${f1(x.p50)} / ${f1(x.p99)} / ${f1(x.p999)}${extra ? `, ${f1(x.extraPct)}%` : ""}${errors(x)}` : "-");
    const b = r.bound;
    lines.push(
      `| ${r.scenario} | ${cell(p, false)} | ${cell(f, true)} | ${cell(d, true)} | ${r.oracle ? `${f1(r.oracle.p99)} / ${f1(r.oracle.p999)}` : "-"} | ${b ? `${point(b.p99)} / ${point(b.p999)}` : "-"} | ${b ? `${(d.p99 / b.p99.latencyMs).toFixed(2)} / ${(d.p999 / b.p999.latencyMs).toFixed(2)}` : "-"} |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const reports = process.argv.slice(2).flatMap((file) => JSON.parse(readFileSync(file, "utf8")).reports);
  process.stdout.write(summaryMarkdown(reports) + "\n");
}
