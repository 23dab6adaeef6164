// Open-loop load: requests are sent on a fixed schedule whatever the
// responses do, and latency is measured from each request's *intended* send
// time, so a stalled server shows up in the numbers instead of slowing the
// load down (no coordinated omission).
//
//   node lab/loadgen.mjs --url http://127.0.0.1:8787 --rate 200 --seconds 20
//
// Prints one JSON line: the HDR histogram, counts, errors and x-hedge tallies.
import http from "node:http";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Histogram } from "./histogram.mjs";

/** Request paths spread over a few routes and many keys. */
export function pathFor(i) {
  const routes = ["/api/items/", "/api/users/", "/static/img/", "/search/"];
  return routes[i % routes.length] + ((i * 7919) % 5000);
}

/**
 * Sends `rate` requests per second to `url` for `seconds`. `now` and `send`
 * are injectable so the schedule's accounting can be tested without a network.
 */
export async function runOpenLoop({ url, rate, seconds, timeoutMs = 5_000, send = httpSend(url, timeoutMs), now = () => performance.now() }) {
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const histogram = new Histogram();
  const result = { sent: 0, ok: 0, errors: 0, timeouts: 0, statuses: {}, xHedge: {}, errorKinds: {}, maxLagMs: 0 };
  const answered = []; // [latency, why] per response, for the slowest responses' reasons
  // [request number, latency ms, status (0: no answer), the delay its hedge
  // was planned at when its delay sent one (else null), Server-Timing], for
  // the hindsight bound and `run.mjs --requests`
  const perRequest = [];
  const bySecond = []; // per second of intended send time: { requests, hedged, latencies }
  const start = now();
  const inflight = new Set();
  for (let i = 0; i < total; i++) {
    const intended = start + i * interval;
    const wait = intended - now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    result.maxLagMs = Math.max(result.maxLagMs, now() - intended);
    result.sent += 1;
    const p = send(pathFor(i), i).then(
      (r) => {
        const ms = now() - intended;
        histogram.record(ms);
        const why = whyFromServerTiming(r.serverTiming);
        perRequest.push([i, Math.round(ms * 100) / 100, r.status, delayHedgeAt(r.serverTiming, why), r.serverTiming ?? null]);
        answered.push([ms, why, r.serverTiming, r.xHedge]);
        const second = (bySecond[Math.floor((i * interval) / 1000)] ??= { requests: 0, hedged: 0, latencies: [] });
        second.requests += 1;
        second.hedged += r.xHedge === "primary" || r.xHedge === "hedge" ? 1 : 0;
        second.latencies.push(Math.round(ms * 10) / 10);
        result.statuses[r.status] = (result.statuses[r.status] ?? 0) + 1;
        if (r.status >= 500) result.errors += 1;
        else result.ok += 1;
        if (r.xHedge) result.xHedge[r.xHedge] = (result.xHedge[r.xHedge] ?? 0) + 1;
      },
      (e) => {
        // A timeout or a failed connection is an error, and its time still counts.
        histogram.record(now() - intended);
        perRequest.push([i, Math.round((now() - intended) * 100) / 100, 0, null, null]);
        result.errors += 1;
        if (e?.timeout) result.timeouts += 1;
        const kind = e?.timeout ? "timeout" : (e?.code ?? String(e?.message ?? e));
        result.errorKinds[kind] = (result.errorKinds[kind] ?? 0) + 1;
      },
    );
    inflight.add(p);
    p.finally(() => inflight.delete(p));
  }
  await Promise.all(inflight);
  result.histogram = histogram.toJSON();
  result.perRequest = perRequest;
  result.slowestWhy = tallySlowest(answered, SLOWEST_SHARE);
  result.bySecond = Array.from(bySecond, (s) => s ?? { requests: 0, hedged: 0, latencies: [] });
  // The five slowest in full, for reading what happened to them.
  result.slowest = [...answered]
    .sort((a, b) => b[0] - a[0])
    .slice(0, 5)
    .map(([ms, , serverTiming, xHedge]) => ({ ms: Math.round(ms * 10) / 10, xHedge, serverTiming }));
  return result;
}

/** The share of responses whose reasons `slowestWhy` tallies: those beyond p99.8. */
export const SLOWEST_SHARE = 0.002;

/**
 * What the Worker said about a response in `Server-Timing`: why it got no
 * hedge (`skip:<reason>`), why a hedge went out (`hedge:<cause>`), or `none`
 * (no header: straight from an origin, or hedging off).
 */
