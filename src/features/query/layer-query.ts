import { errors } from "../../errors.js";
import { bufferQueryGeometry, toLinearUnits } from "../geometry/distance.js";
import {
  type Bounds,
  boundsOf,
  envelopeParts,
  type Geometry,
  parseGeometryParam,
  parseSpatialReference,
  type SpatialReference,
} from "../geometry/esri-json.js";
import {
  projectGeometry,
  type ResolvedReference,
  resolveSpatialReference,
  wrapRange,
} from "../geometry/projection.js";
import { parseSpatialRel, type SpatialRel } from "../geometry/relate.js";
import { fieldNamed, type LayerField, type LayerSchema } from "../layer-schema.js";
import { parseQuantizationParameters, type QuantizationParameters } from "../output/quantize.js";
import { type AggregateType, type Having, readHaving } from "./having.js";

/**
 * A layer query's parameters (the ArcGIS REST API's Query (Feature Service/Layer)), read and checked
 * against the layer: every problem is a 400 naming its parameter, before anything runs. What comes
 * out is in the layer's terms: fields resolved, the query geometry projected into the layer's
 * spatial reference (and split at the antimeridian), limits applied. `run-query.ts` executes it.
 */

/** The query parameters as the route passes them (scalars already typed by the route's specs). */
export interface QueryParams {
  where?: string | undefined;
  objectIds?: string | undefined;
  geometry?: string | undefined;
  geometryType?: string | undefined;
  inSR?: string | undefined;
  spatialRel?: string | undefined;
  distance?: number | undefined;
  units?: string | undefined;
  outFields?: string | undefined;
  returnGeometry?: boolean | undefined;
  outSR?: string | undefined;
  geometryPrecision?: number | undefined;
  maxAllowableOffset?: number | undefined;
  quantizationParameters?: string | undefined;
  returnZ?: boolean | undefined;
  returnM?: boolean | undefined;
  returnCentroid?: boolean | undefined;
  orderByFields?: string | undefined;
  resultOffset?: number | undefined;
  resultRecordCount?: number | undefined;
  resultType?: string | undefined;
  returnExceededLimitFeatures?: boolean | undefined;
  returnCountOnly?: boolean | undefined;
  returnIdsOnly?: boolean | undefined;
  returnExtentOnly?: boolean | undefined;
  returnDistinctValues?: boolean | undefined;
  outStatistics?: string | undefined;
  groupByFieldsForStatistics?: string | undefined;
  havingClause?: string | undefined;
}

export type StatisticType = AggregateType | "percentile_cont" | "percentile_disc";
const STATISTIC_TYPES: readonly StatisticType[] = [
  "count",
  "sum",
  "min",
  "max",
  "avg",
  "stddev",
  "var",
  "percentile_cont",
  "percentile_disc",
];

export interface Statistic {
  type: StatisticType;
  /** Undefined for `count` of `*`. */
  field?: LayerField;
  outName: string;
  /** With the percentile types: the fraction (0 to 1) and the order the values are taken in. */
  percentile?: { value: number; descending: boolean };
}

/**
 * Fields whose values are numbers in the database: sums, averages and percentiles take only
 * these. (Date-only and timestamp-offset fields are stored as text.)
 */
const NUMERIC_FIELD_TYPES = new Set<string>([
  "esriFieldTypeOID",
  "esriFieldTypeSmallInteger",
  "esriFieldTypeInteger",
  "esriFieldTypeBigInteger",
  "esriFieldTypeSingle",
  "esriFieldTypeDouble",
  "esriFieldTypeDate",
]);

export interface SpatialFilter {
  /** The query geometry in the layer's spatial reference (buffered by `distance` when given). */
  geometry: Geometry;
  /** Boxes in the layer's spatial reference that every match's bounds meet (several across the antimeridian). */
  boxes: Bounds[];
  rel: SpatialRel;
  /**
   * True when the boxes decide the relation exactly: envelope relations, and an envelope (not
   * buffered) intersecting points. Otherwise the stored geometry is related in the process.
   */
  boxesDecide: boolean;
}

