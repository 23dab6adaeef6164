// Active health probes from the PoP aggregator (HEDGE_PROBE_PATH): an origin
// whose probe path starts failing takes no new primaries before any user
// request fails on it, and is back once its probes pass, without a user
// request risking a trial on it. Probes are marked and go to the probe path
// only; an idle PoP sends none.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins, popAggregator, serverTiming } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { parseMetrics } from "./support/metrics.mjs";

const TOKEN = "test-token-0123456789abcdef";

/** Probes every second, a push after every request (the verdicts ride the replies). */
const PROBING = {
  HEDGE_PROBE_PATH: "/health",
  HEDGE_TUNING: { probe_interval_s: "1", probe_timeout_ms: "500", pop_push_every_requests: "1", pop_push_interval_ms: "100" },
  HEDGE_CACHE: "false",
};

test("an origin failing its probes loses its primaries before users see errors, and gets them back when they pass", async () => {
  let aHealthy = true;
  const health = (healthy) => ({ status: healthy ? 200 : 503, body: healthy ? "ok" : "down" });
  const a = await origin("a", (req) => (req.url === "/health" ? health(aHealthy) : { delayMs: 2 }));
  const b = await origin("b", (req) => (req.url === "/health" ? health(true) : { delayMs: 2 }));
  const w = await worker(
    {
      HEDGE_ORIGINS: origins(a, b),
      ...PROBING,
      HEDGE_STATS_TOKEN: TOKEN,
    },
    popAggregator(),
  );
  const userRequests = (o) => o.requests.filter((r) => r.url !== "/health");
  const probes = (o) => o.requests.filter((r) => r.url === "/health");
  let k = 0;
  const send = async () => {
    const res = await w.fetch(`/api/${k++}`);
    await res.arrayBuffer();
    assert.equal(res.status, 200, "no client ever sees an error");
    return serverTiming(res.headers.get("server-timing")).origin?.desc;
  };
  // Wait (bounded) for `done`, sending a request every 100 ms: pushes carry
  // the aggregator's verdicts back to the isolate.
  const until = async (what, done, limitMs = 15_000) => {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const answered = await send();
      if (done(answered)) return answered;
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  // Healthy: primaries go to a (the first origin), and probes reach both.
  await until("the first probes", () => probes(a).length >= 1 && probes(b).length >= 1);
  assert.equal(await send(), "a");
  assert.ok(probes(a).every((r) => r.headers["x-hedge-probe"] === "true" && r.method === "GET"));

  // a's probe path fails (its user requests would still succeed): after two
  // failed probes the isolate moves its primaries to b.
  aHealthy = false;
  const failingFrom = probes(a).length;
  await until("primaries to leave a", (answered) => answered === "b");
  assert.ok(probes(a).length - failingFrom >= 2, "two failed probes in a row, not one");
  const aUsers = userRequests(a).length;
  for (let i = 0; i < 5; i++) assert.equal(await send(), "b");
  assert.equal(userRequests(a).length, aUsers, "a takes no new primary while its probes fail");

  // Its probes pass again: a is back, with no user request sent to it first as a trial.
  aHealthy = true;
  await until("primaries to come back to a", (answered) => answered === "a");
  assert.equal(userRequests(a).length, aUsers + 1, "the first request a saw again was a normal primary that it answered");

  const m = parseMetrics(
    await (await w.fetch("/__hedge/metrics?scope=pop", { headers: { authorization: `Bearer ${TOKEN}` } })).text(),
    "prometheus",
  );
  assert.equal(m.value("hedgehog_origin_probe_up", { origin: "a" }), 1);
  assert.ok(m.value("hedgehog_origin_probes_total", { origin: "a", result: "fail" }) >= 2);
  assert.ok(m.value("hedgehog_origin_probes_total", { origin: "b", result: "pass" }) >= 3);
});

test("without a probe path, or with an idle PoP, origins get no probes", async () => {
  const a = await origin("a", () => ({ delayMs: 1 }));
  const w = await worker(
    { HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { pop_push_every_requests: "1" }, HEDGE_CACHE: "false" },
    popAggregator(),
  );
  for (let i = 0; i < 5; i++) {
    await (await w.fetch(`/x/${i}`)).arrayBuffer();
    await new Promise((r) => setTimeout(r, 300));
  }
  assert.equal(a.requests.length, 5, "user requests only");

  // With a path but no traffic at all, the aggregator never starts probing.
  const b = await origin("b", () => ({}));
  await worker({ HEDGE_ORIGINS: origins(b), HEDGE_PROBE_PATH: "/health", HEDGE_TUNING: { probe_interval_s: "1" } }, popAggregator());
  await new Promise((r) => setTimeout(r, 2_500));
  assert.equal(b.requests.length, 0);
});

test("an origin that dies (every connection reset) and comes back: probes move its primaries away and bring them back", async () => {
  let aDead = false;
  const a = await origin("a", () => (aDead ? { reset: "before-headers" } : { delayMs: 2, body: "a" }));
  const b = await origin("b", () => ({ delayMs: 2, body: "b" }));
  const w = await worker(
    {
      HEDGE_ORIGINS: origins(a, b),
      ...PROBING,
    },
    popAggregator(),
  );
  let k = 0;
  const send = async () => {
    const res = await w.fetch(`/api/${k++}`);
    const body = await res.text();
    // A reset primary is retried at once on b, even once those retries put
    // this small PoP over its 12% share: clients never see the death.
    assert.equal(res.status, 200, body);
    return body;
  };
  const until = async (what, done, limitMs = 15_000) => {
    const deadline = Date.now() + limitMs;
    for (;;) {
      if (done(await send())) return;
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  await until("a healthy a to answer", (body) => body === "a" && a.requests.some((r) => r.url === "/health"));
  aDead = true;
  const probesBefore = a.requests.filter((r) => r.url === "/health").length;
  // Once two probes have failed, a gets no primaries at all.
  await until("two failed probes", () => a.requests.filter((r) => r.url === "/health").length >= probesBefore + 2);
  await new Promise((r) => setTimeout(r, 300)); // the verdict rides the next push reply
  await send();
  const users = () => a.requests.filter((r) => r.url !== "/health").length;
  const usersWhileDown = users();
  for (let i = 0; i < 5; i++) assert.equal(await send(), "b");
  assert.equal(users(), usersWhileDown, "no primary and no trial goes to a dead origin its probes report");
  aDead = false;
  await until("a back", (body) => body === "a");
});
