import Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
import Location from "jsts/org/locationtech/jts/geom/Location.js";
import { errors } from "../../errors.js";
import type { Bounds, Geometry, Result } from "./esri-json.js";
import {
  buffer,
  isJstsException,
  type JstsGeometry,
  pointLocator,
  prepare,
  type Relatable,
  toJsts,
  validPolygon,
  WrapError,
} from "./jsts-geometry.js";
import { locateInRings } from "./rings.js";

/**
 * The spatial filter of a layer query: which stored features stand in the `spatialRel` relation to
 * the query geometry. Pure: the caller has projected the query geometry into the layer's spatial
 * reference and turned any `distance` into the layer's units (see distance.ts).
 *
 * The direction of each relation follows ArcGIS's reference for esriSpatialRelEnum (ArcGIS Server
 * SOAP API; the ArcObjects and ArcGIS Pro SpatialRelationship references say the same), where the
 * query geometry is the subject and the stored feature the target:
 * - Intersects: "Query Geometry Intersects Target Geometry."
 * - Contains: "Query Geometry Contains Target Geometry." (features inside the query polygon)
 * - Within: "Query Geometry is Within Target Geometry." (features that contain the query geometry;
 *   clients that want the features within a polygon send Contains, as Esri Leaflet's `within()`
 *   does)
 * - Crosses, Overlaps, Touches: "Query Geometry Crosses / Overlaps / Touches Target Geometry."
 * - EnvelopeIntersects: "Envelope of Query Geometry Intersects Envelope of Target Geometry."
 * - IndexIntersects: "Query Geometry Intersects Index entry for Target Geometry (Primary Index
 *   Filter)"; the index entry of a feature is its envelope here, so it answers as
 *   EnvelopeIntersects.
 * The exact relations are the OGC (DE-9IM) predicates as jsts computes them.
 */

export type SpatialRel =
  | "esriSpatialRelIntersects"
  | "esriSpatialRelEnvelopeIntersects"
  | "esriSpatialRelIndexIntersects"
  | "esriSpatialRelContains"
  | "esriSpatialRelWithin"
  | "esriSpatialRelCrosses"
  | "esriSpatialRelOverlaps"
  | "esriSpatialRelTouches";

export const SPATIAL_RELS: readonly SpatialRel[] = [
  "esriSpatialRelIntersects",
  "esriSpatialRelEnvelopeIntersects",
  "esriSpatialRelIndexIntersects",
  "esriSpatialRelContains",
  "esriSpatialRelWithin",
  "esriSpatialRelCrosses",
  "esriSpatialRelOverlaps",
  "esriSpatialRelTouches",
];

/** Reads `spatialRel`: absent or empty means Intersects, as ArcGIS documents; case does not matter. */
export function parseSpatialRel(raw?: string): Result<SpatialRel> {
  const text = raw?.trim() ?? "";
  if (text === "") return { ok: true, value: "esriSpatialRelIntersects" };
  const found = SPATIAL_RELS.find((rel) => rel.toLowerCase() === text.toLowerCase());
  if (found) return { ok: true, value: found };
  if (text.toLowerCase() === "esrispatialrelrelation") {
    return {
      ok: false,
      error: {
        code: "invalidValue",
        message: "esriSpatialRelRelation (with relationParam) is not supported",
      },
    };
  }
  return {
    ok: false,
    error: { code: "invalidValue", message: `'${text}' is not one of ${SPATIAL_RELS.join(", ")}` },
  };
}

export interface FilterOptions {
  /** A buffer distance in the query geometry's own units; above 0 the query geometry is buffered first. */
  distance?: number;
  /**
   * The x range over which the query's spatial reference wraps (`wrapRange`), needed for an
   * envelope that crosses the antimeridian (`xmin > xmax`); such an envelope relates as the union
   * of its two parts.
   */
  wrap?: readonly [number, number];
}

export type CandidateFilter = (candidate: Geometry) => boolean;

