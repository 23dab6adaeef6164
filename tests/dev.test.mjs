// `npm run dev` (scripts/dev.mjs): example origins and `wrangler dev` wired
// to them answer a request through the Worker with its headers. The build
// step is a no-op here (the test command built the Worker first).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

async function freePort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

test("npm run dev: wrangler dev in front of the example origins answers with x-hedge and Server-Timing", { timeout: 120_000 }, async () => {
  const port = await freePort();
  const dev = spawn(process.execPath, ["scripts/dev.mjs"], {
    cwd: root,
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  dev.stdout.on("data", (d) => (output += d));
  dev.stderr.on("data", (d) => (output += d));
  try {
    let res = null;
    const deadline = Date.now() + 90_000;
    while (!res && Date.now() < deadline) {
      try {
        res = await fetch(`http://127.0.0.1:${port}/demo`);
      } catch {
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    assert.ok(res, `wrangler dev never answered:\n${output.slice(-2000)}`);
    assert.equal(res.status, 200, output.slice(-2000));
    await res.text();
    assert.match(res.headers.get("x-hedge") ?? "", /^(none|primary|hedge)$/);
    assert.match(res.headers.get("server-timing") ?? "", /origin;dur=[\d.]+;desc="(primary|secondary)"/);
    assert.match(output, /example origins \(heavy tail/);
  } finally {
    // The whole group: dev.mjs, wrangler, workerd and the example origins.
    try {
      process.kill(-dev.pid, "SIGTERM");
    } catch {}
    await new Promise((r) => (dev.exitCode !== null ? r() : dev.on("exit", r)));
  }
});
