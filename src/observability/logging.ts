import { randomUUID } from "node:crypto";
import fs from "node:fs";
import type { IncomingMessage } from "node:http";
import { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, LogController } from "fastify";
import pino, { type Bindings, type ChildLoggerOptions } from "pino";
import { redactUrl } from "./redact.js";

/**
 * Request ids on every line about a request. Fastify binds `reqId` to `request.log`, and the
 * access line names its request itself. Lines of background work (deliveries, syncs) carry none:
 * they belong to no request, even when a request woke them. (An async context that would put the
 * id on every line written while a request is served costs ~10 µs per request on Node 20, where
 * it hooks every promise: a tenth of a signed-in read, for lines no request path writes.)
 */

/** An incoming X-Request-Id is kept (a proxy's id then joins the logs of both) when it is sane. */
const INCOMING_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request id: the caller's `X-Request-Id` when it is a plain token, otherwise a random UUID,
 * unique across nodes (Fastify's default counter restarts at 1 in every process).
 */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers["x-request-id"];
  return typeof incoming === "string" && INCOMING_ID.test(incoming) ? incoming : randomUUID();
}

type Logger = FastifyBaseLogger;
type LogMethod = (...args: unknown[]) => void;

/**
 * `request.log`: pino's child bound to the request id, made when something is first logged
 * through it. Most requests log nothing of their own (the access line is written through the
 * server's logger with the id), and making a child costs about what a log line does.
 */
class RequestLogger implements FastifyBaseLogger {
  #made: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  get #child(): Logger {
    if (!this.#made) {
      // pino's child takes a shorter path without options.
      this.#made = this.parent.child(
        this.bindings,
        Object.keys(this.options).length > 0 ? this.options : undefined,
      );
    }
    return this.#made;
  }

  get level(): string {
    return this.#made?.level ?? this.options.level ?? this.parent.level;
  }

  set level(level: string) {
    this.#child.level = level;
  }

  fatal(...args: unknown[]): void {
    this.#write("fatal", args);
  }
  error(...args: unknown[]): void {
    this.#write("error", args);
  }
  warn(...args: unknown[]): void {
    this.#write("warn", args);
  }
  info(...args: unknown[]): void {
    this.#write("info", args);
  }
  debug(...args: unknown[]): void {
    this.#write("debug", args);
  }
  trace(...args: unknown[]): void {
    this.#write("trace", args);
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.#child.child(bindings, options);
  }

  #write(level: "fatal" | "error" | "warn" | "info" | "debug" | "trace", args: unknown[]): void {
    // A level that is off writes nothing, and needs no child to say so.
    if (!this.#made && !levelEnabled(this.level, level)) return;
    const child = this.#child;
    (child[level] as LogMethod).apply(child, args);
  }
}

const LEVEL_VALUES: Readonly<Record<string, number>> = pino.levels.values;

function levelEnabled(threshold: string, level: string): boolean {
  return (LEVEL_VALUES[level] ?? 0) >= (LEVEL_VALUES[threshold] ?? Number.POSITIVE_INFINITY);
}

/** Fastify's `childLoggerFactory`: `request.log`, bound to the request id. */
export function requestChildLogger(logger: Logger, bindings: Bindings, options: ChildLoggerOptions): Logger {
  return new RequestLogger(logger, bindings, options);
}

/**
 * The request as every log line shows it (the `req` serializer and the access line): method, URL
 * with the values of secret parameters redacted, and address; never headers or body, which carry
 * credentials.
 */
export function loggedRequest(req: FastifyRequest): { method: string; url: string; remoteAddress: string } {
  return { method: req.method, url: redactUrl(req.url), remoteAddress: req.ip };
}

/**
 * The access log: one line per answered request, written when the answer is complete, with the
 * request (method, URL with its secrets redacted, address), the status and the time taken, where
 * Fastify writes two (`incoming request` and `request completed`). Half the lines is half the
 * logging cost of a request, and the line that says how a request ended says what it was.
 *
 * The line of a request that succeeded is put together here, in pino's format (level, time, the
 * logger's bindings, then the fields), and handed to the logger's destination: pino's general path
 * (serializers, a merge of the fields, its string builder) costs ~2.5 µs a line where this costs
 * under 1 (measured with 300,000 lines, 4 per event-loop turn), and at `info`, the default, every
 * request writes one. Errored requests, rare, go through pino with the error serialized.
 */
