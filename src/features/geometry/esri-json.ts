/**
 * Esri JSON geometries: parsing, validation, the simple query syntaxes, a check against a layer's
 * geometry type, and the envelope of a geometry. Pure: no HTTP, no database. Every failure is a
 * typed result whose message says what is wrong and where (`rings[2][5]`); the caller names the
 * parameter (`geometry`, `adds[3].geometry`) and maps it to a 400.
 *
 * Positions are kept as arrays laid out as the Esri JSON of the geometry declares them:
 * `[x, y]`, then `z` when `hasZ`, then `m` when `hasM`. Rings and paths are kept as given (a polygon
 * with holes stays a list of rings; orientation is the caller's business), except that an
 * unclosed ring is closed by repeating its first position, as ArcGIS does.
 */

export type GeometryType =
  | "esriGeometryPoint"
  | "esriGeometryMultipoint"
  | "esriGeometryPolyline"
  | "esriGeometryPolygon"
  | "esriGeometryEnvelope";

export const GEOMETRY_TYPES: readonly GeometryType[] = [
  "esriGeometryPoint",
  "esriGeometryMultipoint",
  "esriGeometryPolyline",
  "esriGeometryPolygon",
  "esriGeometryEnvelope",
];

/** `{wkid, latestWkid}` or `{wkt}`, as Esri JSON writes a spatial reference. */
export interface SpatialReference {
  wkid?: number;
  latestWkid?: number;
  wkt?: string;
}

/** `[x, y]`, then `z` when the geometry has Z, then `m` when it has M. */
export type Position = number[];

interface GeometryBase {
  hasZ: boolean;
  hasM: boolean;
  spatialReference?: SpatialReference;
}

export interface PointGeometry extends GeometryBase {
  type: "esriGeometryPoint";
  x: number;
  y: number;
  z?: number;
  m?: number;
}

export interface MultipointGeometry extends GeometryBase {
  type: "esriGeometryMultipoint";
  points: Position[];
}

export interface PolylineGeometry extends GeometryBase {
  type: "esriGeometryPolyline";
  paths: Position[][];
}

export interface PolygonGeometry extends GeometryBase {
  type: "esriGeometryPolygon";
  rings: Position[][];
}

/**
 * An axis-aligned box. `xmin > xmax` is kept as given: in a spatial reference that wraps (longitude,
 * Web Mercator) it is a box that crosses the antimeridian; `envelopeParts` splits it, and it is an
 * error anywhere else. Nothing "fixes" it silently by swapping the bounds.
 */
export interface EnvelopeGeometry extends GeometryBase {
  type: "esriGeometryEnvelope";
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
  zmin?: number;
  zmax?: number;
  mmin?: number;
  mmax?: number;
}

export type Geometry =
  | PointGeometry
  | MultipointGeometry
  | PolylineGeometry
  | PolygonGeometry
  | EnvelopeGeometry;

/** A plain box, used for extents and spatial-index lookups. */
export interface Bounds {
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
}

export type GeometryErrorCode =
  | "invalidJson"
  | "invalidSyntax"
  | "unknownShape"
  | "invalidValue"
  | "emptyGeometry"
  | "tooManyVertices"
  | "tooManyParts"
  | "typeMismatch"
  | "invalidSpatialReference"
  | "crossesWithoutWrap";

export interface GeometryError {
  code: GeometryErrorCode;
  /** What is wrong and where, without the parameter's name: the caller adds it. */
  message: string;
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: GeometryError };

export interface GeometryLimits {
  /** Positions in one geometry, over all its parts. */
  maxVertices: number;
  /** Paths, rings or multipoint points in one geometry. */
  maxParts: number;
  /** Characters of a `wkt` spatial reference. */
  maxWktLength: number;
}

/**
 * Large enough for detailed country outlines (Natural Earth's most detailed Russia has ~100,000
 * vertices); small enough that one request cannot make the process build millions of arrays.
 */
export const DEFAULT_GEOMETRY_LIMITS: GeometryLimits = {
  maxVertices: 250_000,
  maxParts: 10_000,
  maxWktLength: 10_000,
};

const fail = (code: GeometryErrorCode, message: string): { ok: false; error: GeometryError } => ({
  ok: false,
  error: { code, message },
});

class GeometryParseError extends Error {
  constructor(readonly error: GeometryError) {
    super(error.message);
  }
}

