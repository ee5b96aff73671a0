import { errors } from "../errors.js";
import type { JsonSchema } from "../validation/params.js";
import { storedDefault } from "./edits/values.js";
import {
  DEFAULT_STRING_LENGTH,
  fieldJson,
  fieldNamed,
  type LayerField,
  type LayerSchema,
  MAX_FIELDS,
  layerSchema as readLayerSchema,
  SchemaError,
} from "./layer-schema.js";

/**
 * Hosted feature service definitions (`interface.md` §4.1, `wire.md` §6): the JSON schemas that
 * type-check what clients send, and the pure functions that build, change and render a definition.
 * Nothing here touches the database.
 */

/** The `currentVersion` a hosted service reports, as ArcGIS Server does: a number. */
export const SERVER_VERSION = 11.3;

export const CAPABILITIES = [
  "Create",
  "Delete",
  "Query",
  "Update",
  "Editing",
  "Sync",
  "Extract",
  "ChangeTracking",
] as const;
export const QUERY_FORMATS = ["JSON", "geoJSON", "PBF"] as const;
const GEOMETRY_TYPES = [
  "esriGeometryPoint",
  "esriGeometryMultipoint",
  "esriGeometryPolyline",
  "esriGeometryPolygon",
  "esriGeometryEnvelope",
  "esriGeometryMultiPatch",
];

/** The enterprise rule: no spaces or special characters other than underscore. */
const SERVICE_NAME = /^[A-Za-z0-9_]+$/;
export const MAX_SERVICE_NAME = 128;
/** Layers plus tables of one service; keeps one definition row a reasonable size. */
const MAX_LAYERS = 1000;
/**
 * Highest layer or table id: the layer resource answers ids of up to nine digits, and bounding
 * ids keeps them exact integers (a client's id of 1e300 plus one is 1e300 again, a duplicate).
 */
const MAX_LAYER_ID = 999_999_999;

export interface SpatialReference {
  wkid: number;
  latestWkid?: number;
  wkt?: string;
}

export interface Extent {
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
  spatialReference?: SpatialReference;
}

/** Service-level properties: what createParameters and updateDefinition may set. */
export interface ServiceProperties {
  serviceDescription?: string;
  hasStaticData?: boolean;
  maxRecordCount?: number;
  supportedQueryFormats?: string;
  capabilities?: string;
  description?: string;
  copyrightText?: string;
  spatialReference?: SpatialReference;
  initialExtent?: Extent;
  allowGeometryUpdates?: boolean;
  units?: string;
  xssPreventionInfo?: { xssPreventionEnabled?: boolean; xssPreventionRule?: string; xssInputRule?: string };
  editorTrackingInfo?: Record<string, boolean>;
}

export interface CreateParameters extends ServiceProperties {
  name: string;
}

/** A layer or table as stored: whatever the client defined, with an id and a name. */
export interface LayerDefinition {
  id: number;
  name: string;
  [property: string]: unknown;
}

export interface StoredService {
  name: string;
  definition: ServiceProperties;
  layers: LayerDefinition[];
  tables: LayerDefinition[];
}

const spatialReferenceSchema = {
  type: "object",
  required: ["wkid"],
  properties: {
    wkid: { type: "integer" },
    latestWkid: { type: "integer" },
    wkt: { type: "string", maxLength: 65536 },
  },
};

const extentSchema = {
  type: "object",
  required: ["xmin", "ymin", "xmax", "ymax"],
  properties: {
    xmin: { type: "number" },
    ymin: { type: "number" },
    xmax: { type: "number" },
    ymax: { type: "number" },
    spatialReference: spatialReferenceSchema,
  },
};

// Unknown properties are accepted and ignored: clients (the ArcGIS API for Python, older
// arcgis-rest-js) send more than `interface.md` lists, and refusing them would break those scripts.
const servicePropertySchemas = {
  serviceDescription: { type: "string", maxLength: 32000 },
  hasStaticData: { type: "boolean" },
  maxRecordCount: { type: "integer", minimum: 1 },
  supportedQueryFormats: { type: "string", maxLength: 256 },
  capabilities: { type: "string", maxLength: 512 },
  description: { type: "string", maxLength: 32000 },
  copyrightText: { type: "string", maxLength: 4096 },
  spatialReference: spatialReferenceSchema,
  initialExtent: extentSchema,
  allowGeometryUpdates: { type: "boolean" },
  units: { type: "string", maxLength: 64 },
  xssPreventionInfo: {
    type: "object",
    properties: {
      xssPreventionEnabled: { type: "boolean" },
      xssPreventionRule: { type: "string", maxLength: 64 },
      xssInputRule: { type: "string", maxLength: 64 },
    },
  },
  editorTrackingInfo: { type: "object", additionalProperties: { type: "boolean" } },
};

export const createParametersSchema: JsonSchema = {
  type: "object",
  required: ["name"],
  properties: {
    name: { type: "string", minLength: 1, maxLength: MAX_SERVICE_NAME },
    ...servicePropertySchemas,
  },
};

