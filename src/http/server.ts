import fs from "node:fs";
import https from "node:https";
import path from "node:path";
import type { Duplex } from "node:stream";
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import ipaddr from "ipaddr.js";
import type { Config } from "../config.js";
import { isConnectionLoss, isPoolWaitTimeout, isTransientConflict } from "../db/availability.js";
import { pendingMigrations } from "../db/migrate.js";
import { errors, PorticoError } from "../errors.js";
import {
  AccessLog,
  asyncStdout,
  loggedRequest,
  requestChildLogger,
  requestId,
} from "../observability/logging.js";
import type { Metrics } from "../observability/metrics.js";
import type { Organization } from "../portal/portal.service.js";
import type { Services } from "../services.js";
import { announcesNoBody, parseQueryString, registerBodyParsers } from "./body.js";
import { registerConsole } from "./console.js";
import { handleCors } from "./cors.js";
import { mergedParams, registerRoutes } from "./pipeline.js";
import { PreAuthBudget } from "./preauth-budget.js";
import { errorBody, formatForError, hardenAnswer, render } from "./render.js";
import { allRoutes } from "./routes/index.js";

export interface ServerOptions {
  config: Pick<
    Config,
    | "contextPath"
    | "trustProxy"
    | "logLevel"
    | "metricsAllow"
    | "dataDir"
    | "requestTimeoutSeconds"
    | "headersTimeoutSeconds"
    | "preAuthBodyBudgetMB"
    | "preAuthUploadBudgetMB"
  >;
  /** The public base URL (see `Config.publicUrl`). */
  publicUrl: () => string;
  services: Services;
  /** A pino logger configuration or instance; tests pass `false`. */
  logger?: boolean | object;
  /** This node's metrics; `/metrics` serves them and every answered request is counted. */
  metrics: Metrics;
}

