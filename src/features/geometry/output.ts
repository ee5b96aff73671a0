import Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
import Location from "jsts/org/locationtech/jts/geom/Location.js";
import TopologyPreservingSimplifier from "jsts/org/locationtech/jts/simplify/TopologyPreservingSimplifier.js";
import type { Geometry, PointGeometry, Position } from "./esri-json.js";
import { esriRings, pointLocator, structuredPolygon, validPolygon } from "./jsts-geometry.js";
import { oriented, polygonParts, signedArea2 } from "./rings.js";

/**
 * What a layer query does to the geometries it returns: `maxAllowableOffset` (generalize),
 * `geometryPrecision` (roundCoordinates), `returnCentroid` (centroidOf), `returnZ`/`returnM`
 * (dropZM) and `f=geojson` (toGeoJsonGeometry). Pure; none changes its input.
 */

/** Squared distance from p to the segment a–b (to a itself when the segment is a point). */
function segmentDistance2(p: Position, a: Position, b: Position): number {
  const px = p[0] as number;
  const py = p[1] as number;
  const ax = a[0] as number;
  const ay = a[1] as number;
  const dx = (b[0] as number) - ax;
  const dy = (b[1] as number) - ay;
  const length2 = dx * dx + dy * dy;
  let t = length2 === 0 ? 0 : ((px - ax) * dx + (py - ay) * dy) / length2;
  t = Math.max(0, Math.min(1, t));
  const ex = ax + t * dx - px;
  const ey = ay + t * dy - py;
  return ex * ex + ey * ey;
}

/**
 * Douglas–Peucker: keeps the ends and every vertex farther than `tolerance` from the segment
 * between the vertices kept around it. Iterative, since a path may have 250,000 vertices. The
 * vertices kept are the original positions, so Z and M stay with them.
 */
export function douglasPeucker(positions: Position[], tolerance: number): Position[] {
  const n = positions.length;
  if (n <= 2) return positions;
  const keep = new Uint8Array(n);
  keep[0] = 1;
  keep[n - 1] = 1;
  const tolerance2 = tolerance * tolerance;
  const stack = [0, n - 1];
  while (stack.length > 0) {
    const last = stack.pop() as number;
    const first = stack.pop() as number;
    let farthest = -1;
    let farthest2 = tolerance2;
    for (let i = first + 1; i < last; i += 1) {
      const d2 = segmentDistance2(
        positions[i] as Position,
        positions[first] as Position,
        positions[last] as Position,
      );
      if (d2 > farthest2) {
        farthest2 = d2;
        farthest = i;
      }
    }
    if (farthest >= 0) {
      keep[farthest] = 1;
      stack.push(first, farthest, farthest, last);
    }
  }
  return positions.filter((_, i) => keep[i] === 1);
}

/**
 * `maxAllowableOffset`: lines and polygons generalized by Douglas–Peucker with that tolerance, in
 * the geometry's units. Points, multipoints and envelopes are returned as they are.
 *
 * Polygons stay valid and never vanish. Rings that collapse (fewer than three distinct vertices,
 * or no area) are dropped; if every ring would be, the polygon is returned as it was. When the
 * rings generalized one by one make an invalid polygon (a ring cut across a hole near it, two rings
 * now crossing) and the original was valid, jsts's topology-preserving simplifier is used instead,
 * which only removes vertices whose removal keeps the rings apart; its vertices are mapped back to
 * the original positions to keep Z and M. A polygon that was invalid to begin with is only
 * generalized ring by ring.
 */
export function generalize(geometry: Geometry, maxAllowableOffset: number): Geometry {
  if (!(maxAllowableOffset > 0)) return geometry;
  if (geometry.type === "esriGeometryPolyline") {
    return { ...geometry, paths: geometry.paths.map((path) => douglasPeucker(path, maxAllowableOffset)) };
  }
  if (geometry.type !== "esriGeometryPolygon") return geometry;

  const rings = geometry.rings
    .map((ring) => douglasPeucker(ring, maxAllowableOffset))
    .filter((ring) => ring.length >= 4 && signedArea2(ring) !== 0);
  if (rings.length === 0) return geometry;
  if (structuredPolygon(rings).isValid()) return { ...geometry, rings };

  const original = structuredPolygon(geometry.rings);
  if (!original.isValid()) return { ...geometry, rings };
  const simplified = TopologyPreservingSimplifier.simplify(original, maxAllowableOffset);
  if (simplified.isEmpty() || !simplified.isValid()) return geometry;
  const byXY = new Map<string, Position>();
  for (const ring of geometry.rings) {
    for (const p of ring) {
      const key = `${p[0]},${p[1]}`;
      if (!byXY.has(key)) byXY.set(key, p);
    }
  }
  const restored = esriRings(simplified).map((ring) => ring.map((p) => byXY.get(`${p[0]},${p[1]}`) ?? p));
  return { ...geometry, rings: restored };
}