export const updateDefinitionSchema: JsonSchema = {
  type: "object",
  properties: { name: { type: "string" }, ...servicePropertySchemas },
};

const layerSchema = {
  type: "object",
  required: ["name"],
  properties: {
    id: { type: "integer", minimum: 0, maximum: MAX_LAYER_ID },
    name: { type: "string", minLength: 1, maxLength: 256 },
    type: { type: "string", maxLength: 64 },
    geometryType: { type: "string", enum: GEOMETRY_TYPES },
    spatialReference: spatialReferenceSchema,
    extent: extentSchema,
  },
};

export const addToDefinitionSchema: JsonSchema = {
  type: "object",
  properties: {
    layers: { type: "array", maxItems: MAX_LAYERS, items: layerSchema },
    tables: { type: "array", maxItems: MAX_LAYERS, items: layerSchema },
  },
};

const idOnly = {
  type: "object",
  required: ["id"],
  properties: { id: { type: "integer", minimum: 0 } },
};

export const deleteFromDefinitionSchema: JsonSchema = {
  type: "object",
  properties: {
    layers: { type: "array", maxItems: MAX_LAYERS, items: idOnly },
    tables: { type: "array", maxItems: MAX_LAYERS, items: idOnly },
  },
};

/** A comma list checked against `allowed` (any case); the canonical spelling, or the reason. */
function canonicalList(
  raw: string,
  allowed: readonly string[],
): { ok: true; value: string } | { ok: false; reason: string } {
  const out: string[] = [];
  for (const entry of raw.split(",").map((s) => s.trim())) {
    if (entry === "") continue;
    const found = allowed.find((a) => a.toLowerCase() === entry.toLowerCase());
    if (found === undefined) return { ok: false, reason: `'${entry}' is not one of ${allowed.join(", ")}` };
    if (!out.includes(found)) out.push(found);
  }
  return { ok: true, value: out.join(",") };
}

/** Cross-checks of service properties the schema cannot express; the reason, or undefined. */
function checkProperties(props: ServiceProperties): string | undefined {
  if (props.capabilities !== undefined) {
    const r = canonicalList(props.capabilities, CAPABILITIES);
    if (!r.ok) return `has capabilities where ${r.reason}`;
  }
  if (props.supportedQueryFormats !== undefined) {
    const r = canonicalList(props.supportedQueryFormats, QUERY_FORMATS);
    if (!r.ok) return `has supportedQueryFormats where ${r.reason}`;
  }
  const e = props.initialExtent;
  if (e && (e.xmin > e.xmax || e.ymin > e.ymax)) {
    return "has an initialExtent whose minimum exceeds its maximum";
  }
  return undefined;
}

export function checkCreateParameters(value: unknown): string | undefined {
  const params = value as CreateParameters;
  if (!SERVICE_NAME.test(params.name)) {
    return `has name '${params.name}', but a service name may contain only letters, digits and underscore`;
  }
  return checkProperties(params);
}

export function checkUpdateDefinition(value: unknown): string | undefined {
  if ((value as { name?: unknown }).name !== undefined) {
    return "cannot change the service name: create a new service instead";
  }
  return checkProperties(value as ServiceProperties);
}

/** Defaults of a new service, as an empty hosted service on ArcGIS Online reports them. */
const DEFAULTS = {
  serviceDescription: "",
  hasStaticData: false,
  maxRecordCount: 2000,
  supportedQueryFormats: "JSON, geoJSON, PBF",
  capabilities: "Query",
  description: "",
  copyrightText: "",
  allowGeometryUpdates: true,
  units: "esriMeters",
  xssPreventionInfo: {
    xssPreventionEnabled: true,
    xssPreventionRule: "InputOnly",
    xssInputRule: "rejectInvalid",
  },
} satisfies ServiceProperties;

/** The known service-level properties of `props`, lists in their canonical spelling. */
function pickProperties(props: ServiceProperties): ServiceProperties {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(servicePropertySchemas) as (keyof ServiceProperties)[]) {
    if (props[key] !== undefined) out[key] = props[key];
  }
  const picked = out as ServiceProperties;
  if (picked.capabilities !== undefined) {
    picked.capabilities = (canonicalList(picked.capabilities, CAPABILITIES) as { value: string }).value;
  }
  if (picked.supportedQueryFormats !== undefined) {
    picked.supportedQueryFormats = (
      canonicalList(picked.supportedQueryFormats, QUERY_FORMATS) as { value: string }
    ).value;
  }
  return picked;
}

/**
 * The stored definition of a new service. The spatial reference stays unset when neither it nor
 * the initial extent names one: then the first layer added sets it (`interface.md` §4.1).
 */
