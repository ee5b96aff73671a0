/**
 * File types recognised by their first bytes (magic numbers), never by a name or a declared
 * content type, which whoever sent the file chose.
 */

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const JPEG = Buffer.from([0xff, 0xd8, 0xff]);

/** The types a thumbnail may have. */
export type ThumbnailType = "image/png" | "image/jpeg" | "image/gif";

/**
 * The content type of a PNG, JPEG or GIF image, from its bytes; undefined for anything else (SVG,
 * HTML, a text file named `x.png`). Only these are accepted as thumbnails: they carry no script.
 */
export function imageType(data: Uint8Array): ThumbnailType | undefined {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.subarray(0, 8).equals(PNG)) return "image/png";
  if (bytes.subarray(0, 3).equals(JPEG)) return "image/jpeg";
  if (/^GIF8[79]a$/.test(bytes.subarray(0, 6).toString("latin1"))) return "image/gif";
  return undefined;
}

/**
 * How a stored file may be answered. Files come from members (uploads) and from peer portals
 * (collaboration copies); a browser that treated one as a page of the portal would run its
 * script on the portal's origin, where tokens live in URLs. So a file is shown inline only when
 * its type is one a browser displays without running anything; every other file is an
 * attachment, and the types a page could load as script or style are not even named.
 */

/** Bytes `imageType` needs from the start of a file. */
export const IMAGE_HEAD_BYTES = 8;

/**
 * Types shown inline. Images a browser decodes without script (not SVG), plain text and JSON
 * (browsers show both as text; with `nosniff` they are never taken for HTML). PDF is left out:
 * it carries its own scripting, and Chromium refuses to show it under the `sandbox` policy
 * every file answer carries, so inline would only break it.
 */
const INLINE_TYPES: ReadonlySet<string> = new Set([
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "text/plain",
  "application/json",
]);

/**
 * Types a page may load as script, style, a document or a plugin even from an attachment
 * (`<script src>`, `<link rel=stylesheet>`, XSLT, `<object>`): served as octet-stream, so that
 * with `nosniff` no browser uses them as such. Matched loosely on purpose: a type caught by
 * mistake only loses its name on a download.
 */
const ACTIVE_TYPE = /html|xml|xsl|svg|script|css|wasm|flash|^multipart\//;

/** A MIME essence, `type/subtype`, in RFC 9110 token characters. */
const ESSENCE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;
const CHARSET = /^[a-z0-9][a-z0-9._:-]{0,39}$/;

export interface ServedType {
  contentType: string;
  disposition: "inline" | "attachment";
}

/** How a stored item file with the stored `Content-Type` is answered. */
export function servedType(stored: string): ServedType {
  const [first = "", ...params] = stored.split(";");
  const essence = first.trim().toLowerCase();
  if (!ESSENCE.test(essence) || ACTIVE_TYPE.test(essence)) {
    return { contentType: "application/octet-stream", disposition: "attachment" };
  }
  if (!INLINE_TYPES.has(essence)) return { contentType: essence, disposition: "attachment" };
  if (essence !== "text/plain") return { contentType: essence, disposition: "inline" };
  // Text keeps a charset that is a plain token; UTF-7 (which could spell markup in ASCII) never.
  const charset = params
    .map((p) => p.trim().toLowerCase())
    .find((p) => p.startsWith("charset="))
    ?.slice("charset=".length)
    .replace(/^"(.*)"$/, "$1");
  const keep = charset !== undefined && CHARSET.test(charset) && !/^(x-)?utf-?7/.test(charset);
  return { contentType: keep ? `text/plain; charset=${charset}` : "text/plain", disposition: "inline" };
}
