import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { sql } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  FILE_CHUNK_BYTES,
  findFile,
  readAll,
  readStream,
  type StoredFile,
  writeFile,
} from "../../src/content/file-store.js";
import { type Db, openDatabase } from "../../src/db/database.js";
import { migrateTo, migrateToLatest } from "../../src/db/migrate.js";
import { engine, newStore, type TestStore } from "../helpers/portico.js";

/**
 * Item files in the database, in chunks (migration 0007, `src/content/file-store.ts`), on a real
 * database of each engine.
 */
describe("item files in chunks", () => {
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

  /** A user and an item of theirs, written as the tables stood before 0007. */
  async function itemRow(id: string) {
    const now = Date.now();
    await sql`
      INSERT INTO users (id, username, username_key, full_name, first_name, last_name, email, description,
        password_hash, role, provider, user_type, access, tags, created, modified, last_login)
      VALUES (${`u${id}`}, ${`user_${id}`}, ${`user_${id}`}, '', '', '', '', '', 'x', 'org_user', 'arcgis',
        'creatorUT', 'org', '[]', ${now}, ${now}, ${now})
    `.execute(db.writer);
    await sql`
      INSERT INTO items (id, owner_id, owner, owner_key, title, title_key, type, type_key, type_keywords,
        description, snippet, tags, access, created, modified)
      VALUES (${id}, ${`u${id}`}, ${`user_${id}`}, ${`user_${id}`}, 't', 't', 'CSV', 'csv', '[]', '', '', '[]',
        'private', ${now}, ${now})
    `.execute(db.writer);
  }

  async function streamed(file: StoredFile): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const chunk of readStream(db.kysely, file)) parts.push(chunk as Buffer);
    return Buffer.concat(parts);
  }

  const chunkCount = async (fileId: string) =>
    Number(
      (
        await db.kysely
          .selectFrom("item_file_chunks")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("file_id", "=", fileId)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it("moves files stored whole before 0007 into 1 MiB chunks, with their bytes, size and type", async () => {
    await migrateTo(db, "0006-collaboration");
    await itemRow("a1");
    const content = randomBytes(2 * FILE_CHUNK_BYTES + 12_345);
    await sql`
      INSERT INTO item_files (item_id, kind, name, content_type, content)
      VALUES ('a1', 'data', 'survey.csv', 'text/csv', ${content}),
             ('a1', 'thumbnail', 'empty.png', 'image/png', ${Buffer.alloc(0)})
    `.execute(db.writer);

    await migrateToLatest(db);

    const data = (await findFile(db.kysely, "a1", "data")) as StoredFile;
    expect(data).toMatchObject({ name: "survey.csv", contentType: "text/csv", size: content.length });
    expect(await chunkCount(data.fileId)).toBe(3);
    expect((await readAll(db.kysely, "a1", "data"))?.bytes.equals(content)).toBe(true);
    expect((await streamed(data)).equals(content)).toBe(true);
    const empty = (await findFile(db.kysely, "a1", "thumbnail")) as StoredFile;
    expect(empty.size).toBe(0);
    expect(await chunkCount(empty.fileId)).toBe(0);
    expect((await streamed(empty)).length).toBe(0);
  });

  it("writes a file from disk a chunk at a time and streams it back", async () => {
    await migrateToLatest(db);
    await itemRow("b1");
    const content = randomBytes(3 * FILE_CHUNK_BYTES + 5);
    const file = path.join(store.dataDir, "upload.bin");
    fs.writeFileSync(file, content);
    const stored = await db.transaction((trx) =>
      writeFile(trx, "b1", "data", { name: "upload.bin", contentType: "application/zip" }, { path: file }),
    );
    expect(stored.size).toBe(content.length);
    expect(await chunkCount(stored.fileId)).toBe(4);
    expect((await streamed((await findFile(db.kysely, "b1", "data")) as StoredFile)).equals(content)).toBe(
      true,
    );
  });

  it("stops a read short when the file is replaced meanwhile, never mixing two versions", async () => {
    await migrateToLatest(db);
    await itemRow("c1");
    const first = Buffer.alloc(3 * FILE_CHUNK_BYTES, 1);
    await db.transaction((trx) =>
      writeFile(trx, "c1", "data", { name: "a", contentType: "x/y" }, { data: first }),
    );
    const file = (await findFile(db.kysely, "c1", "data")) as StoredFile;
    const reader = readStream(db.kysely, file)[Symbol.asyncIterator]();
    expect(((await reader.next()).value as Buffer).equals(first.subarray(0, FILE_CHUNK_BYTES))).toBe(true);

    const second = Buffer.alloc(3 * FILE_CHUNK_BYTES, 2);
    await db.transaction((trx) =>
      writeFile(trx, "c1", "data", { name: "b", contentType: "x/y" }, { data: second }),
    );

    await expect(
      (async () => {
        for (let r = await reader.next(); !r.done; r = await reader.next()) {
          expect((r.value as Buffer).includes(2)).toBe(false);
        }
      })(),
    ).rejects.toThrow(/changed while it was read/);
    expect(await chunkCount(file.fileId)).toBe(0);
  });

  it("deletes the chunks with their item", async () => {
    await migrateToLatest(db);
    await itemRow("d1");
    const stored = await db.transaction((trx) =>
      writeFile(
        trx,
        "d1",
        "data",
        { name: "a", contentType: "x/y" },
        { data: randomBytes(FILE_CHUNK_BYTES + 1) },
      ),
    );
    expect(await chunkCount(stored.fileId)).toBe(2);
    await db.transaction((trx) => trx.deleteFrom("items").where("id", "=", "d1").execute());
    expect(await chunkCount(stored.fileId)).toBe(0);
  });
});
