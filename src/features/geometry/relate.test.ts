import { describe, expect, it } from "vitest";
import { PorticoError } from "../../errors.js";
import type { Geometry, Position } from "./esri-json.js";
import { toJsts } from "./jsts-geometry.js";
import {
  type CandidateFilter,
  parseSpatialRel,
  prepareFilter,
  SPATIAL_RELS,
  type SpatialRel,
} from "./relate.js";

const point = (x: number, y: number): Geometry => ({
  type: "esriGeometryPoint",
  hasZ: false,
  hasM: false,
  x,
  y,
});
const multipoint = (...points: Position[]): Geometry => ({
  type: "esriGeometryMultipoint",
  hasZ: false,
  hasM: false,
  points,
});
const line = (...paths: Position[][]): Geometry => ({
  type: "esriGeometryPolyline",
  hasZ: false,
  hasM: false,
  paths,
});
const polygon = (...rings: Position[][]): Geometry => ({
  type: "esriGeometryPolygon",
  hasZ: false,
  hasM: false,
  rings,
});
const envelope = (xmin: number, ymin: number, xmax: number, ymax: number): Geometry => ({
  type: "esriGeometryEnvelope",
  hasZ: false,
  hasM: false,
  xmin,
  ymin,
  xmax,
  ymax,
});

/** A clockwise square ring (an Esri outer ring). */
const outer = (xmin: number, ymin: number, xmax: number, ymax: number): Position[] => [
  [xmin, ymin],
  [xmin, ymax],
  [xmax, ymax],
  [xmax, ymin],
  [xmin, ymin],
];
/** A counter-clockwise square ring (an Esri hole). */
const hole = (xmin: number, ymin: number, xmax: number, ymax: number): Position[] => [
  [xmin, ymin],
  [xmax, ymin],
  [xmax, ymax],
  [xmin, ymax],
  [xmin, ymin],
];

/** The 10 × 10 square with a 2 × 2 hole in its middle. */
const donut = polygon(outer(0, 0, 10, 10), hole(4, 4, 6, 6));

const EXACT: SpatialRel[] = [
  "esriSpatialRelIntersects",
  "esriSpatialRelContains",
  "esriSpatialRelWithin",
  "esriSpatialRelCrosses",
  "esriSpatialRelOverlaps",
  "esriSpatialRelTouches",
];

/** The exact relations that hold between a query and a feature, by short name. */
function holding(query: Geometry, feature: Geometry, options = {}): string[] {
  return EXACT.filter((rel) => prepareFilter(query, rel, options)(feature)).map((rel) =>
    rel.slice("esriSpatialRel".length),
  );
}

describe("parseSpatialRel", () => {
  it("defaults to Intersects and ignores case", () => {
    expect(parseSpatialRel(undefined)).toEqual({ ok: true, value: "esriSpatialRelIntersects" });
    expect(parseSpatialRel("  ")).toEqual({ ok: true, value: "esriSpatialRelIntersects" });
    expect(parseSpatialRel("ESRISPATIALRELWITHIN")).toEqual({ ok: true, value: "esriSpatialRelWithin" });
    expect(parseSpatialRel("esriSpatialRelIndexIntersects")).toEqual({
      ok: true,
      value: "esriSpatialRelIndexIntersects",
    });
  });

  it("refuses unknown relations and says why", () => {
    const unknown = parseSpatialRel("inside");
    expect(unknown.ok).toBe(false);
    if (!unknown.ok)
      expect(unknown.error.message).toContain("'inside' is not one of esriSpatialRelIntersects");
    const relation = parseSpatialRel("esriSpatialRelRelation");
    expect(relation.ok).toBe(false);
    if (!relation.ok) expect(relation.error.message).toContain("not supported");
  });
});