export function buildDefinition(params: CreateParameters): ServiceProperties {
  const given = pickProperties(params);
  const spatialReference = given.spatialReference ?? given.initialExtent?.spatialReference;
  return {
    ...DEFAULTS,
    ...given,
    xssPreventionInfo: { ...DEFAULTS.xssPreventionInfo, ...given.xssPreventionInfo },
    ...(spatialReference ? { spatialReference } : {}),
  };
}

/** The definition after updateDefinition; refuses a spatial reference its layers do not share. */
export function updateDefinition(service: StoredService, props: ServiceProperties): ServiceProperties {
  const given = pickProperties(props);
  const current = service.definition.spatialReference;
  if (
    given.spatialReference &&
    current &&
    service.layers.length > 0 &&
    !sameSpatialReference(given.spatialReference, current)
  ) {
    throw errors.invalidParameter(
      "updateDefinition",
      `cannot change spatialReference to wkid ${given.spatialReference.wkid}: the service's layers use wkid ${current.wkid}`,
    );
  }
  return {
    ...service.definition,
    ...given,
    ...(given.xssPreventionInfo
      ? { xssPreventionInfo: { ...service.definition.xssPreventionInfo, ...given.xssPreventionInfo } }
      : {}),
  };
}

/** A layer or table as addToDefinition sends it: the id is optional. */
export interface NewLayer {
  id?: number;
  name: string;
  type?: string;
  [property: string]: unknown;
}

export interface AddToDefinition {
  layers?: NewLayer[];
  tables?: NewLayer[];
}

export interface AddResult {
  service: StoredService;
  added: { layers: { name: string; id: number }[]; tables: { name: string; id: number }[] };
}

/**
 * Adds layers and tables. Layers and tables share one id space; ids are assigned after the highest
 * in use when absent; names are unique regardless of case. The first layer that names a spatial
 * reference sets the service's when it has none; layers must share the service's.
 */
export function addToDefinition(service: StoredService, add: AddToDefinition): AddResult {
  const newLayers = add.layers ?? [];
  const newTables = add.tables ?? [];
  const refuse = (reason: string) => errors.invalidParameter("addToDefinition", reason);
  if (newLayers.length + newTables.length === 0) throw refuse("must contain at least one layer or table");
  const all = [...service.layers, ...service.tables];
  if (all.length + newLayers.length + newTables.length > MAX_LAYERS) {
    throw refuse(`would give the service more than ${MAX_LAYERS} layers and tables`);
  }
  const ids = new Set(all.map((l) => l.id));
  const names = new Set(all.map((l) => l.name.toLowerCase()));
  for (const entry of [...newLayers, ...newTables]) {
    const id = entry.id;
    if (id !== undefined) {
      if (ids.has(id)) throw refuse(`uses id ${id}, which is already in use in this service`);
      ids.add(id);
    }
    if (names.has(entry.name.toLowerCase())) {
      throw refuse(`has a layer or table named '${entry.name}', which already exists in this service`);
    }
    names.add(entry.name.toLowerCase());
  }

  let next = Math.max(-1, ...ids) + 1;
  const place = (entry: NewLayer, type: string): LayerDefinition => {
    const id = entry.id ?? next++;
    if (id > MAX_LAYER_ID) {
      throw refuse(`leaves no free id up to ${MAX_LAYER_ID} for '${entry.name}'; give it a free id`);
    }
    return { ...entry, id, name: entry.name, type: entry.type ?? type };
  };
  const layers = newLayers.map((l) => place(l, "Feature Layer"));
  const tables = newTables.map((t) => place(t, "Table"));

  let spatialReference = service.definition.spatialReference;
  for (const layer of layers) {
    const sr = layerSpatialReference(layer);
    if (!sr) continue;
    if (!spatialReference) spatialReference = sr;
    else if (!sameSpatialReference(sr, spatialReference)) {
      throw refuse(
        `has layer '${layer.name}' with spatial reference wkid ${sr.wkid}, but all layers of the service must share wkid ${spatialReference.wkid}`,
      );
    }
  }

  return {
    service: {
      ...service,
      definition: { ...service.definition, ...(spatialReference ? { spatialReference } : {}) },
      layers: [...service.layers, ...layers],
      tables: [...service.tables, ...tables],
    },
    added: {
      layers: layers.map((l) => ({ name: l.name, id: l.id })),
      tables: tables.map((t) => ({ name: t.name, id: t.id })),
    },
  };
}

export interface DeleteFromDefinition {
  layers?: { id: number }[];
  tables?: { id: number }[];
}

/** Removes layers and tables by id; every id must exist. */
export function deleteFromDefinition(service: StoredService, del: DeleteFromDefinition): StoredService {
  const remove = (list: LayerDefinition[], gone: { id: number }[] | undefined, what: string) => {
    const ids = new Set((gone ?? []).map((g) => g.id));
    for (const id of ids) {
      if (!list.some((l) => l.id === id)) {
        throw errors.invalidParameter(
          "deleteFromDefinition",
          `names ${what} id ${id}, which does not exist in this service`,
        );
      }
    }
    return list.filter((l) => !ids.has(l.id));
  };
  if ((del.layers?.length ?? 0) + (del.tables?.length ?? 0) === 0) {
    throw errors.invalidParameter("deleteFromDefinition", "must name at least one layer or table");
  }
  return {
    ...service,
    layers: remove(service.layers, del.layers, "layer"),
    tables: remove(service.tables, del.tables, "table"),
  };
}

