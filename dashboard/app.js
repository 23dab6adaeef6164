// The live dashboard: asks for the stats token once (kept for the tab's
// session), then every few seconds reads the PoP's metrics (falling back to
// the answering isolate's when no aggregator is bound), turns counters into
// rates between two scrapes and draws them with uPlot.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { parseText, histogramQuantile, sum, series } from "./metrics-text.js";

// A link may set the refresh period, never below a second (each refresh
// reads the metrics twice and the stats once, and the PoP's come from the
// aggregator) nor above a minute.
const asked = Number(new URLSearchParams(location.search).get("refresh_ms"));
const REFRESH_MS = Number.isFinite(asked) && asked > 0 ? Math.min(60_000, Math.max(1_000, asked)) : 3000;
const POINTS = 100;
const $ = (id) => document.getElementById(id);

let token = sessionStorage.getItem("hedgehog-token") || "";
// Earlier scrapes, newest last. Rates are taken against the newest scrape
// at least WINDOW_S old: isolates push their counters to the PoP every few
// seconds (HEDGE_TUNING.pop_push_interval_ms, 5 s by default), so between two 3 s
// refreshes the PoP's counters move in steps and a per-refresh rate would
// swing between nothing and double.
const WINDOW_S = 12;
const scrapes = [];
const history = { t: [], rps: [], hedgeShare: [], budget: [], winShare: [], p50: [], p99: [], legP50: [], legP99: [] };
const charts = {};

function chart(id, title, seriesDefs, yLabel) {
  const el = $(id);
  const opts = {
    title,
    width: Math.max(320, el.clientWidth || 560),
    height: 220,
    scales: { x: { time: true } },
    axes: [{}, { label: yLabel, size: 60 }],
    series: [{}, ...seriesDefs],
  };
  charts[id] = new uPlot(opts, [[], ...seriesDefs.map(() => [])], el);
}

function setupCharts() {
  chart("chart-rps", "Requests per second (PoP)", [{ label: "requests/s", stroke: "#2563eb", width: 2 }], "req/s");
  chart(
    "chart-hedges",
    "Hedges: share of requests against the budget, and wins",
    [
      { label: "hedged %", stroke: "#d97706", width: 2 },
      { label: "budget %", stroke: "#dc2626", dash: [6, 4] },
      { label: "hedges won %", stroke: "#16a34a" },
    ],
    "%",
  );
  chart(
    "chart-latency",
    "Latency: what clients saw against the primaries' own answers",
    [
      { label: "client p50 ms", stroke: "#2563eb" },
      { label: "client p99 ms", stroke: "#1e3a8a", width: 2 },
      { label: "primaries answered p50 ms", stroke: "#a3a3a3" },
      { label: "primaries answered p99 ms", stroke: "#525252", width: 2 },
    ],
    "ms",
  );
}

function push(key, value) {
  history[key].push(value);
  if (history[key].length > POINTS) history[key].shift();
}

const fmt = (v, digits = 1) => (v == null || Number.isNaN(v) ? "–" : Number(v).toFixed(digits));

// Where the stats and metrics are, as the Worker says (the page never
// builds an operator URL: one it got wrong would carry the token to an origin).
let paths = null;
async function endpoints() {
  if (paths) return paths;
  const res = await fetch(`${location.pathname}?endpoints`, { headers: { authorization: `Bearer ${token}` }, cache: "no-store" });
  if (res.status === 401) throw Object.assign(new Error("the token was refused"), { unauthorized: true });
  const body = res.ok && /json/.test(res.headers.get("content-type") ?? "") ? await res.json() : null;
  if (typeof body?.stats !== "string" || typeof body?.metrics !== "string") throw new Error(`the Worker did not say where its stats are (${res.status})`);
  paths = body;
  return paths;
}

async function scrape(scope) {
  const url = `${(await endpoints()).metrics}${scope === "pop" ? "?scope=pop" : ""}`;
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, cache: "no-store" });
  if (res.status === 401) throw Object.assign(new Error("the token was refused"), { unauthorized: true });
  if (!res.ok) throw Object.assign(new Error(`${url}: ${res.status}`), { status: res.status });
  return parseText(await res.text());
}

