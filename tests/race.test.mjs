// The race itself, end to end: the built Worker in workerd in front of real
// loopback origins. Slow legs are at least ten times slower than any
// threshold asserted, so a busy machine cannot flip a result.
import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { closedPort } from "./support/origin.mjs";
import { rawRequest } from "./support/raw.mjs";
import { origins, serverTiming } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

const HANG_MS = 10_000; // a leg that "never" answers within a test


test("fast primary: no hedge, one origin request, x-hedge none", async () => {
  const a = await origin("a", () => ({ body: "from-a" }));
  const b = await origin("b", () => ({ body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "1000" } });
  const res = await w.fetch("/items/1?x=2");
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "from-a");
  assert.equal(res.headers.get("x-hedge"), "none");
  assert.equal(a.requests.length, 1);
  assert.equal(b.requests.length, 0);
  assert.equal(a.requests[0].url, "/items/1?x=2");
  const timing = serverTiming(res.headers.get("server-timing"));
  assert.equal(timing["hedge-delay"].dur, 1000);
  assert.equal(timing["hedge-delay"].desc, "cold");
  assert.ok(timing.origin.dur >= 0);
});

// The winner streams its body for about a second, so the request is still in
// flight: an abort seen at the origin before the winner's body ends is the
// Worker's own, not workerd tearing down a finished request.
const TRICKLE = { chunks: ["part-1;", "part-2;", "part-3;", "part-4;", "part-5;"], chunkGapMs: 250 };

test("slow primary: hedge after the delay wins, primary aborted at the origin", async (t) => {
  const a = await origin("a", () => ({ delayMs: HANG_MS, body: "from-a" }));
  const b = await origin("b", () => TRICKLE);
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "200" } });
  const sent = performance.now();
  const res = await w.fetch("/slow", { headers: { "x-request-id": "req-42", "accept-encoding": "identity" } });
  const headersAt = performance.now() - sent;
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("x-hedge"), "hedge");
  assert.ok(headersAt < 2_000, `headers after ${headersAt} ms`);
  assert.equal(await res.text(), TRICKLE.chunks.join(""));

  const primary = a.requests[0];
  const hedge = b.requests[0];
  const hedgeAfter = hedge.receivedAt - primary.receivedAt;
  // Measured between arrivals at the origins: the primary's may lag its send
  // by a few ms on a busy machine, so the lower bound leaves room.
  assert.ok(hedgeAfter >= 150 && hedgeAfter < 1_000, `hedge sent ${hedgeAfter} ms after primary (delay 200)`);
  assert.equal(hedge.headers["x-hedge-attempt"], "true");
  assert.equal(primary.headers["x-hedge-attempt"], undefined);
  assert.equal(primary.headers["x-request-id"], "req-42");
  assert.equal(hedge.headers["x-request-id"], "req-42");
  assert.equal(res.headers.get("x-request-id"), "req-42");

  const aborted = await a.waitFor("abort", () => true, 2_000);
  assert.equal(aborted.answeredAt, null, "the primary never answered");
  assert.ok(aborted.abortedAt < hedge.finishedAt, "aborted while the winner was still streaming");
  const abortLag = aborted.abortedAt - hedge.answeredAt;
  t.diagnostic(`hedge sent ${hedgeAfter.toFixed(1)} ms after the primary`);
  t.diagnostic(`primary seen aborted at the origin ${abortLag.toFixed(1)} ms after the hedge answered`);
});

test("primary answers first after the hedge went out: the hedge is aborted", async () => {
  const a = await origin("a", () => ({ delayMs: 300, ...TRICKLE }));
  const b = await origin("b", () => ({ delayMs: HANG_MS, body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "50" } });
  const res = await w.fetch("/p", { headers: { "accept-encoding": "identity" } });
  assert.equal(res.headers.get("x-hedge"), "primary");
  assert.equal(await res.text(), TRICKLE.chunks.join(""));
  const aborted = await b.waitFor("abort", () => true, 2_000);
  assert.equal(aborted.answeredAt, null);
  assert.ok(aborted.abortedAt < a.requests[0].finishedAt, "aborted while the winner was still streaming");
});

test("client x-hedge-* headers and hop-by-hop headers are not forwarded", async () => {
  const a = await origin("a", () => ({}));
  const w = await worker({ HEDGE_ORIGINS: origins(a) });
  const res = await w.fetch("/h", {
    headers: {
      "x-hedge-attempt": "true",
      "x-hedge-whatever": "1",
      "x-request-id": "bad id with spaces",
      "keep-alive": "timeout=5",
      accept: "text/plain",
    },
  });
  await res.arrayBuffer();
  const seen = a.requests[0].headers;
  assert.equal(seen["x-hedge-attempt"], undefined);
  assert.equal(seen["x-hedge-whatever"], undefined);
  assert.equal(seen["keep-alive"], undefined);
  assert.equal(seen.accept, "text/plain");
  assert.match(seen["x-request-id"], /^[0-9a-f]{32}$/, "an invalid client id is replaced");
  assert.equal(res.headers.get("x-request-id"), seen["x-request-id"]);
  assert.equal(seen.host, `127.0.0.1:${a.port}`);
});

