import Coordinate from "jsts/org/locationtech/jts/geom/Coordinate.js";
import Location from "jsts/org/locationtech/jts/geom/Location.js";
import proj4 from "proj4";
import { boundsOf, type Geometry, type PolygonGeometry, type Position, type Result } from "./esri-json.js";
import { buffer, esriRings, pointLocator, toEsriPolygon, toJsts } from "./jsts-geometry.js";
import { type ProjectionError, type ResolvedReference, wrapRange } from "./projection.js";
import { oriented } from "./rings.js";

/**
 * The `distance` and `units` of a layer query: the query geometry buffered by a distance on the
 * ground before it is related to the features.
 */

export type LinearUnit =
  | "esriSRUnit_Meter"
  | "esriSRUnit_StatuteMile"
  | "esriSRUnit_Foot"
  | "esriSRUnit_Kilometer"
  | "esriSRUnit_NauticalMile"
  | "esriSRUnit_USNauticalMile";

/**
 * Meters per unit. The foot is the international foot; the US nautical mile is the one of 1853.248 m
 * (6,080.20 US survey feet) that the United States used before adopting the international nautical
 * mile in 1954.
 */
export const METERS_PER_UNIT: Readonly<Record<LinearUnit, number>> = {
  esriSRUnit_Meter: 1,
  esriSRUnit_StatuteMile: 1609.344,
  esriSRUnit_Foot: 0.3048,
  esriSRUnit_Kilometer: 1000,
  esriSRUnit_NauticalMile: 1852,
  esriSRUnit_USNauticalMile: 1853.248,
};

const UNITS = Object.keys(METERS_PER_UNIT) as LinearUnit[];

/**
 * A query's `distance` in meters, from its `units` (absent or empty: meters; case does not
 * matter). The distance must be a finite number, not negative.
 */
export function toLinearUnits(distance: number, units?: string): Result<number> {
  if (!Number.isFinite(distance) || distance < 0) {
    return {
      ok: false,
      error: { code: "invalidValue", message: `must be a number of at least 0 (got ${distance})` },
    };
  }
  const name = units?.trim() ?? "";
  if (name === "") return { ok: true, value: distance };
  const unit = UNITS.find((candidate) => candidate.toLowerCase() === name.toLowerCase());
  if (!unit) {
    return {
      ok: false,
      error: { code: "invalidValue", message: `'${name}' is not one of ${UNITS.join(", ")}` },
    };
  }
  return { ok: true, value: distance * METERS_PER_UNIT[unit] };
}

type BufferResult = Result<Geometry> | { ok: false; error: ProjectionError };

/**
 * The query geometry buffered by `meters` on the ground, in its own spatial reference (`reference`,
 * which the caller resolved from it).
 *
 * - A projected spatial reference other than Web Mercator: a planar buffer, in the reference's
 *   linear unit (a US-feet State Plane zone buffers by meters / 0.3048006), as ArcGIS buffers
 *   projected data.
 * - Longitude/latitude and Web Mercator, whose units are not ground distances: the geometry is
 *   projected to an azimuthal equidistant projection centred on it, buffered there in meters, and
 *   projected back. Distances from the centre are exact on the ellipsoid; away from it they stretch
 *   slowly (about 0.1 % at 250 km, 1 % at 800 km), so a small geometry buffers to within a
 *   fraction of a percent and a continent-sized one less exactly. Edges are densified first (every
 *   1/1440 of the world's width), since a straight edge in degrees is a curve in the projection.
 *   A buffer that reaches past the antimeridian gets a copy shifted by the world's width, so that
 *   features on the other side are found; one that covers a pole becomes the band of every
 *   longitude from its lowest latitude to the pole, which over-covers the far side of the pole.
 */
export function bufferQueryGeometry(
  geometry: Geometry,
  meters: number,
  reference: ResolvedReference,
): BufferResult {
  if (!(meters > 0)) return { ok: true, value: geometry };
  // Spans past the largest double (an envelope of ±1e308) make every point computed along an
  // edge NaN, which proj4 refuses with a TypeError: no buffer of such a geometry exists.
  const b = boundsOf(geometry);
  if (!Number.isFinite(b.xmax - b.xmin) || !Number.isFinite(b.ymax - b.ymin)) {
    return {
      ok: false,
      error: {
        code: "outsideProjection",
        message: "cannot buffer a geometry whose extent is beyond the range of a double",
      },
    };
  }
  if (vertexCount(geometry) > MAX_BUFFER_VERTICES) return tooManyVertices();
  const wrap = wrapRange(reference);
  if (!wrap) {
    // biome-ignore lint/suspicious/noExplicitAny: proj4's Converter type does not expose the parsed projection.
    const toMeter = ((proj4(reference.definition) as any).oProj?.to_meter as number | undefined) ?? 1;
    return polygonResult(
      toEsriPolygon(buffer(toJsts(geometry, { repair: true }), meters / toMeter), geometry.spatialReference),
    );
  }
  return equidistantBuffer(geometry, meters, reference, wrap);
}

