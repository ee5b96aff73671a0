import Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
import { describe, expect, it } from "vitest";
import type { Geometry, Position } from "./esri-json.js";
import { buffer, factory, toJsts } from "./jsts-geometry.js";
import { type Margin, queryMargins } from "./margins.js";

const base = { hasZ: false, hasM: false } as const;

/** A margin as a jsts geometry, to test what it contains. */
function shapeOf(margin: Margin) {
  if ("box" in margin) return toJsts({ ...base, type: "esriGeometryEnvelope", ...margin.box });
  const ring = (positions: Position[]) =>
    factory.createLinearRing(positions.map(([x, y]) => new Coordinate(x as number, y as number)));
  return factory.createMultiPolygon(
    margin.polygons.map((p) => factory.createPolygon(ring(p.outer), p.holes.map(ring))),
  );
}

function expectAround(query: Geometry, width: number) {
  const margins = queryMargins(query);
  if (!margins) throw new Error("no margins");
  const shape = toJsts(query, { repair: true });
  const outer = shapeOf(margins.outer);
  // At least half the width away from the query's outline, and not much more than the width.
  expect(outer.contains(buffer(shape, width * 0.5))).toBe(true);
  expect(outer.contains(buffer(shape, width * 1.1))).toBe(false);
  if (margins.inner) {
    const inner = shapeOf(margins.inner);
    expect(shape.contains(buffer(inner, width * 0.5))).toBe(true);
  }
  return margins;
}

describe("queryMargins", () => {
  it("moves an envelope's sides out and in by a billionth of its largest coordinate", () => {
    const margins = expectAround(
      { ...base, type: "esriGeometryEnvelope", xmin: 0, ymin: 0, xmax: 100, ymax: 50 },
      1e-7,
    );
    const near = (value: number) => expect.closeTo(value, 12);
    expect(margins.outer).toEqual({
      box: { xmin: near(-1e-7), ymin: near(-1e-7), xmax: near(100 + 1e-7), ymax: near(50 + 1e-7) },
    });
    expect(margins.inner).toEqual({
      box: { xmin: near(1e-7), ymin: near(1e-7), xmax: near(100 - 1e-7), ymax: near(50 - 1e-7) },
    });
  });

  it("grows and shrinks a polygon with a hole", () => {
    const rings: Position[][] = [
      [
        [0, 0],
        [0, 10],
        [10, 10],
        [0, 0],
      ],
      [
        [1, 3],
        [2, 3],
        [2, 5],
        [1, 3],
      ],
    ];
    const margins = expectAround({ ...base, type: "esriGeometryPolygon", rings }, 1e-8);
    expect(margins.inner).not.toBeNull();
  });

  it("reads a polygon whose rings cross as the filter does, by the odd-even rule", () => {
    const bowTie: Position[] = [
      [0, 0],
      [10, 10],
      [10, 0],
      [0, 10],
      [0, 0],
    ];
    expectAround({ ...base, type: "esriGeometryPolygon", rings: [bowTie] }, 1e-8);
  });

  it("has no inner margin for a query without area, nor for an envelope too thin to spare one", () => {
    const line = expectAround(
      {
        ...base,
        type: "esriGeometryPolyline",
        paths: [
          [
            [0, 0],
            [5, 10],
          ],
        ],
      },
      1e-8,
    );
    expect(line.inner).toBeNull();
    expect(queryMargins({ ...base, type: "esriGeometryPoint", x: 3, y: 4 })?.inner).toBeNull();
    const thin = queryMargins({
      ...base,
      type: "esriGeometryEnvelope",
      xmin: 0,
      ymin: 5,
      xmax: 150,
      ymax: 5.0000001,
    });
    expect(thin?.inner).toBeNull();
  });

  it("gives none for what the filter reads as empty or cannot read", () => {
    const flat: Position[] = [
      [0, 0],
      [5, 0],
      [10, 0],
      [0, 0],
    ];
    expect(queryMargins({ ...base, type: "esriGeometryPolygon", rings: [flat] })).toBeUndefined();
    expect(
      queryMargins({ ...base, type: "esriGeometryEnvelope", xmin: 170, ymin: 0, xmax: -170, ymax: 10 }),
    ).toBeUndefined();
  });
});