export interface LayerQuery {
  where: string;
  objectIds?: number[];
  spatial?: SpatialFilter;
  /** Fields to answer, the object id field always among them, in the layer's order. */
  outFields: LayerField[];
  returnGeometry: boolean;
  /** The answer's spatial reference; the layer's when absent. */
  outSR?: ResolvedReference;
  outSpatialReference?: SpatialReference;
  geometryPrecision?: number;
  maxAllowableOffset?: number;
  quantization?: QuantizationParameters;
  returnZ: boolean;
  returnM: boolean;
  returnCentroid: boolean;
  orderBy: { field: LayerField; descending: boolean }[];
  offset: number;
  /** Most features in the answer. */
  limit: number;
  /** With resultType=tile and returnExceededLimitFeatures=false: nothing when more than `limit` match. */
  nothingWhenExceeded: boolean;
  mode: "features" | "count" | "ids" | "extent" | "distinct" | "statistics";
  /** With returnExtentOnly: also the count. */
  withCount: boolean;
  /** With mode "ids": the most ids to read (a caller that only needs to know there are more). */
  idsLimit?: number;
  /**
   * Only features of a greater object id: an export reads a layer in pages from the last id it
   * read (keyset paging), which costs the same for the last page as for the first.
   */
  afterObjectId?: number;
  statistics?: Statistic[];
  groupBy?: LayerField[];
  /** With statistics: the condition each group must meet to be answered. */
  having?: Having;
}

/** Layer limits from the service definition. */
export interface QueryLimits {
  maxRecordCount: number;
  standardMaxRecordCount: number;
  tileMaxRecordCount: number;
}

/** Longest list of object ids a query takes (QGIS asks in batches of at most a few thousand). */
export const MAX_QUERY_OBJECT_IDS = 100_000;

const bad = (parameter: string, reason: string) => errors.invalidParameter(parameter, reason);

/** A spatial reference parameter: a wkid (`4326`) or Esri JSON (`{"wkid":4326}`, `{"wkt":"…"}`). */
export function readSpatialReferenceParam(
  parameter: string,
  raw: string,
): { reference: ResolvedReference; spatialReference: SpatialReference } {
  const text = raw.trim();
  let value: SpatialReference;
  if (/^\d{1,9}$/.test(text)) value = { wkid: Number(text) };
  else {
    let decoded: unknown;
    try {
      decoded = JSON.parse(text);
    } catch {
      throw bad(parameter, "must be a wkid or a spatial reference as JSON");
    }
    const parsed = parseSpatialReference(decoded, undefined, parameter);
    if (!parsed.ok) throw bad(parameter, parsed.error.message);
    value = parsed.value;
  }
  const resolved = resolveSpatialReference(value);
  if (!resolved.ok) throw bad(parameter, resolved.error.message);
  return { reference: resolved.value, spatialReference: value };
}

/** Object ids: `1,2,3` (blanks allowed), or a JSON array, as clients send them. */
export function readObjectIds(parameter: string, raw: string, max = MAX_QUERY_OBJECT_IDS): number[] {
  const text = raw.trim();
  if (text.length > max * 21) throw bad(parameter, `must list at most ${max} object ids`);
  const parts = (text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text)
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (parts.length > max) throw bad(parameter, `must list at most ${max} object ids`);
  const ids: number[] = [];
  for (const part of parts) {
    if (!/^\d{1,15}$/.test(part))
      throw bad(parameter, `has '${part.slice(0, 40)}', which is not an object id`);
    ids.push(Number(part));
  }
  return ids;
}

function readFieldList(parameter: string, raw: string, schema: LayerSchema): LayerField[] {
  const out: LayerField[] = [];
  for (const name of raw.split(",").map((s) => s.trim())) {
    if (name === "") continue;
    const field = fieldNamed(schema, name);
    if (!field) throw bad(parameter, `names a field that does not exist: '${name.slice(0, 128)}'`);
    if (!out.includes(field)) out.push(field);
  }
  return out;
}

