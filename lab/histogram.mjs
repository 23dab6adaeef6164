// An HDR-style histogram: exact below 2,048 us, then 1,024 linear sub-buckets
// per power of two (under 0.1% relative error). Values are recorded in
// microseconds; percentiles are reported in milliseconds.
const SUB = 1024;

function indexOf(us) {
  const v = Math.max(0, Math.floor(us));
  if (v < 2 * SUB) return v;
  const e = Math.floor(Math.log2(v)) - 10; // >= 1
  const sub = Math.floor(v / 2 ** e); // in [SUB, 2 * SUB)
  return 2 * SUB + (e - 1) * SUB + (sub - SUB);
}

function valueOf(index) {
  if (index < 2 * SUB) return index;
  const e = Math.floor((index - 2 * SUB) / SUB) + 1;
  const sub = ((index - 2 * SUB) % SUB) + SUB;
  return (sub + 0.5) * 2 ** e;
}

export class Histogram {
  constructor(counts = new Map(), total = 0, max = 0) {
    this.counts = counts;
    this.total = total;
    this.max = max;
  }
  /** Records a latency in milliseconds. */
  record(ms) {
    const us = ms * 1000;
    const i = indexOf(us);
    this.counts.set(i, (this.counts.get(i) ?? 0) + 1);
    this.total += 1;
    if (us > this.max) this.max = us;
  }
  /** The nearest-rank percentile p (0-100), in milliseconds; null when empty. */
  percentile(p) {
    if (this.total === 0) return null;
    const rank = Math.max(1, Math.ceil((p / 100) * this.total));
    let seen = 0;
    for (const i of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(i);
      if (seen >= rank) return Math.min(valueOf(i), this.max) / 1000;
    }
    return this.max / 1000;
  }
  /** Points (latency ms, fraction of requests at or below it) for a CDF plot. */
  cdf() {
    const points = [];
    let seen = 0;
    for (const i of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(i);
      points.push([valueOf(i) / 1000, seen / this.total]);
    }
    return points;
  }
  /** Adds every count of `other` into this histogram. */
  merge(other) {
    for (const [i, c] of other.counts) this.counts.set(i, (this.counts.get(i) ?? 0) + c);
    this.total += other.total;
    if (other.max > this.max) this.max = other.max;
  }
  toJSON() {
    return { counts: [...this.counts.entries()], total: this.total, max: this.max };
  }
  static fromJSON(j) {
    return new Histogram(new Map(j.counts), j.total, j.max);
  }
}
