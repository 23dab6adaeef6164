// Origin health and hedge target choice, end to end: the built Worker in
// workerd in front of three loopback origins.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origin, worker } from "./support/harness.mjs";
import { origins } from "./support/worker.mjs";

const hedgesAt = (o) => o.requests.filter((r) => r.headers["x-hedge-attempt"] === "true").length;

test("hedges prefer an origin in another zone", async () => {
  const a = await origin("a", () => ({ delayMs: 400, body: "from-a" }));
  const sameZone = await origin("same-zone", () => ({ body: "from-same-zone" }));
  const otherZone = await origin("other-zone", () => ({ body: "from-other-zone" }));
  const w = await worker({
    HEDGE_ORIGINS: [
      { name: "a", url: a.url, zone: "eu" },
      { name: "same-zone", url: sameZone.url, zone: "eu" },
      { name: "other-zone", url: otherZone.url, zone: "us" },
    ],
    HEDGE_TUNING: { cold_delay_ms: "20" },
  });
  for (let i = 0; i < 4; i++) {
    const res = await w.fetch(`/z/${i}`);
    assert.equal(await res.text(), "from-other-zone");
  }
  assert.equal(hedgesAt(otherZone), 4);
  assert.equal(sameZone.requests.length, 0);
});

test("a degraded origin gets no hedges until a trial after the cool-down succeeds", async () => {
  let bHealthy = false;
  const a = await origin("a", () => ({ delayMs: 100, body: "from-a" }));
  const b = await origin("b", () => (bHealthy ? { body: "from-b" } : { status: 502, body: "down" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b), // in different zones
    // The cool-down: longer than the rest of the first phase (4 requests of ~100 ms).
    HEDGE_TUNING: { cold_delay_ms: "20", health_cooldown_ms: "3000", same_origin_hedge: "false" },
  });
  // Five hedges fail at b (502: the primary's answer is used), then b is degraded.
  for (let i = 0; i < 8; i++) {
    const res = await w.fetch(`/d/${i}`);
    assert.equal(await res.text(), "from-a");
  }
  assert.equal(b.requests.length, 5, "no hedges reach b once it is degraded");
  const skipped = await w.fetch("/d/skip");
  await skipped.text();
  assert.match(skipped.headers.get("server-timing"), /hedge-skip;desc="no-target"/);

  // b recovers; after the cool-down one hedge is its trial, and it wins.
  bHealthy = true;
  await new Promise((r) => setTimeout(r, 3_100));
  const trial = await w.fetch("/d/trial");
  assert.equal(await trial.text(), "from-b");
  assert.equal(trial.headers.get("x-hedge"), "hedge");
  const after = await w.fetch("/d/after");
  assert.equal(await after.text(), "from-b", "b takes hedges again");
});

test("a hedge answered 503 (shed) never reaches the client: the primary answers", async () => {
  const a = await origin("a", () => ({ delayMs: 300, body: "from-a" }));
  const b = await origin("b", (req) => (req.headers["x-hedge-attempt"] ? { status: 503, body: "shed" } : {}));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b), // in different zones
    HEDGE_TUNING: { cold_delay_ms: "20" },
  });
  for (let i = 0; i < 3; i++) {
    const res = await w.fetch(`/s/${i}`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "from-a");
  }
  assert.equal(hedgesAt(b), 3);
});

test("a 5xx burst at the hedge target cuts hedges to the reduced budget; they recover after the window", async (t) => {
  // b answers every 4th request with 503 during the burst: a 5xx rate well
  // past the 5xx reduce rate and below the 5xx stop rate.
  let burst = false;
  let seenInBurst = 0;
  const a = await origin("a", () => ({ delayMs: 100, body: "from-a" }));
  const b = await origin("b", () => {
    if (burst && seenInBurst++ % 4 === 0) return { status: 503, body: "shed" };
    return { body: "from-b" };
  });
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b), // in different zones
    HEDGE_CACHE: "false",
    // Deposits per request only (no time floor): hedge counts do not depend on
    // how fast this machine runs the requests.
    HEDGE_BUDGET_PERCENT: "50",
    HEDGE_BUDGET_FLOOR_PER_SEC: "0",
    HEDGE_TUNING: {
      // Every request is slow enough to hedge; the delay stays the cold one.
      cold_delay_ms: "20",
      min_data_points: "1000000",
      budget_max_tokens: "1",
      "5xx_reduce_rate": "0.02",
      "5xx_reduced_budget_percent": "10",
      "5xx_stop_rate": "0.5",
      // Not 1: the newest sub-windows holding this many requests count too, and
      // b takes about one hedge a second during the burst, so with 1 a
      // sub-window holding nothing but the burst's first 503 (100%) stopped
      // hedging to b for the rest of the window; whether it did depended on
      // where the sub-window boundaries fell (1 run in 4 here). With 5, no
      // sub-window of the burst qualifies and the whole window decides.
      health_min_requests: "5",
      window_secs: "6",
      sub_windows: "6",
      // b is the only place a hedge can go (with same-origin hedges allowed,
      // the tail-aware policy would hedge on a instead of the erroring b:
      // tests/tail_aware.test.mjs).
      same_origin_hedge: "false",
    },
  });
  const phase = async (name, n) => {
    const before = hedgesAt(b);
    for (let i = 0; i < n; i++) {
      const res = await w.fetch(`/${name}/${i}`);
      assert.equal(res.status, 200, "a shed hedge never reaches the client");
      await res.text();
    }
    return hedgesAt(b) - before;
  };
  const healthy = await phase("before", 20);
  assert.ok(healthy >= 9 && healthy <= 11, `before the burst: ${healthy} hedges for 20 requests (budget 50%)`);

  burst = true;
  const during = await phase("burst", 40);
  // 10% of 40 requests plus the one token the reduced bucket holds.
  assert.ok(during <= 6, `during the burst: ${during} hedges for 40 requests (reduced budget 10%)`);
  assert.ok(during >= 2, `during the burst: ${during} hedges, the reduced budget still hedges`);

  // The burst ends; once its 503s have left the 6 s window, the full budget is back.
  burst = false;
  await new Promise((r) => setTimeout(r, 7_000));
  const recovered = await phase("after", 20);
  t.diagnostic(`hedges: ${healthy}/20 before, ${during}/40 during the burst, ${recovered}/20 after`);
  assert.ok(recovered >= 9, `after the window: ${recovered} hedges for 20 requests`);
});
