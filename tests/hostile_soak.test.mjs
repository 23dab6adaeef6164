// The short version of the hostile soak (the long one: node lab/hostile-soak.mjs
// --minutes 5): ordinary clients beside long-URL writes, thousands of
// directives, respelled paths, failing paths, scanners, odd origin headers,
// method overrides, upgrades, broken uploads; the origins stay healthy and
// the error lines and points a client causes stay within the isolate's cap.
import { test } from "node:test";
import assert from "node:assert/strict";
import { runHostileSoak } from "../lab/hostile-soak.mjs";

test("short hostile soak: 20 s at 100 rps, no 5xx the Worker made, memory bounded, cache storing, origins healthy, billed events capped", { timeout: 120_000 }, async () => {
  const r = await runHostileSoak({ seconds: 20, rate: 100, sliceSeconds: 5 });
  assert.ok(r.requests > 1_500, `${r.requests} requests`);
  assert.deepEqual(r.problems, []);
  for (const [check, ok] of Object.entries(r.checks)) assert.ok(ok, `${check}: ${JSON.stringify(r.slices.map(({ byKind, ...s }) => s))}`);
});
