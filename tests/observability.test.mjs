// traceparent on both legs (siblings under the client's span) and the
// per-request JSON log line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { captureLogs } from "./support/logs.mjs";

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

async function hedgedPair(headers) {
  // The primary's first answer takes 2 s, far past the 20 ms static hedge delay.
  let n = 0;
  const a = await origin("a", () => ({ delayMs: n++ === 0 ? 2_000 : 1 }));
  const b = await origin("b", () => ({ delayMs: 1 }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_MODE: "static", HEDGE_STATIC_DELAY_MS: "20" });
  const res = await w.fetch("/trace/me", { headers });
  await res.text();
  assert.equal(res.headers.get("x-hedge"), "hedge");
  const primary = a.requests[0].headers.traceparent;
  const hedge = b.requests[0].headers.traceparent;
  return { primary: primary.match(TRACEPARENT), hedge: hedge.match(TRACEPARENT) };
}

test("both legs carry the client's trace as sibling spans", async () => {
  const client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const { primary, hedge } = await hedgedPair({ traceparent: client });
  assert.ok(primary && hedge);
  assert.equal(primary[1], "4bf92f3577b34da6a3ce929d0e0e4736");
  assert.equal(hedge[1], primary[1]);
  assert.equal(primary[3], "01");
  assert.equal(hedge[3], "01");
  assert.notEqual(primary[2], hedge[2], "each leg is its own span");
  assert.notEqual(primary[2], "00f067aa0ba902b7");
});

test("without a valid traceparent the legs share a new, unsampled trace", async () => {
  const { primary, hedge } = await hedgedPair({ traceparent: "garbage" });
  assert.ok(primary && hedge);
  assert.equal(hedge[1], primary[1]);
  assert.notEqual(primary[2], hedge[2]);
  assert.equal(primary[3], "00");
});

test("HEDGE_LOG_LEVEL=info writes one JSON line per request with what each leg did", async () => {
  const a = await origin("a", () => ({ delayMs: 1 }));
  const logs = captureLogs();
  const w = await worker(
    { HEDGE_ORIGINS: origins(a), HEDGE_LOG_LEVEL: "info" },
    { handleRuntimeStdio: logs.handleRuntimeStdio },
  );
  const res = await w.fetch("/logged/path", { headers: { "x-request-id": "log-test-request-1" } });
  await res.text();
  const line = await logs.lineFor("log-test-request-1");
  assert.equal(line.level, "info");
  assert.equal(line.status, 200);
  assert.equal(line.route, "/logged");
  assert.equal(line.answered_by, "none");
  assert.equal(line.method, "GET");
  assert.match(line.trace_id, /^[0-9a-f]{32}$/);
  assert.equal(line.legs.length, 1);
  assert.equal(line.legs[0].origin, "a");
  assert.equal(line.legs[0].status, 200);
});

test("with an Analytics Engine dataset bound, requests are served as before", async () => {
  const a = await origin("a", () => ({ delayMs: 1 }));
  const w = await worker(
    { HEDGE_ORIGINS: origins(a) },
    { analyticsEngineDatasets: { ANALYTICS: { dataset: "hedgehog_edge" } } },
  );
  for (let i = 0; i < 5; i++) {
    const res = await w.fetch(`/ae/${i}`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), `a:/ae/${i}`);
  }
});

test("an unreachable origin is logged with its name, its URL and the runtime's words; the client's body has neither URL nor words", async () => {
  const { closedPort } = await import("./support/origin.mjs");
  const deadUrl = `http://127.0.0.1:${await closedPort()}`;
  const logs = captureLogs();
  const w = await worker(
    { HEDGE_ORIGINS: [{ name: "dead", url: deadUrl }], HEDGE_MODE: "off" },
    { handleRuntimeStdio: logs.handleRuntimeStdio },
  );
  const res = await w.fetch("/down", { headers: { "x-request-id": "unreachable-log-1" } });
  const body = await res.text();
  assert.equal(res.status, 502);
  assert.doesNotMatch(body, new RegExp(deadUrl.replace(/[.:/]/g, "\\$&")));
  const line = await logs.lineFor("unreachable-log-1");
  assert.equal(line.legs[0].origin, "dead");
  assert.equal(line.legs[0].url, deadUrl);
  assert.ok(line.legs[0].error, "the runtime's words are in the log line");
});
