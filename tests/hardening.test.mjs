// Hardening: randomized races never duplicate non-idempotent requests,
// nothing reaches a host that is not configured, and origin faults end with
// the right status without hanging.
import { test } from "node:test";
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { rawRequest } from "./support/raw.mjs";

/** A small seeded generator (mulberry32) so a failure can be replayed. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const METHODS = ["GET", "GET", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

test("1,000 randomized races: no non-idempotent request reaches an origin twice", async () => {
  const seed = Number(process.env.HARDENING_SEED ?? 20261202);
  const random = rng(seed);
  const plan = new Map(); // request id -> origin behaviour per attempt, drawn up front
  const behaviour = (req, record) => {
    const r = random();
    let plan;
    if (r < 0.1) plan = { delayMs: 2, status: 503 };
    else if (r < 0.15) plan = { reset: "before-headers" };
    else if (r < 0.2) plan = { delayMs: 400 };
    else plan = { delayMs: Math.floor(random() * 40) };
    record.plan = plan;
    return plan;
  };
  const a = await origin("a", behaviour);
  const b = await origin("b", behaviour);
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_MODE: "static",
    HEDGE_STATIC_DELAY_MS: "5",
    HEDGE_BUDGET_PERCENT: "100",
    HEDGE_TUNING: { budget_max_tokens: "100000", health_consecutive_failures: "1000", health_failure_rate: "1", "5xx_reduce_rate": "1", "5xx_stop_rate": "1" },
    // Keyed hedging opted in, so keyed requests are raced too.
    HEDGE_IDEMPOTENCY_HEADER: "idempotency-key",
    // Failures must not stop hedging: this test is about what may be hedged.
    HEDGE_CACHE: "false",
    // The 5xx and failures drawn here would print ~100 error log lines.
    HEDGE_LOG_LEVEL: "off",
  });
  const requests = [];
  for (let i = 0; i < 1000; i++) {
    const method = METHODS[Math.floor(random() * METHODS.length)];
    const keyed = method !== "GET" && method !== "HEAD" && random() < 0.3;
    requests.push({ id: `hardening-${seed}-${i}`, method, keyed });
    plan.set(`hardening-${seed}-${i}`, method);
  }
  const statuses = {};
  for (let i = 0; i < requests.length; i += 25) {
    await Promise.all(
      requests.slice(i, i + 25).map(async (r) => {
        const headers = { "x-request-id": r.id };
        if (r.keyed) headers["idempotency-key"] = `key-${r.id}`;
        const hasBody = r.method === "POST" || r.method === "PUT" || r.method === "PATCH";
        let status;
        try {
          const res = await w.fetch(`/h/${r.id}`, { method: r.method, headers, body: hasBody ? `body-${r.id}` : undefined });
          await res.arrayBuffer();
          status = res.status;
        } catch (e) {
          status = `client error: ${e.message}`;
        }
        statuses[status] = (statuses[status] ?? 0) + 1;
      }),
    );
  }
  const arrivals = new Map(); // request id -> what reached the origins, in order
  for (const rec of [...a.requests, ...b.requests].sort((x, y) => x.receivedAt - y.receivedAt)) {
    const id = rec.headers["x-request-id"];
    arrivals.set(id, [...(arrivals.get(id) ?? []), rec]);
  }
  const count = (r) => arrivals.get(r.id)?.length ?? 0;
  // Never hedged, never retried by the Worker: methods it is not allowed to
  // send twice without a key.
  const unkeyed = requests.filter((r) => !["GET", "HEAD", "OPTIONS"].includes(r.method) && !r.keyed);
  const duplicated = unkeyed.filter((r) => count(r) > 1);
  // The runtime's own HTTP client (workerd 1.20261117) resends a bodiless
  // idempotent request (DELETE, RFC 9110 section 9.2.2) when its connection
  // was reset before any answer, and again if that copy is reset too (seen:
  // reset, reset, answered, all at one origin). Those copies are not the
  // Worker's: each carries no hedge marker and follows a reset at the same
  // origin (the Worker never sends an unkeyed DELETE twice).
  const runtimeRetry = (r) => {
    const seen = arrivals.get(r.id) ?? [];
    return (
      r.method === "DELETE" &&
      seen.length >= 2 &&
      seen.slice(0, -1).every((x) => x.plan?.reset === "before-headers") &&
      seen.every((x) => x.origin === seen[0].origin && !x.headers["x-hedge-attempt"])
    );
  };
  const byWorker = duplicated.filter((r) => !runtimeRetry(r));
  const hedged = requests.filter((r) => count(r) > 1).length;
  console.log(
    `# seed ${seed}: ${requests.length} requests, ${unkeyed.length} non-GET/HEAD/OPTIONS without a key, ` +
      `${duplicated.length} of them reached an origin twice (${duplicated.length - byWorker.length} the runtime's resend of a DELETE after a reset); ` +
      `${hedged} requests reached two origins; statuses ${JSON.stringify(statuses)}`,
  );
  assert.equal(byWorker.length, 0, byWorker.map((r) => `${r.id} ${r.method}`).join(", "));
  assert.ok(unkeyed.length >= 200, "the draw must include plenty of requests that may not be sent twice");
  // The test only proves something if idempotent requests were raced.
  assert.ok(hedged >= 100, `${hedged} hedged requests`);
  for (const r of unkeyed.filter((r) => r.method === "POST" || r.method === "PATCH")) assert.equal(count(r), 1, r.id);
});

/** Sends a raw request to the Worker's loopback address (absolute-form targets, odd Host). */
async function raw(url, { path, headers = {} }) {
  const res = await rawRequest(url, { path, headers });
  return { status: res.status, body: res.body.toString() };
}

