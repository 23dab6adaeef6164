// The dashboard in a real headless Chromium (Debian's, driven by
// puppeteer-core): with traffic flowing through the Worker and the PoP
// aggregator bound, the page asks for the token, draws its charts, and the
// totals it shows are the PoP-scope metrics endpoint's. Saves a screenshot
// (test-results/dashboard.png).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";
import { dashboardAssets, origins, popAggregator } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";
import { parseMetrics } from "./support/metrics.mjs";
import { captureLogs } from "./support/logs.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TOKEN = "test-token-0123456789abcdef";
const chromium = execFileSync("bash", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
const launchBrowser = () => puppeteer.launch({ executablePath: chromium, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });

test("the dashboard shows the PoP's figures, charts them, and asks for the token", async () => {
  // A heavy tail the budget can hedge: 1 request in 20 takes 300 ms.
  let n = 0;
  const slowEvery = (k) => ({ delayMs: k % 20 === 0 ? 300 : 5 + (k % 7) });
  const a = await origin("a", () => slowEvery(n++));
  const b = await origin("b", () => slowEvery(n++));
  const w = await worker(
    {
      HEDGE_ORIGINS: origins(a, b),
      HEDGE_STATS_TOKEN: TOKEN,
      HEDGE_CACHE: "false",
      HEDGE_MODE: "static",
      HEDGE_STATIC_DELAY_MS: "60",
      HEDGE_TUNING: { pop_push_every_requests: "1", pop_push_interval_ms: "100" },
      // As the version_metadata binding gives it (wrangler.toml).
      CF_VERSION_METADATA: { id: "3f1c2a9e-7b4d-4e1a-9c2f-5d6e7f809a1b", tag: "", timestamp: "2026-12-05T00:00:00Z" },
    },
    { ...popAggregator(), ...dashboardAssets() },
  );
  // Open-loop traffic over real HTTP, 50 requests a second, until stopped.
  let sending = true;
  const inFlight = new Set();
  let sent = 0;
  const traffic = (async () => {
    while (sending) {
      const p = fetch(`${w.url}/api/item/${sent++}`).then((r) => r.arrayBuffer()).catch(() => {});
      inFlight.add(p);
      p.finally(() => inFlight.delete(p));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1000 });
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    const res = await page.goto(`${w.url}/__hedge/dashboard?refresh_ms=500`);
    assert.equal(res.status(), 200);
    assert.match(res.headers()["content-security-policy"], /default-src 'none'/);
    // It asks for the token before it shows anything.
    await page.waitForSelector("#login:not([hidden])");
    assert.equal(await page.$eval("#board", (el) => el.hidden), true);
    await page.type("#token", "wrong-token-0123456789abcdef");
    await page.click("#login button");
    await page.waitForFunction(() => document.querySelector("#login-message").textContent.includes("refused"));
    await page.$eval("#token", (el) => (el.value = ""));
    await page.type("#token", TOKEN);
    await page.click("#login button");
    // Charts drawn and several refreshes with traffic behind them.
    await page.waitForFunction(() => Number(document.querySelector("#updated").dataset.refreshes) >= 4, { timeout: 20_000 });
    assert.equal(await page.$$eval(".uplot canvas", (els) => els.length), 3);
    assert.match(await page.$eval("#scope", (el) => el.textContent), /PoP/);

    // While traffic flows, every origin has its row with its latency and
    // share of primaries over the last refresh.
    await page.waitForFunction(
      () => [...document.querySelectorAll("#origins tr")].length === 2 && [...document.querySelectorAll("#origins tr")].every((tr) => tr.children[6].textContent !== "–"),
      { timeout: 10_000 },
    );
    const rows = await page.$$eval("#origins tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert.deepEqual(rows.map((r) => r[0]), ["a", "b"]);
    assert.ok(rows.every((r) => Number(r[4]) > 0 && Number(r[4]) < 300), JSON.stringify(rows));
    // The version's row: its share of the traffic, for a rollout's comparison.
    await page.waitForFunction(() => document.querySelector("#versions tr[data-version]")?.children[1].textContent > 0, { timeout: 10_000 });
    const version = await page.$eval("#versions tr[data-version]", (tr) => [tr.dataset.version, ...[...tr.children].map((td) => td.textContent)]);
    assert.equal(version[0], "3f1c2a9e-7b4d-4e1a-9c2f-5d6e7f809a1b");
    assert.equal(version[1], "3f1c2a9e");
    // The advisor's curve (its --json output, loaded from a file) with
    // today's point from the metrics on it; a file that is not one says so.
    mkdirSync(path.join(root, "test-results"), { recursive: true });
    const adviceFile = path.join(root, "test-results", "advice.json");
    const row = (budget, extra, p99) => ({ policy: "tail-aware", budget_percent: budget, extra_pct: extra, p99_ms: p99, p99_known: true });
    writeFileSync(adviceFile, JSON.stringify({
      window_s: 60,
      in_force: { budget_percent: 12, policy: "tail-aware" },
      routes: [{ route: "/api", judged: true, rows: [row(0, 0, 310), row(4, 3.1, 140), row(8, 5.2, 75), row(12, 6.0, 70)], recommendation: { budget_percent: 8 } }],
    }));
    const bad = path.join(root, "test-results", "not-advice.json");
    writeFileSync(bad, "{}");
    const input = await page.$("#advice-file");
    await input.uploadFile(bad);
    await page.waitForFunction(() => document.querySelector("#advice-status").textContent.includes("not the advisor's JSON"));
    await input.uploadFile(adviceFile);
    await page.waitForFunction(() => document.querySelector("#advice .advice-route")?.dataset.today, { timeout: 10_000 });
    assert.equal(await page.$$eval("#advice .uplot canvas", (els) => els.length), 1);
    assert.match(await page.$eval("#advice .u-title", (el) => el.textContent), /\/api: p99 against extra load \(advice: 8% budget\)/);
    const [todayExtra, todayP99] = (await page.$eval("#advice .advice-route", (el) => el.dataset.today)).split(" ").map(Number);
    assert.ok(todayExtra >= 0 && todayExtra <= 100 && todayP99 > 0, `today: ${todayExtra}% extra, p99 ${todayP99} ms`);
    await page.screenshot({ path: path.join(root, "test-results", "dashboard.png"), fullPage: true });

    // Stop the traffic and let every push land; the PoP's counters then stand still.
    sending = false;
    await traffic;
    await Promise.all([...inFlight]);
    const scrape = async () => {
      const r = await fetch(`${w.url}/__hedge/metrics?scope=pop`, { headers: { authorization: `Bearer ${TOKEN}` } });
      return parseMetrics(await r.text(), "prometheus");
    };
    // Pushes run after each response (waitUntil): wait until two scrapes agree.
    let m = await scrape();
    for (let tries = 0; tries < 40; tries++) {
      await new Promise((r) => setTimeout(r, 150));
      const again = await scrape();
      const same = again.sum("hedgehog_requests_total") === m.sum("hedgehog_requests_total");
      m = again;
      if (same && tries >= 2) break;
    }
    const refreshes = await page.$eval("#updated", (el) => Number(el.dataset.refreshes));
    await page.waitForFunction((k) => Number(document.querySelector("#updated").dataset.refreshes) >= k + 2, {}, refreshes);
    const shown = await page.evaluate(() =>
      Object.fromEntries(["total-requests", "total-hedges", "total-won", "total-errors", "budget"].map((id) => [id, document.getElementById(id).textContent])),
    );
    const requests = m.sum("hedgehog_requests_total");
    console.log(`# ${sent} requests sent; the PoP counted ${requests}; the page shows ${JSON.stringify(shown)}`);
    assert.ok(requests >= sent * 0.9, `the PoP counted ${requests} of ${sent}`);
    assert.equal(Number(shown["total-requests"]), requests);
    assert.equal(Number(shown["total-hedges"]), m.sum("hedgehog_hedges_total"));
    assert.equal(Number(shown["total-won"]), m.sum("hedgehog_hedges_total", { outcome: "won" }));
    assert.equal(Number(shown["total-errors"]), m.sum("hedgehog_client_errors_total"));
    assert.equal(Number(shown.budget), 12);
    assert.ok(m.sum("hedgehog_hedges_total") > 0, "the slow requests were hedged");
    // The route's delay, from the isolate that answered.
    const routes = await page.$$eval("#routes tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert.ok(routes.some((r) => r[0] === "/api" && r[2] === "60.0" && r[3] === "static"), JSON.stringify(routes));
    assert.match(await page.$eval("#routes-scope", (el) => el.textContent), /PoP/, "the routes come from the PoP");
    assert.deepEqual(pageErrors, []);
  } finally {
    sending = false;
    await browser.close();
  }
});

test("the dashboard is a static asset: without the ASSETS binding its path says what is missing, the rest works", async () => {
  const a = await origin("a", () => ({ delayMs: 1 }));
  const logs = captureLogs();
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: TOKEN }, { handleRuntimeStdio: logs.handleRuntimeStdio });
  for (let i = 0; i < 5; i++) {
    const page = await fetch(`${w.url}/__hedge/dashboard`);
    assert.equal(page.status, 503);
    assert.equal((await page.json()).error, "dashboard_unavailable");
  }
  // Anyone may ask for the page: the missing asset is logged once per isolate, not per request.
  await logs.until((lines) => lines.some((l) => l.includes("dashboard asset")));
  assert.equal(logs.lines.filter((l) => l.includes("dashboard asset")).length, 1, logs.lines.join("\n"));
  const stats = await fetch(`${w.url}/__hedge/stats`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(stats.status, 200);
  await stats.arrayBuffer();
  // With it, the page is the built file byte for byte, under the page's own headers.
  const withAssets = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: TOKEN }, dashboardAssets());
  const served = await fetch(`${withAssets.url}/__hedge/dashboard`);
  assert.equal(served.status, 200);
  assert.equal(served.headers.get("cache-control"), "no-store");
  assert.match(served.headers.get("content-type"), /^text\/html/);
  assert.equal(await served.text(), readFileSync(path.join(root, "dashboard/dist/dashboard.html"), "utf8"));
  // The Worker runs first: the asset's own path goes to the origin, not the file.
  const passed = await fetch(`${withAssets.url}/dashboard.html`);
  assert.equal(passed.headers.get("x-hedge") !== null, true);
  await passed.arrayBuffer();
});

