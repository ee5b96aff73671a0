import { EncodedBody } from "../../encoded-body.js";
import { errors } from "../../errors.js";
import type { Geometry, PointGeometry, SpatialReference } from "../geometry/esri-json.js";
import { centroidOf, dropZM, generalize, roundCoordinates, toGeoJsonGeometry } from "../geometry/output.js";
import {
  projectGeometry,
  type ResolvedReference,
  resolveSpatialReference,
  spatialReferenceOf,
} from "../geometry/projection.js";
import { fieldJson, type LayerSchema } from "../layer-schema.js";
import { encodeQueryPbf } from "../output/pbf.js";
import {
  gridOf,
  type QuantizableGeometry,
  QuantizationOverflow,
  quantizeGeometry,
  transformJson,
} from "../output/quantize.js";
import { type LayerQuery, layerReference } from "./layer-query.js";
import type { FeatureRow, QueryResult } from "./run-query.js";

/**
 * A query's result as the client asked for it: Esri JSON (the REST API's FeatureSet), GeoJSON
 * (RFC 7946: longitude/latitude in WGS 84, whatever the layer's reference), or Esri's
 * FeatureCollection protocol buffer. Geometries are projected to `outSR`, generalized by
 * `maxAllowableOffset`, stripped of Z/M unless asked for, rounded to `geometryPrecision`, and
 * quantized when `quantizationParameters` say so.
 */

export type AnswerFormat = "json" | "pjson" | "html" | "geojson" | "pbf";

interface LayerLike {
  schema: LayerSchema;
}

const WGS84: SpatialReference = { wkid: 4326 };

function outReference(
  layer: LayerLike,
  query: LayerQuery,
  format: AnswerFormat,
): { reference: ResolvedReference; spatialReference: SpatialReference } {
  if (format === "geojson") {
    const r = resolveSpatialReference(WGS84);
    if (r.ok) return { reference: r.value, spatialReference: WGS84 };
  }
  if (query.outSR) return { reference: query.outSR, spatialReference: spatialReferenceOf(query.outSR) };
  const own = layerReference(layer.schema);
  return {
    reference: own.reference,
    spatialReference: own.reference.wkid ? spatialReferenceOf(own.reference) : own.spatialReference,
  };
}

/** Each geometry's way out: projection, generalization, Z/M, precision. */
function geometryPipeline(layer: LayerLike, query: LayerQuery, to: ResolvedReference, format: AnswerFormat) {
  const from = layerReference(layer.schema).reference;
  const same = from.key === to.key;
  const keepZ = layer.schema.hasZ && (query.returnZ || format === "geojson");
  const keepM = layer.schema.hasM && query.returnM && format !== "geojson";
  return (geometry: Geometry | null): Geometry | null => {
    if (!geometry) return null;
    let g: Geometry | null = geometry;
    if (query.maxAllowableOffset && same) g = generalize(g, query.maxAllowableOffset);
    if (!same) {
      const projected = projectGeometry(g, from, to);
      // A feature the output reference cannot show (beyond Mercator's latitudes) has no geometry there.
      g = projected.ok ? projected.value : null;
      if (g && query.maxAllowableOffset) g = generalize(g, query.maxAllowableOffset);
    }
    if (!g) return null;
    if (!keepZ || !keepM) g = dropZM(g, keepZ, keepM);
    if (query.geometryPrecision !== undefined && !query.quantization)
      g = roundCoordinates(g, query.geometryPrecision);
    return g;
  };
}

