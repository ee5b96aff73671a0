import fs from "node:fs";
import path from "node:path";
import type { Geometry, SpatialReference } from "../geometry/esri-json.js";
import type { ResolvedReference } from "../geometry/projection.js";
import { spatialReferenceOf, wktOf } from "../geometry/projection.js";
import type { LayerSchema } from "../layer-schema.js";
import { fieldJson } from "../layer-schema.js";
import { dbfColumns, type ShapefileGeometryType, ShapefileWriter } from "../output/shapefile.js";
import { writeZip } from "../output/zip.js";
import { layerReference } from "../query/layer-query.js";
import type { ExportFormat, ExportLayerInfo } from "./export-parameters.js";

/**
 * Writes an export's file on disk from pages of features, one page in memory at a time: GeoJSON
 * and Feature Collection JSON are written feature by feature, CSV row by row, shapefiles record by
 * record; the zips are made of the finished files. The caller stores the file as the item's data
 * and removes the directory.
 */

/** A layer to export, its features read in pages as the query answers them. */
export interface ExportLayerSource {
  info: ExportLayerInfo;
  name: string;
  schema: LayerSchema;
  /** The layer's definition (a Feature Collection carries it). */
  definition: Record<string, unknown>;
  /**
   * Pages of the query's answer: a FeatureSet (`json`) in `outSR` (the layer's when undefined),
   * or a GeoJSON FeatureCollection in WGS 84.
   */
  pages(
    format: "json" | "geojson",
    outSR: ResolvedReference | undefined,
    returnGeometry: boolean,
  ): AsyncIterable<Record<string, unknown>>;
}

export interface ExportFile {
  path: string;
  /** The file name the item's data gets. */
  name: string;
  contentType: string;
  /** The item type ArcGIS gives the export's item. */
  itemType: string;
}

/** An export that grew past what an item's data may be. */
export class ExportTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(
      `the export is larger than ${Math.round(maxBytes / (1024 * 1024))} MB, the most an item's data may be; export fewer features (a where clause) or fewer layers`,
    );
    this.name = "ExportTooLarge";
  }
}

/** The item type of an export: what ArcGIS names it. */
export function exportItemType(format: ExportFormat, layerCount: number): string {
  switch (format) {
    case "GeoJson":
      return "GeoJson";
    case "CSV":
      return layerCount > 1 ? "CSV Collection" : "CSV";
    case "Shapefile":
      return "Shapefile";
    case "Feature Collection":
      return "Feature Collection";
  }
}

/** A file name made of a title: letters, digits, `-` and `_`, at most 64 characters. */
export function fileBase(title: string, fallback: string): string {
  const base = title
    .replace(/[^A-Za-z0-9_-]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .slice(0, 64);
  return base || fallback;
}

/** Unique file bases for the layers, from their names. */
function layerBases(layers: readonly ExportLayerSource[]): string[] {
  const taken = new Set<string>();
  return layers.map((l) => {
    const first = fileBase(l.name, `layer_${l.info.id}`);
    let base = first;
    // The id makes it unique, unless another layer is named so: then a counter too.
    for (let n = 1; taken.has(base.toLowerCase()); n++) base = `${first}_${l.info.id}${n > 1 ? `_${n}` : ""}`;
    taken.add(base.toLowerCase());
    return base;
  });
}

/** Sequential writes to a new file, refused past `maxBytes`. */
class Output {
  size = 0;
  private pending: string[] = [];
  private held = 0;
  private constructor(
    private readonly handle: fs.promises.FileHandle,
    private readonly maxBytes: number,
  ) {}
  static async open(file: string, maxBytes: number): Promise<Output> {
    return new Output(await fs.promises.open(file, "wx"), maxBytes);
  }
  async write(text: string): Promise<void> {
    this.pending.push(text);
    this.held += text.length;
    if (this.held >= 256 * 1024) await this.flush();
  }
  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const data = Buffer.from(this.pending.join(""), "utf8");
    this.pending = [];
    this.held = 0;
    if (this.size + data.length > this.maxBytes) throw new ExportTooLarge(this.maxBytes);
    await this.handle.write(data, 0, data.length, this.size);
    this.size += data.length;
  }
  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      await this.handle.close();
    }
  }
}

