/**
 * Layer query answers as Esri's FeatureCollection protocol buffer (`f=pbf`), as the ArcGIS Maps SDK
 * for JavaScript and @esri/arcgis-rest-feature-service read them. Pure: the caller hands over the
 * answer and gets the bytes.
 *
 * The message layout is Esri's `FeatureCollection.proto` (github.com/Esri/arcgis-pbf,
 * proto/FeatureCollection): `FeatureCollectionPBuffer { queryResult = 2 }`, `QueryResult` a oneof
 * of `featureResult = 1`, `countResult = 2`, `idsResult = 3`. Choices the proto leaves open follow
 * answers recorded from ArcGIS Online (arcgis-rest-js's test mocks, and the ones in
 * iTwin/itwinjs-core's PhillyLandmarksDataset):
 * - Attribute values by field type: OID `uint_value`; SmallInteger and Integer `sint_value`;
 *   Single `float_value`; Double `double_value`; String, GUID, GlobalID `string_value`; Date
 *   `sint64_value` (epoch milliseconds). A null is a `Value` with no member set: every feature
 *   carries one `Value` per field, in the order of `fields`, since decoders match them by index.
 * - Geometry: `lengths` (vertices per part) before `coords`, because the SDK reads the lengths
 *   while it places coordinates. x and y of the first vertex of a part are absolute, later ones
 *   deltas; z and m are absolute, on their own grid (`ZM_SCALE`, `ZM_TRANSLATE`). A point has
 *   no `lengths`; a multipoint is one part.
 * - A `transform` in every feature answer: the quantizationParameters' grid, or the spatial
 *   reference's default grid (quantize.ts says which).
 */
import { PbfWriter } from "pbf";
import type { PointGeometry, Position } from "../geometry/esri-json.js";
import type { EsriFieldType } from "../query/where.js";
import {
  defaultGrid,
  gridOf,
  minimumVertices,
  type QuantizableGeometry,
  type QuantizationGrid,
  type QuantizationParameters,
  QuantizedParts,
  quantizeParts,
  quantizeX,
  quantizeY,
  quantizeZM,
  ZM_SCALE,
  ZM_TRANSLATE,
} from "./quantize.js";

export interface PbfField {
  name: string;
  type: EsriFieldType;
  alias?: string;
}

export interface PbfFeature {
  attributes: Record<string, unknown>;
  geometry: QuantizableGeometry | null;
  centroid?: PointGeometry | null;
}

export type PbfGeometryType =
  | "esriGeometryPoint"
  | "esriGeometryMultipoint"
  | "esriGeometryPolyline"
  | "esriGeometryPolygon";

export interface PbfFeaturesAnswer {
  kind: "features";
  objectIdFieldName: string;
  uniqueIdField?: { name: string; isSystemMaintained: boolean };
  globalIdFieldName?: string;
  /** Absent for a table. */
  geometryType?: PbfGeometryType;
  spatialReference?: { wkid?: number; latestWkid?: number; wkt?: string };
  hasZ: boolean;
  hasM: boolean;
  fields: PbfField[];
  exceededTransferLimit: boolean;
  /** The request's quantizationParameters, already in the answer's spatial reference. */
  quantization?: QuantizationParameters;
  /**
   * The answer's spatial reference, for the default grid when `quantization` is absent: whether it
   * is geographic (degrees), and the metres in its linear unit when it is not (1 when absent).
   */
  coordinateSystem: { geographic: boolean; metersPerUnit?: number };
  features: readonly PbfFeature[];
}

export type PbfQueryAnswer =
  | PbfFeaturesAnswer
  | { kind: "count"; count: number }
  | { kind: "objectIds"; objectIdFieldName: string; objectIds: readonly number[] };

/**
 * The answer's bytes. The array views the encoder's buffer from offset 0 (it may be longer than the
 * answer); wrap it without copying, e.g. `Buffer.from(a.buffer, a.byteOffset, a.byteLength)`.
 */
export function encodeQueryPbf(answer: PbfQueryAnswer): Uint8Array {
  switch (answer.kind) {
    case "count": {
      const pbf = new PbfWriter(new Uint8Array(32));
      pbf.writeMessage(2, writeCountQueryResult, answer.count);
      return pbf.finish();
    }
    case "objectIds": {
      const pbf = new PbfWriter(new Uint8Array(64 + answer.objectIds.length * 4));
      pbf.writeMessage(2, writeIdsQueryResult, answer);
      return pbf.finish();
    }
    case "features": {
      const pbf = new PbfWriter(new Uint8Array(1024 + answer.features.length * 64));
      pbf.writeMessage(2, writeFeaturesQueryResult, new FeatureEncoding(answer));
      return pbf.finish();
    }
  }
}

