// /__hedge/metrics: Prometheus text (and OpenMetrics when asked for) behind
// the stats token, checked with the Prometheus client's own parsers; the
// isolate scope counts this isolate's races, the PoP scope (?scope=pop) sums
// every isolate's pushes in the aggregator.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Miniflare } from "./support/miniflare.mjs";
import { origins, popAggregator, workerOptions } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { parseMetrics } from "./support/metrics.mjs";

const TOKEN = "test-token-0123456789abcdef";
const auth = { authorization: `Bearer ${TOKEN}` };

test("the isolate's metrics parse in both formats and count its races, hedges, legs and latencies", async () => {
  // The first primary request hangs for 2 s, forty times the 50 ms static
  // delay: it is hedged, the hedge wins and the primary is aborted.
  let n = 0;
  const a = await origin("a", () => ({ delayMs: n++ === 0 ? 2_000 : 1 }));
  const b = await origin("b", () => ({ delayMs: 1 }));
  const started = Date.now() / 1000;
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "50",
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_CACHE: "false",
  });
  const refused = await w.fetch("/__hedge/metrics");
  assert.equal(refused.status, 401);
  await refused.text();
  const first = await w.fetch("/api/slow");
  await first.text();
  assert.equal(first.headers.get("x-hedge"), "hedge");
  for (let i = 0; i < 4; i++) await (await w.fetch(`/api/fast/${i}`)).text();
  await (await w.fetch("/static/x")).text();

  const res = await w.fetch("/__hedge/metrics", { headers: auth });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  assert.equal(res.headers.get("cache-control"), "no-store");
  const m = parseMetrics(await res.text(), "prometheus");
  assert.equal(m.types.hedgehog_requests, "counter");
  assert.equal(m.types.hedgehog_request_duration_seconds, "histogram");
  assert.equal(m.value("hedgehog_requests_total", { route: "/api" }), 5);
  assert.equal(m.value("hedgehog_requests_total", { route: "/static" }), 1);
  assert.equal(m.value("hedgehog_hedges_total", { route: "/api", cause: "delay", outcome: "won" }), 1);
  assert.equal(m.value("hedgehog_hedges_total", { route: "/api", cause: "delay", outcome: "lost" }), 0);
  assert.equal(m.value("hedgehog_origin_legs_total", { origin: "a", leg: "primary", outcome: "aborted" }), 1);
  assert.equal(m.value("hedgehog_origin_legs_total", { origin: "a", leg: "primary", outcome: "won" }), 5);
  assert.equal(m.value("hedgehog_origin_legs_total", { origin: "b", leg: "hedge", outcome: "won" }), 1);
  assert.equal(m.value("hedgehog_request_duration_seconds_count", { route: "/api" }), 5);
  // The slow request took at least the 50 ms delay; the four fast ones far less.
  assert.equal(m.value("hedgehog_request_duration_seconds_bucket", { route: "/api", le: "+Inf" }), 5);
  assert.ok(m.value("hedgehog_request_duration_seconds_bucket", { route: "/api", le: "0.05" }) <= 4);
  assert.ok(m.value("hedgehog_request_duration_seconds_sum", { route: "/api" }) >= 0.05);
  assert.equal(m.value("hedgehog_hedge_delay_seconds_count", { origin: "a" }), 6);
  assert.equal(m.value("hedgehog_hedge_delay_seconds_bucket", { origin: "a", le: "0.05" }), 6, "the static 50 ms delay");
  assert.equal(m.value("hedgehog_origin_up", { origin: "a" }), 1);
  assert.equal(m.value("hedgehog_route_hedge_delay_seconds", { origin: "a", route: "/api", basis: "static" }), 0.05);
  assert.equal(typeof m.value("hedgehog_budget_tokens"), "number");
  assert.equal(m.value("hedgehog_origin_legs_in_flight", { origin: "a" }), 0);
  // Every sample names the isolate, and its start time is this test's.
  const ids = new Set(m.samples.map((s) => s.labels.isolate));
  assert.equal(ids.size, 1);
  assert.match([...ids][0], /^[0-9a-f]{16}$/);
  const start = m.value("hedgehog_isolate_start_time_seconds");
  assert.ok(start >= started - 1 && start <= Date.now() / 1000 + 1, `start ${start}`);
  assert.equal(a.requests.length + b.requests.length, 7, "metrics requests never reach an origin");

  const om = await w.fetch("/__hedge/metrics", { headers: { ...auth, accept: "application/openmetrics-text; version=1.0.0" } });
  assert.equal(om.headers.get("content-type"), "application/openmetrics-text; version=1.0.0; charset=utf-8");
  const text = await om.text();
  assert.ok(text.endsWith("# EOF\n"));
  const o = parseMetrics(text, "openmetrics");
  assert.equal(o.types.hedgehog_isolate, "info");
  assert.equal(o.value("hedgehog_requests_total", { route: "/api" }), 5);
  assert.equal(o.value("hedgehog_hedges_total", { route: "/api", cause: "delay", outcome: "won" }), 1);

  const post = await w.fetch("/__hedge/metrics", { method: "POST", headers: auth });
  assert.equal(post.status, 405);
  await post.text();
});

