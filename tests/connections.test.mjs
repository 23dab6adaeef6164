// The platform's six-connection limit (src/edge/connections.rs): one
// invocation may have six subrequests waiting for their response headers at
// once. workerd here enforces nothing, so the Worker counts its own and the
// stats report the most one invocation had waiting at once. These requests
// drive the paths with the most subrequests: a stale entry of a varying
// response (two cache reads) revalidated while the primary and the hedge
// both fail fast and a third attempt answers, stored (two puts) and pushed to
// the aggregator; a stale-while-revalidate refresh whose primary and hedge
// both wait; and a write that invalidates three URLs at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { origins, popAggregator } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { stored } from "./support/cache.mjs";

const TOKEN = "connections-test-token-0123";

test("the worst cases keep at most six subrequests waiting for headers in one invocation", async () => {
  let revalidations = 0;
  const answer = (req) => {
    const url = req.url;
    if (req.method === "POST") {
      return { status: 201, headers: { location: "/w/created", "content-location": "/w/item?v=2" } };
    }
    if (url.startsWith("/vary")) {
      // The first answer is stored (max-age=1); when it is stale, the
      // primary and the hedge fail fast and the third attempt answers.
      if (!req.headers["if-none-match"]) return { headers: { "cache-control": "max-age=1", etag: '"v1"', vary: "accept-language" }, body: "first" };
      revalidations += 1;
      if (revalidations <= 2) return { status: 503, body: "busy" };
      return { headers: { "cache-control": "max-age=60", etag: '"v2"', vary: "accept-language" }, body: "second" };
    }
    if (url.startsWith("/swr")) {
      // Stale at once, refreshed in the background: slow enough that the
      // refresh's primary and its hedge wait for headers together.
      return { delayMs: req.headers["if-none-match"] ? 400 : 0, headers: { "cache-control": "max-age=1, stale-while-revalidate=60", etag: '"s"' }, body: "swr" };
    }
    return { body: "plain" };
  };
  const a = await origin("a", answer);
  const b = await origin("b", answer);
  const w = await worker(
    {
      HEDGE_ORIGINS: origins(a, b),
      HEDGE_STATIC_DELAY_MS: "50",
      HEDGE_MODE: "static",
      HEDGE_STATS_TOKEN: TOKEN,
    },
    popAggregator(),
  );
  const get = async (path, headers = {}) => {
    const res = await w.fetch(path, { headers: { "accept-language": "fr", ...headers } });
    return { status: res.status, via: res.headers.get("x-hedge"), body: await res.text() };
  };

  assert.equal((await get("/vary/1")).body, "first");
  await get("/swr/1");
  await stored(w, "/swr/1");
  // Both entries go stale.
  await new Promise((r) => setTimeout(r, 2_100));
  const revalidated = await get("/vary/1");
  assert.equal(revalidated.body, "second", JSON.stringify(revalidated));
  assert.equal(revalidations, 3, "primary and hedge failed fast, the third attempt answered");
  const swr = await get("/swr/1");
  assert.equal(swr.via, "stale");
  // The refresh's hedge goes out after 50 ms while its primary waits 400 ms.
  await b.waitFor("request", (r) => r.url === "/swr/1" && r.headers["x-hedge-attempt"], 5_000).catch(() => a.waitFor("request", (r) => r.url === "/swr/1" && r.headers["x-hedge-attempt"], 5_000));
  const write = await w.fetch("/w/item", { method: "POST", body: "x" });
  assert.equal(write.status, 201);
  await write.arrayBuffer();
  await new Promise((r) => setTimeout(r, 600));

  const stats = await (await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
  const peak = stats.connections_waiting_max;
  console.log(`# the most subrequests one invocation had waiting for headers at once: ${peak}`);
  assert.ok(peak <= 6, `${peak} waiting at once`);
  // The count ran: the refresh's two legs and the write's three deletes.
  assert.ok(peak >= 3, `${peak} waiting at once`);
});