async function stats(scope) {
  const url = `${(await endpoints()).stats}${scope === "pop" ? "?scope=pop" : ""}`;
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, cache: "no-store" });
  return res.ok ? res.json() : null;
}

async function refresh() {
  let scope = "pop";
  let m;
  try {
    m = await scrape("pop");
  } catch (e) {
    if (e.unauthorized) return askForToken(e.message);
    if (e.status !== 503) throw e;
    scope = "isolate";
    m = await scrape("isolate");
  }
  const own = scope === "pop" ? await scrape("isolate") : m;
  const errorStats = await stats(scope);
  const now = Date.now() / 1000;
  $("scope").textContent = scope === "pop" ? "the PoP (every isolate, from the aggregator)" : "this isolate only (no PoP aggregator bound)";
  const requests = sum(m, "hedgehog_requests_total");
  const hedges = sum(m, "hedgehog_hedges_total");
  const won = sum(m, "hedgehog_hedges_total", { outcome: "won" });
  const errors = sum(m, "hedgehog_client_errors_total");
  $("total-requests").textContent = String(requests);
  $("total-hedges").textContent = String(hedges);
  $("total-won").textContent = String(won);
  $("total-errors").textContent = String(errors);
  const budget = 100 * (sum(own, "hedgehog_hedge_budget_ratio") || 0);
  $("budget").textContent = fmt(budget, 0);
  const previous = [...scrapes].reverse().find((x) => now - x.t >= WINDOW_S) ?? scrapes[0];
  if (previous) {
    const dt = Math.max(now - previous.t, 1e-3);
    const dReq = requests - previous.requests;
    const dHedges = hedges - previous.hedges;
    push("t", now);
    push("rps", dReq / dt);
    push("hedgeShare", dReq > 0 ? (100 * dHedges) / dReq : 0);
    push("budget", budget);
    push("winShare", dHedges > 0 ? (100 * (won - previous.won)) / dHedges : null);
    const client = histogramQuantile.between(m, previous.m, "hedgehog_request_duration_seconds");
    const legs = histogramQuantile.between(m, previous.m, "hedgehog_origin_leg_duration_seconds", { leg: "primary" });
    push("p50", client(0.5) * 1000);
    push("p99", client(0.99) * 1000);
    push("legP50", legs(0.5) * 1000);
    push("legP99", legs(0.99) * 1000);
    charts["chart-rps"].setData([history.t, history.rps]);
    charts["chart-hedges"].setData([history.t, history.hedgeShare, history.budget, history.winShare]);
    charts["chart-latency"].setData([history.t, history.p50, history.p99, history.legP50, history.legP99]);
    renderOrigins(m, previous.m);
    renderVersions(m, previous.m, dt);
    renderAdvice(m, previous.m);
  }
  // The PoP's view of routes and errors (what isolates last reported),
  // else the answering isolate's.
  const popRoutes = scope === "pop" && series(m, "hedgehog_route_hedge_delay_seconds").length > 0;
  renderRoutes(popRoutes ? m : own);
  $("routes-scope").textContent = popRoutes ? "the PoP: what its isolates last reported" : "the isolate that answered";
  renderErrors(errorStats);
  $("errors-scope").textContent = scope === "pop" ? "the PoP" : "the isolate that answered";
  scrapes.push({ t: now, requests, hedges, won, m });
  while (scrapes.length > 1 && now - scrapes[1].t >= WINDOW_S) scrapes.shift();
  $("updated").textContent = new Date().toLocaleTimeString();
  $("updated").dataset.refreshes = String(Number($("updated").dataset.refreshes || 0) + 1);
}

