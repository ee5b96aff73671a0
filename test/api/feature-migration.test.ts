import { sql } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Db, openDatabase } from "../../src/db/database.js";
import { migrateTo, migrateToLatest } from "../../src/db/migrate.js";
import { engine, newStore, type TestStore } from "../helpers/portico.js";

/**
 * Migration 0010 gives the layers of services created before it a table each; a layer whose
 * definition cannot hold data (earlier versions accepted a layer without a geometry type) gets
 * none, and the migration still completes.
 */
describe("feature layer storage for services created before migration 0010", () => {
  let store: TestStore;
  let db: Db;
  beforeEach(async () => {
    store = newStore();
    db = await openDatabase({
      databaseUrl: engine === "postgres" ? process.env.PORTICO_TEST_DATABASE_URL : undefined,
      dataDir: store.dataDir,
      schema: store.schema,
    });
  });
  afterEach(async () => {
    await db.close();
    await store.destroy();
  });

  const itemId = "0123456789abcdef0123456789abcdef";

  it("creates the tables of stored layers and skips those that cannot hold data", async () => {
    await migrateTo(db, "0009-full-text-search");
    const now = Date.now();
    await sql`
      INSERT INTO users (id, username, username_key, full_name, first_name, last_name, email, description,
        password_hash, role, provider, user_type, access, tags, created, modified, last_login)
      VALUES ('u1', 'pub', 'pub', '', '', '', '', '', 'x', 'org_publisher', 'arcgis', 'creatorUT', 'org', '[]',
        ${now}, ${now}, ${now})
    `.execute(db.writer);
    await sql`
      INSERT INTO items (id, owner_id, owner, owner_key, title, title_key, type, type_key, type_keywords,
        description, snippet, tags, access, created, modified)
      VALUES (${itemId}, 'u1', 'pub', 'pub', 'Old', 'old', 'Feature Service', 'feature service', '[]', '', '', '[]',
        'private', ${now}, ${now})
    `.execute(db.writer);
    const layers = [
      {
        id: 0,
        name: "Wells",
        geometryType: "esriGeometryPoint",
        fields: [{ name: "depth", type: "esriFieldTypeDouble" }],
      },
      { id: 1, name: "Shapeless" },
    ];
    const tables = [{ id: 2, name: "Visits", fields: [{ name: "note", type: "esriFieldTypeString" }] }];
    await sql`
      INSERT INTO feature_services (item_id, name, name_key, definition, layers, tables, is_view, created, modified)
      VALUES (${itemId}, 'Old', 'old', ${JSON.stringify({ spatialReference: { wkid: 4326 } })},
        ${JSON.stringify(layers)}, ${JSON.stringify(tables)}, 0, ${now}, ${now})
    `.execute(db.writer);

    await migrateToLatest(db);

    const registered = await db.kysely
      .selectFrom("feature_layers")
      .select(["layer_id", "table_name", "next_object_id"])
      .where("item_id", "=", itemId)
      .orderBy("layer_id")
      .execute();
    expect(registered).toEqual([
      { layer_id: 0, table_name: `fl_${itemId}_0`, next_object_id: 1 },
      { layer_id: 2, table_name: `fl_${itemId}_2`, next_object_id: 1 },
    ]);
    // The tables take rows with the fields' columns.
    await sql`INSERT INTO ${sql.id(`fl_${itemId}_0`)} (objectid, f_depth, shape, minx, miny, maxx, maxy)
      VALUES (1, 12.5, '{"x":1,"y":2}', 1, 2, 1, 2)`.execute(db.writer);
    await sql`INSERT INTO ${sql.id(`fl_${itemId}_2`)} (objectid, f_note) VALUES (1, 'ok')`.execute(db.writer);
    const depth = await sql<{ d: number }>`SELECT f_depth AS d FROM ${sql.id(`fl_${itemId}_0`)}`.execute(
      db.kysely,
    );
    expect(depth.rows).toEqual([{ d: 12.5 }]);
  });
});
