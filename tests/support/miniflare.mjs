// The one Miniflare the tests and the lab use: the copy wrangler itself runs
// (`wrangler dev`), so the workerd the tests exercise is the workerd the
// pinned wrangler ships with (package.json pins miniflare to wrangler's own
// version; npm keeps one copy). Miniflare 5 takes its options in a new shape
// and converts the long-documented v4 shape the tests are written in, except
// module rules: a built Worker's modules (its JavaScript and its wasm) are
// listed here instead.
import { readdirSync } from "node:fs";
import path from "node:path";
import { PassThrough } from "node:stream";
import { Miniflare as Miniflare5, convertV4MiniflareOptions } from "miniflare";

const MODULE_TYPES = { ".js": "ESModule", ".mjs": "ESModule", ".wasm": "CompiledWasm" };

/** A v4 worker given as `scriptPath` + `modules: true` + rules, as an explicit module list. */
function listModules(worker) {
  const { modulesRules: _rules, ...rest } = worker;
  if (worker.modules !== true || !worker.scriptPath) return rest;
  const dir = path.dirname(path.resolve(worker.scriptPath));
  const main = path.resolve(worker.scriptPath);
  const others = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && MODULE_TYPES[path.extname(e.name)] && path.join(dir, e.name) !== main)
    .map((e) => ({ type: MODULE_TYPES[path.extname(e.name)], path: path.join(dir, e.name) }));
  const { scriptPath: _script, ...withoutScript } = rest;
  return { ...withoutScript, modulesRoot: dir, modules: [{ type: "ESModule", path: main }, ...others] };
}

export class Miniflare extends Miniflare5 {
  constructor(options) {
    const { durableObjectsPersist, handleRuntimeStdio, ...rest } = options;
    const v4 = rest.workers ? { ...rest, workers: rest.workers.map(listModules) } : listModules(rest);
    // v4's per-plugin persistence directory is one directory for all in v5.
    const persist = typeof durableObjectsPersist === "string" ? { resourcePersistencePath: durableObjectsPersist } : {};
    // v4 handed over the runtime's stdout and stderr; v5 hands over each
    // log line it parsed from them.
    let logs = {};
    if (handleRuntimeStdio) {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      handleRuntimeStdio(stdout, stderr);
      logs = { handleStructuredLogs: ({ level, message }) => (level === "error" || level === "warn" ? stderr : stdout).write(`${message}\n`) };
    }
    super({ ...convertV4MiniflareOptions(v4), ...persist, ...logs });
  }
}
