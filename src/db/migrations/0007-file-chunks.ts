import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/** The chunk size of this migration; the file store writes new files with the same. */
const CHUNK_BYTES = 1024 * 1024;

/**
 * Item files in chunks. One BLOB per file made every download and every replication hold the
 * whole file in memory (a 95 MB item: 95 MB per download, on each engine's driver, and again
 * for the copy the answer made). Chunks of 1 MiB let a file be written and read a piece at a
 * time, on both engines, by every node sharing the database.
 *
 * Each version of a file gets its own `file_id`, and its chunks hang from it: a download that
 * started before the file was replaced finds its chunks gone (and stops) rather than mixing two
 * versions. Deleting the file row (or its item) deletes the chunks through the cascade.
 *
 * Existing files are moved into chunks here, one file at a time. On PostgreSQL one chunk per
 * statement (`substr` of a bytea reads only the slice it needs, about 1 s per 100 MB), so the
 * migration holds no file in memory. SQLite reads the whole value for each `substr` (15 s for one
 * file of 95 MB), so there each file is read once and cut here: one file in memory at a time.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  const blob = engine === "postgres" ? "bytea" : "blob";
  await db.schema
    .alterTable("item_files")
    .addColumn("file_id", "text", (c) => c.notNull().defaultTo(""))
    .execute();
  await db.schema
    .alterTable("item_files")
    .addColumn("size", "bigint", (c) => c.notNull().defaultTo(0))
    .execute();
  // (item_id, kind) is the primary key, so this is unique; new versions get fresh ids (`newId`,
  // hexadecimal without a dash), which cannot meet these.
  await sql`UPDATE item_files SET file_id = item_id || '-' || kind, size = length(content)`.execute(db);
  await db.schema.createIndex("item_files_file_id").on("item_files").column("file_id").unique().execute();

  await db.schema
    .createTable("item_file_chunks")
    .addColumn("file_id", "text", (c) => c.notNull().references("item_files.file_id").onDelete("cascade"))
    .addColumn("seq", "integer", (c) => c.notNull())
    .addColumn("data", blob, (c) => c.notNull())
    .addPrimaryKeyConstraint("item_file_chunks_pk", ["file_id", "seq"])
    .execute();

  const files = await sql<{ file_id: string; size: number | string }>`
    SELECT file_id, size FROM item_files
  `.execute(db);
  for (const file of files.rows) {
    const size = Number(file.size);
    if (engine === "sqlite") {
      const row = await sql<{ content: Buffer }>`
        SELECT content FROM item_files WHERE file_id = ${file.file_id}
      `.execute(db);
      const content = row.rows[0]?.content ?? Buffer.alloc(0);
      for (let seq = 0; seq * CHUNK_BYTES < content.length; seq++) {
        const data = content.subarray(seq * CHUNK_BYTES, (seq + 1) * CHUNK_BYTES);
        await sql`
          INSERT INTO item_file_chunks (file_id, seq, data) VALUES (${file.file_id}, ${seq}, ${data})
        `.execute(db);
      }
      continue;
    }
    for (let seq = 0; seq * CHUNK_BYTES < size; seq++) {
      await sql`
        INSERT INTO item_file_chunks (file_id, seq, data)
        SELECT file_id, CAST(${seq} AS integer), substr(content, CAST(${seq * CHUNK_BYTES + 1} AS integer), CAST(${CHUNK_BYTES} AS integer))
        FROM item_files WHERE file_id = ${file.file_id}
      `.execute(db);
    }
  }
  await db.schema.alterTable("item_files").dropColumn("content").execute();
}