function readOutFields(raw: string | undefined, schema: LayerSchema): LayerField[] {
  const text = raw?.trim() ?? "";
  // ArcGIS answers the object id alone when outFields is absent; `*` is every field.
  if (text === "") return [schema.objectIdField];
  if (text.split(",").some((s) => s.trim() === "*")) return schema.fields;
  const listed = readFieldList("outFields", text, schema);
  // The object id comes with every feature: the Maps SDK, QGIS and GDAL key features by it.
  return schema.fields.filter((f) => f === schema.objectIdField || listed.includes(f));
}

function readOrderBy(raw: string | undefined, schema: LayerSchema): LayerQuery["orderBy"] {
  const out: LayerQuery["orderBy"] = [];
  for (const entry of (raw ?? "").split(",").map((s) => s.trim())) {
    if (entry === "") continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)(?:\s+(ASC|DESC))?$/i.exec(entry);
    if (!m)
      throw bad(
        "orderByFields",
        `has '${entry.slice(0, 128)}'; each entry is a field name, then ASC or DESC`,
      );
    const field = fieldNamed(schema, m[1] as string);
    if (!field) throw bad("orderByFields", `names a field that does not exist: '${m[1]}'`);
    out.push({ field, descending: (m[2] ?? "ASC").toUpperCase() === "DESC" });
  }
  return out;
}

function readStatistics(raw: string, schema: LayerSchema): Statistic[] {
  let decoded: unknown;
  try {
    decoded = JSON.parse(raw);
  } catch {
    throw bad("outStatistics", "must be a JSON array of statistic definitions");
  }
  if (!Array.isArray(decoded) || decoded.length === 0 || decoded.length > 100) {
    throw bad("outStatistics", "must be a JSON array of 1 to 100 statistic definitions");
  }
  const names = new Set<string>();
  return decoded.map((entry: unknown, i) => {
    const e = entry as {
      statisticType?: unknown;
      onStatisticField?: unknown;
      outStatisticFieldName?: unknown;
      statisticParameters?: unknown;
    };
    if (typeof e !== "object" || e === null) throw bad("outStatistics", `entry ${i} is not an object`);
    const type = typeof e.statisticType === "string" ? e.statisticType.toLowerCase() : "";
    if (!STATISTIC_TYPES.includes(type as StatisticType)) {
      throw bad(
        "outStatistics",
        `entry ${i} has statisticType ${JSON.stringify(e.statisticType)}; one of ${STATISTIC_TYPES.join(", ")}`,
      );
    }
    const on = typeof e.onStatisticField === "string" ? e.onStatisticField.trim() : "";
    let field: LayerField | undefined;
    if (!(type === "count" && (on === "*" || on === ""))) {
      field = fieldNamed(schema, on);
      if (!field)
        throw bad("outStatistics", `entry ${i} names a field that does not exist: '${on.slice(0, 128)}'`);
      if (type !== "count" && type !== "min" && type !== "max" && !NUMERIC_FIELD_TYPES.has(field.type)) {
        throw bad("outStatistics", `entry ${i} asks for ${type} of '${field.name}', which is not numeric`);
      }
    }
    const percentile =
      type === "percentile_cont" || type === "percentile_disc"
        ? readPercentileParameters(e.statisticParameters, i)
        : undefined;
    const given = typeof e.outStatisticFieldName === "string" ? e.outStatisticFieldName.trim() : "";
    const outName = given || `${type}_${field?.name ?? "count"}`;
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(outName)) {
      throw bad(
        "outStatistics",
        `entry ${i} has outStatisticFieldName '${outName.slice(0, 128)}'; a field name is a letter or underscore, then letters, digits or underscores`,
      );
    }
    if (names.has(outName.toLowerCase())) throw bad("outStatistics", `names '${outName}' twice`);
    names.add(outName.toLowerCase());
    return {
      type: type as StatisticType,
      ...(field ? { field } : {}),
      outName,
      ...(percentile ? { percentile } : {}),
    };
  });
}

