import { describe, expect, it } from "vitest";
import type { Position } from "./esri-json.js";
import { locateInRing, locateInRings, oriented, polygonParts, signedArea2 } from "./rings.js";

const square: Position[] = [
  [0, 0],
  [0, 4],
  [4, 4],
  [4, 0],
  [0, 0],
];

describe("rings", () => {
  it("measures signed area: negative for clockwise (Esri outer rings)", () => {
    expect(signedArea2(square)).toBe(-32);
    expect(signedArea2(oriented(square, false))).toBe(32);
    expect(oriented(square, true)).toBe(square);
  });

  it("locates points inside, on edges and vertices, and outside a ring", () => {
    expect(locateInRing(2, 2, square)).toBe(1);
    expect(locateInRing(0, 2, square)).toBe(0);
    expect(locateInRing(4, 4, square)).toBe(0);
    expect(locateInRing(2, 4, square)).toBe(0);
    expect(locateInRing(5, 2, square)).toBe(-1);
    // A ray through a vertex is counted once.
    const diamond: Position[] = [
      [2, 0],
      [0, 2],
      [2, 4],
      [4, 2],
      [2, 0],
    ];
    expect(locateInRing(1, 2, diamond)).toBe(1);
    expect(locateInRing(-1, 2, diamond)).toBe(-1);
  });

  it("reads several rings by the odd-even rule", () => {
    const inner: Position[] = [
      [1, 1],
      [3, 1],
      [3, 3],
      [1, 3],
      [1, 1],
    ];
    expect(locateInRings(0.5, 0.5, [square, inner])).toBe(1);
    expect(locateInRings(2, 2, [square, inner])).toBe(-1);
    expect(locateInRings(1, 2, [square, inner])).toBe(0);
  });

  it("groups rings into polygons, a hole touching its outer ring at a vertex included", () => {
    const touching: Position[] = [
      [0, 0],
      [2, 1],
      [2, 3],
      [0, 0],
    ];
    const far: Position[] = [
      [10, 10],
      [10, 11],
      [11, 11],
      [11, 10],
      [10, 10],
    ];
    // `touching` is counter-clockwise with its first vertex on the square's corner.
    expect(signedArea2(touching)).toBeGreaterThan(0);
    expect(polygonParts([far, touching, square])).toEqual([
      { outer: far, holes: [] },
      { outer: square, holes: [touching] },
    ]);
  });
});
