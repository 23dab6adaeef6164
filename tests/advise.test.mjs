// The advisor (npm run advise): the built Worker's own stats page, taken
// after real traffic against loopback origins with a slow minority, replayed
// for other budgets. Hedging must be predicted to cut the tail it measured;
// bad input gets a clear error.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TOKEN = "test-token-0123456789abcdef";
const scratch = mkdtempSync(path.join(tmpdir(), "hedgehog-advise-test-"));

/**
 * Runs `npm run advise`'s script with `args` (and `token` as HEDGE_STATS_TOKEN)
 * without blocking this process: the Worker it may ask runs beside it.
 */
function advise(args, token = process.env.HEDGE_STATS_TOKEN ?? "") {
  return new Promise((resolve) => {
    const child = spawn("bash", [path.join(root, "scripts/advise.sh"), ...args], { cwd: root, env: { ...process.env, HEDGE_STATS_TOKEN: token } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (status) => resolve({ status, stdout, stderr }));
  });
}

test("the advisor replays the Worker's own stats page and predicts what hedging buys", async () => {
  // One answer in 20 takes 600 ms, the rest 2-5 ms at the origin (about
  // 30 ms through workerd under this load): hedging should cut p99 to a
  // delay plus a fast answer, under half the unhedged p99 (six runs: 77-116
  // ms against about 610). Each origin is slow on its own requests, as the
  // replay assumes (independent draws). When both were slow on the same ones
  // (and slow meant 300 ms), every hedge of a slow request was slow too, the
  // hedge target measured about 9% slow, the replay's delay at the 12% budget
  // sat on the edge of what the budget pays for, and one run in three
  // predicted 215 ms against 320 (CI failed on f4f1c71).
  const slowOn = (offset) => (req) => {
    const id = Number(req.url.split("/").pop());
    return { delayMs: (id + offset) % 20 === 0 ? 600 : 2 + (id % 4) };
  };
  const a = await origin("a", slowOn(0));
  const b = await origin("b", slowOn(10));
  const w = await worker({
    HEDGE_ORIGINS: origins(a, b),
    HEDGE_STATS_TOKEN: TOKEN,
    HEDGE_PRIMARY: "latency",
    // No floor: the budget alone pays for hedges, as deployed.
    HEDGE_BUDGET_FLOOR_PER_SEC: "0",
  });
  const requests = 1_600;
  for (let i = 0; i < requests; i += 40) {
    await Promise.all(
      Array.from({ length: 40 }, async (_, k) => {
        const res = await w.fetch(`/api/item/${i + k}`);
        await res.arrayBuffer();
      }),
    );
  }
  const page = await w.fetch("/__hedge/stats", { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(page.status, 200);
  const text = await page.text();
  const stats = JSON.parse(text);
  const keys = stats.latency.keys.filter((k) => k.route === "/api");
  assert.deepEqual(keys.map((k) => k.origin).sort(), ["a", "b"]);
  const file = path.join(scratch, "stats.json");
  writeFileSync(file, text);

  const run = await advise(["--from", file, "--json", "--budgets", "0,12"]);
  assert.equal(run.status, 0, run.stderr);
  const advice = JSON.parse(run.stdout);
  assert.equal(advice.in_force.budget_percent, 12);
  const route = advice.routes.find((r) => r.route === "/api");
  assert.ok(route?.judged, JSON.stringify(route));
  assert.ok(Math.abs(route.rate_rps * advice.window_s - requests) < requests * 0.2, `rate ${route.rate_rps}/s over ${advice.window_s} s`);
  const row = (policy, budget) => route.rows.find((r) => r.policy === policy && r.budget_percent === budget);
  assert.equal(route.rows.length, 4, "two policies x two budgets");
  const off = row("tail-aware", 0);
  const hedged = row("tail-aware", 12);
  // Unhedged, p99 may lie past every answer the page holds (hedges cut
  // each slow one): then it is a lower bound ("p99_known": false), the
  // slowest time the page holds, which is a slow answer cut when its hedge
  // won (one fresh-machine run read 350 ms: every 600 ms answer was cut).
  // Known, it is read between the page's sketch points around the jump
  // from the fast answers to the 600 ms ones, so it can land below 600 (a
  // full test run on 69a27cf read 410 ms, known). Either way it lies far
  // past the fast answers (about 30 ms).
  assert.ok(off.p99_ms >= 200, `unhedged p99 ${off.p99_ms} (known: ${off.p99_known}): the slow 5% is measured`);
  assert.ok(hedged.p99_known, "the hedged p99 rests on answers");
  assert.ok(hedged.p99_ms < off.p99_ms / 2, `hedged p99 ${hedged.p99_ms} against ${off.p99_ms}: hedging is predicted to cut it`);
  assert.ok(hedged.extra_pct > 3 && hedged.extra_pct <= 12.5, `extra ${hedged.extra_pct}%`);
  assert.equal(hedged.in_force, true);
  assert.ok(hedged.bound_p99_ms > 0 && hedged.bound_p99_ms <= hedged.p99_ms * 1.05);
  assert.equal(route.recommendation.budget_percent, 12);

  // As a user runs it against a deployed Worker: --url, the token from the environment.
  const fetched = await advise(["--url", `${w.url}/__hedge/stats`, "--json", "--budgets", "12"], TOKEN);
  assert.equal(fetched.status, 0, fetched.stderr);
  assert.ok(JSON.parse(fetched.stdout).routes.some((r) => r.route === "/api" && r.judged));
  const refused = await advise(["--url", `${w.url}/__hedge/stats`], "wrong-token-0123456789abcdef");
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /token was refused/);

  const table = await advise(["--from", file, "--budgets", "0,12"]);
  assert.equal(table.status, 0, table.stderr);
  assert.match(table.stdout, /route \/api: .* requests\/s/);
  assert.match(table.stdout, /tail-aware \* \| 12 /);
  assert.match(table.stdout, /What the replay cannot know/);
});

test("the advisor says what is wrong with its input, and --help says how to run it", async () => {
  const help = await advise(["--help"]);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /--url/);
  assert.match(help.stdout, /--from/);
  const missing = await advise(["--from", path.join(scratch, "nothing-here.json")]);
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /cannot read/);
  const old = path.join(scratch, "old.json");
  writeFileSync(old, JSON.stringify({ routes: [] }));
  const noLatency = await advise(["--from", old]);
  assert.equal(noLatency.status, 2);
  assert.match(noLatency.stderr, /no "latency" section/);
  const bad = await advise(["--from", old, "--budgets", "5,lots"]);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--budgets expects percentages/);
  const knee = await advise(["--from", old, "--knee-pct", "-3"]);
  assert.equal(knee.status, 2);
  assert.match(knee.stderr, /--knee-pct does not take "-3"/);
  const noToken = await advise(["--url", "http://127.0.0.1:9/"], "");
  assert.equal(noToken.status, 2);
  assert.match(noToken.stderr, /HEDGE_STATS_TOKEN/);
});