/**
 * `geometryPrecision`: x and y rounded to that many decimal places; z and m are left as they are,
 * as ArcGIS does. `decimals` is a whole number of at least 0 (the caller checks the parameter).
 */
export function roundCoordinates(geometry: Geometry, decimals: number): Geometry {
  const digits = Math.min(100, Math.max(0, Math.trunc(decimals)));
  // toFixed rounds the decimal expansion of the double itself, so 2.675 gives 2.67 (the double is
  // 2.67499…) where scaling by 100 would give other surprises.
  const round = (value: number): number => Number(value.toFixed(digits));
  const position = (p: Position): Position => {
    const out = p.slice();
    out[0] = round(p[0] as number);
    out[1] = round(p[1] as number);
    return out;
  };
  switch (geometry.type) {
    case "esriGeometryPoint":
      return { ...geometry, x: round(geometry.x), y: round(geometry.y) };
    case "esriGeometryMultipoint":
      return { ...geometry, points: geometry.points.map(position) };
    case "esriGeometryPolyline":
      return { ...geometry, paths: geometry.paths.map((path) => path.map(position)) };
    case "esriGeometryPolygon":
      return { ...geometry, rings: geometry.rings.map((ring) => ring.map(position)) };
    case "esriGeometryEnvelope":
      return {
        ...geometry,
        xmin: round(geometry.xmin),
        ymin: round(geometry.ymin),
        xmax: round(geometry.xmax),
        ymax: round(geometry.ymax),
      };
  }
}

/**
 * `returnCentroid`: a point for a polygon (ArcGIS returns centroids for polygon layers only; null
 * for other geometries). It is the polygon's centroid (centre of area, over all its parts, holes
 * subtracted) when that lies inside the polygon, and otherwise a point inside it (jsts's interior
 * point: the middle of the widest interior run along a horizontal line near the centre), so that a
 * C-shaped polygon or one whose centre falls in a hole still gets a point on itself, as ArcGIS's
 * label points do. The rings are read by the odd-even rule, like every Esri polygon.
 */
export function centroidOf(geometry: Geometry): PointGeometry | null {
  if (geometry.type !== "esriGeometryPolygon") return null;
  const area = validPolygon(geometry.rings);
  if (area.isEmpty()) return null;
  const centroid = area.getCentroid();
  const inside =
    pointLocator(area).locate(new Coordinate(centroid.getX(), centroid.getY())) === Location.INTERIOR
      ? centroid
      : area.getInteriorPoint();
  const point: PointGeometry = {
    type: "esriGeometryPoint",
    hasZ: false,
    hasM: false,
    x: inside.getX(),
    y: inside.getY(),
  };
  if (geometry.spatialReference) point.spatialReference = geometry.spatialReference;
  return point;
}

/**
 * `returnZ` / `returnM`: the geometry without its Z values unless `keepZ`, and without its M values
 * unless `keepM`. A geometry that has neither to drop is returned as it is.
 */
