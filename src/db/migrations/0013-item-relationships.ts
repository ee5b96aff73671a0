import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Relationships between items (`content/users/<u>/addRelationship`): a typed, directed link from
 * an origin item to a destination item, remembered with the user who made it (only they may
 * delete it, as ArcGIS documents). ArcGIS deletes a relationship with either of its items; both
 * foreign keys cascade, so no delete path can leave one behind.
 *
 * Item info files (`updateinfo`, the item's metadata) need no table: they are item files
 * (`item_files`), told apart by their kind.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createTable("item_relationships")
    .addColumn("origin_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("destination_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("type", "text", (c) => c.notNull())
    /** The user who added it (no foreign key: the relationship lives as long as its items). */
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("item_relationships_pk", ["origin_id", "destination_id", "type"])
    .execute();
  // relatedItems in the reverse direction looks relationships up by their destination.
  await db.schema
    .createIndex("item_relationships_destination")
    .on("item_relationships")
    .columns(["destination_id", "type"])
    .execute();
}
