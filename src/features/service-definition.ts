import { errors } from "../errors.js";
import type { JsonSchema } from "../validation/params.js";

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

const WEB_MERCATOR: SpatialReference = { wkid: 102100, latestWkid: 3857 };
const WEB_MERCATOR_WORLD = 20037508.342789244;

/** The service resource at `<serviceurl>?f=json`. */
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
    ...(d.editorTrackingInfo ? { editorTrackingInfo: d.editorTrackingInfo } : {}),
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
