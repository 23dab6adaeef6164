// Waiting for the Worker's background cache stores, read through Miniflare
// (no request reaches the Worker or an origin).

/**
 * Resolves once something is stored under `path`'s plain key; `base` is the
 * URL the requests went to (w.fetch uses http://edge.test).
 */
export async function stored(w, path, { base = "http://edge.test", timeoutMs = 5_000 } = {}) {
  const caches = await w.mf.getCaches();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hit = await caches.default.match(`${base}${path}`);
    if (hit) {
      await hit.arrayBuffer();
      return;
    }
    if (Date.now() > deadline) throw new Error(`${path} was not cached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
