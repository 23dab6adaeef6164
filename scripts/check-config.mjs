// `npm run check [-- --env NAME] [-- --config FILE]`: checks what `wrangler
// deploy --env NAME` would upload (the environment's own vars, never
// `.dev.vars`, which a deploy does not read) with the parser of the built
// Worker itself (`check_config`, exported by the module that ships, called
// here in Node), and lists the rest of what would be deployed (routes,
// bindings, migrations, the secrets it expects). Beyond the parser:
//   - every invalid or unknown key (the Worker would run it on its default
//     and log an error; here it fails the check);
//   - origins on loopback or example.com/.net/.org outside local development
//     (no --env: the local `wrangler dev` configuration, where loopback is fine);
//   - an environment reachable nowhere (no route and workers_dev off);
//   - a secret (HEDGE_STATS_TOKEN) written into [vars], where it is stored
//     in clear text with the script's settings;
//   - an origin whose URL falls under one of the Worker's own routes (a
//     warning: see the README's topology section).
// Without --env it checks local development (`wrangler dev`): the top
// level with .dev.vars over it.
// Exit status 0: fine; 1: problems, each on its own line; 2: the check
// itself could not run.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { builtWorker } from "./built-worker.mjs";

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
  const warnings = [];
  const routes = [...(config.routes ?? []), ...(config.route ? [config.route] : [])];
  const where = env ? `[env.${env}]` : "the top level (local development)";
  if (!vars.HEDGE_ORIGINS) {
    problems.push(`HEDGE_ORIGINS: not set in ${where}'s vars (vars are not inherited by environments)`);
  }
  const worker = await builtWorker(process.env.HEDGEHOG_BUILD_DIR ?? path.join(root, "build"));
  const { errors, origins, secrets } = JSON.parse(worker.prototype.check_config(vars));
  for (const key of secrets) {
    if (env && key in (config.vars ?? {})) {
      problems.push(`${key}: set in ${where}'s vars, which are stored in clear text with the deployment; remove it there and run: npx wrangler secret put ${key} --env ${env}`);
    }
  }
  for (const e of errors) {
    if (e.key === "HEDGE_ORIGINS" && !vars.HEDGE_ORIGINS) continue;
    problems.push(`${e.key}: ${e.reason}`);
  }
  if (env) {
    for (const o of origins) {
      const why = placeholderOrLoopback(o.url);
      if (why) problems.push(`HEDGE_ORIGINS: origin "${o.name}" (${o.url}) is ${why}; set your own origins for ${where}`);
    }
    for (const o of origins) {
      const route = routes.find((r) => underRoute(o.url, r));
      if (route) warnings.push(`origin "${o.name}" (${o.url}) is under the Worker's own route ${routePattern(route)}: give the origin a hostname the route does not cover (README, "In front of real origins")`);
    }
    if (routes.length === 0 && config.workers_dev !== true) {
      problems.push(`${where}: no route and workers_dev is not true, so the Worker would be reachable nowhere; add routes = [{ pattern = "api.yourdomain.com/*", zone_name = "yourdomain.com" }]`);
    }
  }
  const summary = {
    name: config.name,
    routes: routes.map(routePattern),
    workersDev: config.workers_dev === true,
    durableObjects: (config.durable_objects?.bindings ?? []).map((b) => `${b.name} (${b.class_name})`),
    analytics: (config.analytics_engine_datasets ?? []).map((d) => `${d.binding} (${d.dataset})`),
    migrations: (config.migrations ?? []).map((m) => m.tag),
    secrets,
  };
  return { problems, warnings, summary, keys: Object.keys(vars).length, origins, devVarsFile: local.file };
}

/** A route's pattern text (routes are strings or `{ pattern, ... }`). */
function routePattern(route) {
  return typeof route === "string" ? route : route.pattern;
}

/**
 * Whether `url` is matched by route `route` (host with an optional leading
 * `*`, path with an optional trailing `*`, as Cloudflare matches routes).
 */
export function underRoute(url, route) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  const pattern = routePattern(route).replace(/^https?:\/\//, "");
  const slash = pattern.indexOf("/");
  const host = (slash < 0 ? pattern : pattern.slice(0, slash)).toLowerCase();
  const pathPart = slash < 0 ? "/*" : pattern.slice(slash);
  const hostOk = host.startsWith("*") ? u.hostname.endsWith(host.slice(1)) : u.hostname === host;
  const pathOk = pathPart.endsWith("*") ? u.pathname.startsWith(pathPart.slice(0, -1)) || `${u.pathname}/`.startsWith(pathPart.slice(0, -1)) : u.pathname === pathPart;
  return hostOk && pathOk;
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
  for (const w of result.warnings) process.stderr.write(`check: warning: ${w}\n`);
  if (result.problems.length) {
    process.stderr.write(`check: ${label} of ${values.config} has ${result.problems.length} problem(s):\n`);
    for (const p of result.problems) process.stderr.write(`  - ${p}\n`);
    process.exit(1);
  }
  const withDevVars = result.devVarsFile ? ` (with ${path.basename(result.devVarsFile)})` : "";
  process.stdout.write(`check: ${label} of ${values.config}${withDevVars}: ${result.keys} HEDGE_* key(s), ${result.origins.length} origin(s), all fine\n`);
  if (values.env) {
    const s = result.summary;
    const list = (xs) => (xs.length ? xs.join(", ") : "none");
    process.stdout.write(
      [
        `  would deploy "${s.name}": routes ${list(s.routes)}${s.workersDev ? ", and on workers.dev" : ""}`,
        `  origins: ${result.origins.map((o) => `${o.name} ${o.url}`).join(", ")}`,
        `  Durable Objects: ${list(s.durableObjects)}; migrations: ${list(s.migrations)}; Analytics Engine: ${list(s.analytics)}`,
        `  secrets it reads (not checked here; wrangler secret list --env ${values.env} shows what is set): ${s.secrets.map((k) => `${k} (optional: without it the operator pages are off)`).join(", ")}`,
      ].join("\n") + "\n",
    );
  }
}