/** Esri JSON of a geometry as a FeatureSet carries it: no type, flags only when true. */
export function esriJson(g: Geometry): Record<string, unknown> {
  switch (g.type) {
    case "esriGeometryPoint":
      return {
        x: g.x,
        y: g.y,
        ...(g.hasZ && g.z !== undefined ? { z: g.z } : {}),
        ...(g.hasM && g.m !== undefined ? { m: g.m } : {}),
      };
    case "esriGeometryMultipoint":
      return { ...(g.hasZ ? { hasZ: true } : {}), ...(g.hasM ? { hasM: true } : {}), points: g.points };
    case "esriGeometryPolyline":
      return { ...(g.hasZ ? { hasZ: true } : {}), ...(g.hasM ? { hasM: true } : {}), paths: g.paths };
    case "esriGeometryPolygon":
      return { ...(g.hasZ ? { hasZ: true } : {}), ...(g.hasM ? { hasM: true } : {}), rings: g.rings };
    case "esriGeometryEnvelope":
      return { xmin: g.xmin, ymin: g.ymin, xmax: g.xmax, ymax: g.ymax };
  }
}

function fieldsOf(query: LayerQuery) {
  return query.outFields.map((f) => {
    const { nullable: _n, editable: _e, ...rest } = fieldJson(f);
    return rest;
  });
}

export function queryAnswer(
  layer: LayerLike,
  query: LayerQuery,
  result: QueryResult,
  format: AnswerFormat,
): unknown {
  try {
    return answerOf(layer, query, result, format);
  } catch (err) {
    if (!(err instanceof QuantizationOverflow)) throw err;
    if (query.quantization) {
      throw errors.invalidParameter(
        "quantizationParameters",
        `has a tolerance too fine for the features' coordinates (${err.value} is more steps from the origin than an integer holds)`,
      );
    }
    throw errors.invalidParameter(
      "f",
      `cannot be pbf for these features: a coordinate (${err.value}) is beyond the precision grid of protocol buffer answers; ask for f=json`,
    );
  }
}

