import type { GeometryType, SpatialReference } from "./geometry/esri-json.js";
import type { EsriFieldType } from "./query/where.js";
import type { LayerDefinition } from "./service-definition.js";

/**
 * What a hosted layer or table stores, read from its definition: its fields with the columns that
 * hold them, its object id and GlobalID fields, its geometry, and the editor-tracking fields. Pure:
 * the storage (`layer-store.ts`) builds its tables and queries from this, the query and edit code
 * checks values against it, and nothing here touches the database.
 *
 * Every field lives in a column of its own, named `f_<lower-case name>` (field names are
 * identifiers, unique regardless of case), so no field can collide with the storage's own columns:
 * `objectid` (the object id field), `shape` (the geometry as Esri JSON, without its spatial reference)
 * and `minx`, `miny`, `maxx`, `maxy` (its bounds, for the spatial index and the extent).
 */

export const FIELD_TYPES: readonly EsriFieldType[] = [
  "esriFieldTypeSmallInteger",
  "esriFieldTypeInteger",
  "esriFieldTypeBigInteger",
  "esriFieldTypeSingle",
  "esriFieldTypeDouble",
  "esriFieldTypeString",
  "esriFieldTypeDate",
  "esriFieldTypeDateOnly",
  "esriFieldTypeTimeOnly",
  "esriFieldTypeTimestampOffset",
  "esriFieldTypeOID",
  "esriFieldTypeGeometry",
  "esriFieldTypeBlob",
  "esriFieldTypeRaster",
  "esriFieldTypeGUID",
  "esriFieldTypeGlobalID",
  "esriFieldTypeXML",
];

export interface CodedValueDomain {
  type: "codedValue";
  name: string;
  codedValues: { name: string; code: string | number }[];
}

export interface RangeDomain {
  type: "range";
  name: string;
  range: [number, number];
}

export type Domain = CodedValueDomain | RangeDomain;

export interface LayerField {
  /** As the definition spells it; `where`, `outFields` and attributes name it in any case. */
  name: string;
  type: EsriFieldType;
  alias: string;
  /** The database column: `objectid` for the object id field, else `f_<lower-case name>`. */
  column: string;
  /** Most characters of a string field (ArcGIS's default: 255 when the definition gives none). */
  length?: number;
  nullable: boolean;
  editable: boolean;
  /** The value a new feature gets when it gives none; null when the field has no default. */
  defaultValue: string | number | null;
  domain?: Domain;
}

/** The editor-tracking fields a layer keeps, as `editFieldsInfo` names them. */
export interface EditFields {
  creationDateField: string;
  creatorField: string;
  editDateField: string;
  editorField: string;
}

export interface LayerSchema {
  /** The layer or table id in its service. */
  id: number;
  kind: "layer" | "table";
  /** Every field of the definition, the object id field first. */
  fields: LayerField[];
  objectIdField: LayerField;
  globalIdField?: LayerField;
  /** Absent for tables. Envelopes are not stored: a layer of them is refused. */
  geometryType?: Exclude<GeometryType, "esriGeometryEnvelope">;
  hasZ: boolean;
  hasM: boolean;
  /** The layer's spatial reference (the service's when the layer names none). */
  spatialReference?: SpatialReference;
  /** Present when the service's `editorTrackingInfo.enableEditorTracking` is true. */
  editFields?: EditFields;
}

/** Field names as ArcGIS accepts them in hosted layers: an ASCII identifier. */
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** Fields of one layer: ArcGIS's limit for hosted layers is far above any real schema. */
export const MAX_FIELDS = 1000;
/** String fields: ArcGIS's default length, and the most we store (1 GB-ish values are refused). */
export const DEFAULT_STRING_LENGTH = 255;
export const MAX_STRING_LENGTH = 1_073_741_822;
/** Coded values of one domain. */
const MAX_CODED_VALUES = 10_000;

/** The storage's own columns, beside the fields'. */
export const OID_COLUMN = "objectid";
export const SHAPE_COLUMN = "shape";

export const DEFAULT_EDIT_FIELDS: EditFields = {
  creationDateField: "CreationDate",
  creatorField: "Creator",
  editDateField: "EditDate",
  editorField: "Editor",
};

export class SchemaError extends Error {}

const columnOf = (name: string) => `f_${name.toLowerCase()}`;

function fail(layer: LayerDefinition, reason: string): never {
  throw new SchemaError(`has ${layer.name ? `layer '${layer.name}'` : "a layer"} ${reason}`);
}

