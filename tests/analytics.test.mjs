// The Analytics Engine queries in docs/analytics.md read only columns the
// Worker writes, with the meaning the page gives them: the Worker runs with
// an ANALYTICS binding that logs each data point, and every blobN / doubleN /
// indexN a query names is checked against the points written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "./support/miniflare.mjs";
import { origins, workerOptions } from "./support/worker.mjs";
import { origin } from "./support/harness.mjs";
import { captureLogs } from "./support/logs.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const doc = readFileSync(path.join(root, "docs/analytics.md"), "utf8");
const queries = [...doc.matchAll(/```sql\n-- query: ([\w-]+)\n([\s\S]*?)```/g)].map((m) => ({ name: m[1], sql: m[2] }));

// A stand-in dataset that logs each point, given to the built Worker by a
// test entry module around it (workers-rs takes any object as the dataset;
// Miniflare 5 has no way to bind a plain object, and an RPC service's
// method is not called synchronously as the platform's dataset is).
const CAPTURE_ENTRY = `import Edge from "./index.js";
export * from "./index.js";
const dataset = { writeDataPoint(point) { console.log("AEPOINT " + JSON.stringify(point)); } };
export default class extends Edge {
  constructor(ctx, env) { super(ctx, { ...env, ANALYTICS: dataset }); }
}`;

/** The built Worker's modules behind the capturing entry. */
function captureEntry() {
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

test("every column the documented queries read is written, with its documented meaning", async () => {
  assert.ok(queries.length >= 4, `queries found: ${queries.map((q) => q.name)}`);
  // The first request's primary hangs past the 50 ms delay: a hedge wins.
  let n = 0;
  const a = await origin("a", () => ({ delayMs: n++ === 0 ? 1_000 : 2 }));
  const b = await origin("b", () => ({ delayMs: 2 }));
  const logs = captureLogs();
  const mf = new Miniflare({
    handleRuntimeStdio: logs.handleRuntimeStdio,
    workers: [
      {
        ...workerOptions({
          HEDGE_ORIGINS: JSON.stringify(origins(a, b)),
          HEDGE_MODE: "static",
          HEDGE_STATIC_DELAY_MS: "50",
          HEDGE_BUDGET_FLOOR_PER_SEC: "1000",
          HEDGE_PRIMARY: "ordered",
          HEDGE_CACHE: "false",
          CF_VERSION_METADATA: { id: "5e0c9d1a-version", tag: "", timestamp: "" },
        }),
        name: "edge",
        ...captureEntry(),
      },
    ],
  });
  let points;
  try {
    await mf.ready;
    const edge = await mf.getWorker("edge");
    const first = await edge.fetch("http://edge.test/api/1");
    await first.arrayBuffer();
    assert.equal(first.headers.get("x-hedge"), "hedge");
    for (let i = 2; i <= 4; i++) await (await edge.fetch(`http://edge.test/api/${i}`)).arrayBuffer();
    const written = () => logs.lines.filter((l) => l.includes("AEPOINT ")).map((l) => JSON.parse(l.slice(l.indexOf("AEPOINT ") + 8)));
    await logs.until(() => written().length >= 4);
    points = written();
  } finally {
    await mf.dispose();
  }
  assert.equal(points.length, 4, "one data point per proxied request");
  // Analytics Engine's columns: blobN / doubleN / indexN are 1-based positions.
  const column = (p, name) => {
    const [, kind, k] = name.match(/^(blob|double|index)(\d+)$/);
    const list = { blob: p.blobs, double: p.doubles, index: p.indexes }[kind] ?? [];
    return list[Number(k) - 1];
  };
  for (const q of queries) {
    for (const name of new Set(q.sql.match(/\b(blob|double|index)\d+\b/g))) {
      assert.ok(points.every((p) => column(p, name) !== undefined), `${q.name} reads ${name}, which the Worker does not write`);
    }
  }
  // The meanings the page gives.
  assert.ok(points.every((p) => column(p, "blob5") === "5e0c9d1a-version"), "every row names the Worker version");
  const hedged = points.find((p) => column(p, "blob3") === "hedge");
  assert.ok(hedged, JSON.stringify(points));
  assert.equal(column(hedged, "blob1"), "b", "blob1: the origin whose answer the client got");
  assert.equal(column(hedged, "blob2"), "/api");
  assert.equal(column(hedged, "index1"), "/api");
  assert.equal(column(hedged, "blob4"), "static");
  assert.ok(column(hedged, "double1") >= 50, "double1: the client's latency, ms");
  assert.equal(column(hedged, "double2"), 50, "double2: the hedge delay, ms");
  assert.equal(column(hedged, "double3"), 200);
  assert.equal(column(hedged, "double4"), 1);
  const plain = points.filter((p) => column(p, "blob3") === "none");
  assert.equal(plain.length, 3);
  assert.ok(plain.every((p) => column(p, "double4") === 0 && column(p, "blob1") === "a"), JSON.stringify(plain));
});
