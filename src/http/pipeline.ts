import type { IncomingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Privilege } from "../auth/privileges.js";
import { errors, PorticoError } from "../errors.js";
import { JsonAnswer } from "../json-answer.js";
import type { Organization } from "../portal/portal.service.js";
import type { Services } from "../services.js";
import {
  MAX_JSON_DEPTH,
  NUL_REASON,
  nestsDeeper,
  type ParamSpecs,
  type ParamValues,
  parseParams,
  withDeclaredNames,
} from "../validation/params.js";
import { announcesNoBody, checkQuery, MAX_PARAMETERS } from "./body.js";
import { Directory } from "./directory/directory.js";
import {
  type FileLimit,
  multipartLimit,
  readMultipart,
  removeUploads,
  type UploadedFile,
} from "./multipart.js";
import { BodyPace, meteredBody, type PreAuthBudget, type PreAuthShare, senderOf } from "./preauth-budget.js";
import {
  type ExtraFormat,
  errorBody,
  type Format,
  parseFormat,
  RawBody,
  render,
  WebAnswer,
} from "./render.js";

export type { UploadedFile } from "./multipart.js";

/**
 * Body limit of an operation that declares none: every parameter of such operations (names,
 * descriptions of up to 64,000 characters, percent-encoded) fits in it.
 */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;

/**
 * One request pipeline for every endpoint. A route is data: where it lives, who may call it, the
 * parameters it takes; the pipeline does the rest in the same order everywhere:
 *   merge query and form parameters -> choose the format -> authenticate -> check the privilege
 *   -> parse and validate parameters -> call the service -> render.
 */
/** Who may call an operation (`RouteDef.auth`). */
export type AuthMode = "none" | "optional" | "required";

/** Names of the `:params` of one path template, e.g. `"itemId" | "layerId"`. */
type ParamNames<P extends string> = P extends `${string}:${infer Rest}`
  ? Rest extends `${infer Name}/${infer Tail}`
    ? Name | ParamNames<Tail>
    : Rest
  : never;

/** The names every member of a union of path templates has (`never` when some member has none). */
type NamesInEvery<P extends string, N extends string> = {
  [K in N]: (P extends unknown ? (K extends ParamNames<P> ? never : K) : never) extends never ? K : never;
}[N];

/**
 * The path parameters of a route, typed from its template(s): a name in every template is a
 * string; a name in only some of them (an operation answered with and without a folder) may be
 * absent.
 */
export type PathParams<P extends string> = { [K in NamesInEvery<P, ParamNames<P>>]: string } & {
  [K in Exclude<ParamNames<P>, NamesInEvery<P, ParamNames<P>>>]?: string;
};

/** The caller a handler sees: authentication already refused anonymous callers of `required` routes. */
export type CallerOf<A extends AuthMode> = A extends "required" ? Caller : Caller | null;

export interface RouteDef<
  S extends ParamSpecs = ParamSpecs,
  P extends string = string,
  A extends AuthMode = AuthMode,
