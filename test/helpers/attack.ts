import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { ADMIN, form } from "./portico.js";
import { createProcessDatabase, freePort, type Running, run, waitUntilUp } from "./process.js";

/**
 * Attacks on a spawned `portico serve` process (test/helpers/process.ts) and what they cost it:
 * requests whose bodies are generated while they are sent (never held whole by the test), and the
 * process's memory read from /proc.
 */

export const MB = 1024 * 1024;

/** Resident memory of a process, and its peak since it started, in bytes (Linux). */
export function memory(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

export interface Attack {
  /** Resolves with the answer's body, or `undefined` when the connection was cut before one. */
  answer: Promise<string | undefined>;
  /** Whether the answer has arrived. */
  answered(): boolean;
  /** Resolves once every chunk but the held-back end is written and drained, or the answer came. */
  written: Promise<void>;
  /** Sends the held-back end. */
  finish(): void;
  destroy(): void;
}

/**
 * Sends a POST whose body is `chunks` (generated, never held whole here), optionally keeping its
 * last byte back, optionally from another loopback address (`from`, e.g. `127.0.0.2`: all of
 * 127.0.0.0/8 is loopback on Linux). Stops writing as soon as the server answers.
 */
export function attack(
  url: string,
  headers: Record<string, string | number>,
  chunks: () => Iterable<Buffer | string>,
  options: { holdLastByte?: boolean; from?: string } = {},
): Attack {
  let done = false;
  let last: Buffer | undefined;
  const request = http.request(url, {
    method: "POST",
    headers,
    ...(options.from ? { localAddress: options.from } : {}),
  });
  const answer = new Promise<string | undefined>((resolve) => {
    request.on("response", (res) => {
      done = true;
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        text += d;
      });
      res.on("end", () => resolve(text));
      res.on("error", () => resolve(text));
    });
    // A connection cut before an answer; once one arrived, its own events settle the promise.
    const cut = () => {
      if (done) return;
      done = true;
      resolve(undefined);
    };
    request.on("error", cut);
    request.on("close", cut);
  });
  const written = (async () => {
    let pending: Buffer | undefined;
    for (const chunk of chunks()) {
      if (done) return;
      const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      if (pending && !request.write(pending)) {
        await Promise.race([new Promise((r) => request.once("drain", r)), answer]);
      }
      pending = buf;
    }
    if (done || !pending) return;
    if (options.holdLastByte) {
      last = pending.subarray(pending.length - 1);
      pending = pending.subarray(0, pending.length - 1);
    }
    if (!request.write(pending)) await Promise.race([new Promise((r) => request.once("drain", r)), answer]);
    if (!options.holdLastByte) request.end();
  })();
  return {
    answer,
    answered: () => done,
    written,
    finish: () => {
      if (!done) request.end(last);
    },
    destroy: () => request.destroy(),
  };
}

/**
 * Signs the administrator in from the loopback address `from`: tokens are bound to the address
 * that asked for them (`generateToken`'s default client).
 */
export async function tokenFrom(base: string, from: string): Promise<string> {
  const sent = attack(
    `${base}/generateToken`,
    { "content-type": "application/x-www-form-urlencoded" },
    () => [form({ f: "json", username: ADMIN.username, password: ADMIN.password }).toString()],
    { from },
  );
  const answer = JSON.parse((await sent.answer) as string) as { token?: string };
  sent.destroy();
  if (!answer.token) throw new Error(`no token for ${from}: ${JSON.stringify(answer)}`);
  return answer.token;
}

/** `count` chunks of `size` bytes of one letter. */
export function* filler(count: number, size = MB): Iterable<Buffer> {
  const chunk = Buffer.alloc(size, "a");
  for (let i = 0; i < count; i++) yield chunk;
}

export function* manyKeys(kind: "form" | "json", keys: number): Iterable<string> {
  const perChunk = 10_000;
  if (kind === "json") yield "{";
  for (let start = 0; start < keys; start += perChunk) {
    const part: string[] = [];
    for (let i = start; i < Math.min(keys, start + perChunk); i++) {
      part.push(kind === "form" ? `k${i}=1` : `"k${i}":1`);
    }
    yield (start === 0 ? "" : kind === "form" ? "&" : ",") + part.join(kind === "form" ? "&" : ",");
  }
  if (kind === "json") yield "}";
}