async function sizeChecked(file: string, maxBytes: number): Promise<void> {
  if ((await fs.promises.stat(file)).size > maxBytes) throw new ExportTooLarge(maxBytes);
}

export interface ExportOptions {
  format: ExportFormat;
  layers: ExportLayerSource[];
  /** The export's title, made a file name. */
  title: string;
  /** `targetSR`, resolved; the layer's own (or WGS 84 where the format says so) when absent. */
  targetSR?: ResolvedReference;
  maxBytes: number;
  /** A directory of the export's own, removed by the caller. */
  dir: string;
  /**
   * Called between the steps that read no page (before each zip entry, during a long one): the
   * job renews its lease there, as it does after each page.
   */
  progress?: () => Promise<void>;
}

export async function writeExport(options: ExportOptions): Promise<ExportFile> {
  const base = fileBase(options.title, "export");
  const itemType = exportItemType(options.format, options.layers.length);
  switch (options.format) {
    case "GeoJson": {
      const file = path.join(options.dir, `${base}.geojson`);
      await writeGeoJson(file, options.layers[0] as ExportLayerSource, options.maxBytes);
      return { path: file, name: `${base}.geojson`, contentType: "application/geo+json", itemType };
    }
    case "Feature Collection": {
      const file = path.join(options.dir, "data.json");
      await writeFeatureCollection(file, options);
      return { path: file, name: "data.json", contentType: "application/json", itemType };
    }
    case "CSV": {
      const bases = layerBases(options.layers);
      const files: { name: string; path: string }[] = [];
      // The layers' files share one budget: what the archive may hold before it is deflated.
      let left = ZIP_INPUT_FACTOR * options.maxBytes;
      for (const [i, layer] of options.layers.entries()) {
        const name = `${bases[i]}.csv`;
        const file = path.join(options.dir, name);
        const written = await asTooLarge(
          options.maxBytes,
          writeCsv(file, layer, options.targetSR, Math.min(options.maxBytes, left)),
        );
        left -= written;
        files.push({ name, path: file });
      }
      if (files.length === 1) {
        const only = files[0] as { name: string; path: string };
        const renamed = path.join(options.dir, `${base}.csv`);
        if (renamed !== only.path) await fs.promises.rename(only.path, renamed);
        return { path: renamed, name: `${base}.csv`, contentType: "text/csv; charset=utf-8", itemType };
      }
      return zipped(options, base, files, itemType);
    }
    case "Shapefile": {
      const bases = layerBases(options.layers);
      const files: { name: string; path: string }[] = [];
      let left = ZIP_INPUT_FACTOR * options.maxBytes;
      for (const [i, layer] of options.layers.entries()) {
        const written = await asTooLarge(
          options.maxBytes,
          writeShapefile(options.dir, bases[i] as string, layer, {
            ...options,
            maxBytes: Math.min(options.maxBytes, left),
          }),
        );
        left -= written.size;
        files.push(...written.files.map((f) => ({ name: path.basename(f), path: f })));
      }
      return zipped(options, base, files, itemType);
    }
  }
}

/** A file written within what is left of a collection's budget: too large says the export's limit. */
async function asTooLarge<T>(maxBytes: number, writing: Promise<T>): Promise<T> {
  try {
    return await writing;
  } catch (err) {
    throw err instanceof ExportTooLarge ? new ExportTooLarge(maxBytes) : err;
  }
}

/** A zip's files together may be this many times an item's data before deflating: written to disk, no more. */
const ZIP_INPUT_FACTOR = 4;

async function zipped(
  options: ExportOptions,
  base: string,
  files: { name: string; path: string }[],
  itemType: string,
): Promise<ExportFile> {
  const total = await Promise.all(files.map(async (f) => (await fs.promises.stat(f.path)).size));
  // Deflate rarely grows data; the archive is checked again once written.
  if (total.reduce((a, b) => a + b, 0) > ZIP_INPUT_FACTOR * options.maxBytes)
    throw new ExportTooLarge(options.maxBytes);
  const file = path.join(options.dir, `${base}.zip`);
  await writeZip(file, files, options.progress ? { progress: options.progress } : {});
  await sizeChecked(file, options.maxBytes);
  return { path: file, name: `${base}.zip`, contentType: "application/zip", itemType };
}

