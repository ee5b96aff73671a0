import { describe, expect, it } from "vitest";
import { readExportFormat, readExportParameters } from "./export-parameters.js";

describe("export parameters", () => {
  it("reads the supported formats in any case and refuses the others by name", () => {
    expect(readExportFormat("geojson")).toEqual({ ok: true, value: "GeoJson" });
    expect(readExportFormat("feature collection")).toEqual({ ok: true, value: "Feature Collection" });
    const fgdb = readExportFormat("File Geodatabase");
    expect(fgdb.ok).toBe(false);
    expect(!fgdb.ok && fgdb.reason).toMatch(/'File Geodatabase' is not supported/);
    expect(!readExportFormat("Parquet").ok).toBe(true);
  });

  it("reads layers with their defaults and refuses repeated, unnamed and malformed ones", () => {
    const read = readExportParameters({
      layers: [{ id: 0 }, { id: "1", where: "a = 1", includeGeometry: false }],
    });
    expect(read).toEqual({
      ok: true,
      value: {
        layers: [
          { id: 0, where: "", includeGeometry: true, xColumnName: "x", yColumnName: "y" },
          { id: 1, where: "a = 1", includeGeometry: false, xColumnName: "x", yColumnName: "y" },
        ],
      },
    });
    expect(readExportParameters({ layers: [{ id: 0 }, { id: 0 }] }).ok).toBe(false);
    expect(readExportParameters({ layers: [{ where: "1=1" }] }).ok).toBe(false);
    expect(readExportParameters({ layers: [{ id: 0, where: 3 }] }).ok).toBe(false);
    expect(readExportParameters({ layers: [{ id: 0, xColumnName: "a,b" }] }).ok).toBe(false);
    expect(readExportParameters({ layers: [{ id: 0, xColumnName: "X", yColumnName: "x" }] }).ok).toBe(false);
    expect(readExportParameters([1]).ok).toBe(false);
  });

  it("reads targetSR as a wkid, a JSON text or an object", () => {
    expect(readExportParameters({ targetSR: 3857 })).toEqual({
      ok: true,
      value: { targetSR: { wkid: 3857 } },
    });
    expect(readExportParameters({ targetSR: '{"wkid":4326}' })).toEqual({
      ok: true,
      value: { targetSR: { wkid: 4326 } },
    });
    expect(readExportParameters({ targetSR: { wkid: 2154 } })).toEqual({
      ok: true,
      value: { targetSR: { wkid: 2154 } },
    });
    expect(readExportParameters({ targetSR: "nonsense" }).ok).toBe(false);
  });
});
