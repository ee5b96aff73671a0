/**
 * The answers are read back with Esri's own decoders from @esri/arcgis-rest-feature-service:
 * `pbfToArcGIS` is what `queryFeatures({f: "pbf-as-arcgis"})` runs on the bytes a server answers
 * (`queryPbfAsGeoJSONOrArcGIS`), `decode` its message reader underneath. Version 4.10.2 (the one the
 * project pins) reads no z or m of lines and polygons and has no multipoint; version 4.11.1
 * (installed as `arcgis-rest-feature-service-4-11`) reads z and m, so z and m are checked with it.
 * Expected coordinates are worked out by hand from the grid: x = translateX + x' * scale,
 * y = translateY - y' * scale (upper left).
 */
import { describe, expect, it } from "vitest";
import pbfToArcGIS, {
  decode,
} from "../../../node_modules/@esri/arcgis-rest-feature-service/dist/esm/pbf-parser/arcGISPbfParser.js";
import pbfToArcGISWithZM from "../../../node_modules/arcgis-rest-feature-service-4-11/dist/esm/pbf-parser/arcGISPbfParser.js";
import type { Position } from "../geometry/esri-json.js";
import { encodeQueryPbf, type PbfFeature, type PbfFeaturesAnswer, type PbfQueryAnswer } from "./pbf.js";

/** The bytes as `fetch` hands them to the decoder: an ArrayBuffer holding exactly the answer. */
function bytesOf(answer: PbfQueryAnswer): ArrayBuffer {
  return encodeQueryPbf(answer).slice().buffer;
}

function answer(overrides: Partial<PbfFeaturesAnswer>): PbfFeaturesAnswer {
  return {
    kind: "features",
    objectIdFieldName: "OBJECTID",
    geometryType: "esriGeometryPolyline",
    spatialReference: { wkid: 102100, latestWkid: 3857 },
    hasZ: false,
    hasM: false,
    fields: [{ name: "OBJECTID", type: "esriFieldTypeOID" }],
    exceededTransferLimit: false,
    coordinateSystem: { geographic: false },
    features: [],
    ...overrides,
  };
}

function rawFeatureResult(bytes: ArrayBuffer): any {
  return decode(bytes).queryResult.featureResult;
}

/** Each coordinate within `tolerance` of the one expected. */
function expectNear(actual: unknown, expected: unknown, tolerance: number, where = "") {
  if (typeof expected === "number") {
    expect(typeof actual, where).toBe("number");
    expect(Math.abs((actual as number) - expected), `${where}: ${actual} vs ${expected}`).toBeLessThanOrEqual(
      tolerance,
    );
    return;
  }
  expect(Array.isArray(actual), where).toBe(true);
  const list = actual as unknown[];
  expect(list.length, where).toBe((expected as unknown[]).length);
  (expected as unknown[]).forEach((item, i) => {
    expectNear(list[i], item, tolerance, `${where}[${i}]`);
  });
}

const polyline = (paths: Position[][]) =>
  ({ type: "esriGeometryPolyline", hasZ: false, hasM: false, paths }) as const;

