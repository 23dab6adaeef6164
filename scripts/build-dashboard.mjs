// Bundles the dashboard (dashboard/app.js with uPlot and its CSS) into one
// self-contained page, dashboard/dist/dashboard.html, which the Worker
// serves (include_str!): no outside assets. The page is committed so the
// Rust build needs no Node; `--check` fails when it is stale (the test
// command runs it).
import { build } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dir = path.join(root, "dashboard");
const out = path.join(dir, "dist", "dashboard.html");

const result = await build({
  entryPoints: [path.join(dir, "app.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2020",
  write: false,
  outdir: path.join(dir, "dist"),
  legalComments: "inline",
  logLevel: "error",
});
const file = (ext) => result.outputFiles.find((f) => f.path.endsWith(ext))?.text ?? "";
// "</" inside inline script or style would end the element early.
const safe = (s) => s.replace(/<\/(script|style)/gi, "<\\/$1");
const page = readFileSync(path.join(dir, "index.html"), "utf8")
  .replace("<!-- STYLE -->", () => `<style>${safe(file(".css"))}</style>`)
  .replace("<!-- SCRIPT -->", () => `<script>${safe(file(".js"))}</script>`);

if (process.argv.includes("--check")) {
  let current = "";
  try {
    current = readFileSync(out, "utf8");
  } catch {}
  if (current !== page) {
    console.error("build-dashboard: dashboard/dist/dashboard.html is stale; run node scripts/build-dashboard.mjs");
    process.exit(1);
  }
  console.log(`build-dashboard: dashboard/dist/dashboard.html is current (${page.length} bytes)`);
} else {
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, page);
  console.log(`build-dashboard: wrote dashboard/dist/dashboard.html (${page.length} bytes)`);
}
