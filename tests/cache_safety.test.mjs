// The edge cache never hands a client a response meant for other request
// headers (Vary), never stores a body that ended short, and coalescing never
// makes a request much slower than it would have been alone.
import { test } from "node:test";
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { stored } from "./support/cache.mjs";
import { rawRequest } from "./support/raw.mjs";

const PUBLIC = "public, max-age=60";

async function get(w, path, headers) {
  const res = await w.fetch(path, { headers });
  return { body: await res.text(), via: res.headers.get("x-hedge"), headers: res.headers };
}

for (const [header, values] of [
  ["accept-language", ["fr", "en"]],
  ["origin", ["https://a.example", "https://b.example"]],
]) {
  test(`Vary: ${header}: each client gets the variant for its own ${header}, from the cache once stored`, async () => {
    const a = await origin("a", (req) => ({
      headers: { "cache-control": PUBLIC, vary: header },
      body: `variant for ${req.headers[header] ?? "(none)"}`,
    }));
    const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
    const [first, second] = values;
    const one = await get(w, "/v", { [header]: first });
    assert.equal(one.body, `variant for ${first}`);
    await stored(w, "/v");
    const two = await get(w, "/v", { [header]: second });
    assert.equal(two.body, `variant for ${second}`, "never the other client's variant");
    assert.notEqual(two.via, "cache");
    // Over a raw connection: fetch() would add an accept-language of its own.
    const none = await rawRequest(w.url, { path: "/v" });
    assert.equal(none.body.toString(), "variant for (none)");
    assert.equal(a.requests.length, 3);
    // Each stored variant now answers its own clients from the cache.
    const deadline = Date.now() + 5_000;
    for (const value of values) {
      for (;;) {
        const again = await get(w, "/v", { [header]: value });
        assert.equal(again.body, `variant for ${value}`);
        if (again.via === "cache") break;
        assert.ok(Date.now() < deadline, `${value} was never served from the cache`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  });
}

// A Worker sees every client's Accept-Encoding as "br, gzip" (the runtime
// negotiates encoding with the client itself), so it cannot key on it: plain
// bodies are stored and the runtime encodes them per client; encoded bodies
// are not stored (served from the cache, workerd gave an identity client gzip
// bytes without a Content-Encoding).
for (const originBody of ["encoded", "plain"]) {
  test(`Vary: accept-encoding, ${originBody} origin bodies: gzip and identity clients each get a body they can read`, async () => {
    const text = "the same text, ".repeat(200);
    const gz = zlib.gzipSync(text);
    const vary = { "cache-control": PUBLIC, vary: "Accept-Encoding" };
    const a = await origin("a", (req) =>
      originBody === "encoded" && /gzip/.test(req.headers["accept-encoding"] ?? "")
        ? { headers: { ...vary, "content-encoding": "gzip" }, body: gz }
        : { headers: vary, body: text },
    );
    const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
    const decode = (res) => (res.headers["content-encoding"] === "gzip" ? zlib.gunzipSync(res.body) : res.body).toString();
    const via = [];
    for (let round = 0; round < 3; round++) {
      for (const accept of ["gzip", "identity"]) {
        const res = await rawRequest(w.url, { path: "/enc", headers: { "accept-encoding": accept } });
        via.push(res.headers["x-hedge"]);
        if (accept === "identity") {
          assert.equal(res.headers["content-encoding"], undefined, `round ${round}: identity client got an encoded body`);
        }
        assert.equal(decode(res), text, `round ${round}, ${accept}`);
        if (originBody === "plain" && round === 0 && accept === "gzip") await stored(w, "/enc", { base: w.url });
      }
    }
    if (originBody === "plain") assert.ok(via.filter((v) => v === "cache").length >= 4, via.join(","));
    else assert.equal(via.filter((v) => v === "cache").length, 0, "encoded bodies are not stored");
  });
}

test("Vary: * is never stored", async () => {
  const a = await origin("a", () => ({ headers: { "cache-control": PUBLIC, vary: "*" } }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  for (let i = 0; i < 3; i++) assert.notEqual((await get(w, "/star", {})).via, "cache");
  assert.equal(a.requests.length, 3);
});

test("coalescing never hands one client's variant to another", async () => {
  const a = await origin("a", (req) => ({
    delayMs: req.url === "/lang/warm" ? 0 : 500,
    headers: { "cache-control": PUBLIC, vary: "accept-language" },
    body: `variant for ${req.headers["accept-language"]}`,
  }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  await get(w, "/lang/warm", { "accept-language": "de" }); // the route answers storably
  const langs = ["fr", "en", "fr", "en", "de", "en"];
  const answers = await Promise.all(langs.map((l) => get(w, "/lang/x", { "accept-language": l })));
  for (const [i, l] of langs.entries()) assert.equal(answers[i].body, `variant for ${l}`, `client ${i}`);
});

for (const framing of ["content-length", "chunked"]) {
  test(`a ${framing} body that ends early (origin reset) is never stored as if complete`, async () => {
    const headers = { "cache-control": PUBLIC };
    if (framing === "content-length") headers["content-length"] = "100";
    const a = await origin("a", (req) =>
      req.url === "/cut" ? { headers, reset: "mid-body", body: "7 bytes" } : { headers: { "cache-control": PUBLIC } },
    );
    const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" }, HEDGE_LOG_LEVEL: "off" });
    // The client sees a broken answer: either its headers and then a cut
    // body, or (workerd 1.20261117, when the cut comes before the headers
    // are flushed) a reset connection.
    const first = await w.fetch("/cut").catch((e) => e);
    if (first instanceof Error) assert.match(first.message, /terminated/);
    else {
      assert.equal(first.status, 200);
      await first.arrayBuffer().catch(() => {});
    }
    // A later store completing shows the earlier one has run its course.
    await (await w.fetch("/later")).arrayBuffer();
    await stored(w, "/later");
    const caches = await w.mf.getCaches();
    const entry = await caches.default.match("http://edge.test/cut");
    assert.equal(entry, undefined, `a truncated body was cached: ${JSON.stringify(await entry?.text())}`);
    // The origin cuts this one too: only its headers matter here.
    const next = await w.fetch("/cut").catch((e) => e);
    if (!(next instanceof Error)) {
      assert.notEqual(next.headers.get("x-hedge"), "cache");
      await next.arrayBuffer().catch(() => {});
    }
    assert.equal(a.requests.filter((r) => r.url === "/cut").length, 2);
  });
}

test("concurrent requests for a response that is not storable take as long as a lone one", async () => {
  const DELAY_MS = 1_000;
  const a = await origin("a", () => ({ delayMs: DELAY_MS, headers: { "cache-control": "private" } }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  let started = Date.now();
  await get(w, "/p/lone", {});
  const lone = Date.now() - started;
  for (const path of ["/p/burst", "/p/burst-again"]) {
    started = Date.now();
    const times = await Promise.all(
      Array.from({ length: 5 }, async () => {
        await get(w, path, {});
        return Date.now() - started;
      }),
    );
    console.log(`# lone ${lone} ms; 5 concurrent ${path}: ${times.join(", ")} ms`);
    for (const t of times) assert.ok(t <= 1.2 * lone, `${t} ms > 1.2 x ${lone} ms`);
  }
});

test("a route that turns unstorable stops coalescing after one answer", async () => {
  const DELAY_MS = 1_000;
  let storable = true;
  const a = await origin("a", () => ({
    delayMs: storable ? 0 : DELAY_MS,
    headers: { "cache-control": storable ? PUBLIC : "private" },
  }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  await get(w, "/t/first", {}); // storable: the route coalesces
  storable = false;
  await get(w, "/t/second", {}); // not storable: the route stops coalescing
  const started = Date.now();
  const times = await Promise.all(
    Array.from({ length: 5 }, async () => {
      await get(w, "/t/burst", {});
      return Date.now() - started;
    }),
  );
  for (const t of times) assert.ok(t <= 1.2 * DELAY_MS + 200, `${t} ms`);
});