describe("encodeQueryPbf, features", () => {
  it("answers every attribute type, nulls and points as REST JS reads them", () => {
    const fields = [
      { name: "OBJECTID", type: "esriFieldTypeOID", alias: "Object ID" },
      { name: "small", type: "esriFieldTypeSmallInteger" },
      { name: "int", type: "esriFieldTypeInteger" },
      { name: "big", type: "esriFieldTypeBigInteger" },
      { name: "single", type: "esriFieldTypeSingle" },
      { name: "double", type: "esriFieldTypeDouble" },
      { name: "text", type: "esriFieldTypeString" },
      { name: "when", type: "esriFieldTypeDate" },
      { name: "day", type: "esriFieldTypeDateOnly" },
      { name: "time", type: "esriFieldTypeTimeOnly" },
      { name: "stamp", type: "esriFieldTypeTimestampOffset" },
      { name: "guid", type: "esriFieldTypeGUID" },
      { name: "gid", type: "esriFieldTypeGlobalID" },
    ] as const;
    const full = {
      OBJECTID: 1,
      small: -7,
      int: 123456789,
      big: 2 ** 40 + 3,
      single: 0.1,
      double: 1234.5678,
      text: 'héllo ✓ "quoted"',
      when: 1399939200000,
      day: "2024-05-01",
      time: "13:45:00",
      stamp: "2024-05-01T13:45:00+02:00",
      guid: "{8F2C1D3A-0B4E-4C5D-9E6F-7A8B9C0D1E2F}",
      gid: "9ffc895b-64d1-4b42-9577-c16c654d94c7",
    };
    const bytes = bytesOf(
      answer({
        objectIdFieldName: "OBJECTID",
        uniqueIdField: { name: "OBJECTID", isSystemMaintained: true },
        globalIdFieldName: "gid",
        geometryType: "esriGeometryPoint",
        exceededTransferLimit: true,
        fields: [...fields],
        features: [
          {
            attributes: full,
            geometry: {
              type: "esriGeometryPoint",
              hasZ: false,
              hasM: false,
              x: -13046000.123456,
              y: 4036000.987654,
            },
          },
          // Every value null, one key absent; a date before 1970.
          {
            attributes: {
              OBJECTID: 2,
              small: null,
              int: null,
              big: null,
              single: null,
              double: null,
              text: null,
              when: -86400000,
              day: null,
              time: null,
              stamp: null,
              guid: null,
            },
            geometry: null,
          },
        ],
      }),
    );
    const decoded = pbfToArcGIS(bytes) as any;
    expect(decoded).toMatchObject({
      objectIdFieldName: "OBJECTID",
      uniqueIdField: { name: "OBJECTID", isSystemMaintained: true },
      globalIdFieldName: "gid",
      geometryType: "esriGeometryPoint",
      spatialReference: { wkid: 102100, latestWkid: 3857 },
      exceededTransferLimit: true,
    });
    expect(decoded.fields.map((f: any) => [f.name, f.type, f.alias])).toEqual(
      fields.map((f) => [f.name, f.type, "alias" in f ? f.alias : f.name]),
    );
    expect(decoded.features[0].attributes).toEqual({ ...full, single: Math.fround(0.1) });
    // The members ArcGIS Online fills for these types (recorded answers): dates are sint64.
    expect(rawFeatureResult(bytes).features[0].attributes.map((v: any) => v.value_type)).toEqual([
      "uint_value",
      "sint_value",
      "sint_value",
      "sint64_value",
      "float_value",
      "double_value",
      "string_value",
      "sint64_value",
      "string_value",
      "string_value",
      "string_value",
      "string_value",
      "string_value",
    ]);
    expect(decoded.features[1].attributes).toEqual({
      OBJECTID: 2,
      small: null,
      int: null,
      big: null,
      single: null,
      double: null,
      text: null,
      when: -86400000,
      day: null,
      time: null,
      stamp: null,
      guid: null,
      gid: null,
    });
    // No quantizationParameters: Web Mercator's default grid, 0.0001 m.
    const point = decoded.features[0].geometry;
    expectNear([point.x, point.y], [-13046000.123456, 4036000.987654], 0.00005 + 1e-7);
    expect(decoded.features[1].geometry).toBeNull();
    expect(rawFeatureResult(bytes).transform).toEqual({
      quantizeOriginPostion: 0,
      scale: { xScale: 0.0001, yScale: 0.0001, mScale: 0, zScale: 0 },
      translate: { xTranslate: -20037700, yTranslate: -30241100, mTranslate: 0, zTranslate: 0 },
    });
  });

  it("writes polylines on the quantization grid, dropping repeated cells in view mode", () => {
    // Cells of 0.5 from (1000, 2000): x' = round((x - 1000) * 2), y' = round((2000 - y) * 2).
    const features: PbfFeature[] = [
      {
        attributes: { OBJECTID: 1 },
        geometry: polyline([
          [
            [1010.2, 1990.1], // (20.4, 19.8) -> (20, 20): (1010, 1990)
            [1010.1, 1989.9], // (20.2, 20.2) -> (20, 20): dropped
            [1100.26, 1950.74], // (200.52, 98.52) -> (201, 99): (1100.5, 1950.5)
          ],
          [
            [1500, 1500], // (1000, 1000)
            [1500.2, 1499.8], // (1000.4, 1000.4) -> (1000, 1000): one vertex left, path dropped
          ],
          [
            [1500, 1500], // (1000, 1000)
            [1600, 1400], // (1200, 1200)
          ],
        ]),
      },
      {
        attributes: { OBJECTID: 2 },
        geometry: polyline([
          [
            [1500, 1500],
            [1500.1, 1500.1],
          ],
        ]),
      },
    ];
    const bytes = bytesOf(
      answer({
        quantization: {
          extent: { xmin: 1000, ymin: 1000, xmax: 2000, ymax: 2000 },
          mode: "view",
          originPosition: "upperLeft",
          tolerance: 0.5,
        },
        features,
      }),
    );
    const decoded = pbfToArcGIS(bytes) as any;
    expect(decoded.features[0].geometry).toEqual({
      paths: [
        [
          [1010, 1990],
          [1100.5, 1950.5],
        ],
        [
          [1500, 1500],
          [1600, 1400],
        ],
      ],
    });
    // Nothing left of the second feature's geometry: none is answered.
    expect(decoded.features[1].geometry).toBeNull();
    const raw = rawFeatureResult(bytes);
    expect(raw.transform).toMatchObject({
      quantizeOriginPostion: 0,
      scale: { xScale: 0.5, yScale: 0.5 },
      translate: { xTranslate: 1000, yTranslate: 2000 },
    });
    // First vertex of each part absolute, then deltas.
    expect(raw.features[0].geometry.lengths).toEqual([2, 2]);
    expect(raw.features[0].geometry.coords).toEqual([20, 20, 181, 79, 1000, 1000, 200, 200]);
  });

  it("writes polygons with holes that both REST JS versions read as holes", () => {
    // Cells of 0.25 from (0, 100), edit mode.
    const outer = [
      [0, 0],
      [0, 10],
      [10, 10],
      [10, 0],
      [0, 0],
    ];
    const hole = [
      [2, 2],
      [4, 2],
      [4, 4],
      [2, 4],
      [2, 2],
    ];
    // 30.1 falls on the cell of 30: round((100 - 30.1) * 4) = 280.
    const triangle = [
      [20, 20],
      [20, 30.1],
      [30, 30],
      [20, 20],
    ];
    const bytes = bytesOf(
      answer({
        geometryType: "esriGeometryPolygon",
        quantization: {
          extent: { xmin: 0, ymin: 0, xmax: 100, ymax: 100 },
          mode: "edit",
          originPosition: "upperLeft",
          tolerance: 0.25,
        },
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: {
              type: "esriGeometryPolygon",
              hasZ: false,
              hasM: false,
              rings: [outer, hole, triangle],
            },
          },
        ],
      }),
    );
    const triangleOnGrid = [
      [20, 20],
      [20, 30],
      [30, 30],
      [20, 20],
    ];
    expect((pbfToArcGISWithZM(bytes) as any).features[0].geometry).toEqual({
      rings: [outer, hole, triangleOnGrid],
    });
    // 4.10.2 groups rings by orientation: a clockwise ring starts a polygon, an anticlockwise
    // one is a hole of it. Had y been flipped, the hole would come out as an outer ring.
    expect((pbfToArcGIS(bytes) as any).features[0].geometry).toEqual({
      rings: [[outer, hole], [triangleOnGrid]],
    });
  });

  it("writes z and m on their own grid, and a missing m as null", () => {
    const tolerance = 0.00005 + 1e-7;
    // WGS 84 without quantization: 1e-9 degree.
    const points = bytesOf(
      answer({
        geometryType: "esriGeometryPoint",
        spatialReference: { wkid: 4326, latestWkid: 4326 },
        coordinateSystem: { geographic: true },
        hasZ: true,
        hasM: true,
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: {
              type: "esriGeometryPoint",
              hasZ: true,
              hasM: true,
              x: -122.123456789,
              y: 37.987654321,
              z: 12.3456,
              m: 7.5,
            },
          },
          {
            attributes: { OBJECTID: 2 },
            geometry: {
              type: "esriGeometryPoint",
              hasZ: true,
              hasM: true,
              x: 1,
              y: 2,
              z: -3.25,
              m: Number.NaN,
            },
          },
        ],
      }),
    );
    const decodedPoints = (pbfToArcGISWithZM(points) as any).features.map((f: any) => f.geometry);
    expectNear(
      [decodedPoints[0].x, decodedPoints[0].y, decodedPoints[0].z, decodedPoints[0].m],
      [-122.123456789, 37.987654321, 12.3456, 7.5],
      tolerance,
    );
    expectNear([decodedPoints[1].x, decodedPoints[1].y, decodedPoints[1].z], [1, 2, -3.25], tolerance);
    expect(decodedPoints[1].m).toBeNull();
    expect(rawFeatureResult(points).transform).toEqual({
      quantizeOriginPostion: 0,
      scale: { xScale: 1e-9, yScale: 1e-9, mScale: 0.0001, zScale: 0.0001 },
      translate: { xTranslate: -400, yTranslate: -400, mTranslate: -100000, zTranslate: -100000 },
    });

    const lines = bytesOf(
      answer({
        hasZ: true,
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: {
              type: "esriGeometryPolyline",
              hasZ: true,
              hasM: false,
              paths: [
                [
                  [500000.25, 4000000.5, 100.1234],
                  [500010.75, 4000020.25, 101.5],
                  [500030, 4000000, -5],
                ],
              ],
            },
          },
        ],
      }),
    );
    expectNear(
      (pbfToArcGISWithZM(lines) as any).features[0].geometry.paths,
      [
        [
          [500000.25, 4000000.5, 100.1234],
          [500010.75, 4000020.25, 101.5],
          [500030, 4000000, -5],
        ],
      ],
      tolerance,
    );

    const ring = [
      [0, 0, 1, 10],
      [0, 10, 2, 20],
      [10, 10, 3, 30],
      [10, 0, 4, 40],
      [0, 0, 1, 10],
    ];
    const polygons = bytesOf(
      answer({
        geometryType: "esriGeometryPolygon",
        hasZ: true,
        hasM: true,
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: { type: "esriGeometryPolygon", hasZ: true, hasM: true, rings: [ring] },
          },
        ],
      }),
    );
    expectNear((pbfToArcGISWithZM(polygons) as any).features[0].geometry.rings, [ring], tolerance);
    // z and m are absolute, not deltas: (1 + 100000) / 0.0001 and (10 + 100000) / 0.0001.
    expect(rawFeatureResult(polygons).features[0].geometry.coords.slice(0, 8)).toEqual([
      200377000000, -302411000000, 1000010000, 1000100000, 0, -100000, 1000020000, 1000200000,
    ]);
  });

  it("writes a multipoint as one part of deltas", () => {
    // Cells of 1 from (0, 100).
    const bytes = bytesOf(
      answer({
        geometryType: "esriGeometryMultipoint",
        quantization: {
          extent: { xmin: 0, ymin: 0, xmax: 100, ymax: 100 },
          mode: "view",
          originPosition: "upperLeft",
          tolerance: 1,
        },
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: {
              type: "esriGeometryMultipoint",
              hasZ: false,
              hasM: false,
              points: [
                [10, 90], // (10, 10)
                [10.2, 89.9], // (10, 10): dropped
                [20, 80], // (20, 20)
                [15, 85], // (15, 15)
              ],
            },
          },
        ],
      }),
    );
    const raw = rawFeatureResult(bytes);
    expect(raw.geometryType).toBe(1);
    expect(raw.features[0].geometry.lengths).toEqual([3]);
    expect(raw.features[0].geometry.coords).toEqual([10, 10, 10, 10, -5, -5]);
  });

  it("counts y upwards from the lower left corner", () => {
    // Cells of 1 from (5, 7): x' = x - 5, y' = y - 7.
    const bytes = bytesOf(
      answer({
        quantization: {
          extent: { xmin: 5, ymin: 7, xmax: 100, ymax: 100 },
          mode: "view",
          originPosition: "lowerLeft",
          tolerance: 1,
        },
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: polyline([
              [
                [10, 20],
                [30, 50],
              ],
            ]),
          },
        ],
      }),
    );
    const raw = rawFeatureResult(bytes);
    expect(raw.transform).toMatchObject({
      quantizeOriginPostion: 1,
      scale: { xScale: 1, yScale: 1 },
      translate: { xTranslate: 5, yTranslate: 7 },
    });
    expect(raw.features[0].geometry.coords).toEqual([5, 13, 20, 30]);
  });

  it("writes a centroid as an absolute point", () => {
    const bytes = bytesOf(
      answer({
        geometryType: "esriGeometryPolygon",
        quantization: {
          extent: { xmin: 0, ymin: 0, xmax: 100, ymax: 100 },
          mode: "view",
          originPosition: "upperLeft",
          tolerance: 2,
        },
        features: [
          {
            attributes: { OBJECTID: 1 },
            geometry: {
              type: "esriGeometryPolygon",
              hasZ: false,
              hasM: false,
              rings: [
                [
                  [0, 0],
                  [0, 10],
                  [10, 10],
                  [10, 0],
                  [0, 0],
                ],
              ],
            },
            // (5, 5): x' = round(5 / 2) = 3, y' = round(95 / 2) = 48.
            centroid: { type: "esriGeometryPoint", hasZ: false, hasM: false, x: 5, y: 5 },
          },
        ],
      }),
    );
    expect(rawFeatureResult(bytes).features[0].centroid.coords).toEqual([3, 48]);
  });

  it("answers a table with no geometry type and no transform", () => {
    const bytes = bytesOf(
      answer({
        geometryType: undefined,
        spatialReference: undefined,
        fields: [
          { name: "OBJECTID", type: "esriFieldTypeOID" },
          { name: "name", type: "esriFieldTypeString" },
        ],
        features: [{ attributes: { OBJECTID: 7, name: "row" }, geometry: null }],
      }),
    );
    const raw = rawFeatureResult(bytes);
    expect(raw.geometryType).toBe(127);
    expect(raw.transform).toBeUndefined();
    expect(raw.features[0].geometry).toBeUndefined();
    expect(raw.features[0].attributes.map((v: any) => v[v.value_type])).toEqual([7, "row"]);
  });

  it("writes a value that does not fit its field by what it is", () => {
    const bytes = bytesOf(
      answer({
        geometryType: undefined,
        fields: [
          { name: "OBJECTID", type: "esriFieldTypeOID" },
          { name: "a", type: "esriFieldTypeInteger" },
          { name: "b", type: "esriFieldTypeInteger" },
          { name: "c", type: "esriFieldTypeDouble" },
          { name: "d", type: "esriFieldTypeString" },
          { name: "e", type: "esriFieldTypeString" },
        ],
        features: [
          {
            attributes: { OBJECTID: 2 ** 33, a: 3_000_000_000, b: 2.5, c: "n/a", d: true, e: 12 },
            geometry: null,
          },
        ],
      }),
    );
    const values = rawFeatureResult(bytes).features[0].attributes.map((v: any) => [
      v.value_type,
      v[v.value_type],
    ]);
    expect(values).toEqual([
      ["sint64_value", 2 ** 33],
      ["sint64_value", 3_000_000_000],
      ["double_value", 2.5],
      ["string_value", "n/a"],
      ["bool_value", true],
      ["string_value", "12"],
    ]);
  });

  it("writes the spatial reference of a WKT answer", () => {
    const wkt =
      'PROJCS["Custom",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137,298.257223563]]]]';
    const bytes = bytesOf(answer({ spatialReference: { wkt } }));
    expect((pbfToArcGIS(bytes) as any).spatialReference).toEqual({ wkt });
  });

  it("reads back thousands of features, each on its cell", () => {
    // Paths of 1 to 40 vertices on a 0.001 grid, so that messages span many length bytes.
    const features: PbfFeature[] = [];
    const expected: number[][][] = [];
    for (let i = 0; i < 3000; i++) {
      const path: Position[] = [];
      const onGrid: number[][] = [];
      for (let v = 0; v < 2 + (i % 39); v++) {
        const x = 1000 + i + v * 0.25;
        const y = 2000 - i * 0.5 + v * 0.125;
        path.push([x + 0.0003, y - 0.0002]);
        onGrid.push([x, y]);
      }
      features.push({ attributes: { OBJECTID: i + 1 }, geometry: polyline([path]) });
      expected.push(onGrid);
    }
    const bytes = bytesOf(
      answer({
        quantization: {
          extent: { xmin: 0, ymin: 0, xmax: 10000, ymax: 10000 },
          mode: "edit",
          originPosition: "upperLeft",
          tolerance: 0.001,
        },
        features,
      }),
    );
    const decoded = pbfToArcGIS(bytes) as any;
    expect(decoded.features).toHaveLength(3000);
    // One comparison for the lot: an expect per coordinate would take seconds.
    let worst = 0;
    decoded.features.forEach((feature: any, i: number) => {
      expect(feature.attributes.OBJECTID).toBe(i + 1);
      const [path] = feature.geometry.paths;
      expect(path).toHaveLength((expected[i] as number[][]).length);
      path.forEach(([x, y]: number[], v: number) => {
        const [ex, ey] = (expected[i] as number[][])[v] as number[];
        worst = Math.max(
          worst,
          Math.abs((x as number) - (ex as number)),
          Math.abs((y as number) - (ey as number)),
        );
      });
    });
    expect(worst).toBeLessThan(1e-6);
  });
});

