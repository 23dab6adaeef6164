// The Worker's entry module. worker-build's output (hedgehog.js, with the
// wasm and workers-rs's own recovery: a panic marks the instance, and the
// next call starts a fresh one) does all the work; this adds what a panic
// costs the clients in flight. A panic aborts the wasm instance, so every
// request this isolate was serving is lost: without this, each one's
// promise never settles and the runtime ends it with its own error page
// after a while. Here each gets a 500 at once, with its request id (the
// client's valid `x-request-id`, or a new one) in the body, the header and
// the log line, and nothing on the next request changes.
import Hedgehog from "./hedgehog.js";

export * from "./hedgehog.js";

/** Requests in flight in this isolate: each one's "a panic happened" callback. */
const inFlight = new Set();

// Called by the Rust panic hook (src/edge/panic.rs) after workers-rs's own.
globalThis.__hedgehogOnPanic = (message) => {
  for (const lost of inFlight) lost(message);
  inFlight.clear();
};

const ID = /^[A-Za-z0-9._:-]{1,128}$/;

function requestId(request) {
  const given = request.headers.get("x-request-id");
  if (given && ID.test(given)) return given;
  const words = crypto.getRandomValues(new Uint32Array(4));
  return Array.from(words, (w) => w.toString(16).padStart(8, "0")).join("");
}

function panicResponse(id) {
  const body = JSON.stringify({
    error: "internal_error",
    message: "the Worker failed on this request (a panic; it is logged with this request id); the next request is served normally",
    request_id: id,
  });
  return new Response(body, {
    status: 500,
    headers: { "content-type": "application/json", "cache-control": "no-store", "x-request-id": id },
  });
}

export default class extends Hedgehog {
  async fetch(request) {
    let lost;
    const panicked = new Promise((resolve) => {
      lost = resolve;
    });
    inFlight.add(lost);
    try {
      const answer = super.fetch(request);
      const first = await Promise.race([answer.then((response) => ({ response })), panicked.then((message) => ({ message }))]);
      if (first.response) return first.response;
      const id = requestId(request);
      console.error(JSON.stringify({ level: "error", msg: "request lost to a panic", request_id: id, panic: first.message }));
      return panicResponse(id);
    } catch (e) {
      // A trap under the runtime's own call into the wasm (the panic's hook
      // has run, so this request is lost too).
      const id = requestId(request);
      console.error(JSON.stringify({ level: "error", msg: "request lost to a panic", request_id: id, panic: String(e) }));
      return panicResponse(id);
    } finally {
      inFlight.delete(lost);
    }
  }
}
