// A client whose upload breaks: it announces a body and does not deliver it.
// Spoken on a raw socket, since an HTTP client library would not send it.
import net from "node:net";

/**
 * Sends `method path` to the Worker at `url` with a body that breaks:
 * - "short": `Content-Length: 100`, 10 bytes, then the client half-closes;
 * - "bad-chunk": a chunked body whose second chunk size is not hex.
 * Resolves with the status the Worker answered (`null` when the connection
 * closed without an answer) once the connection closes, or after 10 s.
 */
export function brokenUpload(url, { method = "POST", path = "/", how = "short", headers = {} } = {}) {
  const { hostname, port } = new URL(url);
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  const head = `${method} ${path} HTTP/1.1\r\nHost: ${hostname}\r\n${extra}`;
  const raw =
    how === "short"
      ? `${head}Content-Length: 100\r\n\r\n0123456789`
      : `${head}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nbad\r\n`;
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const chunks = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString("latin1");
      const m = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : null, text });
    };
    const timer = setTimeout(done, 10_000);
    socket.on("data", (d) => {
      chunks.push(d);
      // One answer is all this client waits for.
      if (/\r\n\r\n/.test(Buffer.concat(chunks).toString("latin1"))) done();
    });
    socket.on("error", done);
    socket.on("close", done);
    socket.write(raw, () => {
      if (how === "short") socket.end();
    });
  });
}