// Field numbers of FeatureCollection.proto.
const QUERY_RESULT_FEATURES = 1;
const QUERY_RESULT_COUNT = 2;
const QUERY_RESULT_IDS = 3;

const GEOMETRY_TYPE_CODES: Record<PbfGeometryType, number> = {
  esriGeometryPoint: 0,
  esriGeometryMultipoint: 1,
  esriGeometryPolyline: 2,
  esriGeometryPolygon: 3,
};
const GEOMETRY_TYPE_NONE = 127;

/**
 * FieldType of the proto. Codes 13 to 16 are not in Esri's published proto but are those ArcGIS
 * Online sends and both Esri decoders know (arcgis-rest-js PbfFeatureCollectionV2).
 */
const FIELD_TYPE_CODES: Record<EsriFieldType, number> = {
  esriFieldTypeSmallInteger: 0,
  esriFieldTypeInteger: 1,
  esriFieldTypeSingle: 2,
  esriFieldTypeDouble: 3,
  esriFieldTypeString: 4,
  esriFieldTypeDate: 5,
  esriFieldTypeOID: 6,
  esriFieldTypeGeometry: 7,
  esriFieldTypeBlob: 8,
  esriFieldTypeRaster: 9,
  esriFieldTypeGUID: 10,
  esriFieldTypeGlobalID: 11,
  esriFieldTypeXML: 12,
  esriFieldTypeBigInteger: 13,
  esriFieldTypeDateOnly: 14,
  esriFieldTypeTimeOnly: 15,
  esriFieldTypeTimestampOffset: 16,
};

/** How a field's values are written: the member of `Value` they go in. */
type ValueKind = "string" | "float" | "double" | "sint32" | "oid" | "sint64" | "date";

const VALUE_KINDS: Record<EsriFieldType, ValueKind> = {
  esriFieldTypeSmallInteger: "sint32",
  esriFieldTypeInteger: "sint32",
  esriFieldTypeSingle: "float",
  esriFieldTypeDouble: "double",
  esriFieldTypeString: "string",
  esriFieldTypeDate: "date",
  esriFieldTypeOID: "oid",
  esriFieldTypeGeometry: "string",
  esriFieldTypeBlob: "string",
  esriFieldTypeRaster: "string",
  esriFieldTypeGUID: "string",
  esriFieldTypeGlobalID: "string",
  esriFieldTypeXML: "string",
  esriFieldTypeBigInteger: "sint64",
  // ArcGIS writes these as text in JSON ("2024-05-01", "13:45:00", ISO 8601 with offset).
  esriFieldTypeDateOnly: "string",
  esriFieldTypeTimeOnly: "string",
  esriFieldTypeTimestampOffset: "string",
};

// Members of `Value`.
const VALUE_STRING = 1;
const VALUE_FLOAT = 2;
const VALUE_DOUBLE = 3;
const VALUE_SINT32 = 4;
const VALUE_UINT32 = 5;
const VALUE_SINT64 = 8;
const VALUE_BOOL = 9;

const INT32_MIN = -0x80000000;
const INT32_MAX = 0x7fffffff;
const UINT32_MAX = 0xffffffff;

/** The state of one feature answer's encoding, handed to the pbf callbacks (no closures per feature). */
class FeatureEncoding {
  readonly grid: QuantizationGrid;
  readonly names: string[];
  readonly kinds: ValueKind[];
  readonly parts = new QuantizedParts();
  feature: PbfFeature | undefined;
  geometry: QuantizableGeometry | undefined;
  value: unknown;
  kind: ValueKind = "string";

  constructor(readonly answer: PbfFeaturesAnswer) {
    this.grid = answer.quantization ? gridOf(answer.quantization) : defaultGrid(answer.coordinateSystem);
    this.names = answer.fields.map((field) => field.name);
    this.kinds = answer.fields.map((field) => VALUE_KINDS[field.type]);
  }
}

function writeCountQueryResult(count: number, pbf: PbfWriter): void {
  pbf.writeMessage(QUERY_RESULT_COUNT, writeCountResult, count);
}

function writeCountResult(count: number, pbf: PbfWriter): void {
  pbf.writeVarintField(1, count);
}

function writeIdsQueryResult(
  answer: { objectIdFieldName: string; objectIds: readonly number[] },
  pbf: PbfWriter,
): void {
  pbf.writeMessage(QUERY_RESULT_IDS, writeIdsResult, answer);
}

function writeIdsResult(
  answer: { objectIdFieldName: string; objectIds: readonly number[] },
  pbf: PbfWriter,
): void {
  pbf.writeStringField(1, answer.objectIdFieldName);
  if (answer.objectIds.length > 0) pbf.writeMessage(3, writePackedVarints, answer.objectIds);
}

function writePackedVarints(values: readonly number[], pbf: PbfWriter): void {
  for (const value of values) pbf.writeVarint(value);
}

