// The hedge budget is a promise about origin load per PoP, and a PoP runs many
// isolates: eight fresh isolates in one workerd, each taking its share of slow
// requests that all want a hedge, must together stay within the budget, with
// and without the PoP aggregator bound.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Miniflare } from "./support/miniflare.mjs";
import { origins, popAggregator, workerOptions } from "./support/worker.mjs";
import { origin } from "./support/harness.mjs";

const ISOLATES = 8;
const PER_ISOLATE = 12;
const PERCENT = 12;

for (const withAggregator of [false, true]) {
  test(`${ISOLATES} fresh isolates stay within the ${PERCENT}% budget together (${withAggregator ? "with" : "without"} the PoP aggregator)`, async () => {
    // Every primary takes 300 ms, fifteen times the 20 ms hedge delay: every
    // request wants a hedge, so only the budget decides.
    const a = await origin("a", () => ({ delayMs: 300 }));
    const b = await origin("b", () => ({ delayMs: 300 }));
    const vars = {
      HEDGE_ORIGINS: origins(a, b),
      HEDGE_MODE: "static",
      HEDGE_STATIC_DELAY_MS: "20",
      HEDGE_BUDGET_PERCENT: String(PERCENT),
      HEDGE_CACHE: "false",
    };
    const pop = popAggregator();
    const workers = Array.from({ length: ISOLATES }, (_, i) => ({
      ...workerOptions(vars),
      name: `isolate-${i}`,
      ...(withAggregator
        ? { durableObjects: { POP_AGGREGATOR: { className: "PopAggregator", scriptName: "isolate-0", useSQLite: true } } }
        : {}),
    }));
    const mf = new Miniflare({ workers, ...(withAggregator ? { cf: pop.cf } : {}) });
    try {
      await mf.ready;
      const isolates = await Promise.all(workers.map((w) => mf.getWorker(w.name)));
      // Each isolate takes a request every 50 ms, all isolates at once.
      await Promise.all(
        isolates.map(async (isolate, i) => {
          const pending = [];
          for (let k = 0; k < PER_ISOLATE; k++) {
            pending.push(isolate.fetch(`http://edge.test/slow/${i}/${k}`).then((r) => r.arrayBuffer()));
            await new Promise((r) => setTimeout(r, 50));
          }
          await Promise.all(pending);
        }),
      );
      const total = ISOLATES * PER_ISOLATE;
      const hedges = [...a.requests, ...b.requests].filter((r) => r.headers["x-hedge-attempt"] === "true").length;
      const rate = (100 * hedges) / total;
      console.log(`# ${ISOLATES} isolates, ${total} requests: ${hedges} hedges (${rate.toFixed(1)}%)`);
      assert.ok(rate <= PERCENT + 2, `${hedges} hedges for ${total} requests: ${rate.toFixed(1)}% > ${PERCENT + 2}%`);
      assert.ok(hedges >= ISOLATES / 2, `the budget must still be usable: ${hedges} hedges`);
    } finally {
      await mf.dispose();
    }
  });
}
