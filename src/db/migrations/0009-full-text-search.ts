import { type Kysely, sql } from "kysely";
import { writeItemWords } from "../../content/word-index.js";
import type { Engine } from "../database.js";
import type { Database } from "../schema.js";

/**
 * A full-text index of the words of every item's title, description, snippet and tags, so that
 * a bare word of `q` is an index lookup rather than a `LIKE '%word%'` scan of every item (64
 * such words over 3,000 items with long descriptions took seconds). Words are made by
 * `content/words.ts`, not by either engine, so both find the same rows.
 *
 * - SQLite: an FTS5 table `item_words` (the `ascii` tokenizer keeps our words as they are) whose
 *   rowid is `item_search_docs.doc`, a stable integer per item; a trigger removes both when the
 *   item goes, however it goes.
 * - PostgreSQL: `item_words` holds one `tsvector` per field with a GIN index over them; the
 *   foreign key removes the row with its item.
 *
 * The repository (`content/item.repository.ts`) rewrites an item's row whenever it writes one of
 * those columns; existing items are indexed here.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  if (engine === "sqlite") {
    await sql`
      CREATE TABLE item_search_docs (
        doc INTEGER PRIMARY KEY,
        item_id TEXT NOT NULL UNIQUE
      )
    `.execute(db);
    await sql`
      CREATE VIRTUAL TABLE item_words USING fts5(title, description, snippet, tags, tokenize = 'ascii')
    `.execute(db);
    await sql`
      CREATE TRIGGER item_words_follow_delete AFTER DELETE ON items
      FOR EACH ROW BEGIN
        DELETE FROM item_words WHERE rowid = (SELECT doc FROM item_search_docs WHERE item_id = OLD.id);
        DELETE FROM item_search_docs WHERE item_id = OLD.id;
      END
    `.execute(db);
  } else {
    await sql`
      CREATE TABLE item_words (
        item_id TEXT PRIMARY KEY REFERENCES items(id) ON DELETE CASCADE,
        title TSVECTOR NOT NULL,
        description TSVECTOR NOT NULL,
        snippet TSVECTOR NOT NULL,
        tags TSVECTOR NOT NULL
      )
    `.execute(db);
    // Without fastupdate, writes merge into the index at once: a search never has to read a
    // pending list of recent rows (measured: 2-20 ms per word lookup with 3,000 pending rows).
    await sql`
      CREATE INDEX item_words_search ON item_words USING gin (title, description, snippet, tags)
      WITH (fastupdate = off)
    `.execute(db);
  }

  const q = db as unknown as Kysely<Database>;
  let after = "";
  for (;;) {
    const rows = await q
      .selectFrom("items")
      .select(["id", "title", "description", "snippet", "tags"])
      .where("id", ">", after)
      .orderBy("id")
      .limit(500)
      .execute();
    for (const row of rows) await writeItemWords(q, row, engine);
    const last = rows.at(-1);
    if (!last) break;
    after = last.id;
  }
}