> {
  /** Stable name used in logs and metrics, e.g. `portal.update`. */
  name: string;
  methods: readonly ("GET" | "POST")[];
  /**
   * Path below the API root, with `:params`, e.g. `/portals/:portalId/update`; several when the
   * public API answers the same operation at more than one address (with and without a folder).
   */
  path: P | readonly P[];
  /**
   * `sharing` is `/sharing/rest`, `portaladmin` is `/portaladmin`, `server` is `/rest` (the hosted
   * services, where ArcGIS Server would answer).
   */
  root?: "sharing" | "portaladmin" | "server";
  /**
   * `none`: credentials are not read (info, generateToken). `optional`: anonymous allowed, a token
   * that is sent must be valid. `required`: anonymous callers get 499.
   */
  auth: A;
  /** Privilege every caller needs; services check finer rules (self or administrator, ...). */
  privilege?: Privilege;
  /**
   * A privilege check that depends on which parameters were sent; runs before validation, so a
   * caller without the privilege learns nothing from validation errors.
   */
  authorize?(caller: CallerOf<A>, raw: Readonly<Record<string, string>>): void;
  params: S;
  /**
   * Rules across parameters (one of two required, a value another one forbids), checked once each
   * parameter is valid and before the handler runs; throws the error that names the parameter.
   */
  check?(params: ParamValues<S>): void;
  /**
   * Largest body in bytes (`DEFAULT_BODY_LIMIT` when absent): the whole body of a form or JSON
   * request, the fields of a multipart one. Larger bodies are refused while they arrive.
   */
  bodyLimit?: number;
  /**
   * The file fields the operation takes, each with its size cap. Only operations that declare
   * files accept multipart/form-data; file parts of other fields are read past and dropped.
   */
  files?: Readonly<Record<string, FileLimit>>;
  /**
   * For an operation whose callers carry no token (`auth: "none"`) yet may send large bodies: checks
   * the sender that the request's headers name, and throws to refuse a body larger than
   * `DEFAULT_BODY_LIMIT` before it is read. A body it lets through still draws from the budget of
   * bodies of unknown callers (`preauth-budget.ts`), counted for the sender it names, which may
   * hold the whole budget (not only an address's quarter): names in headers are not proof.
   */
  screenLargeBody?(headers: IncomingHttpHeaders, services: Services): Promise<void>;
  /**
   * A JSON body's members go to the parameters as parsed (`parseParams`), not through
   * `mergedParams`, which would turn objects back into text for them to be parsed again: a large
   * JSON body is then held once, not three times. Other bodies are read as for every route.
   */
  parsedJsonBody?: boolean;
  /**
   * Formats the operation answers beyond json, pjson and html; its handler reads `format` and
   * returns the body for it (an `EncodedBody` for a protocol buffer).
   */
  formats?: readonly ExtraFormat[];
  /**
   * An OAuth 2.0 protocol endpoint (RFC 6749): its parameter errors are also named
   * `invalid_request` in the envelope, as its own refusals (`errors.oauth`) are named.
   */
  oauth?: boolean;
  /**
   * A GET of the operation changes something (ArcGIS lists it with GET, so GET is accepted): the
   * API directory shows it as an operation with its form, never runs it for a page, and its sign-in
   * cookie authenticates only the form's CSRF-checked POST of it.
   */
  changesState?: boolean;
  /**
   * The answer carries a credential (a token, a client secret): `Cache-Control: no-store` and
   * `Pragma: no-cache`, so that no cache or proxy keeps it (RFC 6749 §5.1).
   */
  noStore?: boolean;
  /**
   * Headers added to every answer of the route once its body is rendered, errors included: the
   * peer endpoint signs the exact bytes it sends (`body` is the request's parsed body, undefined
   * when it could not be read).
   */
  answerHeaders?(
    body: unknown,
    status: number,
    payload: string,
    services: Services,
  ): Promise<Record<string, string>>;
  // Method syntax on purpose: a route of any parameters, path and auth mode then joins the one
  // table of routes (`allRoutes`) without a cast, while each handler keeps its precise types.
  handler(ctx: HandlerContext<S, P, A>): Promise<unknown>;
}

export interface HandlerContext<
  S extends ParamSpecs,
  P extends string = string,
  A extends AuthMode = AuthMode,
> {
  params: ParamValues<S>;
  /** Parameters sent with an empty value. */
  empty: Set<keyof S & string>;
  /**
   * Files of a multipart request, by field name, in temporary files that are removed once the
   * handler is done: read or move them before returning.
   */
  files: Record<string, UploadedFile>;
  path: PathParams<P>;
  /** The request's headers. */
  headers: IncomingHttpHeaders;
  caller: CallerOf<A>;
  services: Services;
  org: Organization;
  /** The bearer token of this request, when one was sent. */
  token: string | undefined;
  requestIp: string;
  /** The request's `Referer` header, when sent (what a referer-bound token is checked against). */
  referer: string | undefined;
  /** Whether the request came over HTTPS (directly, or as a trusted proxy says). */
  secure: boolean;
  /** Public base of the API root, e.g. `https://gis.example.com/portal/sharing/rest`. */
  apiBase: string;
  /** The answer's format (`f`). */
  format: Format;
}