describe("prepareFilter with a polygon query (a square with a hole)", () => {
  it("relates points inside, in the hole, on both boundaries and outside", () => {
    expect(holding(donut, point(2, 2))).toEqual(["Intersects", "Contains"]);
    expect(holding(donut, point(5, 5))).toEqual([]);
    expect(holding(donut, point(0, 5))).toEqual(["Intersects", "Touches"]);
    expect(holding(donut, point(4, 5))).toEqual(["Intersects", "Touches"]);
    expect(holding(donut, point(20, 20))).toEqual([]);
  });

  it("relates multipoints point by point", () => {
    expect(holding(donut, multipoint([1, 1], [2, 2]))).toEqual(["Intersects", "Contains"]);
    expect(holding(donut, multipoint([1, 1], [0, 5]))).toEqual(["Intersects", "Contains"]);
    expect(holding(donut, multipoint([1, 1], [20, 20]))).toEqual(["Intersects", "Crosses"]);
    expect(holding(donut, multipoint([0, 5], [5, 5]))).toEqual(["Intersects", "Touches"]);
    expect(holding(donut, multipoint([5, 5], [20, 20]))).toEqual([]);
  });

  it("relates lines crossing, inside, along the edge and through the hole", () => {
    expect(
      holding(
        donut,
        line([
          [-5, 2],
          [15, 2],
        ]),
      ),
    ).toEqual(["Intersects", "Crosses"]);
    expect(
      holding(
        donut,
        line([
          [1, 1],
          [3, 1],
        ]),
      ),
    ).toEqual(["Intersects", "Contains"]);
    expect(
      holding(
        donut,
        line([
          [0, 1],
          [0, 3],
        ]),
      ),
    ).toEqual(["Intersects", "Touches"]);
    // From inside the ring into the hole: it leaves the polygon's interior, so it crosses.
    expect(
      holding(
        donut,
        line([
          [2, 5],
          [5, 5],
        ]),
      ),
    ).toEqual(["Intersects", "Crosses"]);
    expect(
      holding(
        donut,
        line([
          [4.5, 5],
          [5.5, 5],
        ]),
      ),
    ).toEqual([]);
  });

  it("relates polygons overlapping, touching, inside, around and in the hole", () => {
    expect(holding(donut, polygon(outer(8, 8, 12, 12)))).toEqual(["Intersects", "Overlaps"]);
    expect(holding(donut, polygon(outer(10, 0, 12, 2)))).toEqual(["Intersects", "Touches"]);
    expect(holding(donut, polygon(outer(1, 1, 2, 2)))).toEqual(["Intersects", "Contains"]);
    // The query is within a feature that covers it whole.
    expect(holding(donut, polygon(outer(-5, -5, 15, 15)))).toEqual(["Intersects", "Within"]);
    expect(holding(donut, polygon(outer(4.5, 4.5, 5.5, 5.5)))).toEqual([]);
    // Exactly the hole: it shares the hole's boundary only.
    expect(holding(donut, polygon(outer(4, 4, 6, 6)))).toEqual(["Intersects", "Touches"]);
  });

  it("compares envelopes for EnvelopeIntersects and IndexIntersects", () => {
    for (const rel of ["esriSpatialRelEnvelopeIntersects", "esriSpatialRelIndexIntersects"] as const) {
      const filter = prepareFilter(donut, rel);
      expect(filter(point(5, 5))).toBe(true);
      expect(filter(point(10, 10))).toBe(true);
      expect(filter(point(10.5, 10))).toBe(false);
      // The line's box reaches the square's box although the line passes it by.
      expect(
        filter(
          line([
            [11, 9.5],
            [9.5, 11],
          ]),
        ),
      ).toBe(true);
      expect(
        filter(
          line([
            [11, 9],
            [12, 12],
          ]),
        ),
      ).toBe(false);
    }
    expect(
      prepareFilter(
        donut,
        "esriSpatialRelIntersects",
      )(
        line([
          [11, 9.5],
          [9.5, 11],
        ]),
      ),
    ).toBe(false);
  });
});

describe("prepareFilter with point and line queries", () => {
  it("relates a point query to polygon features: Within when the point is inside", () => {
    expect(holding(point(2, 2), donut)).toEqual(["Intersects", "Within"]);
    expect(holding(point(5, 5), donut)).toEqual([]);
    expect(holding(point(0, 5), donut)).toEqual(["Intersects", "Touches"]);
    expect(holding(point(6, 5), donut)).toEqual(["Intersects", "Touches"]);
  });

  it("relates a point query to points and lines", () => {
    expect(holding(point(1, 1), point(1, 1))).toEqual(["Intersects", "Contains", "Within"]);
    expect(holding(point(1, 1), point(1, 2))).toEqual([]);
    expect(
      holding(
        point(1, 1),
        line([
          [0, 0],
          [2, 2],
        ]),
      ),
    ).toEqual(["Intersects", "Within"]);
    expect(
      holding(
        point(0, 0),
        line([
          [0, 0],
          [2, 2],
        ]),
      ),
    ).toEqual(["Intersects", "Touches"]);
  });

  it("relates a line query to polygons and lines", () => {
    const through = line([
      [-5, 2],
      [15, 2],
    ]);
    expect(holding(through, donut)).toEqual(["Intersects", "Crosses"]);
    expect(
      holding(
        through,
        line([
          [0, 0],
          [0, 5],
        ]),
      ),
    ).toEqual(["Intersects", "Crosses"]);
    expect(
      holding(
        through,
        line([
          [0, 2],
          [3, 2],
        ]),
      ),
    ).toEqual(["Intersects", "Contains"]);
    expect(
      holding(
        through,
        line([
          [10, 2],
          [20, 2],
        ]),
      ),
    ).toEqual(["Intersects", "Overlaps"]);
    expect(
      holding(
        through,
        line([
          [15, 2],
          [15, 5],
        ]),
      ),
    ).toEqual(["Intersects", "Touches"]);
  });
});