// ---------------------------------------------------------------------------------------------
// One layer's definition: addToDefinition, updateDefinition and deleteFromDefinition of a layer
// (`<admin>/services/<name>/FeatureServer/<layerId>/...`). The functions below decide what the
// definition becomes and which columns change; the service applies both in one transaction.
// ---------------------------------------------------------------------------------------------

/** A field as the layer operations send it: a name, and whatever properties they set. */
export interface FieldChange {
  name: string;
  [property: string]: unknown;
}

/** `addToDefinition` of a layer: fields to add. Indexes are accepted and ignored (see below). */
export interface LayerAddToDefinition {
  fields?: FieldChange[];
  indexes?: unknown[];
}

export interface LayerDeleteFromDefinition {
  fields?: { name: string }[];
  indexes?: unknown[];
}

/** `updateDefinition` of a layer: the properties to change, and changes of existing fields. */
export interface LayerUpdateDefinition {
  fields?: FieldChange[];
  [property: string]: unknown;
}

const fieldPropertySchemas = {
  name: { type: "string", minLength: 1, maxLength: 64 },
  type: { type: "string", maxLength: 64 },
  alias: { type: "string", maxLength: 1024 },
  length: { type: "integer" },
  nullable: { type: "boolean" },
  editable: { type: "boolean" },
  domain: { type: ["object", "null"] },
  defaultValue: { type: ["string", "number", "null"] },
};

/**
 * Indexes: ArcGIS lets the owner name indexes of the layer's fields. The storage indexes what its
 * queries need (the object id, the geometry's bounds), so indexes are accepted and ignored: a
 * script that adds fields and indexes in one request still works.
 */
const indexesSchema = { type: "array", maxItems: MAX_FIELDS, items: { type: "object" } };

export const layerAddToDefinitionSchema: JsonSchema = {
  type: "object",
  properties: {
    fields: {
      type: "array",
      maxItems: MAX_FIELDS,
      items: { type: "object", required: ["name", "type"], properties: fieldPropertySchemas },
    },
    indexes: indexesSchema,
  },
};

export const layerDeleteFromDefinitionSchema: JsonSchema = {
  type: "object",
  properties: {
    fields: {
      type: "array",
      maxItems: MAX_FIELDS,
      items: { type: "object", required: ["name"], properties: { name: fieldPropertySchemas.name } },
    },
    indexes: indexesSchema,
  },
};

// Unknown properties are kept, as the service-level operations keep them (templates, types,
// timeInfo, popupInfo...): clients send the whole layer resource back with their change.
export const layerUpdateDefinitionSchema: JsonSchema = {
  type: "object",
  properties: {
    id: { type: "integer" },
    name: { type: "string", minLength: 1, maxLength: 256 },
    type: { type: "string", maxLength: 64 },
    description: { type: "string", maxLength: 32000 },
    copyrightText: { type: "string", maxLength: 4096 },
    displayField: { type: "string", maxLength: 64 },
    capabilities: { type: "string", maxLength: 512 },
    maxRecordCount: { type: "integer", minimum: 1 },
    hasAttachments: { type: "boolean" },
    allowGeometryUpdates: { type: "boolean" },
    drawingInfo: { type: ["object", "null"] },
    geometryType: { type: "string", enum: GEOMETRY_TYPES },
    hasZ: { type: "boolean" },
    hasM: { type: "boolean" },
    spatialReference: spatialReferenceSchema,
    extent: { anyOf: [extentSchema, { type: "null" }] },
    objectIdField: { type: "string", maxLength: 64 },
    globalIdField: { type: "string", maxLength: 64 },
    editFieldsInfo: { type: ["object", "null"] },
    fields: {
      type: "array",
      maxItems: MAX_FIELDS,
      items: { type: "object", required: ["name"], properties: fieldPropertySchemas },
    },
  },
};

export function checkLayerUpdateDefinition(value: unknown): string | undefined {
  const { capabilities } = value as { capabilities?: string };
  if (capabilities !== undefined) {
    const r = canonicalList(capabilities, CAPABILITIES);
    if (!r.ok) return `has capabilities where ${r.reason}`;
  }
  return undefined;
}

/** What a change of one layer's definition leaves. */
export interface LayerChange {
  service: StoredService;
  /** The layer's schema after the change. */
  schema: LayerSchema;
}

function locateLayer(
  service: StoredService,
  layerId: number,
): { definition: LayerDefinition; kind: "layer" | "table" } {
  const layer = service.layers.find((l) => l.id === layerId);
  if (layer) return { definition: layer, kind: "layer" };
  const table = service.tables.find((t) => t.id === layerId);
  if (table) return { definition: table, kind: "table" };
  throw errors.layerNotFound(service.name, String(layerId));
}