test("primary fails fast with 503: hedge at once, long before the delay", async () => {
  const a = await origin("a", () => ({ status: 503, body: "busy" }));
  const b = await origin("b", () => ({ body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const sent = performance.now();
  const res = await w.fetch("/f");
  const body = await res.text();
  const took = performance.now() - sent;
  assert.equal(res.status, 200);
  assert.equal(body, "from-b");
  assert.equal(res.headers.get("x-hedge"), "hedge");
  assert.ok(took < 1_000, `took ${took} ms with a 10 s hedge delay`);
});

test("primary refuses connections: hedge at once", async () => {
  const dead = { name: "dead", url: `http://127.0.0.1:${await closedPort()}` };
  const b = await origin("b", () => ({ body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(dead, b), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const sent = performance.now();
  const res = await w.fetch("/r");
  const body = await res.text();
  const took = performance.now() - sent;
  assert.equal(res.status, 200);
  assert.equal(body, "from-b");
  assert.ok(took < 1_000, `took ${took} ms with a 10 s hedge delay`);
});

test("both origins answer 5xx: the client gets the primary's own answer, status, headers and body", async () => {
  const a = await origin("a", () => ({
    status: 503,
    headers: { "retry-after": "30", "content-type": "application/json" },
    body: '{"origin":"a","state":"maintenance"}',
  }));
  const b = await origin("b", () => ({ status: 502, body: "b is down" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const sent = performance.now();
  const res = await w.fetch("/both");
  const body = await res.text();
  const took = performance.now() - sent;
  assert.equal(res.status, 503);
  assert.ok(took < 1_000, `took ${took} ms`);
  assert.equal(res.headers.get("retry-after"), "30");
  assert.equal(res.headers.get("content-type"), "application/json");
  assert.equal(body, '{"origin":"a","state":"maintenance"}');
  assert.ok(b.requests.length >= 1, "the hedge went out and failed too");
  assert.equal(a.requests.length + b.requests.length, 3, "primary, hedge and one third attempt, no more");
  const timing = serverTiming(res.headers.get("server-timing"));
  assert.ok("third-attempt" in timing, res.headers.get("server-timing"));
  assert.equal(timing["origin-failure"]?.desc, "primary");
  assert.equal(timing.origin?.desc, "a");
});

test("the primary unreachable and the hedge answering 503: the hedge's answer goes out", async () => {
  const dead = { name: "dead", url: `http://127.0.0.1:${await closedPort()}` };
  const b = await origin("b", () => ({ status: 503, headers: { "retry-after": "5" }, body: "b sheds" }));
  const w = await worker({ HEDGE_ORIGINS: origins(dead, b), HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
  const res = await w.fetch("/half");
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "5");
  assert.equal(await res.text(), "b sheds");
  assert.equal(serverTiming(res.headers.get("server-timing"))["origin-failure"]?.desc, "hedge");
});

test("no origin answers at all: the Worker's own 502 says what each leg got, promptly", async () => {
  const deadA = { name: "a", url: `http://127.0.0.1:${await closedPort()}` };
  const deadB = { name: "b", url: `http://127.0.0.1:${await closedPort()}` };
  const w = await worker({ HEDGE_ORIGINS: origins(deadA, deadB), HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
  const sent = performance.now();
  const res = await w.fetch("/none");
  const body = await res.json();
  const took = performance.now() - sent;
  assert.equal(res.status, 502);
  assert.ok(took < 1_000, `took ${took} ms`);
  assert.equal(body.error, "all_legs_failed");
  assert.deepEqual(
    body.legs.map((l) => [l.leg, l.origin, l.status, l.failure]),
    [
      ["primary", "a", null, "unreachable"],
      ["hedge", "b", null, "unreachable"],
      ["third", "b", null, "unreachable"],
    ],
  );
});

test("the primary and the hedge both fail fast: a third attempt answers, and only a GET gets one", async () => {
  let aCalls = 0;
  let bCalls = 0;
  // Each origin fails its first request fast and answers the next.
  const a = await origin("a", () => (++aCalls === 1 ? { status: 503, body: "a sheds" } : { body: "from-a" }));
  const b = await origin("b", () => (++bCalls === 1 ? { status: 502, body: "b is down" } : { body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
  const sent = performance.now();
  const res = await w.fetch("/third");
  const body = await res.text();
  const took = performance.now() - sent;
  assert.equal(res.status, 200);
  assert.match(body, /^from-[ab]$/);
  assert.ok(took < 1_000, `took ${took} ms with a 10 s hedge delay`);
  assert.equal(a.requests.length + b.requests.length, 3);
  assert.equal(res.headers.get("x-hedge"), "hedge");
  assert.ok("third-attempt" in serverTiming(res.headers.get("server-timing")));
  // Off: the double failure goes to the client as the primary's answer.
  aCalls = 0;
  bCalls = 0;
  const off = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "10000", third_attempt: "false" }, HEDGE_LOG_LEVEL: "off",  });
  const failed = await off.fetch("/third-off");
  assert.equal(failed.status, 503);
  assert.equal(await failed.text(), "a sheds");
});

test("a 500 is an answer, not a failure: it is returned without a hedge", async () => {
  const a = await origin("a", () => ({ status: 500, body: "app error" }));
  const b = await origin("b", () => ({}));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const res = await w.fetch("/e");
  assert.equal(res.status, 500);
  assert.equal(await res.text(), "app error");
  assert.equal(b.requests.length, 0);
});

test("no origin answers within HEDGE_TIMEOUT_MS: 504 and both legs aborted", async () => {
  const a = await origin("a", () => ({ delayMs: HANG_MS }));
  const b = await origin("b", () => ({ delayMs: HANG_MS }));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_TUNING: { cold_delay_ms: "50" },
    HEDGE_TIMEOUT_MS: "400",
  });
  const sent = performance.now();
  const res = await w.fetch("/hang");
  const body = await res.json();
  const took = performance.now() - sent;
  assert.equal(res.status, 504);
  assert.equal(body.error, "origin_timeout");
  assert.ok(took >= 390 && took < 3_000, `took ${took} ms`);
  await a.waitFor("abort", () => true, 2_000);
  await b.waitFor("abort", () => true, 2_000);
});

test("redirects from the origin are passed back, not followed", async () => {
  const a = await origin("a", () => ({ status: 302, headers: { location: "http://169.254.169.254/" } }));
  const w = await worker({ HEDGE_ORIGINS: origins(a) });
  const res = await w.fetch("/go", { redirect: "manual" });
  assert.equal(res.status, 302);
  assert.equal(res.headers.get("location"), "http://169.254.169.254/");
  assert.equal(a.requests.length, 1);
});

test("retry mode: the primary is abandoned at the timeout, then retried once", async () => {
  const a = await origin("a", () => ({ delayMs: HANG_MS }));
  const b = await origin("b", () => ({ delayMs: 200, body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_MODE: "retry", HEDGE_TUNING: { retry_timeout_ms: "100" } });
  const res = await w.fetch("/retry");
  assert.equal(await res.text(), "from-b");
  assert.equal(res.headers.get("x-hedge"), "hedge");
  const aborted = await a.waitFor("abort", () => true, 2_000);
  // Unlike a hedge, the primary is gone before the retry has answered.
  assert.ok(aborted.abortedAt < b.requests[0].answeredAt, "primary abandoned before the retry answered");
});

test("an origin's 304 to the client's own conditional request goes through, bodiless", async () => {
  const a = await origin("a", (req) =>
    req.headers["if-none-match"] === '"x"' ? { status: 304, headers: { etag: '"x"' }, body: "" } : { body: "full" },
  );
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const res = await rawRequest(w.url, { path: "/c", headers: { "if-none-match": '"x"' } });
  assert.equal(res.status, 304);
  assert.equal(res.headers.etag, '"x"');
  assert.equal(res.body.length, 0);
});

test("an origin status no response may carry (999) is a 502 saying so, not the Worker's own 500", async () => {
  const a = await origin("a", () => ({ status: 999, body: "?" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
  const res = await w.fetch("/odd");
  assert.equal(res.status, 502);
  const body = await res.json();
  assert.deepEqual(
    body.legs.map((l) => l.failure),
    body.legs.map(() => "invalid_status"),
  );
});

test("a write in HEDGE_METHODS that fails on both origins gets no third attempt", async () => {
  const a = await origin("a", () => ({ status: 503, body: "a sheds" }));
  const b = await origin("b", () => ({ status: 503, body: "b sheds" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_METHODS: "GET,HEAD,PUT", HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
  const res = await w.fetch("/w", { method: "PUT", body: "x" });
  assert.equal(res.status, 503);
  await res.text();
  assert.equal(a.requests.length, 1);
  assert.equal(b.requests.length, 1, "the hedge went to the peer, and nothing after it");
});

test("a third attempt that gets no answer does not hide the hedge's origin answer", async () => {
  const dead = { name: "dead", url: `http://127.0.0.1:${await closedPort()}` };
  let calls = 0;
  // b sheds the hedge with its own 503, then resets the third attempt.
  const b = await origin("b", () => (++calls === 1 ? { status: 503, headers: { "retry-after": "7" }, body: "b sheds" } : { reset: "before-headers" }));
  const w = await worker({ HEDGE_ORIGINS: origins(dead, b), HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
  const res = await w.fetch("/kept");
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "7");
  assert.equal(await res.text(), "b sheds");
  // Two legs the Worker sent (each leg has its own traceparent span); the
  // runtime's HTTP client (workerd 1.20261117) may resend the reset GET
  // once, with the same headers.
  const legs = new Set(b.requests.map((r) => r.headers.traceparent));
  assert.equal(legs.size, 2, "the hedge and the third attempt");
  assert.ok(b.requests.length <= 3, `${b.requests.length} requests at b`);
});