/** Identity helper that keeps the types of a route definition: parameters, path, auth mode. */
export function defineRoute<S extends ParamSpecs, const P extends string, const A extends AuthMode>(
  def: RouteDef<S, P, A>,
): RouteDef<S, P, A> {
  return def;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The operation's stable name (`RouteDef.name`, or `health`, `ready`, `metrics`). */
    name?: string;
    /** `RouteDef.parsedJsonBody`. */
    parsedJsonBody?: boolean;
  }
  interface FastifyRequest {
    /** Loaded once per request by the organization hook (CORS and allSSL need it first). */
    org: Organization;
    /** The error envelope's code when the answer is an error (for metrics). */
    errorCode: number | undefined;
    /** What the pipeline's caller check found (`checkCaller`); null until it runs. */
    callerState: CallerState | null;
  }
}

export interface PipelineOptions {
  services: Services;
  contextPath: string;
  /** The public base URL; a function because with port 0 it is known only after listening. */
  publicUrl: () => string;
  /** Where uploads are written while their request runs. */
  uploadDir: string;
  /** Bytes of bodies read before their caller is known, for the whole process. */
  preAuthBudget: PreAuthBudget;
  /** Bytes of files written before their caller is known, for the whole process. */
  preAuthUploadBudget: PreAuthBudget;
}

/** What `checkCaller` found for a request, and for which credential (null: not checked yet). */
export interface CallerState {
  caller: Caller | null;
  /** The credential checked: the bearer token, or the directory session (`directory ` and it). */
  credential: string | undefined | null;
  /** The bearer token, when the credential is one (a directory session is not). */
  token: string | undefined;
}
/** What a multipart request whose caller was unknown when its body began may draw on. */
interface Unknown {
  /** Bytes held in memory (fields). */
  share: PreAuthShare;
  /** Bytes of files on disk. */
  disk: PreAuthShare;
  pace: BodyPace;
}
const multipartUnknown = new WeakMap<FastifyRequest, Unknown>();

/**
 * Query and form parameters as one string map; for repeated names the last value wins. A
 * multipart request's fields join once the pipeline has read them (`request.body`).
 */
export function mergedParams(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  addParams(out, request.query);
  if (!parsedBody(request)) addParams(out, request.body);
  return out;
}

/** Adds the parameters of a parsed query string or body to `out`, as text. */
function addParams(out: Record<string, string>, source: unknown): void {
  if (!source || typeof source !== "object") return;
  const values = source as Record<string, unknown>;
  for (const key of Object.keys(values)) {
    const value = values[key];
    const v = Array.isArray(value) ? value.at(-1) : value;
    if (v === undefined || v === null) continue;
    if (typeof v === "string") {
      out[key] = v;
      continue;
    }
    // A JSON body (a convenience for scripts) carries objects; ArcGIS form semantics want text.
    // Nesting thousands deep would overflow the stack in JSON.stringify; no parameter needs it.
    if (typeof v === "object" && nestsDeeper(v, MAX_JSON_DEPTH)) {
      throw errors.invalidParameter(key, `must not nest deeper than ${MAX_JSON_DEPTH} levels`);
    }
    out[key] = typeof v === "object" ? JSON.stringify(v) : String(v);
  }
}

/** The JSON body of a route that takes its members as parsed (`RouteDef.parsedJsonBody`). */
function parsedBody(request: FastifyRequest): Record<string, unknown> | undefined {
  if (!request.routeOptions.config?.parsedJsonBody) return undefined;
  if (!/^application\/json/i.test(request.headers["content-type"] ?? "")) return undefined;
  const body = request.body;
  return body && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
}

/** Whether the request has a multipart body (which the pipeline reads itself). */
export function isMultipart(request: FastifyRequest): boolean {
  return /^multipart\/form-data/i.test(request.headers["content-type"] ?? "");
}

/** Longest token looked up: issued tokens are 43 characters; a longer one is not hashed. */
const MAX_TOKEN_LENGTH = 1024;

/** The token of a request: the `token` parameter, or a Bearer header (`wire.md` §1). */
export function tokenOf(request: FastifyRequest, params: Record<string, string>): string | undefined {
  if (params.token) {
    if (params.token.length > MAX_TOKEN_LENGTH) throw errors.invalidToken();
    return params.token;
  }
  for (const header of ["x-esri-authorization", "authorization"]) {
    const value = request.headers[header];
    if (typeof value === "string") {
      if (value.length > MAX_TOKEN_LENGTH + 16) throw errors.invalidToken();
      const match = /^Bearer\s+(\S+)\s*$/i.exec(value);
      if (match) return match[1];
    }
  }
  return undefined;
}