function raise(code: GeometryErrorCode, message: string): never {
  throw new GeometryParseError({ code, message });
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

function finite(value: unknown, where: string): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    raise("invalidValue", `${where} must be a finite number (got ${describe(value)}).`);
  }
  return value;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `"${value.length > 20 ? `${value.slice(0, 20)}…` : value}"`;
  if (typeof value === "object") return "an object";
  return String(value);
}

function flag(value: unknown, name: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean")
    raise("invalidValue", `${name} must be true or false (got ${describe(value)}).`);
  return value;
}

/** Checks `spatialReference` when present: a positive integer wkid/latestWkid, or a bounded wkt. */
export function parseSpatialReference(
  value: unknown,
  limits: GeometryLimits = DEFAULT_GEOMETRY_LIMITS,
  where = "spatialReference",
): Result<SpatialReference> {
  try {
    return { ok: true, value: readSpatialReference(value, limits, where) };
  } catch (err) {
    if (err instanceof GeometryParseError) return { ok: false, error: err.error };
    throw err;
  }
}

function readSpatialReference(value: unknown, limits: GeometryLimits, where: string): SpatialReference {
  if (!isRecord(value)) raise("invalidSpatialReference", `${where} must be an object with wkid or wkt.`);
  const out: SpatialReference = {};
  for (const key of ["wkid", "latestWkid"] as const) {
    const id = value[key];
    if (id === undefined || id === null) continue;
    if (typeof id !== "number" || !Number.isSafeInteger(id) || id <= 0) {
      raise("invalidSpatialReference", `${where}.${key} must be a positive integer (got ${describe(id)}).`);
    }
    out[key] = id;
  }
  if (value.wkt !== undefined && value.wkt !== null) {
    if (typeof value.wkt !== "string" || value.wkt.trim() === "") {
      raise("invalidSpatialReference", `${where}.wkt must be a non-empty string.`);
    }
    if (value.wkt.length > limits.maxWktLength) {
      raise("invalidSpatialReference", `${where}.wkt is longer than ${limits.maxWktLength} characters.`);
    }
    out.wkt = value.wkt;
  }
  if (out.wkid === undefined && out.latestWkid === undefined && out.wkt === undefined) {
    raise("invalidSpatialReference", `${where} has neither wkid, latestWkid nor wkt.`);
  }
  return out;
}

/** Counts vertices and parts as they are read, so an oversized geometry is refused early. */
class Budget {
  private vertices = 0;
  private parts = 0;
  constructor(private readonly limits: GeometryLimits) {}
  part(where: string): void {
    this.parts += 1;
    if (this.parts > this.limits.maxParts) {
      raise("tooManyParts", `${where} is past the limit of ${this.limits.maxParts} parts per geometry.`);
    }
  }
  vertex(where: string): void {
    this.vertices += 1;
    if (this.vertices > this.limits.maxVertices) {
      raise(
        "tooManyVertices",
        `${where} is past the limit of ${this.limits.maxVertices} vertices per geometry.`,
      );
    }
  }
}

function readPosition(value: unknown, where: string, hasZ: boolean, hasM: boolean, budget: Budget): Position {
  budget.vertex(where);
  if (!Array.isArray(value)) raise("invalidValue", `${where} must be an array of coordinates.`);
  const needed = 2 + (hasZ ? 1 : 0) + (hasM ? 1 : 0);
  if (value.length < needed) {
    const layout = ["x", "y", ...(hasZ ? ["z"] : []), ...(hasM ? ["m"] : [])].join(", ");
    raise("invalidValue", `${where} has ${value.length} values; expected [${layout}].`);
  }
  if (value.length > 4) raise("invalidValue", `${where} has ${value.length} values; at most 4 (x, y, z, m).`);
  // Values past the declared layout are dropped, as ArcGIS does: [x, y, v] without hasZ/hasM does
  // not say whether v is a Z or an M.
  const position: Position = [];
  for (let i = 0; i < needed; i += 1) position.push(finite(value[i], `${where}[${i}]`));
  return position;
}

function readPositions(
  value: unknown,
  where: string,
  hasZ: boolean,
  hasM: boolean,
  budget: Budget,
  minimum: number,
  what: string,
): Position[] {
  if (!Array.isArray(value)) raise("invalidValue", `${where} must be an array of positions.`);
  const positions = value.map((item, i) => readPosition(item, `${where}[${i}]`, hasZ, hasM, budget));
  if (positions.length < minimum) {
    raise("invalidValue", `${where} has ${positions.length} positions; a ${what} needs at least ${minimum}.`);
  }
  return positions;
}

