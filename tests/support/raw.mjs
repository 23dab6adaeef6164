// Requests over a raw HTTP/1.1 connection to the Worker's loopback address,
// so nothing between the test and workerd tidies up odd headers or bodies.
import http from "node:http";

/**
 * Sends one request; resolves with status, headers, body bytes and how the
 * body ended ("complete" or "aborted"). `body` is written as given (with the
 * headers the caller chose: a Content-Length or Transfer-Encoding of its own).
 * `onResponse(res)` may pause the response to read it slowly.
 */
export function rawRequest(url, { method = "GET", path = "/", headers = {}, body, onResponse } = {}) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, path, method, headers }, (res) => {
      const chunks = [];
      let ended = "complete";
      res.on("data", (d) => chunks.push(d));
      res.on("aborted", () => (ended = "aborted"));
      res.on("error", () => (ended = "aborted"));
      res.on("close", () =>
        resolve({
          status: res.statusCode,
          headers: res.headers,
          body: Buffer.concat(chunks),
          ended: res.complete ? ended : "aborted",
        }),
      );
      onResponse?.(res);
    });
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}
