// The advisor held out against the lab (issue 42's proof): the lab ran each
// scenario at the default budget (whose stats page it saved) and at other
// budgets; the advisor sees only that page and predicts the others.
//
//   node lab/run.mjs --scenario heavy-tail,bimodal-cache,fast-503,cliff --configs default --budgets 4,8,16 --seconds 60 --out DIR
//   node lab/advise-check.mjs DIR        (builds nothing: run `npm run advise -- --help` once first)
//
// Prints a markdown table per scenario: predicted and measured p99 and extra
// load per budget, the ratio and the difference, and whether each is within
// the targets (p99 within 10%, extra within 2 points). The advisor predicts
// a running Worker; a lab run starts a fresh one, whose delay takes about
// 10 s to settle (docs/lab.md), so the p99 from the 10th second on is given
// beside the whole run's, with its own ratio.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dir = path.resolve(process.argv[2] ?? "lab-results");
const report = JSON.parse(readFileSync(path.join(dir, "report.json"), "utf8"));
const P99_WITHIN = 0.1;
const EXTRA_WITHIN = 2;
/** Seconds of a run left out of its settled p99: the Worker's start. */
const START_S = 10;

/** The p99 of a run's latencies from second `from` on (by intended send time). */
function p99From(row, from) {
  const sorted = (row.seconds ?? []).slice(from).flatMap((s) => s.latencies).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))] : NaN;
}

let out = `| scenario | budget % | predicted p99 ms | measured p99 ms | ratio | measured p99 from ${START_S} s | ratio | predicted extra % | measured extra % | difference (points) | within (whole run) |\n|---|---|---|---|---|---|---|---|---|---|---|\n`;
for (const s of report.reports) {
  const measured = s.rows
    .map((r) => ({ r, m: /tail-aware at ([\d.]+)% budget/.exec(r.name) ?? (r.name.endsWith("(default)") ? [null, "12"] : null) }))
    .filter(({ m }) => m)
    .map(({ r, m }) => ({ budget: Number(m[1]), p99: r.p99, settled: p99From(r, START_S), extra: r.extraPct }));
  const budgets = measured.map((m) => m.budget).join(",");
  const run = spawnSync(path.join(root, "target/release/examples/advise"), ["--from", path.join(dir, `stats-${s.scenario}.json`), "--json", "--budgets", budgets], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`advise on ${s.scenario}: ${run.stderr}`);
  const advice = JSON.parse(run.stdout);
  const whole = advice.routes.find((r) => r.route === "(all routes)") ?? advice.routes[0];
  for (const m of measured.sort((a, b) => a.budget - b.budget)) {
    const p = whole.rows.find((r) => r.policy === "tail-aware" && r.budget_percent === m.budget);
    const ratio = p.p99_ms / m.p99;
    const diff = p.extra_pct - m.extra;
    const ok = p.p99_known === false ? "cannot judge (p99 in the unresolved tail)" : Math.abs(ratio - 1) <= P99_WITHIN && Math.abs(diff) <= EXTRA_WITHIN ? "yes" : "no";
    out += `| ${s.scenario} | ${m.budget}${m.budget === 12 ? " (in force)" : ""} | ${p.p99_known === false ? ">= " : ""}${p.p99_ms.toFixed(1)} | ${m.p99.toFixed(1)} | ${ratio.toFixed(2)} | ${m.settled.toFixed(1)} | ${(p.p99_ms / m.settled).toFixed(2)} | ${p.extra_pct.toFixed(1)} | ${m.extra.toFixed(1)} | ${diff >= 0 ? "+" : ""}${diff.toFixed(1)} | ${ok} |\n`;
  }
  const k = whole.recommendation;
  if (k) {
    const best = measured.reduce((a, b) => (b.p99 < a.p99 ? b : a));
    out += `| ${s.scenario} | advice: ${k.budget_percent} | ${k.p99_ms.toFixed(1)} | best measured ${best.p99.toFixed(1)} at ${best.budget}% (${best.extra.toFixed(1)}% extra) | | | | ${k.extra_pct.toFixed(1)} | | | |\n`;
  }
}
process.stdout.write(out);