test("SSRF: nothing reaches a host that is not configured", async () => {
  // The canary is a real server on loopback that only an SSRF could reach.
  const canary = await origin("canary", () => ({}));
  const canaryHost = `127.0.0.1:${canary.port}`;
  const a = await origin("a", (req) =>
    req.url.endsWith("/redirect-me") ? { status: 302, headers: { location: `${canary.url}/stolen` } } : {},
  );
  const w = await worker({ HEDGE_ORIGINS: [{ name: "a", url: `${a.url}/base` }], HEDGE_CACHE: "false" });
  const paths = [
    `//${canaryHost}/x`,
    `/@${canaryHost}/x`,
    `/%2e%2e/%2e%2e/x`,
    `/..%2f..%2f${canaryHost}`,
    `/../../x`,
    `/x?url=${encodeURIComponent(canary.url)}`,
    `/\\\\${canaryHost}/x`,
  ];
  for (const p of paths) {
    const res = await raw(w.url, { path: p, headers: { host: canaryHost } });
    assert.ok(res.status < 500, `${p}: ${res.status}`);
  }
  // Absolute-form request target naming the canary (workerd itself may
  // refuse it; either way it must not reach the canary).
  await raw(w.url, { path: `${canary.url}/absolute`, headers: { host: canaryHost } });
  // A redirect to the canary is passed back, not followed.
  const redirect = await raw(w.url, { path: "/redirect-me" });
  assert.equal(redirect.status, 302);
  assert.equal(canary.requests.length, 0, canary.requests.map((r) => r.url).join(", "));
  // Everything went to the configured origin, under its path prefix.
  assert.ok(a.requests.length >= paths.length + 1, `${a.requests.length} requests at the origin`);
  for (const r of a.requests) assert.ok(r.url.startsWith("/base/"), r.url);
});

