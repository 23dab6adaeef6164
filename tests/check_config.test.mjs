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


test("npm run deploy without an environment refuses before anything runs, and names the environments", () => {
  const file = path.join(dir, "deploy-wrangler.toml");
  writeFileSync(file, HEAD + `[vars]\n${ORIGINS("http://127.0.0.1:8081", "http://127.0.0.1:8082")}\n[env.staging]\nworkers_dev = true\n[env.production]\nworkers_dev = false\n`);
  const r = spawnSync("bash", [path.join(root, "scripts/deploy.sh"), "--config", file], { cwd: root, encoding: "utf8" });
  assert.equal(r.status, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /--env NAME \(environments in .*: production staging\)/);
  assert.match(r.stderr, /never deployed/);
});

test("--env checks the environment's own vars: .dev.vars, which a deploy never uploads, changes nothing", () => {
  const local = mkdtempSync(path.join(dir, "env-"));
  const toml = path.join(local, "wrangler.toml");
  writeFileSync(
    toml,
    HEAD +
      `[vars]\n${ORIGINS("http://127.0.0.1:8081", "http://127.0.0.1:8082")}\n` +
      `[env.production]\nroutes = ["api.shop.net/*"]\n[env.production.vars]\n${ORIGINS("https://origin-a.example.com", "https://b.shop.net")}\n`,
  );
  // .dev.vars would fix production's placeholder origin, and adds a typo.
  writeFileSync(path.join(local, ".dev.vars"), `HEDGE_ORIGINS='[{"name":"mine","url":"https://origin.mine.dev"}]'\nHEDGE_QUANTIL=p99\n`);
  const r = spawnSync("bash", [path.join(root, "scripts/check.sh"), "--config", toml, "--env", "production"], { cwd: root, encoding: "utf8" });
  const out = r.stdout + r.stderr;
  assert.equal(r.status, 1, out);
  assert.match(out, /"a" \(https:\/\/origin-a\.example\.com\) is a placeholder/);
  assert.doesNotMatch(out, /HEDGE_QUANTIL|mine|\.dev\.vars/);
});

test("--env lists what would be deployed, refuses a secret in [vars] and warns of an origin under the Worker's own route", () => {
  const r = runCheck(
    HEAD +
      `[env.production]\nroutes = [{ pattern = "api.shop.net/*", zone_name = "shop.net" }]\n` +
      `[[env.production.durable_objects.bindings]]\nname = "POP_AGGREGATOR"\nclass_name = "PopAggregator"\n[[migrations]]\ntag = "v1"\nnew_sqlite_classes = ["PopAggregator"]\n` +
      `[env.production.vars]\n${ORIGINS("https://api.shop.net", "https://b.shop.net")}\n`,
    "--env",
    "production",
  );
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /warning: origin "a" \(https:\/\/api\.shop\.net\) is under the Worker's own route api\.shop\.net\/\*/);
  assert.match(r.out, /routes api\.shop\.net\/\*/);
  assert.match(r.out, /Durable Objects: POP_AGGREGATOR \(PopAggregator\); migrations: v1/);
  assert.match(r.out, /secrets it reads.*HEDGE_STATS_TOKEN/);
  const secret = runCheck(
    HEAD + `[env.production]\nworkers_dev = true\n[env.production.vars]\n${ORIGINS("https://a.shop.net", "https://b.shop.net")}\nHEDGE_STATS_TOKEN = "a-long-enough-token-1234"\n`,
    "--env",
    "production",
  );
  assert.equal(secret.status, 1, secret.out);
  assert.match(secret.out, /HEDGE_STATS_TOKEN: set in \[env\.production\]'s vars.*wrangler secret put HEDGE_STATS_TOKEN --env production/);
  assert.doesNotMatch(secret.out, /a-long-enough-token-1234/);
});

test("the check runs the parser of the built module it is given, not a second copy", () => {
  // A stand-in build whose parser reports one made-up error: the check
  // reports exactly that, so it asked the module.
  const build = mkdtempSync(path.join(dir, "build-"));
  writeFileSync(
    path.join(build, "index.js"),
    `export default class { check_config(vars) { return JSON.stringify({ errors: [{ key: "HEDGE_FROM_THE_MODULE", reason: "seen " + Object.keys(vars).join(",") }], origins: [], secrets: [] }); } }\n`,
  );
  const file = path.join(dir, "stand-in.toml");
  writeFileSync(file, HEAD + `[vars]\n${ORIGINS("http://127.0.0.1:8081", "http://127.0.0.1:8082")}\n`);
  const r = spawnSync("node", [path.join(root, "scripts/check-config.mjs"), "--config", file], { cwd: root, encoding: "utf8", env: { ...process.env, HEDGEHOG_BUILD_DIR: build } });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /HEDGE_FROM_THE_MODULE: seen HEDGE_ORIGINS/);
});

test("a removed key fails the check with what replaced it; HEDGE_TUNING as a TOML table passes", () => {
  const r = runCheck(
    HEAD +
      `workers_dev = true\n[vars]\n${ORIGINS("https://a.shop.net", "https://b.shop.net")}\nHEDGE_COLD_DELAY_MS = "100"\nHEDGE_POP_MAX_KEYS = "10"\n`,
  );
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /HEDGE_COLD_DELAY_MS: removed.*HEDGE_TUNING = \{"cold_delay_ms"/);
  assert.match(r.out, /HEDGE_POP_MAX_KEYS: removed.*constant/);
  const tuned = runCheck(
    HEAD +
      `workers_dev = true\n[vars]\n${ORIGINS("https://a.shop.net", "https://b.shop.net")}\nHEDGE_TUNING = { cold_delay_ms = 100, cut_unpaid = false }\n`,
  );
  assert.equal(tuned.status, 0, tuned.out);
  const typo = runCheck(
    HEAD + `workers_dev = true\n[vars]\n${ORIGINS("https://a.shop.net", "https://b.shop.net")}\nHEDGE_TUNING = { cold_dely_ms = 100 }\n`,
  );
  assert.equal(typo.status, 1, typo.out);
  assert.match(typo.out, /HEDGE_TUNING\.cold_dely_ms: unknown HEDGE_TUNING field/);
});