export async function buildServer(options: ServerOptions): Promise<FastifyInstance> {
  const { config, services } = options;
  // Uploads go beside the data (the same disk, not a /tmp that may be memory), one file per
  // upload, removed when its request is answered.
  const uploadDir = path.join(config.dataDir, "tmp");
  await fs.promises.mkdir(uploadDir, { recursive: true });
  await sweepUploads(uploadDir, services.db.engine === "sqlite" ? 0 : config.requestTimeoutSeconds * 1000);
  const loggerOptions = typeof options.logger === "object" ? options.logger : {};
  const app = Fastify({
    logger:
      options.logger === false
        ? false
        : {
            level: config.logLevel,
            // Credentials travel in headers, query strings and bodies; none of them is logged: a
            // request is logged as these three fields (every line that names one, whatever it
            // passes as `req`), never its headers or body, and the URL without secret values.
            serializers: {
              req: loggedRequest,
            },
            ...("stream" in loggerOptions ? {} : { stream: asyncStdout() }),
            ...loggerOptions,
          },
    logController: new AccessLog(),
    childLoggerFactory: (logger, bindings, opts) => requestChildLogger(logger, bindings, opts),
    trustProxy: config.trustProxy === false ? false : config.trustProxy,
    routerOptions: {
      caseSensitive: false,
      ignoreTrailingSlash: true,
      ignoreDuplicateSlashes: true,
      // Path segments carry usernames of up to 128 characters and ids; the router's default of
      // 100 would answer 414 for a valid long username.
      maxParamLength: 1024,
      // Counted before it is parsed: a query string of more than MAX_PARAMETERS is refused.
      querystringParser: parseQueryString,
    },
    // Errors the router raises before any route runs (a path that is not valid percent-encoded
    // UTF-8, a path parameter too long) get the envelope like every other error.
    frameworkErrors: (error, request, reply) =>
      sendError(
        request,
        reply as unknown as FastifyReply,
        // Fastify's message quotes the whole URL, token included: say what is wrong instead.
        errors.invalidUrl(
          error.code === "FST_ERR_MAX_PARAM_LENGTH"
            ? "A path segment is longer than 1024 characters."
            : "The path is not valid percent-encoded UTF-8.",
        ),
      ),
    // Each route sets its own body limit (`RouteDef.bodyLimit`); this one is for the others.
    bodyLimit: 64 * 1024,
    // A client must send its request within these times, or its connection is cut: headers and
    // body trickled a byte at a time (slow loris) cannot hold a connection. The idle timeout also
    // ends connections that stop reading an answer.
    requestTimeout: config.requestTimeoutSeconds * 1000,
    connectionTimeout: config.requestTimeoutSeconds * 1000,
    // What the Keep-Alive header promises clients must be shorter than the idle timeout above:
    // a client that reuses a connection the server has just cut sees "other side closed" (seen
    // with Esri's client against a 2 s request timeout, where Node's default promised 5 s).
    keepAliveTimeout: Math.min(5000, (config.requestTimeoutSeconds * 1000) / 2),
    http: nodeServerOptions(config),
    // requestId() reads X-Request-Id itself, keeping only sane values.
    requestIdHeader: false,
    genReqId: requestId,
  });

  app.decorateRequest("errorCode", undefined);
  // Hooks that do not wait for anything take Fastify's callback rather than being async: every
  // request runs them, and a promise each is work.
  app.addHook("onResponse", (request, reply, done) => {
    const name = request.routeOptions.config?.name ?? "not_found";
    options.metrics.request(name, request.method, request.errorCode, reply.elapsedTime / 1000);
    done();
  });

  registerBodyParsers(app);

  app.decorateRequest("org", undefined as never);
  const probes = new Set([
    "/metrics",
    ...["", config.contextPath].flatMap((prefix) => [`${prefix}/health`, `${prefix}/ready`]),
  ]);
  // One hook for what every request needs first (one hook is cheaper than three):
  // - the request id goes back to the caller, who can then find the request's lines in the logs;
  // - every answer (routes, errors, probes, preflights) gets the hardening headers, set here
  //   rather than in an onSend hook run for every answer; answers Fastify makes without the
  //   hooks (an unparsable path) get them from `render`;
  // - a multipart body without a boundary cannot be parsed, and the parser's own error for it
  //   carries no status code: it is refused here as the client error it is;
  // - the organization: allowedOrigins decides CORS (preflights included) and allSSL may refuse
  //   the request before anything else runs. Read from its cache without a promise when it is
  //   there (almost always); probes of load balancers and orchestrators, and metrics scrapes,
  //   answer whatever its settings say (allSSL, CORS) and even when the database is down.
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    hardenAnswer(reply);
    const type = request.headers["content-type"];
    if (type && /^multipart\/form-data/i.test(type) && !/;\s*boundary=/i.test(type)) {
      done(errors.badBody("A multipart/form-data body needs a boundary in its Content-Type header."));
      return;
    }
    if (probes.has(pathOf(request.url))) {
      done();
      return;
    }
    const org = services.portal.cached();
    if (org !== undefined) {
      withOrganization(request, reply, org, done);
      return;
    }
    services.portal
      .get()
      .then((loaded) => withOrganization(request, reply, loaded, done))
      .catch(done);
  });
  /** Sets the request's organization and applies its CORS and allSSL; a preflight is answered here. */
  function withOrganization(
    request: FastifyRequest,
    reply: FastifyReply,
    org: Organization,
    done: (err?: Error) => void,
  ): void {
    request.org = org;
    // A preflight answered (or refused) here ends the request: `done` is not called.
    if (handleCors(request, reply, org.settings.allowedOrigins as string[])) return;
    if (org.settings.allSSL === true && request.protocol !== "https") done(errors.sslRequired());
    else done();
  }

  app.setErrorHandler((error: FastifyError | PorticoError, request, reply) => {
    let mapped: PorticoError;
    if (error instanceof PorticoError) {
      mapped = error;
    } else if (error.code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      mapped = errors.bodyTooLarge(request.routeOptions.bodyLimit ?? 64 * 1024);
    } else if (typeof error.statusCode === "number" && error.statusCode >= 400 && error.statusCode < 500) {
      // Fastify's own client errors: unparsable body, unsupported media type, body too large.
      mapped = errors.badBody(error.message);
    } else if (isPoolWaitTimeout(error)) {
      mapped = errors.databaseBusy();
    } else if (isTransientConflict(error)) {
      mapped = errors.conflict(
        "The change met another made at the same moment and was undone: nothing was written. Send it again.",
      );
    } else if (isConnectionLoss(error)) {
      // Logged once per outage where the connection is lost (app.ts), not once per request.
      mapped = errors.databaseUnavailable();
    } else {
      request.log.error({ err: error }, "unhandled error");
      mapped = errors.internal();
    }
    return sendError(request, reply, mapped);
  });

  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, errors.invalidUrl(`No resource or operation at ${request.url.split("?")[0]}.`)),
  );

  registerProbes(app, services, config.contextPath);
  registerMetrics(app, options.metrics, config.metricsAllow);
  // The administration console's static pages (src/http/console.ts), outside the ArcGIS API.
  registerConsole(app, { services, contextPath: config.contextPath, publicUrl: options.publicUrl });
  registerRoutes(app, allRoutes, {
    services,
    contextPath: config.contextPath,
    publicUrl: options.publicUrl,
    uploadDir,
    preAuthBudget: new PreAuthBudget(config.preAuthBodyBudgetMB * 1024 * 1024),
    preAuthUploadBudget: new PreAuthBudget(config.preAuthUploadBudgetMB * 1024 * 1024),
  });
  return app;
}

