// The README as a guide: short, every link resolves, and the defaults its
// prose states are the ones core/src/config/keys.rs declares (the
// configuration table itself is checked by a native test, the simulator's
// generated figures by scripts/docs-figures.py --check).
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const readme = readFileSync(path.join(root, "README.md"), "utf8");
const keys = readFileSync(path.join(root, "core/src/config/keys.rs"), "utf8");

function declaredDefault(name) {
  const m = keys.match(new RegExp(`name: "${name}", default: "([^"]*)"`));
  assert.ok(m, `${name} declared in keys.rs`);
  return m[1];
}

// GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes.
const anchor = (heading) => heading.trim().toLowerCase().replace(/[^\w\- ]/g, "").replace(/ /g, "-");

test("the README stays a guide: under 400 lines", () => {
  const lines = readme.split("\n").length;
  assert.ok(lines < 400, `README.md has ${lines} lines; details belong in docs/`);
});

test("every relative link in the README and docs/ resolves, anchors included", () => {
  const files = ["README.md", ...readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
  const broken = [];
  for (const file of files) {
    const text = readFileSync(path.join(root, file), "utf8");
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [rel, hash] = target.split("#");
      const dest = rel ? path.resolve(path.dirname(path.join(root, file)), rel) : path.join(root, file);
      if (!existsSync(dest)) {
        broken.push(`${file}: ${target} (no such file)`);
        continue;
      }
      if (hash && dest.endsWith(".md")) {
        const headings = [...readFileSync(dest, "utf8").matchAll(/^#+ (.*)$/gm)].map((m) => anchor(m[1]));
        if (!headings.includes(hash)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test("the defaults the README's prose states are the declared ones", () => {
  const stated = [
    [/\((\d+)% by default\)/, "HEDGE_BUDGET_PERCENT"],
    [/latency window \((\d+) s\)/, "HEDGE_TUNING.window_secs"],
    [/a conservative (\d+) ms/, "HEDGE_TUNING.cold_delay_ms"],
    [/degraded after (\d+) failures in a row/, "HEDGE_TUNING.health_consecutive_failures"],
    [/succeeds after (\d+) s/, "HEDGE_TUNING.health_cooldown_ms", (v) => String(Number(v) / 1000)],
    [/hedges at p(\d+) instead/, "HEDGE_TUNING.quantile", (v) => v.replace(/^p/, "")],
  ];
  for (const [pattern, key, convert = (v) => v] of stated) {
    const m = readme.match(pattern);
    assert.ok(m, `the README states ${key}'s default (${pattern})`);
    assert.equal(m[1], convert(declaredDefault(key)), `${key}: README says ${m[1]}`);
  }
  const rate = readme.match(/or a (\d+)%\s+failure rate/);
  assert.ok(rate);
  assert.equal(Number(rate[1]) / 100, Number(declaredDefault("HEDGE_TUNING.health_failure_rate")));
  const cut = readme.match(/past a\s+(\d+)% 5xx rate its hedges are cut to (\d+)%, past (\d+)%/);
  assert.ok(cut, "the README states the 5xx cuts");
  assert.equal(Number(cut[1]) / 100, Number(declaredDefault("HEDGE_TUNING.5xx_reduce_rate")));
  assert.equal(cut[2], declaredDefault("HEDGE_TUNING.5xx_reduced_budget_percent"));
  assert.equal(Number(cut[3]) / 100, Number(declaredDefault("HEDGE_TUNING.5xx_stop_rate")));
});

test("the wasm size docs/cost.md states is within 10% of the build's", () => {
  const cost = readFileSync(path.join(root, "docs/cost.md"), "utf8");
  const m = cost.match(/<!-- wasm-gzipped -->([\d,]+)<!-- \/wasm-gzipped -->/);
  assert.ok(m, "docs/cost.md states the shipped wasm size");
  const stated = Number(m[1].replaceAll(",", ""));
  const built = gzipSync(readFileSync(path.join(root, "build/index_bg.wasm")), { level: 9 }).length;
  assert.ok(Math.abs(built - stated) <= 0.1 * stated, `docs/cost.md says ${stated} bytes gzipped; the build is ${built}`);
});

test("docs/layout.md names every source file", () => {
  const layout = readFileSync(path.join(root, "docs/layout.md"), "utf8");
  const files = execFileSync("git", ["ls-files", "src", "core/src", "core/examples", "core/tests", "lab", "scripts", "tests", "dashboard"], { cwd: root, encoding: "utf8" })
    .split("\n")
    .filter((f) => /\.(rs|mjs|js|py|sh|toml|html)$/.test(f) && !f.startsWith("dashboard/dist/") && !f.startsWith("lab-results/"));
  const missing = files.filter((f) => {
    const base = path.basename(f);
    const stem = base.replace(/\.test\.mjs$|\.(rs|mjs|js|py|sh|toml|html)$/, "");
    if (stem === "mod" && f.endsWith(".rs")) return false; // a folder's module: named by its folder
    return !layout.includes(base) && !new RegExp("`[^`]*\\b" + stem.replace(/[-.]/g, "\\$&") + "\\b").test(layout);
  });
  assert.deepEqual(missing, [], "add them to docs/layout.md");
});

test("the build is within the wasm size budget the README states", () => {
  const m = readme.match(/<!-- wasm-budget -->([\d,]+)<!-- \/wasm-budget -->/);
  assert.ok(m, "the README states a size budget");
  const budget = Number(m[1].replaceAll(",", ""));
  const built = gzipSync(readFileSync(path.join(root, "build/index_bg.wasm")), { level: 9 }).length;
  assert.ok(built <= budget, `the wasm is ${built} bytes gzipped, over the README's budget of ${budget}: cut something, or raise the budget in the same commit and say why`);
});
