// The oracle bound: the best tail a single hedge can give for a given extra
// load b, with independent, identically distributed legs. Hedge at
// d = F^-1(1 - b) (so a fraction b of requests is hedged); the request time
// T = min(X1, d + X2) has P(T > t) = P(X > t) P(X > t - d) for t >= d.

/** Survival function P(X > t) of a sorted sample. */
export function survival(sorted) {
  return (t) => {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return (sorted.length - lo) / sorted.length;
  };
}

/** The q-quantile of a sorted sample (nearest rank). */
export function quantile(sorted, q) {
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1];
}

/**
 * The oracle's percentiles for extra load `b` (0-1) from latency `samples`.
 * Returns { delayMs, p99, p999 } (ms).
 */
export function oracleBound(samples, b, percentiles = [0.99, 0.999]) {
  const sorted = Float64Array.from(samples).sort();
  const S = survival(sorted);
  const d = quantile(sorted, 1 - b);
  const hedged = (t) => (t < d ? S(t) : S(t) * S(t - d));
  const out = { delayMs: d };
  for (const q of percentiles) {
    // Smallest t with P(T > t) <= 1 - q; P(T > t) falls as t grows.
    let lo = 0;
    let hi = sorted[sorted.length - 1] + d;
    for (let i = 0; i < 60; i++) {
      const mid = (lo + hi) / 2;
      if (hedged(mid) <= 1 - q) hi = mid;
      else lo = mid;
    }
    out[`p${String(q * 100).replace(".", "")}`] = hi;
  }
  return out;
}
