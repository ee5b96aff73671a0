import fs from "node:fs";
import path from "node:path";
import type { Geometry, Position } from "../geometry/esri-json.js";
import type { LayerField } from "../layer-schema.js";

/**
 * An ESRI Shapefile (the 1998 technical description) written a feature at a time: the `.shp`
 * geometries, the `.shx` index and the `.dbf` attributes (dBASE III, UTF-8 as the `.cpg` says),
 * each appended to a file on disk, their headers written last with the counts and bounds. Only
 * the 2D shape types: Z and M are dropped (the shapefile keeps them in other types that few
 * readers need). A layer without geometry (a table) is a `.dbf` alone.
 *
 * Attributes as ArcGIS writes them: field names cut to 10 characters and made unique, strings as
 * `C` of at most 254 bytes (longer values are cut at a character boundary), integers and doubles
 * as `N`, dates as `D` (the day only: dBASE has no time of day).
 */

const SHAPE_TYPES = {
  esriGeometryPoint: 1,
  esriGeometryPolyline: 3,
  esriGeometryPolygon: 5,
  esriGeometryMultipoint: 8,
} as const;

export type ShapefileGeometryType = keyof typeof SHAPE_TYPES;

/** A dBASE column: its name in the file, type letter, width and decimals, and the field it holds. */
export interface DbfColumn {
  name: string;
  type: "C" | "N" | "D";
  length: number;
  decimals: number;
  field: LayerField;
}

const MAX_CHARACTER = 254;
/** dBASE's limits: fields of a table (the header's size allows more, but readers stop at 255) and bytes of a record. */
const MAX_DBF_COLUMNS = 255;
const MAX_DBF_RECORD = 65_535;

/** A layer with more attributes than a `.dbf` holds. */
export class DbfTooWide extends Error {
  constructor(name: string, columns: number, recordBytes: number) {
    super(
      `layer '${name}' has ${columns} fields of ${recordBytes.toLocaleString("en-US")} bytes in all; a shapefile holds at most ${MAX_DBF_COLUMNS} fields of 65,535 bytes: export it as CSV, GeoJson or a Feature Collection`,
    );
    this.name = "DbfTooWide";
  }
}

/** The dBASE columns of a layer's fields; fields dBASE cannot hold (blobs, rasters, XML) are left out. */
export function dbfColumns(fields: readonly LayerField[]): DbfColumn[] {
  const taken = new Set<string>();
  const unique = (name: string) => {
    let base = name.replace(/[^A-Za-z0-9_]/g, "_").slice(0, 10) || "FIELD";
    if (!taken.has(base.toUpperCase())) {
      taken.add(base.toUpperCase());
      return base;
    }
    for (let n = 1; ; n++) {
      const suffix = `_${n}`;
      base = `${base.slice(0, 10 - suffix.length)}${suffix}`;
      if (!taken.has(base.toUpperCase())) {
        taken.add(base.toUpperCase());
        return base;
      }
      base = base.slice(0, 10 - suffix.length);
    }
  };
  const columns: DbfColumn[] = [];
  for (const field of fields) {
    const column = (type: DbfColumn["type"], length: number, decimals = 0) =>
      columns.push({ name: unique(field.name), type, length, decimals, field });
    switch (field.type) {
      case "esriFieldTypeOID":
      case "esriFieldTypeInteger":
        column("N", 11);
        break;
      case "esriFieldTypeSmallInteger":
        column("N", 6);
        break;
      case "esriFieldTypeBigInteger":
        column("N", 20);
        break;
      case "esriFieldTypeSingle":
      case "esriFieldTypeDouble":
        // Room for any double JavaScript writes (at most 24 characters, "-1.2345678901234567e-308").
        column("N", 24, 15);
        break;
      case "esriFieldTypeDate":
      case "esriFieldTypeDateOnly":
        column("D", 8);
        break;
      case "esriFieldTypeGUID":
      case "esriFieldTypeGlobalID":
        column("C", 38);
        break;
      case "esriFieldTypeString":
        column("C", Math.max(1, Math.min(MAX_CHARACTER, field.length ?? MAX_CHARACTER)));
        break;
      case "esriFieldTypeTimeOnly":
      case "esriFieldTypeTimestampOffset":
        column("C", 32);
        break;
      default:
        break;
    }
  }
  return columns;
}

