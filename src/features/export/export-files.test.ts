import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { LayerField, LayerSchema } from "../layer-schema.js";
import { coordinateColumns, type ExportLayerSource, ExportTooLarge, writeExport } from "./export-files.js";

const run = promisify(execFile);

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

/** A table of `rows` features whose `text` is `width` characters, read in pages of 100; counts pages read. */
function table(id: number, name: string, rows: number, width: number, read: { pages: number }) {
  const oid = field("OBJECTID", "esriFieldTypeOID");
  const schema = {
    id,
    kind: "table",
    fields: [oid, field("text", "esriFieldTypeString", 254)],
    objectIdField: oid,
    hasZ: false,
    hasM: false,
  } as unknown as LayerSchema;
  const source: ExportLayerSource = {
    info: { id, where: "", includeGeometry: true, xColumnName: "x", yColumnName: "y" },
    name,
    schema,
    definition: { name },
    async *pages() {
      for (let start = 0; start < rows; start += 100) {
        read.pages += 1;
        const features = [];
        for (let i = start; i < Math.min(rows, start + 100); i++) {
          features.push({ attributes: { OBJECTID: i + 1, text: "x".repeat(width) } });
        }
        yield { features };
      }
    },
  };
  return source;
}

describe("export files", () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-export-files-"));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("stops writing a CSV Collection once its layers together pass the budget, not after every layer", async () => {
    const read = { pages: 0 };
    // Each layer alone stays under maxBytes (about 9 kB each); twenty of them are far over 4 x maxBytes.
    const layers = Array.from({ length: 20 }, (_, i) => table(i, `layer ${i}`, 100, 80, read));
    const refused = await writeExport({ format: "CSV", layers, title: "big", maxBytes: 10_000, dir }).catch(
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ExportTooLarge);
    expect((refused as ExportTooLarge).maxBytes).toBe(10_000);
    // What may be written before the export is refused: 4 x maxBytes of files, about 5 layers.
    expect(read.pages).toBeLessThanOrEqual(6);
  });

  it("gives every layer its own file even when a name made unique collides with another layer's", async () => {
    const read = { pages: 0 };
    // The third layer's name is taken; made unique with its id it is "A_1_2", the first layer's.
    const collide = [table(0, "A_1_2", 1, 1, read), table(1, "A_1", 1, 1, read), table(2, "A_1", 1, 1, read)];
    const file = await writeExport({ format: "CSV", layers: collide, title: "names", maxBytes: 1e6, dir });
    const { stdout } = await run("unzip", ["-Z1", file.path]);
    expect(new Set(stdout.trim().split("\n")).size).toBe(3);
  });

  it("calls progress while zipping, after the last page is read, so that the job keeps its lease", async () => {
    const steps: string[] = [];
    const layers = [0, 1, 2].map((i) => {
      const layer = table(i, `layer ${i}`, 150, 10, { pages: 0 });
      const pages = layer.pages.bind(layer);
      layer.pages = async function* (...args) {
        for await (const page of pages(...args)) {
          steps.push("page");
          yield page;
        }
      };
      return layer;
    });
    for (const format of ["CSV", "Shapefile"] as const) {
      steps.length = 0;
      const file = await writeExport({
        format,
        layers,
        title: format,
        maxBytes: 1e6,
        dir: fs.mkdtempSync(path.join(dir, format)),
        progress: async () => {
          steps.push("progress");
        },
      });
      const { stdout } = await run("unzip", ["-Z1", file.path]);
      const entries = stdout.trim().split("\n").length;
      // One call before each entry of the archive, once every page is read.
      expect(steps.slice(steps.lastIndexOf("page") + 1)).toEqual(Array(entries).fill("progress"));
    }
  });

  it("keeps a point layer's attributes named like the x and y columns: the coordinate columns get a suffix", async () => {
    const oid = field("OBJECTID", "esriFieldTypeOID");
    const fields = [oid, field("X", "esriFieldTypeDouble"), field("y", "esriFieldTypeString", 20)];
    const layer: ExportLayerSource = {
      info: { id: 0, where: "", includeGeometry: true, xColumnName: "x", yColumnName: "y" },
      name: "points",
      schema: {
        id: 0,
        kind: "layer",
        geometryType: "esriGeometryPoint",
        fields,
        objectIdField: oid,
        hasZ: false,
        hasM: false,
      } as unknown as LayerSchema,
      definition: { name: "points" },
      async *pages() {
        yield {
          features: [{ attributes: { OBJECTID: 1, X: 42, y: "north" }, geometry: { x: 2.5, y: 48.5 } }],
        };
      },
    };
    const file = await writeExport({ format: "CSV", layers: [layer], title: "points", maxBytes: 1e6, dir });
    const lines = fs.readFileSync(file.path, "utf8").trim().split("\r\n");
    expect(lines).toEqual(["OBJECTID,X,y,x_1,y_1", "1,42,north,2.5,48.5"]);
  });

  it("names the coordinate columns apart from every field and from each other", () => {
    const named = (...names: string[]) => names.map((name) => ({ name }));
    expect(coordinateColumns(named("a"), "x", "y")).toEqual(["x", "y"]);
    expect(coordinateColumns(named("x", "x_1"), "x", "y")).toEqual(["x_2", "y"]);
    // x may not take the name y asks for, nor y the name x was given.
    expect(coordinateColumns(named("lon"), "lon", "lon_1")).toEqual(["lon_2", "lon_1"]);
    expect(coordinateColumns(named("lat"), "lat_1", "lat")).toEqual(["lat_1", "lat_2"]);
  });
});