function readDomain(layer: LayerDefinition, field: string, raw: unknown): Domain | undefined {
  if (raw === undefined || raw === null) return undefined;
  const d = raw as Record<string, unknown>;
  if (typeof d !== "object" || Array.isArray(d))
    fail(layer, `where field '${field}' has a domain that is not an object`);
  const name = typeof d.name === "string" ? d.name : "";
  if (d.type === "codedValue") {
    const values = d.codedValues;
    if (!Array.isArray(values) || values.length > MAX_CODED_VALUES) {
      fail(
        layer,
        `where field '${field}' has a coded-value domain without a list of at most ${MAX_CODED_VALUES} codedValues`,
      );
    }
    const codedValues = values.map((v: unknown) => {
      const entry = v as { name?: unknown; code?: unknown };
      if (
        typeof entry !== "object" ||
        entry === null ||
        (typeof entry.code !== "string" && typeof entry.code !== "number")
      ) {
        fail(layer, `where field '${field}' has a coded value without a string or number code`);
      }
      return { name: typeof entry.name === "string" ? entry.name : String(entry.code), code: entry.code };
    });
    return { type: "codedValue", name, codedValues };
  }
  if (d.type === "range") {
    const r = d.range;
    if (
      !Array.isArray(r) ||
      r.length !== 2 ||
      !r.every((n) => typeof n === "number" && Number.isFinite(n)) ||
      r[0] > r[1]
    ) {
      fail(layer, `where field '${field}' has a range domain without a range [min, max]`);
    }
    return { type: "range", name, range: [r[0], r[1]] };
  }
  // Inherited and other domain kinds constrain nothing we can check: kept in the definition only.
  return undefined;
}

function readField(layer: LayerDefinition, raw: unknown): LayerField {
  const f = raw as Record<string, unknown>;
  if (typeof f !== "object" || f === null || Array.isArray(f))
    fail(layer, "with a field that is not an object");
  const name = f.name;
  if (typeof name !== "string" || !FIELD_NAME.test(name)) {
    fail(
      layer,
      `with field name ${JSON.stringify(name)}: a field name is a letter or underscore, then up to 63 letters, digits or underscores`,
    );
  }
  const type = f.type as EsriFieldType;
  if (!FIELD_TYPES.includes(type))
    fail(layer, `where field '${name}' has type ${JSON.stringify(f.type)}, which is not an esriFieldType`);
  if (type === "esriFieldTypeRaster" || type === "esriFieldTypeGeometry") {
    fail(layer, `where field '${name}' has type ${type}, which hosted layers do not store as a field`);
  }
  let length: number | undefined;
  if (type === "esriFieldTypeString") {
    const given = f.length;
    if (given !== undefined && given !== null) {
      if (typeof given !== "number" || !Number.isInteger(given) || given < 1 || given > MAX_STRING_LENGTH) {
        fail(
          layer,
          `where field '${name}' has length ${JSON.stringify(given)}; a length is 1 to ${MAX_STRING_LENGTH}`,
        );
      }
      length = given;
    } else length = DEFAULT_STRING_LENGTH;
  }
  const identity = type === "esriFieldTypeOID" || type === "esriFieldTypeGlobalID";
  const defaultValue = f.defaultValue;
  if (
    defaultValue !== undefined &&
    defaultValue !== null &&
    typeof defaultValue !== "string" &&
    typeof defaultValue !== "number"
  ) {
    fail(layer, `where field '${name}' has a defaultValue that is not a string or a number`);
  }
  return {
    name,
    type,
    alias: typeof f.alias === "string" ? f.alias : name,
    column: type === "esriFieldTypeOID" ? OID_COLUMN : columnOf(name),
    ...(length !== undefined ? { length } : {}),
    nullable: identity ? false : f.nullable !== false,
    editable: identity ? false : f.editable !== false,
    defaultValue: (defaultValue ?? null) as string | number | null,
    ...(readDomain(layer, name, f.domain) ? { domain: readDomain(layer, name, f.domain) as Domain } : {}),
  };
}

/**
 * The schema of a stored layer or table. A definition without an object id field gets one named
 * `OBJECTID`, as ArcGIS adds it; editor tracking adds its four fields when the definition lacks
 * them. Throws `SchemaError` (a reason to put after the parameter's name) when the definition
 * cannot be stored.
 */
