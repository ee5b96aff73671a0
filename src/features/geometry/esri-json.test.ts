import { describe, expect, it } from "vitest";
import {
  boundsOf,
  checkAgainstLayer,
  DEFAULT_GEOMETRY_LIMITS,
  envelopeParts,
  type Geometry,
  parseEsriGeometry,
  parseGeometryParam,
} from "./esri-json.js";

function ok(result: { ok: true; value: Geometry } | { ok: false; error: { message: string } }): Geometry {
  if (!result.ok) throw new Error(`expected a geometry, got: ${result.error.message}`);
  return result.value;
}

const square = [
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

describe("parseEsriGeometry", () => {
  it("reads a point with z and m and its spatial reference", () => {
    expect(ok(parseEsriGeometry({ x: 1, y: 2, z: 3, m: 4, spatialReference: { wkid: 4326 } }))).toEqual({
      type: "esriGeometryPoint",
      x: 1,
      y: 2,
      z: 3,
      m: 4,
      hasZ: true,
      hasM: true,
      spatialReference: { wkid: 4326 },
    });
  });

  it("reads a multipoint and a polyline with the declared layout of Z and M", () => {
    const multipoint = ok(parseEsriGeometry({ hasM: true, points: [[1, 2, 7]] }));
    expect(multipoint).toMatchObject({
      type: "esriGeometryMultipoint",
      hasZ: false,
      hasM: true,
      points: [[1, 2, 7]],
    });
    const line = ok(
      parseEsriGeometry({
        hasZ: true,
        hasM: true,
        paths: [
          [
            [0, 0, 1, 2],
            [1, 1, 3, 4],
          ],
        ],
      }),
    );
    expect(line).toMatchObject({
      type: "esriGeometryPolyline",
      paths: [
        [
          [0, 0, 1, 2],
          [1, 1, 3, 4],
        ],
      ],
    });
  });

  it("drops values past the declared layout rather than guessing whether they are Z or M", () => {
    expect(ok(parseEsriGeometry({ points: [[1, 2, 3]] }))).toMatchObject({ points: [[1, 2]] });
  });

  it("keeps a polygon's holes as rings, in the order given", () => {
    const polygon = ok(
      parseEsriGeometry({ rings: [square, hole], spatialReference: { wkid: 102100, latestWkid: 3857 } }),
    );
    expect(polygon).toMatchObject({ type: "esriGeometryPolygon", rings: [square, hole] });
  });

  it("closes an unclosed ring by repeating its first position", () => {
    const polygon = ok(parseEsriGeometry({ rings: [square.slice(0, 4)] }));
    expect(polygon).toMatchObject({ rings: [square] });
  });

  it("reads an envelope with its Z range", () => {
    expect(ok(parseEsriGeometry({ xmin: 1, ymin: 2, xmax: 3, ymax: 4, zmin: 0, zmax: 9 }))).toMatchObject({
      type: "esriGeometryEnvelope",
      hasZ: true,
      zmin: 0,
      zmax: 9,
    });
  });

  it.each([
    [{ x: 1 }, "invalidValue", "y must be a finite number (got undefined)."],
    [{ x: "1", y: 2 }, "invalidValue", 'x must be a finite number (got "1").'],
    [{ x: null, y: null }, "emptyGeometry", "is an empty point (x is null)."],
    [{ x: 1, y: 2, hasZ: true }, "invalidValue", "has hasZ true but no z."],
    [
      { foo: 1 },
      "unknownShape",
      "has none of x, points, paths, rings or xmin; it is not an Esri JSON geometry.",
    ],
    [[1, 2], "invalidValue", "must be an Esri JSON geometry object."],
    [{ paths: [] }, "emptyGeometry", "paths is empty."],
    [{ paths: [[[0, 0]]] }, "invalidValue", "paths[0] has 1 positions; a path needs at least 2."],
    [
      {
        rings: [
          [
            [0, 0],
            [1, 1],
          ],
        ],
      },
      "invalidValue",
      "rings[0] has 2 positions; a ring needs at least 3.",
    ],
    [
      {
        rings: [
          square,
          [
            [0, 0],
            [1, 1],
            [0, 0],
          ],
        ],
      },
      "invalidValue",
      "rings[1] has fewer than 3 distinct positions; a ring needs at least 3.",
    ],
    [
      {
        rings: [
          [
            [0, 0],
            [1, 1],
            [1, 1],
            [0, 0],
          ],
        ],
      },
      "invalidValue",
      "rings[0] has fewer than 3 distinct positions; a ring needs at least 3.",
    ],
    [{ hasZ: true, rings: [square] }, "invalidValue", "rings[0][0] has 2 values; expected [x, y, z]."],
    [
      {
        paths: [
          [
            [0, 0],
            [1, Number.NaN],
          ],
        ],
      },
      "invalidValue",
      "paths[0][1][1] must be a finite number (got NaN).",
    ],
    [{ points: [[0, 0, 0, 0, 0]] }, "invalidValue", "points[0] has 5 values; at most 4 (x, y, z, m)."],
    [{ xmin: 0, ymin: 5, xmax: 1, ymax: 4 }, "invalidValue", "ymin (5) is greater than ymax (4)."],
    [
      { x: 1, y: 2, spatialReference: { wkid: -3 } },
      "invalidSpatialReference",
      "spatialReference.wkid must be a positive integer (got -3).",
    ],
    [
      { x: 1, y: 2, spatialReference: {} },
      "invalidSpatialReference",
      "spatialReference has neither wkid, latestWkid nor wkt.",
    ],
  ])("refuses %j, saying what is wrong", (input, code, message) => {
    const result = parseEsriGeometry(input);
    expect(result).toEqual({ ok: false, error: { code, message } });
  });

  it("refuses a geometry of another type than the one declared", () => {
    const result = parseEsriGeometry({ x: 1, y: 2 }, { declared: "esriGeometryPolygon" });
    expect(result).toEqual({
      ok: false,
      error: { code: "typeMismatch", message: "is a point but the geometry type is esriGeometryPolygon." },
    });
  });
});

describe("limits", () => {
  const limits = { ...DEFAULT_GEOMETRY_LIMITS, maxVertices: 10, maxParts: 2 };

  it("accepts a geometry at the vertex limit and refuses one past it", () => {
    const ring = (n: number) => [
      ...Array.from({ length: n - 1 }, (_, i) => [Math.cos(i), Math.sin(i)]),
      [1, 0],
    ];
    expect(parseEsriGeometry({ rings: [ring(10)] }, { limits }).ok).toBe(true);
    expect(parseEsriGeometry({ rings: [ring(11)] }, { limits })).toEqual({
      ok: false,
      error: {
        code: "tooManyVertices",
        message: "rings[0][10] is past the limit of 10 vertices per geometry.",
      },
    });
  });

  it("counts the position added to close a ring", () => {
    const open = Array.from({ length: 10 }, (_, i) => [Math.cos(i), Math.sin(i)]);
    expect(parseEsriGeometry({ rings: [open] }, { limits })).toMatchObject({
      ok: false,
      error: { code: "tooManyVertices" },
    });
  });

  it("refuses more parts than allowed", () => {
    const path = [
      [0, 0],
      [1, 1],
    ];
    expect(parseEsriGeometry({ paths: [path, path] }, { limits }).ok).toBe(true);
    expect(parseEsriGeometry({ paths: [path, path, path] }, { limits })).toEqual({
      ok: false,
      error: { code: "tooManyParts", message: "paths[2] is past the limit of 2 parts per geometry." },
    });
    expect(
      parseEsriGeometry(
        {
          points: [
            [0, 0],
            [1, 1],
            [2, 2],
          ],
        },
        { limits },
      ),
    ).toMatchObject({
      ok: false,
      error: { code: "tooManyParts" },
    });
  });

  it("refuses a wkt longer than the limit", () => {
    const result = parseEsriGeometry(
      { x: 0, y: 0, spatialReference: { wkt: "x".repeat(11) } },
      {
        limits: { ...limits, maxWktLength: 10 },
      },
    );
    expect(result).toMatchObject({ ok: false, error: { code: "invalidSpatialReference" } });
  });
});

describe("parseGeometryParam", () => {
  it("reads 'x,y' as a point and 'xmin,ymin,xmax,ymax' as an envelope", () => {
    expect(ok(parseGeometryParam(" -3.5, 40 ", "esriGeometryPoint"))).toEqual({
      type: "esriGeometryPoint",
      hasZ: false,
      hasM: false,
      x: -3.5,
      y: 40,
    });
    expect(ok(parseGeometryParam("-10,-5.5,1e1,20", undefined))).toMatchObject({
      type: "esriGeometryEnvelope",
      xmin: -10,
      ymin: -5.5,
      xmax: 10,
      ymax: 20,
    });
  });

  it("reads Esri JSON, with the type from the parameter or from the members", () => {
    expect(ok(parseGeometryParam('{"xmin":0,"ymin":0,"xmax":1,"ymax":1}', "esriGeometryEnvelope")).type).toBe(
      "esriGeometryEnvelope",
    );
    expect(ok(parseGeometryParam('{"rings":[[[0,0],[0,1],[1,1],[0,0]]]}', undefined)).type).toBe(
      "esriGeometryPolygon",
    );
    expect(parseGeometryParam('{"x":0,"y":0}', "esriGeometryPolygon")).toMatchObject({
      ok: false,
      error: { code: "typeMismatch" },
    });
  });

  it.each([
    ["", "emptyGeometry"],
    ["{x:1}", "invalidJson"],
    ["1,2,3", "invalidSyntax"],
    ["1,2,x,4", "invalidSyntax"],
    ["0x10,2", "invalidSyntax"],
    ["1e999,2", "invalidValue"],
    ["1,2,3,4", "typeMismatch", "esriGeometryPoint"],
    ["1,2", "typeMismatch", "esriGeometryEnvelope"],
    ["1,2", "invalidValue", "esriGeometryCircle"],
  ])("refuses %j (%s)", (text, code, type?: string) => {
    expect(parseGeometryParam(text, type)).toMatchObject({ ok: false, error: { code } });
  });
});

describe("checkAgainstLayer", () => {
  const point = ok(parseEsriGeometry({ x: 1, y: 2 }));
  it("accepts a geometry of the layer's type and refuses another", () => {
    expect(checkAgainstLayer(point, { geometryType: "esriGeometryPoint" }).ok).toBe(true);
    expect(checkAgainstLayer(point, { geometryType: "esriGeometryPolyline" })).toEqual({
      ok: false,
      error: { code: "typeMismatch", message: "is a point but the layer holds esriGeometryPolyline." },
    });
  });

  it("refuses Z on a layer without Z, and its absence on a layer with Z", () => {
    const withZ = ok(parseEsriGeometry({ x: 1, y: 2, z: 3 }));
    expect(checkAgainstLayer(withZ, { geometryType: "esriGeometryPoint" })).toMatchObject({
      error: { message: "has Z values but the layer has no Z." },
    });
    expect(checkAgainstLayer(point, { geometryType: "esriGeometryPoint", hasZ: true })).toMatchObject({
      error: { message: "has no Z values but the layer needs them." },
    });
    expect(checkAgainstLayer(withZ, { geometryType: "esriGeometryPoint", hasZ: true }).ok).toBe(true);
  });
});

describe("boundsOf and envelopeParts", () => {
  it("gives the box of every kind of geometry", () => {
    expect(boundsOf(ok(parseEsriGeometry({ x: 3, y: -4 })))).toEqual({
      xmin: 3,
      ymin: -4,
      xmax: 3,
      ymax: -4,
    });
    expect(boundsOf(ok(parseEsriGeometry({ rings: [square, hole] })))).toEqual({
      xmin: 0,
      ymin: 0,
      xmax: 10,
      ymax: 10,
    });
    expect(
      boundsOf(
        ok(
          parseEsriGeometry({
            paths: [
              [
                [5, 1],
                [-2, 7],
              ],
              [
                [9, -3],
                [0, 0],
              ],
            ],
          }),
        ),
      ),
    ).toEqual({
      xmin: -2,
      ymin: -3,
      xmax: 9,
      ymax: 7,
    });
  });

  it("keeps an envelope that crosses the antimeridian as given", () => {
    const envelope = ok(parseGeometryParam("170,-10,-170,10", undefined));
    expect(boundsOf(envelope)).toEqual({ xmin: 170, ymin: -10, xmax: -170, ymax: 10 });
  });

  it("splits an envelope with xmin > xmax at the antimeridian where the reference wraps", () => {
    expect(envelopeParts({ xmin: 170, ymin: -10, xmax: -170, ymax: 10 }, [-180, 180])).toEqual({
      ok: true,
      value: [
        { xmin: 170, ymin: -10, xmax: 180, ymax: 10 },
        { xmin: -180, ymin: -10, xmax: -170, ymax: 10 },
      ],
    });
    expect(envelopeParts({ xmin: -5, ymin: 0, xmax: 5, ymax: 1 }, [-180, 180])).toEqual({
      ok: true,
      value: [{ xmin: -5, ymin: 0, xmax: 5, ymax: 1 }],
    });
  });

  it("refuses xmin > xmax where the reference does not wrap, or bounds outside the wrap", () => {
    expect(envelopeParts({ xmin: 500000, ymin: 0, xmax: 400000, ymax: 1 })).toMatchObject({
      ok: false,
      error: { code: "crossesWithoutWrap" },
    });
    expect(envelopeParts({ xmin: 190, ymin: 0, xmax: -170, ymax: 1 }, [-180, 180])).toMatchObject({
      ok: false,
      error: { code: "invalidValue" },
    });
  });
});