function renderOrigins(m, before) {
  const rows = [];
  const names = [...new Set(series(m, "hedgehog_origin_legs_total").map((s) => s.labels.origin))].sort();
  const primaries = (x, origin) => sum(x, "hedgehog_origin_legs_total", { leg: "primary", ...(origin ? { origin } : {}) });
  const allPrimaries = primaries(m) - primaries(before);
  for (const origin of names) {
    const legs = histogramQuantile.between(m, before, "hedgehog_origin_leg_duration_seconds", { origin });
    const share = allPrimaries > 0 ? (100 * (primaries(m, origin) - primaries(before, origin))) / allPrimaries : null;
    const ratio = series(m, "hedgehog_origin_5xx_ratio").find((s) => s.labels.origin === origin);
    const up = series(m, "hedgehog_origin_up").find((s) => s.labels.origin === origin);
    const probe = series(m, "hedgehog_origin_probe_up").find((s) => s.labels.origin === origin);
    rows.push(
      `<tr data-origin="${escapeHtml(origin)}"><td>${escapeHtml(origin)}</td>` +
        `<td>${up ? (up.value ? "up" : "degraded") : ratio ? (ratio.value > 0.2 ? "erroring" : "ok") : "–"}</td>` +
        `<td>${ratio ? fmt(100 * ratio.value, 1) : "–"}</td>` +
        `<td>${probe ? (probe.value ? "passing" : "failing") : "–"}</td>` +
        `<td>${fmt(legs(0.5) * 1000)}</td><td>${fmt(legs(0.99) * 1000)}</td><td>${fmt(share, 0)}</td></tr>`,
    );
  }
  $("origins").innerHTML = rows.join("");
}

// Each Worker version's figures between two refreshes (the PoP scope has
// them when isolates run with the version metadata binding), so a version
// at 10% can be compared with the rest.
function renderVersions(m, before, dt) {
  const versions = [...new Set(series(m, "hedgehog_version_requests_total").map((s) => s.labels.version))].sort();
  const delta = (name, filter) => sum(m, name, filter) - sum(before, name, filter);
  const rows = versions.map((version) => {
    const requests = delta("hedgehog_version_requests_total", { version });
    const hedges = delta("hedgehog_version_hedges_total", { version });
    const won = delta("hedgehog_version_hedges_total", { version, outcome: "won" });
    const errors = delta("hedgehog_version_client_errors_total", { version });
    const latency = histogramQuantile.between(m, before, "hedgehog_version_request_duration_seconds", { version });
    return (
      `<tr data-version="${escapeHtml(version)}"><td>${escapeHtml(version.slice(0, 8))}</td>` +
      `<td>${fmt(requests / dt, 1)}</td>` +
      `<td>${requests > 0 ? fmt((100 * hedges) / requests, 1) : "–"}</td>` +
      `<td>${hedges > 0 ? fmt((100 * won) / hedges, 0) : "–"}</td>` +
      `<td>${requests > 0 ? fmt((100 * errors) / requests, 2) : "–"}</td>` +
      `<td>${requests > 0 ? fmt(latency(0.99) * 1000) : "–"}</td></tr>`
    );
  });
  $("versions").innerHTML = rows.length ? rows.join("") : `<tr><td colspan="6">no version reported (add the version_metadata binding)</td></tr>`;
}

function renderRoutes(own) {
  const delays = series(own, "hedgehog_route_hedge_delay_seconds");
  const predicted = series(own, "hedgehog_route_predicted_hedge_ratio");
  const tails = series(own, "hedgehog_route_predicted_tail_seconds");
  $("routes").innerHTML = delays
    .map((d) => {
      const { origin, route, basis } = d.labels;
      const same = (s) => s.labels.origin === origin && s.labels.route === route;
      const share = predicted.find(same);
      const hedged = tails.find((s) => same(s) && s.labels.hedged === "true");
      const unhedged = tails.find((s) => same(s) && s.labels.hedged === "false");
      return (
        `<tr><td>${escapeHtml(route)}</td><td>${escapeHtml(origin)}</td><td>${fmt(d.value * 1000)}</td><td>${escapeHtml(basis)}</td>` +
        `<td>${share ? fmt(100 * share.value) : "–"}</td><td>${hedged ? fmt(hedged.value * 1000) : "–"}</td><td>${unhedged ? fmt(unhedged.value * 1000) : "–"}</td></tr>`
      );
    })
    .join("");
}

// The advisor's predicted curve per route (`npm run advise -- --json`,
// loaded from a file: read in this browser, never sent anywhere), with
// today's p99 and extra load on it from the metrics between two scrapes.
let advice = null;
const adviceCharts = [];

