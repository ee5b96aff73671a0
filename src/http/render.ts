import type { Readable } from "node:stream";
import type { FastifyReply } from "fastify";
import { EncodedBody } from "../encoded-body.js";
import { errors, type PorticoError } from "../errors.js";
import { JsonAnswer } from "../json-answer.js";
import { PAGE_CSP } from "./directory/html.js";
import { plainPage } from "./directory/pages.js";

/** Response formats (`wire.md` §1): `pjsonm`, sent by some clients, is pretty JSON too. */
export type Format = "json" | "pjson" | "html" | ExtraFormat;
/** Formats only some operations answer in (feature queries): GeoJSON and Esri's protocol buffer. */
export type ExtraFormat = "geojson" | "pbf";

/** `f` as the operation takes it; `extra` lists the formats beyond json, pjson and html it answers. */
export function parseFormat(f: string | undefined, extra: readonly ExtraFormat[] = []): Format {
  if (f === undefined || f === "" || f === "json") return "json";
  if (f === "pjson" || f === "pjsonm") return "pjson";
  if (f === "html") return "html";
  const lower = f.toLowerCase();
  for (const format of extra) if (format === lower) return format;
  throw errors.unsupportedFormat(f);
}

/**
 * Like `parseFormat`, but never throws: used to render errors, including a bad `f` itself. An
 * error of a GeoJSON or PBF request is the JSON envelope, as ArcGIS answers it.
 */
export function formatForError(f: string | undefined): Format {
  try {
    return parseFormat(f);
  } catch {
    return "json";
  }
}

/**
 * Compact JSON of frozen results. Services freeze what they share between requests (the
 * organization view, a signed-in user); those are serialized once, not on every request.
 */
const serialized = new WeakMap<object, string>();

function compactJson(body: unknown): string {
  if (typeof body !== "object" || body === null) return JSON.stringify(body);
  // Looked up before asking whether the body is frozen: asking costs more than the lookup.
  let text = serialized.get(body);
  if (text !== undefined) return text;
  text = JSON.stringify(body);
  if (Object.isFrozen(body)) serialized.set(body, text);
  return text;
}

/** A file's bytes to stream: `open` is called once the answer is sent, `size` is its length. */
export interface StreamedContent {
  size: number;
  open(): Readable;
}

/**
 * A non-JSON answer (an item's data, a thumbnail, an invitation file): sent as it is, whatever
 * `f` says; from memory, or streamed (stored files, read a chunk at a time).
 */
export class RawBody {
  constructor(
    readonly contentType: string,
    readonly content: Buffer | StreamedContent,
    readonly filename?: string,
    /** `attachment` for files meant to be saved or not safe to show, `inline` for the others. */
    readonly disposition: "inline" | "attachment" = "inline",
  ) {}
}

/**
 * Every file answer is a sandboxed document if a browser opens it: no script, no plugin, no
 * same-origin access, nothing loaded (an image or text still shows; the inline style is for the
 * viewers browsers build around images).
 */
export const FILE_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

/** Headers every answer of the server carries (set by the server's `onRequest` hook). */
export const HARDENING_HEADERS: Readonly<Record<string, string>> = {
  // Nothing the server sends is to be second-guessed into something executable.
  "x-content-type-options": "nosniff",
  // ArcGIS clients put tokens in URLs; no page or file of the portal passes its URL on.
  "referrer-policy": "no-referrer",
};

const HARDENING_PAIRS = Object.entries(HARDENING_HEADERS);

/** Sets the hardening headers an answer does not already carry. */
export function hardenAnswer(reply: FastifyReply): void {
  for (const [name, value] of HARDENING_PAIRS) {
    if (!reply.hasHeader(name)) reply.header(name, value);
  }
}

/**
 * `Content-Disposition` for a file name that came from an upload. A header value may hold neither
 * control characters nor anything beyond Latin-1 (Node refuses to send it), so `filename` gets the
 * name in printable ASCII (`_` for the rest, and for `"` and `\`) and, when that changed it,
 * `filename*` the name itself, UTF-8 percent-encoded (RFC 6266, RFC 8187).
 */