export function whyFromServerTiming(header) {
  if (!header) return "none";
  const skip = /hedge-skip;desc="([^"]*)"/.exec(header);
  if (skip) return `skip:${skip[1]}`;
  const hedge = /(?:^|,\s*)hedge;desc="([^"]*)"/.exec(header);
  if (hedge) return `hedge:${hedge[1]}`;
  return /hedge-delay;/.test(header) ? "unhedged, before the delay" : "none";
}

/**
 * The delay (ms) a response's hedge was planned at, when its delay sent one;
 * else null. `why` is the header's `whyFromServerTiming`, when already read.
 */
export function delayHedgeAt(header, why = whyFromServerTiming(header)) {
  if (why !== "hedge:delay") return null;
  const planned = /hedge-delay;dur=([0-9.]+)/.exec(header);
  return planned ? Number(planned[1]) : null;
}

/** Counts the reasons of the slowest `share` of `[latency, why]` pairs (at least one). */
export function tallySlowest(answered, share) {
  const sorted = [...answered].sort((a, b) => b[0] - a[0]);
  const n = Math.min(sorted.length, Math.max(1, Math.round(sorted.length * share)));
  const tally = {};
  for (const [, why] of sorted.slice(0, n)) tally[why] = (tally[why] ?? 0) + 1;
  return tally;
}

function httpSend(base, timeoutMs) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  // x-lab-seq numbers the request, so the lab's origins draw its service
  // for it (the same draws whatever the Worker does; origin-sim.mjs).
  const once = (path, seq) =>
    new Promise((resolve, reject) => {
      const headers = seq === undefined ? {} : { "x-lab-seq": String(seq) };
      const req = http.get(base + path, { agent, headers }, (res) => {
        res.on("data", () => {});
        res.on("end", () => resolve({ status: res.statusCode, xHedge: res.headers["x-hedge"], serverTiming: res.headers["server-timing"] }));
        res.on("error", reject);
      });
      req.setTimeout(timeoutMs, () => {
        const e = new Error("timeout");
        e.timeout = true;
        req.destroy(e);
      });
      req.on("error", (e) => {
        e.reusedSocket = req.reusedSocket;
        reject(e);
      });
    });
  // A kept-alive connection the server closed just as it was reused fails with
  // ECONNRESET before the request was read; like any HTTP client, send it again
  // on a new connection (its latency still counts from the intended time).
  return (path, seq) =>
    once(path, seq).catch((e) => {
      if (e.reusedSocket && e.code === "ECONNRESET") return once(path, seq);
      throw e;
    });
}

/**
 * Closed loop (for maximum throughput only): `concurrency` clients, each
 * sending back to back; to `path` only, when given (say, one cached URL).
 */
export async function runClosedLoop({ url, concurrency, seconds, timeoutMs = 5_000, path = null }) {
  const send = httpSend(url, timeoutMs);
  const histogram = new Histogram();
  const result = { sent: 0, ok: 0, errors: 0, timeouts: 0, statuses: {}, xHedge: {}, maxLagMs: 0 };
  const end = performance.now() + seconds * 1000;
  let i = 0;
  const client = async () => {
    while (performance.now() < end) {
      const t0 = performance.now();
      result.sent += 1;
      try {
        const r = await send(path ?? pathFor(i++));
        if (r.xHedge) result.xHedge[r.xHedge] = (result.xHedge[r.xHedge] ?? 0) + 1;
        if (r.status >= 500) result.errors += 1;
        else result.ok += 1;
      } catch {
        result.errors += 1;
      }
      histogram.record(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  result.histogram = histogram.toJSON();
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      url: { type: "string" },
      rate: { type: "string", default: "200" },
      seconds: { type: "string", default: "10" },
      closed: { type: "boolean", default: false },
      concurrency: { type: "string", default: "32" },
      path: { type: "string" },
    },
  });
  const result = values.closed
    ? await runClosedLoop({
        url: values.url,
        concurrency: Number(values.concurrency),
        seconds: Number(values.seconds),
        path: values.path ?? null,
      })
    : await runOpenLoop({ url: values.url, rate: Number(values.rate), seconds: Number(values.seconds) });
  // Exit once the line is out: on a pipe the write is asynchronous, and a
  // run's per-request record is larger than the pipe holds.
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
}