/** A request URL without its query string. */
function pathOf(url: string): string {
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

/** Options of Node's HTTP server that Fastify does not set itself, for both listeners. */
function nodeServerOptions(config: Pick<Config, "headersTimeoutSeconds">) {
  return {
    headersTimeout: config.headersTimeoutSeconds * 1000,
    // How often Node checks the request and headers timeouts (30 s by default, which would let a
    // connection outlive a short timeout by that much).
    connectionsCheckingInterval: 1000,
  };
}

/**
 * A second listener, for HTTPS, that hands its requests to the same application: the same router,
 * hooks, body limits and error handling, and `request.protocol` is "https" there (TLS sockets are
 * `encrypted`). Its connections have the timeouts of the HTTP listener's, and `app.close()` stops
 * both: from the moment it is called new requests on either get 503, and it returns once the
 * connections of both have ended. Call before the application is ready (hooks cannot be added
 * after), and listen on the returned server once it is (`await app.ready()`).
 */
export function addHttpsListener(
  app: FastifyInstance,
  tls: { cert: string; key: string },
  config: Pick<Config, "headersTimeoutSeconds">,
): https.Server {
  const plain = app.server;
  const server = https.createServer(
    {
      cert: tls.cert,
      key: tls.key,
      ...nodeServerOptions(config),
      requestTimeout: plain.requestTimeout,
      keepAliveTimeout: plain.keepAliveTimeout,
    },
    app.routing,
  );
  server.setTimeout(plain.timeout);
  // Fastify answers malformed requests (400, 408, 431) from its clientError handler, bound to the
  // application; the same handler answers them here.
  for (const listener of plain.listeners("clientError")) {
    server.on("clientError", listener as (err: Error, socket: Duplex) => void);
  }
  let closed: Promise<void> = Promise.resolve();
  // preClose runs once the application refuses new requests, before the HTTP listener is closed:
  // both stop accepting together, and onClose (after the HTTP listener has drained) waits for this
  // one's connections too.
  app.addHook("preClose", (done) => {
    if (server.listening) closed = new Promise((resolve) => server.close(() => resolve()));
    done();
  });
  app.addHook("onClose", async () => closed);
  return server;
}

/**
 * Removes the temporary files of uploads that a process which died (crash, kill -9) left behind.
 * On SQLite this process holds the data directory's lock, so every such file is an orphan. On
 * PostgreSQL nodes may share a data directory, so only files untouched for longer than
 * `minAgeMs` (the request timeout: no request is still sending them) are removed.
 */
export async function sweepUploads(dir: string, minAgeMs: number): Promise<number> {
  const before = Date.now() - minAgeMs;
  let removed = 0;
  for (const name of await fs.promises.readdir(dir)) {
    if (!name.startsWith("upload-")) continue;
    const file = path.join(dir, name);
    const stat = await fs.promises.stat(file).catch(() => undefined);
    if (!stat?.isFile() || (minAgeMs > 0 && stat.mtimeMs > before)) continue;
    await fs.promises.rm(file, { force: true });
    removed++;
  }
  return removed;
}

/**
 * Operational probes, outside the ArcGIS API (plain HTTP status codes, as load balancers expect):
 * `/health` says the process serves requests; `/ready` that it can do its work: the database
 * answers and has every migration this code needs. Both also answer under the context path.
 */
function registerProbes(app: FastifyInstance, services: Services, contextPath: string) {
  for (const prefix of contextPath ? ["", contextPath] : [""]) {
    app.get(`${prefix}/health`, { config: { name: "health" } }, async (_request, reply) =>
      reply.type("application/json").send({ status: "ok" }),
    );
    app.get(`${prefix}/ready`, { config: { name: "ready" } }, async (_request, reply) => {
      const checks = await readiness(services);
      const ready = Object.values(checks).every((c) => c.ok);
      return reply
        .status(ready ? 200 : 503)
        .type("application/json")
        .send({ status: ready ? "ready" : "not ready", checks });
    });
  }
}

/**
 * Prometheus metrics at `/metrics` (root only: scrapers address nodes directly, not through the
 * context path a proxy adds). Counts and queue depths say much about an organization, so only
 * the addresses of `PORTICO_METRICS_ALLOW` (loopback by default) may read them.
 */
function registerMetrics(app: FastifyInstance, metrics: Metrics, allow: readonly string[]) {
  const allowed = allow.map((entry) => ipaddr.parseCIDR(entry));
  const permitted = (address: string) => {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = ipaddr.process(address);
    } catch {
      return false;
    }
    return allowed.some(([net, bits]) => net.kind() === ip.kind() && ip.match(net, bits));
  };
  app.get("/metrics", { config: { name: "metrics" } }, async (request, reply) => {
    if (!permitted(request.ip)) {
      return reply
        .status(403)
        .type("text/plain; charset=utf-8")
        .send(`metrics are not served to ${request.ip}; PORTICO_METRICS_ALLOW lists who may read them\n`);
    }
    const { contentType, body } = await metrics.text();
    return reply.type(contentType).send(body);
  });
}