describe("encodeQueryPbf, size", () => {
  it("spends on a feature only the bytes Esri's proto requires (68 for a point with five attributes)", () => {
    const fields: PbfFeaturesAnswer["fields"] = [
      { name: "OBJECTID", type: "esriFieldTypeOID" },
      { name: "name", type: "esriFieldTypeString" },
      { name: "pop", type: "esriFieldTypeInteger" },
      { name: "value", type: "esriFieldTypeDouble" },
      { name: "date", type: "esriFieldTypeDate" },
    ];
    const point = (objectId: number): PbfFeature => ({
      attributes: {
        OBJECTID: objectId,
        name: "North Mill 123",
        pop: 123456,
        value: 123.4567,
        date: 1234567890000,
      },
      geometry: { type: "esriGeometryPoint", hasZ: false, hasM: false, x: 12.345678, y: 45.123456 },
    });
    const points = (n: number) =>
      answer({
        geometryType: "esriGeometryPoint",
        spatialReference: { wkid: 4326 },
        coordinateSystem: { geographic: true },
        fields,
        features: Array.from({ length: n }, (_, i) => point(150_000 + i)),
      });
    // By hand, from the proto: a Value is its tag and length in the feature, then its member's
    // tag and payload (3 bytes + payload). OBJECTID uint 150000: 3 bytes; the name: a length byte
    // and 14 bytes; pop sint 123456 (zigzag 246912 < 2^21): 3; the double: 8; the date sint64
    // (zigzag 2469135780000 < 2^42): 6. Attributes: 6 + 18 + 6 + 11 + 9 = 50. The geometry on
    // WGS 84's default grid (1e-9 from -400, upper left): x' = 412345678000 and y' = -445123456000,
    // zigzagged below 2^40, 6 bytes each, in coords (tag, length) in Geometry (tag, length): 16.
    // The feature's own tag and length: 2. Total 68, where its JSON takes about 150.
    const one = encodeQueryPbf(points(1)).byteLength;
    expect(encodeQueryPbf(points(2)).byteLength - one).toBe(68);
    expect(encodeQueryPbf(points(101)).byteLength - one).toBe(100 * 68);
    const decoded = pbfToArcGIS(bytesOf(points(2))) as any;
    expect(decoded.features[1].attributes).toEqual({ ...point(150_001).attributes });
    expect(decoded.features[1].geometry.x).toBeCloseTo(12.345678, 9);
    expect(decoded.features[1].geometry.y).toBeCloseTo(45.123456, 9);
  });
});

describe("encodeQueryPbf, count and ids", () => {
  it("answers a count", () => {
    expect(decode(bytesOf({ kind: "count", count: 1234567 })).queryResult.countResult).toEqual({
      count: 1234567,
    });
    expect(decode(bytesOf({ kind: "count", count: 0 })).queryResult.countResult).toEqual({ count: 0 });
  });

  it("answers object ids", () => {
    const ids = [1, 2, 300, 2 ** 32];
    expect(
      decode(bytesOf({ kind: "objectIds", objectIdFieldName: "FID", objectIds: ids })).queryResult.idsResult,
    ).toMatchObject({ objectIdFieldName: "FID", objectIds: ids });
    expect(
      decode(bytesOf({ kind: "objectIds", objectIdFieldName: "FID", objectIds: [] })).queryResult.idsResult,
    ).toMatchObject({ objectIdFieldName: "FID", objectIds: [] });
  });
});
