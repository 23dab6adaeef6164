// Runs the built Worker (build/index.js + wasm) in workerd through Miniflare's API.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare } from "./miniflare.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
// HEDGEHOG_BUILD_DIR runs the tests against another build (say, of an older
// commit) to check that a new test fails there.
const buildDir = process.env.HEDGEHOG_BUILD_DIR ?? path.join(root, "build");

/** Miniflare options that bind the PoP aggregator Durable Object (SQLite-backed). */
export function popAggregator({ persistDir } = {}) {
  return {
    // The aggregator is named from cf.colo; a fixed one keeps the name known.
    cf: { colo: "TST" },
    durableObjects: { POP_AGGREGATOR: { className: "PopAggregator", useSQLite: true } },
    ...(persistDir ? { durableObjectsPersist: persistDir } : {}),
  };
}

/**
 * The Worker's static assets as wrangler.toml's `[assets]` gives them: the
 * dashboard page behind the ASSETS binding, the Worker run first.
 */
export function dashboardAssets() {
  return {
    assets: {
      directory: path.join(root, "dashboard/dist"),
      binding: "ASSETS",
      routerConfig: { invoke_user_worker_ahead_of_assets: true, has_user_worker: true },
      assetConfig: { html_handling: "none", not_found_handling: "none" },
    },
  };
}

/** Starts the Worker with these vars (objects are passed as JSON text). */
export async function startWorker(vars, extra = {}) {
  const mf = new Miniflare({ ...workerOptions(vars), ...extra });
  return wrap(mf);
}

/** Miniflare options for the built Worker with these vars. */
export function workerOptions(vars) {
  const bindings = {};
  for (const [k, v] of Object.entries(vars)) {
    // HEDGE_* values as text; any other object (the version metadata) as
    // the object it is on the platform.
    bindings[k] = typeof v === "string" || !k.startsWith("HEDGE_") ? v : JSON.stringify(v);
  }
  return {
    scriptPath: path.join(buildDir, "index.js"),
    modules: true,
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: "2026-07-01",
    // As in wrangler.toml: the request's signal fires when the client disconnects.
    compatibilityFlags: ["enable_request_signal"],
    bindings,
  };
}

/** Test helpers around a started Miniflare whose first worker is the built Worker. */
export async function wrap(mf) {
  const url = await mf.ready;
  return {
    mf,
    /** The loopback URL workerd serves the Worker on (for load from another process). */
    url: url.toString().replace(/\/$/, ""),
    fetch: (pathAndQuery, init) => mf.dispatchFetch(`http://edge.test${pathAndQuery}`, init),
    dispose: () => mf.dispose(),
    /**
     * Sends requests (`/api/item/N`, each answered 200, or it throws) until
     * the aggregator holds `samples` latency samples or 200 went out; its
     * stats then (needs the popAggregator options).
     */
    fillPop: async (samples = 40) => {
      let stats = { samples: 0 };
      for (let i = 0; i < 200 && stats.samples < samples; i++) {
        const res = await mf.dispatchFetch(`http://edge.test/api/item/${i}`);
        if (res.status !== 200) throw new Error(`/api/item/${i} answered ${res.status}`);
        await res.arrayBuffer();
        if (i % 10 === 9) stats = await popStatsOf(mf, "TST");
      }
      return stats;
    },
    /** The PoP aggregator's stats for `name` (needs the popAggregator options). */
    popStats: (name = "TST") => popStatsOf(mf, name),
  };
}

async function popStatsOf(mf, name) {
  const ns = await mf.getDurableObjectNamespace("POP_AGGREGATOR");
  const res = await ns.get(ns.idFromName(name)).fetch("http://pop/stats");
  return res.json();
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
