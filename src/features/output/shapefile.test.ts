import { describe, expect, it } from "vitest";
import type { LayerField } from "../layer-schema.js";
import { dbfColumns, dbfValue, shapeRecord } from "./shapefile.js";

const field = (name: string, type: string, length?: number): LayerField =>
  ({
    name,
    type,
    alias: name,
    column: name,
    nullable: true,
    editable: true,
    defaultValue: null,
    ...(length ? { length } : {}),
  }) as LayerField;

describe("shapefile writer", () => {
  it("cuts field names to 10 characters and keeps them unique", () => {
    const names = dbfColumns([
      field("population_total", "esriFieldTypeInteger"),
      field("population_density", "esriFieldTypeDouble"),
      field("blob", "esriFieldTypeBlob"),
    ]).map((c) => c.name);
    expect(names).toEqual(["population", "populati_1"]);
  });

  it("cuts strings at a character boundary and leaves nulls blank", () => {
    const [text] = dbfColumns([field("name", "esriFieldTypeString", 3)]);
    expect(dbfValue(text as never, "aé€").toString("utf8")).toBe("aé");
    expect(dbfValue(text as never, null).toString("latin1")).toBe("   ");
  });

  it("writes a polygon record with its parts and bounds", () => {
    const { content, box } = shapeRecord({
      type: "esriGeometryPolygon",
      hasZ: false,
      hasM: false,
      rings: [
        [
          [0, 0],
          [0, 2],
          [3, 2],
          [0, 0],
        ],
      ],
    });
    expect(content.readInt32LE(0)).toBe(5);
    expect(box).toEqual({ xmin: 0, ymin: 0, xmax: 3, ymax: 2 });
    expect(content.readInt32LE(36)).toBe(1);
    expect(content.readInt32LE(40)).toBe(4);
    expect(content.length).toBe(44 + 4 + 16 * 4);
    expect(shapeRecord(null).content.readInt32LE(0)).toBe(0);
  });
});

describe("shapefile writer limits", () => {
  it("refuses, by name, a layer whose attributes a dBASE record cannot hold instead of failing on a RangeError", async () => {
    const fs = await import("node:fs");
    const os = await import("node:os");
    const path = await import("node:path");
    const { ShapefileWriter, DbfTooWide } = await import("./shapefile.js");
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-dbf-"));
    try {
      // 300 text fields of 254 bytes: a record of 76,201 bytes, past dBASE's 65,535.
      const columns = dbfColumns(
        Array.from({ length: 300 }, (_, i) => field(`text_${i}`, "esriFieldTypeString", 254)),
      );
      const made = ShapefileWriter.create(dir, "wide", { columns });
      await expect(made).rejects.toBeInstanceOf(DbfTooWide);
      await expect(made).rejects.toThrow(/255 fields|65,535 bytes/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
