// Collects a Miniflare runtime's stdout and stderr line by line (pass
// `handleRuntimeStdio` in its options).

/**
 * `lines` holds every line so far; `lineFor(id)` waits (up to 10 s) for the
 * JSON log line of the request with that id; `until(pred)` waits (up to 10 s)
 * until `pred(lines)` holds.
 */
export function captureLogs() {
  const lines = [];
  let wake = () => {};
  const collect = (stream) => {
    let buf = "";
    stream.on("data", (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        lines.push(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        wake();
      }
    });
  };
  const find = (id) => lines.map((l) => l.slice(l.indexOf("{"))).find((l) => l.includes(`"${id}"`));
  const until = async (pred) => {
    const deadline = Date.now() + 10_000;
    while (!pred(lines) && Date.now() < deadline) await new Promise((r) => ((wake = r), setTimeout(r, 500)));
  };
  return {
    lines,
    handleRuntimeStdio: (stdout, stderr) => (collect(stdout), collect(stderr)),
    until,
    async lineFor(id) {
      await until(() => find(id));
      return JSON.parse(find(id));
    },
  };
}