async function writeGeoJson(file: string, layer: ExportLayerSource, maxBytes: number): Promise<void> {
  const out = await Output.open(file, maxBytes);
  try {
    await out.write('{"type":"FeatureCollection","features":[');
    let first = true;
    for await (const page of layer.pages(
      "geojson",
      undefined,
      layer.info.includeGeometry && !!layer.schema.geometryType,
    )) {
      for (const feature of (page.features as unknown[]) ?? []) {
        await out.write(`${first ? "" : ","}\n${JSON.stringify(feature)}`);
        first = false;
      }
    }
    await out.write("\n]}\n");
  } finally {
    await out.close();
  }
}

/** The layer definition a Feature Collection carries: the layer's, with its fields as stored. */
function collectionDefinition(layer: ExportLayerSource, spatialReference: SpatialReference | undefined) {
  const { schema, definition } = layer;
  const geometry = layer.info.includeGeometry ? schema.geometryType : undefined;
  return {
    name: layer.name,
    type: geometry ? "Feature Layer" : "Table",
    ...(geometry ? { geometryType: geometry } : {}),
    objectIdField: schema.objectIdField.name,
    ...(schema.globalIdField ? { globalIdField: schema.globalIdField.name } : {}),
    fields: schema.fields.map(fieldJson),
    ...(geometry && definition.drawingInfo !== undefined ? { drawingInfo: definition.drawingInfo } : {}),
    ...(geometry && spatialReference ? { spatialReference } : {}),
    ...(typeof definition.displayField === "string" ? { displayField: definition.displayField } : {}),
  };
}

async function writeFeatureCollection(file: string, options: ExportOptions): Promise<void> {
  const out = await Output.open(file, options.maxBytes);
  try {
    await out.write('{"layers":[');
    for (const [i, layer] of options.layers.entries()) {
      const geometry = layer.info.includeGeometry && !!layer.schema.geometryType;
      const spatialReference = geometry
        ? options.targetSR
          ? spatialReferenceOf(options.targetSR)
          : layerReference(layer.schema).spatialReference
        : undefined;
      const head = {
        layerDefinition: collectionDefinition(layer, spatialReference),
      };
      const featureSetHead = {
        ...(geometry ? { geometryType: layer.schema.geometryType, spatialReference } : {}),
      };
      const headText = JSON.stringify(head);
      const setText = JSON.stringify(featureSetHead);
      await out.write(
        `${i > 0 ? "," : ""}\n${headText.slice(0, -1)},"featureSet":${setText.slice(0, -1)}${setText === "{}" ? "" : ","}"features":[`,
      );
      let first = true;
      for await (const page of layer.pages("json", options.targetSR, geometry)) {
        for (const feature of (page.features as unknown[]) ?? []) {
          await out.write(`${first ? "" : ","}\n${JSON.stringify(feature)}`);
          first = false;
        }
      }
      await out.write("]}}");
    }
    await out.write("\n]}\n");
  } finally {
    await out.close();
  }
}