export function layerSchema(
  layer: LayerDefinition,
  kind: "layer" | "table",
  service: { spatialReference?: SpatialReference; editorTrackingInfo?: Record<string, boolean> },
): LayerSchema {
  const rawFields = layer.fields;
  if (rawFields !== undefined && !Array.isArray(rawFields)) fail(layer, "whose fields are not a list");
  const given = (rawFields ?? []) as unknown[];
  if (given.length > MAX_FIELDS) fail(layer, `with more than ${MAX_FIELDS} fields`);
  const fields = given.map((f) => readField(layer, f));

  const seen = new Set<string>();
  for (const f of fields) {
    const key = f.name.toLowerCase();
    if (seen.has(key))
      fail(layer, `with two fields named '${f.name}' (names are compared regardless of case)`);
    seen.add(key);
  }

  const oids = fields.filter((f) => f.type === "esriFieldTypeOID");
  if (oids.length > 1) fail(layer, "with more than one field of type esriFieldTypeOID");
  const declaredOid = typeof layer.objectIdField === "string" ? layer.objectIdField : undefined;
  let objectIdField = oids[0];
  if (!objectIdField) {
    const name = declaredOid ?? "OBJECTID";
    if (seen.has(name.toLowerCase()))
      fail(layer, `whose objectIdField '${name}' is not of type esriFieldTypeOID`);
    objectIdField = readField(layer, {
      name,
      type: "esriFieldTypeOID",
      alias: name,
      nullable: false,
      editable: false,
    });
    fields.unshift(objectIdField);
    seen.add(name.toLowerCase());
  } else {
    if (declaredOid !== undefined && declaredOid.toLowerCase() !== objectIdField.name.toLowerCase()) {
      fail(
        layer,
        `whose objectIdField '${declaredOid}' is not its esriFieldTypeOID field '${objectIdField.name}'`,
      );
    }
    fields.splice(fields.indexOf(objectIdField), 1);
    fields.unshift(objectIdField);
  }

  const globalIds = fields.filter((f) => f.type === "esriFieldTypeGlobalID");
  if (globalIds.length > 1) fail(layer, "with more than one field of type esriFieldTypeGlobalID");

  let editFields: EditFields | undefined;
  if (service.editorTrackingInfo?.enableEditorTracking === true) {
    const info = (layer.editFieldsInfo ?? {}) as Partial<Record<keyof EditFields, unknown>>;
    editFields = { ...DEFAULT_EDIT_FIELDS };
    for (const key of Object.keys(DEFAULT_EDIT_FIELDS) as (keyof EditFields)[]) {
      const name = info[key];
      if (typeof name === "string") editFields[key] = name;
      const wanted = key.endsWith("DateField") ? "esriFieldTypeDate" : "esriFieldTypeString";
      const existing = fields.find((f) => f.name.toLowerCase() === editFields?.[key].toLowerCase());
      if (existing) {
        if (existing.type !== wanted)
          fail(layer, `whose editor-tracking field '${existing.name}' is not of type ${wanted}`);
        existing.editable = false;
        editFields[key] = existing.name;
      } else {
        fields.push(
          readField(layer, {
            name: editFields[key],
            type: wanted,
            alias: editFields[key],
            nullable: true,
            editable: false,
            ...(wanted === "esriFieldTypeString" ? { length: 128 } : {}),
          }),
        );
      }
    }
  }

  let geometryType: LayerSchema["geometryType"];
  if (kind === "layer") {
    const g = layer.geometryType;
    if (g === undefined) fail(layer, "without a geometryType");
    if (g === "esriGeometryEnvelope" || g === "esriGeometryMultiPatch") {
      fail(layer, `with geometryType ${g}, which hosted layers do not store; use esriGeometryPolygon`);
    }
    geometryType = g as LayerSchema["geometryType"];
  }
  const spatialReference =
    (layer.spatialReference as SpatialReference | undefined) ??
    (layer.extent as { spatialReference?: SpatialReference } | undefined)?.spatialReference ??
    service.spatialReference;

  return {
    id: layer.id,
    kind,
    fields,
    objectIdField,
    ...(globalIds[0] ? { globalIdField: globalIds[0] } : {}),
    ...(geometryType ? { geometryType } : {}),
    hasZ: kind === "layer" && layer.hasZ === true,
    hasM: kind === "layer" && layer.hasM === true,
    ...(spatialReference ? { spatialReference } : {}),
    ...(editFields ? { editFields } : {}),
  };
}

/** The field named `name` in any case, or undefined. */
export function fieldNamed(schema: LayerSchema, name: string): LayerField | undefined {
  const key = name.toLowerCase();
  return schema.fields.find((f) => f.name.toLowerCase() === key);
}

/** The field as the layer resource and query answers list it. */
export function fieldJson(field: LayerField): Record<string, unknown> {
  return {
    name: field.name,
    type: field.type,
    alias: field.alias,
    sqlType: "sqlTypeOther",
    ...(field.length !== undefined ? { length: field.length } : {}),
    nullable: field.nullable,
    editable: field.editable,
    domain: field.domain ?? null,
    defaultValue: field.defaultValue,
  };
}

/**
 * A layer definition with what its schema completed written in: the fields (with the object id
 * field and editor-tracking fields ArcGIS adds), `objectIdField`, `globalIdField` and, with editor
 * tracking, `editFieldsInfo`.
 */
export function completedDefinition(layer: LayerDefinition, schema: LayerSchema): LayerDefinition {
  return {
    ...layer,
    fields: schema.fields.map(fieldJson),
    objectIdField: schema.objectIdField.name,
    globalIdField: schema.globalIdField?.name ?? "",
    ...(schema.editFields ? { editFieldsInfo: { ...schema.editFields } } : {}),
  };
}
