// Counts every billed item per request, in workerd, from one isolate at the
// seed's per-isolate rate (18 rps), and prices a PoP from them.
//
//   node lab/pop-price.mjs [--seconds 60] [--rate 18] [--baseline DIR] [--out DIR]
//
// The built Worker runs with its configuration's defaults (log level,
// analytics sample, push cadence), its aggregator behind the lab's gate
// (lab/pop-gate.mjs, which counts and keeps the pushes) and its ANALYTICS
// binding captured (tests/support/analytics-capture.mjs). Heavy-tail origins
// count the subrequests. The aggregator's own stats give the rows it wrote
// and its alarms; a build without those counters (an older one, given with
// --baseline DIR: run in a child process against that build) has its rows
// counted from the pushes it received, by its rule then (each push wrote
// every key it named and the counters).
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Miniflare } from "../tests/support/miniflare.mjs";
import { captureEntry, pointsIn } from "../tests/support/analytics-capture.mjs";
import { captureLogs } from "../tests/support/logs.mjs";
import { startOriginSim } from "./origin-sim.mjs";
import { spawnJson } from "./run.mjs";
import { gatedWorkers } from "./pop-capacity.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Cloudflare's list prices (USD), Workers Paid, past the included amounts. */
export const PRICES = {
  workerRequest: 0.3 / 1e6,
  workerCpuMs: 0.02 / 1e6,
  doRequest: 0.15 / 1e6,
  doGbSecond: 12.5 / 1e6,
  rowWritten: 1.0 / 1e6,
  aePoint: 0.25 / 1e6,
  logEvent: 0.6 / 1e6,
};
const MONTH_S = 30 * 86_400;
const DO_GB = 0.128;

/** One measured run of the build in HEDGEHOG_BUILD_DIR (or build/). */
export async function countRun({ rate, seconds, log }) {
  const sim = await startOriginSim("heavy-tail", 1);
  const logs = captureLogs();
  const options = gatedWorkers({ HEDGE_ORIGINS: sim.origins });
  Object.assign(options.workers[0], captureEntry());
  const mf = new Miniflare({ ...options, handleRuntimeStdio: logs.handleRuntimeStdio });
  try {
    const url = (await mf.ready).toString().replace(/\/$/, "");
    const gateWorker = await mf.getWorker("gate");
    const gate = async (p) => (await gateWorker.fetch(`http://gate${p}`)).json();
    // The aggregator the Worker pushes to: named from the request's
    // cf.colo, or the fallback name where the runtime gives none.
    await (await fetch(`${url}/api/first`)).arrayBuffer();
    let names = {};
    for (let k = 0; k < 100 && Object.keys(names).length === 0; k++) {
      await new Promise((r) => setTimeout(r, 100));
      names = (await gate("/captured")).counts.names;
    }
    const name = Object.keys(names)[0];
    if (!name) throw new Error("the Worker pushed nothing");
    const aggregatorStats = async () => {
      const ns = await mf.getDurableObjectNamespace("LAB_REAL_AGGREGATOR", "hedgehog");
      return (await ns.get(ns.idFromName(name)).fetch("http://pop/stats")).json();
    };
    // An aggregator past its first snapshots (a new one writes its first
    // changes at once): the steady state is what a month is made of.
    const warm = JSON.stringify({ version: 1, quantile: 0.95, eligible: 0, hedges: 0, keys: [], origins: [] });
    await gateWorker.fetch("http://gate/drive", { method: "POST", body: JSON.stringify({ target: "real", name, bodies: [warm], rate: 100, seconds: 0.3 }) });
    const a0 = await aggregatorStats();
    const o0 = await Promise.all(sim.origins.map((o) => fetch(`${o.url}/__stats`).then((r) => r.json())));
    const g0 = (await gate("/captured")).counts.forwarded;
    const lines0 = logs.lines.length;
    log(`  ${seconds} s at ${rate} rps`);
    const result = await spawnJson(["lab/loadgen.mjs", "--url", url, "--rate", String(rate), "--seconds", String(seconds)]).firstLine;
    // The last push and data points may trail the load.
    await new Promise((r) => setTimeout(r, 1_500));
    const a1 = await aggregatorStats();
    const o1 = await Promise.all(sim.origins.map((o) => fetch(`${o.url}/__stats`).then((r) => r.json())));
    const { bodies, counts } = await gate("/captured");
    const lines = logs.lines.slice(lines0);
    const points = pointsIn(lines);
    const logLines = lines.filter((l) => !l.includes("AEPOINT ") && l.includes('"request_id"')).length;
    const pushes = counts.forwarded - g0;
    const pushed = bodies.slice(-pushes).map((b) => JSON.parse(b));
    const rowsByRule = pushed.reduce((a, p) => a + p.keys.length + 1, 0);
    return {
      requests: result.sent,
      statuses: result.statuses,
      subrequests: o1.reduce((a, s, k) => a + s.received - o0[k].received, 0),
      pushes,
      pushBytes: pushed.length ? bodies.slice(-pushes).reduce((a, b) => a + b.length, 0) / pushed.length : null,
      keysPerPush: pushed.length ? pushed.reduce((a, p) => a + p.keys.length, 0) / pushed.length : null,
      rowsWritten: a1.rows_written != null ? a1.rows_written - a0.rows_written : null,
      rowsByRule,
      alarms: a1.alarms != null ? a1.alarms - a0.alarms : null,
      aePoints: points.length,
      aeWeight: points.reduce((a, p) => a + (p.doubles[4] ?? 1), 0),
      logLines,
      seconds,
      rate,
    };
  } finally {
    await mf.dispose();
    await sim.close();
  }
}

