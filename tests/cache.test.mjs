// The edge cache in front of the race: hits are served with no origin request
// (and so never hedged); credentials and no-cache bypass it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { stored } from "./support/cache.mjs";
import { parseMetrics } from "./support/metrics.mjs";

const TOKEN = "test-token-0123456789abcdef";

async function setup(headers) {
  const a = await origin("a", (req) => ({ headers, body: `body-of-${req.url}` }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  return { a, w };
}

test("a cacheable response is stored; the next identical request makes no origin request", async () => {
  const { a, w } = await setup({ "cache-control": "public, max-age=60" });
  const first = await w.fetch("/c/1");
  assert.equal(await first.text(), "body-of-/c/1");
  assert.equal(first.headers.get("x-hedge"), "none");
  await stored(w, "/c/1");
  const second = await w.fetch("/c/1");
  assert.equal(await second.text(), "body-of-/c/1");
  assert.equal(second.headers.get("x-hedge"), "cache");
  assert.match(second.headers.get("server-timing"), /cache;desc="hit"/);
  assert.equal(a.requests.length, 1);

  // Authorization and no-cache requests are neither served from the cache...
  for (const headers of [{ authorization: "Bearer t" }, { "cache-control": "no-cache" }, { cookie: "s=1" }]) {
    const res = await w.fetch("/c/1", { headers });
    await res.text();
    assert.notEqual(res.headers.get("x-hedge"), "cache", JSON.stringify(headers));
  }
  assert.equal(a.requests.length, 4);
});

test("credentialed requests do not fill the cache", async () => {
  const { a, w } = await setup({ "cache-control": "public, max-age=60" });
  const res = await w.fetch("/c/private", { headers: { authorization: "Bearer t" } });
  await res.text();
  // A later cacheable request's store completing shows the stores have run.
  const other = await w.fetch("/c/other");
  await other.text();
  await stored(w, "/c/other");
  const caches = await w.mf.getCaches();
  assert.equal(await caches.default.match("http://edge.test/c/private"), undefined);
  const again = await w.fetch("/c/private");
  await again.text();
  assert.notEqual(again.headers.get("x-hedge"), "cache");
  assert.equal(a.requests.length, 3);
});

test("responses that are not shared-cacheable are not stored", async () => {
  const { a, w } = await setup({ "cache-control": "private, max-age=60" });
  for (let i = 0; i < 2; i++) {
    const res = await w.fetch("/c/p");
    await res.text();
    assert.equal(res.headers.get("x-hedge"), "none");
  }
  assert.equal(a.requests.length, 2);
});

/** A deterministic body of `bytes` bytes that differs per path. */
function bigBody(path, bytes) {
  const unit = `${path}|0123456789abcdefghijklmnopqrstuvwxyz|`;
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

test("50 concurrent identical cacheable GETs make one origin request and get 50 intact bodies", async () => {
  const size = 256 * 1024;
  // The origin answers after 1 s: far longer than 50 dispatches take to arrive,
  // so every request finds the first one's fetch still in flight.
  const a = await origin("a", (req) => ({
    delayMs: 1_000,
    headers: { "cache-control": "public, max-age=60" },
    body: bigBody(req.url, size),
  }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: TOKEN });
  // Coalescing starts once the route has shown it answers storably: one
  // earlier response on the same route (another URL) teaches the isolate.
  const warm = await w.fetch("/hot/warm-up", { headers: { "accept-encoding": "identity" } });
  await warm.arrayBuffer();
  const responses = await Promise.all(
    Array.from({ length: 50 }, () => w.fetch("/hot/item", { headers: { "accept-encoding": "identity" } })),
  );
  const expected = bigBody("/hot/item", size);
  const labels = {};
  // Fifty clients read their answers at once, as fifty clients would. (Read
  // one after another, a body left unread for about a second after its
  // entry was stored came out empty in Miniflare 5's local cache, behind a
  // content-length of 256 KiB; entries stored earlier did not.)
  // A body that cannot be read fails the test with what its response was
  // (one CI run in many failed here with "Body is unusable" and no more).
  const bodies = await Promise.all(
    responses.map((res, i) =>
      res.text().catch((e) => {
        const h = (name) => res.headers.get(name);
        const seen = { i, status: res.status, xHedge: h("x-hedge"), contentLength: h("content-length"), bodyUsed: res.bodyUsed };
        throw new Error(`response ${JSON.stringify(seen)}: ${e.message}`);
      }),
    ),
  );
  for (const [i, res] of responses.entries()) {
    assert.equal(res.status, 200);
    assert.equal(bodies[i], expected);
    const label = res.headers.get("x-hedge");
    labels[label] = (labels[label] ?? 0) + 1;
  }
  const hot = a.requests.filter((r) => r.url === "/hot/item");
  const hedges = hot.filter((r) => r.headers["x-hedge-attempt"]).length;
  assert.ok(hedges <= 1, `${hedges} hedges`);
  assert.equal(hot.length - hedges, 1, `origin requests: ${hot.length}`);
  assert.equal(labels.coalesced, 49, JSON.stringify(labels));
  // The metrics count them as the clients saw them.
  const text = await (await w.fetch("/__hedge/metrics", { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  const m = parseMetrics(text, "prometheus");
  assert.equal(m.sum("hedgehog_served_total", { how: "coalesced" }), 49);
  assert.equal(m.sum("hedgehog_served_total", { how: "origin" }), 2, "the warm-up and the leader");
});

test("credentialed and no-cache requests are not coalesced", async () => {
  const a = await origin("a", () => ({ delayMs: 500, headers: { "cache-control": "public, max-age=60" } }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const kinds = [{ authorization: "Bearer t" }, { "cache-control": "no-cache" }];
  const responses = await Promise.all(
    kinds.flatMap((headers) => Array.from({ length: 5 }, () => w.fetch("/hot/private", { headers }))),
  );
  for (const res of responses) {
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(res.headers.get("x-hedge"), "none");
  }
  assert.equal(a.requests.length, 10);
});

test("waiters on a response that cannot be stored fetch for themselves", async () => {
  const a = await origin("a", () => ({ delayMs: 500, headers: { "cache-control": "private" } }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const responses = await Promise.all(Array.from({ length: 5 }, () => w.fetch("/hot/uncacheable")));
  for (const res of responses) {
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "a:/hot/uncacheable");
    assert.equal(res.headers.get("x-hedge"), "none");
  }
  assert.equal(a.requests.length, 5);
});
