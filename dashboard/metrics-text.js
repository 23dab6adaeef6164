// Reads the Prometheus text the Worker serves: samples, sums over labels,
// and quantiles from the difference of two scrapes' histogram buckets.

/** Samples of a Prometheus text exposition: [{ name, labels, value }]. */
export function parseText(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/);
    if (!m) continue;
    const labels = {};
    if (m[3]) {
      for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
      }
    }
    const value = m[4] === "+Inf" ? Infinity : m[4] === "-Inf" ? -Infinity : Number(m[4]);
    samples.push({ name: m[1], labels, value });
  }
  return samples;
}

const matches = (s, filter) => Object.entries(filter).every(([k, v]) => s.labels[k] === v);

/** The samples named `name` whose labels include `filter`. */
export function series(samples, name, filter = {}) {
  return samples.filter((s) => s.name === name && matches(s, filter));
}

/** Their sum. */
export function sum(samples, name, filter = {}) {
  return series(samples, name, filter).reduce((a, s) => a + s.value, 0);
}

/** Cumulative bucket counts by upper bound, summed over matching series. */
function buckets(samples, name, filter) {
  const byLe = new Map();
  for (const s of series(samples ?? [], `${name}_bucket`, filter)) {
    const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + s.value);
  }
  return byLe;
}

export const histogramQuantile = {
  /**
   * A function q -> the q-quantile (seconds) of what was observed between
   * the scrapes `before` and `now` (linear within a bucket, as Prometheus'
   * histogram_quantile); NaN without observations.
   */
  between(now, before, name, filter = {}) {
    const a = buckets(now, name, filter);
    const b = buckets(before, name, filter);
    const bounds = [...a.keys()].sort((x, y) => x - y);
    const counts = bounds.map((le) => Math.max(0, a.get(le) - (b.get(le) ?? 0)));
    const total = counts[counts.length - 1] ?? 0;
    return (q) => {
      if (!total) return NaN;
      const rank = q * total;
      for (let i = 0; i < bounds.length; i++) {
        if (counts[i] >= rank) {
          const lower = i === 0 ? 0 : bounds[i - 1];
          const upper = bounds[i];
          if (upper === Infinity) return lower;
          const below = i === 0 ? 0 : counts[i - 1];
          const inBucket = counts[i] - below;
          return inBucket > 0 ? lower + ((upper - lower) * (rank - below)) / inBucket : upper;
        }
      }
      return bounds[bounds.length - 2] ?? NaN;
    };
  },
};
