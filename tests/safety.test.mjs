// What keeps hedging from doing harm: idempotency, the budget, and refusing
// to run on a bad configuration. Built Worker in workerd, real loopback origins.
import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { captureLogs } from "./support/logs.mjs";


test("POST without an idempotency key: exactly one origin request, however slow", async () => {
  const a = await origin("a", () => ({ delayMs: 1_000, body: "created" }));
  const b = await origin("b", () => ({ body: "duplicate!" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_MODE: "static", HEDGE_STATIC_DELAY_MS: "10" });
  const res = await w.fetch("/orders", { method: "POST", body: "order=1" });
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "created");
  assert.equal(res.headers.get("x-hedge"), "none");
  assert.match(res.headers.get("server-timing"), /hedge-skip;desc="not-idempotent"/);
  assert.equal(a.requests.length, 1);
  assert.equal(b.requests.length, 0);
  assert.equal(a.requests[0].body.toString(), "order=1");
});

test("a failing POST is not retried elsewhere", async () => {
  const a = await origin("a", () => ({ status: 503, body: "busy" }));
  const b = await origin("b", () => ({ body: "duplicate!" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_MODE: "static", HEDGE_STATIC_DELAY_MS: "10" });
  const res = await w.fetch("/orders", { method: "POST", body: "order=2" });
  assert.equal(res.status, 503);
  assert.equal(await res.text(), "busy");
  assert.equal(b.requests.length, 0);
});

test("unknown methods are forwarded as they are, never as GET", async () => {
  const a = await origin("a", () => ({}));
  const w = await worker({ HEDGE_ORIGINS: origins(a) });
  const res = await w.fetch("/dav", { method: "PROPFIND" });
  await res.arrayBuffer();
  assert.equal(a.requests[0].method, "PROPFIND");
});

test("POST with an idempotency key is hedged where the operator opted in, with the same body on both legs", async () => {
  const a = await origin("a", () => ({ delayMs: 10_000 }));
  const b = await origin("b", () => ({ body: "from-b" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "50",
    HEDGE_IDEMPOTENCY_HEADER: "idempotency-key",
  });
  const payload = JSON.stringify({ amount: 5, note: "x".repeat(5000) });
  const res = await w.fetch("/pay", {
    method: "POST",
    body: payload,
    headers: { "idempotency-key": "k-1", "content-type": "application/json" },
  });
  assert.equal(await res.text(), "from-b");
  assert.equal(res.headers.get("x-hedge"), "hedge");
  assert.equal(a.requests[0].body.toString(), payload);
  assert.equal(b.requests[0].body.toString(), payload);
  assert.equal(b.requests[0].headers["idempotency-key"], "k-1");
});

test("a keyed body over HEDGE_MAX_BODY_BYTES is sent once, whole, streamed", async () => {
  const a = await origin("a", () => ({ delayMs: 300, body: "stored" }));
  const b = await origin("b", () => ({ body: "duplicate!" }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "10",
    HEDGE_TUNING: { max_body_bytes: "1024" },
    HEDGE_IDEMPOTENCY_HEADER: "idempotency-key",
  });
  const payload = Buffer.alloc(64 * 1024, "y").toString() + "end";
  const res = await w.fetch("/upload", { method: "PUT", body: payload, headers: { "idempotency-key": "k-2" } });
  assert.equal(await res.text(), "stored");
  assert.match(res.headers.get("server-timing"), /hedge-skip;desc="body-too-large"/);
  assert.equal(b.requests.length, 0);
  assert.equal(a.requests[0].body.toString(), payload);
});

test("budget: hedges stay within percent x N + floor allowance", async (t) => {
  const PERCENT = 10;
  const FLOOR_PER_SEC = 1;
  const MAX_TOKENS = 2;
  const N = 60;
  const a = await origin("a", () => ({ delayMs: 500 }));
  const b = await origin("b", () => ({}));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "20",
    HEDGE_BUDGET_PERCENT: String(PERCENT),
    HEDGE_BUDGET_FLOOR_PER_SEC: String(FLOOR_PER_SEC),
    HEDGE_TUNING: { budget_max_tokens: String(MAX_TOKENS) },
  });
  // Every request wants a hedge (the primary takes 500 ms, the delay is 20 ms).
  const started = performance.now();
  const results = [];
  for (let batch = 0; batch < N / 20; batch++) {
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => w.fetch(`/b/${batch}/${i}`).then(async (r) => [r.headers.get("x-hedge"), await r.text()])),
    );
    results.push(...responses);
  }
  const seconds = (performance.now() - started) / 1000;
  const hedges = b.requests.filter((r) => r.headers["x-hedge-attempt"] === "true").length;
  const allowance = MAX_TOKENS + (PERCENT / 100) * N + FLOOR_PER_SEC * seconds;
  t.diagnostic(`${hedges} hedges for ${N} requests in ${seconds.toFixed(2)} s; allowance ${allowance.toFixed(1)}`);
  assert.equal(results.length, N);
  assert.ok(results.every(([, body]) => body.startsWith("a:") || body.startsWith("b:")));
  assert.ok(hedges <= allowance, `${hedges} hedges > allowance ${allowance}`);
  assert.ok(hedges >= MAX_TOKENS, "the budget must allow some hedges");
  assert.ok(hedges < N / 2, "the budget must stop most hedges");
  assert.equal(results.filter(([x]) => x === "hedge" || x === "primary").length, hedges);
});

