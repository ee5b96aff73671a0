/**
 * Quantization of query answers: the `quantizationParameters` of a layer query, and the integer
 * grid that both `f=pbf` and `f=json` answers write geometries on. Pure: no HTTP, no database.
 *
 * What ArcGIS does, and what this module follows:
 * - Esri's Query (Feature Service/Layer) reference: `quantizationParameters = {extent, mode,
 *   originPosition, tolerance}`; the ArcGIS Maps SDK's QuantizationParameters documentation:
 *   "Geometry coordinates are converted to integers by building a grid with a resolution matching
 *   the tolerance. Each coordinate is then snapped to one pixel on the grid. Consecutive
 *   coordinates snapped to the same pixel are removed" (mode `view`).
 * - The answer carries `transform: {originPosition, scale: [tolerance, tolerance], translate:
 *   [xmin, ymax]}` (`[xmin, ymin]` for `lowerLeft`), and its geometries are delta-encoded, in JSON
 *   as in PBF: the first vertex of each path or ring is absolute, every following vertex is the
 *   difference from the one before it; a multipoint is one such chain; a point is absolute. An
 *   ArcGIS Server f=json answer quoted in "How to parse Esri geometry coordinates that look like
 *   relative values" (imathworks.com) shows both: `tolerance: 19` and an extent give `scale:
 *   [19, 19], translate: [xmin, ymax]`, and rings whose vertices after the first are `[1, 1]`,
 *   `[1, 0]`, `[-1, 1]`. The ArcGIS Maps SDK for JavaScript decodes JSON and PBF answers with the
 *   same function (`featureConversionUtils.unquantizeOptimizedGeometry`: `x += dx * scale[0]`,
 *   `y -= dy * scale[1]`, restarting at each part).
 * - In JSON only x and y are quantized; z and m stay as they are (the SDK copies them through).
 *   In PBF every coordinate is an integer, so z and m go on ArcGIS's default grid for them (below).
 * - Without `quantizationParameters` an f=pbf answer is still on a grid ("f=pbf always returns
 *   quantized coordinates, even if quantization parameters are not specified": Esri/arcgis-pbf
 *   issue #2). ArcGIS Online then uses the spatial reference's own grid: origin upper left,
 *   translate = the false origin of its XY domain, scale = its XY resolution; e.g. Web Mercator
 *   `scale 0.0001, translate (-20037700, -30241100)`, WGS 84 `scale 1e-9, translate (-400, -400)`,
 *   z and m `scale 0.0001, translate -100000` (answers recorded in arcgis-rest-js's test mocks).
 */
import {
  type MultipointGeometry,
  type PointGeometry,
  type PolygonGeometry,
  type PolylineGeometry,
  type Position,
  parseSpatialReference,
  type SpatialReference,
} from "../geometry/esri-json.js";

export type OriginPosition = "upperLeft" | "lowerLeft";
export type QuantizationMode = "view" | "edit";

export interface QuantizationParameters {
  extent: { xmin: number; ymin: number; xmax: number; ymax: number; spatialReference?: SpatialReference };
  mode: QuantizationMode;
  originPosition: OriginPosition;
  /** The size of one grid cell, in the units of the answer's spatial reference. */
  tolerance: number;
}

/** The geometries a query answer carries. */
export type QuantizableGeometry = PointGeometry | MultipointGeometry | PolylineGeometry | PolygonGeometry;

/**
 * Reads `quantizationParameters` (the JSON text or the parsed value). `mode` defaults to `view` and
 * `originPosition` to `upperLeft`, as in Esri's documentation; `extent` and `tolerance` are
 * required. `reason` is a sentence fragment that does not name the parameter.
 */
