// Draws the simulator's percentile plots with the lab's own plot code:
//   node lab/sim-plot.mjs [sim-results]
// reads <dir>/sim-report.json (written by `cargo run --release -p hedgehog-core --example
// simulate`) and writes <dir>/sim-<scenario>.svg.
import { readFileSync, writeFileSync } from "node:fs";
import { percentileSvg } from "./report.mjs";

const dir = process.argv[2] ?? "sim-results";
const report = JSON.parse(readFileSync(`${dir}/sim-report.json`, "utf8"));
for (const run of report) {
  const series = run.rows.map((row) => ({ name: row.name, points: row.curve }));
  const title = `${run.scenario} (simulated): ${run.rate_rps} rps, ${run.isolates} isolate(s), seed ${run.seed}`;
  const file = `${dir}/sim-${run.scenario}.svg`;
  writeFileSync(file, percentileSvg(series, title));
  console.log(`sim-plot: ${file}`);
}