/**
 * Prices a PoP of `pop_rps` from per-request counts of one isolate at
 * `isolate_rps` (a PoP is pop_rps / isolate_rps such isolates). `cpuMs` is
 * workerd CPU per request from the overhead run; `invocationLogs` whether
 * the platform logs each invocation.
 */
export function price(c, { popRps, cpuMs, invocationLogs, awakeShare }) {
  const perReq = (n) => n / c.requests;
  const monthRequests = popRps * MONTH_S;
  const isolates = popRps / c.rate;
  // Rows: the PoP's aggregator writes per minute what this run's did (one
  // aggregator, whatever the isolates), or, by the old rule, per push.
  const rowsPerMonth = c.rowsWritten != null ? (c.rowsWritten / c.seconds) * MONTH_S : perReq(c.rowsByRule) * monthRequests;
  const alarmsPerMonth = c.alarms != null ? (c.alarms / c.seconds) * MONTH_S : MONTH_S / 60;
  const items = {
    "Worker requests": monthRequests * PRICES.workerRequest,
    "Worker CPU": monthRequests * cpuMs * PRICES.workerCpuMs,
    "aggregator requests (pushes)": monthRequests * perReq(c.pushes) * PRICES.doRequest,
    "aggregator alarms": alarmsPerMonth * PRICES.doRequest,
    "aggregator duration": MONTH_S * awakeShare(isolates) * DO_GB * PRICES.doGbSecond,
    "aggregator rows written": rowsPerMonth * PRICES.rowWritten,
    "Analytics Engine points": monthRequests * perReq(c.aePoints) * PRICES.aePoint,
    "log events": monthRequests * (perReq(c.logLines) + (invocationLogs ? 1 : 0)) * PRICES.logEvent,
  };
  const machinery = ["aggregator requests (pushes)", "aggregator alarms", "aggregator duration", "aggregator rows written"].reduce((a, k) => a + items[k], 0);
  const observability = items["Analytics Engine points"] + items["log events"];
  return { popRps, isolates, monthRequests, items, machinery, observability, workerRequests: items["Worker requests"] };
}

