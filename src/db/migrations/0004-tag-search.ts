import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * `tags:` searches read the item rows of every item carrying the tag (two random B-tree lookups
 * each, on SQLite's text primary key) and sort them, about 1 ms per request for 300 items. Copying
 * the columns a search needs (modified, access, owner_id) into `item_tags` lets one index range
 * scan count the visible matches and read a page in order, stopping after `num` rows, as the
 * owner and type indexes of 0003 do.
 *
 * The copies follow the item through a trigger, so no code path that changes an item can leave
 * them stale; rows are written with the item's values by `replaceTags`.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  await db.schema
    .alterTable("item_tags")
    .addColumn("modified", "bigint", (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable("item_tags")
    .addColumn("access", "text", (c) => c.notNull().defaultTo("private"))
    .execute();
  await db.schema
    .alterTable("item_tags")
    .addColumn("owner_id", "text", (c) => c.notNull().defaultTo(""))
    .execute();
  await sql`
    UPDATE item_tags SET
      modified = (SELECT i.modified FROM items i WHERE i.id = item_tags.item_id),
      access = (SELECT i.access FROM items i WHERE i.id = item_tags.item_id),
      owner_id = (SELECT i.owner_id FROM items i WHERE i.id = item_tags.item_id)
  `.execute(db);
  await db.schema
    .createIndex("item_tags_search")
    .on("item_tags")
    .columns(["tag_key", "modified", "item_id", "access", "owner_id"])
    .execute();
  await db.schema.dropIndex("item_tags_tag").execute();

  if (engine === "sqlite") {
    await sql`
      CREATE TRIGGER item_tags_follow_item AFTER UPDATE OF modified, access, owner_id ON items
      FOR EACH ROW BEGIN
        UPDATE item_tags SET modified = NEW.modified, access = NEW.access, owner_id = NEW.owner_id
        WHERE item_id = NEW.id;
      END
    `.execute(db);
  } else {
    // Unqualified names resolve through the search_path, so the function serves the schema it is in.
    await sql`
      CREATE FUNCTION item_tags_follow_item() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE item_tags SET modified = NEW.modified, access = NEW.access, owner_id = NEW.owner_id
        WHERE item_id = NEW.id;
        RETURN NULL;
      END
      $$
    `.execute(db);
    await sql`
      CREATE TRIGGER item_tags_follow_item AFTER UPDATE OF modified, access, owner_id ON items
      FOR EACH ROW EXECUTE FUNCTION item_tags_follow_item()
    `.execute(db);
  }
}