const samePosition = (a: Position, b: Position): boolean =>
  a.length === b.length && a.every((v, i) => v === b[i]);

/** Whether a ring has at least three distinct positions; stops as soon as it finds them. */
function hasThreeDistinct(ring: Position[]): boolean {
  const found: Position[] = [];
  for (const position of ring) {
    if (!found.some((other) => samePosition(other, position))) found.push(position);
    if (found.length === 3) return true;
  }
  return false;
}

function readParts(
  value: unknown,
  key: "paths" | "rings",
  hasZ: boolean,
  hasM: boolean,
  budget: Budget,
): Position[][] {
  if (!Array.isArray(value)) raise("invalidValue", `${key} must be an array.`);
  if (value.length === 0) raise("emptyGeometry", `${key} is empty.`);
  return value.map((part, i) => {
    const where = `${key}[${i}]`;
    budget.part(where);
    if (key === "paths") return readPositions(part, where, hasZ, hasM, budget, 2, "path");
    const ring = readPositions(part, where, hasZ, hasM, budget, 3, "ring");
    const first = ring[0] as Position;
    if (!samePosition(first, ring[ring.length - 1] as Position)) {
      budget.vertex(where);
      ring.push([...first]);
    }
    if (!hasThreeDistinct(ring)) {
      raise("invalidValue", `${where} has fewer than 3 distinct positions; a ring needs at least 3.`);
    }
    return ring;
  });
}

/** The geometry type that an Esri JSON object's members imply. */
function shapeOf(value: Record<string, unknown>): GeometryType | undefined {
  if ("rings" in value) return "esriGeometryPolygon";
  if ("paths" in value) return "esriGeometryPolyline";
  if ("points" in value) return "esriGeometryMultipoint";
  if ("xmin" in value) return "esriGeometryEnvelope";
  if ("x" in value) return "esriGeometryPoint";
  return undefined;
}

function readGeometry(value: unknown, declared: GeometryType | undefined, limits: GeometryLimits): Geometry {
  if (!isRecord(value)) raise("invalidValue", "must be an Esri JSON geometry object.");
  const shape = shapeOf(value);
  if (shape === undefined) {
    raise("unknownShape", "has none of x, points, paths, rings or xmin; it is not an Esri JSON geometry.");
  }
  if (declared !== undefined && declared !== shape) {
    raise("typeMismatch", `is a ${nameOf(shape)} but the geometry type is ${declared}.`);
  }
  const base: GeometryBase = { hasZ: flag(value.hasZ, "hasZ"), hasM: flag(value.hasM, "hasM") };
  if (value.spatialReference !== undefined && value.spatialReference !== null) {
    base.spatialReference = readSpatialReference(value.spatialReference, limits, "spatialReference");
  }
  const budget = new Budget(limits);
  switch (shape) {
    case "esriGeometryPoint": {
      if (value.x === null || value.x === "NaN") raise("emptyGeometry", "is an empty point (x is null).");
      budget.vertex("point");
      const point: PointGeometry = { type: shape, ...base, x: finite(value.x, "x"), y: finite(value.y, "y") };
      // A point declares Z and M by carrying them; hasZ/hasM are optional on points.
      if (value.z !== undefined && value.z !== null) {
        point.z = finite(value.z, "z");
        point.hasZ = true;
      } else if (point.hasZ) raise("invalidValue", "has hasZ true but no z.");
      if (value.m !== undefined && value.m !== null) {
        point.m = finite(value.m, "m");
        point.hasM = true;
      } else if (point.hasM) raise("invalidValue", "has hasM true but no m.");
      return point;
    }
    case "esriGeometryMultipoint": {
      if (!Array.isArray(value.points)) raise("invalidValue", "points must be an array.");
      if (value.points.length > limits.maxParts) {
        raise(
          "tooManyParts",
          `has ${value.points.length} points, past the limit of ${limits.maxParts} parts.`,
        );
      }
      const points = readPositions(value.points, "points", base.hasZ, base.hasM, budget, 1, "multipoint");
      return { type: shape, ...base, points };
    }
    case "esriGeometryPolyline":
      return { type: shape, ...base, paths: readParts(value.paths, "paths", base.hasZ, base.hasM, budget) };
    case "esriGeometryPolygon":
      return { type: shape, ...base, rings: readParts(value.rings, "rings", base.hasZ, base.hasM, budget) };
    case "esriGeometryEnvelope": {
      const envelope: EnvelopeGeometry = {
        type: shape,
        ...base,
        xmin: finite(value.xmin, "xmin"),
        ymin: finite(value.ymin, "ymin"),
        xmax: finite(value.xmax, "xmax"),
        ymax: finite(value.ymax, "ymax"),
      };
      if (envelope.ymin > envelope.ymax) {
        raise("invalidValue", `ymin (${envelope.ymin}) is greater than ymax (${envelope.ymax}).`);
      }
      for (const [lo, hi, has] of [
        ["zmin", "zmax", "hasZ"],
        ["mmin", "mmax", "hasM"],
      ] as const) {
        if (value[lo] === undefined || value[lo] === null) continue;
        envelope[lo] = finite(value[lo], lo);
        envelope[hi] = finite(value[hi], hi);
        envelope[has] = true;
      }
      return envelope;
    }
  }
}