function replaceLayer(service: StoredService, definition: LayerDefinition): StoredService {
  const swap = (l: LayerDefinition) => (l.id === definition.id ? definition : l);
  return { ...service, layers: service.layers.map(swap), tables: service.tables.map(swap) };
}

function schemaOf(
  service: StoredService,
  definition: LayerDefinition,
  kind: "layer" | "table",
  parameter: string,
): LayerSchema {
  try {
    return readLayerSchema(definition, kind, service.definition);
  } catch (err) {
    if (err instanceof SchemaError) throw errors.invalidParameter(parameter, err.message);
    throw err;
  }
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const storedName = (field: unknown): string | undefined =>
  isRecord(field) && typeof field.name === "string" ? field.name.toLowerCase() : undefined;

const NUMBER_LITERAL = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * ArcGIS's own examples give defaults in SQL Server's words, `"'A' WITH VALUES"`: the value, and
 * that existing rows receive it. Existing rows here always receive a new field's default, so the
 * suffix adds nothing: a quoted text or a number is read as that value. Anything else there
 * (`GetDate()`) is an expression that this storage does not evaluate, and is refused rather than
 * stored as text.
 */
export function readDefaultValue(field: FieldChange, parameter: string): FieldChange {
  const given = field.defaultValue;
  if (typeof given !== "string") return field;
  const match = /^\s*(.*?)\s+WITH\s+VALUES\s*$/is.exec(given);
  if (!match) return field;
  const literal = match[1] as string;
  if (/^'(?:[^']|'')*'$/s.test(literal)) {
    return { ...field, defaultValue: literal.slice(1, -1).replaceAll("''", "'") };
  }
  if (NUMBER_LITERAL.test(literal)) return { ...field, defaultValue: Number(literal) };
  if (/^null$/i.test(literal)) return { ...field, defaultValue: null };
  throw errors.invalidParameter(
    parameter,
    `gives field '${field.name}' the defaultValue ${JSON.stringify(given)}, an SQL expression this server does not evaluate; give the value itself (dates as milliseconds since 1970)`,
  );
}

/** The field with its default as the column holds it; refused when the field cannot hold it. */
function withStoredDefault(field: LayerField, parameter: string): LayerField {
  const checked = storedDefault(field);
  if (!checked.ok) {
    throw errors.invalidParameter(
      parameter,
      `gives field '${field.name}' a defaultValue it cannot hold: ${checked.reason}`,
    );
  }
  return { ...field, defaultValue: checked.value };
}

/** Adds fields to a layer; `state.hasRows` tells whether existing rows must receive them. */
export function addLayerFields(
  service: StoredService,
  layerId: number,
  add: LayerAddToDefinition,
  state: { hasRows: boolean },
): LayerChange & { added: LayerField[] } {
  const parameter = "addToDefinition";
  const refuse = (reason: string) => errors.invalidParameter(parameter, reason);
  const { definition, kind } = locateLayer(service, layerId);
  const before = schemaOf(service, definition, kind, parameter);
  const given = (add.fields ?? []).map((f) => readDefaultValue(f, parameter));
  if (given.length === 0) {
    if ((add.indexes?.length ?? 0) > 0) return { service, schema: before, added: [] };
    throw refuse("must contain at least one field");
  }
  for (const f of given) {
    const existing = fieldNamed(before, f.name);
    if (existing) {
      throw refuse(
        `adds field '${f.name}', but layer ${layerId} already has a field named '${existing.name}' (names are compared regardless of case)`,
      );
    }
  }
  const current = (definition.fields as unknown[] | undefined) ?? [];
  const schema = schemaOf(service, { ...definition, fields: [...current, ...given] }, kind, parameter);
  const added = given.map((f) => {
    const field = fieldNamed(schema, f.name) as LayerField;
    if (field.type === "esriFieldTypeGlobalID") {
      // Every feature gets a GlobalID of its own (the existing ones too): a shared default is none.
      if (field.defaultValue !== null) {
        throw refuse(
          `gives GlobalID field '${field.name}' a defaultValue; GlobalIDs are assigned by the server`,
        );
      }
      return field;
    }
    const stored = withStoredDefault(field, parameter);
    if (!stored.nullable && stored.defaultValue === null && state.hasRows) {
      throw refuse(
        `adds field '${field.name}', which is not nullable and has no defaultValue, to layer ${layerId}, which holds features: give the field a defaultValue for them, or let it be nullable`,
      );
    }
    return stored;
  });
  const next = {
    ...definition,
    fields: [...current, ...added.map((field, i) => ({ ...given[i], ...fieldJson(field) }))],
  };
  return { service: replaceLayer(service, next), schema, added };
}

