// Counts every billed item per request, in workerd, from one isolate at a
// given request rate, and prices a PoP from them at today's list prices.
//
//   node lab/pop-price.mjs [--seconds 90] [--rates 1,18,100] [--probes off,on] [--out DIR]
//
// The built Worker runs with its configuration's defaults (log level,
// analytics sample, push cadence), its aggregator behind the lab's gate
// (lab/pop-gate.mjs, which counts and keeps the pushes) and its ANALYTICS
// binding captured (tests/support/analytics-capture.mjs). Heavy-tail origins
// count the subrequests. The aggregator's rows read and written are the
// storage API's own counts (the SQL cursor's rowsRead / rowsWritten, summed
// by the aggregator), plus one row written per setAlarm() (as billed); its
// alarms are counted as they run. With probes on, HEDGE_PROBE_PATH is set
// (an alarm every probe interval while the PoP has traffic).
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
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

/**
 * Cloudflare's list prices (USD), Workers Paid, past the included amounts,
 * each with the page it was read from (2026-12-06).
 */
export const PRICES = {
  workerRequest: 0.3 / 1e6, // Workers pricing: $0.30 per additional million requests
  workerCpuMs: 0.02 / 1e6, // Workers pricing: $0.02 per additional million CPU ms
  doRequest: 0.15 / 1e6, // Durable Objects pricing: $0.15 per million requests, alarm invocations included
  doGbSecond: 12.5 / 1e6, // Durable Objects pricing: $12.50 per million GB-s (128 MB an object)
  rowWritten: 1.0 / 1e6, // Durable Objects pricing (SQLite): $1.00 per million rows written; each setAlarm() is a row
  rowRead: 0.001 / 1e6, // Durable Objects pricing (SQLite): $0.001 per million rows read
  sqlGbMonth: 0.2, // Durable Objects pricing (SQLite): $0.20 per GB-month stored
  aePoint: 0.25 / 1e6, // Workers Analytics Engine pricing: $0.25 per additional million points (page: not billed yet)
  logGbIngested: 0.25, // Cloudflare Observability pricing (Workers Logs from 2026-12-01): $0.25 per GB ingested
  logGbMonth: 0.1, // Cloudflare Observability pricing: $0.10 per GB-month stored (7-day retention)
};
export const PRICE_SOURCES = [
  ["Workers requests, CPU", "developers.cloudflare.com/workers/platform/pricing/ (Workers)"],
  ["Durable Objects requests, duration, rows, storage", "developers.cloudflare.com/durable-objects/platform/pricing/ (Compute billing, SQLite storage backend)"],
  ["Analytics Engine points", "developers.cloudflare.com/analytics/analytics-engine/pricing/"],
  ["Workers Logs", "developers.cloudflare.com/observability/pricing/ (Paid: 50 GB ingested and 12 GB-month included a billing cycle)"],
];
const MONTH_S = 30 * 86_400;
const DO_GB = 0.128;
/** Bytes Workers Logs counts per event beyond the line itself (its enriched attributes), an assumption: see docs/pop.md. */
export const LOG_EVENT_OVERHEAD_BYTES = 4_096;
/** Days an event stays queryable (Workers Logs' retention): its GB-months are 7/30 of its GB. */
const LOG_RETENTION_DAYS = 7;

/** One measured run of the build in HEDGEHOG_BUILD_DIR (or build/). */
export async function countRun({ rate, seconds, probes, log }) {
  const sim = await startOriginSim("heavy-tail", 1);
  const logs = captureLogs();
  const options = gatedWorkers({ HEDGE_ORIGINS: sim.origins, ...(probes ? { HEDGE_PROBE_PATH: "/health" } : {}) });
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
    const logged = lines.filter((l) => !l.includes("AEPOINT ") && l.includes('"request_id"'));
    const logLines = logged.length;
    const logBytes = logged.reduce((a, l) => a + Buffer.byteLength(l.slice(l.indexOf("{"))), 0);
    const storage = (a) => a.storage ?? {};
    // An object evicted between two readings starts its in-memory counts
    // again (a quiet PoP's object is, between pushes): then only the counts
    // since its last start are known, a lower bound.
    const restarted = (a1.alarms ?? 0) < (a0.alarms ?? 0) || (storage(a1).rows_read ?? 0) < (storage(a0).rows_read ?? 0);
    const since = (k) => (restarted ? storage(a1)[k] : storage(a1)[k] - storage(a0)[k]);
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
      alarms: a1.alarms != null ? (restarted ? a1.alarms : a1.alarms - a0.alarms) : null,
      storageRowsWritten: storage(a1).rows_written != null ? since("rows_written") : null,
      storageRowsRead: storage(a1).rows_read != null ? since("rows_read") : null,
      alarmsSet: storage(a1).alarms_set != null ? since("alarms_set") : null,
      restarted,
      aePoints: points.length,
      aeWeight: points.reduce((a, p) => a + (p.doubles[4] ?? 1), 0),
      logLines,
      logBytes,
      seconds,
      rate,
      probes: Boolean(probes),
    };
  } finally {
    await mf.dispose();
    await sim.close();
  }
}

