// The lab's report: a markdown table, and a self-contained SVG plot of each
// configuration's latency percentiles on log scales (the tail on the right).

const fmt = (v, digits = 1) => (v === null || v === undefined || Number.isNaN(v) ? "-" : Number(v).toFixed(digits));

export function markdownTable(rows) {
  const header =
    "| configuration | p50 ms | p90 ms | p95 ms | p99 ms | p99.9 ms | extra origin req % | hedge rate % | hedge wins % | aborted at origin | wasted origin work % | errors |";
  const sep = "|" + header.split("|").slice(1, -1).map(() => "---").join("|") + "|";
  const lines = rows.map(
    (r) =>
      `| ${r.name} | ${fmt(r.p50)} | ${fmt(r.p90)} | ${fmt(r.p95)} | ${fmt(r.p99)} | ${fmt(r.p999)} | ${fmt(r.extraPct)} | ${fmt(r.hedgeRatePct)} | ${fmt(r.hedgeWinPct)} | ${r.abortedAtOrigin ?? "-"} | ${fmt(r.wastedWorkPct)} | ${r.errors} |`,
  );
  return [header, sep, ...lines].join("\n");
}

const COLORS = ["#888888", "#1f77b4", "#ff7f0e", "#d62728", "#2ca02c", "#9467bd", "#8c564b"];

/** An SVG percentile plot: x = nines (p50 .. p99.99) on a log scale, y = latency (log). */
export function percentileSvg(series, title) {
  const H = 520;
  // The legend sits right of the plot: wide enough for the longest name at
  // about 7 px a character (12 px sans-serif).
  const longest = Math.max(0, ...series.map((s) => String(s.name).length));
  const m = { left: 80, right: Math.max(290, 60 + Math.ceil(longest * 7)), top: 40, bottom: 60 };
  const W = 710 + m.right; // the plot keeps its width whatever the legend needs
  const xMax = 4; // 99.99%
  const nines = (f) => -Math.log10(Math.max(1 - f, 1e-4));
  const all = series.flatMap((s) => s.points.map((p) => p[0])).filter((v) => v > 0);
  const yMin = Math.max(0.5, Math.min(...all) * 0.8);
  const yMax = Math.max(...all) * 1.2;
  const ly = (v) => Math.log10(v);
  const X = (f) => m.left + (Math.min(nines(f), xMax) / xMax) * (W - m.left - m.right);
  const Y = (v) => H - m.bottom - ((ly(Math.max(v, yMin)) - ly(yMin)) / (ly(yMax) - ly(yMin))) * (H - m.top - m.bottom);
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${W / 2 - 100}" y="22" font-size="15">${escapeXml(title)}</text>`);
  for (const [f, label] of [[0, "p0"], [0.5, "p50"], [0.9, "p90"], [0.99, "p99"], [0.999, "p99.9"], [0.9999, "p99.99"]]) {
    const x = X(f);
    out.push(`<line x1="${x}" y1="${m.top}" x2="${x}" y2="${H - m.bottom}" stroke="#eee"/>`);
    out.push(`<text x="${x - 12}" y="${H - m.bottom + 18}">${label}</text>`);
  }
  for (let d = Math.floor(ly(yMin)); d <= Math.ceil(ly(yMax)); d++) {
    for (const k of [1, 2, 5]) {
      const v = k * 10 ** d;
      if (v < yMin || v > yMax) continue;
      const y = Y(v);
      out.push(`<line x1="${m.left}" y1="${y}" x2="${W - m.right}" y2="${y}" stroke="#eee"/>`);
      out.push(`<text x="${m.left - 8}" y="${y + 4}" text-anchor="end">${v} ms</text>`);
    }
  }
  out.push(`<text x="${m.left + 120}" y="${H - 15}">percentile (log scale of nines)</text>`);
  const midY = (m.top + H - m.bottom) / 2;
  out.push(`<text x="18" y="${midY}" transform="rotate(-90 18 ${midY})" text-anchor="middle">latency, ms (log scale)</text>`);
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.points.filter(([, f]) => f < 0.99995).map(([v, f]) => `${X(f).toFixed(1)},${Y(v).toFixed(1)}`);
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.join(" ")}"/>`);
    const ly0 = m.top + 10 + i * 20;
    out.push(`<line x1="${W - m.right + 15}" y1="${ly0}" x2="${W - m.right + 40}" y2="${ly0}" stroke="${color}" stroke-width="3"/>`);
    out.push(`<text x="${W - m.right + 45}" y="${ly0 + 4}">${escapeXml(s.name)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n");
}

function escapeXml(s) {
  return String(s).replace(/[<>&"]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;" })[c]);
}
