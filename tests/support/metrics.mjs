// Parses metrics text with the Prometheus Python client's own parsers (the
// venv scripts/setup.sh installs), so the tests judge the exposition the way
// a scraper does, not by string matching.
import { spawnSync } from "node:child_process";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const tools = process.env.HEDGEHOG_TOOLS_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), ".cache"), "hedgehog-edge");
const python = path.join(tools, "python-metrics", "bin", "python");

/**
 * `format`: "openmetrics" or "prometheus". Returns { types, samples, value(name, labels) }
 * or throws with the parser's error.
 */
export function parseMetrics(text, format) {
  const r = spawnSync(python, [path.join(here, "parse_metrics.py"), format], { input: text, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${format} parser refused the text: ${r.stderr || r.error}\n${text.slice(0, 2000)}`);
  const parsed = JSON.parse(r.stdout);
  const matches = (s, name, labels) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v);
  return {
    ...parsed,
    /** The one sample named `name` whose labels include `labels` (undefined if none; throws if several). */
    value(name, labels = {}) {
      const found = parsed.samples.filter((s) => matches(s, name, labels));
      if (found.length > 1) throw new Error(`${found.length} samples ${name} ${JSON.stringify(labels)}`);
      return found[0]?.value;
    },
    /** The sum of every sample named `name` whose labels include `labels`. */
    sum(name, labels = {}) {
      return parsed.samples.filter((s) => matches(s, name, labels)).reduce((a, s) => a + s.value, 0);
    },
  };
}
