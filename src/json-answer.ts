/**
 * An answer whose compact JSON the operation wrote itself, for answers on a hot path where
 * building objects only for `JSON.stringify` to walk them costs a measurable share of the request
 * (a search page: its items' tag lists parsed from their stored JSON and written out again).
 * `json` must be exactly `JSON.stringify(value())`; the other formats (`pjson`, `html`) render
 * `value()`, built only when one of them is asked for. Beside `errors.ts`, outside any layer, as
 * `EncodedBody` is: operations make it and the HTTP layer sends it.
 */
export class JsonAnswer {
  constructor(
    readonly json: string,
    readonly value: () => unknown,
  ) {}
}

/**
 * `JSON.stringify(value)` for a string, number, boolean or null, without V8's runtime call for
 * strings that need no escaping (most names and ids).
 */
export function jsonValue(value: string | number | boolean | null): string {
  if (typeof value === "string") return NEEDS_NO_ESCAPE.test(value) ? `"${value}"` : JSON.stringify(value);
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "null";
  if (value === null) return "null";
  // Whatever else a row might hold despite its type (a boolean, a bigint): as `JSON.stringify` has it.
  return JSON.stringify(value);
}

/** Characters `JSON.stringify` writes as they are: all but `"`, `\`, controls and surrogates. */
const NEEDS_NO_ESCAPE = /^[\x20\x21\x23-\x5b\x5d-\ud7ff\ue000-\uffff]*$/;

/**
 * Stored JSON of an array of strings that `JSON.stringify(JSON.parse(text))` gives back unchanged:
 * no whitespace, every string's characters written as `JSON.stringify` writes them (as they are,
 * a surrogate only in a pair, or one of the short escapes it uses). `\u` escapes and `\/`, which
 * `JSON.stringify` would write otherwise, do not match; nor does anything that is not such an array.
 */
const CANONICAL_STRING_ARRAY =
  /^\[(?:"(?:[\x20\x21\x23-\x5b\x5d-\ud7ff\ue000-\uffff]|[\ud800-\udbff][\udc00-\udfff]|\\["\\bfnrt])*"(?:,"(?:[\x20\x21\x23-\x5b\x5d-\ud7ff\ue000-\uffff]|[\ud800-\udbff][\udc00-\udfff]|\\["\\bfnrt])*")*)?\]$/;

/**
 * `JSON.stringify(JSON.parse(text))` for the stored JSON text of a list (tags, type keywords,
 * categories): the text itself when it is already what that would give, which is what every
 * writer of those columns stores (`JSON.stringify` of a list of strings); parsed and written out
 * otherwise, so the answer never depends on how a row was written.
 */
export function storedJsonList(text: string): string {
  return text === "[]" || CANONICAL_STRING_ARRAY.test(text) ? text : JSON.stringify(JSON.parse(text));
}