export class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (this.isLogDisabled(request)) return;
    // Through the server's logger, naming the request: no child logger is made for the line.
    const log = request.server.log as pino.Logger;
    if (error) {
      log.error(
        { reqId: request.id, req: request, res: reply, responseTime: reply.elapsedTime, err: error },
        "request errored",
      );
      return;
    }
    // Fastify's logger when logging is off (`logger: false`, as tests run) has no isLevelEnabled:
    // calling it threw on every answered request, an exception each (~80 µs of a read, measured).
    if (typeof log.isLevelEnabled !== "function" || !log.isLevelEnabled("info")) return;
    const destination = (log as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym];
    const bindings = (log as unknown as Record<symbol, string>)[pino.symbols.chindingsSym];
    // The fields of `loggedRequest`, in its order. The address is undefined once the socket is
    // gone (a client that reset its connection): JSON.stringify leaves such a field out.
    const ip = request.ip as string | undefined;
    const address = ip === undefined ? "" : `,"remoteAddress":${jsonText(ip)}`;
    // The id (`requestId`: a sane X-Request-Id or a UUID) and the method (one of llhttp's, in
    // capitals) never need escaping; the URL and a forwarded address may.
    destination?.write(
      `{"level":30,"time":${nowText()}${bindings},"reqId":"${request.id}","req":{"method":"${request.method}","url":${jsonText(redactUrl(request.url))}${address}},"res":{"statusCode":${reply.statusCode}},"responseTime":${elapsedText(reply)},"msg":"request completed"}\n`,
    );
  }
}

