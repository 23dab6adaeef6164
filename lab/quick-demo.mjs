// A quick look at the Worker in front of two local origins: a slow request is
// hedged, a fast one is not. Replaced by the full lab (lab/run.mjs) later.
import { startOrigin } from "../tests/support/origin.mjs";
import { startWorker, origins } from "../tests/support/worker.mjs";

const a = await startOrigin("primary", (req) => (req.url.startsWith("/slow") ? { delayMs: 2_000 } : { delayMs: 20 }));
const b = await startOrigin("secondary", () => ({ delayMs: 20 }));
const w = await startWorker({ HEDGE_ORIGINS: origins(a, b), HEDGE_COLD_DELAY_MS: "150" });
try {
  for (const path of ["/fast", "/slow"]) {
    const t0 = performance.now();
    const res = await w.fetch(path);
    const body = await res.text();
    console.log(`${path}: ${res.status} in ${(performance.now() - t0).toFixed(0)} ms, x-hedge=${res.headers.get("x-hedge")}, body=${body}`);
    console.log(`  server-timing: ${res.headers.get("server-timing")}`);
  }
} finally {
  await w.dispose();
  await a.close();
  await b.close();
}