/** `bytes` cut to at most `max` bytes without splitting a UTF-8 character. */
function utf8Prefix(text: string, max: number): Buffer {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= max) return bytes;
  let end = max;
  // Back up over continuation bytes (10xxxxxx) to the start of the cut character.
  while (end > 0 && ((bytes[end] as number) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

function dbfDate(value: unknown): string | undefined {
  if (typeof value === "number" && Number.isFinite(value)) {
    const d = new Date(value);
    if (Number.isNaN(d.getTime())) return undefined;
    const y = d.getUTCFullYear();
    if (y < 0 || y > 9999) return undefined;
    return `${String(y).padStart(4, "0")}${String(d.getUTCMonth() + 1).padStart(2, "0")}${String(d.getUTCDate()).padStart(2, "0")}`;
  }
  if (typeof value === "string" && /^\d{4}-\d{2}-\d{2}/.test(value))
    return value.slice(0, 10).replace(/-/g, "");
  return undefined;
}

/** One value as its column's bytes, padded to the column's width. */
export function dbfValue(column: DbfColumn, value: unknown): Buffer {
  const out = Buffer.alloc(column.length, 0x20);
  if (value === null || value === undefined) return out;
  switch (column.type) {
    case "C": {
      utf8Prefix(String(value), column.length).copy(out, 0);
      return out;
    }
    case "D": {
      const text = dbfDate(value);
      if (text) out.write(text, 0, "latin1");
      return out;
    }
    case "N": {
      const n = typeof value === "number" ? value : Number(value);
      if (!Number.isFinite(n)) return out;
      const text = column.decimals === 0 ? String(Math.trunc(n)) : String(n);
      // A value wider than its column (it cannot be for the widths above) is left empty, not cut.
      if (text.length <= column.length) out.write(text, column.length - text.length, "latin1");
      return out;
    }
  }
}

interface Box {
  xmin: number;
  ymin: number;
  xmax: number;
  ymax: number;
}

function boxOf(positions: Iterable<Position>): Box | undefined {
  let box: Box | undefined;
  for (const p of positions) {
    const x = p[0] as number;
    const y = p[1] as number;
    if (!box) box = { xmin: x, ymin: y, xmax: x, ymax: y };
    else {
      box.xmin = Math.min(box.xmin, x);
      box.ymin = Math.min(box.ymin, y);
      box.xmax = Math.max(box.xmax, x);
      box.ymax = Math.max(box.ymax, y);
    }
  }
  return box;
}

/** The content of one shape record (after its 8-byte header), and its bounds; null shapes have none. */
export function shapeRecord(geometry: Geometry | null): { content: Buffer; box?: Box } {
  const nullShape = () => {
    const b = Buffer.alloc(4);
    b.writeInt32LE(0, 0);
    return { content: b };
  };
  if (!geometry) return nullShape();
  switch (geometry.type) {
    case "esriGeometryPoint": {
      if (!Number.isFinite(geometry.x) || !Number.isFinite(geometry.y)) return nullShape();
      const b = Buffer.alloc(20);
      b.writeInt32LE(1, 0);
      b.writeDoubleLE(geometry.x, 4);
      b.writeDoubleLE(geometry.y, 12);
      return { content: b, box: { xmin: geometry.x, ymin: geometry.y, xmax: geometry.x, ymax: geometry.y } };
    }
    case "esriGeometryMultipoint": {
      const box = boxOf(geometry.points);
      if (!box) return nullShape();
      const b = Buffer.alloc(40 + 16 * geometry.points.length);
      b.writeInt32LE(8, 0);
      writeBox(b, 4, box);
      b.writeInt32LE(geometry.points.length, 36);
      geometry.points.forEach((p, i) => {
        b.writeDoubleLE(p[0] as number, 40 + 16 * i);
        b.writeDoubleLE(p[1] as number, 48 + 16 * i);
      });
      return { content: b, box };
    }
    case "esriGeometryPolyline":
    case "esriGeometryPolygon": {
      // Esri JSON rings go as the shapefile wants them: outer rings clockwise, holes counter-clockwise.
      const parts = (geometry.type === "esriGeometryPolygon" ? geometry.rings : geometry.paths).filter(
        (part) => part.length > 0,
      );
      const count = parts.reduce((n, part) => n + part.length, 0);
      const box = boxOf(parts.flat());
      if (!box || count === 0) return nullShape();
      const b = Buffer.alloc(44 + 4 * parts.length + 16 * count);
      b.writeInt32LE(geometry.type === "esriGeometryPolygon" ? 5 : 3, 0);
      writeBox(b, 4, box);
      b.writeInt32LE(parts.length, 36);
      b.writeInt32LE(count, 40);
      let at = 44 + 4 * parts.length;
      let start = 0;
      parts.forEach((part, i) => {
        b.writeInt32LE(start, 44 + 4 * i);
        start += part.length;
        for (const p of part) {
          b.writeDoubleLE(p[0] as number, at);
          b.writeDoubleLE(p[1] as number, at + 8);
          at += 16;
        }
      });
      return { content: b, box };
    }
    case "esriGeometryEnvelope":
      // Stored geometries are never envelopes (layer-schema.ts refuses such layers).
      return nullShape();
  }
}

function writeBox(b: Buffer, at: number, box: Box): void {
  b.writeDoubleLE(box.xmin, at);
  b.writeDoubleLE(box.ymin, at + 8);
  b.writeDoubleLE(box.xmax, at + 16);
  b.writeDoubleLE(box.ymax, at + 24);
}

/** The 100-byte header of the `.shp` and the `.shx`. */
function mainHeader(shapeType: number, lengthBytes: number, box: Box | undefined): Buffer {
  const b = Buffer.alloc(100);
  b.writeInt32BE(9994, 0);
  b.writeInt32BE(lengthBytes / 2, 24);
  b.writeInt32LE(1000, 28);
  b.writeInt32LE(shapeType, 32);
  if (box) writeBox(b, 36, box);
  return b;
}

/** An appending file, writing through a buffer of a few hundred kilobytes. */
class Appender {
  private pending: Buffer[] = [];
  private held = 0;
  /** Bytes appended so far, the reserved header included. */
  size: number;
  private constructor(
    private readonly handle: fs.promises.FileHandle,
    private readonly start: number,
  ) {
    this.size = start;
  }
  static async open(file: string, headerBytes: number): Promise<Appender> {
    return new Appender(await fs.promises.open(file, "wx"), headerBytes);
  }
  async append(buffer: Buffer): Promise<void> {
    this.pending.push(buffer);
    this.held += buffer.length;
    this.size += buffer.length;
    if (this.held >= 256 * 1024) await this.flush();
  }
  private async flush(): Promise<void> {
    if (this.held === 0) return;
    const data = Buffer.concat(this.pending, this.held);
    await this.handle.write(data, 0, data.length, this.size - this.held);
    this.pending = [];
    this.held = 0;
  }
  /** Writes what is pending and the header at the start, and closes the file. */
  async finish(header: Buffer): Promise<void> {
    await this.flush();
    if (header.length !== this.start) throw new Error("header of the wrong size");
    await this.handle.write(header, 0, header.length, 0);
    await this.handle.close();
  }
  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}

export interface ShapefileLayout {
  /** Absent for a table: only the `.dbf` is written. */
  geometryType?: ShapefileGeometryType;
  columns: DbfColumn[];
  /** The `.prj` text (the output spatial reference's WKT), when known. */
  prj?: string;
}

/** A shapefile being written into `dir` as `<name>.shp` and its companions. */
export class ShapefileWriter {
  private records = 0;
  private box: Box | undefined;
  private constructor(
    readonly files: string[],
    private readonly layout: ShapefileLayout,
    private readonly dbf: Appender,
    private readonly shp: Appender | undefined,
    private readonly shx: Appender | undefined,
  ) {}

  static async create(dir: string, name: string, layout: ShapefileLayout): Promise<ShapefileWriter> {
    const recordBytes = 1 + layout.columns.reduce((n, c) => n + c.length, 0);
    if (layout.columns.length > MAX_DBF_COLUMNS || recordBytes > MAX_DBF_RECORD) {
      throw new DbfTooWide(name, layout.columns.length, recordBytes);
    }
    const base = path.join(dir, name);
    const files = [`${base}.dbf`, `${base}.cpg`];
    await fs.promises.writeFile(`${base}.cpg`, "UTF-8", { flag: "wx" });
    if (layout.prj && layout.geometryType) {
      await fs.promises.writeFile(`${base}.prj`, layout.prj, { flag: "wx" });
      files.push(`${base}.prj`);
    }
    const dbf = await Appender.open(`${base}.dbf`, 32 + 32 * layout.columns.length + 1);
    let shp: Appender | undefined;
    let shx: Appender | undefined;
    if (layout.geometryType) {
      shp = await Appender.open(`${base}.shp`, 100);
      shx = await Appender.open(`${base}.shx`, 100);
      files.push(`${base}.shp`, `${base}.shx`);
    }
    return new ShapefileWriter(files, layout, dbf, shp, shx);
  }

  /** Bytes written so far, over all the files. */
  get size(): number {
    return this.dbf.size + (this.shp?.size ?? 0) + (this.shx?.size ?? 0);
  }

  async add(geometry: Geometry | null, attributes: Record<string, unknown>): Promise<void> {
    this.records += 1;
    if (this.shp && this.shx) {
      const { content, box } = shapeRecord(geometry);
      const header = Buffer.alloc(8);
      header.writeInt32BE(this.records, 0);
      header.writeInt32BE(content.length / 2, 4);
      const index = Buffer.alloc(8);
      index.writeInt32BE(this.shp.size / 2, 0);
      index.writeInt32BE(content.length / 2, 4);
      await this.shp.append(header);
      await this.shp.append(content);
      await this.shx.append(index);
      if (box) {
        this.box = this.box
          ? {
              xmin: Math.min(this.box.xmin, box.xmin),
              ymin: Math.min(this.box.ymin, box.ymin),
              xmax: Math.max(this.box.xmax, box.xmax),
              ymax: Math.max(this.box.ymax, box.ymax),
            }
          : box;
      }
    }
    const record: Buffer[] = [Buffer.from(" ", "latin1")];
    for (const column of this.layout.columns) record.push(dbfValue(column, attributes[column.field.name]));
    await this.dbf.append(Buffer.concat(record));
  }

  /** Writes the headers and closes the files. */
  async finish(at = new Date()): Promise<void> {
    const columns = this.layout.columns;
    await this.dbf.append(Buffer.from([0x1a]));
    const header = Buffer.alloc(32 + 32 * columns.length + 1);
    header.writeUInt8(0x03, 0);
    header.writeUInt8(at.getUTCFullYear() - 1900, 1);
    header.writeUInt8(at.getUTCMonth() + 1, 2);
    header.writeUInt8(at.getUTCDate(), 3);
    header.writeUInt32LE(this.records, 4);
    header.writeUInt16LE(header.length, 8);
    header.writeUInt16LE(1 + columns.reduce((n, c) => n + c.length, 0), 10);
    columns.forEach((c, i) => {
      const at = 32 + 32 * i;
      header.write(c.name, at, 10, "latin1");
      header.write(c.type, at + 11, 1, "latin1");
      header.writeUInt8(c.length, at + 16);
      header.writeUInt8(c.decimals, at + 17);
    });
    header.writeUInt8(0x0d, header.length - 1);
    await this.dbf.finish(header);
    if (this.shp && this.shx && this.layout.geometryType) {
      const type = SHAPE_TYPES[this.layout.geometryType];
      await this.shp.finish(mainHeader(type, this.shp.size, this.box));
      await this.shx.finish(mainHeader(type, this.shx.size, this.box));
    }
  }

  /** Closes the files after a failure (they are thrown away with their directory). */
  async abandon(): Promise<void> {
    await Promise.all([this.dbf.close(), this.shp?.close(), this.shx?.close()]);
  }
}
