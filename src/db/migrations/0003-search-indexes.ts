import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Search counts every match the caller may see, so for `owner:` and `type:` the visibility columns
 * (access, owner_id, id) are read for thousands of rows per request. Carrying them in the index
 * answers the count from the index alone instead of one table lookup per row (about 5x faster for
 * a type with 5,000 items on SQLite). The leading (key, modified, id) columns are exactly the
 * page's order (newest first, id breaking ties), so the page is read in index order and stops
 * after `num` visible rows instead of sorting every match; these replace the indexes of 0002.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createIndex("items_owner_search")
    .on("items")
    .columns(["owner_key", "modified", "id", "access", "owner_id"])
    .execute();
  await db.schema
    .createIndex("items_type_search")
    .on("items")
    .columns(["type_key", "modified", "id", "access", "owner_id"])
    .execute();
  await db.schema.dropIndex("items_owner").execute();
  await db.schema.dropIndex("items_type").execute();
}
