import { describe, expect, it } from "vitest";
import type { Geometry, PolygonGeometry, Position } from "./esri-json.js";
import { toJsts } from "./jsts-geometry.js";
import {
  centroidOf,
  douglasPeucker,
  dropZM,
  generalize,
  roundCoordinates,
  toGeoJsonGeometry,
} from "./output.js";
import { locateInRings } from "./rings.js";

const polygon = (...rings: Position[][]): PolygonGeometry => ({
  type: "esriGeometryPolygon",
  hasZ: false,
  hasM: false,
  rings,
});
const outer = (xmin: number, ymin: number, xmax: number, ymax: number): Position[] => [
  [xmin, ymin],
  [xmin, ymax],
  [xmax, ymax],
  [xmax, ymin],
  [xmin, ymin],
];
const hole = (xmin: number, ymin: number, xmax: number, ymax: number): Position[] => [
  [xmin, ymin],
  [xmax, ymin],
  [xmax, ymax],
  [xmin, ymax],
  [xmin, ymin],
];

/** Twice the signed area, written out again here: positive when counter-clockwise. */
function shoelace(ring: number[][]): number {
  let sum = 0;
  for (let i = 0; i + 1 < ring.length; i += 1) {
    sum += (ring[i]?.[0] ?? 0) * (ring[i + 1]?.[1] ?? 0) - (ring[i + 1]?.[0] ?? 0) * (ring[i]?.[1] ?? 0);
  }
  return sum;
}

describe("douglasPeucker and generalize", () => {
  // Distances worked by hand: from (1, 0.1) to the chord (0,0)–(4,0) is 0.1; from (2, 0) and
  // (3, 0.1) to the chord (1, 0.1)–(4, 0) is 0.2 / √9.01 ≈ 0.0666.
  const zigzag: Position[] = [
    [0, 0],
    [1, 0.1],
    [2, 0],
    [3, 0.1],
    [4, 0],
  ];

  it("keeps the vertices farther than the tolerance from their chord", () => {
    expect(douglasPeucker(zigzag, 0.2)).toEqual([
      [0, 0],
      [4, 0],
    ]);
    expect(douglasPeucker(zigzag, 0.08)).toEqual([
      [0, 0],
      [1, 0.1],
      [4, 0],
    ]);
    expect(douglasPeucker(zigzag, 0.05)).toEqual(zigzag);
  });

  it("generalizes each path of a polyline and keeps Z and M with the vertices kept", () => {
    const line: Geometry = {
      type: "esriGeometryPolyline",
      hasZ: true,
      hasM: true,
      paths: [
        zigzag.map(([x, y], i) => [x as number, y as number, 100 + i, i]),
        [
          [5, 5, 1, 2],
          [6, 6, 3, 4],
        ],
      ],
    };
    expect(generalize(line, 0.08)).toEqual({
      ...line,
      paths: [
        [
          [0, 0, 100, 0],
          [1, 0.1, 101, 1],
          [4, 0, 104, 4],
        ],
        [
          [5, 5, 1, 2],
          [6, 6, 3, 4],
        ],
      ],
    });
  });

  it("removes a small notch from a polygon ring", () => {
    const notched = polygon([
      [0, 0],
      [0, 10],
      [5, 10.01],
      [10, 10],
      [10, 0],
      [0, 0],
    ]);
    expect(generalize(notched, 0.1)).toEqual(polygon(outer(0, 0, 10, 10)));
  });

  it("returns the polygon unchanged rather than empty when every ring would collapse", () => {
    const small = polygon(outer(0, 0, 1, 1));
    expect(generalize(small, 10)).toEqual(small);
    // A hole smaller than the tolerance goes; its outer ring stays.
    expect(generalize(polygon(outer(0, 0, 100, 100), hole(50, 50, 50.5, 50.5)), 1)).toEqual(
      polygon(outer(0, 0, 100, 100)),
    );
  });

  it("keeps a polygon valid when generalizing its outer ring would cut across its hole", () => {
    // The outer ring's top bulges up to y = 10.5 over a hole whose top is at 10.2; removing the
    // bulge (0.5 from its chord) would put the hole outside the ring.
    const bulging = polygon(
      [
        [0, 0],
        [0, 10],
        [5, 10.5],
        [10, 10],
        [10, 0],
        [0, 0],
      ],
      hole(4, 9, 6, 10.2),
    );
    const result = generalize(bulging, 1) as PolygonGeometry;
    expect(toJsts(result).isValid()).toBe(true);
    expect(result.rings.some((ring) => ring.some(([x, y]) => x === 5 && y === 10.5))).toBe(true);
    expect(result.rings).toHaveLength(2);
  });

  it("leaves points alone and does nothing without a positive offset", () => {
    const p: Geometry = { type: "esriGeometryPoint", hasZ: false, hasM: false, x: 1, y: 2 };
    expect(generalize(p, 5)).toBe(p);
    const line: Geometry = { type: "esriGeometryPolyline", hasZ: false, hasM: false, paths: [zigzag] };
    expect(generalize(line, 0)).toBe(line);
  });
});

