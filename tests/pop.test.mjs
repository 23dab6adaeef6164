// The PoP aggregator Durable Object: a fresh isolate hedges on the PoP's
// quantiles, the aggregate survives a runtime restart, and a failing or
// hanging aggregator changes nothing for requests.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Miniflare } from "./support/miniflare.mjs";
import { origins, popAggregator, serverTiming, startWorker, workerOptions, wrap } from "./support/worker.mjs";
import { origin } from "./support/harness.mjs";

const dirs = [];
after(async () => {
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

async function tempDir() {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "hedgehog-pop-"));
  dirs.push(dir);
  return dir;
}

/** Hedge-delay entry of a response's Server-Timing. */
async function hedgeDelay(res) {
  await res.arrayBuffer();
  return serverTiming(res.headers.get("server-timing"))["hedge-delay"];
}

const VARS = {
  // A cold default far from the origins' ~30 ms, so its use is unmistakable.
  HEDGE_TUNING: { cold_delay_ms: "5000", min_data_points: "20", pop_push_every_requests: "10" },
  // These tests name the primary: the first origin.
  HEDGE_PRIMARY: "ordered",
};

test("a fresh isolate hedges on the PoP delay from the aggregator, which survives a runtime restart", async () => {
  const a = await origin("a", () => ({ delayMs: 30 }));
  const b = await origin("b", () => ({ delayMs: 30 }));
  const persistDir = await tempDir();
  const vars = { HEDGE_ORIGINS: origins(a, b), ...VARS };

  // First runtime: traffic until the aggregator holds enough samples.
  const first = await startWorker(vars, popAggregator({ persistDir }));
  const stats = await first.fillPop(40);
  assert.ok(stats.samples >= 40, `aggregator holds ${stats.samples} samples`);
  await first.dispose();

  // Second runtime, same storage: new isolate, new aggregator instance.
  const second = await startWorker(vars, popAggregator({ persistDir }));
  try {
    const cold = await hedgeDelay(await second.fetch("/api/item/first"));
    assert.equal(cold.desc, "cold", "nothing known before the first push's reply");
    assert.equal(cold.dur, 5000);
    let delay = cold;
    for (let i = 0; i < 50 && delay.desc === "cold"; i++) {
      delay = await hedgeDelay(await second.fetch(`/api/item/next-${i}`));
    }
    assert.equal(delay.desc, "pop", JSON.stringify(delay));
    assert.ok(delay.dur >= 25 && delay.dur < 1000, `PoP delay ${delay.dur} ms`);
    const restored = await second.popStats();
    assert.ok(restored.pushes > stats.pushes, `pushes ${stats.pushes} -> ${restored.pushes}`);
  } finally {
    await second.dispose();
  }
});

test("a fresh isolate sends no hedges to an origin the PoP has seen erroring", async () => {
  let bFails = true;
  const a = await origin("a", () => ({ delayMs: 300, body: "from-a" }));
  const b = await origin("b", () => (bFails ? { status: 500, body: "broken" } : { body: "from-b" }));
  const persistDir = await tempDir();

  // First runtime: b is the primary and answers 500 to everything.
  // (Its own health must not take b out of service, or the PoP hears little of it.)
  const first = await startWorker(
    {
      HEDGE_ORIGINS: origins(b, a),
      ...VARS,
      HEDGE_TUNING: { ...VARS.HEDGE_TUNING, health_consecutive_failures: "1000", health_failure_rate: "1" },
      HEDGE_LOG_LEVEL: "off",
    },
    popAggregator({ persistDir }),
  );
  for (let i = 0; i < 40; i++) await (await first.fetch(`/api/e/${i}`)).arrayBuffer();
  const seen = (await first.popStats()).origins.find((o) => o.origin === "b");
  assert.ok(seen.responses >= 20 && seen.rate_5xx === 1, JSON.stringify(seen));
  await first.dispose();

  // Second runtime: b is healthy again and is the hedge target, but this
  // isolate has no data of its own on b; the PoP's 5xx rate for b stops hedges to it.
  bFails = false;
  const hedgesBefore = b.requests.length;
  const second = await startWorker(
    {
      HEDGE_ORIGINS: origins(a, b),
      ...VARS,
      HEDGE_TUNING: { ...VARS.HEDGE_TUNING, cold_delay_ms: "20", min_data_points: "1000000", same_origin_hedge: "false" },
    },
    popAggregator({ persistDir }),
  );
  try {
    // The first request pushes (nothing known yet, so it may hedge); once the
    // reply is in, hedges to b are refused.
    let skip;
    for (let i = 0; i < 10 && skip?.desc !== "no-target"; i++) {
      const res = await second.fetch(`/api/q/${i}`);
      await res.arrayBuffer();
      skip = serverTiming(res.headers.get("server-timing"))["hedge-skip"];
    }
    assert.equal(skip?.desc, "no-target", "hedges to b refused on the PoP's word");
    const sentSoFar = b.requests.length;
    for (let i = 0; i < 5; i++) {
      const res = await second.fetch(`/api/later/${i}`);
      assert.equal(await res.text(), "from-a");
    }
    assert.equal(b.requests.length, sentSoFar, "no hedges to b while the PoP rate holds");
    assert.ok(sentSoFar - hedgesBefore <= 2, `${sentSoFar - hedgesBefore} hedges reached b before the reply`);
  } finally {
    await second.dispose();
  }
});