export function priceMarkdown(runs, { cpuMs }) {
  const f = (v, d = 2) => (v == null ? "-" : Number(v).toFixed(d));
  const usd = (v) => (v >= 100 ? `$${v.toFixed(0)}` : v >= 1 ? `$${v.toFixed(2)}` : `$${v.toFixed(4)}`);
  const out = [];
  out.push("| build | requests | subrequests | pushes | bytes per push | keys per push | rows written | alarms | AE points (weight) | log lines |");
  out.push("|---|---|---|---|---|---|---|---|---|---|");
  for (const r of runs) {
    const c = r.counts;
    out.push(`| ${r.name} | ${c.requests} | ${c.subrequests} | ${c.pushes} | ${f(c.pushBytes, 0)} | ${f(c.keysPerPush, 1)} | ${c.rowsWritten ?? `${c.rowsByRule} (by its rule)`} | ${c.alarms ?? "-"} | ${c.aePoints} (${f(c.aeWeight, 0)}) | ${c.logLines} |`);
  }
  out.push("");
  for (const popRps of [100, 1_000, 18_000]) {
    out.push(`**A PoP at ${popRps.toLocaleString("en-US")} rps** (${(popRps / runs[0].counts.rate).toFixed(0)} isolates at ${runs[0].counts.rate} rps), per month and per million requests; Worker CPU ${cpuMs} ms per request (workerd, the overhead run: an upper bound).`);
    out.push("");
    out.push(`| item | ${runs.map((r) => `${r.name}: month | per million`).join(" | ")} |`);
    out.push(`|---|${runs.map(() => "---|---").join("|")}|`);
    const priced = runs.map((r) => price(r.counts, { popRps, cpuMs, invocationLogs: r.invocationLogs, awakeShare: r.awakeShare }));
    for (const item of Object.keys(priced[0].items)) {
      out.push(`| ${item} | ${priced.map((p) => `${usd(p.items[item])} | ${usd((p.items[item] / p.monthRequests) * 1e6)}`).join(" | ")} |`);
    }
    out.push(`| **PoP machinery, share of the Worker request price** | ${priced.map((p) => `${f((p.machinery / p.workerRequests) * 100, 2)}% | `).join(" | ")} |`);
    out.push(`| **observability, share of the Worker request price** | ${priced.map((p) => `${f((p.observability / p.workerRequests) * 100, 2)}% | `).join(" | ")} |`);
    out.push("");
  }
  return out.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "60" },
      rate: { type: "string", default: "18" },
      baseline: { type: "string" },
      "cpu-ms": { type: "string", default: "0.71" },
      child: { type: "boolean", default: false },
      out: { type: "string" },
    },
  });
  const opts = { rate: Number(values.rate), seconds: Number(values.seconds), log: (m) => console.error(m) };
  if (values.child) {
    console.log(JSON.stringify(await countRun(opts)));
    process.exit(0);
  }
  const runs = [];
  const builds = [...(values.baseline ? [["baseline", values.baseline]] : []), ["this build", path.join(root, "build")]];
  for (const [name, dir] of builds) {
    console.error(`${name} (${dir})`);
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--child", "--seconds", values.seconds, "--rate", values.rate], { cwd: root, env: { ...process.env, HEDGEHOG_BUILD_DIR: dir }, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" });
    if (child.status !== 0) throw new Error(`${name}: exited ${child.status}`);
    const counts = JSON.parse(child.stdout.trim().split("\n").at(-1));
    // The baseline's wrangler.toml logged every invocation; this one's does
    // not. An aggregator answering pushes without a pause is awake all the
    // time; the share is the time its pushes keep it busy (1 ms each, an
    // upper bound from pop-capacity's answers) capped at 1. The baseline's
    // alarm kept no state of its own, the same.
    const pushesPerS = (isolates) => (isolates * counts.pushes) / counts.seconds;
    runs.push({ name, counts, invocationLogs: name === "baseline", awakeShare: (isolates) => Math.min(1, pushesPerS(isolates) * 0.001) });
  }
  const md = priceMarkdown(runs, { cpuMs: Number(values["cpu-ms"]) });
  console.log(md);
  if (values.out) {
    mkdirSync(values.out, { recursive: true });
    writeFileSync(path.join(values.out, "pop-price.json"), JSON.stringify(runs.map((r) => ({ name: r.name, counts: r.counts })), null, 2));
    writeFileSync(path.join(values.out, "pop-price.md"), md);
  }
}
