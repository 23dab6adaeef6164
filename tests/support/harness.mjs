// Per-test-file helpers: origins and Workers started here are stopped when
// the file's tests are done, whatever happened.
import { after } from "node:test";
import { startOrigin } from "./origin.mjs";
import { startWorker } from "./worker.mjs";

const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** Starts a loopback origin (see origin.mjs), stopped after the file's tests. */
export async function origin(name, handle) {
  const o = await startOrigin(name, handle);
  cleanups.push(() => o.close());
  return o;
}

/**
 * Vars every test Worker gets unless the test sets them. A new isolate's hedge
 * budget starts empty (it earns its hedges); tests of hedging mechanics need a
 * first request that can hedge, so a fast per-isolate floor refills the bucket
 * within milliseconds. Tests of the budget itself set their own values.
 * Primaries go to the first origin in order, so a test knows which origin
 * a request reaches first; tests of the latency-aware choice set "latency".
 */
export const TEST_DEFAULTS = { HEDGE_BUDGET_FLOOR_PER_SEC: "1000", HEDGE_PRIMARY: "ordered" };

/** Starts the built Worker with these vars, stopped after the file's tests. */
export async function worker(vars, extra) {
  const w = await startWorker({ ...TEST_DEFAULTS, ...vars }, extra);
  cleanups.push(() => w.dispose());
  return w;
}