/** A percentile's `statisticParameters`: `{"value": 0.9, "orderBy": "DESC"}`, the order ASC when absent. */
function readPercentileParameters(raw: unknown, i: number): NonNullable<Statistic["percentile"]> {
  const p = raw as { value?: unknown; orderBy?: unknown } | undefined;
  if (typeof p !== "object" || p === null || Array.isArray(p)) {
    throw bad("outStatistics", `entry ${i} needs statisticParameters with a value from 0 to 1`);
  }
  if (typeof p.value !== "number" || !(p.value >= 0 && p.value <= 1)) {
    throw bad(
      "outStatistics",
      `entry ${i} has statisticParameters.value ${JSON.stringify(p.value)}; a number from 0 to 1`,
    );
  }
  const order =
    p.orderBy === undefined ? "ASC" : typeof p.orderBy === "string" ? p.orderBy.trim().toUpperCase() : "";
  if (order !== "ASC" && order !== "DESC") {
    throw bad(
      "outStatistics",
      `entry ${i} has statisticParameters.orderBy ${JSON.stringify(p.orderBy)}; ASC or DESC`,
    );
  }
  return { value: p.value, descending: order === "DESC" };
}

/** The boxes that bound `geometry` (already in the layer's reference), split at the antimeridian. */
function boxesOf(geometry: Geometry, layerReference: ResolvedReference): Bounds[] {
  if (geometry.type === "esriGeometryEnvelope") {
    const parts = envelopeParts(geometry, wrapRange(layerReference));
    if (!parts.ok) throw bad("geometry", parts.error.message);
    return parts.value;
  }
  return [boundsOf(geometry)];
}

/** Latitudes Web Mercator can project: the Maps SDK's tile envelopes run past them. */
const MERCATOR_MAX_LATITUDE = 85.0511287798066;

/**
 * The query geometry in the layer's reference. An envelope is projected part by part (split at the
 * antimeridian in its own reference first); a longitude/latitude envelope bound for Web Mercator is
 * clipped to the latitudes Mercator reaches, as the ground past them is not in any layer.
 */
function projectQueryGeometry(
  geometry: Geometry,
  from: ResolvedReference,
  to: ResolvedReference,
): { geometry: Geometry; boxes: Bounds[] } {
  if (from.key === to.key) return { geometry, boxes: boxesOf(geometry, to) };
  if (geometry.type === "esriGeometryEnvelope") {
    const parts = envelopeParts(geometry, wrapRange(from));
    if (!parts.ok) throw bad("geometry", parts.error.message);
    const boxes: Bounds[] = [];
    for (const part of parts.value) {
      let box = part;
      if (from.geographic && to.wkid === 3857) {
        box = {
          ...box,
          ymin: Math.max(box.ymin, -MERCATOR_MAX_LATITUDE),
          ymax: Math.min(box.ymax, MERCATOR_MAX_LATITUDE),
        };
        if (box.ymin > box.ymax) continue;
      }
      const projected = projectGeometry(
        { type: "esriGeometryEnvelope", hasZ: false, hasM: false, ...box },
        from,
        to,
      );
      if (!projected.ok)
        throw bad(
          "geometry",
          `cannot be projected to the layer's spatial reference: ${projected.error.message}`,
        );
      const e = projected.value as Bounds;
      boxes.push({ xmin: e.xmin, ymin: e.ymin, xmax: e.xmax, ymax: e.ymax });
    }
    if (boxes.length === 0) return { geometry, boxes: [] };
    const first = boxes[0] as Bounds;
    // Across the antimeridian the parts are the query; one of them stands for the geometry.
    return {
      geometry:
        boxes.length === 1
          ? { type: "esriGeometryEnvelope", hasZ: false, hasM: false, ...first }
          : {
              type: "esriGeometryPolygon",
              hasZ: false,
              hasM: false,
              rings: boxes.map((b) => [
                [b.xmin, b.ymin],
                [b.xmin, b.ymax],
                [b.xmax, b.ymax],
                [b.xmax, b.ymin],
                [b.xmin, b.ymin],
              ]),
            },
      boxes,
    };
  }
  const projected = projectGeometry(geometry, from, to);
  if (!projected.ok)
    throw bad("geometry", `cannot be projected to the layer's spatial reference: ${projected.error.message}`);
  return { geometry: projected.value, boxes: [boundsOf(projected.value)] };
}

