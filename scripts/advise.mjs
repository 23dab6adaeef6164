// The advisor's front: takes the stats page from --url (with the token in
// HEDGE_STATS_TOKEN) or --from FILE, and runs the replay on it
// (target/release/examples/advise, which scripts/advise.sh builds).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const binary = path.join(root, "target", "release", "examples", "advise");

function fail(message) {
  process.stderr.write(`advise: ${message}\n`);
  process.exit(2);
}

const args = process.argv.slice(2);
const at = args.indexOf("--url");
let scratch = null;
if (at >= 0) {
  const url = args[at + 1];
  if (!url) fail("--url needs the stats page's address, e.g. https://ops.example.com/__hedge/stats?scope=pop");
  const token = process.env.HEDGE_STATS_TOKEN;
  if (!token) fail("set HEDGE_STATS_TOKEN to the Worker's stats token (the page needs it)");
  let res;
  try {
    res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  } catch (e) {
    fail(`${url}: ${e.cause?.message ?? e.message}`);
  }
  const text = await res.text();
  if (res.status === 401) fail(`${url}: the token was refused (401)`);
  if (!res.ok) fail(`${url}: ${res.status} ${text.slice(0, 300)}`);
  scratch = mkdtempSync(path.join(tmpdir(), "hedgehog-advise-"));
  const file = path.join(scratch, "stats.json");
  writeFileSync(file, text);
  args.splice(at, 2, "--from", file);
} else {
  // A relative --from is the caller's, not npm's (which runs in the project).
  const from = args.indexOf("--from");
  if (from < 0 || !args[from + 1]) fail("give --url URL or --from FILE (npm run advise -- --help)");
  args[from + 1] = path.resolve(process.env.INIT_CWD ?? process.cwd(), args[from + 1]);
}
const run = spawnSync(binary, args, { stdio: "inherit" });
if (scratch) rmSync(scratch, { recursive: true, force: true });
process.exit(run.status ?? 1);