test("bad config other than the origins: requests are proxied on the defaults, the stats name the bad keys", async () => {
  const a = await origin("a", () => ({ body: "from-a" }));
  const token = "stats-token-for-bad-config-test";
  const w = await worker({
    HEDGE_ORIGINS: origins(a),
    HEDGE_BUDGET_PERCENT: "150",
    HEDGE_QUANTIL: "p99",
    HEDGE_STATS_TOKEN: token,
  });
  for (const path of ["/", "/x"]) {
    const res = await w.fetch(path);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "from-a");
  }
  assert.equal(a.requests.length, 2, "a typo'd key does not stop traffic");
  const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${token}` } })).json();
  assert.deepEqual(stats.config_errors.map((e) => e.key).sort(), ["HEDGE_BUDGET_PERCENT", "HEDGE_QUANTIL"]);
});

test("bad config: missing origins", async () => {
  const w = await worker({});
  const res = await w.fetch("/");
  assert.equal(res.status, 500);
  const body = await res.json();
  assert.deepEqual(body.invalid_keys, ["HEDGE_ORIGINS"]);
});

test("a removed key never stops traffic: it is logged once with what replaced it, and HEDGE_TUNING takes its place", async () => {
  const a = await origin("a", () => ({ body: "from-a" }));
  const token = "stats-token-for-removed-key-test";
  const logs = captureLogs();
  const w = await worker(
    {
      HEDGE_ORIGINS: origins(a),
      HEDGE_COLD_DELAY_MS: "40",
      HEDGE_ROUTE_PREFIXES: JSON.stringify(["/api"]),
      HEDGE_TUNING: { window_secs: "30" },
      HEDGE_STATS_TOKEN: token,
    },
    { handleRuntimeStdio: logs.handleRuntimeStdio },
  );
  for (let i = 0; i < 3; i++) {
    const res = await w.fetch(`/api/${i}`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "from-a");
  }
  const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${token}` } })).json();
  assert.deepEqual(stats.config_errors.map((e) => e.key).sort(), ["HEDGE_COLD_DELAY_MS", "HEDGE_ROUTE_PREFIXES"]);
  const cold = stats.config_errors.find((e) => e.key === "HEDGE_COLD_DELAY_MS");
  assert.match(cold.reason, /HEDGE_TUNING = \{"cold_delay_ms"/);
  await logs.until((lines) => lines.some((l) => l.includes("HEDGE_ROUTE_PREFIXES")));
  const said = (key) => logs.lines.filter((l) => l.includes(`${key}: removed`)).length;
  assert.equal(said("HEDGE_COLD_DELAY_MS"), 1, logs.lines.join("\n"));
  assert.equal(said("HEDGE_ROUTE_PREFIXES"), 1);
  assert.match(logs.lines.find((l) => l.includes("HEDGE_ROUTE_PREFIXES: removed")), /HEDGE_ROUTES/);
});

test("a key another requires, left unset, never stops traffic: static mode without its delay runs adaptive and says so", async () => {
  const a = await origin("a", () => ({ body: "from-a" }));
  const token = "stats-token-for-static-no-delay";
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_MODE: "static", HEDGE_STATS_TOKEN: token });
  const res = await w.fetch("/x");
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "from-a");
  const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${token}` } })).json();
  assert.deepEqual(stats.config_errors.map((e) => e.key), ["HEDGE_STATIC_DELAY_MS"]);
});