describe("roundCoordinates", () => {
  it("rounds x and y to the decimal places asked, and leaves z and m", () => {
    const p: Geometry = {
      type: "esriGeometryPoint",
      hasZ: true,
      hasM: true,
      x: 1.23456,
      y: -2.34567,
      z: 3.45678,
      m: 9.87654,
    };
    expect(roundCoordinates(p, 2)).toEqual({ ...p, x: 1.23, y: -2.35 });
    expect(roundCoordinates(p, 0)).toEqual({ ...p, x: 1, y: -2 });
    const line: Geometry = {
      type: "esriGeometryPolyline",
      hasZ: true,
      hasM: false,
      paths: [
        [
          [10.05, 20.449, 5.555],
          [-0.0004, 1e-7, 1],
        ],
      ],
    };
    expect(roundCoordinates(line, 1)).toEqual({
      ...line,
      paths: [
        [
          [10.1, 20.4, 5.555],
          [-0, 0, 1],
        ],
      ],
    });
  });

  it("rounds the bounds of an envelope and every ring of a polygon", () => {
    const env: Geometry = {
      type: "esriGeometryEnvelope",
      hasZ: false,
      hasM: false,
      xmin: 0.111,
      ymin: 0.119,
      xmax: 1.5,
      ymax: 2.25,
    };
    expect(roundCoordinates(env, 1)).toEqual({ ...env, xmin: 0.1, ymin: 0.1, xmax: 1.5, ymax: 2.3 });
    expect(roundCoordinates(polygon(outer(0.04, 0.06, 9.96, 10.04)), 1)).toEqual(
      polygon(outer(0, 0.1, 10, 10)),
    );
  });
});

