// A spell (an origin turns slow and erroring, then recovers) read second by
// second: hedge share, the primary origin's share of primaries and p99 in
// 5 s blocks, and how soon hedging and the primaries came back after it (the
// simulator's spell report, from the load generator's and origins' counts).

export const BLOCK_S = 5;

/**
 * Per second: { requests, hedged, latencies } from the load generator and the
 * first origin's primaries (`primariesBySecond`, sparse) -> a list of seconds.
 */
export function secondsOf(bySecond, primariesBySecond) {
  return bySecond.map((s, i) => ({ ...s, primaries0: primariesBySecond[i] ?? 0 }));
}

/** Seconds [from, until) together, or null when they hold no requests. */
export function block(seconds, from, until) {
  const span = seconds.slice(from, until);
  const requests = span.reduce((a, s) => a + s.requests, 0);
  if (requests === 0) return null;
  const latencies = span.flatMap((s) => s.latencies).sort((a, b) => a - b);
  return {
    from,
    requests,
    hedgedPct: (100 * span.reduce((a, s) => a + s.hedged, 0)) / requests,
    primary0Pct: (100 * span.reduce((a, s) => a + s.primaries0, 0)) / requests,
    p99: latencies[Math.min(latencies.length - 1, Math.ceil(0.99 * latencies.length) - 1)],
  };
}

/**
 * Seconds after `endS` until `metric` over a `width`-second block is back to
 * `share` of its level before the spell ([0, startS)); null if never.
 */
export function backAfter(seconds, startS, endS, metric, { width = BLOCK_S, share = 0.8 } = {}) {
  const before = block(seconds, 0, startS);
  if (!before || metric(before) <= 0) return null;
  for (let t = endS; t + width <= seconds.length; t++) {
    const b = block(seconds, t, t + width);
    if (b && metric(b) >= share * metric(before)) return t - endS;
  }
  return null;
}

/** The markdown table of `rows` ({ name, seconds }) around a spell [startS, endS). */
export function spellMarkdown(rows, startS, endS) {
  const width = Math.max(...rows.map((r) => Math.ceil(r.seconds.length / BLOCK_S)));
  const heads = Array.from({ length: width }, (_, b) => {
    const from = b * BLOCK_S;
    return `${from}-${from + BLOCK_S} s${from >= startS && from < endS ? " (spell)" : ""}`;
  });
  const lines = [
    `The spell covers measured seconds ${startS} to ${endS}. In ${BLOCK_S} s blocks: hedged % / the primary origin's share of primaries % / p99 ms.`,
    "",
    `| configuration | ${heads.join(" | ")} | hedging back after | primaries back after |`,
    `|---|${"---|".repeat(width + 2)}`,
  ];
  const after = (v) => (v === null ? "not in the run" : `${v} s`);
  for (const r of rows) {
    const cells = Array.from({ length: width }, (_, b) => {
      const x = block(r.seconds, b * BLOCK_S, (b + 1) * BLOCK_S);
      return x ? `${x.hedgedPct.toFixed(1)} / ${x.primary0Pct.toFixed(0)} / ${x.p99.toFixed(0)}` : "-";
    });
    const hedging = backAfter(r.seconds, startS, endS, (b) => b.hedgedPct);
    const primaries = backAfter(r.seconds, startS, endS, (b) => b.primary0Pct);
    lines.push(`| ${r.name} | ${cells.join(" | ")} | ${after(hedging)} | ${after(primaries)} |`);
  }
  return lines.join("\n");
}
