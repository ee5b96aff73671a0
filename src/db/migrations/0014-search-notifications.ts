import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Issue 15's search and messaging tables.
 *
 * - An item's extent (WGS 84, as ArcGIS keeps it) in four columns, null when it has none, so that
 *   `/search?bbox=` is a range condition both engines index alike.
 * - An item's categories: a JSON copy on the item, which its resource shows, and one row per
 *   category in `item_categories`, which the `categories` search condition and the `categories`
 *   count read. The item repository writes both in the item's transaction.
 * - Notifications of users (`community/users/<u>/notifications`), built-in only: stored and listed,
 *   never mailed. They go with their user.
 * - A group's category schema, one JSON document per group, going with its group.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  const real = engine === "postgres" ? "double precision" : "real";
  // One column per statement: SQLite's ALTER TABLE adds one at a time.
  for (const column of ["extent_xmin", "extent_ymin", "extent_xmax", "extent_ymax"]) {
    await db.schema.alterTable("items").addColumn(column, real).execute();
  }
  await db.schema
    .alterTable("items")
    .addColumn("categories", "text", (c) => c.notNull().defaultTo("[]"))
    .execute();
  await db.schema.createIndex("items_extent").on("items").columns(["extent_xmin", "extent_xmax"]).execute();

  await db.schema
    .createTable("item_categories")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("category_key", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("item_categories_pk", ["item_id", "category_key"])
    .execute();
  await db.schema
    .createIndex("item_categories_key")
    .on("item_categories")
    .columns(["category_key"])
    .execute();

  await db.schema
    .createTable("user_notifications")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("type", "text", (c) => c.notNull())
    .addColumn("subject", "text", (c) => c.notNull())
    .addColumn("message", "text", (c) => c.notNull())
    .addColumn("data", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .execute();
  // A user's notifications are listed, and the oldest beyond the limit pruned, newest first.
  await db.schema
    .createIndex("user_notifications_user")
    .on("user_notifications")
    .columns(["user_id", "created", "id"])
    .execute();

  await db.schema
    .createTable("group_category_schemas")
    .addColumn("group_id", "text", (c) => c.primaryKey().references("groups.id").onDelete("cascade"))
    .addColumn("schema", "text", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
}