function answerOf(layer: LayerLike, query: LayerQuery, result: QueryResult, format: AnswerFormat): unknown {
  const schema = layer.schema;
  const out = outReference(layer, query, format);
  switch (result.mode) {
    case "count":
      if (format === "pbf")
        return new EncodedBody(PBF_TYPE, encodeQueryPbf({ kind: "count", count: result.count }));
      return { count: result.count };
    case "ids":
      if (format === "pbf") {
        return new EncodedBody(
          PBF_TYPE,
          encodeQueryPbf({
            kind: "objectIds",
            objectIdFieldName: schema.objectIdField.name,
            objectIds: result.objectIds,
          }),
        );
      }
      return { objectIdFieldName: schema.objectIdField.name, objectIds: result.objectIds };
    case "extent": {
      let extent: Record<string, unknown> | null = null;
      if (result.extent) {
        const from = layerReference(schema).reference;
        const box = { type: "esriGeometryEnvelope" as const, hasZ: false, hasM: false, ...result.extent };
        const projected =
          from.key === out.reference.key
            ? { ok: true as const, value: box }
            : projectGeometry(box, from, out.reference);
        if (projected.ok) extent = { ...esriJson(projected.value), spatialReference: out.spatialReference };
      }
      if (format === "geojson") {
        // GeoJSON has no extent object: the bounds are the collection's `bbox` (RFC 7946 §5), which
        // is what GDAL's ESRIJSON driver asks for (`returnExtentOnly=true&f=geojson`) and reads.
        return {
          type: "FeatureCollection",
          features: [],
          ...(extent ? { bbox: [extent.xmin, extent.ymin, extent.xmax, extent.ymax] } : {}),
          ...(query.withCount ? { properties: { count: result.count } } : {}),
        };
      }
      return {
        ...(query.withCount ? { count: result.count } : {}),
        extent: extent ?? {
          xmin: "NaN",
          ymin: "NaN",
          xmax: "NaN",
          ymax: "NaN",
          spatialReference: out.spatialReference,
        },
      };
    }
    case "statistics":
      return {
        displayFieldName: "",
        fields: [
          ...(query.groupBy ?? []).map((f) => ({ name: f.name, type: f.type, alias: f.alias })),
          ...(query.statistics ?? []).map((s) => ({
            name: s.outName,
            type:
              s.type === "count"
                ? "esriFieldTypeInteger"
                : // These answer one of the field's own values.
                  s.type === "min" || s.type === "max" || s.type === "percentile_disc"
                  ? (s.field?.type ?? "esriFieldTypeDouble")
                  : "esriFieldTypeDouble",
            alias: s.outName,
          })),
        ],
        features: result.rows.map((attributes) => ({ attributes })),
      };
    case "distinct":
    case "features":
      break;
  }
  const rows = result.rows;
  const shape = query.returnGeometry ? geometryPipeline(layer, query, out.reference, format) : () => null;
  const centroid =
    query.returnCentroid && schema.geometryType === "esriGeometryPolygon"
      ? geometryPipeline(
          layer,
          { ...query, maxAllowableOffset: undefined } as LayerQuery,
          out.reference,
          format,
        )
      : undefined;
  const features = rows.map((row: FeatureRow) => ({
    attributes: row.attributes,
    geometry: shape(row.geometry),
    ...(centroid
      ? {
          centroid: centroid(
            row.geometry ? (centroidOf(row.geometry) as Geometry | null) : null,
          ) as PointGeometry | null,
        }
      : {}),
  }));

  if (format === "geojson") {
    return {
      type: "FeatureCollection",
      features: features.map((f) => ({
        type: "Feature",
        id: f.attributes[schema.objectIdField.name],
        geometry: f.geometry ? toGeoJsonGeometry(f.geometry) : null,
        properties: f.attributes,
      })),
      ...(result.exceeded ? { properties: { exceededTransferLimit: true } } : {}),
    };
  }
  const geometryType = query.returnGeometry && result.mode === "features" ? schema.geometryType : undefined;
  const hasZ = schema.hasZ && query.returnZ;
  const hasM = schema.hasM && query.returnM;
  if (format === "pbf") {
    return new EncodedBody(
      PBF_TYPE,
      encodeQueryPbf({
        kind: "features",
        objectIdFieldName: schema.objectIdField.name,
        uniqueIdField: { name: schema.objectIdField.name, isSystemMaintained: true },
        ...(schema.globalIdField ? { globalIdFieldName: schema.globalIdField.name } : {}),
        ...(geometryType ? { geometryType } : {}),
        spatialReference: out.spatialReference,
        hasZ,
        hasM,
        coordinateSystem: { geographic: out.reference.geographic },
        fields: query.outFields.map((f) => ({ name: f.name, type: f.type, alias: f.alias })),
        exceededTransferLimit: result.exceeded,
        ...(query.quantization ? { quantization: query.quantization } : {}),
        // Stored geometries are never envelopes (layer-schema.ts refuses such layers).
        features: features.map((f) => ({
          attributes: f.attributes,
          geometry: f.geometry as QuantizableGeometry | null,
          ...(f.centroid !== undefined ? { centroid: f.centroid } : {}),
        })),
      }),
    );
  }
  const grid = query.quantization ? gridOf(query.quantization) : undefined;
  const json = (g: Geometry | null) => {
    if (!g) return null;
    const q = grid && g.type !== "esriGeometryEnvelope" ? quantizeGeometry(g, grid) : g;
    return q ? esriJson(q) : null;
  };
  return {
    objectIdFieldName: schema.objectIdField.name,
    uniqueIdField: { name: schema.objectIdField.name, isSystemMaintained: true },
    globalIdFieldName: schema.globalIdField?.name ?? "",
    ...(geometryType ? { geometryType } : {}),
    ...(geometryType ? { spatialReference: out.spatialReference } : {}),
    ...(hasZ ? { hasZ: true } : {}),
    ...(hasM ? { hasM: true } : {}),
    ...(query.quantization ? { transform: transformJson(query.quantization) } : {}),
    fields: fieldsOf(query),
    features: features.map((f) => ({
      attributes: f.attributes,
      ...(query.returnGeometry ? { geometry: json(f.geometry) } : {}),
      ...(f.centroid !== undefined ? { centroid: f.centroid ? esriJson(f.centroid) : null } : {}),
    })),
    ...(result.exceeded ? { exceededTransferLimit: true } : {}),
  };
}

/** What ArcGIS sends its protocol buffers as. */
const PBF_TYPE = "application/x-protobuf";
