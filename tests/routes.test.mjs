// HEDGE_ROUTES: per-route policy in workerd. The longest prefix picks a
// request's policy; what it sets (mode, origins, budget, timeout, cache,
// methods) applies to that route only, and its name is the route in the
// stats and the metrics.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins, popAggregator, serverTiming } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { parseMetrics } from "./support/metrics.mjs";

const TOKEN = "test-token-0123456789abcdef";

test("each route runs on its own policy: off, its own origins and delay, its own timeout", async () => {
  // Every request to a takes 400 ms, ten times the 40 ms delays below.
  const a = await origin("a", () => ({ delayMs: 400, body: "a" }));
  const b = await origin("b", () => ({ delayMs: 2, body: "b" }));
  const c = await origin("c", (req) => ({ delayMs: req.url.includes("/slow") ? 3_000 : 2, body: "c" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b, c),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "40",
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_CACHE: "false",
    HEDGE_ROUTES: JSON.stringify([
      { prefix: "/static", name: "static-files", mode: "off" },
      { prefix: "/api", name: "api", origins: ["b", "c"] },
      { prefix: "/api/slow", name: "api-slow", origins: ["c"], timeout_ms: 300, mode: "static", static_delay_ms: 1000 },
    ]),
  });
  // /static: hedging off, so the 400 ms primary is waited for.
  const s = await w.fetch("/static/x.css");
  assert.equal(await s.text(), "a");
  assert.equal(s.headers.get("x-hedge"), "none");
  assert.match(s.headers.get("server-timing"), /hedge-skip;desc="off"/);
  // Elsewhere the same slow primary is hedged at 40 ms.
  const other = await w.fetch("/other");
  assert.equal(await other.text(), "b");
  assert.equal(other.headers.get("x-hedge"), "hedge");
  // /api: only b and c (b first, in HEDGE_ORIGINS order); a never sees it.
  const before = a.requests.length;
  for (let i = 0; i < 3; i++) {
    const r = await w.fetch(`/api/items/${i}`);
    assert.equal(await r.text(), "b");
    assert.equal(serverTiming(r.headers.get("server-timing")).origin.desc, "b");
  }
  assert.equal(a.requests.length, before, "a is not among /api's origins");
  // /api/slow (the longest prefix): its own 300 ms timeout, and its 1 s delay never comes.
  const started = Date.now();
  const slow = await w.fetch("/api/slow/report");
  assert.equal(slow.status, 504);
  await slow.arrayBuffer();
  const took = Date.now() - started;
  assert.ok(took >= 290 && took < 2_500, `the route's 300 ms timeout, not the global 30 s: ${took} ms`);
  assert.equal(b.requests.filter((r) => r.url.startsWith("/api/slow")).length, 0, "no hedge to b: only c is the route's");

  // The stats and the metrics name the routes by their policy.
  const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
  const names = new Set(stats.routes.map((r) => r.route));
  for (const name of ["static-files", "api", "api-slow"]) assert.ok(names.has(name), [...names].join(","));
  const m = parseMetrics(await (await w.fetch("/__hedge/metrics", { headers: { authorization: `Bearer ${TOKEN}` } })).text(), "prometheus");
  assert.equal(m.value("hedgehog_requests_total", { route: "api" }), 3);
  assert.equal(m.value("hedgehog_hedge_skips_total", { reason: "off" }), 1);
});

test("a route's own budget is its own bucket, and its methods and cache setting are its own", async () => {
  const a = await origin("a", () => ({ delayMs: 300, headers: { "cache-control": "max-age=60" }, body: "a" }));
  const b = await origin("b", () => ({ delayMs: 2, headers: { "cache-control": "max-age=60" }, body: "b" }));
  // No floor, and a global budget of 100%: the global bucket pays for a
  // hedge from the first request, a route's own 0% bucket never does.
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "30",
    HEDGE_BUDGET_FLOOR_PER_SEC: "0",
    HEDGE_BUDGET_PERCENT: "100",
    HEDGE_ROUTES: JSON.stringify([
      { prefix: "/thrifty", budget_percent: 0 },
      { prefix: "/nocache", cache: false },
      { prefix: "/put", methods: ["GET", "PUT"] },
    ]),
  });
  // Its own bucket earns nothing (0%): no hedge, whatever the global floor allows.
  const t = await w.fetch("/thrifty/1");
  assert.equal(await t.text(), "a");
  assert.match(t.headers.get("server-timing"), /hedge-skip;desc="budget"/);
  // The global bucket still pays elsewhere.
  const g = await w.fetch("/elsewhere/1");
  assert.equal(g.headers.get("x-hedge"), "hedge");
  await g.arrayBuffer();
  // Cache off on /nocache: the same URL twice reaches the origins twice.
  const count = () => a.requests.length + b.requests.length;
  const n0 = count();
  for (let i = 0; i < 2; i++) await (await w.fetch("/nocache/same")).arrayBuffer();
  assert.ok(count() - n0 >= 2, "not served from the cache");
  // PUT is hedgeable on /put only.
  const put = await w.fetch("/put/x", { method: "PUT", body: "v" });
  await put.arrayBuffer();
  assert.equal(put.headers.get("x-hedge"), "hedge");
  const elsewhere = await w.fetch("/other/x", { method: "PUT", body: "v" });
  await elsewhere.arrayBuffer();
  assert.equal(elsewhere.headers.get("x-hedge"), "none");
});

test("a bad HEDGE_ROUTES runs on no route policies, says why once, and the proxy works", async () => {
  const a = await origin("a", () => ({ body: "a" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_ROUTES: JSON.stringify([{ prefix: "/a", origins: ["nope"] }]),
  });
  const r = await w.fetch("/a/1");
  assert.equal(await r.text(), "a");
  const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
  const e = stats.config_errors.find((x) => x.key === "HEDGE_ROUTES");
  assert.ok(e, JSON.stringify(stats.config_errors));
  assert.match(e.reason, /"nope" is not in HEDGE_ORIGINS/);
});

test("a route with its own budget stops on its own PoP share while the rest keeps hedging", async () => {
  // Every primary on a takes 300 ms, fifteen times the 20 ms delay; the
  // buckets refill at once (floor), so only the PoP shares can stop hedges.
  const a = await origin("a", () => ({ delayMs: 300, body: "a" }));
  const b = await origin("b", () => ({ delayMs: 2, body: "b" }));
  const w = await worker(
    {
      HEDGE_ORIGINS: origins(a, b),
      HEDGE_MODE: "static",
      HEDGE_STATIC_DELAY_MS: "20",
      HEDGE_CACHE: "false",
      HEDGE_BUDGET_PERCENT: "100",
      HEDGE_TUNING: { pop_push_every_requests: "1", pop_push_interval_ms: "100" },
      HEDGE_ROUTES: JSON.stringify([{ prefix: "/api", name: "api", budget_percent: 10 }]),
    },
    popAggregator(),
  );
  const skip = async (path) => {
    const r = await w.fetch(path);
    await r.arrayBuffer();
    return serverTiming(r.headers.get("server-timing"))["hedge-skip"]?.desc ?? r.headers.get("x-hedge");
  };
  // Every /api request is hedged until the PoP says the route's share
  // (100% of its requests) is over its own 10%.
  const deadline = Date.now() + 10_000;
  let seen;
  for (let i = 0; (seen = await skip(`/api/${i}`)) !== "pop-budget"; i++) {
    assert.ok(Date.now() < deadline, `the route never stopped: last ${seen}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  // The global share is its own: other routes keep hedging.
  assert.equal(await skip("/other/1"), "hedge");
  assert.equal(await skip("/api/again"), "pop-budget");
});
