import { type Kysely, sql } from "kysely";
import { type Engine, engineOf, type Queryable } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { type FieldWords, fieldWords, ftsText, tsvectorLiteral } from "./words.js";

/**
 * Writes to the full-text index of item words (migration 0009). Only the item repository calls
 * this, whenever it writes an indexed column, so no caller can leave the index behind; deletes
 * follow the item on their own (a trigger on SQLite, a cascading foreign key on PostgreSQL).
 */

/** The columns the index is made from, as the `items` row holds them. */
export interface IndexedItemColumns {
  id: string;
  title: string;
  description: string;
  snippet: string;
  /** JSON array of strings. */
  tags: string;
}

function parseTags(json: string): string[] {
  try {
    const value: unknown = JSON.parse(json);
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === "string") : [];
  } catch {
    // The invariants check reports malformed tags; the item is then indexed without them.
    return [];
  }
}

export async function writeItemWords(
  q: Queryable | Kysely<Database>,
  item: IndexedItemColumns,
  engine: Engine = engineOf(q),
): Promise<void> {
  const fields: Record<"title" | "description" | "snippet" | "tags", FieldWords> = {
    title: fieldWords([item.title]),
    description: fieldWords([item.description]),
    snippet: fieldWords([item.snippet]),
    tags: fieldWords(parseTags(item.tags)),
  };
  if (engine === "postgres") {
    const v = (f: FieldWords) => sql`${tsvectorLiteral(f)}::tsvector`;
    await sql`
      INSERT INTO item_words (item_id, title, description, snippet, tags)
      VALUES (${item.id}, ${v(fields.title)}, ${v(fields.description)}, ${v(fields.snippet)}, ${v(fields.tags)})
      ON CONFLICT (item_id) DO UPDATE SET title = excluded.title, description = excluded.description,
        snippet = excluded.snippet, tags = excluded.tags
    `.execute(q);
    return;
  }
  let doc = (
    await sql<{ doc: number }>`SELECT doc FROM item_search_docs WHERE item_id = ${item.id}`.execute(q)
  ).rows[0]?.doc;
  if (doc === undefined) {
    doc = (
      await sql<{
        doc: number;
      }>`INSERT INTO item_search_docs (item_id) VALUES (${item.id}) RETURNING doc`.execute(q)
    ).rows[0]?.doc as number;
  } else {
    await sql`DELETE FROM item_words WHERE rowid = ${doc}`.execute(q);
  }
  await sql`
    INSERT INTO item_words (rowid, title, description, snippet, tags)
    VALUES (${doc}, ${ftsText(fields.title)}, ${ftsText(fields.description)}, ${ftsText(fields.snippet)},
      ${ftsText(fields.tags)})
  `.execute(q);
}

/**
 * Index rows of several items, as `writeItemWords` writes each: on PostgreSQL in one statement,
 * on SQLite (whose statements cost no round trip) one item after the other.
 */
export async function writeItemsWords(
  q: Queryable | Kysely<Database>,
  items: readonly IndexedItemColumns[],
  engine: Engine = engineOf(q),
): Promise<void> {
  if (items.length === 0) return;
  if (engine !== "postgres") {
    for (const item of items) await writeItemWords(q, item, engine);
    return;
  }
  const v = (f: FieldWords) => sql`${tsvectorLiteral(f)}::tsvector`;
  const rows = items.map(
    (item) =>
      sql`(${item.id}, ${v(fieldWords([item.title]))}, ${v(fieldWords([item.description]))}, ${v(fieldWords([item.snippet]))}, ${v(fieldWords(parseTags(item.tags)))})`,
  );
  await sql`
    INSERT INTO item_words (item_id, title, description, snippet, tags)
    VALUES ${sql.join(rows)}
    ON CONFLICT (item_id) DO UPDATE SET title = excluded.title, description = excluded.description,
      snippet = excluded.snippet, tags = excluded.tags
  `.execute(q);
}

/** Rewrites the index row of an item from what the `items` row holds now. */
export async function refreshItemWords(q: Queryable, itemId: string): Promise<void> {
  const row = await q
    .selectFrom("items")
    .select(["id", "title", "description", "snippet", "tags"])
    .where("id", "=", itemId)
    .executeTakeFirst();
  if (row) await writeItemWords(q, row);
}