test("a route label value a client chose is escaped, and route labels are bounded", async () => {
  const a = await origin("a", () => ({}));
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_CACHE: "false",
    HEDGE_ROUTES: JSON.stringify([{ prefix: '/we"ird\\' }]),
  });
  await (await w.fetch('/we"ird\\/x')).text();
  for (let i = 0; i < 80; i++) await (await w.fetch(`/r${i}/x`)).text();
  const m = parseMetrics(await (await w.fetch("/__hedge/metrics", { headers: auth })).text(), "prometheus");
  const routes = m.samples.filter((s) => s.name === "hedgehog_requests_total").map((s) => s.labels.route);
  assert.ok(routes.length <= 65, `${routes.length} route labels`);
  assert.equal(m.sum("hedgehog_requests_total"), 81, "none lost past the bound");
  assert.ok(routes.includes("_other"));
});

test("the PoP scope sums every isolate's pushes; without the aggregator it says so", async () => {
  const a = await origin("a", (req) => (req.url.includes("/fail") ? { status: 503, body: "busy" } : { delayMs: 1 }));
  const vars = {
    HEDGE_ORIGINS: origins(a),
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_CACHE: "false",
    HEDGE_TUNING: { pop_push_every_requests: "1", pop_push_interval_ms: "100" },
  };
  const pop = popAggregator();
  // Two Worker versions live at once, as in a gradual deployment.
  const versionOf = (i) => (i === 0 ? "0b7e-new" : "a1c3-old");
  const workers = Array.from({ length: 3 }, (_, i) => ({
    ...workerOptions({ ...vars, CF_VERSION_METADATA: { id: versionOf(i), tag: "", timestamp: "" } }),
    name: `isolate-${i}`,
    durableObjects: { POP_AGGREGATOR: { className: "PopAggregator", scriptName: "isolate-0", useSQLite: true } },
  }));
  const mf = new Miniflare({ workers, cf: pop.cf });
  try {
    await mf.ready;
    const isolates = await Promise.all(workers.map((w) => mf.getWorker(w.name)));
    const PER = 6;
    for (let k = 0; k < PER; k++) {
      for (const [i, isolate] of isolates.entries()) {
        await (await isolate.fetch(`http://edge.test/api/${i}/${k}`)).arrayBuffer();
      }
      await new Promise((r) => setTimeout(r, 120)); // past the push interval: every isolate pushes again
    }
    // Pushes run after each response: wait (bounded) until the aggregator has all of them.
    const scrape = async () => {
      const res = await isolates[1].fetch("http://edge.test/__hedge/metrics?scope=pop", { headers: auth });
      assert.equal(res.status, 200);
      return parseMetrics(await res.text(), "prometheus");
    };
    let m = await scrape();
    for (let tries = 0; m.sum("hedgehog_requests_total") < 3 * PER && tries < 50; tries++) {
      await isolates[0].fetch("http://edge.test/__hedge/stats", { headers: auth }).then((r) => r.arrayBuffer());
      await new Promise((r) => setTimeout(r, 100));
      m = await scrape();
    }
    // The last requests' pushes may still be behind; every earlier one is in.
    const total = m.sum("hedgehog_requests_total");
    assert.ok(total >= 3 * (PER - 1) && total <= 3 * PER, `PoP requests ${total} of ${3 * PER}`);
    assert.equal(new Set(m.samples.map((s) => s.labels.pop)).size, 1, "every sample names the PoP");
    assert.equal(m.value("hedgehog_origin_legs_total", { origin: "a", leg: "primary", outcome: "won" }), total);
    assert.equal(m.value("hedgehog_pop_hedge_ratio"), 0);
    assert.ok(m.value("hedgehog_pop_pushes_total") >= 3);
    // Split by version: one isolate runs the new version, two the old.
    const byVersion = (v) => m.value("hedgehog_version_requests_total", { version: v });
    assert.equal(byVersion("0b7e-new") + byVersion("a1c3-old"), total);
    assert.ok(byVersion("0b7e-new") >= PER - 1 && byVersion("a1c3-old") >= 2 * (PER - 1), `${byVersion("0b7e-new")} / ${byVersion("a1c3-old")}`);
    const first = parseMetrics(await (await isolates[0].fetch("http://edge.test/__hedge/metrics", { headers: auth })).text(), "prometheus");
    assert.equal(first.value("hedgehog_isolate_info", { version: "0b7e-new" }), 1);
    // The delay in force per route, as the isolates last reported it.
    const delays = m.samples.filter((s) => s.name === "hedgehog_route_hedge_delay_seconds" && s.labels.route === "/api");
    assert.equal(delays.length, 1, JSON.stringify(delays));
    assert.ok(delays[0].value > 0 && delays[0].labels.origin === "a");
    // An error on one isolate reaches the PoP's stats with its next push.
    const failed = await isolates[2].fetch("http://edge.test/api/fail/1");
    assert.equal(failed.status, 503);
    await failed.arrayBuffer();
    let popErrors = [];
    for (let tries = 0; tries < 50 && popErrors.length === 0; tries++) {
      const s = await isolates[0].fetch("http://edge.test/__hedge/stats?scope=pop", { headers: auth });
      assert.equal(s.status, 200);
      popErrors = (await s.json()).recent_errors;
      if (popErrors.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    assert.deepEqual(
      popErrors.map((e) => [e.route, e.status, e.origin]),
      [["/api", 503, "a"]],
    );
    // The PoP's stats carry each (origin, route)'s latency for the advisor.
    const popStats = await (await isolates[0].fetch("http://edge.test/__hedge/stats?scope=pop", { headers: auth })).json();
    const api = popStats.latency.keys.find((k) => k.origin === "a" && k.route === "/api");
    assert.ok(api, JSON.stringify(popStats.latency));
    assert.ok(api.buckets.reduce((n, [, completed, censored]) => n + completed + censored, 0) >= PER);
    assert.equal(popStats.latency.policy, "tail-aware");
    // The isolate scope of one isolate sees only its own.
    const own = await isolates[1].fetch("http://edge.test/__hedge/metrics", { headers: auth });
    assert.equal(parseMetrics(await own.text(), "prometheus").sum("hedgehog_requests_total"), PER);
    const om = await isolates[0].fetch("http://edge.test/__hedge/metrics?scope=pop", {
      headers: { ...auth, accept: "application/openmetrics-text" },
    });
    parseMetrics(await om.text(), "openmetrics");
  } finally {
    await mf.dispose();
  }
  const alone = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: TOKEN });
  const res = await alone.fetch("/__hedge/metrics?scope=pop", { headers: auth });
  assert.equal(res.status, 503);
  assert.equal((await res.json()).error, "pop_metrics_unavailable");
  const stats = await alone.fetch("/__hedge/stats?scope=pop", { headers: auth });
  assert.equal(stats.status, 503);
  assert.equal((await stats.json()).error, "pop_stats_unavailable");
});