test("with a stats path of its own the page reads where the Worker says, no token reaches an origin, and a crafted refresh_ms is held to a second", async () => {
  const a = await origin("a", () => ({ delayMs: 1 }));
  const w = await worker(
    { HEDGE_ORIGINS: origins(a), HEDGE_STATS_TOKEN: TOKEN, HEDGE_STATS_PATH: "/ops/hedge-stats" },
    dashboardAssets(),
  );
  // The Worker names the siblings (behind the token).
  const named = await fetch(`${w.url}/ops/dashboard?endpoints`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.deepEqual(await named.json(), { stats: "/ops/hedge-stats", metrics: "/ops/metrics" });
  assert.equal((await fetch(`${w.url}/ops/dashboard?endpoints`)).status, 401);
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    const asked = [];
    page.on("request", (r) => asked.push(new URL(r.url()).pathname));
    assert.equal((await page.goto(`${w.url}/ops/dashboard?refresh_ms=1`)).status(), 200);
    await page.waitForSelector("#login:not([hidden])");
    await page.type("#token", TOKEN);
    await page.click("#login button");
    await page.waitForFunction(() => Number(document.querySelector("#updated").dataset.refreshes) >= 2, { timeout: 20_000 });
    const started = Date.now();
    const first = await page.$eval("#updated", (el) => Number(el.dataset.refreshes));
    await new Promise((r) => setTimeout(r, 3_000));
    const refreshes = (await page.$eval("#updated", (el) => Number(el.dataset.refreshes))) - first;
    const seconds = (Date.now() - started) / 1000;
    // refresh_ms=1 asked for 3,000 refreshes; a second apart, at most 4 fit.
    assert.ok(refreshes <= Math.ceil(seconds) + 1, `${refreshes} refreshes in ${seconds} s`);
    assert.ok(asked.includes("/ops/metrics") && asked.includes("/ops/hedge-stats"), asked.join(" "));
  } finally {
    await browser.close();
  }
  const leaked = a.requests.filter((r) => JSON.stringify(r.headers).includes(TOKEN));
  assert.deepEqual(leaked.map((r) => r.url), [], "requests that carried the token to the origin");
});
