import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";

/**
 * Request ids on every log line. Fastify binds `reqId` to `request.log`; lines written through
 * the server's root logger while a request is being served (a domain service reporting an error
 * through a callback, say) get it from this async context, by the logger's mixin below.
 */
export const requestContext = new AsyncLocalStorage<{ reqId: string }>();

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

/**
 * The per-request loggers Fastify creates (`request.log`), which carry `reqId` in their bindings.
 * Remembered here so that the mixin, which runs for every line, need not parse a logger's
 * bindings to know.
 */
const requestLoggers = new WeakSet<object>();

/** Fastify's `childLoggerFactory`: its default child, remembered as bound to a request. */
export function requestChildLogger<L extends { child(bindings: object, options?: object): L }>(
  logger: L,
  bindings: object,
  options: object,
): L {
  const child = logger.child(bindings, options);
  requestLoggers.add(child);
  return child;
}

/** Pino mixin: adds the current request's id to lines whose logger does not carry it already. */
export function requestIdMixin(
  _merge: object,
  _level: number,
  logger?: { bindings(): Record<string, unknown> },
): Record<string, string> {
  const store = requestContext.getStore();
  if (!store) return {};
  // `request.log` (the common case) is known without parsing its bindings; another logger used
  // while serving (the root logger, a child of its own) is asked.
  if (logger && (requestLoggers.has(logger) || "reqId" in logger.bindings())) return {};
  return { reqId: store.reqId };
}
