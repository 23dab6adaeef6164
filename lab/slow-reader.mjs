// What a slow-reading client on a large cacheable miss costs the runtime.
//
// The Worker stores a cacheable answer through a copy of its body (a tee):
// the cache's branch is read as fast as the cache takes it, the client's as
// fast as the client reads. If the runtime buffered what the client has not
// read yet, one slow client on a large answer would hold the whole body in
// memory. This runs the built Worker in workerd against a loopback origin
// serving one body of --mib MiB, read by a raw client at --kib-per-s, and
// samples workerd's resident memory; the same body with `no-store` (no copy)
// is the baseline, through the same path in the same run.
//
//   node lab/slow-reader.mjs [--mib 48] [--kib-per-s 4096] [--chunked]
//
// --chunked sends the body without a Content-Length (its size unknown up front).
import http from "node:http";
import { startOrigin } from "../tests/support/origin.mjs";
import { startWorker, origins } from "../tests/support/worker.mjs";
import { workerdRssKb } from "./soak.mjs";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const MIB = arg("mib", 48);
const KIB_PER_S = arg("kib-per-s", 4096);
const CHUNKED = process.argv.includes("--chunked");

const chunk = Buffer.alloc(1 << 20, 0x61);
const body = Array.from({ length: MIB }, () => chunk);

/** Reads `path` at KIB_PER_S; the peak workerd RSS above `baseKb` while it does. */
function slowRead(url, path, baseKb) {
  return new Promise((resolve, reject) => {
    let peakKb = 0;
    let bytes = 0;
    const sample = setInterval(() => (peakKb = Math.max(peakKb, workerdRssKb() - baseKb)), 100);
    const req = http.get(`${url}${path}`, { highWaterMark: 16 * 1024 }, (res) => {
      const budgetPerTick = (KIB_PER_S * 1024) / 10;
      let allowed = budgetPerTick;
      const tick = setInterval(() => {
        allowed = budgetPerTick;
        res.resume();
      }, 100);
      res.on("data", (d) => {
        bytes += d.length;
        allowed -= d.length;
        if (allowed <= 0) res.pause();
      });
      res.on("end", () => {
        clearInterval(tick);
        clearInterval(sample);
        resolve({ bytes, peakMb: peakKb / 1024, cache: res.headers["cache-control"] });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

const o = await startOrigin("o", (req) => ({
  headers: {
    ...(CHUNKED ? {} : { "content-length": String(MIB << 20) }),
    "cache-control": req.url.startsWith("/store") ? "public, max-age=600" : "no-store",
  },
  chunks: body,
}));
const w = await startWorker({ HEDGE_ORIGINS: origins(o), HEDGE_MODE: "off" });
try {
  await (await w.fetch("/warm")).arrayBuffer(); // a first request starts the isolate
  const out = {};
  for (const [name, path] of [["no-store (no copy)", "/nostore/1"], ["cacheable (tee to the cache)", "/store/1"]]) {
    const base = workerdRssKb();
    const started = Date.now();
    const r = await slowRead(w.url, path, base);
    out[name] = { ...r, seconds: (Date.now() - started) / 1000 };
    console.log(`${name}: ${(r.bytes / 1048576).toFixed(0)} MiB read in ${out[name].seconds.toFixed(1)} s at ${KIB_PER_S} KiB/s; workerd RSS peak +${r.peakMb.toFixed(1)} MB`);
  }
  console.log(JSON.stringify({ mib: MIB, kibPerS: KIB_PER_S, chunked: CHUNKED, ...out }));
} finally {
  await w.dispose();
  await o.close();
}
