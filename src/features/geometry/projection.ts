import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import proj4 from "proj4";
import type {
  Bounds,
  EnvelopeGeometry,
  Geometry,
  GeometryError,
  Position,
  Result,
  SpatialReference,
} from "./esri-json.js";

/**
 * Projection between spatial references with proj4js. Definitions come from `epsg-index` (every
 * EPSG code with a PROJ string, one small file per code, read on first use), so a spatial
 * reference costs nothing until a request names it. Esri's Web Mercator aliases map to 3857.
 * Only x and y are projected; z and m are carried unchanged (no vertical transformation), as
 * ArcGIS does when no vertical coordinate system is involved.
 */

export type ProjectionErrorCode =
  | "unknownSpatialReference"
  | "unsupportedSpatialReference"
  | "outsideProjection";

export interface ProjectionError {
  code: ProjectionErrorCode;
  message: string;
}

/** Esri's codes for Web Mercator; ArcGIS answers them with `latestWkid: 3857`. */
const WEB_MERCATOR_ALIASES = new Set([102100, 102113, 900913, 3857]);

/** Half the width of the Web Mercator world, π × 6378137. */
export const WEB_MERCATOR_HALF_WORLD = Math.PI * 6378137;

/** A spatial reference resolved to a PROJ definition. */
export interface ResolvedReference {
  /** The key projections are cached by: `EPSG:<code>` or the WKT itself. */
  key: string;
  /** The EPSG code, when the reference has one (aliases resolved: 102100 gives 3857). */
  wkid?: number;
  geographic: boolean;
  definition: string;
}

const EPSG_DIRECTORY = join(dirname(createRequire(import.meta.url).resolve("epsg-index/package.json")), "s");

interface EpsgEntry {
  kind: string;
  name: string;
  proj4?: string;
}

/** The kinds of EPSG entry that describe horizontal coordinates proj4 can project. */
const HORIZONTAL_KINDS = new Set(["CRS-PROJCRS", "CRS-GEOGCRS", "CRS-GEOG3DCRS"]);

/** Resolved EPSG codes; at most one entry per file of epsg-index (about 8,000). */
const references = new Map<number, Result<ResolvedReference> | { ok: false; error: ProjectionError }>();

function failure(code: ProjectionErrorCode, message: string): { ok: false; error: ProjectionError } {
  return { ok: false, error: { code, message } };
}

function loadEpsg(
  code: number,
): { ok: true; value: ResolvedReference } | { ok: false; error: ProjectionError } {
  let entry: EpsgEntry;
  try {
    // `code` is a positive safe integer (checked by the caller), so this path stays in the directory.
    entry = JSON.parse(readFileSync(join(EPSG_DIRECTORY, `${code}.json`), "utf8")) as EpsgEntry;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return failure("unknownSpatialReference", `wkid ${code} is not a known EPSG spatial reference.`);
    }
    throw err;
  }
  if (!HORIZONTAL_KINDS.has(entry.kind) || !entry.proj4) {
    return failure(
      "unsupportedSpatialReference",
      `wkid ${code} (${entry.name}) is not a horizontal coordinate system that can be projected.`,
    );
  }
  // proj4js cannot load NTv2/GTX grid files here; a definition whose datum shift needs one would
  // be off by up to ~100 m (or give NaN), so it is refused rather than projected wrongly.
  const grids = /\+nadgrids=([^ ]+)/.exec(entry.proj4)?.[1];
  if (grids?.split(",").some((grid) => !grid.startsWith("@"))) {
    return failure(
      "unsupportedSpatialReference",
      `wkid ${code} (${entry.name}) needs the datum grid ${grids}, which is not available.`,
    );
  }
  return {
    ok: true,
    value: {
      key: `EPSG:${code}`,
      wkid: code,
      geographic: entry.kind !== "CRS-PROJCRS",
      definition: entry.proj4,
    },
  };
}

/** The PROJ definition of a spatial reference: `latestWkid` first, then `wkid`, then `wkt`. */
export function resolveSpatialReference(
  reference: SpatialReference,
): { ok: true; value: ResolvedReference } | { ok: false; error: ProjectionError } {
  const id = reference.latestWkid ?? reference.wkid;
  if (id !== undefined) {
    if (!Number.isSafeInteger(id) || id <= 0)
      return failure("unknownSpatialReference", `wkid ${id} is not valid.`);
    const code = WEB_MERCATOR_ALIASES.has(id) ? 3857 : id;
    let resolved = references.get(code);
    if (resolved === undefined) {
      resolved = loadEpsg(code);
      // Codes that name no definition are not kept: they come from requests and are unbounded.
      if (resolved.ok || resolved.error.code !== "unknownSpatialReference") references.set(code, resolved);
    }
    return resolved as { ok: true; value: ResolvedReference } | { ok: false; error: ProjectionError };
  }
  if (reference.wkt !== undefined) {
    let projection: proj4.Converter;
    try {
      projection = proj4(reference.wkt);
    } catch (err) {
      return failure("unknownSpatialReference", `wkt could not be read: ${(err as Error).message}.`);
    }
    // biome-ignore lint/suspicious/noExplicitAny: proj4's Converter type does not expose the parsed projection.
    const geographic = (projection as any).oProj?.projName === "longlat";
    return { ok: true, value: { key: reference.wkt, geographic, definition: reference.wkt } };
  }
  return failure("unknownSpatialReference", "the spatial reference has neither wkid nor wkt.");
}