/** What an editor-tracking field records, for the refusal to delete it. */
function trackingRole(schema: LayerSchema, field: LayerField): string | undefined {
  const e = schema.editFields;
  if (!e) return undefined;
  const key = field.name.toLowerCase();
  for (const role of ["creationDateField", "creatorField", "editDateField", "editorField"] as const) {
    if (e[role].toLowerCase() === key) return `editor-tracking ${role}`;
  }
  return undefined;
}

/** Removes fields from a layer; the object id, GlobalID and editor-tracking fields stay. */
export function deleteLayerFields(
  service: StoredService,
  layerId: number,
  del: LayerDeleteFromDefinition,
): LayerChange & { dropped: LayerField[] } {
  const parameter = "deleteFromDefinition";
  const refuse = (reason: string) => errors.invalidParameter(parameter, reason);
  const { definition, kind } = locateLayer(service, layerId);
  const before = schemaOf(service, definition, kind, parameter);
  const dropped: LayerField[] = [];
  for (const { name } of del.fields ?? []) {
    const field = fieldNamed(before, name);
    if (!field) throw refuse(`names field '${name}', which layer ${layerId} does not have`);
    if (dropped.includes(field)) continue;
    const role =
      field === before.objectIdField
        ? "object id field"
        : field === before.globalIdField
          ? "GlobalID field"
          : trackingRole(before, field);
    if (role) throw refuse(`cannot delete field '${field.name}': it is the layer's ${role}`);
    dropped.push(field);
  }
  if (dropped.length === 0) {
    if ((del.indexes?.length ?? 0) > 0) return { service, schema: before, dropped };
    throw refuse("must name at least one field");
  }
  const gone = new Set(dropped.map((f) => f.name.toLowerCase()));
  const fields = ((definition.fields as unknown[] | undefined) ?? []).filter(
    (f) => !gone.has(storedName(f) ?? ""),
  );
  const next: LayerDefinition = { ...definition, fields };
  // The display field falls back to the first text field (layer-resource.ts) rather than naming
  // a field that no longer exists.
  if (typeof next.displayField === "string" && gone.has(next.displayField.toLowerCase())) {
    delete next.displayField;
  }
  return { service: replaceLayer(service, next), schema: schemaOf(service, next, kind, parameter), dropped };
}

/** A layer's spatial reference as one comparable value: its normalised wkid, else its WKT. */
function referenceKey(sr: { wkid?: number; latestWkid?: number; wkt?: string }): string {
  const wkid = sr.latestWkid ?? sr.wkid;
  return wkid !== undefined ? `wkid:${normalWkid({ wkid })}` : `wkt:${sr.wkt ?? ""}`;
}

/** The properties of a layer that the schema derives, kept apart from the plain ones. */
const DERIVED = ["id", "type", "fields", "objectIdField", "globalIdField", "editFieldsInfo"];

/** What the storage follows: fields, geometry and spatial reference. */
const schemaShape = (s: LayerSchema) =>
  JSON.stringify({
    fields: s.fields.map(fieldJson),
    geometryType: s.geometryType,
    hasZ: s.hasZ,
    hasM: s.hasM,
    reference: s.spatialReference ? referenceKey(s.spatialReference) : null,
  });

export interface LayerUpdate extends LayerChange {
  /** Fields that were nullable and no longer are: the layer's rows must hold a value in each. */
  required: LayerField[];
  /** Whether the fields, the geometry or the spatial reference changed (not only presentation). */
  schemaChanged: boolean;
}

/**
 * Changes a layer's properties and the properties of its existing fields. What the stored rows
 * depend on is fixed: a field's type and length, and, once the layer holds features, its geometry
 * type, z and m, and spatial reference. A layer whose stored definition cannot hold data (one an
 * earlier version accepted) may be fixed here: then there is no schema before the change.
 */
