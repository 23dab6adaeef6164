// `npm run check`: the Worker's own configuration parser over a wrangler
// environment's vars, plus the deploy-time rules (no placeholder or loopback
// origins outside local development, reachable somewhere, a long enough
// stats token). Driven through scripts/check.sh, as `npm run check` runs it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dir = mkdtempSync(path.join(tmpdir(), "hedgehog-check-"));
test.after(() => rmSync(dir, { recursive: true, force: true }));

const HEAD = `name = "t"\nmain = "build/index.js"\ncompatibility_date = "2026-07-01"\n`;
const ORIGINS = (a, b) => `HEDGE_ORIGINS = '[{"name":"a","url":"${a}"},{"name":"b","url":"${b}"}]'`;

function runCheck(toml, ...args) {
  const file = path.join(dir, `wrangler-${Math.random().toString(36).slice(2)}.toml`);
  writeFileSync(file, toml);
  const r = spawnSync("bash", [path.join(root, "scripts/check.sh"), "--config", file, ...args], { cwd: root, encoding: "utf8" });
  return { status: r.status, out: r.stdout + r.stderr };
}

test("a production environment with its own origins and a route passes", () => {
  const r = runCheck(
    HEAD +
      `[vars]\n${ORIGINS("http://127.0.0.1:8081", "http://127.0.0.1:8082")}\n` +
      `[env.production]\nroutes = [{ pattern = "api.shop.net/*", zone_name = "shop.net" }]\n[env.production.vars]\n${ORIGINS("https://eu.origin.shop.net", "https://us.origin.shop.net")}\nHEDGE_LOG_LEVEL = "error"\n`,
    "--env",
    "production",
  );
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /all fine/);
  // Loopback origins are fine for local development (no --env).
  const local = runCheck(HEAD + `[vars]\n${ORIGINS("http://127.0.0.1:8081", "http://localhost:8082")}\n`);
  assert.equal(local.status, 0, local.out);
});

test("a typo'd key, a bad value and a short stats token fail the check, naming each key", () => {
  const r = runCheck(
    HEAD +
      `workers_dev = true\n[vars]\n${ORIGINS("https://a.shop.net", "https://b.shop.net")}\nHEDGE_QUANTIL = "p99"\nHEDGE_BUDGET_PERCENT = "150"\nHEDGE_STATS_TOKEN = "short-secret"\n`,
  );
  assert.equal(r.status, 1, r.out);
  for (const key of ["HEDGE_QUANTIL", "HEDGE_BUDGET_PERCENT", "HEDGE_STATS_TOKEN"]) assert.match(r.out, new RegExp(key));
  assert.doesNotMatch(r.out, /short-secret/, "the token itself is never printed");
});

test("placeholder or loopback origins and an environment reachable nowhere fail outside local development", () => {
  const r = runCheck(
    HEAD + `[env.production]\nworkers_dev = false\n[env.production.vars]\n${ORIGINS("https://origin-a.example.com", "http://127.0.0.1:9000")}\n`,
    "--env",
    "production",
  );
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /"a".*placeholder/);
  assert.match(r.out, /"b".*loopback/);
  assert.match(r.out, /reachable nowhere/);
  const missing = runCheck(HEAD + `[vars]\n${ORIGINS("https://a.shop.net", "https://b.shop.net")}\n[env.staging]\nworkers_dev = true\n`, "--env", "staging");
  assert.equal(missing.status, 1, missing.out);
  assert.match(missing.out, /HEDGE_ORIGINS: not set in \[env\.staging\]/);
});

test("the project's own wrangler.toml: local development passes, production fails until its origins and route are set", () => {
  const local = spawnSync("bash", [path.join(root, "scripts/check.sh")], { cwd: root, encoding: "utf8" });
  assert.equal(local.status, 0, local.stdout + local.stderr);
  const prod = spawnSync("bash", [path.join(root, "scripts/check.sh"), "--env", "production"], { cwd: root, encoding: "utf8" });
  assert.equal(prod.status, 1);
  assert.match(prod.stderr, /placeholder/);
  assert.match(prod.stderr, /reachable nowhere/);
});

test("local development is checked with .dev.vars over the config's vars, as wrangler dev reads them", () => {
  const local = mkdtempSync(path.join(dir, "local-"));
  const toml = path.join(local, "wrangler.toml");
  writeFileSync(toml, HEAD + `[vars]\n${ORIGINS("http://127.0.0.1:8081", "http://127.0.0.1:8082")}\n`);
  const check = () => {
    const r = spawnSync("bash", [path.join(root, "scripts/check.sh"), "--config", toml], { cwd: root, encoding: "utf8" });
    return { status: r.status, out: r.stdout + r.stderr };
  };
  assert.equal(check().status, 0);
  writeFileSync(path.join(local, ".dev.vars"), 'HEDGE_BUDGET_PERCNT=12\nHEDGE_TIMEOUT_MS="-5"\n# a comment\n');
  const bad = check();
  assert.equal(bad.status, 1, bad.out);
  assert.match(bad.out, /HEDGE_BUDGET_PERCNT/);
  assert.match(bad.out, /HEDGE_TIMEOUT_MS/);
  writeFileSync(path.join(local, ".dev.vars"), `HEDGE_ORIGINS='[{"name":"mine","url":"https://origin.mine.dev"}]'\n`);
  const good = check();
  assert.equal(good.status, 0, good.out);
  assert.match(good.out, /with \.dev\.vars\): \d+ HEDGE_\* key\(s\), 1 origin/);
});

