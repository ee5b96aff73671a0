import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { errors, type PorticoError } from "../errors.js";

/**
 * Declarative parameter specifications. ArcGIS requests carry every value as a string (form or
 * query); a spec turns that string into a typed value and checks it, naming the parameter in any
 * error. Routes declare their parameters with these specs, and so does the organization settings
 * table, so there is one place where "what a valid value is" lives.
 */
export interface ParamSpec<T = unknown, Required extends boolean = boolean> {
  readonly kind: "string" | "boolean" | "integer" | "number" | "json" | "list";
  readonly required: Required;
  /** Converts the raw, non-empty string; returns the reason (e.g. "must be an integer") on failure. */
  readonly parse: (raw: string) => { ok: true; value: T } | { ok: false; reason: string };
  /**
   * Checks a value that is already parsed (a member of a JSON body used as parsed, see
   * `parseParams`); only JSON parameters have it.
   */
  readonly accept?: (value: unknown) => { ok: true; value: T } | { ok: false; reason: string };
  /** The words a string takes, when it takes only some (what a form offers to choose from). */
  readonly values?: readonly string[];
  /** Compiles a JSON parameter's schema now rather than at its first use (tests; throws if malformed). */
  readonly compile?: () => void;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const fail = (reason: string): Parsed<never> => ({ ok: false, reason });

interface Common<R extends boolean> {
  required?: R;
}

interface StringOptions<R extends boolean> extends Common<R> {
  maxLength?: number;
  minLength?: number;
  pattern?: RegExp;
  /** Said in the error when `pattern` does not match, e.g. "must be a language code such as en or pt-BR". */
  patternReason?: string;
  enum?: readonly string[];
  /** Compare `enum` case-insensitively and return the canonical spelling. */
  caseInsensitive?: boolean;
  check?: (value: string) => string | undefined;
}

/**
 * NUL is no character of any value ArcGIS takes, and PostgreSQL text cannot hold it (SQLite
 * would store it, so the engines would differ): every parameter refuses it.
 */
export const NUL_REASON = "must not contain the NUL character (U+0000)";

/** Whether a parsed JSON value has NUL in any string, keys included. */
function hasNul(value: unknown): boolean {
  if (typeof value === "string") return value.includes("\u0000");
  if (Array.isArray(value)) return value.some(hasNul);
  if (typeof value === "object" && value !== null) {
    return Object.entries(value).some(([key, v]) => key.includes("\u0000") || hasNul(v));
  }
  return false;
}

/**
 * Code points in `s`, as `[...s].length` counts them, without copying the string: a surrogate
 * pair is one code point, a lone surrogate one as well.
 */
export function codePointLength(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/**
 * Checks a length limit in code points at constant cost when it can: a string of `raw.length`
 * UTF-16 units holds between `raw.length / 2` and `raw.length` code points, so only a string near
 * the limit is counted. A 100 MB value is refused before anything walks it.
 */
function lengthProblem(raw: string, min: number | undefined, max: number | undefined): string | undefined {
  if (max !== undefined && raw.length > 2 * max) {
    return `must be at most ${max} characters (got at least ${Math.ceil(raw.length / 2)})`;
  }
  const near = (max !== undefined && raw.length > max) || (min !== undefined && raw.length < 2 * min);
  if (!near) return undefined;
  const length = codePointLength(raw);
  if (max !== undefined && length > max) return `must be at most ${max} characters (got ${length})`;
  if (min !== undefined && length < min) return `must be at least ${min} characters`;
  return undefined;
}

/** A string spec; with `enum`, its value is typed as the union of the words listed. */
function string<const R extends boolean = false, const E extends string = string>(
  options: StringOptions<R> & { enum?: readonly E[] } = {},
): ParamSpec<E, R> {
  // An enum value is one of a few short words: anything longer is refused before it is compared.
  const longestEnum = options.enum ? Math.max(...options.enum.map((e) => e.length)) : undefined;
  return {
    kind: "string",
    required: (options.required ?? false) as R,
    ...(options.enum ? { values: options.enum } : {}),
    parse(raw) {
      const problem = lengthProblem(raw, options.minLength, options.maxLength);
      if (problem) return fail(problem);
      if (raw.includes("\u0000")) return fail(NUL_REASON);
      let value = raw;
      if (options.enum) {
        const found =
          raw.length > (longestEnum as number)
            ? undefined
            : options.caseInsensitive
              ? options.enum.find((e) => e.toLowerCase() === raw.toLowerCase())
              : options.enum.find((e) => e === raw);
        if (found === undefined) return fail(`must be one of ${options.enum.join(", ")}`);
        value = found;
      }
      if (options.pattern && !options.pattern.test(value)) {
        return fail(options.patternReason ?? `must match ${options.pattern}`);
      }
      const reason = options.check?.(value);
      // Without `enum`, E is string; with it, `value` is one of its words (checked above).
      return reason ? fail(reason) : ok(value as E);
    },
  };
}

function boolean<const R extends boolean = false>(options: Common<R> = {}): ParamSpec<boolean, R> {
  return {
    kind: "boolean",
    required: (options.required ?? false) as R,
    parse(raw) {
      if (raw.length > 5) return fail("must be true or false");
      const v = raw.toLowerCase();
      if (v === "true") return ok(true);
      if (v === "false") return ok(false);
      return fail("must be true or false");
    },
  };
}

interface NumberOptions<R extends boolean> extends Common<R> {
  min?: number;
  max?: number;
  /** Values allowed outside [min, max], such as -1 meaning "no limit". */
  also?: readonly number[];
}

/** Longest text taken as a number: more digits than any double holds, with room for blanks. */
const MAX_NUMBER_TEXT = 400;

function integer<const R extends boolean = false>(options: NumberOptions<R> = {}): ParamSpec<number, R> {
  return {
    kind: "integer",
    required: (options.required ?? false) as R,
    parse(raw) {
      if (raw.length > MAX_NUMBER_TEXT || !/^\s*-?\d+\s*$/.test(raw)) return fail("must be an integer");
      const value = Number(raw);
      if (!Number.isSafeInteger(value)) return fail("is out of range");
      return inRange(value, options);
    },
  };
}

function number<const R extends boolean = false>(options: NumberOptions<R> = {}): ParamSpec<number, R> {
  return {
    kind: "number",
    required: (options.required ?? false) as R,
    parse(raw) {
      if (raw.length > MAX_NUMBER_TEXT) return fail("must be a number");
      const value = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(value)) return fail("must be a number");
      return inRange(value, options);
    },
  };
}

function inRange(value: number, options: NumberOptions<boolean>): Parsed<number> {
  if (options.also?.includes(value)) return ok(value);
  const { min, max } = options;
  if ((min !== undefined && value < min) || (max !== undefined && value > max)) {
    const extra = options.also?.length ? ` (or ${options.also.join(", ")})` : "";
    if (min !== undefined && max !== undefined) return fail(`must be between ${min} and ${max}${extra}`);
    if (min !== undefined) return fail(`must be at least ${min}${extra}`);
    return fail(`must be at most ${max}${extra}`);
  }
  return ok(value);
}

interface ListOptions<R extends boolean> extends Common<R> {
  maxItems?: number;
  item?: StringOptions<false>;
}

/** Longest entry assumed for a list whose entries declare no `maxLength` (ids, names, URIs). */
const LIST_ENTRY_BOUND = 1024;

/**
 * A comma-separated list such as `tags=a,b,c` (blank entries are dropped). With `maxItems`, the
 * whole text is bounded first (each entry at most twice its length in UTF-16 units, plus room for
 * the comma and blanks around it), so an oversized list is refused before it is split.
 */
function list<const R extends boolean = false>(options: ListOptions<R> = {}): ParamSpec<string[], R> {
  const item = string(options.item ?? {});
  const maxText =
    options.maxItems === undefined
      ? undefined
      : options.maxItems * (2 * (options.item?.maxLength ?? LIST_ENTRY_BOUND) + 16);
  return {
    kind: "list",
    required: (options.required ?? false) as R,
    parse(raw) {
      if (maxText !== undefined && raw.length > maxText) {
        return fail(`must be at most ${maxText} characters in all (got ${raw.length})`);
      }
      const items = raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
      if (options.maxItems !== undefined && items.length > options.maxItems) {
        return fail(`must have at most ${options.maxItems} entries (got ${items.length})`);
      }
      for (const entry of items) {
        const r = item.parse(entry);
        if (!r.ok) return fail(`entry '${entry}' ${r.reason}`);
      }
      return ok(items);
    },
  };
}

const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });

/**
 * Deepest nesting a JSON parameter may have. ArcGIS JSON (definitions, renderers, settings) nests
 * a few levels; every later walk of a value (checks, `JSON.stringify` when it is stored) recurses
 * once per level, and a value nested thousands deep would overflow the stack there.
 */
export const MAX_JSON_DEPTH = 100;

/** Whether objects and arrays in `value` nest more than `levels` deep; stops looking there. */
export function nestsDeeper(value: unknown, levels: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (levels === 0) return true;
  return Object.values(value).some((v) => nestsDeeper(v, levels - 1));
}

/**
 * Most members (object entries and array elements, at every level together) a JSON text may
 * have, in a parameter or in a JSON body. Parsing time grows with the member count (a million keys
 * take seconds, during which nothing else runs); no ArcGIS document comes near this.
 */
export const MAX_JSON_MEMBERS = 100_000;

/**
 * Whether the JSON `text` has more than `max` members, told without parsing it. Members but the
 * first of each container follow a comma; counting commas with `indexOf` is cheap and, when they
 * are few, settles it. Only a text with many commas is scanned for those outside strings, and the
 * scan stops at the first one over.
 */
export function jsonMembersExceed(text: string, max: number = MAX_JSON_MEMBERS): boolean {
  let commas = 0;
  for (let i = text.indexOf(","); i !== -1; i = text.indexOf(",", i + 1)) {
    if (++commas > max) break;
  }
  if (commas <= max) return false;
  let count = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x2c && ++count > max) {
      return true;
    }
  }
  return false;
}