export function dropZM(geometry: Geometry, keepZ: boolean, keepM: boolean): Geometry {
  const dropZ = geometry.hasZ && !keepZ;
  const dropM = geometry.hasM && !keepM;
  if (!dropZ && !dropM) return geometry;
  const hasZ = geometry.hasZ && !dropZ;
  const hasM = geometry.hasM && !dropM;
  const mIndex = geometry.hasZ ? 3 : 2;
  const position = (p: Position): Position => {
    const out = [p[0] as number, p[1] as number];
    if (hasZ) out.push(p[2] as number);
    if (hasM) out.push(p[mIndex] as number);
    return out;
  };
  switch (geometry.type) {
    case "esriGeometryPoint": {
      const { z, m, ...rest } = geometry;
      return {
        ...rest,
        hasZ,
        hasM,
        ...(hasZ && z !== undefined ? { z } : {}),
        ...(hasM && m !== undefined ? { m } : {}),
      };
    }
    case "esriGeometryMultipoint":
      return { ...geometry, hasZ, hasM, points: geometry.points.map(position) };
    case "esriGeometryPolyline":
      return { ...geometry, hasZ, hasM, paths: geometry.paths.map((path) => path.map(position)) };
    case "esriGeometryPolygon":
      return { ...geometry, hasZ, hasM, rings: geometry.rings.map((ring) => ring.map(position)) };
    case "esriGeometryEnvelope": {
      const { zmin, zmax, mmin, mmax, ...rest } = geometry;
      return {
        ...rest,
        hasZ,
        hasM,
        ...(hasZ && zmin !== undefined ? { zmin, zmax } : {}),
        ...(hasM && mmin !== undefined ? { mmin, mmax } : {}),
      };
    }
  }
}

export type GeoJsonPosition = number[];

export type GeoJsonGeometry =
  | { type: "Point"; coordinates: GeoJsonPosition }
  | { type: "MultiPoint"; coordinates: GeoJsonPosition[] }
  | { type: "LineString"; coordinates: GeoJsonPosition[] }
  | { type: "MultiLineString"; coordinates: GeoJsonPosition[][] }
  | { type: "Polygon"; coordinates: GeoJsonPosition[][] }
  | { type: "MultiPolygon"; coordinates: GeoJsonPosition[][][] };

/**
 * An Esri JSON geometry as an RFC 7946 GeoJSON geometry. The caller has projected it to WGS 84
 * longitude/latitude. Z is kept as the third coordinate; M has no place in GeoJSON and is dropped.
 * Polygons follow the right-hand rule of RFC 7946 §3.1.6 (exterior rings counter-clockwise, holes
 * clockwise, the opposite of Esri JSON), with each hole in the polygon of the outer ring that
 * contains it; one outer ring gives a Polygon, several a MultiPolygon. An envelope becomes a
 * Polygon, or, when it crosses the antimeridian (xmin > xmax), the MultiPolygon of its two parts
 * split at ±180 as §3.1.9 asks.
 */
export function toGeoJsonGeometry(geometry: Geometry): GeoJsonGeometry {
  const position = (p: Position): GeoJsonPosition =>
    geometry.hasZ ? [p[0] as number, p[1] as number, p[2] as number] : [p[0] as number, p[1] as number];
  switch (geometry.type) {
    case "esriGeometryPoint":
      return {
        type: "Point",
        coordinates:
          geometry.hasZ && geometry.z !== undefined
            ? [geometry.x, geometry.y, geometry.z]
            : [geometry.x, geometry.y],
      };
    case "esriGeometryMultipoint":
      return { type: "MultiPoint", coordinates: geometry.points.map(position) };
    case "esriGeometryPolyline": {
      const lines = geometry.paths.map((path) => path.map(position));
      return lines.length === 1
        ? { type: "LineString", coordinates: lines[0] as GeoJsonPosition[] }
        : { type: "MultiLineString", coordinates: lines };
    }
    case "esriGeometryPolygon": {
      const polygons = polygonParts(geometry.rings).map(({ outer, holes }) => [
        oriented(outer, false).map(position),
        ...holes.map((hole) => oriented(hole, true).map(position)),
      ]);
      return polygons.length === 1
        ? { type: "Polygon", coordinates: polygons[0] as GeoJsonPosition[][] }
        : { type: "MultiPolygon", coordinates: polygons };
    }
    case "esriGeometryEnvelope": {
      const box = (xmin: number, xmax: number): GeoJsonPosition[][] => [
        [
          [xmin, geometry.ymin],
          [xmax, geometry.ymin],
          [xmax, geometry.ymax],
          [xmin, geometry.ymax],
          [xmin, geometry.ymin],
        ],
      ];
      if (geometry.xmin > geometry.xmax) {
        return { type: "MultiPolygon", coordinates: [box(geometry.xmin, 180), box(-180, geometry.xmax)] };
      }
      return { type: "Polygon", coordinates: box(geometry.xmin, geometry.xmax) };
    }
  }
}
