import http from "node:http";
import type { AddressInfo } from "node:net";

/** One request a receiver got, with its raw body as sent. */
export interface Received {
  at: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A real HTTP receiver on loopback (port 0) for webhook deliveries. `respond` decides each answer;
 * by default 200. Bodies are kept raw, as signatures are computed over the bytes sent.
 */
export interface Receiver {
  url: string;
  /** Requests answered, in the order of their answers. */
  received: Received[];
  /** Requests as they arrive, answered yet or not (a delayed answer is still pending). */
  arrived: Received[];
  /** Payload requests only: the URL check at creation sends one with no events. */
  deliveries(): Received[];
  respond: (req: Received) => {
    status: number;
    headers?: Record<string, string>;
    body?: string;
    delayMs?: number;
  };
  /** Resolves once `predicate` holds for what was received, or rejects after `timeoutMs`. */
  waitFor(predicate: (received: Received[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const arrived: Received[] = [];
  const waiters = new Set<() => void>();
  const receiver: Receiver = {
    url: "",
    received,
    arrived,
    deliveries: () => received.filter((r) => (JSON.parse(r.body).events ?? []).length > 0),
    respond: () => ({ status: 200, body: "ok" }),
    waitFor(predicate, timeoutMs = 10_000) {
      if (predicate(received)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(received)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(`receiver: condition not met within ${timeoutMs} ms (${received.length} received)`),
          );
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const entry: Received = {
        at: Date.now(),
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      arrived.push(entry);
      for (const w of [...waiters]) w();
      const answer = receiver.respond(entry);
      const send = () => {
        received.push(entry);
        res.writeHead(answer.status, answer.headers ?? {});
        res.end(answer.body ?? "");
        for (const w of [...waiters]) w();
      };
      if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return receiver;
}