/** A relation decided from where points lie against a polygonal query: the counts of points per location. */
type PointsRelation = (interior: number, boundary: number, exterior: number) => boolean;

/**
 * Polygonal query against points (a point or a multipoint feature), from the DE-9IM definitions:
 * contains needs every point inside or on the boundary and one inside; touches needs none inside
 * and one on the boundary; crosses (area, points) needs one point inside and one outside; an area
 * is never within points and never overlaps them (different dimensions).
 */
const AREA_VS_POINTS: Record<Exclude<SpatialRel, EnvelopeRel>, PointsRelation> = {
  esriSpatialRelIntersects: (i, b) => i + b > 0,
  esriSpatialRelContains: (i, _b, e) => e === 0 && i > 0,
  esriSpatialRelWithin: () => false,
  esriSpatialRelCrosses: (i, _b, e) => i > 0 && e > 0,
  esriSpatialRelOverlaps: () => false,
  esriSpatialRelTouches: (i, b) => i === 0 && b > 0,
};

/** Point query against a polygon feature, from where the point lies (1 inside, 0 boundary, -1 outside). */
const POINT_VS_AREA: Record<Exclude<SpatialRel, EnvelopeRel>, (where: number) => boolean> = {
  esriSpatialRelIntersects: (where) => where >= 0,
  esriSpatialRelContains: () => false,
  esriSpatialRelWithin: (where) => where === 1,
  esriSpatialRelCrosses: () => false,
  esriSpatialRelOverlaps: () => false,
  esriSpatialRelTouches: (where) => where === 0,
};

/**
 * An area query and a feature that lies in its interior, touching no boundary (a box strictly
 * inside a rectangular query, or jsts's `containsProperly`): the query intersects and contains the
 * feature, their interiors meet (so they do not touch), no part of the feature is outside (so they
 * neither cross nor overlap), and the query is not within a feature that misses its boundary.
 */
const INSIDE_AREA: Record<Exclude<SpatialRel, EnvelopeRel>, boolean> = {
  esriSpatialRelIntersects: true,
  esriSpatialRelContains: true,
  esriSpatialRelWithin: false,
  esriSpatialRelCrosses: false,
  esriSpatialRelOverlaps: false,
  esriSpatialRelTouches: false,
};

type EnvelopeRel = "esriSpatialRelEnvelopeIntersects" | "esriSpatialRelIndexIntersects";

const isEnvelopeRel = (rel: SpatialRel): rel is EnvelopeRel =>
  rel === "esriSpatialRelEnvelopeIntersects" || rel === "esriSpatialRelIndexIntersects";

function relationOf(
  rel: Exclude<SpatialRel, EnvelopeRel>,
): (query: Relatable, feature: JstsGeometry) => boolean {
  switch (rel) {
    case "esriSpatialRelIntersects":
      return (query, feature) => query.intersects(feature);
    case "esriSpatialRelContains":
      return (query, feature) => query.contains(feature);
    case "esriSpatialRelWithin":
      return (query, feature) => query.within(feature);
    case "esriSpatialRelCrosses":
      return (query, feature) => query.crosses(feature);
    case "esriSpatialRelOverlaps":
      return (query, feature) => query.overlaps(feature);
    case "esriSpatialRelTouches":
      return (query, feature) => query.touches(feature);
  }
}

/** Fills `out` with a feature's box, without allocating; false when it has none (an envelope across the antimeridian). */
function featureBounds(geometry: Geometry, out: Bounds): boolean {
  switch (geometry.type) {
    case "esriGeometryPoint":
      out.xmin = out.xmax = geometry.x;
      out.ymin = out.ymax = geometry.y;
      return true;
    case "esriGeometryEnvelope":
      out.xmin = geometry.xmin;
      out.xmax = geometry.xmax;
      out.ymin = geometry.ymin;
      out.ymax = geometry.ymax;
      return geometry.xmin <= geometry.xmax;
    default: {
      out.xmin = out.ymin = Number.POSITIVE_INFINITY;
      out.xmax = out.ymax = Number.NEGATIVE_INFINITY;
      const parts =
        geometry.type === "esriGeometryMultipoint"
          ? [geometry.points]
          : geometry.type === "esriGeometryPolyline"
            ? geometry.paths
            : geometry.rings;
      for (const part of parts) {
        for (const p of part) {
          const x = p[0] as number;
          const y = p[1] as number;
          if (x < out.xmin) out.xmin = x;
          if (x > out.xmax) out.xmax = x;
          if (y < out.ymin) out.ymin = y;
          if (y > out.ymax) out.ymax = y;
        }
      }
      return true;
    }
  }
}