export function contentDisposition(disposition: "inline" | "attachment", filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/gu, "_");
  if (ascii === filename) return `${disposition}; filename="${ascii}"`;
  // Lone surrogates have no UTF-8 form: encodeURIComponent would throw on them.
  const wellFormed = filename.replace(
    /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
    "\uFFFD",
  );
  const encoded = encodeURIComponent(wellFormed).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/**
 * An answer for a browser rather than a client of the API (the OAuth 2.0 sign-in page and its
 * redirects): a page with its own content security policy, or a redirect; with cookies. Never
 * cached, never framed.
 */
export class WebAnswer {
  constructor(
    readonly answer:
      | { page: string; csp: string; cookies?: readonly string[] }
      | { location: string; cookies?: readonly string[] },
  ) {}
}

export function render(reply: FastifyReply, format: Format, body: unknown, title: string): FastifyReply {
  // Also here, not only in the server's onRequest hook: errors the router raises before any route
  // (a path that is not valid UTF-8) are rendered without running the hooks.
  hardenAnswer(reply);
  if (body instanceof RawBody) {
    reply.header(
      "content-disposition",
      body.filename ? contentDisposition(body.disposition, body.filename) : body.disposition,
    );
    // Stored files come from users: never let a browser sniff them into something executable,
    // nor run them as a page of the portal.
    reply.header("x-content-type-options", "nosniff");
    reply.header("content-security-policy", FILE_CSP);
    reply.type(body.contentType);
    if (Buffer.isBuffer(body.content)) return reply.send(body.content);
    reply.header("content-length", String(body.content.size));
    return reply.send(body.content.open());
  }
  if (body instanceof WebAnswer) {
    const { answer } = body;
    reply.header("cache-control", "no-store");
    reply.header("x-frame-options", "DENY");
    if (answer.cookies && answer.cookies.length > 0) reply.header("set-cookie", [...answer.cookies]);
    if ("location" in answer) return reply.code(302).header("location", answer.location).send();
    reply.header("content-security-policy", answer.csp);
    return reply.type("text/html; charset=utf-8").send(answer.page);
  }
  if (body instanceof EncodedBody) {
    return reply
      .type(body.contentType)
      .send(Buffer.from(body.content.buffer, body.content.byteOffset, body.content.byteLength));
  }
  if (format === "html") {
    reply.header("content-security-policy", PAGE_CSP);
    reply.header("x-frame-options", "DENY");
    // An answer rendered without its route (an error the router or the body parser raised): its
    // fields, readably. The pipeline renders the answers of routes with their links (`directory/`).
    return reply.type("text/html; charset=utf-8").send(plainPage(title, body));
  }
  if (body instanceof JsonAnswer) {
    // The pipeline hands other formats the answer's value; geojson and pbf are not asked of these.
    if (format === "json") return reply.type("application/json; charset=utf-8").send(body.json);
    return render(reply, format, body.value(), title);
  }
  const text = format === "pjson" ? JSON.stringify(body, null, 2) : compactJson(body);
  // GeoJSON's own media type (RFC 7946); GDAL and browsers read it as JSON.
  const type = format === "geojson" ? "application/geo+json" : "application/json; charset=utf-8";
  return reply.type(type).send(text);
}

/** The ArcGIS error envelope (`wire.md` §2), always with HTTP status 200. */
export function errorBody(error: PorticoError): { error: Record<string, unknown> } {
  return {
    error: {
      code: error.code,
      ...(error.oauthError ? { error: error.oauthError, error_description: error.message } : {}),
      ...(error.messageCode ? { messageCode: error.messageCode } : {}),
      message: error.message,
      details: error.details,
    },
  };
}

export { escapeHtml, PAGE_CSP } from "./directory/html.js";
