import type { Position } from "./esri-json.js";

/**
 * Rings of Esri JSON polygons, without any geometry library: orientation, where a point lies, and
 * which holes belong to which outer ring. Pure and allocation-light, since the spatial filter calls
 * some of these once per stored feature.
 *
 * Esri JSON polygons are filled by the odd-even rule (the Esri geometry engine's default fill rule:
 * a point is inside when a ray from it crosses the rings an odd number of times). For a simple
 * polygon that is the same as "clockwise rings are outer rings, counter-clockwise rings are holes";
 * for a polygon whose rings cross it is the only reading that does not depend on orientation.
 */

/** Twice the signed area of a closed ring (shoelace); positive when counter-clockwise (y up). */
export function signedArea2(ring: readonly Position[]): number {
  let sum = 0;
  for (let i = 0; i + 1 < ring.length; i += 1) {
    const a = ring[i] as Position;
    const b = ring[i + 1] as Position;
    sum += (a[0] as number) * (b[1] as number) - (b[0] as number) * (a[1] as number);
  }
  return sum;
}

/** Where a point lies against a ring or a polygon: 1 inside, 0 on the boundary, -1 outside. */
export type PointLocation = 1 | 0 | -1;

function onSegment(x: number, y: number, ax: number, ay: number, bx: number, by: number): boolean {
  if (x < Math.min(ax, bx) || x > Math.max(ax, bx) || y < Math.min(ay, by) || y > Math.max(ay, by)) {
    return false;
  }
  return (bx - ax) * (y - ay) - (by - ay) * (x - ax) === 0;
}

/**
 * Adds the crossings of a rightward ray from (x, y) with one ring, or answers `null` when the
 * point is on the ring. The half-open rule (`ay > y` differs from `by > y`) counts a vertex on the
 * ray once.
 */
function crossings(x: number, y: number, ring: readonly Position[]): number | null {
  let count = 0;
  for (let i = 0; i + 1 < ring.length; i += 1) {
    const a = ring[i] as Position;
    const b = ring[i + 1] as Position;
    const ax = a[0] as number;
    const ay = a[1] as number;
    const bx = b[0] as number;
    const by = b[1] as number;
    if (onSegment(x, y, ax, ay, bx, by)) return null;
    if (ay > y !== by > y && x < ax + ((y - ay) * (bx - ax)) / (by - ay)) count += 1;
  }
  return count;
}

/** Where a point lies against one closed ring, whatever its orientation. */
export function locateInRing(x: number, y: number, ring: readonly Position[]): PointLocation {
  const count = crossings(x, y, ring);
  if (count === null) return 0;
  return count % 2 === 1 ? 1 : -1;
}

/** Where a point lies against a polygon's rings under the odd-even rule. */
export function locateInRings(x: number, y: number, rings: readonly (readonly Position[])[]): PointLocation {
  let total = 0;
  for (const ring of rings) {
    const count = crossings(x, y, ring);
    if (count === null) return 0;
    total += count;
  }
  return total % 2 === 1 ? 1 : -1;
}

/** One polygon of a multipolygon: an outer ring and the holes inside it. */
export interface PolygonPart {
  outer: Position[];
  holes: Position[][];
}

interface RingBox {
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
}

function ringBox(ring: readonly Position[]): RingBox {
  let xmin = Number.POSITIVE_INFINITY;
  let ymin = Number.POSITIVE_INFINITY;
  let xmax = Number.NEGATIVE_INFINITY;
  let ymax = Number.NEGATIVE_INFINITY;
  for (const p of ring) {
    const x = p[0] as number;
    const y = p[1] as number;
    if (x < xmin) xmin = x;
    if (x > xmax) xmax = x;
    if (y < ymin) ymin = y;
    if (y > ymax) ymax = y;
  }
  return { xmin, ymin, xmax, ymax };
}

/**
 * Whether `inner` lies inside `outer`: decided by the first vertex of `inner` that is not on
 * `outer` (a hole may touch its outer ring at a vertex), else by the midpoint of its first edge.
 */
function ringInside(inner: readonly Position[], outer: readonly Position[]): boolean {
  for (const p of inner) {
    const where = locateInRing(p[0] as number, p[1] as number, outer);
    if (where !== 0) return where === 1;
  }
  const a = inner[0] as Position;
  const b = inner[1] as Position;
  return (
    locateInRing(
      ((a[0] as number) + (b[0] as number)) / 2,
      ((a[1] as number) + (b[1] as number)) / 2,
      outer,
    ) >= 0
  );
}

/**
 * Groups an Esri polygon's rings into polygons. Clockwise rings (and flat ones) are outer rings;
 * each counter-clockwise ring is a hole of the smallest outer ring that contains it, so that an
 * island inside a lake inside an island gets its own holes right. A counter-clockwise ring that no
 * outer ring contains is filled under the odd-even rule, so it becomes an outer ring itself (as
 * ArcGIS's simplify does when it reorients it). Rings keep their vertex order.
 */
export function polygonParts(rings: readonly Position[][]): PolygonPart[] {
  if (rings.length === 1) return [{ outer: rings[0] as Position[], holes: [] }];
  const outers: { ring: Position[]; area: number; box: RingBox; holes: Position[][] }[] = [];
  const holes: Position[][] = [];
  for (const ring of rings) {
    const area2 = signedArea2(ring);
    if (area2 > 0) holes.push(ring);
    else outers.push({ ring, area: -area2, box: ringBox(ring), holes: [] });
  }
  // Smallest first, so the first container found is the innermost one.
  const bySize = [...outers].sort((a, b) => a.area - b.area);
  for (const hole of holes) {
    const box = ringBox(hole);
    const owner = bySize.find(
      (outer) =>
        outer.box.xmin <= box.xmin &&
        outer.box.ymin <= box.ymin &&
        outer.box.xmax >= box.xmax &&
        outer.box.ymax >= box.ymax &&
        ringInside(hole, outer.ring),
    );
    if (owner) owner.holes.push(hole);
    else outers.push({ ring: hole, area: signedArea2(hole) / 2, box, holes: [] });
  }
  return outers.map(({ ring, holes: own }) => ({ outer: ring, holes: own }));
}

/** A ring turned to the orientation asked for (a copy only when it must be reversed). */
export function oriented(ring: Position[], clockwise: boolean): Position[] {
  const isClockwise = signedArea2(ring) < 0;
  return isClockwise === clockwise ? ring : [...ring].reverse();
}
