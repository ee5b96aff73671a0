import "jsts/org/locationtech/jts/monkey.js";
import JstsException from "jsts/java/lang/Exception.js";
import IndexedPointInAreaLocator from "jsts/org/locationtech/jts/algorithm/locate/IndexedPointInAreaLocator.js";
import Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
import type JstsGeometry from "jsts/org/locationtech/jts/geom/Geometry.js";
import type { Polygon as JstsPolygon, LinearRing } from "jsts/org/locationtech/jts/geom/Geometry.js";
import GeometryFactory from "jsts/org/locationtech/jts/geom/GeometryFactory.js";
import PreparedLineString from "jsts/org/locationtech/jts/geom/prep/PreparedLineString.js";
import PreparedLineStringIntersects from "jsts/org/locationtech/jts/geom/prep/PreparedLineStringIntersects.js";
import PreparedPolygon from "jsts/org/locationtech/jts/geom/prep/PreparedPolygon.js";
import PreparedPolygonContains from "jsts/org/locationtech/jts/geom/prep/PreparedPolygonContains.js";
import PreparedPolygonContainsProperly from "jsts/org/locationtech/jts/geom/prep/PreparedPolygonContainsProperly.js";
import PreparedPolygonCovers from "jsts/org/locationtech/jts/geom/prep/PreparedPolygonCovers.js";
import PreparedPolygonIntersects from "jsts/org/locationtech/jts/geom/prep/PreparedPolygonIntersects.js";
import Polygonizer from "jsts/org/locationtech/jts/operation/polygonize/Polygonizer.js";
import type { Bounds, Geometry, PolygonGeometry, Position } from "./esri-json.js";
import { envelopeParts } from "./esri-json.js";
import { locateInRings, oriented, polygonParts } from "./rings.js";

/**
 * The bridge between Esri JSON geometries and jsts (the JavaScript port of JTS), which decides the
 * exact spatial relationships and buffers. Only x and y go to jsts: relations are planar, in the
 * coordinates the geometries are given in.
 */

export type { JstsGeometry };

export const factory = new GeometryFactory();

/**
 * Segments per quarter circle in buffers. jsts puts the vertices of a round buffer on the true
 * circle, so the polygon lies inside it by at most d·(1 − cos(π/128)) ≈ 0.03 % of the distance
 * (30 cm for a kilometre); a quarter of the default 8 segments would miss points up to 2 % short
 * of the distance.
 */
export const BUFFER_QUADRANT_SEGMENTS = 32;

const coordinates = (positions: readonly Position[]): Coordinate[] =>
  positions.map((p) => new Coordinate(p[0] as number, p[1] as number));

function ringOf(positions: readonly Position[]): LinearRing {
  return factory.createLinearRing(coordinates(positions));
}

/** A polygon built from its rings as grouped by orientation (see `polygonParts`), unchecked. */
export function structuredPolygon(rings: readonly Position[][]): JstsGeometry {
  const polygons = polygonParts(rings).map(({ outer, holes }) =>
    factory.createPolygon(ringOf(outer), holes.map(ringOf)),
  );
  return polygons.length === 1 ? (polygons[0] as JstsPolygon) : factory.createMultiPolygon(polygons);
}

/**
 * The area of a polygon whose rings do not make a valid polygon (a ring crossing itself or another,
 * a hole outside its ring), read with the odd-even rule that Esri polygons are filled by. All the
 * rings' lines are noded together, the faces they enclose are listed, and the faces whose interior
 * point lies inside by the odd-even rule are merged. This keeps both lobes of a bow tie, where the
 * usual `buffer(0)` repair keeps only one of them. The result may be empty (a ring with no area).
 */
