import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Item resources (`addResources`, `content/items/<id>/resources/<path>`) are item files of kind
 * `resources/<path>`, stored in chunks as every item file is (0007). ArcGIS lists each resource
 * with the time it was added and its access (`inherit`, or `private` to the owner and
 * administrators); both are columns of the file's row, null for the other kinds of files.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema.alterTable("item_files").addColumn("created", "bigint").execute();
  await db.schema.alterTable("item_files").addColumn("access", "text").execute();
}
