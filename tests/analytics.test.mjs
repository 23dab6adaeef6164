// The Analytics Engine queries in docs/analytics.md read only columns the
// Worker writes, with the meaning the page gives them: the Worker runs with
// an ANALYTICS binding that logs each data point, and every blobN / doubleN /
// indexN a query names is checked against the points written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "./support/miniflare.mjs";
import { origins, workerOptions } from "./support/worker.mjs";
import { origin } from "./support/harness.mjs";
import { captureLogs } from "./support/logs.mjs";
import { captureEntry } from "./support/analytics-capture.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const doc = readFileSync(path.join(root, "docs/analytics.md"), "utf8");
const queries = [...doc.matchAll(/```sql\n-- query: ([\w-]+)\n([\s\S]*?)```/g)].map((m) => ({ name: m[1], sql: m[2] }));

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
          // Every request in the sample (weight 1), to read every column.
          HEDGE_ANALYTICS_SAMPLE_PERCENT: "100",
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
  assert.ok(points.every((p) => column(p, "double5") === 1), "double5: each row stands for one request at 100%");
  const plain = points.filter((p) => column(p, "blob3") === "none");
  assert.equal(plain.length, 3);
  assert.ok(plain.every((p) => column(p, "double4") === 0 && column(p, "blob1") === "a"), JSON.stringify(plain));
});

test("by default one successful request in 100 is written, weighted 100, and every 5xx, weighted 1", async () => {
  // Every 10th request is for a path the origin always answers 503 (a
  // retry gets the same; the origin's own answer goes to the client).
  const a = await origin("a", (req) => (req.url.includes("/fail") ? { status: 503, delayMs: 1 } : { delayMs: 1 }));
  const logs = captureLogs();
  const mf = new Miniflare({
    handleRuntimeStdio: logs.handleRuntimeStdio,
    workers: [{ ...workerOptions({ HEDGE_ORIGINS: JSON.stringify(origins(a)), HEDGE_CACHE: "false", HEDGE_LOG_LEVEL: "off" }), name: "edge", ...captureEntry() }],
  });
  const statuses = {};
  let points;
  try {
    await mf.ready;
    const edge = await mf.getWorker("edge");
    for (let i = 0; i < 400; i++) {
      const res = await edge.fetch(i % 10 === 9 ? `http://edge.test/api/fail-${i}` : `http://edge.test/api/${i}`);
      await res.arrayBuffer();
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    }
    const written = () => logs.lines.filter((l) => l.includes("AEPOINT ")).map((l) => JSON.parse(l.slice(l.indexOf("AEPOINT ") + 8)));
    await logs.until(() => written().filter((p) => p.doubles[2] === 503).length >= statuses[503]);
    points = written();
  } finally {
    await mf.dispose();
  }
  assert.deepEqual(statuses, { 200: 360, 503: 40 });
  const errors = points.filter((p) => p.doubles[2] === 503);
  const ok = points.filter((p) => p.doubles[2] === 200);
  assert.equal(errors.length, 40, "every 5xx is written");
  assert.ok(errors.every((p) => p.doubles[4] === 1));
  // 360 draws at 1%: 3.6 expected; 25 or more has odds below 1e-12.
  assert.ok(ok.length < 25, `${ok.length} of 360 successful requests written`);
  assert.ok(ok.every((p) => p.doubles[4] === 100), JSON.stringify(ok.map((p) => p.doubles)));
});