export function oddEvenArea(rings: readonly Position[][]): JstsGeometry {
  const lines = factory.createMultiLineString(
    rings.map((ring) => factory.createLineString(coordinates(ring))),
  );
  const polygonizer = new Polygonizer();
  polygonizer.add(lines.union());
  const kept: JstsPolygon[] = [];
  for (const face of polygonizer.getPolygons()) {
    const inside = face.getInteriorPoint();
    if (locateInRings(inside.getX(), inside.getY(), rings) === 1) kept.push(face);
  }
  if (kept.length === 0) return factory.createPolygon();
  if (kept.length === 1) return kept[0] as JstsPolygon;
  return factory.createMultiPolygon(kept).union();
}

/**
 * An Esri polygon as a valid jsts polygon or multipolygon: the rings grouped by orientation when
 * that is valid (the usual case, and the cheap one), else the odd-even reading of `oddEvenArea`.
 */
export function validPolygon(rings: readonly Position[][]): JstsGeometry {
  const structured = structuredPolygon(rings);
  return structured.isValid() ? structured : oddEvenArea(rings);
}

function box(bounds: Bounds): JstsGeometry {
  const { xmin, ymin, xmax, ymax } = bounds;
  if (xmin === xmax || ymin === ymax) {
    // A flat envelope (the simple syntax allows `x,y,x,y`) is a point or a segment, not a polygon.
    if (xmin === xmax && ymin === ymax) return factory.createPoint(new Coordinate(xmin, ymin));
    return factory.createLineString([new Coordinate(xmin, ymin), new Coordinate(xmax, ymax)]);
  }
  return factory.createPolygon(
    ringOf([
      [xmin, ymin],
      [xmin, ymax],
      [xmax, ymax],
      [xmax, ymin],
      [xmin, ymin],
    ]),
    [],
  );
}

export class WrapError extends Error {}

/**
 * An Esri JSON geometry as a jsts geometry. Polygons are made valid with `validPolygon` when
 * `repair` is set (the query geometry, built once); stored candidates are built unchecked, since a
 * validity check per feature would cost more than the relation itself. An envelope that crosses
 * the antimeridian (`xmin > xmax`) becomes the union of its two parts, which needs `wrap`.
 */
export function toJsts(
  geometry: Geometry,
  options: { repair?: boolean; wrap?: readonly [number, number] } = {},
): JstsGeometry {
  switch (geometry.type) {
    case "esriGeometryPoint":
      return factory.createPoint(new Coordinate(geometry.x, geometry.y));
    case "esriGeometryMultipoint":
      return factory.createMultiPointFromCoords(coordinates(geometry.points));
    case "esriGeometryPolyline": {
      const lines = geometry.paths.map((path) => factory.createLineString(coordinates(path)));
      return lines.length === 1 ? (lines[0] as JstsGeometry) : factory.createMultiLineString(lines);
    }
    case "esriGeometryPolygon":
      return options.repair ? validPolygon(geometry.rings) : structuredPolygon(geometry.rings);
    case "esriGeometryEnvelope": {
      const parts = envelopeParts(geometry, options.wrap);
      if (!parts.ok) throw new WrapError(parts.error.message);
      const boxes = parts.value.map(box);
      if (boxes.length === 1) return boxes[0] as JstsGeometry;
      if (boxes.every((part) => part.getDimension() === 2)) {
        return factory.createMultiPolygon(boxes as JstsPolygon[]);
      }
      // A part of no width (xmin on the east edge) is a segment; jsts relates no mixed collection.
      return factory.createGeometryCollection(boxes).union();
    }
  }
}

/** Whether an error is one of jsts's own (a TopologyException on some invalid input), not a bug. */
export const isJstsException = (err: unknown): boolean => err instanceof JstsException;

/**
 * jsts 2.12's prepared geometries cannot be constructed with `new` (jsts issue 479): each subclass
 * calls `super()`, which runs the base class's initialiser without its argument and throws. Their
 * initialisers work when called directly, so each instance is made with `Object.create` and the
 * class's static `constructor_`, and the static entry points that the prepared polygon and line use
 * internally are replaced by ones built that way. The behaviour is otherwise jsts's own; the tests
 * compare it with jsts's unprepared predicates. (jsts is pinned, so the replacement applies to the
 * exact code it was written for.)
 */