const intersectsBox = (a: Bounds, b: Bounds): boolean =>
  a.xmin <= b.xmax && a.xmax >= b.xmin && a.ymin <= b.ymax && a.ymax >= b.ymin;

const withinBox = (inner: Bounds, outer: Bounds): boolean =>
  inner.xmin >= outer.xmin &&
  inner.xmax <= outer.xmax &&
  inner.ymin >= outer.ymin &&
  inner.ymax <= outer.ymax;

const strictlyInsideBox = (inner: Bounds, outer: Bounds): boolean =>
  inner.xmin > outer.xmin && inner.xmax < outer.xmax && inner.ymin > outer.ymin && inner.ymax < outer.ymax;

function boundsOfJsts(geometry: JstsGeometry): Bounds {
  const envelope = geometry.getEnvelopeInternal();
  return {
    xmin: envelope.getMinX(),
    ymin: envelope.getMinY(),
    xmax: envelope.getMaxX(),
    ymax: envelope.getMaxY(),
  };
}

/**
 * Builds the query geometry once and returns a test for stored features. The query geometry is
 * made valid first (a polygon whose rings cross is read by the odd-even rule, see `oddEvenArea`)
 * and buffered by `distance` when one is given. Features are tested in order of cost: their box
 * against the query's box, then points against an index of the query polygon, and jsts's prepared
 * geometry for the rest.
 *
 * Stored features are not checked for validity (that would cost more than the relation; ArcGIS
 * stores features simplified). A feature jsts cannot relate (it throws on some invalid polygons) is
 * retried in its odd-even reading, and counted as not matching if that fails too, so one broken
 * feature cannot fail a whole query.
 *
 * Throws `errors.invalidParameter("geometry")` for an envelope across the antimeridian without
 * `wrap`, or with bounds outside it.
 */
