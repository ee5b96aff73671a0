import { MAX_JSON_DEPTH, nestsDeeper, type ParamSpec, p } from "../validation/params.js";

/**
 * What a valid item field is, in one place: the item routes (`addItem`, `update`) declare their
 * parameters with these specs, and collaboration checks every item a peer sends against the same
 * specs (`checkTypedValue`), so a copy can hold nothing the public API would refuse.
 */

/** Schemes an item's `url` may use: a service or web page, never script (`javascript:`, `data:`). */
const URL_SCHEMES = new Set(["http:", "https:"]);

/** Largest `properties` object, as JSON text. */
export const MAX_PROPERTIES_CHARS = 1024 * 1024;

export function urlRefusal(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute http or https URL";
  }
  return URL_SCHEMES.has(url.protocol) ? undefined : "must be an absolute http or https URL";
}

export const itemSpecs = {
  title: p.string({ maxLength: 250 }),
  type: p.string({ maxLength: 128 }),
  typeKeywords: p.list({ maxItems: 128, item: { maxLength: 256 } }),
  description: p.string({ maxLength: 64_000 }),
  snippet: p.string({ maxLength: 2048 }),
  tags: p.list({ maxItems: 128, item: { maxLength: 256 } }),
  url: p.string({ maxLength: 2048, check: urlRefusal }),
  properties: p.json<Record<string, unknown>>(
    { type: "object" },
    {
      check: (value) => {
        const length = JSON.stringify(value).length;
        return length > MAX_PROPERTIES_CHARS
          ? `must be at most ${MAX_PROPERTIES_CHARS} characters of JSON (got ${length})`
          : undefined;
      },
    },
  ),
};

/** A file name as stored with an item's data or thumbnail. */
export const fileNameSpec = p.string({ minLength: 1, maxLength: 255 });

/** A content type such as `application/json; charset=utf-8`. */
export const contentTypeSpec = p.string({
  minLength: 3,
  maxLength: 255,
  pattern: /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;[\x20-\x7e]*)?$/,
  patternReason: "must be a media type such as application/json",
});

/**
 * Checks a value that arrived already typed (JSON from another portal) against the spec of the
 * same form parameter; returns the reason it is refused. A list arrives as an array: its entries
 * must be what splitting the form value would give (trimmed, not empty, no comma).
 */
export function checkTypedValue(spec: ParamSpec, value: unknown): string | undefined {
  switch (spec.kind) {
    case "string": {
      if (typeof value !== "string") return "must be a string";
      const r = spec.parse(value);
      return r.ok ? undefined : r.reason;
    }
    case "list": {
      if (!Array.isArray(value)) return "must be an array of strings";
      for (const entry of value) {
        if (typeof entry !== "string") return "must be an array of strings";
        if (entry.includes(",") || entry.trim() !== entry || entry === "")
          return `entry '${entry.slice(0, 64)}' must be trimmed, not empty and without commas`;
      }
      const r = spec.parse(value.join(","));
      return r.ok ? undefined : r.reason;
    }
    case "json": {
      // Depth first: serialising a value nested thousands deep would overflow the stack.
      if (nestsDeeper(value, MAX_JSON_DEPTH)) return `must not nest deeper than ${MAX_JSON_DEPTH} levels`;
      const r = spec.parse(JSON.stringify(value));
      return r.ok ? undefined : r.reason;
    }
    default:
      return `is a ${spec.kind}, which items do not have`;
  }
}