export function parseQuantizationParameters(
  input: unknown,
): { ok: true; value: QuantizationParameters } | { ok: false; reason: string } {
  let value = input;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return { ok: false, reason: "is not valid JSON" };
    }
  }
  if (!isRecord(value)) return { ok: false, reason: "must be a JSON object" };

  const extent = value.extent;
  if (extent === undefined || extent === null) return { ok: false, reason: "must have an extent" };
  if (!isRecord(extent)) return { ok: false, reason: "extent must be an object" };
  const bounds = { xmin: 0, ymin: 0, xmax: 0, ymax: 0 };
  for (const key of ["xmin", "ymin", "xmax", "ymax"] as const) {
    const n = extent[key];
    if (typeof n !== "number" || !Number.isFinite(n)) {
      return { ok: false, reason: `extent.${key} must be a finite number` };
    }
    bounds[key] = n;
  }
  if (bounds.xmin > bounds.xmax) return { ok: false, reason: "extent.xmin is greater than extent.xmax" };
  if (bounds.ymin > bounds.ymax) return { ok: false, reason: "extent.ymin is greater than extent.ymax" };
  let spatialReference: SpatialReference | undefined;
  if (extent.spatialReference !== undefined && extent.spatialReference !== null) {
    const parsed = parseSpatialReference(extent.spatialReference, undefined, "extent.spatialReference");
    if (!parsed.ok) return { ok: false, reason: withoutFinalStop(parsed.error.message) };
    spatialReference = parsed.value;
  }

  let mode: QuantizationMode = "view";
  if (value.mode !== undefined && value.mode !== null) {
    if (value.mode !== "view" && value.mode !== "edit") {
      return { ok: false, reason: `mode must be "view" or "edit" (got ${describe(value.mode)})` };
    }
    mode = value.mode;
  }

  let originPosition: OriginPosition = "upperLeft";
  if (value.originPosition !== undefined && value.originPosition !== null) {
    const origin = value.originPosition;
    // "bottomLeft" is not in Esri's documentation (upperLeft | lowerLeft); it is taken as
    // lowerLeft because that is the only thing it can mean.
    if (origin === "upperLeft") originPosition = "upperLeft";
    else if (origin === "lowerLeft" || origin === "bottomLeft") originPosition = "lowerLeft";
    else {
      return {
        ok: false,
        reason: `originPosition must be "upperLeft" or "lowerLeft" (got ${describe(origin)})`,
      };
    }
  }

  const tolerance = value.tolerance;
  if (tolerance === undefined || tolerance === null) return { ok: false, reason: "must have a tolerance" };
  if (typeof tolerance !== "number" || !Number.isFinite(tolerance) || tolerance <= 0) {
    return { ok: false, reason: `tolerance must be a positive number (got ${describe(tolerance)})` };
  }

  return {
    ok: true,
    value: {
      extent: spatialReference ? { ...bounds, spatialReference } : bounds,
      mode,
      originPosition,
      tolerance,
    },
  };
}

/** The `transform` of a quantized f=json answer. */
export function transformJson(q: QuantizationParameters): {
  originPosition: OriginPosition;
  scale: [number, number];
  translate: [number, number];
} {
  const grid = gridOf(q);
  return {
    originPosition: grid.originPosition,
    scale: [grid.scaleX, grid.scaleY],
    translate: [grid.translateX, grid.translateY],
  };
}

/** An integer grid: `x' = round((x - translateX) / scaleX)`, y likewise, downwards for upperLeft. */
export interface QuantizationGrid {
  originPosition: OriginPosition;
  scaleX: number;
  scaleY: number;
  translateX: number;
  translateY: number;
  /** Mode `view`: consecutive vertices on the same cell are dropped, and parts left too short. */
  dropRepeats: boolean;
}

export function gridOf(q: QuantizationParameters): QuantizationGrid {
  const upperLeft = q.originPosition === "upperLeft";
  return {
    originPosition: q.originPosition,
    scaleX: q.tolerance,
    scaleY: q.tolerance,
    translateX: q.extent.xmin,
    translateY: upperLeft ? q.extent.ymax : q.extent.ymin,
    dropRepeats: q.mode === "view",
  };
}

/** ArcGIS's XY resolution and false origin for Web Mercator (and, here, any projected system). */
const PROJECTED_RESOLUTION_METERS = 0.0001;
const PROJECTED_FALSE_ORIGIN = [-20037700, -30241100] as const;
/** ArcGIS's XY resolution and false origin for geographic systems, in degrees. */
const GEOGRAPHIC_RESOLUTION = 1e-9;
const GEOGRAPHIC_FALSE_ORIGIN = [-400, -400] as const;

/**
 * The grid of an f=pbf answer without `quantizationParameters`: ArcGIS's default precision grid of
 * the answer's spatial reference. Geographic systems get 1e-9 degree; projected ones 0.0001 m in
 * their own unit (0.000328 ft for a foot-based system). ArcGIS's false origin differs between
 * projected systems; the one of Web Mercator is used for all of them, which changes nothing but
 * the size of the first integer of each part (|x - origin| / 0.0001 stays far below 2^53).
 */
export function defaultGrid(system: { geographic: boolean; metersPerUnit?: number }): QuantizationGrid {
  const geographic = system.geographic;
  const scale = geographic
    ? GEOGRAPHIC_RESOLUTION
    : PROJECTED_RESOLUTION_METERS / (system.metersPerUnit ?? 1);
  const origin = geographic ? GEOGRAPHIC_FALSE_ORIGIN : PROJECTED_FALSE_ORIGIN;
  return {
    // The false origin is the lower left corner of the XY domain, yet ArcGIS labels this grid
    // upperLeft (y grows downwards, so every y is a negative integer): kept as ArcGIS writes it.
    originPosition: "upperLeft",
    scaleX: scale,
    scaleY: scale,
    translateX: origin[0],
    translateY: origin[1],
    dropRepeats: false,
  };
}

/** ArcGIS's default grid for z and m values in f=pbf answers: 0.0001 units above -100000. */
export const ZM_SCALE = 0.0001;
export const ZM_TRANSLATE = -100000;

/**
 * A coordinate more steps from the grid's origin than an integer holds exactly (a tolerance of
 * 1e-300, or a stored coordinate of 1e300): neither JSON nor a protocol buffer varint can carry it.
 */
export class QuantizationOverflow extends Error {
  constructor(readonly value: number) {
    super(`${value} is beyond the integer range of the quantization grid`);
  }
}

