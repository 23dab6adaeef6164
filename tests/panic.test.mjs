// A panic in the Worker (src/edge/panic.rs, src/entry.mjs): the requests in
// flight get a 500 with their request id at once, the next request is
// answered normally by a fresh instance, and that instance's learned state
// comes back from the PoP aggregate. The trigger exists only in the test
// build (`bash scripts/build.sh --test`, feature `test-panic`).
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { origins, popAggregator, serverTiming } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const scriptPath = path.join(process.env.HEDGEHOG_TEST_BUILD_DIR ?? path.join(root, "build-test"), "index.js");
const TOKEN = "panic-test-token-0123456789";

async function delayBasis(res) {
  await res.arrayBuffer();
  return serverTiming(res.headers.get("server-timing"))["hedge-delay"]?.desc;
}

for (const when of ["now", "later"]) {
  test(`a panic (${when}) costs the requests in flight a 500 with their ids; the next request is served and relearns from the PoP`, async () => {
    // The slow path holds a request in flight across the panic.
    const a = await origin("a", (req) => ({ delayMs: req.url.startsWith("/slow") ? 3_000 : 20 }));
    const b = await origin("b", (req) => ({ delayMs: req.url.startsWith("/slow") ? 3_000 : 20 }));
    const w = await worker(
      {
        HEDGE_ORIGINS: origins(a, b),
        // A cold delay far from the origins' 20 ms, and a PoP answer after
        // every few requests, so where the delay came from is unmistakable.
        HEDGE_TUNING: { cold_delay_ms: "5000", min_data_points: "20", pop_push_every_requests: "5" },
        HEDGE_STATS_TOKEN: TOKEN,
      },
      { ...popAggregator(), scriptPath },
    );
    const pop = await w.fillPop(40);
    assert.ok(pop.samples >= 40, `the aggregator holds ${pop.samples} samples`);
    // Requests this isolate has counted (its route stats).
    const counted = async () => {
      const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
      return stats.routes.reduce((sum, r) => sum + r.requests, 0);
    };
    const before = await counted();
    assert.ok(before >= 40, `requests before: ${before}`);

    const inFlight = w.fetch("/slow/in-flight", { headers: { "x-request-id": "in-flight-1" } });
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    const panicked = await w.fetch("/api/boom", { headers: { "x-hedgehog-test-panic": when, "x-request-id": "boom-1" } });
    assert.equal(panicked.status, 500);
    assert.equal(panicked.headers.get("x-request-id"), "boom-1");
    const body = await panicked.json();
    assert.equal(body.error, "internal_error");
    assert.equal(body.request_id, "boom-1");
    const lost = await inFlight;
    assert.equal(lost.status, 500, "the request in flight was lost with the instance");
    assert.equal((await lost.json()).request_id, "in-flight-1");
    // At once: the slow origin answers only after 3 s.
    assert.ok(Date.now() - started < 1_500, `lost requests answered after ${Date.now() - started} ms`);

    // A request without an id of its own gets a fresh one.
    const anonymous = await w.fetch("/api/boom-2", { headers: { "x-hedgehog-test-panic": when } });
    assert.equal(anonymous.status, 500);
    assert.match((await anonymous.json()).request_id, /^[0-9a-f]{32}$/);

    // The next request: a fresh instance answers normally, from the PoP's
    // delay once its first push is answered (its own data is gone).
    const next = await w.fetch("/api/after");
    assert.equal(next.status, 200);
    assert.equal(await next.text(), "a:/api/after");
    const after = await counted();
    assert.ok(after < 5, `a fresh instance: ${after} requests in its stats`);
    let basis;
    for (let i = 0; i < 10 && basis !== "pop"; i++) basis = await delayBasis(await w.fetch(`/api/again/${i}`));
    assert.equal(basis, "pop", "the fresh instance hedges on the PoP's delay");
  });
}
