// Runs the built Worker (build/index.js + wasm) in workerd through Miniflare's API.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Starts the Worker with these vars (objects are passed as JSON text). */
export async function startWorker(vars, extra = {}) {
  const bindings = {};
  for (const [k, v] of Object.entries(vars)) {
    bindings[k] = typeof v === "string" ? v : JSON.stringify(v);
  }
  const mf = new Miniflare({
    scriptPath: path.join(root, "build/index.js"),
    modules: true,
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: "2026-07-01",
    bindings,
    ...extra,
  });
  const url = await mf.ready;
  return {
    mf,
    /** The loopback URL workerd serves the Worker on (for load from another process). */
    url: url.toString().replace(/\/$/, ""),
    fetch: (pathAndQuery, init) => mf.dispatchFetch(`http://edge.test${pathAndQuery}`, init),
    dispose: () => mf.dispose(),
  };
}

export function origins(...list) {
  return list.map((o, i) => ({ name: o.name, url: o.url, zone: `z${i}` }));
}

/** Parses a Server-Timing header into { metric: { dur, desc } }. */
export function serverTiming(header) {
  const out = {};
  for (const part of (header ?? "").split(",")) {
    const [name, ...params] = part.trim().split(";");
    const entry = {};
    for (const p of params) {
      const [k, v] = p.split("=");
      entry[k.trim()] = k.trim() === "dur" ? Number(v) : v?.replace(/^"|"$/g, "");
    }
    if (name) out[name] = entry;
  }
  return out;
}