function writeFeaturesQueryResult(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeMessage(QUERY_RESULT_FEATURES, writeFeatureResult, encoding);
}

function writeFeatureResult(encoding: FeatureEncoding, pbf: PbfWriter): void {
  const answer = encoding.answer;
  pbf.writeStringField(1, answer.objectIdFieldName);
  if (answer.uniqueIdField) pbf.writeMessage(2, writeUniqueIdField, answer.uniqueIdField);
  if (answer.globalIdFieldName) pbf.writeStringField(3, answer.globalIdFieldName);
  pbf.writeVarintField(
    7,
    answer.geometryType ? GEOMETRY_TYPE_CODES[answer.geometryType] : GEOMETRY_TYPE_NONE,
  );
  if (answer.spatialReference) pbf.writeMessage(8, writeSpatialReference, answer.spatialReference);
  if (answer.exceededTransferLimit) pbf.writeBooleanField(9, true);
  if (answer.hasZ) pbf.writeBooleanField(10, true);
  if (answer.hasM) pbf.writeBooleanField(11, true);
  if (answer.geometryType) pbf.writeMessage(12, writeTransform, encoding);
  for (const field of answer.fields) pbf.writeMessage(13, writeField, field);
  for (const feature of answer.features) {
    encoding.feature = feature;
    pbf.writeMessage(15, writeFeature, encoding);
  }
  encoding.feature = undefined;
}

function writeUniqueIdField(field: { name: string; isSystemMaintained: boolean }, pbf: PbfWriter): void {
  pbf.writeStringField(1, field.name);
  if (field.isSystemMaintained) pbf.writeBooleanField(2, true);
}

function writeSpatialReference(
  reference: { wkid?: number; latestWkid?: number; wkt?: string },
  pbf: PbfWriter,
): void {
  if (reference.wkid !== undefined) pbf.writeVarintField(1, reference.wkid);
  if (reference.latestWkid !== undefined) pbf.writeVarintField(2, reference.latestWkid);
  if (reference.wkt !== undefined) pbf.writeStringField(5, reference.wkt);
}

function writeTransform(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeVarintField(1, encoding.grid.originPosition === "upperLeft" ? 0 : 1);
  pbf.writeMessage(2, writeScale, encoding);
  pbf.writeMessage(3, writeTranslate, encoding);
}

// Scale and Translate: x = 1, y = 2, m = 3, z = 4.
function writeScale(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeDoubleField(1, encoding.grid.scaleX);
  pbf.writeDoubleField(2, encoding.grid.scaleY);
  if (encoding.answer.hasM) pbf.writeDoubleField(3, ZM_SCALE);
  if (encoding.answer.hasZ) pbf.writeDoubleField(4, ZM_SCALE);
}

function writeTranslate(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeDoubleField(1, encoding.grid.translateX);
  pbf.writeDoubleField(2, encoding.grid.translateY);
  if (encoding.answer.hasM) pbf.writeDoubleField(3, ZM_TRANSLATE);
  if (encoding.answer.hasZ) pbf.writeDoubleField(4, ZM_TRANSLATE);
}

function writeField(field: PbfField, pbf: PbfWriter): void {
  pbf.writeStringField(1, field.name);
  pbf.writeVarintField(2, FIELD_TYPE_CODES[field.type]);
  pbf.writeStringField(3, field.alias ?? field.name);
}

function writeFeature(encoding: FeatureEncoding, pbf: PbfWriter): void {
  const feature = encoding.feature as PbfFeature;
  const { names, kinds } = encoding;
  for (let i = 0; i < names.length; i++) {
    encoding.value = feature.attributes[names[i] as string];
    encoding.kind = kinds[i] as ValueKind;
    pbf.writeMessage(1, writeValue, encoding);
  }
  if (!encoding.answer.geometryType) return;
  const geometry = feature.geometry;
  if (geometry) {
    if (geometry.type === "esriGeometryPoint") {
      encoding.geometry = geometry;
      pbf.writeMessage(2, writePointGeometry, encoding);
    } else {
      const parts =
        geometry.type === "esriGeometryMultipoint"
          ? [geometry.points]
          : geometry.type === "esriGeometryPolyline"
            ? geometry.paths
            : geometry.rings;
      quantizeParts(parts, encoding.grid, minimumVertices(geometry.type), encoding.parts);
      // A geometry that view mode reduced to nothing is answered as no geometry.
      if (encoding.parts.partCount > 0) {
        encoding.geometry = geometry;
        pbf.writeMessage(2, writeMultipartGeometry, encoding);
      }
    }
  }
  if (feature.centroid) {
    encoding.geometry = feature.centroid;
    pbf.writeMessage(4, writeCentroid, encoding);
  }
  encoding.geometry = undefined;
}

