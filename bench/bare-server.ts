/**
 * The baseline: the cheapest server Node can be, answering every request with one constant JSON
 * body. It runs as its own process, like portico, so each is measured with the load generator on
 * another event loop. Settings come from the environment: BENCH_PORT, and BENCH_BODY_FILE holding
 * the body (the real `portals/self` answer, so both send the same bytes).
 */
import fs from "node:fs";
import http from "node:http";

const port = Number(process.env.BENCH_PORT);
const bodyFile = process.env.BENCH_BODY_FILE;
if (!Number.isInteger(port) || port <= 0 || !bodyFile) {
  process.stderr.write("bare-server: set BENCH_PORT and BENCH_BODY_FILE\n");
  process.exit(2);
}
const body = fs.readFileSync(bodyFile);
// Portico sends these too; matching them keeps the bytes on the wire comparable.
const headers = {
  "content-type": "application/json; charset=utf-8",
  "content-length": String(body.length),
  vary: "Origin",
};

const server = http.createServer((req, res) => {
  // Drain any request body so keep-alive connections stay usable, then answer.
  req.resume();
  res.writeHead(200, headers);
  res.end(body);
});
server.keepAliveTimeout = 72_000;
server.listen(port, "127.0.0.1");
process.on("SIGTERM", () => server.close(() => process.exit(0)));
