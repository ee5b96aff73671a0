import { randomUUID } from "node:crypto";
import fs from "node:fs";
import type { IncomingMessage } from "node:http";
import { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, LogController } from "fastify";
import pino, { type Bindings, type ChildLoggerOptions } from "pino";

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
 * The access log: one line per answered request, written when the answer is complete, with the
 * request (method, URL with its secrets redacted, address), the status and the time taken, where
 * Fastify writes two (`incoming request` and `request completed`). Half the lines is half the
 * logging cost of a request, and the line that says how a request ended says what it was.
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
    const log = request.server.log;
    const line = { reqId: request.id, req: request, res: reply, responseTime: reply.elapsedTime };
    if (error) log.error({ ...line, err: error }, "request errored");
    else log.info(line, "request completed");
  }
}

/** Lines held while standard output does not take them (a full pipe): beyond this they are counted and dropped. */
const MAX_HELD_BYTES = 64 * 1024 * 1024;

/**
 * Standard output, written asynchronously and in batches: a request never waits for its log line
 * to reach the pipe or file behind stdout, and the lines logged during one turn of the event loop
 * (a busy server answers several requests per turn) go out in one write at its end, or, while a
 * write is under way, in the next one. A quiet server's line is written in the turn that logged it.
 *
 * pino's asynchronous destination (sonic-boom) writes each line at once when no write is under
 * way: at a few thousand requests per second that is one write, through libuv's thread pool, per
 * line. Measured with one line per turn (a small loop beside this file's history): ~6 µs of CPU per
 * line with sonic-boom, ~2.5 µs gathered per turn.
 *
 * What is still held when the process exits (`process.exit` after a signal, the end of the event
 * loop, an uncaught error) is written synchronously then; only a process killed outright (SIGKILL,
 * out of memory) loses its last lines. A pipe that stops taking lines (`EAGAIN`) is retried; one
 * that is gone (`EPIPE`) drops them; more than 64 MB waiting are dropped and counted, and the count
 * is written once the output takes lines again.
 */
export class BatchedOutput implements pino.DestinationStream {
  #held: string[] = [];
  #heldBytes = 0;
  #dropped = 0;
  #writing: Buffer | undefined;
  #scheduled = false;

  constructor(
    private readonly fd: number,
    private readonly maxHeldBytes = MAX_HELD_BYTES,
  ) {
    process.on("exit", () => this.flushSync());
  }

  write(line: string): void {
    if (this.#heldBytes >= this.maxHeldBytes) {
      this.#dropped++;
      return;
    }
    this.#held.push(line);
    this.#heldBytes += line.length;
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#writing) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      const batch = this.#take();
      if (batch) this.#send(batch);
    });
  }

  #take(): Buffer | undefined {
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
    return Buffer.from(text);
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
      if (this.#held.length > 0 || this.#dropped > 0) this.#schedule();
    });
  }

  /**
   * Writes what is held, synchronously (at exit). A batch whose write is under way is left to it:
   * written twice is no better than lost, and the last lines of a shutdown are logged long before.
   */
  flushSync(): void {
    const batch = this.#take();
    if (!batch) return;
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

let stdout: BatchedOutput | undefined;

/**
 * The server's log destination: standard output, see `BatchedOutput`; one for the process, so
 * that servers sharing it keep their lines in order and register one exit flush.
 */
export function asyncStdout(): pino.DestinationStream {
  stdout ??= new BatchedOutput(1);
  return stdout;
}