describe("prepareFilter with an envelope query", () => {
  it("relates an envelope as its rectangle, quickly for features well inside it", () => {
    const box = envelope(0, 0, 10, 10);
    expect(holding(box, point(5, 5))).toEqual(["Intersects", "Contains"]);
    expect(holding(box, polygon(outer(2, 2, 3, 3)))).toEqual(["Intersects", "Contains"]);
    expect(holding(box, point(10, 3))).toEqual(["Intersects", "Touches"]);
    expect(
      holding(
        box,
        line([
          [5, 5],
          [15, 5],
        ]),
      ),
    ).toEqual(["Intersects", "Crosses"]);
    expect(holding(box, polygon(outer(-1, -1, 11, 11)))).toEqual(["Intersects", "Within"]);
  });

  it("relates an envelope across the antimeridian as the union of its two parts", () => {
    const across = envelope(170, -10, -170, 10);
    const wrap = [-180, 180] as const;
    for (const rel of ["esriSpatialRelIntersects", "esriSpatialRelEnvelopeIntersects"] as const) {
      const filter = prepareFilter(across, rel, { wrap });
      expect(filter(point(175, 0))).toBe(true);
      expect(filter(point(-175, 0))).toBe(true);
      expect(filter(point(0, 0))).toBe(false);
      expect(filter(point(160, 0))).toBe(false);
      expect(filter(point(175, 20))).toBe(false);
    }
    const contains = prepareFilter(across, "esriSpatialRelContains", { wrap });
    expect(
      contains(
        line([
          [172, 0],
          [178, 0],
        ]),
      ),
    ).toBe(true);
    expect(contains(multipoint([175, 0], [-175, 0]))).toBe(true);
    expect(
      contains(
        line([
          [160, 0],
          [178, 0],
        ]),
      ),
    ).toBe(false);
  });

  it("refuses an envelope with xmin > xmax when the spatial reference does not wrap", () => {
    expect(() => prepareFilter(envelope(170, -10, -170, 10), "esriSpatialRelIntersects")).toThrow(
      PorticoError,
    );
    expect(() =>
      prepareFilter(envelope(170, -10, -170, 10), "esriSpatialRelIntersects", { wrap: [-180, 180] }),
    ).not.toThrow();
  });

  it("treats a flat envelope as the point or segment it is", () => {
    expect(holding(envelope(1, 1, 1, 1), point(1, 1))).toEqual(["Intersects", "Contains", "Within"]);
    expect(holding(envelope(0, 0, 2, 0), point(1, 0))).toEqual(["Intersects", "Contains"]);
  });
});

describe("prepareFilter with Esri polygon rings", () => {
  it("assigns each hole to the outer ring that contains it, whatever the ring order", () => {
    const two = polygon(hole(24, 24, 26, 26), outer(0, 0, 10, 10), outer(20, 20, 30, 30));
    const filter = prepareFilter(two, "esriSpatialRelIntersects");
    expect(filter(point(5, 5))).toBe(true);
    expect(filter(point(21, 21))).toBe(true);
    expect(filter(point(25, 25))).toBe(false);
    expect(filter(point(15, 15))).toBe(false);
  });

  it("handles an island in a lake in an island", () => {
    const nested = polygon(
      outer(0, 0, 30, 30),
      hole(5, 5, 25, 25),
      outer(10, 10, 20, 20),
      hole(14, 14, 16, 16),
    );
    const filter = prepareFilter(nested, "esriSpatialRelIntersects");
    expect(filter(point(2, 2))).toBe(true);
    expect(filter(point(7, 7))).toBe(false);
    expect(filter(point(12, 12))).toBe(true);
    expect(filter(point(15, 15))).toBe(false);
  });

  it("fills a lone counter-clockwise ring, as the odd-even rule does", () => {
    const filter = prepareFilter(polygon(hole(0, 0, 10, 10)), "esriSpatialRelContains");
    expect(filter(point(5, 5))).toBe(true);
    expect(filter(point(15, 5))).toBe(false);
  });

  it("reads a self-intersecting query polygon (a bow tie) by the odd-even rule without throwing", () => {
    const bowTie = polygon([
      [0, 0],
      [10, 10],
      [10, 0],
      [0, 10],
      [0, 0],
    ]);
    const filter = prepareFilter(bowTie, "esriSpatialRelIntersects");
    expect(filter(point(1, 5))).toBe(true);
    expect(filter(point(9, 5))).toBe(true);
    expect(filter(point(5, 1))).toBe(false);
    expect(filter(point(5, 9))).toBe(false);
    // Both lobes, not the one that buffer(0) keeps.
    expect(prepareFilter(bowTie, "esriSpatialRelContains")(multipoint([1, 5], [9, 5]))).toBe(true);
  });

  it("relates a self-intersecting stored polygon without throwing", () => {
    const bowTie = polygon([
      [0, 0],
      [10, 10],
      [10, 0],
      [0, 10],
      [0, 0],
    ]);
    for (const rel of SPATIAL_RELS) {
      expect(() => prepareFilter(polygon(outer(1, 4, 9, 6)), rel)(bowTie)).not.toThrow();
    }
    expect(prepareFilter(point(1, 5), "esriSpatialRelWithin")(bowTie)).toBe(true);
    expect(prepareFilter(point(5, 1), "esriSpatialRelIntersects")(bowTie)).toBe(false);
  });
});