function tooManyVertices(): BufferResult {
  return {
    ok: false,
    error: {
      code: "tooManyVertices",
      message: `has more than ${MAX_BUFFER_VERTICES} vertices to buffer (long edges count as the points added along them); simplify it or query without a distance`,
    },
  };
}

function vertexCount(geometry: Geometry): number {
  switch (geometry.type) {
    case "esriGeometryPoint":
    case "esriGeometryEnvelope":
      return 1;
    case "esriGeometryMultipoint":
      return geometry.points.length;
    case "esriGeometryPolyline":
      return geometry.paths.reduce((n, path) => n + path.length, 0);
    case "esriGeometryPolygon":
      return geometry.rings.reduce((n, ring) => n + ring.length, 0);
  }
}

function polygonResult(polygon: PolygonGeometry | null): BufferResult {
  if (!polygon) return { ok: false, error: { code: "emptyGeometry", message: "has nothing left to buffer" } };
  return { ok: true, value: polygon };
}

const WGS84 = "+proj=longlat +datum=WGS84 +no_defs";
const DENSIFY_STEPS_PER_WORLD = 1440;

/**
 * Most vertices of a geometry to buffer, long edges densified: buffering costs time and memory
 * in proportion (about 3 s and 270 MB for 20,000 vertices of a jagged ring, 40 s and 1.4 GB for
 * 100,000), and densifying multiplies an edge across the world by up to 1,000.
 */
export const MAX_BUFFER_VERTICES = 10_000;

class TooManyVertices extends Error {}

/** Points added along each edge so that none is longer than `step`, drawn from `budget`. */
function densify(positions: readonly Position[], step: number, budget: { left: number }): Position[] {
  const out: Position[] = [];
  for (let i = 0; i < positions.length; i += 1) {
    const a = positions[i] as Position;
    out.push([a[0] as number, a[1] as number]);
    const b = positions[i + 1];
    if (!b) break;
    const dx = (b[0] as number) - (a[0] as number);
    const dy = (b[1] as number) - (a[1] as number);
    const pieces = Math.min(1000, Math.ceil(Math.hypot(dx, dy) / step));
    budget.left -= Math.max(1, pieces);
    if (budget.left < 0) throw new TooManyVertices();
    for (let k = 1; k < pieces; k += 1) {
      out.push([(a[0] as number) + (dx * k) / pieces, (a[1] as number) + (dy * k) / pieces]);
    }
  }
  return out;
}

/**
 * The geometry with x and y only, edges densified, and an envelope as a polygon; one that crosses
 * the antimeridian is made contiguous by moving its east end one world to the east.
 */
function contiguous(geometry: Geometry, width: number): Geometry {
  const budget = { left: MAX_BUFFER_VERTICES };
  const base = { hasZ: false, hasM: false };
  const step = width / DENSIFY_STEPS_PER_WORLD;
  switch (geometry.type) {
    case "esriGeometryPoint":
      return { type: geometry.type, ...base, x: geometry.x, y: geometry.y };
    case "esriGeometryMultipoint":
      return {
        type: geometry.type,
        ...base,
        points: geometry.points.map((p) => [p[0] as number, p[1] as number]),
      };
    case "esriGeometryPolyline":
      return {
        type: geometry.type,
        ...base,
        paths: geometry.paths.map((path) => densify(path, step, budget)),
      };
    case "esriGeometryPolygon":
      return {
        type: geometry.type,
        ...base,
        rings: geometry.rings.map((ring) => densify(ring, step, budget)),
      };
    case "esriGeometryEnvelope": {
      const { xmin, ymin, ymax } = geometry;
      const xmax = geometry.xmax < xmin ? geometry.xmax + width : geometry.xmax;
      const ring: Position[] = [
        [xmin, ymin],
        [xmin, ymax],
        [xmax, ymax],
        [xmax, ymin],
        [xmin, ymin],
      ];
      return { type: "esriGeometryPolygon", ...base, rings: [densify(ring, step, budget)] };
    }
  }
}

class Unprojectable extends Error {}

function mapPositions(geometry: Geometry, map: (x: number, y: number) => [number, number]): Geometry {
  const each = (p: Position): Position => map(p[0] as number, p[1] as number);
  switch (geometry.type) {
    case "esriGeometryPoint": {
      const [x, y] = map(geometry.x, geometry.y);
      return { ...geometry, x, y };
    }
    case "esriGeometryMultipoint":
      return { ...geometry, points: geometry.points.map(each) };
    case "esriGeometryPolyline":
      return { ...geometry, paths: geometry.paths.map((path) => path.map(each)) };
    case "esriGeometryPolygon":
      return { ...geometry, rings: geometry.rings.map((ring) => ring.map(each)) };
    case "esriGeometryEnvelope":
      return geometry;
  }
}