async function readiness(services: Services): Promise<Record<string, { ok: boolean; detail?: string }>> {
  try {
    const pending = await pendingMigrations(services.db);
    return {
      database: { ok: true },
      migrations:
        pending.length === 0 ? { ok: true } : { ok: false, detail: `not applied: ${pending.join(", ")}` },
    };
  } catch (err) {
    // Anyone may ask /ready: say why by code (ECONNREFUSED, 57P03), not with socket messages,
    // which name the database server's address.
    const code = (err as { code?: unknown }).code;
    return {
      database: {
        ok: false,
        detail: `unreachable: ${typeof code === "string" ? code : (err as Error).message}`,
      },
      migrations: { ok: false, detail: "unknown while the database is unreachable" },
    };
  }
}

/**
 * Every error leaves the server here: the ArcGIS envelope with HTTP 200, in the format the
 * request asked for, its code remembered for the request metrics.
 */
function sendError(request: FastifyRequest, reply: FastifyReply, error: PorticoError): FastifyReply {
  request.errorCode = error.code;
  // A request without a body may be answered before Node marks it complete (the not-found handler
  // and the allSSL refusal answer within its request event): there is nothing to read past, and
  // the connection keeps its Connection and Keep-Alive headers.
  if (!request.raw.complete && !announcesNoBody(request)) {
    // Fastify asks to close after a body it could not parse; the body is read past instead.
    reply.removeHeader("connection");
    discardRest(request);
  }
  reply.status(200);
  return render(reply, formatForError(safeParams(request).f), errorBody(error), "error");
}

/** How long, and how many bytes of, a refused body is read past before its connection is cut. */
const LINGER_MS = 2000;
const LINGER_BYTES = 128 * 1024 * 1024;

/**
 * A body refused before or while it was read (too large, multipart where no file is taken, too
 * many parameters) is read past and dropped, not parsed or kept, for a little while: closing the
 * connection at once would make the client's TCP stack drop the answer (a reset discards what the
 * client has not read yet). A client that goes on sending past that is cut off.
 */
function discardRest(request: FastifyRequest) {
  const raw = request.raw;
  let bytes = 0;
  // Once the body is complete the connection may carry the client's next request: leave it.
  const cut = () => {
    if (!raw.complete) raw.socket?.destroy();
  };
  const timer = setTimeout(cut, LINGER_MS);
  timer.unref();
  raw.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > LINGER_BYTES) cut();
  });
  raw.on("end", () => clearTimeout(timer));
  // Nothing reads what a refused body was piped into (a parameter counter, a multipart reader):
  // left piped, its back-pressure would stop the reading here.
  raw.unpipe();
  raw.resume();
}

function safeParams(request: FastifyRequest): Record<string, string> {
  try {
    return mergedParams(request);
  } catch {
    return {};
  }
}