export function apiRoot(root: RouteDef["root"], contextPath: string): string {
  if (root === "portaladmin") return `${contextPath}/portaladmin`;
  if (root === "server") return `${contextPath}/rest`;
  return `${contextPath}/sharing/rest`;
}

export function registerRoutes(
  app: FastifyInstance,
  routes: readonly RouteDef[],
  options: PipelineOptions,
): void {
  const directory = new Directory(routes, options.contextPath, options.services);
  // A property of every request rather than a WeakMap keyed by requests: the garbage collector
  // treats a WeakMap's entries as ephemerons, extra work at each collection of young objects.
  app.decorateRequest("callerState", null);
  // The public base of the API root, made again only when the public URL changes (known only
  // once the server listens): one string for every request, not a new one each.
  const base = { publicUrl: "", apiBase: "" };
  const apiBase = () => {
    const publicUrl = options.publicUrl();
    if (publicUrl !== base.publicUrl) {
      base.publicUrl = publicUrl;
      base.apiBase = `${publicUrl}${options.contextPath}/sharing/rest`;
    }
    return base.apiBase;
  };
  for (const route of routes) {
    const root = apiRoot(route.root, options.contextPath);
    const paths = typeof route.path === "string" ? [route.path] : route.path;
    const bodyLimit = route.bodyLimit ?? DEFAULT_BODY_LIMIT;
    const uploads = route.files
      ? { fieldBytes: bodyLimit, maxParts: MAX_PARAMETERS, files: route.files }
      : undefined;
    /** Authenticates the token of `raw` (or of the headers) and checks the route's privilege. */
    const checkCaller = async (
      request: FastifyRequest,
      raw: Record<string, string>,
    ): Promise<CallerState> => {
      let state = request.callerState;
      if (state === null) {
        state = { caller: null, credential: null, token: undefined };
        request.callerState = state;
      }
      const token = route.auth === "none" ? undefined : tokenOf(request, raw);
      // Without a token, the html directory's sign-in cookie, where the directory accepts it.
      const session =
        token === undefined && route.auth !== "none" ? directory.sessionFor(request, raw, route) : undefined;
      const credential = session === undefined ? token : `directory ${session}`;
      if (credential === state.credential) return state;
      state.caller = null;
      if (session !== undefined) {
        state.caller = (await options.services.auth.directorySession(session)) ?? null;
        if (state.caller === null && route.auth === "required") throw errors.tokenRequired();
      } else if (token !== undefined) {
        // A token made for a referer or an address is accepted only from it (`generateToken`'s `client`).
        const presenter = { referer: request.headers.referer, ip: request.ip };
        const { auth } = options.services;
        state.caller = auth.cachedCaller(token, presenter) ?? (await auth.authenticate(token, presenter));
        // An app's token (`client_credentials`) is valid but acts for no user: what needs one
        // is refused as forbidden, not with a request to sign in.
        if (state.caller === null && (route.auth === "required" || route.privilege)) {
          throw errors.forbidden("An application token acts for no user.");
        }
      } else if (route.auth === "required") throw errors.tokenRequired();
      if (route.privilege) requirePrivilege(state.caller, route.privilege);
      state.credential = credential;
      state.token = token;
      return state;
    };
    /**
     * Bounds what a body costs before its caller is known. The caller is authenticated here,
     * before any byte is read, when its token is in a header or the query string; such a body is
     * not limited further. Any other body draws from the process's budget while it arrives
     * (`preauth-budget.ts`), is refused once that or its sender's part of it is spent, and must
     * keep arriving.
     */
    const boundBeforeCaller = async (
      request: FastifyRequest,
      reply: FastifyReply,
      payload: NodeJS.ReadableStream,
    ): Promise<NodeJS.ReadableStream> => {
      checkQuery(request);
      const query = mergedParams(request);
      if (route.auth !== "none" && tokenOf(request, query) !== undefined) {
        if ((await checkCaller(request, query)).caller) return payload;
      }
      const header = request.headers["content-length"];
      const length = header === undefined ? undefined : Number(header);
      // Over the route's limit: refused as too large when the body is read.
      const multipart = uploads !== undefined && isMultipart(request);
      const limit = uploads && multipart ? multipartLimit(uploads) : bodyLimit;
      if (length !== undefined && length > limit) return payload;
      let named = false;
      if (route.screenLargeBody && (length === undefined || length > DEFAULT_BODY_LIMIT)) {
        await route.screenLargeBody(request.headers, options.services);
        named = true;
      }
      // A sender the headers name (and the screen knows) is counted as itself, not its address.
      const sender = named
        ? `named ${String(request.headers["x-portico-collaboration"])} ${String(request.headers["x-portico-from"])}`
        : senderOf(request.ip);
      const share = options.preAuthBudget.open(sender, named);
      const pace = new BodyPace();
      const disk = multipart ? options.preAuthUploadBudget.open(sender) : undefined;
      reply.raw.once("close", () => {
        pace.stop();
        share.release();
        disk?.release();
      });
      // A multipart body is read by the handler, which draws for its fields only: files go to
      // disk within their caps and the upload budget, not to memory.
      if (multipart && disk) {
        multipartUnknown.set(request, { share, disk, pace });
        return payload;
      }
      // Nothing is drawn for the announced length (anyone can announce anything); but a body
      // that could never be covered is refused before it is read.
      if (length !== undefined && length > share.cap) throw errors.preAuthBudgetSpent();
      const metered = meteredBody(share, pace);
      payload.on("error", (err) => metered.destroy(err));
      return payload.pipe(metered);
    };
    const handler = async (
      request: FastifyRequest,
      reply: FastifyReply,
      entry: ReturnType<Directory["entryOf"]>,
    ) => {
      if (route.noStore) reply.header("cache-control", "no-store").header("pragma", "no-cache");
      checkQuery(request);
      const path = request.params as Record<string, string>;
      // `<portal_id>` is the organization id or `self` (`wire.md` §1), checked here for every route.
      if (
        path.portalId !== undefined &&
        path.portalId.toLowerCase() !== "self" &&
        path.portalId !== request.org.id
      ) {
        throw errors.organizationNotFound(path.portalId);
      }
      // Path segments (ids, usernames, service names) go to lookups unchecked; NUL is in no id or
      // name, and PostgreSQL cannot compare text holding it, so it is refused here for every route,
      // as the parameter specs refuse it in query and form values.
      for (const [name, value] of Object.entries(path)) {
        if (value.includes("\u0000")) throw errors.invalidParameter(name, NUL_REASON);
      }

      let files: Record<string, UploadedFile> = {};
      if (uploads && isMultipart(request)) {
        // The caller is checked before any byte of the body is read when its token is in a
        // header or the query string; when it is a field before the file, before the file is
        // written; else (Esri's clients send it last) at the end, and the file is removed.
        const before = mergedParams(request);
        if (route.auth === "none" || tokenOf(request, before) !== undefined)
          await checkCaller(request, before);
        const unknown = multipartUnknown.get(request);
        // Files count against the upload budget until their caller is known (a token field
        // before the file authenticates it first).
        const known = () => Boolean(request.callerState?.caller);
        const body = await readMultipart(request.raw, request.headers, {
          ...uploads,
          dir: options.uploadDir,
          beforeFirstFile: async (fields) => {
            const soFar = { ...before, ...fields };
            if (tokenOf(request, soFar) !== undefined) await checkCaller(request, soFar);
          },
          coverFieldBytes: unknown ? (bytes) => unknown.share.cover(bytes) : undefined,
          coverFileBytes: unknown ? (bytes) => known() || unknown.disk.cover(bytes) : undefined,
          progress: unknown ? (bytes) => unknown.pace.arrived(bytes) : undefined,
          signal: unknown?.pace.signal,
        }).finally(() => unknown?.pace.stop());
        request.body = body.fields;
        files = body.files;
      }
      let format: Format | undefined;
      let raw: Record<string, string> = {};
      let result: unknown;
      try {
        // The hosted services answer as ArcGIS Server does, which reads parameter names in any case.
        raw =
          route.root === "server"
            ? withDeclaredNames(mergedParams(request), route.params)
            : mergedParams(request);
        format = parseFormat(raw.f, route.formats);
        // The directory shows the form of an operation that a GET would run, and runs it only
        // when the form is posted (or a client sends its token, as the API takes it).
        if (format === "html" && entry && route.changesState && request.method !== "POST") {
          if (tokenOf(request, raw) === undefined) {
            return render(reply, format, await directory.formPage(request, entry), route.name);
          }
        }
        const { caller, token } = await checkCaller(request, raw);
        route.authorize?.(caller, raw);
        const { values, empty } = parseParams(route.params, raw, parsedBody(request));
        route.check?.(values);
        result = await route.handler({
          params: values,
          empty,
          files,
          path,
          headers: request.headers,
          caller,
          services: options.services,
          org: request.org,
          token: token ?? undefined,
          requestIp: request.ip,
          referer: request.headers.referer,
          secure: request.protocol === "https",
          apiBase: apiBase(),
          format,
        });
      } catch (err) {
        if (route.oauth && err instanceof PorticoError) throw errors.asOAuthRequestError(err);
        // An error of a directory page is shown on the page, with the way to sign in.
        if (format === "html" && entry && err instanceof PorticoError) {
          request.errorCode = err.code;
          result = await directory.answerPage(request, entry, errorBody(err), raw);
          return render(reply, format, result, route.name);
        }
        throw err;
      } finally {
        // Before the answer goes out: a client that reads it may look for the file at once.
        if (uploads) await removeUploads(Object.values(files));
      }
      // Only the compact form is written ahead (`JsonAnswer`); the directory's page shows the value.
      if (result instanceof JsonAnswer && format !== "json") result = result.value();
      if (format === "html" && entry && !(result instanceof RawBody || result instanceof WebAnswer)) {
        result = await directory.answerPage(request, entry, result, raw);
      }
      return render(reply, format, result, route.name);
    };
    for (const path of paths) {
      const entry = directory.entryOf(route, path);
      // An operation answered only by POST: a GET of it with `f=html` is its form page.
      if (!directory.index.hasGet(route.root ?? "sharing", path) && entry) {
        app.route({
          method: "GET",
          url: `${root}${path}`,
          config: { name: `${route.name}.form` },
          handler: async (request, reply) => {
            checkQuery(request);
            if (mergedParams(request).f !== "html") {
              throw errors.invalidUrl(`No resource or operation at ${request.url.split("?")[0]}.`);
            }
            return render(reply, "html", await directory.formPage(request, entry), route.name);
          },
        });
      }
      app.route({
        method: [...route.methods],
        url: `${root}${path}`,
        // Metrics and logs name the operation, not the URL with its ids.
        config: { name: route.name, parsedJsonBody: route.parsedJsonBody },
        bodyLimit,
        // Multipart bodies are refused before a byte is read where no file is taken, and where
        // one is, when their announced length is over what the route's limits add up to.
        preParsing: (request, reply, payload, done) => {
          if (isMultipart(request)) {
            if (!uploads) return done(errors.filesNotAccepted());
            const limit = multipartLimit(uploads);
            if (Number(request.headers["content-length"]) > limit) return done(errors.bodyTooLarge(limit));
          }
          // No body (a GET, an empty POST): nothing to bound; the handler checks the caller.
          if (announcesNoBody(request)) return done(null, payload);
          boundBeforeCaller(request, reply, payload).then(
            (bounded) => {
              // A body refused while the caller was looked up (too many parameters, body.ts) is
              // answered with its refusal: nothing would ever read the rest of it.
              const refused = (payload as Readable).errored;
              if (refused) done(refused);
              else done(null, bounded as typeof payload);
            },
            (err: Error) => done(err),
          );
        },
        ...(route.answerHeaders
          ? {
              onSend: async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
                const text =
                  typeof payload === "string"
                    ? payload
                    : Buffer.isBuffer(payload)
                      ? payload.toString("utf8")
                      : undefined;
                if (text === undefined) return payload;
                const headers = await route.answerHeaders?.(
                  request.body,
                  reply.statusCode,
                  text,
                  options.services,
                );
                for (const [name, value] of Object.entries(headers ?? {})) reply.header(name, value);
                return payload;
              },
            }
          : {}),
        handler: (request, reply) => handler(request, reply, entry),
      });
    }
  }
}