function construct<T>(
  type: { prototype: T; constructor_: (this: T, argument: never) => void },
  argument: unknown,
): T {
  const instance = Object.create(type.prototype as object) as T;
  type.constructor_.call(instance, argument as never);
  return instance;
}

PreparedPolygonIntersects.intersects = (prepared, geometry) =>
  construct(PreparedPolygonIntersects, prepared).intersects(geometry);
PreparedPolygonContains.contains = (prepared, geometry) =>
  construct(PreparedPolygonContains, prepared).contains(geometry);
PreparedPolygonContainsProperly.containsProperly = (prepared, geometry) =>
  construct(PreparedPolygonContainsProperly, prepared).containsProperly(geometry);
PreparedPolygonCovers.covers = (prepared, geometry) =>
  construct(PreparedPolygonCovers, prepared).covers(geometry);
PreparedLineStringIntersects.intersects = (prepared, geometry) =>
  construct(PreparedLineStringIntersects, prepared).intersects(geometry);

/** A geometry indexed for many relation tests against it. */
export interface Relatable {
  intersects(other: JstsGeometry): boolean;
  contains(other: JstsGeometry): boolean;
  within(other: JstsGeometry): boolean;
  crosses(other: JstsGeometry): boolean;
  overlaps(other: JstsGeometry): boolean;
  touches(other: JstsGeometry): boolean;
  /** Whether the other geometry lies in this one's interior, touching no boundary. */
  containsProperly?(other: JstsGeometry): boolean;
}

/** The prepared form of a polygonal or lineal geometry, or the geometry itself for the rest. */
export function prepare(geometry: JstsGeometry): Relatable {
  if (geometry.isEmpty()) return geometry;
  const dimension = geometry.getDimension();
  if (dimension === 2) return construct(PreparedPolygon, geometry);
  if (dimension === 1) return construct(PreparedLineString, geometry);
  return geometry;
}

export function pointLocator(polygonal: JstsGeometry): IndexedPointInAreaLocator {
  return new IndexedPointInAreaLocator(polygonal);
}

/** A geometry buffered by `distance` in its own units (round ends and joins). */
export function buffer(geometry: JstsGeometry, distance: number): JstsGeometry {
  return geometry.buffer(distance, BUFFER_QUADRANT_SEGMENTS);
}

const positionsOf = (ring: LinearRing): Position[] => ring.getCoordinates().map((c) => [c.x, c.y]);

/**
 * The rings of a polygonal jsts geometry as Esri JSON wants them: outer rings clockwise, holes
 * counter-clockwise, each polygon's outer ring before its holes.
 */
export function esriRings(polygonal: JstsGeometry): Position[][] {
  const rings: Position[][] = [];
  for (let i = 0; i < polygonal.getNumGeometries(); i += 1) {
    const polygon = polygonal.getGeometryN(i) as JstsPolygon;
    if (polygon.isEmpty()) continue;
    rings.push(oriented(positionsOf(polygon.getExteriorRing()), true));
    for (let h = 0; h < polygon.getNumInteriorRing(); h += 1) {
      rings.push(oriented(positionsOf(polygon.getInteriorRingN(h)), false));
    }
  }
  return rings;
}

/** An Esri polygon (no Z or M) from a polygonal jsts geometry, or null when it is empty. */
export function toEsriPolygon(
  polygonal: JstsGeometry,
  spatialReference: Geometry["spatialReference"],
): PolygonGeometry | null {
  const rings = esriRings(polygonal);
  if (rings.length === 0) return null;
  const polygon: PolygonGeometry = { type: "esriGeometryPolygon", hasZ: false, hasM: false, rings };
  if (spatialReference) polygon.spatialReference = spatialReference;
  return polygon;
}
