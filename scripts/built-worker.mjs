// Loads the built Worker module (build/index.js and its wasm) in Node, so
// tools can call what it exports: `npm run check` calls the shipped
// configuration parser this way instead of compiling a second copy of it.
// Node lacks the two things workerd gives a module: `cloudflare:workers`
// (stubbed with the two base classes the module extends) and wasm imported
// as a compiled `WebAssembly.Module` (loaded from the file).
import { register } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier === "cloudflare:workers") return { url: "hedgehog-stub:cloudflare-workers", shortCircuit: true };
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (url === "hedgehog-stub:cloudflare-workers") {
    const base = "{ constructor(ctx, env) { this.ctx = ctx; this.env = env; } }";
    return { format: "module", shortCircuit: true, source: "export class WorkerEntrypoint " + base + " export class DurableObject " + base };
  }
  if (url.endsWith(".wasm")) {
    return { format: "module", shortCircuit: true, source: "import { readFileSync } from 'node:fs'; export default new WebAssembly.Module(readFileSync(new URL(" + JSON.stringify(url) + ")));" };
  }
  return next(url, context);
}`;

let loaded;

/** The built module's default export (the Worker's entrypoint class). */
export async function builtWorker(buildDir) {
  if (!loaded) {
    register(`data:text/javascript,${encodeURIComponent(hooks)}`);
    // workers-rs listens for the runtime's error events at start-up.
    globalThis.addEventListener ??= () => {};
    loaded = import(pathToFileURL(path.join(buildDir, "index.js")).href);
  }
  return (await loaded).default;
}
