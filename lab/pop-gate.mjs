// A lab-only worker that stands between the Worker and its real PoP
// aggregator, and drives pushes at the aggregator, in the same workerd.
//
// - The Worker's POP_AGGREGATOR binding points at `PopGate` here. The gate
//   forwards each request to the real `PopAggregator` (binding REAL) of the
//   same name, unless a fault is set: "down" (503 at once), "slow" (waits
//   `slowMs`, then forwards), "shed" (the real aggregator's own shed answer,
//   503 with retry-after, without reaching it) or "evict" (forwards to a
//   fresh object: in-memory state and storage gone, as after an eviction
//   that lost what had not been saved). It keeps the last push bodies it saw.
// - `POST /drive` on the worker pushes the given bodies at the real
//   aggregator (or at `Null`, an object that answers 200 at once: the
//   baseline of the same path) open-loop at `rate` per second for `seconds`,
//   and reports every answer's time.
//
// Control requests go to the gate object through the worker's fetch:
// `POST /fault {mode, slowMs}`, `GET /captured`.

// Shared by every gate object of the isolate (the Worker names its object
// from cf.colo, which a request over the loopback may not carry).
const captured = [];
const counts = { forwarded: 0, faulted: 0, names: {} };
const fault = { mode: "none", slowMs: 2_000, generation: 0 };

export class PopGate {
  constructor(state, env) {
    this.env = env;
  }

  async fetch(request) {
    const url = new URL(request.url);
    if (url.pathname === "/__gate/fault") {
      const { mode, slowMs } = await request.json();
      if (mode === "evict") fault.generation += 1;
      fault.mode = mode;
      if (slowMs) fault.slowMs = slowMs;
      return Response.json(fault);
    }
    if (url.pathname === "/__gate/captured") {
      return Response.json({ bodies: captured, counts });
    }
    const name = request.headers.get("x-hedge-pop") ?? "TST";
    counts.names[name] = (counts.names[name] ?? 0) + 1;
    const body = request.method === "POST" ? await request.arrayBuffer() : null;
    if (url.pathname === "/push" && body) {
      captured.push(new TextDecoder().decode(body));
      if (captured.length > 20) captured.shift();
    }
    if (fault.mode === "down") {
      counts.faulted += 1;
      return new Response("aggregator down (lab fault)", { status: 503 });
    }
    if (fault.mode === "shed") {
      counts.faulted += 1;
      return Response.json({ error: "shed", message: "lab fault" }, { status: 503, headers: { "retry-after": "10" } });
    }
    if (fault.mode === "slow") {
      counts.faulted += 1;
      await new Promise((r) => setTimeout(r, fault.slowMs));
    }
    counts.forwarded += 1;
    // "evict" and every mode after it talk to a new object: nothing of the
    // old one's state is seen again.
    const target = fault.generation > 0 ? `${name}#${fault.generation}` : name;
    const stub = this.env.REAL.get(this.env.REAL.idFromName(target));
    return stub.fetch(new Request(request.url, { method: request.method, headers: request.headers, body }));
  }
}

/** Answers 200 at once: the cost of the driver and the dispatch alone. */
export class Null {
  async fetch(request) {
    await request.arrayBuffer();
    return new Response("{}", { status: 200 });
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const gate = env.GATE.get(env.GATE.idFromName("TST"));
    if (url.pathname === "/fault" || url.pathname === "/captured") {
      return gate.fetch(new Request(`http://gate/__gate${url.pathname}`, { method: request.method, body: request.method === "POST" ? await request.text() : null }));
    }
    if (url.pathname === "/drive") {
      const { target, name, bodies, rate, seconds } = await request.json();
      const ns = target === "null" ? env.NULL : env.REAL;
      const stub = ns.get(ns.idFromName(name));
      const total = Math.round(rate * seconds);
      const times = [];
      let errors = 0;
      let shed = 0;
      const statuses = {};
      const start = Date.now();
      const pending = [];
      for (let i = 0; i < total; i++) {
        const intended = start + (i * 1000) / rate;
        const wait = intended - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const body = bodies[i % bodies.length];
        pending.push(
          stub
            .fetch("https://pop-aggregator/push", { method: "POST", body, headers: { "x-hedge-pop": name } })
            .then(async (res) => {
              await res.arrayBuffer();
              statuses[res.status] = (statuses[res.status] ?? 0) + 1;
              if (res.status === 503) shed += 1;
              else if (res.status !== 200) errors += 1;
              // From the intended send time: a queue shows as time.
              times.push(Date.now() - intended);
            })
            .catch(() => {
              errors += 1;
            }),
        );
      }
      await Promise.all(pending);
      return Response.json({ sent: total, elapsedMs: Date.now() - start, times, errors, shed, statuses });
    }
    return new Response("POST /drive, POST /fault, GET /captured", { status: 404 });
  },
};