describe("centroidOf", () => {
  it("gives the centre of area of a polygon, holes subtracted", () => {
    expect(centroidOf(polygon(outer(0, 0, 10, 10)))).toEqual({
      type: "esriGeometryPoint",
      hasZ: false,
      hasM: false,
      x: 5,
      y: 5,
    });
    // 100 × (5, 5) minus 4 × (7, 7), over 96.
    const offCentre = centroidOf(polygon(outer(0, 0, 10, 10), hole(6, 6, 8, 8)));
    expect(offCentre?.x).toBeCloseTo(472 / 96, 10);
    expect(offCentre?.y).toBeCloseTo(472 / 96, 10);
    // Two equal squares: the middle between them is outside both, so a point inside is given.
    const two = polygon(outer(0, 0, 2, 2), outer(10, 0, 12, 2));
    const between = centroidOf(two);
    expect(between).not.toBeNull();
    expect(locateInRings(between?.x ?? 0, between?.y ?? 0, two.rings)).toBe(1);
  });

  it("gives a point inside a C-shaped polygon and a ring whose centre is its hole", () => {
    // The C's centre of area is ((100 × 5 − 48 × 6) / 52, 5) ≈ (4.08, 5), in its mouth.
    const c = polygon([
      [0, 0],
      [0, 10],
      [10, 10],
      [10, 8],
      [2, 8],
      [2, 2],
      [10, 2],
      [10, 0],
      [0, 0],
    ]);
    const inC = centroidOf(c);
    expect(inC).not.toBeNull();
    expect(locateInRings(inC?.x ?? 0, inC?.y ?? 0, c.rings)).toBe(1);
    const donut = polygon(outer(0, 0, 10, 10), hole(3, 3, 7, 7));
    const inDonut = centroidOf(donut);
    expect(locateInRings(inDonut?.x ?? 0, inDonut?.y ?? 0, donut.rings)).toBe(1);
  });

  it("keeps the spatial reference, and gives null for other geometries", () => {
    const withReference = { ...polygon(outer(0, 0, 2, 2)), spatialReference: { wkid: 4326 } };
    expect(centroidOf(withReference)?.spatialReference).toEqual({ wkid: 4326 });
    expect(centroidOf({ type: "esriGeometryPoint", hasZ: false, hasM: false, x: 1, y: 1 })).toBeNull();
    expect(
      centroidOf({
        type: "esriGeometryPolyline",
        hasZ: false,
        hasM: false,
        paths: [
          [
            [0, 0],
            [1, 1],
          ],
        ],
      }),
    ).toBeNull();
  });
});

describe("dropZM", () => {
  const line: Geometry = {
    type: "esriGeometryPolyline",
    hasZ: true,
    hasM: true,
    paths: [
      [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
      ],
    ],
  };

  it("drops Z, M or both from positions, keeping the layout [x, y, z, m]", () => {
    expect(dropZM(line, false, true)).toEqual({
      ...line,
      hasZ: false,
      paths: [
        [
          [1, 2, 4],
          [5, 6, 8],
        ],
      ],
    });
    expect(dropZM(line, true, false)).toEqual({
      ...line,
      hasM: false,
      paths: [
        [
          [1, 2, 3],
          [5, 6, 7],
        ],
      ],
    });
    expect(dropZM(line, false, false)).toEqual({
      ...line,
      hasZ: false,
      hasM: false,
      paths: [
        [
          [1, 2],
          [5, 6],
        ],
      ],
    });
    expect(dropZM(line, true, true)).toBe(line);
  });

  it("drops z and m from points and envelopes, and invents nothing", () => {
    const p: Geometry = { type: "esriGeometryPoint", hasZ: true, hasM: true, x: 1, y: 2, z: 3, m: 4 };
    expect(dropZM(p, false, true)).toEqual({
      type: "esriGeometryPoint",
      hasZ: false,
      hasM: true,
      x: 1,
      y: 2,
      m: 4,
    });
    expect(dropZM(p, true, false)).toEqual({
      type: "esriGeometryPoint",
      hasZ: true,
      hasM: false,
      x: 1,
      y: 2,
      z: 3,
    });
    const env: Geometry = {
      type: "esriGeometryEnvelope",
      hasZ: true,
      hasM: true,
      xmin: 0,
      ymin: 0,
      xmax: 1,
      ymax: 1,
      zmin: 5,
      zmax: 6,
      mmin: 7,
      mmax: 8,
    };
    expect(dropZM(env, false, true)).toEqual({
      type: "esriGeometryEnvelope",
      hasZ: false,
      hasM: true,
      xmin: 0,
      ymin: 0,
      xmax: 1,
      ymax: 1,
      mmin: 7,
      mmax: 8,
    });
    const flat: Geometry = { type: "esriGeometryPoint", hasZ: false, hasM: false, x: 1, y: 2 };
    expect(dropZM(flat, true, true)).toBe(flat);
  });
});

