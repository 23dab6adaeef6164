// The README's dashboard picture from the demo's own traffic: the heavy-tail
// scenario's origins (lab/origin-sim.mjs), the built Worker in workerd with
// the PoP aggregator, 200 requests a second open loop for a minute
// (--seconds), the dashboard open in headless Chromium all along; the
// screenshot is written to docs/dashboard.png (--out).
//
//   node lab/dashboard-shot.mjs [--seconds 60] [--out docs/dashboard.png]
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import puppeteer from "puppeteer-core";
import { startOriginSim } from "./origin-sim.mjs";
import { runOpenLoop } from "./loadgen.mjs";
import { dashboardAssets, popAggregator, startWorker } from "../tests/support/worker.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "60" },
    rate: { type: "string", default: "200" },
    out: { type: "string", default: path.join(root, "docs/dashboard.png") },
  },
});
const TOKEN = "dashboard-shot-token-0123456789";
const chromium = execFileSync("bash", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();

const sim = await startOriginSim("heavy-tail", "1");
const w = await startWorker(
  {
    HEDGE_ORIGINS: JSON.stringify(sim.origins),
    HEDGE_STATS_TOKEN: TOKEN,
    CF_VERSION_METADATA: { id: execFileSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" }).trim(), tag: "", timestamp: "" },
  },
  { ...popAggregator(), ...dashboardAssets() },
);
const browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1000 });
  await page.goto(`${w.url}/__hedge/dashboard`);
  await page.waitForSelector("#login:not([hidden])");
  await page.type("#token", TOKEN);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#board:not([hidden])");
  const seconds = Number(values.seconds);
  const load = runOpenLoop({ url: w.url, rate: Number(values.rate), seconds });
  // Taken while the traffic still flows (its last seconds), after a refresh.
  await new Promise((r) => setTimeout(r, (seconds - 4) * 1000));
  const refreshes = await page.$eval("#updated", (el) => Number(el.dataset.refreshes || 0));
  await page.waitForFunction((k) => Number(document.querySelector("#updated").dataset.refreshes) >= k + 1, { timeout: 20_000 }, refreshes);
  await page.screenshot({ path: values.out, fullPage: true });
  const result = await load;
  const total = await page.$eval("#total-requests", (el) => el.textContent);
  process.stdout.write(`dashboard-shot: ${result.sent ?? "?"} requests sent over ${values.seconds} s at ${values.rate}/s; the page counted ${total}; wrote ${values.out}\n`);
} finally {
  await browser.close();
  await w.dispose();
  await sim.close();
}