export function updateLayerDefinition(
  service: StoredService,
  layerId: number,
  update: LayerUpdateDefinition,
  state: { hasRows: boolean },
): LayerUpdate {
  const parameter = "updateDefinition";
  const refuse = (reason: string) => errors.invalidParameter(parameter, reason);
  const { definition, kind } = locateLayer(service, layerId);
  let before: LayerSchema | undefined;
  try {
    before = readLayerSchema(definition, kind, service.definition);
  } catch (err) {
    if (!(err instanceof SchemaError)) throw err;
  }

  if (update.id !== undefined && update.id !== definition.id) {
    throw refuse(`cannot change the id of layer ${layerId}`);
  }
  const type = String(definition.type ?? (kind === "layer" ? "Feature Layer" : "Table"));
  if (typeof update.type === "string" && update.type.toLowerCase() !== type.toLowerCase()) {
    throw refuse(
      `cannot change the type of layer ${layerId} from '${type}' to '${update.type}': add a new layer or table instead`,
    );
  }
  if (typeof update.name === "string") {
    const key = update.name.toLowerCase();
    const clash = [...service.layers, ...service.tables].find(
      (l) => l.id !== layerId && l.name.toLowerCase() === key,
    );
    if (clash) throw refuse(`renames layer ${layerId} to '${update.name}', the name of layer ${clash.id}`);
  }
  if (before) {
    const same = (a: unknown, b: string) => typeof a !== "string" || a.toLowerCase() === b.toLowerCase();
    if (!same(update.objectIdField, before.objectIdField.name)) {
      throw refuse(`cannot change objectIdField of layer ${layerId} from '${before.objectIdField.name}'`);
    }
    if (!same(update.globalIdField, before.globalIdField?.name ?? "")) {
      throw refuse(
        `cannot change globalIdField of layer ${layerId}: add a field of type esriFieldTypeGlobalID with addToDefinition`,
      );
    }
    if (update.editFieldsInfo !== undefined) {
      const given = (update.editFieldsInfo ?? undefined) as Record<string, unknown> | undefined;
      const current = before.editFields;
      const keys = ["creationDateField", "creatorField", "editDateField", "editorField"] as const;
      const matches = current
        ? given !== undefined && keys.every((k) => same(given[k] ?? "", current[k]))
        : given === undefined || keys.every((k) => !given[k]);
      if (!matches) {
        throw refuse(
          `cannot change editFieldsInfo of layer ${layerId}: editor tracking is set for the service, with the service's updateDefinition`,
        );
      }
    }
  }
  if (kind === "table" && update.geometryType !== undefined) {
    throw refuse(`sets a geometryType on table ${layerId}, which holds no geometry`);
  }

  const fields = [...((definition.fields as unknown[] | undefined) ?? [])];
  const touched = new Set<string>();
  for (const raw of update.fields ?? []) {
    const change = readDefaultValue(raw, parameter);
    const key = change.name.toLowerCase();
    if (touched.has(key)) throw refuse(`names field '${change.name}' twice`);
    touched.add(key);
    const index = fields.findIndex((f) => storedName(f) === key);
    if (index < 0) {
      throw refuse(
        `changes field '${change.name}', which layer ${layerId} does not have; add fields with addToDefinition`,
      );
    }
    const stored = fields[index] as Record<string, unknown>;
    if (change.type !== undefined && change.type !== stored.type) {
      throw refuse(
        `cannot change the type of field '${stored.name}' from ${stored.type} to ${change.type}: a field's type is fixed once it is stored; add a new field and copy the values`,
      );
    }
    if (change.length !== undefined && stored.type === "esriFieldTypeString") {
      const length = stored.length ?? DEFAULT_STRING_LENGTH;
      if (change.length !== length) {
        throw refuse(
          `cannot change the length of field '${stored.name}' from ${length} to ${change.length}: a field's length is fixed once it is stored; add a new field and copy the values`,
        );
      }
    }
    // The stored spelling of the name stays: columns and clients' expressions follow it.
    const { name: _name, type: _type, length: _length, ...properties } = change;
    fields[index] = { ...stored, ...properties };
  }

  const plain = Object.fromEntries(Object.entries(update).filter(([k]) => !DERIVED.includes(k)));
  if (typeof plain.capabilities === "string") {
    plain.capabilities = (canonicalList(plain.capabilities, CAPABILITIES) as { value: string }).value;
  }
  const merged: LayerDefinition = { ...definition, ...plain, fields };
  const schema = schemaOf(service, merged, kind, parameter);
  const next: LayerDefinition = {
    ...merged,
    fields: fields.map((f) => {
      const key = storedName(f);
      if (key === undefined || !touched.has(key)) return f;
      const field = withStoredDefault(fieldNamed(schema, key) as LayerField, parameter);
      return { ...(f as Record<string, unknown>), ...fieldJson(field) };
    }),
  };
  if (typeof update.displayField === "string" && update.displayField !== "") {
    const field = fieldNamed(schema, update.displayField);
    if (!field)
      throw refuse(`sets displayField '${update.displayField}', which layer ${layerId} does not have`);
    next.displayField = field.name;
  }

  if (update.spatialReference !== undefined || update.extent) {
    const sr = layerSpatialReference(next);
    const shared = service.definition.spatialReference;
    if (sr && shared && !sameSpatialReference(sr, shared)) {
      throw refuse(
        `gives layer ${layerId} spatial reference wkid ${sr.wkid}, but all layers of the service must share wkid ${shared.wkid}`,
      );
    }
  }
  if (before && state.hasRows) {
    const held = (what: string) =>
      refuse(`cannot change ${what} of layer ${layerId}: it holds features, stored with the current one`);
    if (schema.geometryType !== before.geometryType) throw held("the geometryType");
    if (schema.hasZ !== before.hasZ || schema.hasM !== before.hasM) throw held("hasZ or hasM");
    const a = schema.spatialReference;
    const b = before.spatialReference;
    if ((a && referenceKey(a)) !== (b && referenceKey(b))) {
      throw held("the spatial reference");
    }
  }

  const required = schema.fields.filter((f) => {
    if (f.nullable) return false;
    if (!before) return touched.has(f.name.toLowerCase());
    return fieldNamed(before, f.name)?.nullable === true;
  });
  return {
    service: replaceLayer(service, next),
    schema,
    required,
    schemaChanged: !before || schemaShape(before) !== schemaShape(schema),
  };
}