describe("prepareFilter with a distance", () => {
  it("buffers the query geometry by the distance before relating", () => {
    const near = prepareFilter(point(0, 0), "esriSpatialRelIntersects", { distance: 10 });
    expect(near(point(0, 9.9))).toBe(true);
    expect(near(point(6.9, 7))).toBe(true);
    expect(near(point(0, 10.1))).toBe(false);
    expect(near(point(7.1, 7.1))).toBe(false);
    expect(
      near(
        line([
          [-20, 9.5],
          [20, 9.5],
        ]),
      ),
    ).toBe(true);
    const containing = prepareFilter(point(0, 0), "esriSpatialRelContains", { distance: 10 });
    expect(
      containing(
        line([
          [-5, 0],
          [5, 0],
        ]),
      ),
    ).toBe(true);
    expect(
      containing(
        line([
          [-5, 0],
          [11, 0],
        ]),
      ),
    ).toBe(false);
  });

  it("buffers lines and polygons too, and uses the buffer's envelope for EnvelopeIntersects", () => {
    expect(
      prepareFilter(
        line([
          [0, 0],
          [10, 0],
        ]),
        "esriSpatialRelIntersects",
        { distance: 2 },
      )(point(5, 1.9)),
    ).toBe(true);
    expect(prepareFilter(donut, "esriSpatialRelIntersects", { distance: 1 })(point(10.9, 5))).toBe(true);
    expect(prepareFilter(donut, "esriSpatialRelIntersects", { distance: 1 })(point(11.1, 5))).toBe(false);
    // The corner of the buffer's box, outside the rounded buffer itself.
    expect(prepareFilter(donut, "esriSpatialRelEnvelopeIntersects", { distance: 1 })(point(10.9, 10.9))).toBe(
      true,
    );
    expect(prepareFilter(donut, "esriSpatialRelIntersects", { distance: 1 })(point(10.9, 10.9))).toBe(false);
  });
});

describe("prepareFilter's shortcuts", () => {
  /** A fixed pseudo-random sequence, so that a failure can be replayed. */
  function random(seed: number): () => number {
    let state = seed;
    return () => {
      state = (state * 1103515245 + 12345) % 2147483648;
      return state / 2147483648;
    };
  }

  /** jsts's own full relation, without the box tests, point index or rectangle shortcut. */
  function reference(query: Geometry, rel: SpatialRel): CandidateFilter {
    const shape = toJsts(query, { repair: true });
    return (candidate) => {
      const other = toJsts(candidate);
      switch (rel) {
        case "esriSpatialRelContains":
          return shape.contains(other);
        case "esriSpatialRelWithin":
          return shape.within(other);
        case "esriSpatialRelCrosses":
          return shape.crosses(other);
        case "esriSpatialRelOverlaps":
          return shape.overlaps(other);
        case "esriSpatialRelTouches":
          return shape.touches(other);
        default:
          return shape.intersects(other);
      }
    };
  }

  it("agree with jsts's full relation on points, boxes and segments on a grid", () => {
    const next = random(42);
    // Coordinates on a half-unit grid, so that many land exactly on the query's edges.
    const grid = (): number => Math.round(next() * 28 - 4) / 2;
    const candidates: Geometry[] = [];
    for (let i = 0; i < 300; i += 1) {
      const [x, y, w, h] = [grid(), grid(), Math.abs(grid()) + 0.5, Math.abs(grid()) + 0.5];
      candidates.push(
        point(x, y),
        polygon(outer(x, y, x + w, y + h)),
        line([
          [x, y],
          [x + w, y + h],
        ]),
      );
      candidates.push(multipoint([x, y], [x + w, y]));
    }
    for (const query of [donut, envelope(0, 0, 10, 10), point(5, 2)]) {
      for (const rel of EXACT) {
        const fast = prepareFilter(query, rel);
        const full = reference(query, rel);
        const disagreements = candidates.filter((candidate) => fast(candidate) !== full(candidate));
        expect({ query: query.type, rel, disagreements }).toEqual({
          query: query.type,
          rel,
          disagreements: [],
        });
      }
    }
  });
});