const nameOf = (type: GeometryType): string => type.slice("esriGeometry".length).toLowerCase();

/**
 * Reads an Esri JSON geometry that has already been decoded from JSON (an `adds[].geometry`, or the
 * object of a `geometry` parameter). With `declared`, the geometry must be of that type.
 */
export function parseEsriGeometry(
  value: unknown,
  options: { declared?: GeometryType; limits?: GeometryLimits } = {},
): Result<Geometry> {
  try {
    return {
      ok: true,
      value: readGeometry(value, options.declared, options.limits ?? DEFAULT_GEOMETRY_LIMITS),
    };
  } catch (err) {
    if (err instanceof GeometryParseError) return { ok: false, error: err.error };
    throw err;
  }
}

/** Reads a `geometryType` parameter; absent means an envelope, as the ArcGIS REST API documents. */
export function parseGeometryType(value: string | undefined): Result<GeometryType> {
  if (value === undefined || value.trim() === "") return { ok: true, value: "esriGeometryEnvelope" };
  const found = GEOMETRY_TYPES.find((type) => type.toLowerCase() === value.trim().toLowerCase());
  return found
    ? { ok: true, value: found }
    : fail("invalidValue", `'${value}' is not one of ${GEOMETRY_TYPES.join(", ")}.`);
}

const SIMPLE_NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * Reads the text of a query's `geometry` parameter: Esri JSON, or the simple syntaxes ArcGIS accepts
 * (`x,y` for a point, `xmin,ymin,xmax,ymax` for an envelope). `geometryType` is the query's
 * parameter as given (absent means envelope for the simple syntax); for Esri JSON without a
 * `geometryType`, the members decide, and with one they must agree with it.
 */
export function parseGeometryParam(
  text: string,
  geometryType: string | undefined,
  limits: GeometryLimits = DEFAULT_GEOMETRY_LIMITS,
): Result<Geometry> {
  const trimmed = text.trim();
  if (trimmed === "") return fail("emptyGeometry", "is empty.");
  const explicit = geometryType !== undefined && geometryType.trim() !== "";
  const type = parseGeometryType(geometryType);
  if (!type.ok) return type;
  if (trimmed.startsWith("{")) {
    let decoded: unknown;
    try {
      decoded = JSON.parse(trimmed);
    } catch (err) {
      return fail("invalidJson", `is not valid JSON: ${(err as Error).message}.`);
    }
    return parseEsriGeometry(decoded, { ...(explicit ? { declared: type.value } : {}), limits });
  }
  const values = trimmed.split(",").map((part) => part.trim());
  if (!values.every((part) => SIMPLE_NUMBER.test(part))) {
    return fail("invalidSyntax", "must be Esri JSON, 'x,y' or 'xmin,ymin,xmax,ymax' with plain numbers.");
  }
  const numbers = values.map(Number);
  if (!numbers.every(Number.isFinite)) return fail("invalidValue", "has a number out of range.");
  if (numbers.length === 2) {
    if (explicit && type.value !== "esriGeometryPoint") {
      return fail("typeMismatch", `'x,y' is a point but the geometry type is ${type.value}.`);
    }
    const [x, y] = numbers as [number, number];
    return { ok: true, value: { type: "esriGeometryPoint", hasZ: false, hasM: false, x, y } };
  }
  if (numbers.length === 4) {
    if (type.value !== "esriGeometryEnvelope") {
      return fail(
        "typeMismatch",
        `'xmin,ymin,xmax,ymax' is an envelope but the geometry type is ${type.value}.`,
      );
    }
    const [xmin, ymin, xmax, ymax] = numbers as [number, number, number, number];
    return parseEsriGeometry({ xmin, ymin, xmax, ymax }, { declared: "esriGeometryEnvelope", limits });
  }
  return fail(
    "invalidSyntax",
    `has ${numbers.length} numbers; 'x,y' (point) or 'xmin,ymin,xmax,ymax' (envelope).`,
  );
}

