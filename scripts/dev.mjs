// `npm run dev`: two local example origins with a heavy tail (2% of requests
// 800 ms late, lab/origin-sim.mjs) and `wrangler dev` wired to them, so a
// curl shows a hedge within a minute of starting. Ctrl-C stops everything.
//
// With a .dev.vars that sets HEDGE_ORIGINS, your own origins are used and no
// example origin is started (see .dev.vars.example).
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const port = process.env.PORT ?? "8787";
const children = [];
const stop = () => {
  for (const c of children) c.kill("SIGTERM");
};
process.on("SIGINT", () => {
  stop();
  process.exit(0);
});
process.on("SIGTERM", () => {
  stop();
  process.exit(0);
});

const devVars = path.join(root, ".dev.vars");
const ownOrigins = existsSync(devVars) && /^\s*HEDGE_ORIGINS\s*=/m.test(readFileSync(devVars, "utf8"));
const vars = [];
if (!ownOrigins) {
  const sim = spawn(process.execPath, ["lab/origin-sim.mjs", "--scenario", "heavy-tail", "--seed", "dev"], {
    cwd: root,
    stdio: ["pipe", "pipe", "inherit"],
  });
  children.push(sim);
  const { origins } = await new Promise((resolve, reject) => {
    let buf = "";
    sim.stdout.on("data", (d) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl >= 0) resolve(JSON.parse(buf.slice(0, nl)));
    });
    sim.on("exit", (code) => reject(new Error(`the example origins exited with ${code}`)));
  });
  process.stderr.write(`dev: example origins (heavy tail: 2% of requests +800 ms): ${origins.map((o) => `${o.name} ${o.url}`).join(", ")}\n`);
  vars.push("--var", `HEDGE_ORIGINS:${JSON.stringify(origins)}`);
  // A new isolate's hedge budget starts empty and earns 12% of requests;
  // a dev floor lets the first curls hedge (never set this in production:
  // it adds up over a PoP's isolates).
  vars.push("--var", "HEDGE_BUDGET_FLOOR_PER_SEC:5");
}
process.stderr.write(
  `dev: starting wrangler dev on http://127.0.0.1:${port} (the build is skipped when the Rust sources are unchanged). Then, in another shell:\n` +
    `  for i in $(seq 1 60); do curl -s -o /dev/null -w '%{http_code} %header{x-hedge} %header{server-timing}\\n' http://127.0.0.1:${port}/demo; done | sort | uniq -c | sort -rn | head\n` +
    `  (x-hedge: none = no hedge was needed; hedge = the hedge's answer won; Server-Timing says why)\n`,
);
const wrangler = spawn(
  path.join(root, "node_modules/.bin/wrangler"),
  ["dev", "--ip", "127.0.0.1", "--port", port, ...vars],
  { cwd: root, stdio: "inherit" },
);
children.push(wrangler);
wrangler.on("exit", (code) => {
  stop();
  process.exit(code ?? 0);
});
