// The stats endpoint: served only with a configured bearer token, refused
// without the right one, and reporting hedges, wins and wasted origin work.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

const TOKEN = "test-token-0123456789abcdef";

test("without a token the stats path is not served: it goes to the origin like any path", async () => {
  const a = await origin("a", () => ({}));
  const w = await worker({ HEDGE_ORIGINS: origins(a) });
  const res = await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(await res.text(), "a:/__hedge/stats");
  assert.equal(a.requests.length, 1);
});

test("the stats need the exact bearer token and report hedges, wins and wasted work", async () => {
  // The first primary request hangs for 2 s, far past the 50 ms static hedge delay.
  let n = 0;
  const a = await origin("a", () => ({ delayMs: n++ === 0 ? 2_000 : 1 }));
  const b = await origin("b", () => ({ delayMs: 1 }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "50",
    HEDGE_STATS_TOKEN: TOKEN,
  });
  for (const headers of [{}, { authorization: "Bearer wrong-token-0123456789abcd" }, { authorization: TOKEN }]) {
    const res = await w.fetch("/__hedge/stats", { headers });
    assert.equal(res.status, 401, JSON.stringify(headers));
    assert.equal(res.headers.get("www-authenticate"), "Bearer");
    assert.equal((await res.json()).error, "unauthorized");
  }
  const first = await w.fetch("/api/slow");
  await first.text();
  assert.equal(first.headers.get("x-hedge"), "hedge");
  for (let i = 0; i < 3; i++) await (await w.fetch(`/api/fast/${i}`)).text();
  assert.equal(a.requests.length + b.requests.length, 5, "stats requests never reach an origin");

  const res = await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("cache-control"), "no-store");
  const stats = await res.json();
  const api = stats.routes.find((r) => r.route === "/api");
  assert.ok(api, JSON.stringify(stats.routes));
  assert.equal(stats.routes.length, 1, "one row per route");
  assert.equal(api.requests, 4);
  assert.equal(api.hedges_sent, 1);
  assert.equal(api.hedges_won, 1);
  assert.equal(api.win_ratio, 1);
  assert.ok(api.wasted_origin_ms >= 40, `wasted ${api.wasted_origin_ms}`);
  assert.deepEqual(
    stats.origins.map((o) => [o.name, o.degraded, o.hedge_budget]),
    [["a", false, "full"], ["b", false, "full"]],
  );
  // The hedge that won cut a's first request short: a recorded the three fast
  // answers, b the winning hedge; no 5xx anywhere.
  assert.deepEqual(
    stats.origins.map((o) => [o.window_requests, o.window_5xx_rate]),
    [[3, 0], [1, 0]],
  );
  // Each origin with samples on the route: the delay it would get as the primary.
  const onA = api.origins.find((o) => o.origin === "a");
  assert.ok(onA, JSON.stringify(api.origins));
  assert.equal(onA.hedge_delay_ms, 50);
  assert.equal(onA.delay_basis, "static");
  assert.equal(typeof stats.budget_tokens, "number");
  assert.equal(stats.pop.enabled, false);

  const post = await w.fetch("/__hedge/stats", { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(post.status, 405);
  await post.text();
});

test("a short stats token is a configuration error that leaves the stats page off, not the proxy, and is not echoed", async () => {
  const a = await origin("a", () => ({ body: "from-a" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: "short-secret" });
  const res = await w.fetch("/anything");
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "from-a");
  // No token in force: the stats path is proxied like any other, answering nothing of the Worker's.
  const stats = await w.fetch("/__hedge/stats", { headers: { authorization: "Bearer short-secret" } });
  const text = await stats.text();
  assert.doesNotMatch(text, /short-secret|budget_tokens/);
});
test("two tokens are accepted while rotating, and a host-prefixed path serves the pages on that host only", async () => {
  const a = await origin("a", (req) => ({ body: `a:${req.url}` }));
  const OLD = "old-token-0123456789abcdef";
  const NEW = "new-token-0123456789abcdef";
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_STATS_TOKEN: `${OLD} ${NEW}`,
    HEDGE_STATS_PATH: "ops.edge.test/__hedge/stats",
  });
  const on = (host, path, token) =>
    w.mf.dispatchFetch(`http://${host}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  for (const token of [OLD, NEW]) {
    const res = await on("ops.edge.test", "/__hedge/metrics", token);
    assert.equal(res.status, 200, token);
    assert.match(await res.text(), /hedgehog_requests/);
  }
  const wrong = await on("ops.edge.test", "/__hedge/stats", "another-token-0123456789");
  assert.equal(wrong.status, 401);
  await wrong.text();
  // On the API's own host the path is the origin's, like any other path.
  const api = await on("edge.test", "/__hedge/stats", OLD);
  assert.equal(await api.text(), "a:/__hedge/stats");
  assert.equal(a.requests.length, 1, "only the request on another host reached the origin");
});