test("a bad push body is rejected with a clear error and changes nothing", async () => {
  const a = await origin("a", () => ({}));
  const w = await startWorker({ HEDGE_ORIGINS: origins(a) }, popAggregator());
  try {
    const ns = await w.mf.getDurableObjectNamespace("POP_AGGREGATOR");
    const stub = ns.get(ns.idFromName("TST"));
    const before = await (await stub.fetch("http://pop/stats")).json();
    const res = await stub.fetch("http://pop/push", { method: "POST", body: '{"version":1,"quantile":0.95,"elig' });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.equal(body.error, "invalid_push");
    assert.match(body.message, /not a push body/);
    const after = await (await stub.fetch("http://pop/stats")).json();
    assert.deepEqual(after, before);
  } finally {
    await w.dispose();
  }
});

// Aggregators that fail: one throws, one never answers.
const BROKEN = `
export class Throws { async fetch() { throw new Error("aggregator is down"); } }
export class Hangs { async fetch() { await new Promise(() => {}); } }
export default { fetch() { return new Response("broken aggregators"); } };
`;

for (const className of ["Throws", "Hangs"]) {
  test(`with an aggregator that ${className.toLowerCase()}, requests succeed and hedge on local data`, async () => {
    // Every 30th primary answer is slow (3%, above the p95 hedge delay):
    // 1 s, far above the ~10 ms the other answers take.
    let n = 0;
    const a = await origin("a", () => ({ delayMs: n++ % 30 === 29 ? 1_000 : 10 }));
    const b = await origin("b", () => ({ delayMs: 10 }));
    const edge = workerOptions({ HEDGE_ORIGINS: origins(a, b), ...VARS, HEDGE_TUNING: { ...VARS.HEDGE_TUNING, pop_timeout_ms: "200" } });
    const mf = new Miniflare({
      workers: [
        {
          ...edge,
          name: "edge",
          durableObjects: { POP_AGGREGATOR: { className, scriptName: "broken", useSQLite: true } },
        },
        { name: "broken", modules: true, script: BROKEN, compatibilityDate: "2026-07-01", durableObjects: { T: { className: "Throws", useSQLite: true }, H: { className: "Hangs", useSQLite: true } } },
      ],
    });
    const w = await wrap(mf);
    try {
      const delays = [];
      let hedgeWins = 0;
      for (let i = 0; i < 120; i++) {
        const res = await w.fetch(`/api/x/${i}`);
        assert.equal(res.status, 200, `request ${i}`);
        if (res.headers.get("x-hedge") === "hedge") hedgeWins++;
        delays.push(await hedgeDelay(res));
      }
      const last = delays.at(-1);
      assert.equal(last.desc, "route", JSON.stringify(last));
      assert.ok(last.dur < 500, `local delay ${last.dur}`);
      assert.ok(hedgeWins >= 2, `${hedgeWins} hedges won`);
    } finally {
      await w.dispose();
    }
  });
}

test("the aggregator sheds pushes past its capacity, unread and cheaply, and writes storage once a minute, not per push", async () => {
  const { startGated } = await import("../lab/pop-capacity.mjs");
  const a = await origin("a", () => ({ delayMs: 5 }));
  const b = await origin("b", () => ({ delayMs: 5 }));
  const w = await startGated({ HEDGE_ORIGINS: origins(a, b), ...VARS, HEDGE_TUNING: { ...VARS.HEDGE_TUNING, pop_push_every_requests: "5" } });
  try {
    // Real pushes from the Worker, kept by the gate.
    for (let i = 0; i < 40; i++) await (await fetch(`${w.url}/api/item/${i}`)).arrayBuffer();
    const { bodies } = await w.gate("/captured");
    const full = bodies.filter((x) => x.includes('"buckets":[['));
    assert.ok(full.length > 0, `${bodies.length} pushes captured`);
    const stats = async (name) => {
      const ns = await w.mf.getDurableObjectNamespace("LAB_REAL_AGGREGATOR", "hedgehog");
      return (await ns.get(ns.idFromName(name)).fetch("http://pop/stats")).json();
    };

    // 300 pushes at 100/s: each applied, storage written for the first 20
    // and then not again within the minute.
    const paced = await w.gate("/drive", { target: "real", name: "PACED", bodies: full, rate: 100, seconds: 3 });
    assert.deepEqual(paced.statuses, { 200: 300 });
    const p = await stats("PACED");
    assert.equal(p.pushes, 300);
    assert.ok(p.rows_written <= 20 * (p.keys + 1), `${p.rows_written} rows for ${p.keys} keys`);

    // 4,000 at once: far past 800 a second. The excess is shed with 503
    // "shed" and changes nothing; what was taken was applied.
    const burst = await w.gate("/drive", { target: "real", name: "BURST", bodies: full, rate: 1e6, seconds: 0.004 });
    assert.equal(burst.sent, 4000);
    assert.equal(burst.errors, 0, JSON.stringify(burst.statuses));
    assert.ok(burst.shed >= 1000, `shed ${burst.shed} of 4000`);
    const s = await stats("BURST");
    assert.equal(s.pushes, 4000 - burst.shed);
    assert.equal(s.pushes_shed, burst.shed);
  } finally {
    await w.dispose();
  }
});
