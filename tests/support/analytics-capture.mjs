// The built Worker behind an entry module that binds ANALYTICS to a
// stand-in dataset logging each point as "AEPOINT {json}" (workers-rs takes
// any object as the dataset; Miniflare 5 has no way to bind a plain object,
// and an RPC service's method is not called synchronously as the
// platform's dataset is). Used by the analytics test and the price lab.
import { readdirSync } from "node:fs";
import path from "node:path";
import { workerOptions } from "./worker.mjs";

const CAPTURE_ENTRY = `import Edge from "./index.js";
export * from "./index.js";
const dataset = { writeDataPoint(point) { console.log("AEPOINT " + JSON.stringify(point)); } };
export default class extends Edge {
  constructor(ctx, env) { super(ctx, { ...env, ANALYTICS: dataset }); }
}`;

/** Miniflare worker options: the built Worker's modules behind the capturing entry. */
export function captureEntry() {
  const dir = path.dirname(workerOptions({}).scriptPath);
  const files = readdirSync(dir).filter((f) => /\.(js|wasm)$/.test(f));
  return {
    scriptPath: undefined,
    modulesRoot: dir,
    modules: [
      { type: "ESModule", path: path.join(dir, "capture-entry.mjs"), contents: CAPTURE_ENTRY },
      ...files.map((f) => ({ type: f.endsWith(".wasm") ? "CompiledWasm" : "ESModule", path: path.join(dir, f) })),
    ],
  };
}

/** The points written so far, from captured log lines. */
export function pointsIn(lines) {
  return lines.filter((l) => l.includes("AEPOINT ")).map((l) => JSON.parse(l.slice(l.indexOf("AEPOINT ") + 8)));
}
