import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engine, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * The layer-level admin operations (`<admin>/services/<name>/FeatureServer/<layerId>/addToDefinition`,
 * `updateDefinition`, `deleteFromDefinition`) through the REST API, with the layer's table read
 * straight from the database: every change reaches the definition and the columns together, or
 * neither. Expected values are the hand-made features below.
 */

type User = { username: string; password: string; token: string };

const TOWN_FIELDS = [
  { name: "name", type: "esriFieldTypeString", alias: "Name", length: 20 },
  { name: "pop", type: "esriFieldTypeInteger", alias: "Population" },
];
/** Object ids 1..3 in this order. */
const TOWNS = [
  { attributes: { name: "Oslo", pop: 700 }, geometry: { x: 10.75, y: 59.91 } },
  { attributes: { name: "Bergen", pop: 285 }, geometry: { x: 5.32, y: 60.39 } },
  { attributes: { name: "Suva", pop: null }, geometry: { x: 178.44, y: -18.14 } },
];

describe("layer admin: addToDefinition, updateDefinition, deleteFromDefinition of a layer", () => {
  let portal: TestPortal;
  let owner: User;
  let server: string;
  let serial = 0;
  /** PostgreSQL with PostGIS keeps the geometry as PostGIS reads it too (layer-store.ts). */
  const geometryColumn = () => (portal.portico.db.postgis ? ["geom"] : []);

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("la_owner", "org_publisher");
    server = portal.api.replace(/\/sharing\/rest$/, "/rest");
  });
  afterAll(async () => {
    await portal.stop();
  });

  /**
   * A new service of the owner's: layer 0 "Towns" holding TOWNS, layer 1 "Empty" (points, no
   * features) and table 2 "Notes"; more properties of the service from `createParameters`.
   */
  async function newService(
    createParameters: Record<string, unknown> = {},
    fields: Record<string, unknown>[] = TOWN_FIELDS,
  ) {
    const name = `Admin_${++serial}`;
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name, ...createParameters }, outputType: "featureService" },
      owner.token,
    );
    expect(created.success, JSON.stringify(created)).toBe(true);
    const added = await portal.post(
      `${server}/admin/services/${name}/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            { name: "Towns", geometryType: "esriGeometryPoint", spatialReference: { wkid: 4326 }, fields },
            { name: "Empty", geometryType: "esriGeometryPoint", fields },
          ],
          tables: [{ name: "Notes", fields: [{ name: "text", type: "esriFieldTypeString" }] }],
        },
      },
      owner.token,
    );
    expect(added.success, JSON.stringify(added)).toBe(true);
    const adds = await portal.post(
      `${server}/services/${name}/FeatureServer/0/addFeatures`,
      { features: TOWNS },
      owner.token,
    );
    expect(adds.addResults.map((r: { success: boolean }) => r.success)).toEqual([true, true, true]);
    const admin = (layer: number, op: string, params: Record<string, unknown>) =>
      portal.post(`${server}/admin/services/${name}/FeatureServer/${layer}/${op}`, params, owner.token);
    const layer = (id: number) =>
      portal.get(`${server}/services/${name}/FeatureServer/${id}`, {}, owner.token);
    const query = (id: number, params: Record<string, unknown>) =>
      portal.get(`${server}/services/${name}/FeatureServer/${id}/query`, params, owner.token);
    /**
     * The columns of a layer's table that hold its fields and geometry, as the database lists
     * them; `edit_moment` (every layer's bookkeeping of when each row changed, migration 0023)
     * is checked on its own.
     */
    const columns = async (id: number): Promise<string[]> => {
      const all = await tableColumns(id);
      expect(all).toContain("edit_moment");
      return all.filter((c) => c !== "edit_moment");
    };
    const tableColumns = async (id: number): Promise<string[]> => {
      const table = `fl_${created.itemId}_${id}`;
      const db = portal.portico.services.db.kysely;
      if (engine === "postgres") {
        const r = await sql<{ column_name: string }>`
          SELECT column_name FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = ${table}
          ORDER BY ordinal_position
        `.execute(db);
        return r.rows.map((c) => c.column_name);
      }
      const r = await sql<{
        name: string;
      }>`SELECT name FROM pragma_table_info(${table}) ORDER BY cid`.execute(db);
      return r.rows.map((c) => c.name);
    };
    return { name, itemId: created.itemId as string, admin, layer, query, columns };
  }

  const fieldNames = (resource: { fields: { name: string }[] }) => resource.fields.map((f) => f.name);
  const attributes = (answer: { features: { attributes: Record<string, unknown> }[] }) =>
    answer.features.map((f) => f.attributes);

  it("adds fields to a layer with rows: the rows read back with the field's default, or null", async () => {
    const s = await newService();
    const before = await s.layer(0);
    const events = (await outbox(portal)).filter((e) => e.object_id === s.itemId).length;
    const r = await s.admin(0, "addToDefinition", {
      addToDefinition: {
        fields: [
          { name: "note", type: "esriFieldTypeString", length: 40 },
          { name: "score", type: "esriFieldTypeInteger", defaultValue: 7 },
          // ArcGIS's own examples spell the default as a SQL Server column default.
          { name: "grade", type: "esriFieldTypeString", nullable: false, defaultValue: "'B' WITH VALUES" },
        ],
        indexes: [{ name: "score_idx", fields: "score" }],
      },
    });
    expect(r).toEqual({ success: true });

    const answer = await s.query(0, { where: "1=1", outFields: "*", orderByFields: "OBJECTID" });
    expect(attributes(answer)).toEqual([
      { OBJECTID: 1, name: "Oslo", pop: 700, note: null, score: 7, grade: "B" },
      { OBJECTID: 2, name: "Bergen", pop: 285, note: null, score: 7, grade: "B" },
      { OBJECTID: 3, name: "Suva", pop: null, note: null, score: 7, grade: "B" },
    ]);
    // The new fields are fields like the others: a where on them, and defaults for new features.
    expect(await s.query(0, { where: "score = 7 AND grade = 'B'", returnCountOnly: true })).toEqual({
      count: 3,
    });
    const added = await portal.post(
      `${server}/services/${s.name}/FeatureServer/0/addFeatures`,
      { features: [{ attributes: { name: "Apia", note: "new" }, geometry: { x: -171.76, y: -13.83 } }] },
      owner.token,
    );
    expect(added.addResults[0].success).toBe(true);
    expect(attributes(await s.query(0, { objectIds: "4", outFields: "note,score,grade" }))).toEqual([
      { OBJECTID: 4, note: "new", score: 7, grade: "B" },
    ]);

    const after = await s.layer(0);
    expect(after.fields.slice(3)).toEqual([
      expect.objectContaining({ name: "note", type: "esriFieldTypeString", length: 40, nullable: true }),
      expect.objectContaining({ name: "score", type: "esriFieldTypeInteger", defaultValue: 7 }),
      expect.objectContaining({ name: "grade", nullable: false, defaultValue: "B" }),
    ]);
    expect(after.editingInfo.lastEditDate).toBeGreaterThan(before.editingInfo.lastEditDate);
    expect(await s.columns(0)).toEqual([
      "objectid",
      "f_name",
      "f_pop",
      "shape",
      "minx",
      "miny",
      "maxx",
      "maxy",
      ...geometryColumn(),
      "f_note",
      "f_score",
      "f_grade",
    ]);
    // The item's update event, written with the change.
    expect((await outbox(portal)).filter((e) => e.object_id === s.itemId).length).toBeGreaterThan(events);
  });

  it("refuses a not-nullable field without a default on a layer with rows, accepts it on an empty one", async () => {
    const s = await newService();
    const required = { name: "code", type: "esriFieldTypeInteger", nullable: false };
    const refused = await s.admin(0, "addToDefinition", { addToDefinition: { fields: [required] } });
    expect(refused.error.code).toBe(400);
    expect(refused.error.message).toMatch(/not nullable and has no defaultValue/);
    expect(fieldNames(await s.layer(0))).toEqual(["OBJECTID", "name", "pop"]);
    expect(await s.columns(0)).not.toContain("f_code");

    expect(await s.admin(1, "addToDefinition", { addToDefinition: { fields: [required] } })).toEqual({
      success: true,
    });
    expect(await s.columns(1)).toContain("f_code");
    // A feature must now give it.
    const add = await portal.post(
      `${server}/services/${s.name}/FeatureServer/1/addFeatures`,
      { features: [{ attributes: { name: "x" }, geometry: { x: 1, y: 1 } }] },
      owner.token,
    );
    expect(add.addResults[0]).toMatchObject({ success: false, error: { code: 1001 } });
  });

  it("refuses names already used (in any case), defaults the field cannot hold, and SQL expressions", async () => {
    const s = await newService();
    const tries = [
      { name: "POP", type: "esriFieldTypeDouble" },
      { name: "objectid", type: "esriFieldTypeInteger" },
      { name: "n", type: "esriFieldTypeInteger", defaultValue: "many" },
      { name: "d", type: "esriFieldTypeDate", defaultValue: "GetDate() WITH VALUES" },
      { name: "k", type: "esriFieldTypeOID" },
      { name: "bad name", type: "esriFieldTypeString" },
    ];
    for (const field of tries) {
      const r = await s.admin(0, "addToDefinition", { addToDefinition: { fields: [field] } });
      expect(r.error?.code, JSON.stringify(field)).toBe(400);
    }
    expect(fieldNames(await s.layer(0))).toEqual(["OBJECTID", "name", "pop"]);
  });

  it("adds a GlobalID field to a layer with rows: each feature gets one of its own", async () => {
    const s = await newService();
    const r = await s.admin(0, "addToDefinition", {
      addToDefinition: { fields: [{ name: "GlobalID", type: "esriFieldTypeGlobalID" }] },
    });
    expect(r).toEqual({ success: true });
    expect((await s.layer(0)).globalIdField).toBe("GlobalID");
    const ids = attributes(await s.query(0, { where: "1=1", outFields: "GlobalID" })).map((a) => a.GlobalID);
    expect(ids).toHaveLength(3);
    for (const id of ids)
      expect(id).toMatch(/^\{[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}\}$/);
    expect(new Set(ids).size).toBe(3);
  });

  it("deletes a field: its column goes, queries no longer list it, a where on it is refused", async () => {
    const s = await newService();
    await s.admin(0, "updateDefinition", { updateDefinition: { displayField: "pop" } });
    const before = await s.layer(0);
    const r = await s.admin(0, "deleteFromDefinition", {
      deleteFromDefinition: { fields: [{ name: "POP" }] },
    });
    expect(r).toEqual({ success: true });

    const answer = await s.query(0, { where: "1=1", outFields: "*", orderByFields: "OBJECTID" });
    expect(fieldNames(answer)).toEqual(["OBJECTID", "name"]);
    expect(attributes(answer)).toEqual([
      { OBJECTID: 1, name: "Oslo" },
      { OBJECTID: 2, name: "Bergen" },
      { OBJECTID: 3, name: "Suva" },
    ]);
    expect((await s.query(0, { where: "pop > 1" })).error?.code).toBe(400);
    expect((await s.query(0, { where: "1=1", outFields: "pop" })).error?.code).toBe(400);
    const after = await s.layer(0);
    expect(fieldNames(after)).toEqual(["OBJECTID", "name"]);
    // The display field named the deleted field: it falls back to the first text field.
    expect(after.displayField).toBe("name");
    expect(after.editingInfo.lastEditDate).toBeGreaterThan(before.editingInfo.lastEditDate);
    expect(await s.columns(0)).toEqual([
      "objectid",
      "f_name",
      "shape",
      "minx",
      "miny",
      "maxx",
      "maxy",
      ...geometryColumn(),
    ]);
    // Features are still edited and found by their geometry (the R*Tree triggers on SQLite).
    const moved = await portal.post(
      `${server}/services/${s.name}/FeatureServer/0/updateFeatures`,
      { features: [{ attributes: { OBJECTID: 1 }, geometry: { x: 11, y: 60 } }] },
      owner.token,
    );
    expect(moved.updateResults[0].success).toBe(true);
    const near = await s.query(0, {
      geometry: { xmin: 10.9, ymin: 59.9, xmax: 11.1, ymax: 60.1 },
      geometryType: "esriGeometryEnvelope",
      returnIdsOnly: true,
    });
    expect(near.objectIds).toEqual([1]);
    // A name freed by a deletion may be added again: a new, empty column.
    await s.admin(0, "addToDefinition", {
      addToDefinition: { fields: [{ name: "pop", type: "esriFieldTypeDouble" }] },
    });
    expect(attributes(await s.query(0, { objectIds: "1", outFields: "pop" }))).toEqual([
      { OBJECTID: 1, pop: null },
    ]);
  });

  it("refuses to delete the object id, GlobalID and editor-tracking fields", async () => {
    const s = await newService({ editorTrackingInfo: { enableEditorTracking: true } }, [
      ...TOWN_FIELDS,
      { name: "GlobalID", type: "esriFieldTypeGlobalID" },
    ]);
    const before = await s.columns(0);
    expect(before).toEqual(expect.arrayContaining(["f_globalid", "f_creator", "f_editdate"]));
    for (const name of ["OBJECTID", "globalid", "Creator", "CreationDate", "Editor", "EditDate"]) {
      const r = await s.admin(0, "deleteFromDefinition", { deleteFromDefinition: { fields: [{ name }] } });
      expect(r.error?.code, name).toBe(400);
      expect(r.error.message).toMatch(/cannot delete field/);
    }
    expect(await s.columns(0)).toEqual(before);
    const missing = await s.admin(0, "deleteFromDefinition", {
      deleteFromDefinition: { fields: [{ name: "nope" }] },
    });
    expect(missing.error?.code).toBe(400);
  });

  it("updates the layer's name, alias, capabilities and hasAttachments, shown in its resource", async () => {
    const s = await newService();
    const r = await s.admin(0, "updateDefinition", {
      updateDefinition: {
        name: "Cities",
        description: "Towns and cities",
        capabilities: "query,editing,create",
        hasAttachments: true,
        maxRecordCount: 500,
        fields: [{ name: "NAME", alias: "Town name" }],
      },
    });
    expect(r).toEqual({ success: true });
    const layer = await s.layer(0);
    expect(layer).toMatchObject({
      name: "Cities",
      description: "Towns and cities",
      capabilities: "Query,Editing,Create",
      hasAttachments: true,
      maxRecordCount: 500,
    });
    expect(layer.fields[1]).toMatchObject({
      name: "name",
      alias: "Town name",
      type: "esriFieldTypeString",
      length: 20,
    });
    const service = await portal.get(`${server}/services/${s.name}/FeatureServer`, {}, owner.token);
    expect(service.layers.map((l: { name: string }) => l.name)).toEqual(["Cities", "Empty"]);
    // The rows are as they were.
    expect(await s.query(0, { where: "1=1", returnCountOnly: true })).toEqual({ count: 3 });
    // Another layer's name, in any case, is refused.
    const clash = await s.admin(0, "updateDefinition", { updateDefinition: { name: "EMPTY" } });
    expect(clash.error?.code).toBe(400);
  });

  it("refuses to change a field's type or length, and names the reason", async () => {
    const s = await newService();
    const type = await s.admin(0, "updateDefinition", {
      updateDefinition: { fields: [{ name: "pop", type: "esriFieldTypeString" }] },
    });
    expect(type.error.code).toBe(400);
    expect(type.error.message).toMatch(/cannot change the type of field 'pop'/);
    const length = await s.admin(0, "updateDefinition", {
      updateDefinition: { fields: [{ name: "name", length: 200 }] },
    });
    expect(length.error.message).toMatch(/cannot change the length of field 'name' from 20 to 200/);
    // The same type and length, as clients send the whole field back, are no change.
    const same = await s.admin(0, "updateDefinition", {
      updateDefinition: { fields: [{ name: "name", type: "esriFieldTypeString", length: 20, alias: "N" }] },
    });
    expect(same).toEqual({ success: true });
  });

  it("makes a field not nullable only when every row holds a value in it", async () => {
    const s = await newService();
    const pop = await s.admin(0, "updateDefinition", {
      updateDefinition: { fields: [{ name: "pop", nullable: false }] },
    });
    expect(pop.error.message).toMatch(/cannot make field 'pop' not nullable/);
    expect((await s.layer(0)).fields[2].nullable).toBe(true);
    const name = await s.admin(0, "updateDefinition", {
      updateDefinition: { fields: [{ name: "name", nullable: false }] },
    });
    expect(name).toEqual({ success: true });
    expect((await s.layer(0)).fields[1].nullable).toBe(false);
  });

  it("changes the geometry type of an empty layer only; not the spatial reference of one with rows", async () => {
    const s = await newService();
    const held = await s.admin(0, "updateDefinition", {
      updateDefinition: { geometryType: "esriGeometryPolygon" },
    });
    expect(held.error.message).toMatch(/cannot change the geometryType of layer 0/);
    const sr = await s.admin(0, "updateDefinition", {
      updateDefinition: { spatialReference: { wkid: 3857 } },
    });
    expect(sr.error?.code).toBe(400);
    expect((await s.layer(0)).geometryType).toBe("esriGeometryPoint");

    expect(
      await s.admin(1, "updateDefinition", { updateDefinition: { geometryType: "esriGeometryPolygon" } }),
    ).toEqual({ success: true });
    expect((await s.layer(1)).geometryType).toBe("esriGeometryPolygon");
    const ring = [
      [0, 0],
      [0, 1],
      [1, 1],
      [1, 0],
      [0, 0],
    ];
    const add = await portal.post(
      `${server}/services/${s.name}/FeatureServer/1/addFeatures`,
      { features: [{ attributes: {}, geometry: { rings: [ring] } }] },
      owner.token,
    );
    expect(add.addResults[0].success).toBe(true);
  });

  it("changes nothing when one field of a request is refused: neither the definition nor the columns", async () => {
    const s = await newService();
    const definition = await s.layer(0);
    const columns = await s.columns(0);
    const unchanged = async () => {
      const now = await s.layer(0);
      expect(now.fields).toEqual(definition.fields);
      expect(now.name).toBe(definition.name);
      expect(now.editingInfo.lastEditDate).toBe(definition.editingInfo.lastEditDate);
      expect(await s.columns(0)).toEqual(columns);
    };

    const add = await s.admin(0, "addToDefinition", {
      addToDefinition: {
        fields: [
          { name: "good", type: "esriFieldTypeInteger" },
          { name: "also_good", type: "esriFieldTypeString", defaultValue: "x" },
          { name: "9bad", type: "esriFieldTypeInteger" },
        ],
      },
    });
    expect(add.error?.code).toBe(400);
    await unchanged();

    const twice = await s.admin(0, "addToDefinition", {
      addToDefinition: {
        fields: [
          { name: "twin", type: "esriFieldTypeInteger" },
          { name: "TWIN", type: "esriFieldTypeInteger" },
        ],
      },
    });
    expect(twice.error?.code).toBe(400);
    await unchanged();

    const del = await s.admin(0, "deleteFromDefinition", {
      deleteFromDefinition: { fields: [{ name: "pop" }, { name: "OBJECTID" }] },
    });
    expect(del.error?.code).toBe(400);
    await unchanged();

    const update = await s.admin(0, "updateDefinition", {
      updateDefinition: {
        name: "Renamed",
        fields: [
          { name: "name", alias: "changed" },
          { name: "pop", type: "esriFieldTypeDouble" },
        ],
      },
    });
    expect(update.error?.code).toBe(400);
    await unchanged();

    // Refused by what the rows hold (read in the transaction), after the definition was worked out.
    const nulls = await s.admin(0, "updateDefinition", {
      updateDefinition: {
        name: "Renamed",
        fields: [
          { name: "name", alias: "changed" },
          { name: "pop", nullable: false },
        ],
      },
    });
    expect(nulls.error?.code).toBe(400);
    await unchanged();
  });

  it("undoes the columns already changed when the database fails midway through a request", async () => {
    const s = await newService();
    const table = `fl_${s.itemId}_0`;
    const db = portal.portico.services.db.kysely;
    // A column the definition does not know: adding a field of that name fails in the database,
    // after the first field's column was added in the same transaction.
    await sql`ALTER TABLE ${sql.id(table)} ADD COLUMN f_second INTEGER`.execute(db);
    const columns = await s.columns(0);
    const definition = await s.layer(0);
    const add = await s.admin(0, "addToDefinition", {
      addToDefinition: {
        fields: [
          { name: "first", type: "esriFieldTypeInteger", defaultValue: 1 },
          { name: "second", type: "esriFieldTypeInteger" },
        ],
      },
    });
    expect(add.error?.code).toBe(500);
    expect(await s.columns(0)).toEqual(columns);
    expect((await s.layer(0)).fields).toEqual(definition.fields);

    // And the other way: a field whose column is gone fails to drop after the first one dropped.
    await sql`ALTER TABLE ${sql.id(table)} DROP COLUMN f_second`.execute(db);
    await sql`ALTER TABLE ${sql.id(table)} DROP COLUMN f_pop`.execute(db);
    const without = await s.columns(0);
    const del = await s.admin(0, "deleteFromDefinition", {
      deleteFromDefinition: { fields: [{ name: "name" }, { name: "pop" }] },
    });
    expect(del.error?.code).toBe(500);
    expect(await s.columns(0)).toEqual(without);
    expect(fieldNames(await s.layer(0))).toEqual(["OBJECTID", "name", "pop"]);
    expect(attributes(await s.query(0, { objectIds: "1", outFields: "name" }))).toEqual([
      { OBJECTID: 1, name: "Oslo" },
    ]);
  });

  it("answers a missing layer as missing, and refuses requests that are not ArcGIS JSON", async () => {
    const s = await newService();
    const missing = await s.admin(7, "addToDefinition", {
      addToDefinition: { fields: [{ name: "x", type: "esriFieldTypeInteger" }] },
    });
    expect(missing.error).toMatchObject({ code: 400, messageCode: "SVC_0003" });
    const untyped = await s.admin(0, "addToDefinition", { addToDefinition: { fields: [{ name: "x" }] } });
    expect(untyped.error?.code).toBe(400);
    const empty = await s.admin(0, "deleteFromDefinition", { deleteFromDefinition: {} });
    expect(empty.error?.code).toBe(400);
    const caps = await s.admin(0, "updateDefinition", { updateDefinition: { capabilities: "Query,Fly" } });
    expect(caps.error?.code).toBe(400);
  });

  it("adds and drops fields of a table", async () => {
    const s = await newService();
    const table = 2;
    const add = await portal.post(
      `${server}/services/${s.name}/FeatureServer/${table}/addFeatures`,
      { features: [{ attributes: { text: "hello" } }] },
      owner.token,
    );
    expect(add.addResults[0].success).toBe(true);
    await s.admin(table, "addToDefinition", {
      addToDefinition: { fields: [{ name: "n", type: "esriFieldTypeDouble", defaultValue: 1.5 }] },
    });
    await s.admin(table, "deleteFromDefinition", { deleteFromDefinition: { fields: [{ name: "text" }] } });
    expect(attributes(await s.query(table, { where: "1=1", outFields: "*" }))).toEqual([
      { OBJECTID: 1, n: 1.5 },
    ]);
    expect(await s.columns(table)).toEqual(["objectid", "f_n"]);
    const geometry = await s.admin(table, "updateDefinition", {
      updateDefinition: { geometryType: "esriGeometryPoint" },
    });
    expect(geometry.error?.code).toBe(400);
  });
});
