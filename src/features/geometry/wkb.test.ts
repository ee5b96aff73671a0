import { describe, expect, it } from "vitest";
import type { Geometry, Position } from "./esri-json.js";
import { esriWkb } from "./wkb.js";

/** A WKB reader for the test, written from the OGC layout: what the bytes say, as nested arrays. */
function decode(bytes: Buffer): unknown {
  let at = 0;
  const uint = () => {
    const v = bytes.readUInt32LE(at);
    at += 4;
    return v;
  };
  const xy = (): Position => {
    const p = [bytes.readDoubleLE(at), bytes.readDoubleLE(at + 8)];
    at += 16;
    return p;
  };
  const list = <T>(read: () => T): T[] => Array.from({ length: uint() }, read);
  const geometry = (): unknown => {
    expect(bytes[at]).toBe(1);
    at += 1;
    const type = uint();
    switch (type) {
      case 1:
        return { point: xy() };
      case 2:
        return { line: list(xy) };
      case 3:
        return { polygon: list(() => list(xy)) };
      default:
        return {
          [["", "", "", "", "multipoint", "multiline", "multipolygon"][type] as string]: list(geometry),
        };
    }
  };
  const out = geometry();
  expect(at).toBe(bytes.length);
  return out;
}

const base = { hasZ: false, hasM: false } as const;

describe("esriWkb", () => {
  it("writes a point as the OGC bytes: little-endian mark, type 1, x, y", () => {
    expect(esriWkb({ ...base, type: "esriGeometryPoint", x: 1, y: 2 }).toString("hex")).toBe(
      "0101000000000000000000f03f0000000000000040",
    );
  });

  it("writes x and y only, multipoints as points, one path as a line and several as a multiline", () => {
    expect(
      decode(
        esriWkb({
          type: "esriGeometryMultipoint",
          hasZ: true,
          hasM: false,
          points: [
            [1, 2, 9],
            [3, 4, 9],
          ],
        }),
      ),
    ).toEqual({ multipoint: [{ point: [1, 2] }, { point: [3, 4] }] });
    const path: Position[] = [
      [0, 0],
      [1.5, -2.25],
    ];
    expect(decode(esriWkb({ ...base, type: "esriGeometryPolyline", paths: [path] }))).toEqual({ line: path });
    expect(decode(esriWkb({ ...base, type: "esriGeometryPolyline", paths: [path, path] }))).toEqual({
      multiline: [{ line: path }, { line: path }],
    });
  });

  it("groups a polygon's rings as Esri JSON means them: holes with their outer ring, islands apart", () => {
    const square = (x: number, y: number, size: number, clockwise: boolean): Position[] => {
      const ring: Position[] = [
        [x, y],
        [x, y + size],
        [x + size, y + size],
        [x + size, y],
        [x, y],
      ];
      return clockwise ? ring : ring.reverse();
    };
    const outer = square(0, 0, 10, true);
    const hole = square(4, 4, 2, false);
    const island = square(20, 0, 2, true);
    const withHole: Geometry = { ...base, type: "esriGeometryPolygon", rings: [outer, hole] };
    expect(decode(esriWkb(withHole))).toEqual({ polygon: [outer, hole] });
    // The hole listed first and an island after: still one polygon with its hole, and the island.
    expect(decode(esriWkb({ ...base, type: "esriGeometryPolygon", rings: [hole, outer, island] }))).toEqual({
      multipolygon: [{ polygon: [outer, hole] }, { polygon: [island] }],
    });
  });
});