/**
 * Prices a PoP of `popRps` served by isolates at the rate run `c` measured
 * (a PoP is popRps / c.rate such isolates and one aggregator). `cpuMs` is
 * workerd CPU per request from the overhead run (an upper bound on what
 * the platform bills). The aggregator's duration: 1 ms of wall time per
 * push and per alarm (pop-capacity's answers, a local figure, not a bound),
 * a probe alarm as long as its probe round (`probeMs`); `ceiling` prices
 * it awake the whole month instead (what an object that never hibernates
 * costs).
 */
export function price(c, { popRps, cpuMs, probeMs = 50, ceiling = false }) {
  const perReq = (n) => n / c.requests;
  const monthRequests = popRps * MONTH_S;
  const isolates = popRps / c.rate;
  const perAggregatorMonth = (n) => (n / c.seconds) * MONTH_S;
  const alarms = perAggregatorMonth(c.alarms ?? 0);
  const pushesPerS = perReq(c.pushes) * popRps;
  const awakeShare = ceiling ? 1 : Math.min(1, pushesPerS * 0.001 + (alarms / MONTH_S) * (c.probes ? probeMs : 1) / 1000);
  const logBytes = perReq(c.logBytes + c.logLines * LOG_EVENT_OVERHEAD_BYTES) * monthRequests;
  const items = {
    "Worker requests": monthRequests * PRICES.workerRequest,
    "Worker CPU": monthRequests * cpuMs * PRICES.workerCpuMs,
    "aggregator requests (pushes)": monthRequests * perReq(c.pushes) * PRICES.doRequest,
    "aggregator alarms": alarms * PRICES.doRequest,
    "aggregator duration": MONTH_S * awakeShare * DO_GB * PRICES.doGbSecond,
    "aggregator rows written (incl. setAlarm)": perAggregatorMonth((c.storageRowsWritten ?? 0) + (c.alarmsSet ?? 0)) * PRICES.rowWritten,
    "aggregator rows read": perAggregatorMonth(c.storageRowsRead ?? 0) * PRICES.rowRead,
    "Analytics Engine points": monthRequests * perReq(c.aePoints) * PRICES.aePoint,
    "Workers Logs (GB ingested, GB-month)": (logBytes / 1e9) * (PRICES.logGbIngested + (LOG_RETENTION_DAYS / 30) * PRICES.logGbMonth),
  };
  const machineryKeys = Object.keys(items).filter((k) => k.startsWith("aggregator"));
  const machinery = machineryKeys.reduce((a, k) => a + items[k], 0);
  const fixed = machineryKeys.filter((k) => k !== "aggregator requests (pushes)").reduce((a, k) => a + items[k], 0);
  const observability = items["Analytics Engine points"] + items["Workers Logs (GB ingested, GB-month)"];
  const total = Object.values(items).reduce((a, v) => a + v, 0);
  return { popRps, isolates, monthRequests, items, machinery, fixed, observability, total, workerRequests: items["Worker requests"] };
}

const usd = (v) => (v >= 100 ? `$${v.toFixed(0)}` : v >= 1 ? `$${v.toFixed(2)}` : v >= 0.0001 || v === 0 ? `$${v.toFixed(4)}` : `$${v.toExponential(1)}`);
const perMillion = (p, v) => usd((v / p.monthRequests) * 1e6);