/** The layer's spatial reference, resolved (Web Mercator when neither the layer nor its service names one). */
export function layerReference(schema: LayerSchema): {
  reference: ResolvedReference;
  spatialReference: SpatialReference;
} {
  const sr = schema.spatialReference ?? { wkid: 102100, latestWkid: 3857 };
  const resolved = resolveSpatialReference(sr);
  // A layer whose reference proj4 cannot read still answers in it; queries across references fail.
  if (!resolved.ok)
    return {
      reference: { key: JSON.stringify(sr), geographic: false, definition: "" },
      spatialReference: sr,
    };
  return { reference: resolved.value, spatialReference: sr };
}

export function readLayerQuery(params: QueryParams, schema: LayerSchema, limits: QueryLimits): LayerQuery {
  const layerSr = layerReference(schema);
  const countOnly = params.returnCountOnly === true;
  const idsOnly = params.returnIdsOnly === true;
  const extentOnly = params.returnExtentOnly === true;
  const distinct = params.returnDistinctValues === true;
  const statistics = params.outStatistics?.trim() ? readStatistics(params.outStatistics, schema) : undefined;

  let spatial: SpatialFilter | undefined;
  const geometryText = params.geometry?.trim() ?? "";
  if (geometryText !== "") {
    if (!schema.geometryType) throw bad("geometry", "cannot filter a table, which holds no geometry");
    const parsed = parseGeometryParam(geometryText, params.geometryType);
    if (!parsed.ok) throw bad("geometry", parsed.error.message);
    let from = layerSr.reference;
    if (parsed.value.spatialReference) {
      const r = resolveSpatialReference(parsed.value.spatialReference);
      if (!r.ok) throw bad("geometry", r.error.message);
      from = r.value;
    } else if (params.inSR?.trim()) {
      from = readSpatialReferenceParam("inSR", params.inSR).reference;
    }
    const rel = parseSpatialRel(params.spatialRel);
    if (!rel.ok) throw bad("spatialRel", rel.error.message);
    let { geometry, boxes } = projectQueryGeometry(parsed.value, from, layerSr.reference);
    const distance = params.distance ?? 0;
    if (distance < 0 || !Number.isFinite(distance)) throw bad("distance", "must be a number of at least 0");
    let buffered = false;
    if (distance > 0) {
      const meters = toLinearUnits(distance, params.units);
      if (!meters.ok) throw bad("units", meters.error.message);
      const buffer = bufferQueryGeometry(geometry, meters.value, layerSr.reference);
      if (!buffer.ok)
        throw bad(buffer.error.code === "tooManyVertices" ? "geometry" : "distance", buffer.error.message);
      geometry = buffer.value;
      boxes = boxesOf(geometry, layerSr.reference);
      buffered = true;
    }
    const envelopeRel =
      rel.value === "esriSpatialRelEnvelopeIntersects" || rel.value === "esriSpatialRelIndexIntersects";
    const boxesDecide =
      envelopeRel ||
      (!buffered &&
        rel.value === "esriSpatialRelIntersects" &&
        parsed.value.type === "esriGeometryEnvelope" &&
        schema.geometryType === "esriGeometryPoint");
    spatial = { geometry, boxes, rel: rel.value, boxesDecide };
  }

  let outSR: ResolvedReference | undefined;
  let outSpatialReference: SpatialReference | undefined;
  if (params.outSR?.trim()) {
    const r = readSpatialReferenceParam("outSR", params.outSR);
    outSR = r.reference;
    outSpatialReference = r.spatialReference;
  }

  let quantization: QuantizationParameters | undefined;
  if (params.quantizationParameters?.trim()) {
    const q = parseQuantizationParameters(params.quantizationParameters);
    if (!q.ok) throw bad("quantizationParameters", q.reason);
    quantization = q.value;
  }
  if (
    params.geometryPrecision !== undefined &&
    (params.geometryPrecision < 0 || params.geometryPrecision > 17)
  ) {
    throw bad("geometryPrecision", "must be 0 to 17 decimal places");
  }
  if (params.maxAllowableOffset !== undefined && !(params.maxAllowableOffset >= 0)) {
    throw bad("maxAllowableOffset", "must be a number of at least 0");
  }

  const resultType = params.resultType?.trim().toLowerCase() ?? "";
  if (resultType !== "" && resultType !== "none" && resultType !== "standard" && resultType !== "tile") {
    throw bad("resultType", "must be none, standard or tile");
  }
  const max =
    resultType === "tile"
      ? limits.tileMaxRecordCount
      : resultType === "standard"
        ? limits.standardMaxRecordCount
        : limits.maxRecordCount;
  const offset = params.resultOffset ?? 0;
  if (offset < 0) throw bad("resultOffset", "must be at least 0");
  const count = params.resultRecordCount;
  if (count !== undefined && count < 0) throw bad("resultRecordCount", "must be at least 0");
  const limit = count === undefined || count === 0 ? max : Math.min(count, max);

  const groupBy = params.groupByFieldsForStatistics?.trim()
    ? readFieldList("groupByFieldsForStatistics", params.groupByFieldsForStatistics, schema)
    : undefined;
  if (groupBy && !statistics) throw bad("groupByFieldsForStatistics", "needs outStatistics");
  let having: Having | undefined;
  if (params.havingClause?.trim()) {
    if (!statistics) throw bad("havingClause", "needs outStatistics");
    having = readHaving(params.havingClause, schema, groupBy ?? []);
  }

  const mode: LayerQuery["mode"] = statistics
    ? "statistics"
    : countOnly && !extentOnly
      ? "count"
      : idsOnly
        ? "ids"
        : extentOnly
          ? "extent"
          : distinct
            ? "distinct"
            : "features";

  const outFields = readOutFields(params.outFields, schema);
  if (mode === "distinct" && (params.outFields?.trim() ?? "") === "") {
    throw bad("outFields", "must name the fields whose distinct values to answer");
  }

  return {
    where: params.where ?? "",
    ...(params.objectIds?.trim() ? { objectIds: readObjectIds("objectIds", params.objectIds) } : {}),
    ...(spatial ? { spatial } : {}),
    outFields:
      mode === "distinct" ? readFieldList("outFields", params.outFields as string, schema) : outFields,
    returnGeometry: schema.geometryType !== undefined && params.returnGeometry !== false,
    ...(outSR ? { outSR, outSpatialReference } : {}),
    ...(params.geometryPrecision !== undefined ? { geometryPrecision: params.geometryPrecision } : {}),
    ...(params.maxAllowableOffset ? { maxAllowableOffset: params.maxAllowableOffset } : {}),
    ...(quantization ? { quantization } : {}),
    returnZ: params.returnZ === true,
    returnM: params.returnM === true,
    // A table has no shape column to take a centroid from.
    returnCentroid: schema.geometryType !== undefined && params.returnCentroid === true,
    orderBy: readOrderBy(params.orderByFields, schema),
    offset,
    limit,
    nothingWhenExceeded: resultType === "tile" && params.returnExceededLimitFeatures === false,
    mode,
    withCount: extentOnly && countOnly,
    ...(statistics ? { statistics } : {}),
    ...(groupBy ? { groupBy } : {}),
    ...(having ? { having } : {}),
  };
}
