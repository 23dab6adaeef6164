// The winner's body streams through the Worker: nothing is buffered.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { origins } from "./support/worker.mjs";
import { origin, worker } from "./support/harness.mjs";

const sha = (buf) => createHash("sha256").update(buf).digest("hex");

test("a 20 MB body arrives intact", async () => {
  const CHUNK = 256 * 1024;
  const chunks = Array.from({ length: 80 }, () => randomBytes(CHUNK)); // 20 MiB
  const expected = sha(Buffer.concat(chunks));
  const a = await origin("a", () => ({ chunks, headers: { "content-type": "application/octet-stream" } }));
  const w = await worker({ HEDGE_ORIGINS: origins(a), HEDGE_TUNING: { cold_delay_ms: "10000" } });
  const res = await w.fetch("/big");
  assert.equal(res.status, 200);
  const body = Buffer.from(await res.arrayBuffer());
  assert.equal(body.length, 80 * CHUNK);
  assert.equal(sha(body), expected);
});

test("a body trickled over 2 s by the winning hedge: first bytes arrive before the origin finished", async () => {
  const chunks = Array.from({ length: 10 }, (_, i) => `chunk-${i};`);
  const a = await origin("a", () => ({ delayMs: 20_000 }));
  const b = await origin("b", () => ({ chunks, chunkGapMs: 200 }));
  const w = await worker({ HEDGE_ORIGINS: origins(a, b), HEDGE_TUNING: { cold_delay_ms: "50" } });
  // identity: a gzip layer between workerd and this client would hold small chunks back.
  const res = await w.fetch("/trickle", { headers: { "accept-encoding": "identity" } });
  assert.equal(res.headers.get("x-hedge"), "hedge");
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const first = await reader.read();
  assert.equal(first.done, false);
  const hedgeLeg = b.requests[0];
  assert.equal(hedgeLeg.finishedAt, null, "the client has bytes while the origin is still sending");
  let text = decoder.decode(first.value, { stream: true });
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  assert.equal(text, chunks.join(""));
  assert.notEqual(hedgeLeg.finishedAt, null);
  // The slow primary was aborted, not left running behind the stream.
  await a.waitFor("abort", () => true, 2_000);
});