describe("toGeoJsonGeometry", () => {
  it("writes points with Z as the third coordinate and drops M", () => {
    expect(
      toGeoJsonGeometry({ type: "esriGeometryPoint", hasZ: true, hasM: true, x: 1, y: 2, z: 3, m: 4 }),
    ).toEqual({
      type: "Point",
      coordinates: [1, 2, 3],
    });
    expect(
      toGeoJsonGeometry({ type: "esriGeometryPoint", hasZ: false, hasM: true, x: 1, y: 2, m: 4 }),
    ).toEqual({
      type: "Point",
      coordinates: [1, 2],
    });
    expect(
      toGeoJsonGeometry({
        type: "esriGeometryMultipoint",
        hasZ: false,
        hasM: true,
        points: [
          [1, 2, 9],
          [3, 4, 9],
        ],
      }),
    ).toEqual({
      type: "MultiPoint",
      coordinates: [
        [1, 2],
        [3, 4],
      ],
    });
  });

  it("writes one path as a LineString and several as a MultiLineString", () => {
    const one: Geometry = {
      type: "esriGeometryPolyline",
      hasZ: true,
      hasM: false,
      paths: [
        [
          [0, 0, 1],
          [1, 1, 2],
        ],
      ],
    };
    expect(toGeoJsonGeometry(one)).toEqual({
      type: "LineString",
      coordinates: [
        [0, 0, 1],
        [1, 1, 2],
      ],
    });
    const two: Geometry = {
      type: "esriGeometryPolyline",
      hasZ: false,
      hasM: false,
      paths: [
        [
          [0, 0],
          [1, 1],
        ],
        [
          [2, 2],
          [3, 3],
        ],
      ],
    };
    expect(toGeoJsonGeometry(two)).toEqual({
      type: "MultiLineString",
      coordinates: [
        [
          [0, 0],
          [1, 1],
        ],
        [
          [2, 2],
          [3, 3],
        ],
      ],
    });
  });

  it("turns Esri rings to the right-hand rule: exterior counter-clockwise, holes clockwise", () => {
    const result = toGeoJsonGeometry(polygon(outer(0, 0, 10, 10), hole(4, 4, 6, 6)));
    expect(result.type).toBe("Polygon");
    const rings = result.coordinates as number[][][];
    expect(rings).toHaveLength(2);
    expect(shoelace(rings[0] as number[][])).toBe(200);
    expect(shoelace(rings[1] as number[][])).toBe(-8);
    expect(rings[0]).toEqual([
      [0, 0],
      [10, 0],
      [10, 10],
      [0, 10],
      [0, 0],
    ]);
  });

  it("puts each hole in the polygon of the outer ring around it", () => {
    const result = toGeoJsonGeometry(
      polygon(hole(24, 24, 26, 26), outer(0, 0, 10, 10), outer(20, 20, 30, 30)),
    );
    expect(result.type).toBe("MultiPolygon");
    const polygons = result.coordinates as number[][][][];
    expect(polygons.map((rings) => rings.length)).toEqual([1, 2]);
    expect(polygons[1]?.[1]).toEqual([
      [24, 24],
      [24, 26],
      [26, 26],
      [26, 24],
      [24, 24],
    ]);
    expect(shoelace(polygons[1]?.[0] as number[][])).toBeGreaterThan(0);
    expect(shoelace(polygons[1]?.[1] as number[][])).toBeLessThan(0);
  });

  it("writes an envelope as a polygon, split at the antimeridian when it crosses it", () => {
    const env = (xmin: number, xmax: number): Geometry => ({
      type: "esriGeometryEnvelope",
      hasZ: false,
      hasM: false,
      xmin,
      ymin: -1,
      xmax,
      ymax: 1,
    });
    expect(toGeoJsonGeometry(env(0, 2))).toEqual({
      type: "Polygon",
      coordinates: [
        [
          [0, -1],
          [2, -1],
          [2, 1],
          [0, 1],
          [0, -1],
        ],
      ],
    });
    const across = toGeoJsonGeometry(env(170, -170));
    expect(across.type).toBe("MultiPolygon");
    expect((across.coordinates as number[][][][]).map((p) => [p[0]?.[0]?.[0], p[0]?.[1]?.[0]])).toEqual([
      [170, 180],
      [-180, -170],
    ]);
  });
});
