/**
 * The part of jsts 2.12 that portico uses, typed. jsts's own generated declarations type almost
 * everything as `any`; these ambient modules take precedence over them. jsts has no entry point
 * (no `main` or `exports`), so every class is imported by its path; `monkey.js` must be imported
 * once for the predicates, `buffer`, `union`, `isValid` and the centroid methods of `Geometry`.
 */

declare module "jsts/org/locationtech/jts/monkey.js" {}

declare module "jsts/org/locationtech/jts/geom/Coordinate.js" {
  export default class Coordinate {
    constructor(x: number, y: number, z?: number);
    x: number;
    y: number;
    z: number;
  }
}

declare module "jsts/org/locationtech/jts/geom/Geometry.js" {
  import type Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";

  export interface Envelope {
    getMinX(): number;
    getMaxX(): number;
    getMinY(): number;
    getMaxY(): number;
    isNull(): boolean;
  }

  export default class Geometry {
    getGeometryType(): string;
    isEmpty(): boolean;
    getDimension(): number;
    getNumGeometries(): number;
    getGeometryN(n: number): Geometry;
    getCoordinates(): Coordinate[];
    getEnvelopeInternal(): Envelope;
    getArea(): number;
    isRectangle(): boolean;
    // Added by monkey.js.
    intersects(other: Geometry): boolean;
    contains(other: Geometry): boolean;
    within(other: Geometry): boolean;
    crosses(other: Geometry): boolean;
    overlaps(other: Geometry): boolean;
    touches(other: Geometry): boolean;
    isValid(): boolean;
    buffer(distance: number, quadrantSegments?: number): Geometry;
    union(): Geometry;
    getCentroid(): Point;
    getInteriorPoint(): Point;
  }

  export class Point extends Geometry {
    getX(): number;
    getY(): number;
  }

  export class LineString extends Geometry {}

  export class LinearRing extends LineString {}

  export class Polygon extends Geometry {
    getExteriorRing(): LinearRing;
    getNumInteriorRing(): number;
    getInteriorRingN(n: number): LinearRing;
  }
}

declare module "jsts/org/locationtech/jts/geom/GeometryFactory.js" {
  import type Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  import type {
    Envelope,
    LinearRing,
    LineString,
    Point,
    Polygon,
  } from "jsts/org/locationtech/jts/geom/Geometry.js";

  export default class GeometryFactory {
    createPoint(coordinate?: Coordinate): Point;
    createMultiPointFromCoords(coordinates: Coordinate[]): Geometry;
    createLineString(coordinates: Coordinate[]): LineString;
    createMultiLineString(lines: LineString[]): Geometry;
    createLinearRing(coordinates: Coordinate[]): LinearRing;
    createPolygon(shell: LinearRing, holes: LinearRing[]): Polygon;
    createPolygon(): Polygon;
    createMultiPolygon(polygons: Polygon[]): Geometry;
    createGeometryCollection(geometries: Geometry[]): Geometry;
    toGeometry(envelope: Envelope): Geometry;
  }
}

declare module "jsts/org/locationtech/jts/geom/Envelope.js" {
  import type { Envelope as EnvelopeShape } from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class Envelope implements EnvelopeShape {
    constructor(x1: number, x2: number, y1: number, y2: number);
    getMinX(): number;
    getMaxX(): number;
    getMinY(): number;
    getMaxY(): number;
    isNull(): boolean;
  }
}

declare module "jsts/org/locationtech/jts/geom/Location.js" {
  const Location: { readonly INTERIOR: 0; readonly BOUNDARY: 1; readonly EXTERIOR: 2 };
  export default Location;
}

/**
 * Prepared geometries. Their constructors are broken in jsts 2.12 (`super()` runs the base class's
 * initialiser without the geometry; jsts issue 479), so they are built with
 * `Object.create(prototype)` and the static `constructor_`.
 */
