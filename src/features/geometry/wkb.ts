import type { Geometry, Position } from "./esri-json.js";
import { type PolygonPart, polygonParts } from "./rings.js";

/**
 * Well-known binary (OGC WKB, little-endian, x and y only) of Esri JSON geometries, which PostGIS
 * reads with `ST_GeomFromWKB`. The geometry is the one jsts relates (`toJsts` in jsts-geometry.ts):
 * a polyline of one path is a LineString and of several a MultiLineString; a polygon's rings are
 * grouped into polygons by `polygonParts` (a Polygon for one group, a MultiPolygon for several).
 * Written byte by byte rather than through jsts, since a bulk load writes one per feature.
 */

const POINT = 1;
const LINE_STRING = 2;
const POLYGON = 3;
const MULTI_POINT = 4;
const MULTI_LINE_STRING = 5;
const MULTI_POLYGON = 6;

/** Byte order mark and type. */
const HEADER = 5;
const COORDINATE = 16;

const lineSize = (positions: readonly Position[]) => 4 + positions.length * COORDINATE;
const polygonSize = (part: PolygonPart) =>
  HEADER + 4 + lineSize(part.outer) + part.holes.reduce((sum, hole) => sum + lineSize(hole), 0);

class Writer {
  private offset = 0;
  constructor(readonly bytes: Buffer) {}
  header(type: number): void {
    this.bytes.writeUInt8(1, this.offset);
    this.bytes.writeUInt32LE(type, this.offset + 1);
    this.offset += HEADER;
  }
  count(n: number): void {
    this.bytes.writeUInt32LE(n, this.offset);
    this.offset += 4;
  }
  coordinate(x: number, y: number): void {
    this.bytes.writeDoubleLE(x, this.offset);
    this.bytes.writeDoubleLE(y, this.offset + 8);
    this.offset += COORDINATE;
  }
  positions(positions: readonly Position[]): void {
    this.count(positions.length);
    for (const p of positions) this.coordinate(p[0] as number, p[1] as number);
  }
  polygon(part: PolygonPart): void {
    this.header(POLYGON);
    this.count(1 + part.holes.length);
    this.positions(part.outer);
    for (const hole of part.holes) this.positions(hole);
  }
}

/** WKB of a polygon (one part) or a multipolygon (several), from rings already grouped. */
export function polygonWkb(parts: readonly PolygonPart[]): Buffer {
  if (parts.length === 1) {
    const part = parts[0] as PolygonPart;
    const w = new Writer(Buffer.allocUnsafe(polygonSize(part)));
    w.polygon(part);
    return w.bytes;
  }
  const w = new Writer(Buffer.allocUnsafe(HEADER + 4 + parts.reduce((sum, p) => sum + polygonSize(p), 0)));
  w.header(MULTI_POLYGON);
  w.count(parts.length);
  for (const part of parts) w.polygon(part);
  return w.bytes;
}

/** WKB of an Esri JSON point, multipoint, polyline or polygon (not an envelope: layers store none). */
export function esriWkb(geometry: Geometry): Buffer {
  switch (geometry.type) {
    case "esriGeometryPoint": {
      const w = new Writer(Buffer.allocUnsafe(HEADER + COORDINATE));
      w.header(POINT);
      w.coordinate(geometry.x, geometry.y);
      return w.bytes;
    }
    case "esriGeometryMultipoint": {
      const w = new Writer(Buffer.allocUnsafe(HEADER + 4 + geometry.points.length * (HEADER + COORDINATE)));
      w.header(MULTI_POINT);
      w.count(geometry.points.length);
      for (const p of geometry.points) {
        w.header(POINT);
        w.coordinate(p[0] as number, p[1] as number);
      }
      return w.bytes;
    }
    case "esriGeometryPolyline": {
      const { paths } = geometry;
      if (paths.length === 1) {
        const path = paths[0] as Position[];
        const w = new Writer(Buffer.allocUnsafe(HEADER + lineSize(path)));
        w.header(LINE_STRING);
        w.positions(path);
        return w.bytes;
      }
      const w = new Writer(
        Buffer.allocUnsafe(HEADER + 4 + paths.reduce((sum, path) => sum + HEADER + lineSize(path), 0)),
      );
      w.header(MULTI_LINE_STRING);
      w.count(paths.length);
      for (const path of paths) {
        w.header(LINE_STRING);
        w.positions(path);
      }
      return w.bytes;
    }
    case "esriGeometryPolygon":
      return polygonWkb(polygonParts(geometry.rings));
    case "esriGeometryEnvelope":
      throw new Error("esriWkb: a layer stores no envelopes");
  }
}