const WEB_MERCATOR: SpatialReference = { wkid: 102100, latestWkid: 3857 };
const WEB_MERCATOR_WORLD = 20037508.342789244;

/** The service resource at `<serviceurl>?f=json`. */
/** `editorTrackingInfo` of a service that did not set it. */
const NO_EDITOR_TRACKING = {
  enableEditorTracking: false,
  enableOwnershipAccessControl: false,
  allowOthersToQuery: true,
  allowOthersToUpdate: true,
  allowOthersToDelete: true,
  allowAnonymousToQuery: true,
  allowAnonymousToUpdate: true,
  allowAnonymousToDelete: true,
};

export function serviceJson(service: StoredService, serviceItemId: string): Record<string, unknown> {
  const d = service.definition;
  const spatialReference = d.spatialReference ?? WEB_MERCATOR;
  // An empty service has no data to compute an extent from: the given one, or the whole world.
  const extent = d.initialExtent
    ? { ...d.initialExtent, spatialReference: d.initialExtent.spatialReference ?? spatialReference }
    : worldExtent(spatialReference);
  return {
    currentVersion: SERVER_VERSION,
    serviceDescription: d.serviceDescription,
    hasVersionedData: false,
    hasStaticData: d.hasStaticData,
    maxRecordCount: d.maxRecordCount,
    supportedQueryFormats: d.supportedQueryFormats,
    capabilities: d.capabilities,
    description: d.description,
    copyrightText: d.copyrightText,
    spatialReference,
    initialExtent: extent,
    fullExtent: extent,
    allowGeometryUpdates: d.allowGeometryUpdates,
    units: d.units,
    xssPreventionInfo: d.xssPreventionInfo,
    // As ArcGIS Online lists it for a service without editor tracking: nothing tracked, and no
    // ownership-based access control, so every caller reaches every feature its sharing allows.
    editorTrackingInfo: d.editorTrackingInfo ?? NO_EDITOR_TRACKING,
    // Portico has no replicas, offline editing, change extraction, relationships or location
    // tracking; the service says so, as ArcGIS does for a hosted service without them
    // (`extractChangesCapabilities` is listed only by services that can extract changes).
    supportsDisconnectedEditing: false,
    syncEnabled: false,
    supportsRelationshipsResource: false,
    hasSharedDomains: false,
    supportsQueryDomains: false,
    supportsQueryContingentValues: false,
    supportsTrueCurve: false,
    allowTrueCurvesUpdates: false,
    onlyAllowTrueCurveUpdatesByTrueCurveClients: false,
    enableZDefaults: false,
    isLocationTrackingService: false,
    isLocationTrackingView: false,
    isIndoorsService: false,
    serviceItemId,
    layers: service.layers.map((l) => ({
      id: l.id,
      name: l.name,
      parentLayerId: -1,
      defaultVisibility: true,
      subLayerIds: null,
      minScale: l.minScale ?? 0,
      maxScale: l.maxScale ?? 0,
      ...(l.geometryType !== undefined ? { geometryType: l.geometryType } : {}),
    })),
    tables: service.tables.map((t) => ({ id: t.id, name: t.name })),
  };
}

/** The layer or table resource at `<serviceurl>/<id>`, or undefined. */
export function layerJson(
  service: StoredService,
  id: number,
  serviceItemId: string,
): Record<string, unknown> | undefined {
  const layer = [...service.layers, ...service.tables].find((l) => l.id === id);
  return layer ? { currentVersion: SERVER_VERSION, ...layer, serviceItemId } : undefined;
}

function worldExtent(sr: SpatialReference): Extent {
  const wkid = normalWkid(sr);
  if (wkid === 3857) {
    const w = WEB_MERCATOR_WORLD;
    return { xmin: -w, ymin: -w, xmax: w, ymax: w, spatialReference: sr };
  }
  if (wkid === 4326) return { xmin: -180, ymin: -90, xmax: 180, ymax: 90, spatialReference: sr };
  return { xmin: 0, ymin: 0, xmax: 0, ymax: 0, spatialReference: sr };
}

function layerSpatialReference(layer: LayerDefinition): SpatialReference | undefined {
  return (
    (layer.spatialReference as SpatialReference | undefined) ??
    (layer.extent as Extent | undefined)?.spatialReference
  );
}

/** Web Mercator has had several wkids; they name one spatial reference. */
function normalWkid(sr: SpatialReference): number {
  const wkid = sr.latestWkid ?? sr.wkid;
  return wkid === 102100 || wkid === 102113 || wkid === 900913 ? 3857 : wkid;
}

function sameSpatialReference(a: SpatialReference, b: SpatialReference): boolean {
  return normalWkid(a) === normalWkid(b);
}