test("faults: a reset mid-body ends the client's response promptly, it does not hang", async () => {
  // workerd ends the body it relays as if the origin had finished (a plain
  // JavaScript pass-through Worker does the same), so the assertion is that
  // the response ends, promptly, with the status that had already gone out.
  const a = await origin("a", () => ({ reset: "mid-body", body: "partial " }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_CACHE: "false" });
  const started = Date.now();
  const res = await w.fetch("/reset", { headers: { "accept-encoding": "identity" } });
  assert.equal(res.status, 200, "headers had already gone out");
  await res.arrayBuffer().catch(() => {});
  assert.ok(Date.now() - started < 3_000, "ended promptly");
});

test("faults: headers trickling past HEDGE_TIMEOUT_MS give a 504 at the limit", async () => {
  const a = await origin("a", () => ({ delayMs: 5_000 }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TIMEOUT_MS: "300", HEDGE_CACHE: "false" });
  const started = Date.now();
  const res = await w.fetch("/slow-headers");
  assert.equal(res.status, 504);
  await res.text();
  const took = Date.now() - started;
  assert.ok(took >= 300 && took < 3_000, `504 after ${took} ms`);
});

test("faults: an origin that resets before headers on both legs gives a prompt 502", async () => {
  const a = await origin("a", () => ({ reset: "before-headers" }));
  const b = await origin("b", () => ({ reset: "before-headers" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_CACHE: "false" });
  const res = await w.fetch("/both-reset");
  assert.equal(res.status, 502);
  const body = await res.json();
  // The primary, its hedge, and the third attempt both failing fast earn.
  assert.deepEqual(
    body.legs.map((l) => [l.leg, l.failure]),
    [
      ["primary", "unreachable"],
      ["hedge", "unreachable"],
      ["third", "unreachable"],
    ],
  );
});

test("hop-by-hop headers (RFC 9110 7.6.1), those Connection names, and client x-hedge-* never reach an origin", async () => {
  const a = await origin("a", () => ({ delayMs: 300 }));
  const b = await origin("b", () => ({ body: "from-b" }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_CACHE: "false", HEDGE_TUNING: { cold_delay_ms: "20" } });
  // Over a raw connection, so nothing between the test and workerd tidies them up.
  const res = await raw(w.url, {
    path: "/hop",
    headers: {
      connection: "keep-alive, x-secret-hop",
      "x-secret-hop": "1",
      "keep-alive": "timeout=5",
      "proxy-connection": "keep-alive",
      "proxy-authorization": "Basic Zm9vOmJhcg==",
      te: "trailers",
      "x-hedge-attempt": "false",
      "x-hedge-leg": "primary",
      "x-kept": "yes",
    },
  });
  assert.equal(res.status, 200);
  assert.equal(res.body, "from-b", "the hedge won, so both legs were sent");
  const legs = [...a.requests, ...b.requests];
  assert.equal(legs.length, 2);
  for (const r of legs) {
    for (const name of ["x-secret-hop", "keep-alive", "proxy-connection", "proxy-authorization", "te", "x-hedge-leg"]) {
      assert.equal(r.headers[name], undefined, `${r.origin} got ${name}`);
    }
    assert.equal(r.headers["x-kept"], "yes", "end-to-end headers are forwarded");
    assert.doesNotMatch(r.headers.connection ?? "", /x-secret-hop/);
  }
  // The Worker's own marking, not the client's.
  assert.equal(a.requests[0].headers["x-hedge-attempt"], undefined);
  assert.equal(b.requests[0].headers["x-hedge-attempt"], "true");
});

/** GET over a raw connection; resolves with status, headers, body bytes and how the body ended. */
function rawBody(url, path, headers = {}) {
  return rawRequest(url, { path, headers });
}

// "cacheable": the cache holds a copy (a tee) of the body, so cutting the
// client's copy alone would leave the origin's connection open.
for (const framing of ["content-length", "chunked", "cacheable"]) {
  test(`faults: a ${framing} body that stalls past HEDGE_BODY_IDLE_TIMEOUT_MS is cut, and the origin's connection closed`, async () => {
    // The origin sends headers and a first chunk, then nothing for 30 s.
    const chunks = ["partial ", "never sent in time"];
    const headers = framing === "chunked" ? {} : { "content-length": String(Buffer.byteLength(chunks.join(""))) };
    if (framing === "cacheable") headers["cache-control"] = "public, max-age=60";
    const a = await origin("a", () => ({ headers, chunks, chunkGapMs: 30_000 }));
    const w = await worker({
      HEDGE_ORIGINS: origins(a),
      HEDGE_CACHE: framing === "cacheable" ? "true" : "false",
      HEDGE_BODY_IDLE_TIMEOUT_MS: "300",
      HEDGE_LOG_LEVEL: "off",
    });
    const started = Date.now();
    const res = await rawBody(w.url, "/stall", { "accept-encoding": "identity" });
    const took = Date.now() - started;
    assert.equal(res.status, 200, "headers had already gone out");
    assert.equal(res.body.toString(), "partial ");
    assert.ok(took >= 300 && took < 3_000, `cut after ${took} ms`);
    await a.waitFor("abort", (r) => r.url === "/stall", 3_000);
    if (framing !== "chunked") {
      // Fewer bytes than the length promised: the client knows it is broken.
      assert.equal(res.ended, "aborted");
    }
    // Chunked: workerd under Miniflare ends the client's body cleanly when the
    // Worker's stream errors (it does the same for a plain JavaScript
    // pass-through when the origin resets), so only the cut itself is asserted.
  });
}

test("the body idle timeout measures the origin's silence, not a slow reader", async () => {
  // The origin sends 32 MiB at once: far more than the socket buffers between
  // workerd and the client hold, so a client that stops reading for 1.5 s
  // (five idle limits) holds the Worker's stream back while the origin is
  // done. That pause is the client's, and must not cut the body.
  const size = 32 << 20;
  const chunk = Buffer.alloc(64 << 10, "z");
  const a = await origin("a", () => ({
    headers: { "content-length": String(size) },
    chunks: Array.from({ length: size / chunk.length }, () => chunk),
  }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_CACHE: "false", HEDGE_BODY_IDLE_TIMEOUT_MS: "300" });
  const res = await rawRequest(w.url, {
    path: "/big",
    headers: { "accept-encoding": "identity" },
    onResponse: (r) => {
      r.pause();
      setTimeout(() => r.resume(), 1_500);
    },
  });
  assert.equal(res.ended, "complete");
  assert.equal(res.body.length, size);
});

test("a watched body keeps Content-Length, and a trickle inside the idle limit arrives whole", async () => {
  const chunks = ["one ", "two ", "three ", "four"];
  const length = Buffer.byteLength(chunks.join(""));
  const a = await origin("a", () => ({ headers: { "content-length": String(length) }, chunks, chunkGapMs: 100 }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_CACHE: "false", HEDGE_BODY_IDLE_TIMEOUT_MS: "2000" });
  const res = await rawBody(w.url, "/trickle", { "accept-encoding": "identity" });
  assert.equal(res.ended, "complete");
  assert.equal(res.body.toString(), chunks.join(""));
  assert.equal(res.headers["content-length"], String(length));
});

test("a watched gzip body arrives intact (no length is forced on a decoded body)", async () => {
  const text = "compressible ".repeat(2_000);
  const gz = zlib.gzipSync(text);
  const a = await origin("a", () => ({
    headers: { "content-encoding": "gzip", "content-length": String(gz.length) },
    body: gz,
  }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_CACHE: "false", HEDGE_BODY_IDLE_TIMEOUT_MS: "2000" });
  const res = await rawBody(w.url, "/gz", { "accept-encoding": "gzip" });
  assert.equal(res.ended, "complete");
  const decoded = res.headers["content-encoding"] === "gzip" ? zlib.gunzipSync(res.body) : res.body;
  assert.equal(decoded.toString(), text);
});
