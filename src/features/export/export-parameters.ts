import type { SpatialReference } from "../geometry/esri-json.js";

/**
 * The parameters of `content/users/<u>/export`, read and checked before anything is written. What
 * portico writes: GeoJSON, CSV (a zip of one CSV per layer when several are exported, as ArcGIS
 * does: a "CSV Collection"), Shapefile (a zip of one shapefile per layer) and Feature Collection
 * (the ArcGIS JSON of a feature collection item). ArcGIS's other formats are refused by name.
 */

export type ExportFormat = "GeoJson" | "CSV" | "Shapefile" | "Feature Collection";

/** The formats portico writes, as ArcGIS spells them. */
export const EXPORT_FORMATS: readonly ExportFormat[] = ["GeoJson", "CSV", "Shapefile", "Feature Collection"];

/** ArcGIS's formats portico does not write (no library here writes them). */
const UNSUPPORTED_FORMATS = ["File Geodatabase", "Scene Package", "KML", "Excel", "Vector Tile Package"];

export type ReadResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/** `exportFormat`, in any case; an unsupported or unknown one is refused with the supported list. */
export function readExportFormat(raw: string): ReadResult<ExportFormat> {
  const text = raw.trim().toLowerCase();
  const found = EXPORT_FORMATS.find((f) => f.toLowerCase() === text);
  if (found) return { ok: true, value: found };
  const supported = `portico exports ${EXPORT_FORMATS.join(", ")}`;
  const known = UNSUPPORTED_FORMATS.find((f) => f.toLowerCase() === text);
  if (known) return { ok: false, reason: `'${known}' is not supported: ${supported}` };
  return { ok: false, reason: `'${raw.slice(0, 64)}' is not an export format: ${supported}` };
}

/** One layer to export, as `exportParameters.layers` describes it. */
export interface ExportLayerInfo {
  id: number;
  /** Empty for every feature. */
  where: string;
  includeGeometry: boolean;
  /** CSV only: the columns of a point's coordinates. */
  xColumnName: string;
  yColumnName: string;
}

export interface ExportParameters {
  /** Undefined: every layer and table of the service, each whole. */
  layers?: ExportLayerInfo[];
  targetSR?: SpatialReference;
}

/** Most layers one export names (a service's layers and tables together are far fewer). */
export const MAX_EXPORT_LAYERS = 100;
/** Longest `where` an export layer takes: the query's own limit applies after this. */
const MAX_WHERE = 32_000;
const COLUMN_NAME = /^[A-Za-z_][A-Za-z0-9_ ]{0,63}$/;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `exportParameters` as JSON: `{"layers": [{"id": 0, "where": "…", "includeGeometry": true,
 * "xColumnName": "x", "yColumnName": "y"}], "targetSR": {"wkid": 4326}}`. `targetSR` is a wkid or
 * a spatial reference object; whether it can be projected to is checked where it is used.
 */
export function readExportParameters(decoded: unknown): ReadResult<ExportParameters> {
  if (decoded === undefined || decoded === null) return { ok: true, value: {} };
  if (!isObject(decoded)) return { ok: false, reason: 'must be a JSON object, as {"layers": [{"id": 0}]}' };
  const out: ExportParameters = {};
  if (decoded.layers !== undefined && decoded.layers !== null) {
    const list = Array.isArray(decoded.layers) ? decoded.layers : [decoded.layers];
    if (list.length === 0 || list.length > MAX_EXPORT_LAYERS) {
      return { ok: false, reason: `must name 1 to ${MAX_EXPORT_LAYERS} layers in 'layers'` };
    }
    const seen = new Set<number>();
    const layers: ExportLayerInfo[] = [];
    for (const [i, entry] of list.entries()) {
      if (!isObject(entry)) return { ok: false, reason: `has layers[${i}] that is not an object with an id` };
      const id = typeof entry.id === "string" && /^\d{1,9}$/.test(entry.id) ? Number(entry.id) : entry.id;
      if (typeof id !== "number" || !Number.isSafeInteger(id) || id < 0) {
        return { ok: false, reason: `has layers[${i}] without a layer id ('id': a whole number)` };
      }
      if (seen.has(id)) return { ok: false, reason: `names layer ${id} twice` };
      seen.add(id);
      if (entry.where !== undefined && entry.where !== null && typeof entry.where !== "string") {
        return { ok: false, reason: `has layers[${i}].where that is not a string` };
      }
      const where = (entry.where as string | undefined | null) ?? "";
      if (where.length > MAX_WHERE) {
        return { ok: false, reason: `has layers[${i}].where longer than ${MAX_WHERE} characters` };
      }
      if (entry.includeGeometry !== undefined && typeof entry.includeGeometry !== "boolean") {
        return { ok: false, reason: `has layers[${i}].includeGeometry that is not true or false` };
      }
      const column = (name: "xColumnName" | "yColumnName", fallback: string): ReadResult<string> => {
        const value = entry[name];
        if (value === undefined || value === null || value === "") return { ok: true, value: fallback };
        if (typeof value !== "string" || !COLUMN_NAME.test(value)) {
          return {
            ok: false,
            reason: `has layers[${i}].${name} that is not a column name (letters, digits, _)`,
          };
        }
        return { ok: true, value };
      };
      const x = column("xColumnName", "x");
      if (!x.ok) return x;
      const y = column("yColumnName", "y");
      if (!y.ok) return y;
      if (x.value.toLowerCase() === y.value.toLowerCase()) {
        return { ok: false, reason: `has layers[${i}] whose xColumnName and yColumnName are the same` };
      }
      layers.push({
        id,
        where,
        includeGeometry: entry.includeGeometry !== false,
        xColumnName: x.value,
        yColumnName: y.value,
      });
    }
    out.layers = layers;
  }
  const sr = decoded.targetSR;
  if (sr !== undefined && sr !== null && sr !== "") {
    if (typeof sr === "number" || (typeof sr === "string" && /^\d{1,9}$/.test(sr.trim()))) {
      out.targetSR = { wkid: Number(sr) };
    } else if (typeof sr === "string") {
      let parsed: unknown;
      try {
        parsed = JSON.parse(sr);
      } catch {
        return { ok: false, reason: "has a targetSR that is neither a wkid nor a spatial reference" };
      }
      if (!isObject(parsed))
        return { ok: false, reason: "has a targetSR that is neither a wkid nor a spatial reference" };
      out.targetSR = parsed as SpatialReference;
    } else if (isObject(sr)) out.targetSR = sr as SpatialReference;
    else return { ok: false, reason: "has a targetSR that is neither a wkid nor a spatial reference" };
  }
  return { ok: true, value: out };
}