function loadAdvice(text) {
  const parsed = JSON.parse(text);
  if (!Array.isArray(parsed?.routes)) throw new Error("no routes: is it `npm run advise -- --json` output?");
  advice = parsed;
  for (const c of adviceCharts.splice(0)) c.plot.destroy();
  $("advice").innerHTML = "";
  for (const route of advice.routes.filter((r) => r.judged)) {
    const el = document.createElement("div");
    el.className = "advice-route";
    $("advice").append(el);
    const rows = route.rows
      .filter((r) => r.policy === advice.in_force.policy && r.p99_known)
      .sort((a, b) => a.extra_pct - b.extra_pct);
    const k = route.recommendation;
    const plot = new uPlot(
      {
        title: `${route.route}: p99 against extra load${k ? ` (advice: ${k.budget_percent}% budget)` : ""}`,
        width: Math.max(320, $("advice").clientWidth / 2 - 16 || 560),
        height: 220,
        scales: { x: { time: false } },
        axes: [{ label: "extra origin requests %" }, { label: "p99 ms", size: 60 }],
        series: [
          { label: "extra %" },
          { label: `predicted (${advice.in_force.policy})`, stroke: "#2563eb", width: 2, spanGaps: true },
          { label: "today", stroke: "#dc2626", paths: () => null, points: { show: true, size: 12, fill: "#dc2626" } },
        ],
      },
      [[], [], []],
      el,
    );
    adviceCharts.push({ route: route.route, rows, plot, el });
  }
  $("advice-status").textContent = `${adviceCharts.length} route(s) from an advice of a ${fmt(advice.window_s, 0)} s window`;
}

function renderAdvice(m, before) {
  for (const c of adviceCharts) {
    const filter = c.route === "(all routes)" ? {} : { route: c.route };
    const dReq = sum(m, "hedgehog_requests_total", filter) - sum(before, "hedgehog_requests_total", filter);
    const dHedges = sum(m, "hedgehog_hedges_total", filter) - sum(before, "hedgehog_hedges_total", filter);
    const p99 = histogramQuantile.between(m, before, "hedgehog_request_duration_seconds", filter)(0.99) * 1000;
    const today = dReq > 0 && Number.isFinite(p99) ? { extra: (100 * dHedges) / dReq, p99 } : null;
    const points = c.rows.map((r) => [r.extra_pct, r.p99_ms, null]);
    if (today) points.push([today.extra, null, today.p99]);
    points.sort((a, b) => a[0] - b[0]);
    c.plot.setData([points.map((p) => p[0]), points.map((p) => p[1]), points.map((p) => p[2])]);
    c.el.dataset.today = today ? `${today.extra.toFixed(2)} ${today.p99.toFixed(1)}` : "";
  }
}

function renderErrors(s) {
  const errors = s?.recent_errors ?? [];
  $("errors").innerHTML = errors.length
    ? errors
        .slice()
        .reverse()
        .map(
          (e) =>
            `<tr><td>${new Date(e.at_ms).toLocaleTimeString()}</td><td>${escapeHtml(e.route)}</td><td>${e.status ?? "–"}</td><td>${escapeHtml(e.what)}</td><td>${escapeHtml(e.origin ?? "")}</td></tr>`,
        )
        .join("")
    : `<tr><td colspan="5">none reported</td></tr>`;
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function askForToken(message) {
  $("login").hidden = false;
  $("board").hidden = true;
  $("login-message").textContent = message || "";
  stop();
}

let timer = null;
function stop() {
  if (timer) clearInterval(timer);
  timer = null;
}
function start() {
  $("login").hidden = true;
  $("board").hidden = false;
  if (!charts["chart-rps"]) setupCharts();
  // One refresh at a time: a slow aggregator is not asked again before it answers.
  let running = false;
  const tick = () => {
    if (running) return;
    running = true;
    refresh()
      .catch((e) => {
        if (e.unauthorized) return askForToken(e.message);
        $("status").textContent = `last refresh failed: ${e.message}`;
      })
      .finally(() => (running = false));
  };
  tick();
  timer = setInterval(tick, REFRESH_MS);
}

$("advice-file").addEventListener("change", async (ev) => {
  const file = ev.target.files?.[0];
  if (!file) return;
  try {
    loadAdvice(await file.text());
  } catch (e) {
    $("advice-status").textContent = `not the advisor's JSON: ${e.message}`;
  }
});

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("hedgehog-token", token);
  start();
});
if (token) start();
else askForToken("");
