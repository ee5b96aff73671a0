import type { Polygon as JstsPolygon, LinearRing } from "jsts/org/locationtech/jts/geom/Geometry.js";
import type { Bounds, Geometry, Position } from "./esri-json.js";
import { isJstsException, type JstsGeometry, toJsts, WrapError } from "./jsts-geometry.js";
import type { PolygonPart } from "./rings.js";

/**
 * Margins around a query geometry, so that a second geometry engine (GEOS, in PostGIS) can settle
 * most features of an Intersects query while the answer stays the one jsts gives in the process.
 *
 * GEOS and jsts implement the same algorithms, but they may disagree on a feature that only touches
 * the query geometry (a vertex on its boundary, computed through other arithmetic, such as
 * PostGIS's own point-in-polygon test), and on invalid stored polygons some shortcuts read rings
 * differently. So the database is never asked about the query geometry itself: it is asked about
 * `outer`, which contains the query geometry with a margin, and `inner`, which the query geometry
 * contains with a margin. A feature that misses `outer` misses the query; one that meets `inner`
 * meets it; those are far from any boundary case. Only the features in between (meeting `outer`
 * but not `inner`: near the query's boundary) are related in the process, by the same filter as
 * without PostGIS. Both containments are checked with jsts before the margins are used.
 */

/** A margin as the database receives it: a box, or polygons (outer ring and holes). */
export type Margin = { box: Bounds } | { polygons: PolygonPart[] };

export interface QueryMargins {
  /** Contains the query geometry, with a margin. */
  outer: Margin;
  /** Lies inside the query geometry, with a margin; null when the query has no area to spare. */
  inner: Margin | null;
}

/**
 * The margin's width, relative to the largest coordinate or extent of the query: far above the
 * rounding error of double arithmetic (about 1e-16 of the same), so that no rounding can move a
 * feature across it, and far below any distance that matters on the ground (2 cm at the scale of
 * Web Mercator, a millimetre in a local system a thousand kilometres wide).
 */
const RELATIVE_MARGIN = 1e-9;

/**
 * Segments per quarter circle where the margin turns a corner. The vertices lie on the true
 * circle and jsts rounds the count per corner, so one segment may span one and a half eighths of
 * the circle: the outline stays at least cos(3π/16) ≈ 0.83 of the width from the query geometry.
 */
const QUADRANT_SEGMENTS = 2;

function boundsOf(geometry: JstsGeometry): Bounds {
  const e = geometry.getEnvelopeInternal();
  return { xmin: e.getMinX(), ymin: e.getMinY(), xmax: e.getMaxX(), ymax: e.getMaxY() };
}

const positionsOf = (ring: LinearRing): Position[] => ring.getCoordinates().map((c) => [c.x, c.y]);

function partsOf(polygonal: JstsGeometry): PolygonPart[] {
  const parts: PolygonPart[] = [];
  for (let i = 0; i < polygonal.getNumGeometries(); i += 1) {
    const polygon = polygonal.getGeometryN(i) as JstsPolygon;
    if (polygon.isEmpty()) continue;
    const holes: Position[][] = [];
    for (let h = 0; h < polygon.getNumInteriorRing(); h += 1)
      holes.push(positionsOf(polygon.getInteriorRingN(h)));
    parts.push({ outer: positionsOf(polygon.getExteriorRing()), holes });
  }
  return parts;
}

/**
 * The margins of a query geometry, read as `prepareFilter` (relate.ts) reads it: made valid, in
 * the layer's reference. Undefined when that reading fails or is empty, or when the margins do not
 * pass their check; the caller then relates every candidate in the process, as without PostGIS.
 */
export function queryMargins(query: Geometry): QueryMargins | undefined {
  let shape: JstsGeometry;
  try {
    shape = toJsts(query, { repair: true });
  } catch (err) {
    if (err instanceof WrapError || isJstsException(err)) return undefined;
    throw err;
  }
  if (shape.isEmpty()) return undefined;
  const b = boundsOf(shape);
  const scale = Math.max(
    Math.abs(b.xmin),
    Math.abs(b.xmax),
    Math.abs(b.ymin),
    Math.abs(b.ymax),
    b.xmax - b.xmin,
    b.ymax - b.ymin,
  );
  const margin = scale > 0 ? scale * RELATIVE_MARGIN : RELATIVE_MARGIN;
  if (shape.isRectangle()) {
    // Box arithmetic moves each side by the margin, exactly enough: the margin is millions of
    // times the rounding of a coordinate of that size.
    const outer: Margin = {
      box: { xmin: b.xmin - margin, ymin: b.ymin - margin, xmax: b.xmax + margin, ymax: b.ymax + margin },
    };
    const inner =
      b.xmax - b.xmin > 2 * margin && b.ymax - b.ymin > 2 * margin
        ? {
            box: {
              xmin: b.xmin + margin,
              ymin: b.ymin + margin,
              xmax: b.xmax - margin,
              ymax: b.ymax - margin,
            },
          }
        : null;
    return { outer, inner };
  }
  try {
    const grown = shape.buffer(margin, QUADRANT_SEGMENTS);
    if (grown.isEmpty() || !grown.contains(shape)) return undefined;
    let inner: Margin | null = null;
    if (shape.getDimension() === 2) {
      const shrunk = shape.buffer(-margin, QUADRANT_SEGMENTS);
      if (!shrunk.isEmpty() && shape.contains(shrunk)) inner = { polygons: partsOf(shrunk) };
    }
    return { outer: { polygons: partsOf(grown) }, inner };
  } catch (err) {
    if (isJstsException(err)) return undefined;
    throw err;
  }
}
