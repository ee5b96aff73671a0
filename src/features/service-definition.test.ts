import { describe, expect, it } from "vitest";
import { PorticoError } from "../errors.js";
import { p } from "../validation/params.js";
import {
  addLayerFields,
  addToDefinition,
  addToDefinitionSchema,
  deleteLayerFields,
  readDefaultValue,
  type StoredService,
  updateLayerDefinition,
} from "./service-definition.js";

const service = (ids: number[]): StoredService => ({
  name: "S",
  definition: {},
  layers: ids.map((id) => ({ id, name: `L${id}` })),
  tables: [],
});

describe("layer and table ids", () => {
  const spec = p.json(addToDefinitionSchema);

  it("refuses an id above 999,999,999, which no layer URL could reach", () => {
    expect(spec.parse('{"layers":[{"name":"a","id":999999999}]}').ok).toBe(true);
    for (const id of ["1000000000", "1e300"]) {
      expect(spec.parse(`{"layers":[{"name":"a","id":${id}}]}`).ok).toBe(false);
    }
  });

  it("assigns ids after the highest, and refuses to assign one beyond the highest allowed", () => {
    expect(addToDefinition(service([0, 7]), { layers: [{ name: "new" }] }).added.layers).toEqual([
      { name: "new", id: 8 },
    ]);
    expect(() => addToDefinition(service([999_999_999]), { layers: [{ name: "new" }] })).toThrow(
      PorticoError,
    );
    // An explicit free id still fits.
    expect(
      addToDefinition(service([999_999_999]), { layers: [{ name: "new", id: 3 }] }).added.layers,
    ).toEqual([{ name: "new", id: 3 }]);
  });
});

describe("one layer's definition", () => {
  const towns = (): StoredService => ({
    name: "S",
    definition: { spatialReference: { wkid: 4326 } },
    layers: [
      {
        id: 0,
        name: "Towns",
        geometryType: "esriGeometryPoint",
        displayField: "pop",
        fields: [
          { name: "OBJECTID", type: "esriFieldTypeOID" },
          { name: "name", type: "esriFieldTypeString", length: 20 },
          { name: "pop", type: "esriFieldTypeInteger" },
        ],
      },
    ],
    tables: [{ id: 1, name: "Notes", fields: [] }],
  });
  const rows = { hasRows: true };
  const empty = { hasRows: false };

  it("reads ArcGIS's SQL Server defaults as their values, and refuses expressions", () => {
    const read = (defaultValue: unknown) =>
      readDefaultValue({ name: "f", defaultValue }, "addToDefinition").defaultValue;
    expect(read("'it''s' WITH VALUES")).toBe("it's");
    expect(read("42 with values")).toBe(42);
    expect(read("NULL WITH VALUES")).toBe(null);
    expect(read("plain text")).toBe("plain text");
    expect(read(3)).toBe(3);
    expect(() => read("GetDate() WITH VALUES")).toThrow(/SQL expression/);
  });

  it("adds a not-nullable field without a default to an empty layer only", () => {
    const field = { name: "code", type: "esriFieldTypeInteger", nullable: false };
    expect(() => addLayerFields(towns(), 0, { fields: [field] }, rows)).toThrow(/not nullable/);
    const added = addLayerFields(towns(), 0, { fields: [field] }, empty);
    expect(added.added.map((f) => [f.name, f.column, f.nullable])).toEqual([["code", "f_code", false]]);
  });

  it("gives added fields their default as the column holds it, and refuses taken names in any case", () => {
    const added = addLayerFields(
      towns(),
      0,
      { fields: [{ name: "score", type: "esriFieldTypeInteger", defaultValue: "7" }] },
      rows,
    );
    expect(added.added[0]?.defaultValue).toBe(7);
    expect(added.service.layers[0]?.fields).toHaveLength(4);
    expect(() =>
      addLayerFields(towns(), 0, { fields: [{ name: "NAME", type: "esriFieldTypeString" }] }, rows),
    ).toThrow(/already has a field named 'name'/);
    expect(() =>
      addLayerFields(
        towns(),
        0,
        { fields: [{ name: "r", type: "esriFieldTypeSmallInteger", defaultValue: 1e6 }] },
        rows,
      ),
    ).toThrow(/defaultValue it cannot hold/);
  });

  it("deletes fields but not the object id field, and forgets a display field it named", () => {
    const result = deleteLayerFields(towns(), 0, { fields: [{ name: "POP" }] });
    expect(result.dropped.map((f) => f.column)).toEqual(["f_pop"]);
    expect(result.service.layers[0]?.displayField).toBeUndefined();
    expect(() => deleteLayerFields(towns(), 0, { fields: [{ name: "objectid" }] })).toThrow(
      /object id field/,
    );
    expect(() => deleteLayerFields(towns(), 5, { fields: [{ name: "pop" }] })).toThrow(PorticoError);
  });

  it("tells a schema change from a change of presentation, and which fields became required", () => {
    const described = updateLayerDefinition(towns(), 0, { description: "d", drawingInfo: null }, rows);
    expect(described.schemaChanged).toBe(false);
    const aliased = updateLayerDefinition(towns(), 0, { fields: [{ name: "pop", alias: "People" }] }, rows);
    expect(aliased.schemaChanged).toBe(true);
    expect(aliased.required).toEqual([]);
    const required = updateLayerDefinition(towns(), 0, { fields: [{ name: "Pop", nullable: false }] }, rows);
    expect(required.required.map((f) => f.name)).toEqual(["pop"]);
  });

  it("keeps what the rows depend on: field types and lengths, and the geometry once there are rows", () => {
    expect(() =>
      updateLayerDefinition(towns(), 0, { fields: [{ name: "pop", type: "esriFieldTypeDouble" }] }, empty),
    ).toThrow(/type of field 'pop'/);
    expect(() =>
      updateLayerDefinition(towns(), 0, { fields: [{ name: "name", length: 30 }] }, empty),
    ).toThrow(/length of field 'name' from 20 to 30/);
    expect(() => updateLayerDefinition(towns(), 0, { geometryType: "esriGeometryPolyline" }, rows)).toThrow(
      /geometryType/,
    );
    const changed = updateLayerDefinition(towns(), 0, { geometryType: "esriGeometryPolyline" }, empty);
    expect(changed.schema.geometryType).toBe("esriGeometryPolyline");
    expect(changed.schemaChanged).toBe(true);
    expect(() => updateLayerDefinition(towns(), 0, { objectIdField: "pop" }, empty)).toThrow(/objectIdField/);
    expect(() => updateLayerDefinition(towns(), 0, { spatialReference: { wkid: 3857 } }, empty)).toThrow(
      /must share wkid 4326/,
    );
    expect(() => updateLayerDefinition(towns(), 1, { geometryType: "esriGeometryPoint" }, empty)).toThrow(
      /table 1/,
    );
  });
});