export const BOUNDARY = "----portico-limits";

/** A multipart body of fields and files (file contents generated), with its exact length. */
export function multipart(
  parts: (
    | { name: string; value: string }
    | { name: string; filename: string; head?: Buffer; bytes: number }
  )[],
): { length: number; chunks: () => Iterable<Buffer> } {
  const pieces: (Buffer | { head?: Buffer; bytes: number })[] = [];
  for (const part of parts) {
    if ("value" in part) {
      pieces.push(
        Buffer.from(
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}\r\n`,
        ),
      );
    } else {
      pieces.push(
        Buffer.from(
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\n` +
            "Content-Type: application/octet-stream\r\n\r\n",
        ),
      );
      pieces.push({ head: part.head, bytes: part.bytes });
      pieces.push(Buffer.from("\r\n"));
    }
  }
  pieces.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  const length = pieces.reduce((sum, p) => sum + (Buffer.isBuffer(p) ? p.length : p.bytes), 0);
  return {
    length,
    *chunks() {
      for (const piece of pieces) {
        if (Buffer.isBuffer(piece)) {
          yield piece;
          continue;
        }
        let left = piece.bytes;
        if (piece.head) {
          yield piece.head;
          left -= piece.head.length;
        }
        const full = Buffer.alloc(MB, "x");
        while (left > 0) {
          const n = Math.min(left, MB);
          yield n === MB ? full : full.subarray(0, n);
          left -= n;
        }
      }
    },
  };
}

export const multipartHeaders = (length?: number) => ({
  "content-type": `multipart/form-data; boundary=${BOUNDARY}`,
  ...(length !== undefined ? { "content-length": length } : {}),
});

/**
 * A `portico serve` process to attack: its own data directory (and PostgreSQL database on that
 * engine), the administrator signed in, and its memory at rest once started.
 */
export interface Target {
  node: Running;
  dataDir: string;
  /** The administrator's token. */
  token: string;
  /** Resident memory once started, before any attack. */
  baseline: number;
  /** `http://127.0.0.1:<port>`, where `/health` answers. */
  origin: string;
  /** Fails unless the process is alive and `/health` answers. */
  alive(): Promise<void>;
  /** Fails unless the process's peak memory grew less than `bound` over `baseline`. */
  expectPeakWithin(bound: number): void;
  stop(): Promise<void>;
}

/**
 * Starts a target named `name` with extra settings `env`; `prepare` may put files in its data
 * directory before it starts.
 */
export async function startTarget(
  name: string,
  env: Record<string, string> = {},
  prepare?: (dataDir: string) => void,
): Promise<Target> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `portico-${name}-`));
  prepare?.(dataDir);
  const database = await createProcessDatabase(`portico_${name}`);
  const node = run({
    PORTICO_PORT: String(await freePort()),
    PORTICO_DATA_DIR: dataDir,
    PORTICO_LOG_LEVEL: "warn",
    PORTICO_ADMIN_USERNAME: ADMIN.username,
    PORTICO_ADMIN_PASSWORD: ADMIN.password,
    ...(database ? { DATABASE_URL: database.url } : {}),
    ...env,
  });
  await waitUntilUp(node);
  const signedIn = (await (
    await fetch(`${node.base}/generateToken`, {
      method: "POST",
      body: form({ f: "json", username: ADMIN.username, password: ADMIN.password }),
    })
  ).json()) as { token: string };
  const pid = node.child.pid as number;
  const baseline = memory(pid).rss;
  const origin = node.base.replace("/sharing/rest", "");
  return {
    node,
    dataDir,
    token: signedIn.token,
    baseline,
    origin,
    async alive() {
      expect(node.child.exitCode).toBeNull();
      expect((await fetch(`${origin}/health`)).status).toBe(200);
    },
    expectPeakWithin(bound: number) {
      const { peak } = memory(pid);
      expect(
        peak - baseline,
        `peak ${Math.round(peak / MB)} MB, baseline ${Math.round(baseline / MB)} MB`,
      ).toBeLessThan(bound);
    },
    async stop() {
      if (node.child.exitCode === null) node.child.kill("SIGKILL");
      await node.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
      await database?.drop();
    },
  };
}
