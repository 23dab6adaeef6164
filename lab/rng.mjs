// Seeded random numbers, so every lab run of a scenario draws the same latencies.

/** A SplitMix32-style generator: `next()` returns a float in [0, 1). */
export function seededRandom(seed) {
  let state = hashSeed(seed) >>> 0;
  const next = () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  };
  return {
    next,
    /** Standard normal (Box-Muller). */
    normal() {
      const u1 = Math.max(next(), Number.MIN_VALUE);
      const u2 = next();
      return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    },
    /** Lognormal with the given median and sigma (of the underlying normal). */
    lognormal(median, sigma) {
      return median * Math.exp(sigma * this.normal());
    },
    /** Exponential with the given mean. */
    exponential(mean) {
      return -mean * Math.log(1 - next());
    },
  };
}

function hashSeed(seed) {
  const text = String(seed);
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h;
}