/** A JSON schema, kept as plain data. */
export type JsonSchema = Record<string, unknown>;

interface JsonOptions<R extends boolean> extends Common<R> {
  /** Cross-checks the schema cannot express; returns the reason on failure. */
  check?: (value: unknown) => string | undefined;
}

/** A parameter sent as JSON text (objects and arrays, `interface.md` §4.0.2), checked by `schema`. */
function json<T = unknown, const R extends boolean = false>(
  schema: JsonSchema,
  options: JsonOptions<R> = {},
): ParamSpec<T, R> {
  // Compiled at first use: compiling every route's schemas when the routes load was a fifth of
  // start-up (~200 ms), for operations most processes never serve. The route table's test calls
  // `compile` of every JSON parameter, so a malformed schema still fails a test, not a request.
  let compiled: ValidateFunction | undefined;
  const accept = (value: unknown): Parsed<T> => {
    if (nestsDeeper(value, MAX_JSON_DEPTH)) return fail(`must not nest deeper than ${MAX_JSON_DEPTH} levels`);
    compiled ??= ajv.compile(schema);
    const validate = compiled;
    if (!validate(value)) return fail(describeSchemaError(validate.errors?.[0]));
    if (hasNul(value)) return fail(NUL_REASON);
    const reason = options.check?.(value);
    return reason ? fail(reason) : ok(value as T);
  };
  return {
    kind: "json",
    required: (options.required ?? false) as R,
    compile: () => {
      compiled ??= ajv.compile(schema);
    },
    accept,
    parse(raw) {
      if (jsonMembersExceed(raw)) return fail(`must have at most ${MAX_JSON_MEMBERS} members`);
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch (err) {
        return fail(`is not valid JSON (${(err as Error).message})`);
      }
      return accept(value);
    },
  };
}