/** One CSV value (RFC 4180): quoted when it holds a comma, a quote, a line break or edge blanks. */
export function csvValue(value: unknown): string {
  if (value === null || value === undefined) return "";
  const text = typeof value === "string" ? value : String(value);
  return /[",\r\n]|^\s|\s$/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** Dates in CSV as ISO 8601 (UTC), which spreadsheet programs and GDAL read; other values as they are. */
function csvAttribute(type: string, value: unknown): string {
  if (type === "esriFieldTypeDate" && typeof value === "number" && Number.isFinite(value)) {
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? "" : csvValue(d.toISOString());
  }
  return csvValue(value);
}

async function writeCsv(
  file: string,
  layer: ExportLayerSource,
  targetSR: ResolvedReference | undefined,
  maxBytes: number,
): Promise<number> {
  // Only points have one x and y; lines and polygons are exported without their geometry, as ArcGIS does.
  const points = layer.info.includeGeometry && layer.schema.geometryType === "esriGeometryPoint";
  const fields = layer.schema.fields;
  const out = await Output.open(file, maxBytes);
  try {
    const header = fields.map((f) => csvValue(f.name));
    if (points) {
      const [x, y] = coordinateColumns(fields, layer.info.xColumnName, layer.info.yColumnName);
      header.push(csvValue(x), csvValue(y));
    }
    await out.write(`${header.join(",")}\r\n`);
    // Points in longitude and latitude unless a targetSR says otherwise: what a CSV's reader expects.
    const outSR = points ? (targetSR ?? WGS84_REFERENCE) : undefined;
    for await (const page of layer.pages("json", outSR, points)) {
      for (const feature of (page.features as {
        attributes: Record<string, unknown>;
        geometry?: { x?: number; y?: number } | null;
      }[]) ?? []) {
        const row = fields.map((f) => csvAttribute(f.type, feature.attributes[f.name]));
        if (points) row.push(csvValue(feature.geometry?.x ?? null), csvValue(feature.geometry?.y ?? null));
        await out.write(`${row.join(",")}\r\n`);
      }
    }
  } finally {
    await out.close();
  }
  return out.size;
}

/**
 * The names of a point layer's x and y columns in its CSV: `xColumnName` and `yColumnName`, each
 * with a suffix (`_1`, `_2`, …) when a field has that name (regardless of case), so that every
 * attribute keeps its column and no two columns share a name (`x`, `y` beside fields named `X`
 * and `y` are `x_1`, `y_1`).
 */
export function coordinateColumns(
  fields: readonly { name: string }[],
  xColumnName: string,
  yColumnName: string,
): [string, string] {
  const fieldNames = new Set(fields.map((f) => f.name.toLowerCase()));
  /** `name`, or `name_<n>` for the first n making it no field's name and not `other`. */
  const free = (name: string, other: string) => {
    let chosen = name;
    for (let n = 1; fieldNames.has(chosen.toLowerCase()) || chosen.toLowerCase() === other.toLowerCase(); n++)
      chosen = `${name}_${n}`;
    return chosen;
  };
  const x = free(xColumnName, yColumnName);
  return [x, free(yColumnName, x)];
}

/** WGS 84, as `resolveSpatialReference({wkid: 4326})` resolves it. */
const WGS84_REFERENCE: ResolvedReference = {
  key: "EPSG:4326",
  wkid: 4326,
  geographic: true,
  definition: "+proj=longlat +datum=WGS84 +no_defs +type=crs",
};

/** A FeatureSet's geometry (no type: its layer's) as a geometry of that type. */
function typedGeometry(type: ShapefileGeometryType, json: unknown): Geometry | null {
  if (typeof json !== "object" || json === null) return null;
  return { ...(json as object), type, hasZ: false, hasM: false } as Geometry;
}

async function writeShapefile(
  dir: string,
  base: string,
  layer: ExportLayerSource,
  options: ExportOptions,
): Promise<{ files: string[]; size: number }> {
  const geometryType = layer.info.includeGeometry ? layer.schema.geometryType : undefined;
  const reference = options.targetSR ?? layerReference(layer.schema).reference;
  const prj = geometryType ? wktOf(reference) : undefined;
  const writer = await ShapefileWriter.create(dir, base, {
    ...(geometryType ? { geometryType } : {}),
    columns: dbfColumns(layer.schema.fields),
    ...(prj ? { prj } : {}),
  });
  try {
    for await (const page of layer.pages("json", options.targetSR, !!geometryType)) {
      for (const feature of (page.features as {
        attributes: Record<string, unknown>;
        geometry?: unknown;
      }[]) ?? []) {
        await writer.add(
          geometryType ? typedGeometry(geometryType, feature.geometry) : null,
          feature.attributes,
        );
      }
      if (writer.size > options.maxBytes) throw new ExportTooLarge(options.maxBytes);
    }
    await writer.finish();
  } catch (err) {
    await writer.abandon();
    throw err;
  }
  if (writer.size > options.maxBytes) throw new ExportTooLarge(options.maxBytes);
  return { files: writer.files, size: writer.size };
}
