import { randomUUID } from "node:crypto";
import { checkAgainstLayer, type Geometry, parseEsriGeometry } from "../geometry/esri-json.js";
import type { LayerField, LayerSchema } from "../layer-schema.js";

/**
 * The features of an `applyEdits`, `addFeatures` or `updateFeatures` request, checked against the
 * schema of their layer and turned into the column values the storage writes. Pure: no HTTP, no
 * database. A feature that cannot be written gets an `EditError` with the code and wording of
 * ArcGIS's per-feature edit results; the route puts it in `addResults` / `updateResults`.
 *
 * Sources (ArcGIS REST API, Enterprise reference):
 * - "Apply Edits (Feature Service/Layer)": the `adds`, `updates`, `deletes` and `useGlobalIds`
 *   parameters, and "For hosted feature services, a field's default value is now applied when a
 *   row is added with no provided value" (new at 11.1).
 * - "Feature service error codes" ("Editing errors"): the codes and descriptions used below.
 * - "Feature object": "The values are the field values, and they can be any of the standard JSON
 *   types: string, number, and boolean. Note that date values are encoded as numbers. The number
 *   represents the number of milliseconds since epoch (January 1, 1970) in UTC."
 */

/** What goes to SQLite or PostgreSQL: dates as epoch milliseconds, GUIDs as `{UPPER-CASE}`. */
export type ColumnValue = string | number | null;

/** The `error` of a failed edit result: an ArcGIS edit error code and its description. */
export interface EditError {
  code: number;
  description: string;
}

export type Checked<T> = { ok: true; value: T } | { ok: false; error: EditError };

export interface CheckedAdd {
  /** Every column of the layer but the object id's, keyed by column name. */
  columns: Record<string, ColumnValue>;
  /** In the feature's own spatial reference (the caller projects it); null when it has none. */
  geometry: Geometry | null;
  /** The new feature's GlobalID (also in `columns`), when the layer has a GlobalID field. */
  globalId?: string;
}

export interface CheckedUpdate {
  /** The feature to update, unless `useGlobalIds`: then `globalId` names it and this is absent. */
  objectId?: number;
  /** With `useGlobalIds`, the feature to update (`{UPPER-CASE}`); absent otherwise. */
  globalId?: string;
  /** Only the columns the update changes (the edit-tracking ones included), keyed by column name. */
  columns: Record<string, ColumnValue>;
  /** Absent: the geometry stays as it is. Null: the feature's geometry is cleared. */
  geometry?: Geometry | null;
}

/** The ArcGIS edit error codes this module answers ("Feature service error codes"). */
export const EDIT_ERRORS = {
  /** "Non-specific edit content error." */
  nonSpecific: 1000,
  /** "Field: <value> is not nullable. Cannot set null value." */
  notNullable: 1001,
  /** "Geometry does not have m-values." */
  noMValues: 1002,
  /** "Geometry update not allowed." */
  geometryUpdateNotAllowed: 1004,
  /** "Object is missing." */
  objectMissing: 1011,
  /** "Geometry does not have z-values." */
  noZValues: 1014,
  /** "Geometry could not be set." */
  geometryNotSet: 1015,
  /** "Setting of value for <value> failed." */
  valueNotSet: 1016,
  /** "Missing GlobalID." */
  missingGlobalId: 1020,
  /** "Empty GlobalID." */
  emptyGlobalId: 1021,
  /** "Field: <value> is not editable." */
  notEditable: 1023,
} as const;

/**
 * Most features in one `adds`, `updates` or `features` parameter, and most ids in one `deletes`.
 * ArcGIS documents no count; its own clients send a few hundred to a few thousand per request
 * (ArcGIS Pro and the Python API split larger edits into batches). Ten thousand is above any of
 * them, and bounds the results array and the per-feature work of one request beside the body
 * limit, which alone would let a body of tiny features (`{}` is two bytes) through by the hundred
 * thousand.
 */
export const MAX_EDIT_FEATURES = 10_000;

