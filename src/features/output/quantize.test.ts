import { describe, expect, it } from "vitest";
import type {
  MultipointGeometry,
  PointGeometry,
  PolygonGeometry,
  PolylineGeometry,
  Position,
} from "../geometry/esri-json.js";
import {
  defaultGrid,
  gridOf,
  parseQuantizationParameters,
  type QuantizationParameters,
  quantizeGeometry,
  quantizeZM,
  transformJson,
} from "./quantize.js";

function parsed(input: unknown): QuantizationParameters {
  const result = parseQuantizationParameters(input);
  if (!result.ok) throw new Error(`expected parameters, got: ${result.reason}`);
  return result.value;
}

function reason(input: unknown): string {
  const result = parseQuantizationParameters(input);
  if (result.ok) throw new Error("expected a refusal");
  return result.reason;
}

// A 100 x 100 extent with cells of 10: x' = round((x - 100) / 10), and y' = round((300 - y) / 10)
// from the upper left corner or round((y - 200) / 10) from the lower left one.
const extent = { xmin: 100, ymin: 200, xmax: 200, ymax: 300 };
const q = (mode: "view" | "edit", originPosition: "upperLeft" | "lowerLeft"): QuantizationParameters => ({
  extent,
  mode,
  originPosition,
  tolerance: 10,
});

const polyline = (paths: Position[][], hasZ = false): PolylineGeometry => ({
  type: "esriGeometryPolyline",
  hasZ,
  hasM: false,
  paths,
});
const polygon = (rings: Position[][]): PolygonGeometry => ({
  type: "esriGeometryPolygon",
  hasZ: false,
  hasM: false,
  rings,
});

// (104, 296) and (121, 281) fall on the same cells as the vertices before them: (0, 0) and (2, 2).
const path = [
  [100, 300],
  [104, 296],
  [120, 280],
  [121, 281],
  [150, 250],
];

describe("parseQuantizationParameters", () => {
  it("reads the JSON text a client sends", () => {
    expect(
      parsed(
        '{"mode":"edit","originPosition":"lowerLeft","tolerance":2.5,' +
          '"extent":{"type":"extent","xmin":-10,"ymin":-20,"xmax":10,"ymax":20,"spatialReference":{"wkid":102100,"latestWkid":3857}}}',
      ),
    ).toEqual({
      extent: {
        xmin: -10,
        ymin: -20,
        xmax: 10,
        ymax: 20,
        spatialReference: { wkid: 102100, latestWkid: 3857 },
      },
      mode: "edit",
      originPosition: "lowerLeft",
      tolerance: 2.5,
    });
  });

  it("defaults mode to view and originPosition to upperLeft", () => {
    expect(parsed({ extent, tolerance: 1 })).toEqual({
      extent,
      mode: "view",
      originPosition: "upperLeft",
      tolerance: 1,
    });
  });

  it("takes bottomLeft for lowerLeft", () => {
    expect(parsed({ extent, tolerance: 1, originPosition: "bottomLeft" }).originPosition).toBe("lowerLeft");
  });

  it("says what is wrong without naming the parameter", () => {
    expect(reason("{nope")).toBe("is not valid JSON");
    expect(reason([1])).toBe("must be a JSON object");
    expect(reason({ tolerance: 1 })).toBe("must have an extent");
    expect(reason({ extent: "0,0,1,1", tolerance: 1 })).toBe("extent must be an object");
    expect(reason({ extent: { ...extent, ymax: "300" }, tolerance: 1 })).toBe(
      "extent.ymax must be a finite number",
    );
    expect(reason({ extent: { ...extent, xmin: 500 }, tolerance: 1 })).toBe(
      "extent.xmin is greater than extent.xmax",
    );
    expect(reason({ extent: { ...extent, spatialReference: { wkid: -1 } }, tolerance: 1 })).toBe(
      "extent.spatialReference.wkid must be a positive integer (got -1)",
    );
    expect(reason({ extent, tolerance: 1, mode: "fast" })).toBe('mode must be "view" or "edit" (got "fast")');
    expect(reason({ extent, tolerance: 1, originPosition: "center" })).toBe(
      'originPosition must be "upperLeft" or "lowerLeft" (got "center")',
    );
    expect(reason({ extent })).toBe("must have a tolerance");
    expect(reason({ extent, tolerance: 0 })).toBe("tolerance must be a positive number (got 0)");
    expect(reason({ extent, tolerance: -2 })).toBe("tolerance must be a positive number (got -2)");
    expect(reason({ extent, tolerance: "1" })).toBe('tolerance must be a positive number (got "1")');
  });
});

describe("transformJson", () => {
  it("translates to the upper left corner of the extent, or the lower left one", () => {
    expect(transformJson(q("view", "upperLeft"))).toEqual({
      originPosition: "upperLeft",
      scale: [10, 10],
      translate: [100, 300],
    });
    expect(transformJson(q("view", "lowerLeft"))).toEqual({
      originPosition: "lowerLeft",
      scale: [10, 10],
      translate: [100, 200],
    });
  });
});