/** Printable ASCII but `"` and `\`: a string of only these is its own JSON text between quotes. */
const PLAIN_JSON = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * A string as JSON text. Request ids, methods, most URLs and addresses need no escaping; tested so,
 * they are quoted as they are: `JSON.stringify` called from optimized code is a call into the
 * runtime (~2 µs of the line's ~7 in a profile of the read case at `info`, for its two calls).
 */
function jsonText(value: string): string {
  return PLAIN_JSON.test(value) ? `"${value}"` : JSON.stringify(value);
}

/** `Date.now()` as text, converted once per millisecond (many lines share one when busy). */
let lastNow = 0;
let lastNowText = "0";
function nowText(): string {
  const now = Date.now();
  if (now !== lastNow) {
    lastNow = now;
    lastNowText = String(now);
  }
  return lastNowText;
}

/**
 * The time taken in milliseconds, to the microsecond, as JSON text (JSON has no NaN: a reply never
 * started has none). Made of integers: writing a double's shortest digits is a slow call into the
 * runtime (~0.5 µs a line in a profile of the read case at `info`).
 */
function elapsedText(reply: FastifyReply): string {
  const ms = reply.elapsedTime;
  if (!Number.isFinite(ms)) return "null";
  const micros = Math.round(ms * 1000);
  const fraction = micros % 1000;
  const whole = (micros - fraction) / 1000;
  return `${whole}.${fraction < 10 ? "00" : fraction < 100 ? "0" : ""}${fraction}`;
}

/** Lines held while standard output does not take them (a full pipe): beyond this they are counted and dropped. */
const MAX_HELD_BYTES = 64 * 1024 * 1024;

/**
 * Lines are written together once this many bytes are held, or once the first of them has waited
 * `BATCH_MS`. Written at the end of every turn of the event loop instead, the writes cost about a
 * tenth of a busy server's CPU (a profile of the read case as `npm start` runs it, 32 connections:
 * a few answers per turn, a write each turn); a line that waits 10 ms is still in the log at once
 * for whoever reads it.
 */
const BATCH_BYTES = 64 * 1024;
const BATCH_MS = 10;

/**
 * Standard output, written asynchronously and in batches: a request never waits for its log line
 * to reach the pipe or file behind stdout, and the lines logged within `BATCH_MS` (or up to
 * `BATCH_BYTES`) go out in one write, or, while a write is under way, in the next one.
 *
 * pino's asynchronous destination (sonic-boom) writes each line at once when no write is under
 * way: at a few thousand requests per second that is one write, through libuv's thread pool, per
 * line. Measured with one line per turn (a small loop beside this file's history): ~6 µs of CPU per
 * line with sonic-boom, ~2.5 µs gathered per turn.
 *
 * When standard output is a regular file (`npm start > portico.log`), the batch is written
 * synchronously instead: a write to a file lands in the page cache and waits
 * for no reader, and handing it to the thread pool and taking its completion back costs more than
 * the write itself (~1 µs a line of the ~4 µs of the whole asynchronous path, same loop; pino's own
 * default destination writes synchronously too). Pipes, terminals and sockets, which can wait on
 * their reader, keep the asynchronous write.
 *
 * What is still held when the process exits (`process.exit` after a signal, the end of the event
 * loop, an uncaught error) is written synchronously then; only a process killed outright (SIGKILL,
 * out of memory) loses its last lines (at most `BATCH_MS` of them). A pipe that stops taking lines
 * (`EAGAIN`) is retried; one that is gone (`EPIPE`) drops them; more than 64 MB waiting are
 * dropped and counted, and the count is written once the output takes lines again.
 */
export class BatchedOutput implements pino.DestinationStream {
  #held: string[] = [];
  #heldBytes = 0;
  #dropped = 0;
  #writing: Buffer | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Whether batches are written synchronously: `fd` is a regular file (see above). */
  readonly #toFile: boolean;

  constructor(
    private readonly fd: number,
    private readonly maxHeldBytes = MAX_HELD_BYTES,
  ) {
    this.#toFile = isRegularFile(fd);
    process.on("exit", () => this.flushSync());
  }

  write(line: string): void {
    if (this.#heldBytes >= this.maxHeldBytes) {
      this.#dropped++;
      return;
    }
    this.#held.push(line);
    this.#heldBytes += line.length;
    if (this.#heldBytes >= BATCH_BYTES) this.#flush();
    else this.#schedule();
  }

  #schedule(): void {
    if (this.#timer || this.#writing) return;
    this.#timer = setTimeout(() => this.#flush(), BATCH_MS);
    // The exit handler writes what is still held: the timer need not keep the process alive.
    this.#timer.unref();
  }

  /** Writes what is held, unless a write is under way (its end schedules the next). */
  #flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#writing) return;
    const batch = this.#take();
    if (batch === undefined) return;
    if (this.#toFile) this.#writeNow(batch);
    else this.#send(Buffer.from(batch));
  }

  /**
   * Writes a batch to a regular file at once, as text: Node encodes it into the write without a
   * Buffer of ours (an allocation and a copy per batch). What the file does not take goes the
   * asynchronous way.
   */
  #writeNow(batch: string): void {
    let written = 0;
    try {
      written = fs.writeSync(this.fd, batch);
      if (written === Buffer.byteLength(batch)) return;
    } catch (err) {
      // A full disk or a failing one: the lines are lost, as with an asynchronous write.
      if ((err as NodeJS.ErrnoException).code !== "EAGAIN") return;
    }
    this.#send(Buffer.from(batch).subarray(written));
  }

  #take(): string | undefined {
    if (this.#dropped > 0) {
      this.#held.push(
        `${JSON.stringify({ level: 40, time: Date.now(), msg: `${this.#dropped} log lines dropped: standard output did not take them` })}\n`,
      );
      this.#dropped = 0;
    }
    if (this.#held.length === 0) return undefined;
    const text = this.#held.length === 1 ? (this.#held[0] as string) : this.#held.join("");
    this.#held = [];
    this.#heldBytes = 0;
    return text;
  }

  #send(data: Buffer): void {
    this.#writing = data;
    fs.write(this.fd, data, 0, data.length, null, (err, written) => {
      if (err) {
        if ((err as NodeJS.ErrnoException).code === "EAGAIN") {
          setTimeout(() => this.#send(data), 10).unref();
          return;
        }
        // EPIPE, EBADF: nobody reads standard output any more; nothing to tell.
        this.#writing = undefined;
        this.#held = [];
        this.#heldBytes = 0;
        return;
      }
      if (written < data.length) {
        this.#send(data.subarray(written));
        return;
      }
      this.#writing = undefined;
      if (this.#heldBytes >= BATCH_BYTES) this.#flush();
      else if (this.#held.length > 0 || this.#dropped > 0) this.#schedule();
    });
  }

  /**
   * Writes what is held, synchronously (at exit). A batch whose write is under way is left to it:
   * written twice is no better than lost, and the last lines of a shutdown are logged long before.
   */
  flushSync(): void {
    const text = this.#take();
    if (text === undefined) return;
    const batch = Buffer.from(text);
    let offset = 0;
    for (let tries = 0; offset < batch.length && tries < 1000; tries++) {
      try {
        offset += fs.writeSync(this.fd, batch, offset);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EAGAIN") return;
      }
    }
  }
}

function isRegularFile(fd: number): boolean {
  try {
    return fs.fstatSync(fd).isFile();
  } catch {
    return false;
  }
}

let stdout: BatchedOutput | undefined;

/**
 * The server's log destination: standard output, see `BatchedOutput`; one for the process, so
 * that servers sharing it keep their lines in order and register one exit flush.
 */
export function asyncStdout(): pino.DestinationStream {
  stdout ??= new BatchedOutput(1);
  return stdout;
}
