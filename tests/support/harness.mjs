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

/** Starts the built Worker with these vars, stopped after the file's tests. */
export async function worker(vars, extra) {
  const w = await startWorker(vars, extra);
  cleanups.push(() => w.dispose());
  return w;
}