export function priceMarkdown(runs, { cpuMs, popRps = 18_000 }) {
  const f = (v, d = 2) => (v == null ? "-" : Number(v).toFixed(d));
  const label = (c) => `${c.rate} rps/isolate, probes ${c.probes ? "on" : "off"}`;
  const out = [];
  out.push("| run | requests | subrequests | pushes (per request) | bytes per push | alarms | rows written (storage API) | setAlarm rows | rows read | AE points (weight) | log lines |");
  out.push("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const { counts: c } of runs) {
    const atLeast = (v) => (v == null ? "-" : c.restarted ? `≥ ${v}` : String(v));
    out.push(`| ${label(c)} | ${c.requests} | ${c.subrequests} | ${c.pushes} (${f(c.pushes / c.requests, 4)}) | ${f(c.pushBytes, 0)} | ${atLeast(c.alarms)} | ${atLeast(c.storageRowsWritten)} | ${atLeast(c.alarmsSet)} | ${atLeast(c.storageRowsRead)} | ${c.aePoints} (${f(c.aeWeight, 0)}) | ${c.logLines} |`);
  }
  out.push("");
  out.push(`**Per million requests, a PoP at ${popRps.toLocaleString("en-US")} rps** (one aggregator; Worker CPU ${cpuMs} ms per request, workerd's in the overhead run, an upper bound):`);
  out.push("");
  out.push(`| item | ${runs.map((r) => label(r.counts)).join(" | ")} | price from (read 2026-12-06) |`);
  out.push(`|---|${runs.map(() => "---").join("|")}|---|`);
  const priced = runs.map((r) => price(r.counts, { popRps, cpuMs }));
  const source = (item) =>
    item.startsWith("Workers Logs") ? "Cloudflare Observability: Pricing" : item.startsWith("Worker") ? "Workers: Pricing" : item.startsWith("aggregator") ? "Durable Objects: Pricing" : item.startsWith("Analytics") ? "Workers Analytics Engine: Pricing" : "Cloudflare Observability: Pricing";
  for (const item of Object.keys(priced[0].items)) out.push(`| ${item} | ${priced.map((p) => perMillion(p, p.items[item])).join(" | ")} | ${source(item)} |`);
  out.push(`| **total** | ${priced.map((p) => `**${perMillion(p, p.total)}**`).join(" | ")} | |`);
  out.push(`| PoP machinery, share of the Worker request price | ${priced.map((p) => `${f((p.machinery / p.workerRequests) * 100, 3)}%`).join(" | ")} | |`);
  const ceilings = runs.map((r) => price(r.counts, { popRps, cpuMs, ceiling: true }));
  out.push(`| aggregator duration if never asleep (ceiling) | ${ceilings.map((p) => perMillion(p, p.items["aggregator duration"])).join(" | ")} | Durable Objects: Pricing |`);
  out.push("");
  // The fixed part: what one aggregator costs a month whatever its traffic
  // (alarms, their rows, snapshots, rows read, its duration floor).
  out.push("**Per million requests against the number of colos** (PoP machinery only: pushes, alarms, rows, duration; the account's traffic spread evenly over that many colos, each with its own aggregator; isolates at 18 rps, probes off / on):");
  out.push("");
  const at18 = (probes) => runs.find((r) => r.counts.rate === 18 && r.counts.probes === probes) ?? runs[0];
  const colos = [1, 30, 330];
  out.push(`| account traffic | ${colos.map((n) => `${n} colo${n > 1 ? "s" : ""}`).join(" | ")} |`);
  out.push(`|---|${colos.map(() => "---").join("|")}|`);
  for (const total of [10, 100, 1_000, 18_000, 100_000]) {
    const cells = colos.map((n) => {
      const per = [false, true].map((probes) => {
        const p = price(at18(probes).counts, { popRps: total / n, cpuMs });
        return `${usd(((p.machinery * n) / (p.monthRequests * n)) * 1e6)}`;
      });
      return per.join(" / ");
    });
    out.push(`| ${total.toLocaleString("en-US")} rps | ${cells.join(" | ")} |`);
  }
  out.push("");
  return out.join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      seconds: { type: "string", default: "90" },
      rates: { type: "string", default: "1,18,100" },
      keep: { type: "string" },
      probes: { type: "string", default: "off,on" },
      "cpu-ms": { type: "string", default: "0.85" },
      rate: { type: "string" },
      "with-probes": { type: "boolean", default: false },
      child: { type: "boolean", default: false },
      out: { type: "string" },
    },
  });
  if (values.child) {
    const opts = { rate: Number(values.rate), seconds: Number(values.seconds), probes: values["with-probes"], log: (m) => console.error(m) };
    console.log(JSON.stringify(await countRun(opts)));
    process.exit(0);
  }
  const runs = [];
  // Earlier runs kept (--keep FILE: their JSON) stand beside the new ones.
  if (values.keep) for (const c of JSON.parse(readFileSync(values.keep, "utf8"))) runs.push({ counts: c });
  for (const rate of values.rates ? values.rates.split(",").map(Number) : []) {
    for (const probes of values.probes.split(",").map((p) => p.trim() === "on")) {
      console.error(`[pop-price] ${rate} rps per isolate, probes ${probes ? "on" : "off"}, ${values.seconds} s`);
      const args = [fileURLToPath(import.meta.url), "--child", "--seconds", values.seconds, "--rate", String(rate), ...(probes ? ["--with-probes"] : [])];
      const child = spawnSync(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8" });
      if (child.status !== 0) throw new Error(`${rate} rps: exited ${child.status}`);
      runs.push({ counts: JSON.parse(child.stdout.trim().split("\n").at(-1)) });
    }
  }
  runs.sort((x, y) => x.counts.rate - y.counts.rate || Number(x.counts.probes) - Number(y.counts.probes));
  const md = priceMarkdown(runs, { cpuMs: Number(values["cpu-ms"]) });
  console.log(md);
  if (values.out) {
    mkdirSync(values.out, { recursive: true });
    writeFileSync(path.join(values.out, "pop-price.json"), JSON.stringify(runs.map((r) => r.counts), null, 2));
    writeFileSync(path.join(values.out, "pop-price.md"), md);
  }
}