declare module "jsts/org/locationtech/jts/geom/prep/PreparedPolygon.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedPolygon {
    static constructor_(this: PreparedPolygon, polygonal: Geometry): void;
    getGeometry(): Geometry;
    intersects(other: Geometry): boolean;
    contains(other: Geometry): boolean;
    within(other: Geometry): boolean;
    crosses(other: Geometry): boolean;
    overlaps(other: Geometry): boolean;
    touches(other: Geometry): boolean;
    containsProperly(other: Geometry): boolean;
  }
}

declare module "jsts/org/locationtech/jts/geom/prep/PreparedLineString.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedLineString {
    static constructor_(this: PreparedLineString, lineal: Geometry): void;
    getGeometry(): Geometry;
    intersects(other: Geometry): boolean;
    contains(other: Geometry): boolean;
    within(other: Geometry): boolean;
    crosses(other: Geometry): boolean;
    overlaps(other: Geometry): boolean;
    touches(other: Geometry): boolean;
  }
}

declare module "jsts/org/locationtech/jts/algorithm/locate/IndexedPointInAreaLocator.js" {
  import type Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class IndexedPointInAreaLocator {
    constructor(polygonal: Geometry);
    /** A `Location` value: 0 interior, 1 boundary, 2 exterior. */
    locate(point: Coordinate): number;
  }
}

declare module "jsts/org/locationtech/jts/operation/polygonize/Polygonizer.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  import type { Polygon } from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class Polygonizer {
    add(geometry: Geometry): void;
    /** A java.util.Collection of polygons; iterable. */
    getPolygons(): Iterable<Polygon>;
  }
}

declare module "jsts/org/locationtech/jts/simplify/TopologyPreservingSimplifier.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";

  const TopologyPreservingSimplifier: {
    simplify(geometry: Geometry, distanceTolerance: number): Geometry;
  };
  export default TopologyPreservingSimplifier;
}

/** The predicate helpers behind the prepared geometries; built by hand for the same reason. */
declare module "jsts/org/locationtech/jts/geom/prep/PreparedPolygonIntersects.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedPolygonIntersects {
    static constructor_(this: PreparedPolygonIntersects, prepared: unknown): void;
    static intersects(prepared: unknown, geometry: Geometry): boolean;
    intersects(geometry: Geometry): boolean;
  }
}

declare module "jsts/org/locationtech/jts/geom/prep/PreparedPolygonContains.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedPolygonContains {
    static constructor_(this: PreparedPolygonContains, prepared: unknown): void;
    static contains(prepared: unknown, geometry: Geometry): boolean;
    contains(geometry: Geometry): boolean;
  }
}

declare module "jsts/org/locationtech/jts/geom/prep/PreparedPolygonContainsProperly.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedPolygonContainsProperly {
    static constructor_(this: PreparedPolygonContainsProperly, prepared: unknown): void;
    static containsProperly(prepared: unknown, geometry: Geometry): boolean;
    containsProperly(geometry: Geometry): boolean;
  }
}

declare module "jsts/org/locationtech/jts/geom/prep/PreparedPolygonCovers.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedPolygonCovers {
    static constructor_(this: PreparedPolygonCovers, prepared: unknown): void;
    static covers(prepared: unknown, geometry: Geometry): boolean;
    covers(geometry: Geometry): boolean;
  }
}

declare module "jsts/org/locationtech/jts/geom/prep/PreparedLineStringIntersects.js" {
  import type Geometry from "jsts/org/locationtech/jts/geom/Geometry.js";
  export default class PreparedLineStringIntersects {
    static constructor_(this: PreparedLineStringIntersects, prepared: unknown): void;
    static intersects(prepared: unknown, geometry: Geometry): boolean;
    intersects(geometry: Geometry): boolean;
  }
}

declare module "jsts/java/lang/Exception.js" {
  /** The base of jsts's exceptions (TopologyException, IllegalArgumentException, …). */
  export default class Exception extends Error {}
}