const fail = (code: number, description: string): { ok: false; error: EditError } => ({
  ok: false,
  error: { code, description },
});

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** A value as an error quotes it: JSON, cut short so one huge value does not fill the answer. */
function show(value: unknown): string {
  const text = typeof value === "number" ? String(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/** A plain decimal number, as JSON writes one; what a numeric string must look like. */
const NUMERIC = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

const INTEGER_RANGES: Partial<Record<LayerField["type"], readonly [number, number]>> = {
  esriFieldTypeSmallInteger: [-32_768, 32_767],
  esriFieldTypeInteger: [-2_147_483_648, 2_147_483_647],
  // 64-bit in ArcGIS, but a JSON number is a double: past 2^53 the value the client sent is no
  // longer the one we would store.
  esriFieldTypeBigInteger: [-Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/** The largest finite 32-bit float: an esriFieldTypeSingle holds no more. */
const FLOAT32_MAX = 3.4028234663852886e38;
/** The range of an ECMAScript Date, in milliseconds either side of the epoch. */
const MAX_EPOCH_MS = 8.64e15;

const GUID = /^(\{)?([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})(\})?$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME_ONLY = /^([01]\d|2[0-3]):([0-5]\d):([0-5]\d)$/;
/**
 * ISO 8601 with an offset, as in the Apply Edits example `"2003-01-25T17:00:00-05:00"`. Offsets
 * reach ±14:00 (the span of SQL Server's datetimeoffset, which holds these values in ArcGIS
 * Online), fractions of a second up to its 7 digits.
 */
const TIMESTAMP_OFFSET =
  /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d):([0-5]\d)(\.\d{1,7})?(Z|[+-](?:(?:0\d|1[0-3]):[0-5]\d|14:00))$/;
/** Standard base64 ("Hosted feature services support adding or updating BLOB column values in Base64"). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
/** A UTF-16 surrogate without its other half: not text, and no database stores it as given. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

type Converted = { ok: true; value: string | number } | { ok: false; reason: string };
const bad = (reason: string): Converted => ({ ok: false, reason });
const good = (value: string | number): Converted => ({ ok: true, value });

/** A number given as a JSON number or as a plain numeric string; undefined for anything else. */
function numberOf(value: unknown): number | undefined {
  if (typeof value === "number") return value;
  if (typeof value === "string" && NUMERIC.test(value)) return Number(value);
  return undefined;
}

/** A GUID in any case, with or without braces, as ArcGIS writes it: `{UPPER-CASE}`. */
export function normalizeGuid(value: string): string | undefined {
  const match = GUID.exec(value);
  if (!match || (match[1] === undefined) !== (match[3] === undefined)) return undefined;
  return `{${(match[2] as string).toUpperCase()}}`;
}

/** Whether year-month-day names a day of the proleptic Gregorian calendar (years 1 to 9999). */
function isCalendarDate(year: number, month: number, day: number): boolean {
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const date = new Date(Date.UTC(2000, month - 1, day));
  date.setUTCFullYear(year);
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

function text(value: unknown, what: string): Converted {
  if (typeof value !== "string") return bad(`${show(value)} is not a string; ${what}`);
  if (value.includes("\u0000"))
    return bad("the text contains a NUL character (U+0000), which no field holds");
  if (LONE_SURROGATE.test(value)) return bad("the text contains an unpaired UTF-16 surrogate");
  return good(value);
}

/**
 * A non-null attribute value as its field's column holds it, or why it cannot be. Lenient where
 * the JSON types allow no doubt (ArcGIS's feature object takes "string, number, and boolean"
 * values): a numeric string for a number, a number for a string, a boolean for an integer
 * (`"APPROVED": true` in ArcGIS's own examples; there is no Boolean field type). Never lossy:
 * 1.5 is not an integer, and 70000 is not a SmallInteger.
 */
function convert(field: LayerField, value: unknown): Converted {
  const type = field.type;
  switch (type) {
    case "esriFieldTypeSmallInteger":
    case "esriFieldTypeInteger":
    case "esriFieldTypeBigInteger": {
      const n = typeof value === "boolean" ? (value ? 1 : 0) : numberOf(value);
      if (n === undefined || !Number.isFinite(n)) return bad(`${show(value)} is not a number`);
      if (!Number.isInteger(n)) return bad(`${show(value)} is not an integer`);
      const [min, max] = INTEGER_RANGES[type] as readonly [number, number];
      if (n < min || n > max) {
        return bad(`${show(value)} is outside the range of an ${type} field (${min} to ${max})`);
      }
      return good(n + 0); // -0 as 0
    }
    case "esriFieldTypeSingle":
    case "esriFieldTypeDouble": {
      const n = numberOf(value);
      if (n === undefined || !Number.isFinite(n)) return bad(`${show(value)} is not a finite number`);
      if (type === "esriFieldTypeSingle" && Math.abs(n) > FLOAT32_MAX) {
        return bad(`${show(value)} is beyond the range of an esriFieldTypeSingle field (±${FLOAT32_MAX})`);
      }
      return good(n + 0);
    }
    case "esriFieldTypeString": {
      const given = typeof value === "number" && Number.isFinite(value) ? String(value) : value;
      const checked = text(given, "the field holds text");
      if (!checked.ok) return checked;
      const s = checked.value as string;
      // Counted in UTF-16 code units, as JavaScript's `length` counts them: ArcGIS Online keeps
      // hosted data in SQL Server, whose nvarchar(n) counts UTF-16 byte-pairs. PostgreSQL (hosted
      // data in ArcGIS Enterprise) counts code points, never more, so what fits here fits there.
      const length = field.length ?? Number.POSITIVE_INFINITY;
      if (s.length > length)
        return bad(`the text is ${s.length} characters long; the field holds at most ${length}`);
      return good(s);
    }
    case "esriFieldTypeDate": {
      // "date values are encoded as numbers": epoch milliseconds. Date strings are not in the
      // documented format, and guessing their time zone would store a different instant.
      const n = numberOf(value);
      if (n === undefined || !Number.isFinite(n)) {
        return bad(`${show(value)} is not a date: dates are milliseconds since 1970-01-01 UTC, as a number`);
      }
      if (Math.abs(n) > MAX_EPOCH_MS)
        return bad(`${show(value)} is beyond the range of a date (±${MAX_EPOCH_MS} ms)`);
      // Fractions of a millisecond (Python's time.time() * 1000) mean nothing to a date field.
      return good(Math.round(n) + 0);
    }
    case "esriFieldTypeDateOnly": {
      const match = typeof value === "string" ? DATE_ONLY.exec(value) : null;
      if (!match || !isCalendarDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
        return bad(`${show(value)} is not a date as YYYY-MM-DD`);
      }
      return good(value as string);
    }
    case "esriFieldTypeTimeOnly": {
      if (typeof value !== "string" || !TIME_ONLY.test(value)) {
        return bad(`${show(value)} is not a time of day as HH:MM:SS`);
      }
      return good(value);
    }
    case "esriFieldTypeTimestampOffset": {
      const match = typeof value === "string" ? TIMESTAMP_OFFSET.exec(value) : null;
      if (!match || !isCalendarDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
        return bad(`${show(value)} is not a timestamp with an offset, as YYYY-MM-DDTHH:MM:SS±HH:MM`);
      }
      // ArcGIS writes the offset as digits; Z is the same instant with offset +00:00.
      return good(match[8] === "Z" ? `${(value as string).slice(0, -1)}+00:00` : (value as string));
    }
    case "esriFieldTypeGUID":
    case "esriFieldTypeGlobalID": {
      const guid = typeof value === "string" ? normalizeGuid(value) : undefined;
      if (guid === undefined) return bad(`${show(value)} is not a GUID ({8-4-4-4-12} hexadecimal digits)`);
      return good(guid);
    }
    case "esriFieldTypeBlob": {
      if (typeof value !== "string" || !BASE64.test(value)) return bad("the value is not base64 text");
      return good(value);
    }
    case "esriFieldTypeXML":
      return text(value, "the field holds XML text");
    default:
      // OID, Geometry and Raster fields: the schema keeps none that an attribute could set.
      return bad(`the field is of type ${type}, which takes no attribute value`);
  }
}

/** Why a converted value is outside its field's domain, or undefined when it is inside. */
function outsideDomain(field: LayerField, value: string | number): string | undefined {
  const domain = field.domain;
  if (!domain) return undefined;
  const named = domain.name ? `domain '${domain.name}'` : "its domain";
  if (domain.type === "codedValue") {
    // Codes are compared as the field's type holds them: 1 and "1" are one code of an integer
    // field, two different ones of a string field.
    const matches = domain.codedValues.some(({ code }) =>
      typeof value === "number"
        ? (typeof code === "number" ? code : numberOf(code)) === value
        : String(code) === value,
    );
    if (matches) return undefined;
    const codes = domain.codedValues.slice(0, 10).map(({ code }) => show(code));
    const more = domain.codedValues.length > 10 ? `, ... (${domain.codedValues.length} in all)` : "";
    return `${show(value)} is not a code of ${named} (${codes.join(", ")}${more})`;
  }
  const [min, max] = domain.range;
  if (typeof value === "number" && (value < min || value > max)) {
    return `${show(value)} is outside the range of ${named} (${min} to ${max})`;
  }
  return undefined;
}

/**
 * A field's default value as its column holds it (null when the field has none), or why the field
 * cannot hold it: the schema changes check a default before existing rows receive it, as
 * `checkAdd` checks it before a new feature does.
 */
export function storedDefault(
  field: LayerField,
): { ok: true; value: ColumnValue } | { ok: false; reason: string } {
  if (field.defaultValue === null) return { ok: true, value: null };
  const converted = convert(field, field.defaultValue);
  if (!converted.ok) return converted;
  const outside = outsideDomain(field, converted.value);
  return outside === undefined ? converted : { ok: false, reason: outside };
}

/** A new GlobalID, as ArcGIS writes them: `{UPPER-CASE}`. */
export const newGlobalId = (): string => `{${randomUUID().toUpperCase()}}`;

const valueNotSet = (field: LayerField, reason: string) =>
  fail(EDIT_ERRORS.valueNotSet, `Setting of value for ${field.name} failed: ${reason}.`);
const notNullable = (field: LayerField, detail = "") =>
  fail(EDIT_ERRORS.notNullable, `Field: ${field.name} is not nullable. Cannot set null value.${detail}`);

/** An attribute value (null included) as its column holds it, with its field's rules applied. */
export function columnValue(field: LayerField, value: unknown): Checked<ColumnValue> {
  if (value === null) return field.nullable ? { ok: true, value: null } : notNullable(field);
  const converted = convert(field, value);
  if (!converted.ok) return valueNotSet(field, converted.reason);
  const outside = outsideDomain(field, converted.value);
  if (outside !== undefined) return valueNotSet(field, outside);
  return { ok: true, value: converted.value };
}

// ---------------------------------------------------------------------------------------------
// Features
// ---------------------------------------------------------------------------------------------

/** What a schema's fields mean to an edit, worked out once per schema rather than per feature. */
interface EditFieldsOf {
  byName: Map<string, LayerField>;
  /** Fields the service maintains: the object id, the GlobalID and the editor-tracking fields. */
  system: Set<LayerField>;
  tracking?: { creationDate: LayerField; creator: LayerField; editDate: LayerField; editor: LayerField };
}

const prepared = new WeakMap<LayerSchema, EditFieldsOf>();

function fieldsOf(schema: LayerSchema): EditFieldsOf {
  const known = prepared.get(schema);
  if (known) return known;
  const byName = new Map(schema.fields.map((f) => [f.name.toLowerCase(), f]));
  const system = new Set<LayerField>([schema.objectIdField]);
  if (schema.globalIdField) system.add(schema.globalIdField);
  let tracking: EditFieldsOf["tracking"];
  const names = schema.editFields;
  if (names) {
    const find = (name: string) => byName.get(name.toLowerCase()) as LayerField;
    tracking = {
      creationDate: find(names.creationDateField),
      creator: find(names.creatorField),
      editDate: find(names.editDateField),
      editor: find(names.editorField),
    };
    for (const f of Object.values(tracking)) system.add(f);
  }
  const result: EditFieldsOf = { byName, system, ...(tracking ? { tracking } : {}) };
  prepared.set(schema, result);
  return result;
}

interface FeatureParts {
  /** The attributes given for fields of the layer, by field; other names are left out. */
  given: Map<LayerField, unknown>;
  /** The feature's `geometry` member as sent (undefined when absent). */
  geometry: unknown;
}

/**
 * A feature's attributes matched to the layer's fields. Names are matched regardless of case (the
 * schema's names are unique so). A name that is no field of the layer is left out: ArcGIS's
 * documentation says nothing of such names and its edit error codes name none for an unknown
 * field, and clients send back the features a query gave them, whose attributes may carry names
 * the layer does not store (`Shape__Area`, names from an older schema).
 */
function readFeature(schema: LayerSchema, feature: unknown): Checked<FeatureParts> {
  if (!isRecord(feature)) {
    return fail(
      EDIT_ERRORS.nonSpecific,
      `Non-specific edit content error: a feature is a JSON object with attributes and geometry, not ${show(feature)}.`,
    );
  }
  const attributes = feature.attributes ?? {};
  if (!isRecord(attributes)) {
    return fail(
      EDIT_ERRORS.nonSpecific,
      `Non-specific edit content error: the feature's attributes are a JSON object of field names and values, not ${show(attributes)}.`,
    );
  }
  const { byName } = fieldsOf(schema);
  const given = new Map<LayerField, unknown>();
  const spelled = new Map<LayerField, string>();
  for (const [name, value] of Object.entries(attributes)) {
    const field = byName.get(name.toLowerCase());
    if (!field || value === undefined) continue;
    const earlier = spelled.get(field);
    if (earlier !== undefined) {
      return fail(
        EDIT_ERRORS.nonSpecific,
        `Non-specific edit content error: attributes '${earlier}' and '${name}' both name field ${field.name} (names are compared regardless of case).`,
      );
    }
    spelled.set(field, name);
    given.set(field, value);
  }
  return { ok: true, value: { given, geometry: feature.geometry } };
}

/** Whether an Esri JSON geometry is the empty geometry ArcGIS writes for "no shape". */
function isEmptyGeometry(value: Record<string, unknown>): boolean {
  for (const key of ["points", "paths", "rings"] as const) {
    if (Array.isArray(value[key]) && (value[key] as unknown[]).length === 0) return true;
  }
  return "x" in value && (value.x === null || value.x === "NaN");
}

/** A feature's geometry checked against its layer; null when it has none or an empty one. */
function readGeometry(schema: LayerSchema, raw: unknown): Checked<Geometry | null> {
  if (raw === undefined || raw === null) return { ok: true, value: null };
  if (schema.kind === "table" || schema.geometryType === undefined) {
    // "Records to be added to a table should not include geometry." Dropping it silently would
    // hide a client that writes to the wrong layer.
    return fail(
      EDIT_ERRORS.geometryNotSet,
      `Geometry could not be set: table ${schema.id} holds no geometry; send its records without one.`,
    );
  }
  if (isRecord(raw) && isEmptyGeometry(raw)) return { ok: true, value: null };
  const parsed = parseEsriGeometry(raw);
  if (!parsed.ok) {
    return fail(EDIT_ERRORS.geometryNotSet, `Geometry could not be set: geometry ${parsed.error.message}`);
  }
  const geometry = parsed.value;
  if (schema.hasZ && !geometry.hasZ) {
    return fail(
      EDIT_ERRORS.noZValues,
      "Geometry does not have z-values. The layer has z-values, and every geometry must carry them.",
    );
  }
  if (schema.hasM && !geometry.hasM) {
    return fail(
      EDIT_ERRORS.noMValues,
      "Geometry does not have m-values. The layer has m-values, and every geometry must carry them.",
    );
  }
  const checked = checkAgainstLayer(geometry, {
    geometryType: schema.geometryType,
    hasZ: schema.hasZ,
    hasM: schema.hasM,
  });
  if (!checked.ok) {
    return fail(EDIT_ERRORS.geometryNotSet, `Geometry could not be set: geometry ${checked.error.message}`);
  }
  return { ok: true, value: checked.value };
}

/**
 * The value of an attribute the caller sets: refused for a field that is not editable ("Field:
 * <value> is not editable."), else checked and converted.
 */
function callerValue(field: LayerField, value: unknown): Checked<ColumnValue> {
  if (!field.editable) return fail(EDIT_ERRORS.notEditable, `Field: ${field.name} is not editable.`);
  return columnValue(field, value);
}

/**
 * A new feature (`adds`, `addFeatures`). Every column but the object id's gets a value: the one
 * given, else the field's default (applied "when a row is added with no provided value"), else
 * null, which a field that is not nullable refuses.
 *
 * The service keeps the system fields: an object id in the attributes is ignored (the storage
 * assigns one), the editor-tracking fields are set from `now` and `editor` whatever the feature
 * says, and the GlobalID is a new one unless `useGlobalIds` is true and the feature gives one
 * ("If useGlobalIds is false or not specified, the globalIds values submitted with the features
 * are ignored and the service assigns new globalIds values to the new features").
 */
export function checkAdd(
  schema: LayerSchema,
  feature: unknown,
  options: { useGlobalIds: boolean; now: number; editor?: string },
): Checked<CheckedAdd> {
  const read = readFeature(schema, feature);
  if (!read.ok) return read;
  const { given } = read.value;
  const { system, tracking } = fieldsOf(schema);

  const columns: Record<string, ColumnValue> = {};
  for (const field of schema.fields) {
    if (system.has(field)) continue;
    if (given.has(field)) {
      const value = callerValue(field, given.get(field));
      if (!value.ok) return value;
      columns[field.column] = value.value;
    } else if (field.defaultValue !== null) {
      // The definition's default goes through the same checks: a default the field cannot hold
      // is the definition's mistake, and storing it would hand queries a value of the wrong type.
      const converted = convert(field, field.defaultValue);
      const reason = converted.ok ? outsideDomain(field, converted.value) : converted.reason;
      if (!converted.ok || reason !== undefined) {
        return valueNotSet(
          field,
          `the feature gives none, and the field's default value is not valid: ${reason}`,
        );
      }
      columns[field.column] = converted.value;
    } else if (!field.nullable) {
      return notNullable(field, " The feature gives no value, and the field has no default value.");
    } else {
      columns[field.column] = null;
    }
  }

  let globalId: string | undefined;
  const globalIdField = schema.globalIdField;
  if (globalIdField) {
    const offered = options.useGlobalIds ? given.get(globalIdField) : undefined;
    if (offered === undefined || offered === null) {
      globalId = newGlobalId();
    } else if (offered === "") {
      return fail(
        EDIT_ERRORS.emptyGlobalId,
        `Empty GlobalID. The feature's ${globalIdField.name} is an empty string.`,
      );
    } else {
      const converted = convert(globalIdField, offered);
      if (!converted.ok) return valueNotSet(globalIdField, converted.reason);
      globalId = converted.value as string;
    }
    columns[globalIdField.column] = globalId;
  }

  if (tracking) {
    const editor = options.editor ?? null;
    columns[tracking.creationDate.column] = options.now;
    columns[tracking.creator.column] = editor;
    columns[tracking.editDate.column] = options.now;
    columns[tracking.editor.column] = editor;
  }

  const geometry = readGeometry(schema, read.value.geometry);
  if (!geometry.ok) return geometry;
  return { ok: true, value: { columns, geometry: geometry.value, ...(globalId ? { globalId } : {}) } };
}

/** Non-negative safe integers: what an object id can be (ArcGIS: "FIDs must not be negative"). */
function objectIdOf(value: unknown): number | undefined {
  const n = numberOf(value);
  return n !== undefined && Number.isSafeInteger(n) && n >= 0 ? n + 0 : undefined;
}

/**
 * A change to an existing feature (`updates`, `updateFeatures`). It names its feature by object
 * id in its attributes, or by GlobalID when `useGlobalIds` is true ("the globalId value is used
 * to identify the feature when applying the update (the object ID of the feature is not
 * required)"). Only the fields it gives change; the other system fields it gives are ignored,
 * and the edit date and editor are set from `now` and `editor`.
 *
 * Its geometry replaces the feature's when present, and an empty one clears it; a `null` or
 * absent geometry leaves it as it is, so a client that writes `"geometry": null` in an
 * attribute-only update does not erase shapes. Either kind of change is refused when the layer
 * does not allow geometry updates.
 */
export function checkUpdate(
  schema: LayerSchema,
  feature: unknown,
  options: { useGlobalIds: boolean; allowGeometryUpdates: boolean; now: number; editor?: string },
): Checked<CheckedUpdate> {
  const read = readFeature(schema, feature);
  if (!read.ok) return read;
  const { given } = read.value;
  const { system, tracking } = fieldsOf(schema);

  let target: { objectId: number } | { globalId: string };
  if (options.useGlobalIds) {
    const field = schema.globalIdField;
    if (!field) {
      return fail(
        EDIT_ERRORS.nonSpecific,
        `Non-specific edit content error: ${schema.kind} ${schema.id} has no GlobalID field, so useGlobalIds cannot name its features.`,
      );
    }
    const offered = given.get(field);
    if (offered === undefined || offered === null) {
      return fail(
        EDIT_ERRORS.missingGlobalId,
        `Missing GlobalID. With useGlobalIds, an update names its feature by ${field.name}.`,
      );
    }
    if (offered === "") {
      return fail(
        EDIT_ERRORS.emptyGlobalId,
        `Empty GlobalID. The feature's ${field.name} is an empty string.`,
      );
    }
    const guid = typeof offered === "string" ? normalizeGuid(offered) : undefined;
    if (guid === undefined) {
      return fail(
        EDIT_ERRORS.objectMissing,
        `Object is missing: ${field.name} ${show(offered)} is not a GlobalID ({8-4-4-4-12} hexadecimal digits).`,
      );
    }
    target = { globalId: guid };
  } else {
    const field = schema.objectIdField;
    const offered = given.get(field);
    if (offered === undefined || offered === null) {
      return fail(
        EDIT_ERRORS.objectMissing,
        `Object is missing: the feature has no ${field.name} attribute, which names the feature to update.`,
      );
    }
    const objectId = objectIdOf(offered);
    if (objectId === undefined) {
      return fail(
        EDIT_ERRORS.objectMissing,
        `Object is missing: ${field.name} ${show(offered)} is not an object id (a non-negative integer).`,
      );
    }
    target = { objectId };
  }

  const columns: Record<string, ColumnValue> = {};
  for (const [field, offered] of given) {
    if (system.has(field)) continue;
    const value = callerValue(field, offered);
    if (!value.ok) return value;
    columns[field.column] = value.value;
  }
  if (tracking) {
    columns[tracking.editDate.column] = options.now;
    columns[tracking.editor.column] = options.editor ?? null;
  }

  const raw = read.value.geometry;
  if (raw === undefined || raw === null) return { ok: true, value: { ...target, columns } };
  if (schema.kind === "layer" && !options.allowGeometryUpdates) {
    return fail(
      EDIT_ERRORS.geometryUpdateNotAllowed,
      "Geometry update not allowed. The layer's allowGeometryUpdates is false; send the update without a geometry.",
    );
  }
  const geometry = readGeometry(schema, raw);
  if (!geometry.ok) return geometry;
  return { ok: true, value: { ...target, columns, geometry: geometry.value } };
}

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/**
 * The JSON array of an `adds`, `updates` or `features` parameter (`adds=[<feature1>, <feature2>]`).
 * Absent or empty is no features. The reason, when it fails, follows the parameter's name in the
 * request-level error; what is wrong with one feature is that feature's edit result instead.
 */
export function parseFeatureList(
  raw: string | undefined,
  parameter: "adds" | "updates" | "features",
): { ok: true; value: unknown[] } | { ok: false; reason: string } {
  const text = raw?.trim() ?? "";
  if (text === "") return { ok: true, value: [] };
  let decoded: unknown;
  try {
    decoded = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `is not valid JSON (${(err as Error).message})` };
  }
  if (!Array.isArray(decoded)) {
    return {
      ok: false,
      reason: `must be a JSON array of features, as in ${parameter}=[{"attributes": {...}, "geometry": {...}}]`,
    };
  }
  if (decoded.length > MAX_EDIT_FEATURES) {
    return {
      ok: false,
      reason: `has ${decoded.length} features; one request takes at most ${MAX_EDIT_FEATURES}, send the rest in another`,
    };
  }
  return { ok: true, value: decoded };
}

/** The features a `deletes` parameter names: by object id, or by GlobalID with `useGlobalIds`. */
export type DeleteIds = { objectIds: number[] } | { globalIds: string[] };

/**
 * A `deletes` parameter, in the forms ArcGIS documents: `deletes=37, 462`, `deletes=[37, 462]`,
 * and with `useGlobalIds` `deletes=["{1A9F8368-...}", "{6CE34136-...}"]` (the brackets-less list
 * of GlobalIDs is read too). Absent or empty is no ids. Ids are kept in order, repeats included:
 * each gets its own delete result.
 */
export function parseDeletes(
  raw: string | undefined,
  options: { useGlobalIds: boolean } = { useGlobalIds: false },
): { ok: true; value: DeleteIds } | { ok: false; reason: string } {
  const text = raw?.trim() ?? "";
  const empty: DeleteIds = options.useGlobalIds ? { globalIds: [] } : { objectIds: [] };
  if (text === "") return { ok: true, value: empty };
  let items: unknown[];
  if (text.startsWith("[")) {
    let decoded: unknown;
    try {
      decoded = JSON.parse(text);
    } catch (err) {
      return { ok: false, reason: `is not valid JSON (${(err as Error).message})` };
    }
    if (!Array.isArray(decoded)) return { ok: false, reason: "must be a JSON array of ids" };
    items = decoded;
  } else {
    items = text.split(",").map((item) => item.trim());
  }
  if (items.length > MAX_EDIT_FEATURES) {
    return {
      ok: false,
      reason: `names ${items.length} features; one request deletes at most ${MAX_EDIT_FEATURES}, send the rest in another`,
    };
  }
  if (options.useGlobalIds) {
    const globalIds: string[] = [];
    for (const [i, item] of items.entries()) {
      const guid = typeof item === "string" ? normalizeGuid(item) : undefined;
      if (guid === undefined) {
        return {
          ok: false,
          reason: `has ${show(item)} at position ${i + 1}, which is not a GlobalID ({8-4-4-4-12} hexadecimal digits; useGlobalIds is true)`,
        };
      }
      globalIds.push(guid);
    }
    return { ok: true, value: { globalIds } };
  }
  const objectIds: number[] = [];
  for (const [i, item] of items.entries()) {
    const id =
      typeof item === "number" || (typeof item === "string" && /^\d+$/.test(item))
        ? objectIdOf(item)
        : undefined;
    if (id === undefined) {
      return {
        ok: false,
        reason: `has ${show(item)} at position ${i + 1}, which is not an object id (a non-negative integer)`,
      };
    }
    objectIds.push(id);
  }
  return { ok: true, value: { objectIds } };
}
