// `npm run check [-- --env NAME] [-- --config FILE]`: checks a wrangler
// environment's HEDGE_* vars before a deploy, with the Worker's own parser
// (core/examples/check_config.rs), plus what the parser cannot know:
//   - every invalid or unknown key (the Worker would run it on its default
//     and log an error; here it fails the check);
//   - origins on loopback or example.com/.net/.org outside local development
//     (no --env: the local `wrangler dev` configuration, where loopback is fine);
//   - an environment reachable nowhere (no route and workers_dev off);
//   - a stats token set but shorter than 16 characters (the parser's rule).
// Exit status 0: fine; 1: problems, each on its own line; 2: the check
// itself could not run.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Hosts that cannot be a production origin. */
export function placeholderOrLoopback(url) {
  let host;
  try {
    host = new URL(url).hostname.toLowerCase().replace(/^\[|\]$/g, "");
  } catch {
    return null; // the parser reports unusable URLs
  }
  if (host === "localhost" || host.endsWith(".localhost") || host === "::1" || host === "0.0.0.0" || /^127\./.test(host)) {
    return "loopback";
  }
  if (/(^|\.)example\.(com|net|org)$/.test(host) || host.endsWith(".example") || host.endsWith(".invalid") || host.endsWith(".test")) {
    return "a placeholder (example / test domain)";
  }
  return null;
}

/**
 * The local vars file `wrangler dev` reads beside the config, `.dev.vars`:
 * KEY=VALUE lines, values optionally quoted. `{}` when there is none.
 */
export function devVars(configPath) {
  const file = path.join(path.dirname(configPath), ".dev.vars");
  if (!existsSync(file)) return { file: null, vars: {} };
  const vars = {};
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const m = line.match(/^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/);
    if (!m) continue;
    let value = m[2];
    const quoted = value.match(/^(["'])(.*)\1$/);
    if (quoted) value = quoted[2];
    vars[m[1]] = value;
  }
  return { file, vars };
}

/** The problems with environment `env` (undefined: the top level) of `configPath`. */
export async function check({ env, configPath }) {
  const { unstable_readConfig } = await import("wrangler");
  const config = unstable_readConfig({ config: configPath, env });
  // Local development also reads the vars file, over the config's vars, as
  // wrangler dev does (a deploy does not: it is checked for the top level only).
  const local = env ? { file: null, vars: {} } : devVars(configPath);
  const merged = { ...(config.vars ?? {}), ...local.vars };
  const vars = Object.fromEntries(Object.entries(merged).filter(([k]) => k.startsWith("HEDGE_")));
  const problems = [];
  const where = env ? `[env.${env}]` : "the top level (local development)";
  if (!vars.HEDGE_ORIGINS) {
    problems.push(`HEDGE_ORIGINS: not set in ${where}'s vars (vars are not inherited by environments)`);
  }
  const out = execFileSync("cargo", ["run", "-q", "-p", "hedgehog-core", "--example", "check_config"], {
    cwd: root,
    input: JSON.stringify(vars),
    stdio: ["pipe", "pipe", "inherit"],
  });
  const { errors, origins } = JSON.parse(out.toString());
  for (const e of errors) {
    if (e.key === "HEDGE_ORIGINS" && !vars.HEDGE_ORIGINS) continue;
    problems.push(`${e.key}: ${e.reason}`);
  }
  if (env) {
    for (const o of origins) {
      const why = placeholderOrLoopback(o.url);
      if (why) problems.push(`HEDGE_ORIGINS: origin "${o.name}" (${o.url}) is ${why}; set your own origins for ${where}`);
    }
    const routes = [...(config.routes ?? []), ...(config.route ? [config.route] : [])];
    if (routes.length === 0 && config.workers_dev !== true) {
      problems.push(`${where}: no route and workers_dev is not true, so the Worker would be reachable nowhere; add routes = [{ pattern = "api.yourdomain.com/*", zone_name = "yourdomain.com" }]`);
    }
  }
  return { problems, keys: Object.keys(vars).length, origins, devVarsFile: local.file };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { env: { type: "string" }, config: { type: "string", default: path.join(root, "wrangler.toml") } },
  });
  let result;
  try {
    result = await check({ env: values.env, configPath: values.config });
  } catch (e) {
    process.stderr.write(`check: could not run: ${e.message}\n`);
    process.exit(2);
  }
  const label = values.env ? `--env ${values.env}` : "the top level";
  if (result.problems.length) {
    process.stderr.write(`check: ${label} of ${values.config} has ${result.problems.length} problem(s):\n`);
    for (const p of result.problems) process.stderr.write(`  - ${p}\n`);
    process.exit(1);
  }
  const withDevVars = result.devVarsFile ? ` (with ${path.basename(result.devVarsFile)})` : "";
  process.stdout.write(`check: ${label} of ${values.config}${withDevVars}: ${result.keys} HEDGE_* key(s), ${result.origins.length} origin(s), all fine\n`);
}