export function prepareFilter(
  query: Geometry,
  rel: SpatialRel,
  options: FilterOptions = {},
): CandidateFilter {
  let shape: JstsGeometry;
  try {
    shape = toJsts(query, { repair: true, ...(options.wrap ? { wrap: options.wrap } : {}) });
  } catch (err) {
    if (err instanceof WrapError) throw errors.invalidParameter("geometry", err.message.replace(/\.$/, ""));
    throw err;
  }
  const buffered = options.distance !== undefined && options.distance > 0;
  if (buffered) shape = buffer(shape, options.distance as number);
  if (shape.isEmpty()) return () => false;

  const hull = boundsOfJsts(shape);
  // The envelope of an envelope across the antimeridian is its two parts, not the box around them.
  const boxes: Bounds[] =
    !buffered &&
    query.type === "esriGeometryEnvelope" &&
    query.xmin > query.xmax &&
    shape.getNumGeometries() > 1
      ? Array.from({ length: shape.getNumGeometries() }, (_, i) => boundsOfJsts(shape.getGeometryN(i)))
      : [hull];
  const feature: Bounds = { xmin: 0, ymin: 0, xmax: 0, ymax: 0 };
  const touchesABox = (): boolean => boxes.some((b) => intersectsBox(feature, b));

  if (isEnvelopeRel(rel)) {
    return (candidate) => {
      if (featureBounds(candidate, feature)) return touchesABox();
      // An envelope feature across the antimeridian: relate its parts.
      try {
        const parts = toJsts(candidate, options.wrap ? { wrap: options.wrap } : {});
        for (let i = 0; i < parts.getNumGeometries(); i += 1) {
          Object.assign(feature, boundsOfJsts(parts.getGeometryN(i)));
          if (touchesABox()) return true;
        }
      } catch (err) {
        if (!(err instanceof WrapError)) throw err;
      }
      return false;
    };
  }

  const prepared = prepare(shape);
  const relation = relationOf(rel);
  const areaQuery = shape.getDimension() === 2;
  const rectangle = areaQuery && shape.isRectangle() ? hull : null;
  const locator = areaQuery ? pointLocator(shape) : null;
  const probe = new Coordinate(0, 0);
  const locationCounts = [0, 0, 0];
  const pointQuery = query.type === "esriGeometryPoint" && !buffered ? query : null;

  const pointsAgainstArea = (candidate: Geometry): boolean | null => {
    if (!locator) return null;
    locationCounts[0] = locationCounts[1] = locationCounts[2] = 0;
    const count = (x: number, y: number): void => {
      probe.x = x;
      probe.y = y;
      const where = locator.locate(probe);
      locationCounts[where] = (locationCounts[where] as number) + 1;
    };
    if (candidate.type === "esriGeometryPoint") count(candidate.x, candidate.y);
    else if (candidate.type === "esriGeometryMultipoint") {
      for (const p of candidate.points) count(p[0] as number, p[1] as number);
    } else return null;
    return AREA_VS_POINTS[rel](
      locationCounts[Location.INTERIOR] as number,
      locationCounts[Location.BOUNDARY] as number,
      locationCounts[Location.EXTERIOR] as number,
    );
  };

  // Only the relations other than Intersects and Contains lack a prepared (indexed) test in jsts;
  // for them, two cheap indexed tests settle the features that miss the query or lie in its interior,
  // and only the features across its boundary pay for the full relation.
  const screened = rel !== "esriSpatialRelIntersects" && rel !== "esriSpatialRelContains";
  const relateIndexed = (other: JstsGeometry): boolean => {
    if (screened && areaQuery && prepared.containsProperly) {
      if (!prepared.intersects(other)) return false;
      if (prepared.containsProperly(other)) return INSIDE_AREA[rel];
    }
    return relation(prepared, other);
  };

  const general = (candidate: Geometry): boolean => {
    let other: JstsGeometry;
    try {
      other = toJsts(candidate, options.wrap ? { wrap: options.wrap } : {});
    } catch (err) {
      if (err instanceof WrapError || isJstsException(err)) return false;
      throw err;
    }
    try {
      return relateIndexed(other);
    } catch (err) {
      if (!isJstsException(err)) throw err;
      if (candidate.type !== "esriGeometryPolygon") return false;
      try {
        return relateIndexed(validPolygon(candidate.rings));
      } catch (again) {
        if (!isJstsException(again)) throw again;
        return false;
      }
    }
  };

  return (candidate) => {
    if (featureBounds(candidate, feature)) {
      if (!touchesABox()) return false;
      if (rel === "esriSpatialRelContains" && !withinBox(feature, hull)) return false;
      if (rel === "esriSpatialRelWithin" && !withinBox(hull, feature)) return false;
      if (rectangle && strictlyInsideBox(feature, rectangle)) return INSIDE_AREA[rel];
    }
    const byPoints = pointsAgainstArea(candidate);
    if (byPoints !== null) return byPoints;
    if (pointQuery) {
      if (candidate.type === "esriGeometryPolygon") {
        return POINT_VS_AREA[rel](locateInRings(pointQuery.x, pointQuery.y, candidate.rings));
      }
      if (candidate.type === "esriGeometryPoint") {
        const same = candidate.x === pointQuery.x && candidate.y === pointQuery.y;
        // Two points: equal points intersect, contain and are within each other; nothing else holds.
        return (
          same &&
          (rel === "esriSpatialRelIntersects" ||
            rel === "esriSpatialRelContains" ||
            rel === "esriSpatialRelWithin")
        );
      }
    }
    return general(candidate);
  };
}