function finitePair(out: number[], x: number, y: number): [number, number] {
  const [px, py] = out;
  if (px === undefined || py === undefined || !Number.isFinite(px) || !Number.isFinite(py)) {
    throw new Unprojectable(`(${x}, ${y}) cannot be projected for the buffer.`);
  }
  return [px, py];
}

function equidistantBuffer(
  geometry: Geometry,
  meters: number,
  reference: ResolvedReference,
  wrap: readonly [number, number],
): BufferResult {
  const [west, east] = wrap;
  const width = east - west;
  // Web Mercator's y range is as wide as its x range; longitude/latitude stops at ±90.
  const top = reference.geographic ? 90 : east;
  let flat: Geometry;
  try {
    flat = contiguous(geometry, width);
  } catch (err) {
    if (err instanceof TooManyVertices) return tooManyVertices();
    throw err;
  }
  const { xmin, ymin, xmax, ymax } = boundsOf(flat);
  const centreX = (xmin + xmax) / 2;
  const centreY = (ymin + ymax) / 2;
  try {
    const [lon, lat] = finitePair(
      proj4(reference.definition, WGS84).forward([centreX, centreY]),
      centreX,
      centreY,
    );
    const equidistant = `+proj=aeqd +lat_0=${lat} +lon_0=${lon} +x_0=0 +y_0=0 +datum=WGS84 +units=m +no_defs`;
    const toPlane = proj4(reference.definition, equidistant);
    const planar = mapPositions(flat, (x, y) => finitePair(toPlane.forward([x, y]), x, y));
    const buffered = buffer(toJsts(planar, { repair: true }), meters);
    if (buffered.isEmpty()) return polygonResult(null);

    const poles = proj4(WGS84, equidistant);
    const locator = pointLocator(buffered);
    const covers = (latitude: number): boolean => {
      const [px, py] = poles.forward([lon, latitude]);
      return locator.locate(new Coordinate(px as number, py as number)) !== Location.EXTERIOR;
    };
    const north = covers(90);
    const south = covers(-90);

    const back = (x: number, y: number): [number, number] => {
      const [bx, by] = finitePair(toPlane.inverse([x, y]), x, y);
      return [bx, Math.max(-top, Math.min(top, by))];
    };
    const rings = esriRings(buffered).map((ring) => {
      // Each vertex is taken in the copy of the world nearest the one before it, so that a ring
      // across the antimeridian stays in one piece.
      let previous = centreX;
      return ring.map(([x, y]) => {
        let [bx, by] = back(x as number, y as number);
        bx += Math.round((previous - bx) / width) * width;
        previous = bx;
        return [bx, by];
      });
    });

    if (north || south) {
      const latitudes = rings.flatMap((ring) => ring.map((p) => p[1] as number));
      const low = south ? -top : Math.min(...latitudes);
      const high = north ? top : Math.max(...latitudes);
      return polygonResult(band(west, east, low, high, geometry));
    }
    let lowX = Number.POSITIVE_INFINITY;
    let highX = Number.NEGATIVE_INFINITY;
    for (const ring of rings) {
      for (const p of ring) {
        lowX = Math.min(lowX, p[0] as number);
        highX = Math.max(highX, p[0] as number);
      }
    }
    if (highX - lowX >= width) {
      const latitudes = rings.flatMap((ring) => ring.map((p) => p[1] as number));
      return polygonResult(band(west, east, Math.min(...latitudes), Math.max(...latitudes), geometry));
    }
    const copies = [...rings];
    if (highX > east) copies.push(...rings.map((ring) => shift(ring, -width)));
    if (lowX < west) copies.push(...rings.map((ring) => shift(ring, width)));
    const polygon: PolygonGeometry = { type: "esriGeometryPolygon", hasZ: false, hasM: false, rings: copies };
    if (geometry.spatialReference) polygon.spatialReference = geometry.spatialReference;
    return { ok: true, value: polygon };
  } catch (err) {
    if (err instanceof Unprojectable) {
      return { ok: false, error: { code: "outsideProjection", message: err.message } };
    }
    throw err;
  }
}

const shift = (ring: Position[], dx: number): Position[] =>
  ring.map(([x, y]) => [(x as number) + dx, y as number]);

/** Every longitude between two latitudes (or Web Mercator ys), as one clockwise ring. */
function band(west: number, east: number, low: number, high: number, geometry: Geometry): PolygonGeometry {
  const ring = oriented(
    [
      [west, low],
      [west, high],
      [east, high],
      [east, low],
      [west, low],
    ],
    true,
  );
  const polygon: PolygonGeometry = { type: "esriGeometryPolygon", hasZ: false, hasM: false, rings: [ring] };
  if (geometry.spatialReference) polygon.spatialReference = geometry.spatialReference;
  return polygon;
}