function onGrid(steps: number, value: number): number {
  if (!Number.isSafeInteger(steps)) throw new QuantizationOverflow(value);
  // Math.round gives -0 for values in (-0.5, 0); adding 0 makes it 0, so that no "-0" reaches an
  // answer or a comparison.
  return steps + 0;
}

export function quantizeX(grid: QuantizationGrid, x: number): number {
  return onGrid(Math.round((x - grid.translateX) / grid.scaleX), x);
}

export function quantizeY(grid: QuantizationGrid, y: number): number {
  const steps = grid.originPosition === "upperLeft" ? grid.translateY - y : y - grid.translateY;
  return onGrid(Math.round(steps / grid.scaleY), y);
}

/** A z or m value on the PBF grid; a missing or NaN m is written 0, as ArcGIS does. */
export function quantizeZM(value: number | undefined): number {
  if (value === undefined || Number.isNaN(value)) return 0;
  return onGrid(Math.round((value - ZM_TRANSLATE) / ZM_SCALE), value);
}

/**
 * The fewest vertices a part keeps in view mode: a path needs two, a ring four (three corners and
 * the closing vertex), a multipoint one. A part left shorter is dropped whole.
 */
export function minimumVertices(type: QuantizableGeometry["type"]): number {
  switch (type) {
    case "esriGeometryPolyline":
      return 2;
    case "esriGeometryPolygon":
      return 4;
    default:
      return 1;
  }
}

/**
 * The quantized parts of one geometry, absolute integers: `xs[i], ys[i]` is vertex `i` (over all
 * kept parts), `sources[i]` the position it came from (for its z and m), `lengths` the vertex
 * count of each kept part. Filled by `quantizeParts`; one instance is reused for every feature of
 * an answer, so encoding thousands of features allocates no arrays per feature.
 */
export class QuantizedParts {
  xs: number[] = [];
  ys: number[] = [];
  sources: Position[] = [];
  lengths: number[] = [];
  /** The vertex count over all kept parts. */
  count = 0;
  partCount = 0;
}

export function quantizeParts(
  parts: readonly (readonly Position[])[],
  grid: QuantizationGrid,
  minVertices: number,
  out: QuantizedParts,
): void {
  const { xs, ys, sources, lengths } = out;
  let count = 0;
  let partCount = 0;
  for (const part of parts) {
    const start = count;
    let lastX = 0;
    let lastY = 0;
    for (const position of part) {
      const x = quantizeX(grid, position[0] as number);
      const y = quantizeY(grid, position[1] as number);
      if (grid.dropRepeats && count > start && x === lastX && y === lastY) continue;
      xs[count] = x;
      ys[count] = y;
      sources[count] = position;
      count++;
      lastX = x;
      lastY = y;
    }
    const kept = count - start;
    if (kept === 0 || (grid.dropRepeats && kept < minVertices)) {
      count = start;
      continue;
    }
    lengths[partCount++] = kept;
  }
  out.count = count;
  out.partCount = partCount;
}

/**
 * A geometry as a quantized f=json answer writes it: x and y as integers on the grid, delta-encoded
 * after the first vertex of each part (a multipoint is one chain), z and m unchanged. Null when
 * view mode leaves nothing of it. Pass one `scratch` for all the features of an answer.
 */
export function quantizeGeometry<G extends QuantizableGeometry>(
  geometry: G,
  grid: QuantizationGrid,
  scratch: QuantizedParts = new QuantizedParts(),
): G | null {
  if (geometry.type === "esriGeometryPoint") {
    return { ...geometry, x: quantizeX(grid, geometry.x), y: quantizeY(grid, geometry.y) };
  }
  const parts =
    geometry.type === "esriGeometryMultipoint"
      ? [geometry.points]
      : geometry.type === "esriGeometryPolyline"
        ? geometry.paths
        : geometry.rings;
  const out = scratch;
  quantizeParts(parts, grid, minimumVertices(geometry.type), out);
  if (out.partCount === 0) return null;
  const nested: Position[][] = [];
  let i = 0;
  for (let p = 0; p < out.partCount; p++) {
    const length = out.lengths[p] as number;
    const part: Position[] = [];
    for (let v = 0; v < length; v++, i++) {
      const x = out.xs[i] as number;
      const y = out.ys[i] as number;
      const position = [
        v === 0 ? x : x - (out.xs[i - 1] as number),
        v === 0 ? y : y - (out.ys[i - 1] as number),
      ];
      const source = out.sources[i] as Position;
      for (let k = 2; k < source.length; k++) position.push(source[k] as number);
      part.push(position);
    }
    nested.push(part);
  }
  switch (geometry.type) {
    case "esriGeometryMultipoint":
      return { ...geometry, points: nested[0] as Position[] };
    case "esriGeometryPolyline":
      return { ...geometry, paths: nested };
    default:
      return { ...geometry, rings: nested };
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

function withoutFinalStop(message: string): string {
  return message.endsWith(".") ? message.slice(0, -1) : message;
}