/**
 * The WKT of a resolved reference, as a shapefile's `.prj` holds it: EPSG's for a code, the
 * reference's own when it was given as WKT; undefined when neither is known.
 */
export function wktOf(reference: ResolvedReference): string | undefined {
  if (reference.wkid === undefined)
    return reference.definition.startsWith("+") ? undefined : reference.definition;
  try {
    const entry = JSON.parse(readFileSync(join(EPSG_DIRECTORY, `${reference.wkid}.json`), "utf8")) as {
      wkt?: unknown;
    };
    return typeof entry.wkt === "string" ? entry.wkt : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** The x range over which a spatial reference wraps around the globe, if it does. */
export function wrapRange(reference: ResolvedReference): readonly [number, number] | undefined {
  if (reference.geographic) return [-180, 180];
  if (reference.wkid === 3857) return [-WEB_MERCATOR_HALF_WORLD, WEB_MERCATOR_HALF_WORLD];
  return undefined;
}

/** The spatial reference ArcGIS writes for a code: Web Mercator as `{wkid: 102100, latestWkid: 3857}`. */
export function spatialReferenceOf(reference: ResolvedReference): SpatialReference {
  if (reference.wkid === 3857) return { wkid: 102100, latestWkid: 3857 };
  if (reference.wkid !== undefined) return { wkid: reference.wkid, latestWkid: reference.wkid };
  return { wkt: reference.definition };
}

/** Projection objects by `from>to`; bounded, since WKT keys come from requests. */
const converters = new Map<string, proj4.Converter>();
const MAX_CONVERTERS = 256;

function converterFor(from: ResolvedReference, to: ResolvedReference): proj4.Converter {
  const key = `${from.key}>${to.key}`;
  let converter = converters.get(key);
  if (converter === undefined) {
    if (converters.size >= MAX_CONVERTERS) {
      const oldest = converters.keys().next().value;
      if (oldest !== undefined) converters.delete(oldest);
    }
    converter = proj4(from.definition, to.definition);
    converters.set(key, converter);
  }
  return converter;
}

/** A function that projects one [x, y] pair; it throws `OutsideProjection` for a point it cannot. */
export type PointProjector = (x: number, y: number) => [number, number];

class OutsideProjection extends Error {}

/**
 * WGS 84 longitude/latitude to and from Web Mercator, the pair nearly every web map projects
 * between (a layer in one, the map in the other): proj4's spherical Mercator equations for
 * EPSG:3857 (`merc.js`, `adjust_lon.js`: no datum shift, `+nadgrids=@null`), written out so that
 * a tile of thousands of features does not pay for proj4's general pipeline on each point. They
 * give proj4's results to the bit; projection.test.ts compares them.
 */
const MERCATOR_RADIUS = 6378137;
const D2R = Math.PI / 180;
const R2D = 180 / Math.PI;
/** proj4's `adjust_lon` (its SPI is π rounded up, so that ±180° itself is not wrapped). */
function adjustLongitude(radians: number): number {
  // biome-ignore lint/suspicious/noApproximativeNumericConstant: proj4's constant, which is not π.
  return Math.abs(radians) <= 3.14159265359 ? radians : radians - (radians < 0 ? -1 : 1) * 2 * Math.PI;
}

const geographicToMercator: PointProjector = (x, y) => {
  const lat = y * D2R;
  // proj4 answers nothing within 1e-10 radians of a pole, where Mercator runs to infinity.
  const py =
    Math.abs(Math.abs(lat) - Math.PI / 2) <= 1e-10
      ? Number.NaN
      : MERCATOR_RADIUS * Math.log(Math.tan(Math.PI / 4 + 0.5 * lat));
  const px = MERCATOR_RADIUS * adjustLongitude(x * D2R);
  if (!Number.isFinite(px) || !Number.isFinite(py)) {
    throw new OutsideProjection(`(${x}, ${y}) cannot be projected from EPSG:4326 to EPSG:3857.`);
  }
  return [px, py];
};

const mercatorToGeographic: PointProjector = (x, y) => {
  const px = adjustLongitude(x / MERCATOR_RADIUS) * R2D;
  const py = (Math.PI / 2 - 2 * Math.atan(Math.exp(-y / MERCATOR_RADIUS))) * R2D;
  if (!Number.isFinite(px) || !Number.isFinite(py)) {
    throw new OutsideProjection(`(${x}, ${y}) cannot be projected from EPSG:3857 to EPSG:4326.`);
  }
  return [px, py];
};

/** Projects pairs from one spatial reference to another; the identity when they are the same. */
export function projector(from: ResolvedReference, to: ResolvedReference): PointProjector {
  if (from.key === to.key) return (x, y) => [x, y];
  if (from.key === "EPSG:4326" && to.key === "EPSG:3857") return geographicToMercator;
  if (from.key === "EPSG:3857" && to.key === "EPSG:4326") return mercatorToGeographic;
  const converter = converterFor(from, to);
  return (x, y) => {
    // proj4 throws a TypeError for a coordinate that is not finite (an envelope of ±1e308 has
    // infinite spans): it is a point outside the projection like any other.
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      throw new OutsideProjection(`(${x}, ${y}) cannot be projected from ${from.key} to ${to.key}.`);
    }
    const out = converter.forward([x, y]);
    const px = out[0];
    const py = out[1];
    if (px === undefined || py === undefined || !Number.isFinite(px) || !Number.isFinite(py)) {
      throw new OutsideProjection(`(${x}, ${y}) cannot be projected from ${from.key} to ${to.key}.`);
    }
    return [px, py];
  };
}

function projectPosition(position: Position, project: PointProjector): Position {
  const [x, y] = project(position[0] as number, position[1] as number);
  const out = position.slice();
  out[0] = x;
  out[1] = y;
  return out;
}

/** Points along each edge of an envelope: a projected straight edge is generally curved. */
const ENVELOPE_EDGE_STEPS = 16;

function projectBounds(bounds: Bounds, project: PointProjector): Bounds {
  let xmin = Number.POSITIVE_INFINITY;
  let ymin = Number.POSITIVE_INFINITY;
  let xmax = Number.NEGATIVE_INFINITY;
  let ymax = Number.NEGATIVE_INFINITY;
  for (let i = 0; i <= ENVELOPE_EDGE_STEPS; i += 1) {
    const t = i / ENVELOPE_EDGE_STEPS;
    const x = bounds.xmin + (bounds.xmax - bounds.xmin) * t;
    const y = bounds.ymin + (bounds.ymax - bounds.ymin) * t;
    for (const [px, py] of [
      [x, bounds.ymin],
      [x, bounds.ymax],
      [bounds.xmin, y],
      [bounds.xmax, y],
    ] as const) {
      const [qx, qy] = project(px, py);
      if (qx < xmin) xmin = qx;
      if (qx > xmax) xmax = qx;
      if (qy < ymin) ymin = qy;
      if (qy > ymax) ymax = qy;
    }
  }
  return { xmin, ymin, xmax, ymax };
}

/**
 * Projects a geometry to another spatial reference, giving it that reference. An envelope is
 * projected as the box around its densified edges; one that crosses the antimeridian
 * (`xmin > xmax`) must be split with `envelopeParts` first, and is refused here.
 */
export function projectGeometry(
  geometry: Geometry,
  from: ResolvedReference,
  to: ResolvedReference,
): Result<Geometry> | { ok: false; error: ProjectionError } {
  const project = projector(from, to);
  const spatialReference = spatialReferenceOf(to);
  try {
    switch (geometry.type) {
      case "esriGeometryPoint": {
        const [x, y] = project(geometry.x, geometry.y);
        return { ok: true, value: { ...geometry, x, y, spatialReference } };
      }
      case "esriGeometryMultipoint":
        return {
          ok: true,
          value: {
            ...geometry,
            points: geometry.points.map((p) => projectPosition(p, project)),
            spatialReference,
          },
        };
      case "esriGeometryPolyline":
        return {
          ok: true,
          value: {
            ...geometry,
            paths: geometry.paths.map((path) => path.map((p) => projectPosition(p, project))),
            spatialReference,
          },
        };
      case "esriGeometryPolygon":
        return {
          ok: true,
          value: {
            ...geometry,
            rings: geometry.rings.map((ring) => ring.map((p) => projectPosition(p, project))),
            spatialReference,
          },
        };
      case "esriGeometryEnvelope": {
        if (geometry.xmin > geometry.xmax) {
          return {
            ok: false,
            error: {
              code: "invalidValue",
              message:
                "crosses the antimeridian (xmin > xmax); split it with envelopeParts before projecting.",
            } satisfies GeometryError,
          };
        }
        const box = projectBounds(clampLatitude(geometry, from), project);
        const envelope: EnvelopeGeometry = { ...geometry, ...box, spatialReference };
        return { ok: true, value: envelope };
      }
    }
  } catch (err) {
    if (err instanceof OutsideProjection) return failure("outsideProjection", err.message);
    throw err;
  }
}

/**
 * An envelope in longitude/latitude that runs past a pole covers the same ground as one that stops
 * at it (the Maps SDK sends such envelopes for tiles near the poles), so its latitudes are clipped
 * to ±90 before projecting. Mercator cannot project the poles themselves: such an envelope still
 * answers `outsideProjection`, which the caller may meet by clipping to the layer's extent.
 */
function clampLatitude(bounds: Bounds, from: ResolvedReference): Bounds {
  if (!from.geographic) return bounds;
  return { ...bounds, ymin: Math.max(bounds.ymin, -90), ymax: Math.min(bounds.ymax, 90) };
}
