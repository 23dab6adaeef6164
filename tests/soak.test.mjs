// The short version of the soak (the long one: bash scripts/soak.sh).
import { test } from "node:test";
import assert from "node:assert/strict";
import { runSoak } from "../lab/soak.mjs";

test("short soak: 20 s at 100 rps through workerd, no unexpected errors, memory flat", async () => {
  const r = await runSoak({ seconds: 20, rate: 100, sliceSeconds: 5 });
  assert.equal(r.unexpected, 0, JSON.stringify(r.slices));
  assert.ok(r.rssFirstMb > 0 && r.wasmFirstMb > 0, "memory was read");
  assert.ok(r.memoryFlat, `wasm memory ${r.wasmFirstMb.toFixed(2)} -> ${r.wasmLastMb.toFixed(2)} MB`);
});