describe("quantizeGeometry", () => {
  it("drops vertices that repeat a cell in view mode and delta-encodes the rest (upper left)", () => {
    // Cells (0,0) (0,0) (2,2) (2,2) (5,5): kept (0,0) (2,2) (5,5).
    expect(quantizeGeometry(polyline([path]), gridOf(q("view", "upperLeft")))?.paths).toEqual([
      [
        [0, 0],
        [2, 2],
        [3, 3],
      ],
    ]);
  });

  it("keeps every vertex in edit mode", () => {
    expect(quantizeGeometry(polyline([path]), gridOf(q("edit", "upperLeft")))?.paths).toEqual([
      [
        [0, 0],
        [0, 0],
        [2, 2],
        [0, 0],
        [3, 3],
      ],
    ]);
  });

  it("counts y upwards from the lower left corner", () => {
    // Cells (0,10) (0,10) (2,8) (2,8) (5,5): kept (0,10) (2,8) (5,5).
    expect(quantizeGeometry(polyline([path]), gridOf(q("view", "lowerLeft")))?.paths).toEqual([
      [
        [0, 10],
        [2, -2],
        [3, -3],
      ],
    ]);
  });

  it("rounds half a cell up and restarts the deltas at each part", () => {
    const geometry = polyline([
      [
        [105, 295],
        [125, 275],
      ],
      [
        [180, 220],
        [170, 230],
      ],
    ]);
    // (105, 295): (0.5, 0.5) rounds to (1, 1); (125, 275): (2.5, 2.5) to (3, 3).
    expect(quantizeGeometry(geometry, gridOf(q("view", "upperLeft")))?.paths).toEqual([
      [
        [1, 1],
        [2, 2],
      ],
      [
        [8, 8],
        [-1, -1],
      ],
    ]);
  });

  it("drops a path left with one vertex, and answers null when nothing is left", () => {
    const short = [
      [100, 300],
      [101, 301],
    ];
    expect(quantizeGeometry(polyline([short, path]), gridOf(q("view", "upperLeft")))?.paths).toHaveLength(1);
    expect(quantizeGeometry(polyline([short]), gridOf(q("view", "upperLeft")))).toBeNull();
    // Edit mode drops nothing.
    expect(quantizeGeometry(polyline([short]), gridOf(q("edit", "upperLeft")))?.paths).toEqual([
      [
        [0, 0],
        [0, 0],
      ],
    ]);
  });

  it("keeps a ring only while it has three corners and its closing vertex", () => {
    const square = [
      [100, 300],
      [130, 300],
      [130, 270],
      [100, 300],
    ];
    // (101, 299) falls on the first corner's cell: the ring becomes (0,0) (3,0) (0,0).
    const sliver = [
      [100, 300],
      [130, 300],
      [101, 299],
      [100, 300],
    ];
    const grid = gridOf(q("view", "upperLeft"));
    expect(quantizeGeometry(polygon([square, sliver]), grid)?.rings).toEqual([
      [
        [0, 0],
        [3, 0],
        [0, 3],
        [-3, -3],
      ],
    ]);
    expect(quantizeGeometry(polygon([sliver]), grid)).toBeNull();
  });

  it("writes a point absolute, and a multipoint as one chain", () => {
    const point: PointGeometry = {
      type: "esriGeometryPoint",
      hasZ: true,
      hasM: false,
      x: 104,
      y: 296,
      z: 7.25,
    };
    expect(quantizeGeometry(point, gridOf(q("view", "upperLeft")))).toEqual({ ...point, x: 0, y: 0 });
    const multipoint: MultipointGeometry = {
      type: "esriGeometryMultipoint",
      hasZ: false,
      hasM: false,
      points: [
        [100, 300],
        [101, 301],
        [150, 250],
      ],
    };
    expect(quantizeGeometry(multipoint, gridOf(q("view", "upperLeft")))?.points).toEqual([
      [0, 0],
      [5, 5],
    ]);
  });

  it("leaves z and m as they are in JSON", () => {
    const geometry = polyline(
      [
        [
          [100, 300, 1.5],
          [150, 250, -2.25],
        ],
      ],
      true,
    );
    expect(quantizeGeometry(geometry, gridOf(q("view", "upperLeft")))?.paths).toEqual([
      [
        [0, 0, 1.5],
        [5, 5, -2.25],
      ],
    ]);
  });
});

describe("defaultGrid", () => {
  it("is ArcGIS's grid for degrees and for projected units", () => {
    expect(defaultGrid({ geographic: true })).toEqual({
      originPosition: "upperLeft",
      scaleX: 1e-9,
      scaleY: 1e-9,
      translateX: -400,
      translateY: -400,
      dropRepeats: false,
    });
    expect(defaultGrid({ geographic: false })).toMatchObject({
      scaleX: 0.0001,
      translateX: -20037700,
      translateY: -30241100,
    });
    // 0.0001 m in US survey feet.
    expect(defaultGrid({ geographic: false, metersPerUnit: 1200 / 3937 }).scaleX).toBeCloseTo(0.000328083, 9);
  });
});

describe("quantizeZM", () => {
  it("puts z and m on 0.0001 steps above -100000, and a missing m at 0", () => {
    expect(quantizeZM(0)).toBe(1_000_000_000);
    expect(quantizeZM(-100000)).toBe(0);
    // (12.34567 + 100000) / 0.0001 = 1000123456.7
    expect(quantizeZM(12.34567)).toBe(1_000_123_457);
    expect(quantizeZM(Number.NaN)).toBe(0);
    expect(quantizeZM(undefined)).toBe(0);
  });
});
