import querystring from "node:querystring";
import { Transform } from "node:stream";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { errors } from "../errors.js";
import { jsonMembersExceed, MAX_JSON_MEMBERS } from "../validation/params.js";

/**
 * Parsing of request parameters, bounded before the work: the query string, form bodies, JSON
 * bodies. Each of them is counted cheaply first and refused when it carries more parameters than
 * any operation takes, so that a million keys cost a bounded split instead of seconds of parsing
 * during which no other request is answered. Multipart bodies are read by the pipeline, which
 * knows the route's files (`multipart.ts`).
 */

/** Most parameters of one request, in its query string and in its body each. */
export const MAX_PARAMETERS = 1000;

/** Set on a parsed query string that had too many parameters; the `onRequest` hook refuses it. */
const TOO_MANY = Symbol("too many parameters");

/**
 * Whether `text` (`a=1&b=2`) has more than `max` parameters. `split` with a limit stops after
 * `max + 1` pieces, so this costs the same for a thousand keys as for a million.
 */
export function formTooLong(text: string, max: number = MAX_PARAMETERS): boolean {
  return text.split("&", max + 1).length > max;
}

/** Parses `a=1&b=2` as forms are (`+` is a space, repeated names give arrays), if not too long. */
function parseForm(text: string): Record<string, string | string[]> | undefined {
  if (formTooLong(text)) return undefined;
  // maxKeys: 0 lifts querystring's own silent cut at 1000: the count is checked above instead.
  return querystring.parse(text, "&", "=", { maxKeys: 0 }) as Record<string, string | string[]>;
}

/** Fastify's `querystringParser`: it may not throw, so an oversized query is marked and refused later. */
export function parseQueryString(text: string): Record<string | symbol, unknown> {
  if (text.length === 0) return {};
  return parseForm(text) ?? { [TOO_MANY]: true };
}

/** Throws when the query string was refused by `parseQueryString`. */
export function checkQuery(request: FastifyRequest): void {
  const query = request.query as Record<symbol, unknown> | undefined;
  if (query?.[TOO_MANY]) throw errors.tooManyParameters(MAX_PARAMETERS);
}

/**
 * Counts the parameters of a form or JSON body while it arrives, and fails the stream as soon as
 * there are too many: a million keys are refused after the first thousand, without reading, let
 * alone parsing, the rest. Forms count `&`; JSON counts commas outside strings (byte by byte: no
 * byte of a multibyte UTF-8 character is a quote, a backslash or a comma).
 */
export class ParameterCounter extends Transform {
  private separators = 0;
  private inString = false;
  private escaped = false;

  constructor(
    private readonly kind: "form" | "json",
    private readonly max: number,
    private readonly refusal: () => Error,
  ) {
    super();
  }

  override _transform(
    chunk: Buffer,
    _encoding: BufferEncoding,
    callback: (err?: Error | null, data?: Buffer) => void,
  ) {
    if (this.kind === "form") {
      for (let i = chunk.indexOf(0x26); i !== -1; i = chunk.indexOf(0x26, i + 1)) this.separators++;
    } else {
      this.countJson(chunk);
    }
    if (this.separators > this.max) callback(this.refusal());
    else callback(null, chunk);
  }

  private countJson(chunk: Buffer) {
    // Long strings (base64 data in a collaboration batch) have neither quotes nor backslashes.
    if (this.inString && !this.escaped && chunk.indexOf(0x22) === -1 && chunk.indexOf(0x5c) === -1) return;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
      } else if (c === 0x22) {
        this.inString = true;
      } else if (c === 0x2c && ++this.separators > this.max) {
        return;
      }
    }
  }
}

/**
 * The counter for a request's body, when its type is one that carries parameters and its announced
 * length leaves room for too many separators. Fastify fails a body longer than its
 * `content-length`, and each separator is a byte, so a body announced at most `max` bytes long
 * cannot go over: most are (a form of a few parameters), and a stream less is a write's CPU saved.
 */
function counterFor(request: FastifyRequest): ParameterCounter | undefined {
  const type = (request.headers["content-type"] ?? "").toLowerCase();
  const header = request.headers["content-length"];
  // A chunked body's length is not announced (Node refuses a request that gives both).
  const length =
    header === undefined || request.headers["transfer-encoding"] !== undefined ? undefined : Number(header);
  const mayExceed = (max: number) => length === undefined || !(length <= max);
  if (type.startsWith("application/x-www-form-urlencoded")) {
    // n parameters have n - 1 separators.
    const max = MAX_PARAMETERS - 1;
    if (!mayExceed(max)) return undefined;
    return new ParameterCounter("form", max, () => errors.tooManyParameters(MAX_PARAMETERS));
  }
  if (type.startsWith("application/json")) {
    if (!mayExceed(MAX_JSON_MEMBERS)) return undefined;
    return new ParameterCounter("json", MAX_JSON_MEMBERS, () =>
      errors.badBody(`The JSON body has more than ${MAX_JSON_MEMBERS} members.`),
    );
  }
  return undefined;
}

/** Whether a request announces no body (a GET, an empty POST). */
export function announcesNoBody(request: FastifyRequest): boolean {
  const header = request.headers["content-length"];
  return header === undefined ? request.headers["transfer-encoding"] === undefined : Number(header) === 0;
}

/**
 * The body, through a `ParameterCounter` when its type and length call for one. The counter may
 * refuse the body before anyone reads it: the pipeline may wait on the database (its caller
 * check) while the body flows in. Its refusal then stays on the stream (`errored`, which the
 * pipeline answers) rather than being an error event nobody hears, which crashes the process.
 */
function countedBody<T extends NodeJS.ReadableStream>(
  request: FastifyRequest,
  payload: T,
): T | ParameterCounter {
  const counter = counterFor(request);
  if (!counter) return payload;
  payload.on("error", (err) => counter.destroy(err));
  counter.on("error", () => {});
  return payload.pipe(counter);
}

/**
 * Body parsers for forms and JSON (each within the route's `bodyLimit`, which Fastify enforces
 * while reading) and a multipart parser that reads nothing: the pipeline streams multipart bodies
 * itself, after it has checked what it can of the caller.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  // A request that announces no body (most: GETs) has nothing to count and passes at once. A
  // body's streams are set up in a microtask, as when the hooks before this one were async: Node's
  // request event runs outside one, and a stream piped there starts flowing on the next tick,
  // before the hooks after this one and Fastify's body reader (promise callbacks) listen to it; a
  // counter that refused the body then had nobody to hear its error, and the process crashed.
  app.addHook("preParsing", (request, _reply, payload, done) => {
    if (announcesNoBody(request)) {
      done(null, payload);
      return;
    }
    queueMicrotask(() => done(null, countedBody(request, payload)));
  });

  app.addContentTypeParser(
    "application/x-www-form-urlencoded",
    { parseAs: "string" },
    (_request, body, done) => {
      const parsed = parseForm(body as string);
      if (!parsed) done(errors.tooManyParameters(MAX_PARAMETERS), undefined);
      else done(null, parsed);
    },
  );

  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = body as string;
    if (jsonMembersExceed(text)) {
      done(errors.badBody(`The JSON body has more than ${MAX_JSON_MEMBERS} members.`), undefined);
      return;
    }
    parseJson(request, text, (err, value) => {
      if (err) done(err, undefined);
      else if (value && typeof value === "object" && Object.keys(value).length > MAX_PARAMETERS) {
        done(errors.tooManyParameters(MAX_PARAMETERS), undefined);
      } else done(null, value);
    });
  });

  app.addContentTypeParser("multipart/form-data", (_request, _payload, done) => done(null, undefined));
}
