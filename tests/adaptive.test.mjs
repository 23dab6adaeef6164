// The adaptive hedge delay tracks the origin's measured latency quantile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins, serverTiming } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

test("after warm-up the delay is within 10% of the configured quantile + offset", async (t) => {
  // Latencies cycle through 100, 101, ..., 199 ms: uniform, so p95 is 194 ms
  // (nearest rank over each full cycle of 100).
  let n = 0;
  const a = await origin("a", () => ({ delayMs: 100 + (n++ % 100) }));
  const OFFSET = 10;
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_QUANTILE: "p95",
    HEDGE_OFFSET_MS: String(OFFSET),
    HEDGE_MIN_DATA_POINTS: "50",
    HEDGE_COLD_DELAY_MS: "10000",
  });

  const first = await w.fetch("/api/items/0");
  await first.arrayBuffer();
  assert.equal(serverTiming(first.headers.get("server-timing"))["hedge-delay"].desc, "cold");

  for (let batch = 0; batch < 10; batch++) {
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => w.fetch(`/api/items/${batch * 20 + i}`).then((r) => r.arrayBuffer())),
    );
  }
  const res = await w.fetch("/api/items/last");
  await res.arrayBuffer();
  const timing = serverTiming(res.headers.get("server-timing"))["hedge-delay"];
  const expected = 194 + OFFSET;
  t.diagnostic(`hedge delay after warm-up: ${timing.dur} ms (${timing.desc}); expected ${expected} ms`);
  assert.equal(timing.desc, "route");
  assert.ok(Math.abs(timing.dur - expected) / expected <= 0.1, `delay ${timing.dur} vs ${expected}`);
});
