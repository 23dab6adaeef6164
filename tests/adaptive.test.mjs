// The adaptive hedge delay tracks the origin's measured latency quantile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { origins, serverTiming } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

test("after warm-up the delay is within 10% of the measured quantile + offset", async (t) => {
  // Latencies cycle through 100, 101, ..., 199 ms: uniform, so the origin's
  // p95 is 194 ms (nearest rank over each full cycle of 100).
  let n = 0;
  const a = await origin("a", () => ({ delayMs: 100 + (n++ % 100) }));
  const OFFSET = 10;
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_TUNING: { quantile: "p95", offset_ms: String(OFFSET), min_data_points: "50", cold_delay_ms: "10000" },
  });

  const first = await w.fetch("/api/items/0");
  await first.arrayBuffer();
  assert.equal(serverTiming(first.headers.get("server-timing"))["hedge-delay"].desc, "cold");

  // The delay tracks the latency the Worker observes, which lies between the
  // origin's own time and what the client sees (20 concurrent requests on a
  // 2-core machine add 10-20 ms to each); both are measured here.
  const clientMs = [];
  for (let batch = 0; batch < 10; batch++) {
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const started = performance.now();
        const r = await w.fetch(`/api/items/${batch * 20 + i}`);
        await r.arrayBuffer();
        clientMs.push(performance.now() - started);
      }),
    );
  }
  const res = await w.fetch("/api/items/last");
  await res.arrayBuffer();
  const timing = serverTiming(res.headers.get("server-timing"))["hedge-delay"];
  const originMs = a.requests.filter((r) => r.answeredAt !== null).map((r) => r.answeredAt - r.receivedAt);
  const p95 = (xs) => [...xs].sort((x, y) => x - y)[Math.ceil(0.95 * xs.length) - 1];
  const low = p95(originMs) + OFFSET;
  const high = p95(clientMs) + OFFSET;
  t.diagnostic(
    `hedge delay after warm-up: ${timing.dur} ms (${timing.desc}); origin-side p95 + offset ${low.toFixed(1)} ms, client-side ${high.toFixed(1)} ms`,
  );
  assert.equal(timing.desc, "route");
  assert.ok(timing.dur >= 0.9 * low && timing.dur <= 1.1 * high, `delay ${timing.dur} outside [${0.9 * low}, ${1.1 * high}]`);
});