function describeSchemaError(error: ErrorObject | undefined): string {
  if (!error) return "does not have the expected shape";
  const where = error.instancePath ? ` at ${error.instancePath.slice(1).replaceAll("/", ".")}` : "";
  switch (error.keyword) {
    case "required":
      return `is missing property '${(error.params as { missingProperty: string }).missingProperty}'${where}`;
    case "additionalProperties":
      return `has unknown property '${(error.params as { additionalProperty: string }).additionalProperty}'${where}`;
    default:
      return `${error.message ?? "is invalid"}${where}`;
  }
}

export const p = { string, boolean, integer, number, list, json };

export type ParamSpecs = Record<string, ParamSpec<unknown, boolean>>;

/** The typed values a set of specs produces: required ones are always present. */
export type ParamValues<S extends ParamSpecs> = {
  [K in keyof S]: S[K] extends ParamSpec<infer T, infer R> ? (R extends true ? T : T | undefined) : never;
};

export interface ParsedParams<S extends ParamSpecs> {
  values: ParamValues<S>;
  /** Parameters that were sent with an empty value (what `clearEmptyFields` acts on). */
  empty: Set<keyof S & string>;
}

/**
 * The parameters under the names the specs declare, whatever case they were sent in: ArcGIS Server
 * reads parameter names case-insensitively and clients count on it (GDAL's documented feature
 * service URLs say `outfields=*`). A name sent in its declared spelling wins over other spellings.
 */
export function withDeclaredNames(
  raw: Readonly<Record<string, string>>,
  specs: ParamSpecs,
): Record<string, string> {
  const declared = new Map(Object.keys(specs).map((name) => [name.toLowerCase(), name]));
  const out: Record<string, string> = { ...raw };
  for (const [key, value] of Object.entries(raw)) {
    const name = declared.get(key.toLowerCase());
    if (name !== undefined && name !== key && !Object.hasOwn(raw, name)) out[name] = value;
  }
  return out;
}

/**
 * Parses `raw` (merged query and form parameters) against `specs`. Unknown parameters are ignored,
 * as ArcGIS does. Every invalid parameter is reported: the message names the first, `details`
 * lists them all, so a client fixes a request in one round.
 */
export function parseParams<S extends ParamSpecs>(
  specs: S,
  raw: Readonly<Record<string, string | undefined>>,
  /**
   * A JSON body whose members are used as parsed (they win over `raw`): an object or array goes
   * to a JSON parameter as it is, not turned back into text to be parsed again.
   */
  body?: Readonly<Record<string, unknown>>,
): ParsedParams<S> {
  const values: Record<string, unknown> = {};
  const empty = new Set<string>();
  const problems: PorticoError[] = [];
  for (const [name, spec] of Object.entries(specs)) {
    const member = body && Object.hasOwn(body, name) ? body[name] : undefined;
    if (member !== undefined && member !== null && typeof member !== "string") {
      const parsed =
        spec.accept && typeof member === "object"
          ? spec.accept(member)
          : typeof member === "object"
            ? nestsDeeper(member, MAX_JSON_DEPTH)
              ? fail(`must not nest deeper than ${MAX_JSON_DEPTH} levels`)
              : spec.parse(JSON.stringify(member))
            : spec.parse(String(member));
      if (parsed.ok) values[name] = parsed.value;
      else problems.push(errors.invalidParameter(name, parsed.reason));
      continue;
    }
    const given = typeof member === "string" ? member : raw[name];
    if (given === undefined || given === "") {
      if (given === "") empty.add(name);
      if (spec.required) problems.push(errors.missingParameter(name));
      continue;
    }
    const parsed = spec.parse(given);
    if (parsed.ok) values[name] = parsed.value;
    else problems.push(errors.invalidParameter(name, parsed.reason));
  }
  if (problems.length > 0) throw errors.parameterProblems(problems);
  return { values: values as ParamValues<S>, empty: empty as Set<keyof S & string> };
}