/**
 * One attribute. A value whose JavaScript type does not fit its field (a string in an integer
 * field, say) is written by what it is rather than dropped or mangled.
 */
function writeValue(encoding: FeatureEncoding, pbf: PbfWriter): void {
  const value = encoding.value;
  if (value === null || value === undefined) return;
  if (typeof value === "number") {
    writeNumber(encoding.kind, value, pbf);
    return;
  }
  if (typeof value === "bigint") {
    // pbf writes numbers; a 64-bit integer past 2^53 loses its last bits, as it would in JSON.
    writeNumber(encoding.kind, Number(value), pbf);
    return;
  }
  if (value instanceof Date) {
    writeNumber(encoding.kind, value.getTime(), pbf);
    return;
  }
  if (typeof value === "boolean") {
    pbf.writeBooleanField(VALUE_BOOL, value);
    return;
  }
  pbf.writeStringField(VALUE_STRING, typeof value === "string" ? value : JSON.stringify(value));
}

function writeNumber(kind: ValueKind, value: number, pbf: PbfWriter): void {
  switch (kind) {
    case "string":
      pbf.writeStringField(VALUE_STRING, String(value));
      return;
    case "float":
      pbf.writeFloatField(VALUE_FLOAT, value);
      return;
    case "double":
      pbf.writeDoubleField(VALUE_DOUBLE, value);
      return;
    case "sint32":
      if (Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX) {
        pbf.writeSVarintField(VALUE_SINT32, value);
        return;
      }
      break;
    case "oid":
      if (Number.isInteger(value) && value >= 0 && value <= UINT32_MAX) {
        pbf.writeVarintField(VALUE_UINT32, value);
        return;
      }
      break;
    case "sint64":
    case "date":
      if (Number.isSafeInteger(value)) {
        pbf.writeSVarintField(VALUE_SINT64, value);
        return;
      }
      break;
  }
  // Out of the member's range or not an integer: an integer still fits sint64, anything else is
  // written as the double it is.
  if (Number.isSafeInteger(value)) pbf.writeSVarintField(VALUE_SINT64, value);
  else pbf.writeDoubleField(VALUE_DOUBLE, value);
}

function writePointGeometry(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeMessage(3, writePointCoords, encoding);
}

function writePointCoords(encoding: FeatureEncoding, pbf: PbfWriter): void {
  const point = encoding.geometry as PointGeometry;
  const grid = encoding.grid;
  pbf.writeSVarint(quantizeX(grid, point.x));
  pbf.writeSVarint(quantizeY(grid, point.y));
  if (encoding.answer.hasZ) pbf.writeSVarint(quantizeZM(point.z ?? 0));
  if (encoding.answer.hasM) pbf.writeSVarint(quantizeZM(point.m));
}

function writeCentroid(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeMessage(3, writeCentroidCoords, encoding);
}

function writeCentroidCoords(encoding: FeatureEncoding, pbf: PbfWriter): void {
  const point = encoding.geometry as PointGeometry;
  pbf.writeSVarint(quantizeX(encoding.grid, point.x));
  pbf.writeSVarint(quantizeY(encoding.grid, point.y));
}

function writeMultipartGeometry(encoding: FeatureEncoding, pbf: PbfWriter): void {
  pbf.writeMessage(2, writeLengths, encoding.parts);
  pbf.writeMessage(3, writeMultipartCoords, encoding);
}

function writeLengths(parts: QuantizedParts, pbf: PbfWriter): void {
  for (let p = 0; p < parts.partCount; p++) pbf.writeVarint(parts.lengths[p] as number);
}

function writeMultipartCoords(encoding: FeatureEncoding, pbf: PbfWriter): void {
  const { parts, answer } = encoding;
  const { xs, ys, sources, lengths } = parts;
  const geometry = encoding.geometry as QuantizableGeometry;
  // Where z and m sit in the source positions: [x, y, z?, m?] as the geometry declares them.
  const zIndex = geometry.hasZ ? 2 : -1;
  const mIndex = geometry.hasM ? (geometry.hasZ ? 3 : 2) : -1;
  let i = 0;
  for (let p = 0; p < parts.partCount; p++) {
    const length = lengths[p] as number;
    let lastX = 0;
    let lastY = 0;
    for (let v = 0; v < length; v++, i++) {
      const x = xs[i] as number;
      const y = ys[i] as number;
      pbf.writeSVarint(x - lastX);
      pbf.writeSVarint(y - lastY);
      lastX = x;
      lastY = y;
      if (answer.hasZ || answer.hasM) {
        const source = sources[i] as Position;
        if (answer.hasZ) pbf.writeSVarint(quantizeZM(zIndex < 0 ? 0 : (source[zIndex] ?? 0)));
        if (answer.hasM) pbf.writeSVarint(quantizeZM(mIndex < 0 ? undefined : source[mIndex]));
      }
    }
  }
}
