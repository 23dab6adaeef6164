// What a request's Cache-Control of many distinct directive names costs the
// Worker, against a header of the same size it does not parse (`x-filler`),
// through the same path in the same run, for this build and any others.
// Requests go one at a time to an instant origin; the figure is the median
// time to the answer (ms) over --requests of each, and the extra a parsed
// header costs over the filler.
//
//   node lab/directives-cost.mjs [--kib 15] [--requests 300] [--baseline LABEL=DIR,...]
import path from "node:path";
import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { Miniflare } from "../tests/support/miniflare.mjs";
import { startOrigin } from "../tests/support/origin.mjs";
import { workerOptions, wrap, origins } from "../tests/support/worker.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    kib: { type: "string", default: "15" },
    requests: { type: "string", default: "300" },
    baseline: { type: "string", default: "" },
  },
});
const bytes = Number(values.kib) * 1024;
const names = [];
for (let i = 0; names.join(",").length < bytes; i++) names.push(`d${i}`);
const directives = names.join(",").slice(0, bytes);
const filler = "f".repeat(directives.length);

const builds = [["this build", path.join(root, "build")]];
for (const spec of values.baseline.split(",").filter(Boolean)) {
  const [label, dir] = spec.includes("=") ? spec.split("=") : [spec, spec];
  builds.push([label, path.resolve(dir)]);
}

const o = await startOrigin("o", () => ({ body: "ok" }));
const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
try {
  const workers = [];
  for (const [label, dir] of builds) {
    const opts = workerOptions({ HEDGE_ORIGINS: origins(o), HEDGE_MODE: "off" });
    opts.scriptPath = path.join(dir, "index.js");
    workers.push([label, await wrap(new Miniflare(opts))]);
  }
  const time = async (w, headers) => {
    const t = performance.now();
    await (await fetch(`${w.url}/x`, { headers })).arrayBuffer();
    return performance.now() - t;
  };
  const samples = workers.map(() => ({ parsed: [], filler: [] }));
  // Alternating, so drift in the machine's load hits every build alike.
  for (let i = 0; i < Number(values.requests); i++) {
    for (const [k, [, w]] of workers.entries()) {
      samples[k].parsed.push(await time(w, { "cache-control": directives }));
      samples[k].filler.push(await time(w, { "x-filler": filler }));
    }
  }
  for (const [k, [label]] of workers.entries()) {
    const p = median(samples[k].parsed);
    const f = median(samples[k].filler);
    rows.push({ build: label, headerBytes: directives.length, directives: directives.split(",").length, parsedMs: p, fillerMs: f, extraMs: p - f });
  }
  for (const [, w] of workers) await w.dispose();
} finally {
  await o.close();
}
console.log(`| build | Cache-Control (${directives.length} bytes, ${directives.split(",").length} names), median ms | same-size x-filler, median ms | extra ms |`);
console.log("|---|---|---|---|");
for (const r of rows) console.log(`| ${r.build} | ${r.parsedMs.toFixed(2)} | ${r.fillerMs.toFixed(2)} | ${r.extraMs.toFixed(2)} |`);
console.log(JSON.stringify(rows));