/**
 * Checks a feature's geometry against its layer's `geometryType` and Z/M. A layer without Z accepts
 * no Z (ArcGIS drops it silently; refusing says what would be lost), and a layer with Z or M needs
 * them on every geometry.
 */
export function checkAgainstLayer(
  geometry: Geometry,
  layer: { geometryType: GeometryType; hasZ?: boolean; hasM?: boolean },
): Result<Geometry> {
  if (geometry.type !== layer.geometryType) {
    return fail("typeMismatch", `is a ${nameOf(geometry.type)} but the layer holds ${layer.geometryType}.`);
  }
  for (const [dimension, has, wants] of [
    ["Z", geometry.hasZ, layer.hasZ ?? false],
    ["M", geometry.hasM, layer.hasM ?? false],
  ] as const) {
    if (has && !wants)
      return fail("typeMismatch", `has ${dimension} values but the layer has no ${dimension}.`);
    if (!has && wants) return fail("typeMismatch", `has no ${dimension} values but the layer needs them.`);
  }
  return { ok: true, value: geometry };
}

/** Every position of a geometry, in order (an envelope gives its two corners). */
export function* positionsOf(geometry: Geometry): Generator<Position> {
  switch (geometry.type) {
    case "esriGeometryPoint":
      yield [geometry.x, geometry.y];
      return;
    case "esriGeometryMultipoint":
      yield* geometry.points;
      return;
    case "esriGeometryPolyline":
      for (const path of geometry.paths) yield* path;
      return;
    case "esriGeometryPolygon":
      for (const ring of geometry.rings) yield* ring;
      return;
    case "esriGeometryEnvelope":
      yield [geometry.xmin, geometry.ymin];
      yield [geometry.xmax, geometry.ymax];
      return;
  }
}

/**
 * The bounding box of a geometry. An envelope is returned as it is, so one that crosses the
 * antimeridian (`xmin > xmax`) stays so; every other geometry gives the plain box of its
 * coordinates (a path that steps from 179 to -179 spans the globe: Esri JSON coordinates do not
 * wrap).
 */
export function boundsOf(geometry: Geometry): Bounds {
  if (geometry.type === "esriGeometryEnvelope") {
    const { xmin, ymin, xmax, ymax } = geometry;
    return { xmin, ymin, xmax, ymax };
  }
  let xmin = Number.POSITIVE_INFINITY;
  let ymin = Number.POSITIVE_INFINITY;
  let xmax = Number.NEGATIVE_INFINITY;
  let ymax = Number.NEGATIVE_INFINITY;
  for (const position of positionsOf(geometry)) {
    const x = position[0] as number;
    const y = position[1] as number;
    if (x < xmin) xmin = x;
    if (x > xmax) xmax = x;
    if (y < ymin) ymin = y;
    if (y > ymax) ymax = y;
  }
  return { xmin, ymin, xmax, ymax };
}

/**
 * The parts of an envelope that do not cross the antimeridian. `wrap` is the x range of a spatial
 * reference that wraps (longitude: [-180, 180]; Web Mercator: ±20037508.34); without it an
 * envelope with `xmin > xmax` is an error. With it, such an envelope means the box from xmin east
 * across the antimeridian to xmax, and is split into [xmin, east edge] and [west edge, xmax].
 */
export function envelopeParts(envelope: Bounds, wrap?: readonly [number, number]): Result<Bounds[]> {
  if (envelope.xmin <= envelope.xmax) return { ok: true, value: [{ ...envelope }] };
  if (!wrap) {
    return fail(
      "crossesWithoutWrap",
      `has xmin (${envelope.xmin}) greater than xmax (${envelope.xmax}) in a spatial reference that does not wrap.`,
    );
  }
  const [west, east] = wrap;
  if (envelope.xmin > east || envelope.xmax < west) {
    return fail(
      "invalidValue",
      `crosses the antimeridian but xmin (${envelope.xmin}) or xmax (${envelope.xmax}) is outside [${west}, ${east}].`,
    );
  }
  return {
    ok: true,
    value: [
      { ...envelope, xmax: east },
      { ...envelope, xmin: west },
    ],
  };
}
