import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * What a collaboration needs to copy hosted layers and then move only what changed.
 *
 * Origin side: every row of a layer table gets `edit_moment`, the layer's `data_last_edit_date`
 * of the edit that last wrote it (`layer-store.ts` `beginLayerEdit`), and a deleted row leaves
 * a tombstone in `feature_deletes` with the moment of its deletion. Those moments only grow in
 * the order edits commit (each edit of a layer updates, and on PostgreSQL locks, the layer's row
 * in `feature_layers` first), so "everything after moment m, up to the layer's current moment"
 * is exactly what changed since a reader saw m. Rows already there get 0: a first copy takes them.
 *
 * Receiver side: `collaboration_data_copies` says which received items hold their origin's data
 * (or fell back to a reference, and why), and `collaboration_layer_cursors` how far each of their
 * layers has come, written in the transaction of each batch of rows it applied.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  const bigint = engine === "postgres" ? "bigint" : "INTEGER";
  const tables = await sql<{ table_name: string }>`SELECT table_name FROM feature_layers`.execute(db);
  for (const { table_name } of tables.rows) {
    // Tables made by migration 0010 on this start already have it (it builds them as layer-store does now).
    if (await hasColumn(db, engine, table_name, "edit_moment")) continue;
    await sql`ALTER TABLE ${sql.id(table_name)} ADD COLUMN edit_moment ${sql.raw(bigint)} NOT NULL DEFAULT 0`.execute(
      db,
    );
    await sql`CREATE INDEX ${sql.id(`${table_name}_em`)} ON ${sql.id(table_name)} (edit_moment, objectid)`.execute(
      db,
    );
  }

  await db.schema
    .createTable("feature_deletes")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    .addColumn("object_id", "bigint", (c) => c.notNull())
    .addColumn("edit_moment", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("feature_deletes_pk", ["item_id", "layer_id", "object_id"])
    .execute();
  await db.schema
    .createIndex("feature_deletes_moment")
    .on("feature_deletes")
    .columns(["item_id", "layer_id", "edit_moment", "object_id"])
    .execute();

  await db.schema
    .createTable("collaboration_data_copies")
    /** The received copy (an item of this portal). */
    .addColumn("item_id", "text", (c) => c.primaryKey().references("items.id").onDelete("cascade"))
    /** `copy`: a hosted service of this portal; `reference`: the origin's URL (copyByRefIfCopyFail). */
    .addColumn("mode", "text", (c) => c.notNull())
    .addColumn("reason", "text")
    /** The origin service's definition version (`feature_services.modified`) last applied. */
    .addColumn("origin_modified", "bigint", (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("collaboration_layer_cursors")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    /** The last row applied, by (edit moment, object id), and the last tombstone applied. */
    .addColumn("rows_moment", "bigint", (c) => c.notNull())
    .addColumn("rows_oid", "bigint", (c) => c.notNull())
    .addColumn("deletes_moment", "bigint", (c) => c.notNull())
    .addColumn("deletes_oid", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("collaboration_layer_cursors_pk", ["item_id", "layer_id"])
    .execute();
}

async function hasColumn(
  db: Kysely<unknown>,
  engine: Engine,
  table: string,
  column: string,
): Promise<boolean> {
  if (engine === "sqlite") {
    const info = await sql<{ name: string }>`SELECT name FROM pragma_table_info(${table})`.execute(db);
    return info.rows.some((r) => r.name === column);
  }
  const found = await sql`
    SELECT 1 FROM pg_attribute
    WHERE attrelid = to_regclass(quote_ident(${table})) AND attname = ${column} AND NOT attisdropped
  `.execute(db);
  return found.rows.length > 0;
}
