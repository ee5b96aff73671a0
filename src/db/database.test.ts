import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import SQLite from "better-sqlite3";
import { sql } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Db, openDatabase } from "./database.js";
import { MIGRATION_NAMES, migrateToLatest, pendingMigrations } from "./migrate.js";

/** Group commit on a real SQLite file: many transactions share a commit, and fail alone. */
describe("SQLite transactions", () => {
  let dir: string;
  let db: Db;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-db-"));
    db = await openDatabase({ dataDir: dir });
    await migrateToLatest(db);
  });
  afterEach(async () => {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const role = (id: string) => ({
    id,
    name: id,
    name_key: id,
    description: "",
    privileges: "[]",
    created: 1,
    modified: 1,
  });

  it("commits concurrent transactions, rolling back only the one that fails", async () => {
    const published: (string | undefined)[] = [];
    db.feed.subscribe("auth", (subject) => published.push(subject));
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        db.transaction(
          async (trx) => {
            await trx
              .insertInto("roles")
              .values(role(`r${i}`))
              .execute();
            if (i === 7) throw new Error("unit 7 fails after writing");
            return i;
          },
          { changes: (n) => [`auth:${n}`] },
        ),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(19);
    expect(results[7]).toMatchObject({ status: "rejected", reason: new Error("unit 7 fails after writing") });
    const ids = (await db.kysely.selectFrom("roles").select("id").execute()).map((r) => r.id);
    expect(ids.sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => `r${i}`)
        .filter((id) => id !== "r7")
        .sort(),
    );
    // Only committed units announce their changes.
    expect(published.sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => String(i))
        .filter((n) => n !== "7")
        .sort(),
    );
  });

  it("keeps the effects of earlier units of a group visible to later ones", async () => {
    const [, seen] = await Promise.all([
      db.transaction((trx) => trx.insertInto("roles").values(role("first")).execute()),
      db.transaction(async (trx) => (await trx.selectFrom("roles").select("id").execute()).map((r) => r.id)),
    ]);
    expect(seen).toEqual(["first"]);
  });

  it("reads statements together as Kysely reads each, and still runs Kysely's own after them", async () => {
    await db.transaction(async (trx) => {
      await trx
        .insertInto("roles")
        .values([role("r1"), { ...role("r2"), description: "two" }])
        .execute();
    });
    const byId = db.kysely.selectFrom("roles").selectAll().where("id", "=", "r2").compile();
    const count = sql<{ n: number }>`select count(*) as n, 'a' as same, 'b' as same from roles`.compile(
      db.kysely,
    );
    const none = db.kysely.selectFrom("roles").select("id").where("id", "=", "nobody").compile();
    const together = await db.readTogether([byId, count, none]);
    expect(together).toEqual([
      (await db.kysely.executeQuery(byId)).rows,
      (await db.kysely.executeQuery(count)).rows,
      [],
    ]);
    expect(together[1]).toEqual([{ n: 2, same: "b" }]);
    // The statement the cache shares with Kysely answers objects again afterwards.
    expect((await db.kysely.executeQuery(byId)).rows).toEqual([{ ...role("r2"), description: "two" }]);
  });

  it("refuses a second process on the same data directory", async () => {
    await expect(openDatabase({ dataDir: dir })).rejects.toThrow(/another portico process is using/);
  });
});

describe("SQLite migrations", () => {
  it("apply in one transaction: one that fails midway leaves the database as it was", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-db-"));
    try {
      // A table 0001-initial creates third, after organizations and roles: the migration fails there.
      const existing = new SQLite(path.join(dir, "portico.sqlite"));
      existing.exec("CREATE TABLE users (id TEXT PRIMARY KEY)");
      existing.close();
      const db = await openDatabase({ dataDir: dir });
      try {
        await expect(migrateToLatest(db)).rejects.toThrow(/table "users" already exists/);
        const tables = await sql<{ name: string }>`
          SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'kysely%'`.execute(db.kysely);
        // Neither organizations nor roles was kept, and no migration is recorded as applied.
        expect(tables.rows.map((t) => t.name)).toEqual(["users"]);
        expect(await pendingMigrations(db)).toEqual(MIGRATION_NAMES);
      } finally {
        await db.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite rows", () => {
  it("name each value by its column, also after a schema change under a statement already prepared", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-db-"));
    const db = await openDatabase({ dataDir: dir });
    try {
      const selectAll = sql`SELECT * FROM fields_table ORDER BY id`;
      await db.transaction(async (trx) => {
        await sql`CREATE TABLE fields_table (id INTEGER PRIMARY KEY, a TEXT, b TEXT)`.execute(trx);
        await sql`INSERT INTO fields_table VALUES (1, 'a1', 'b1'), (2, 'a2', NULL)`.execute(trx);
      });
      const read = async () => {
        const byKysely = (await selectAll.execute(db.kysely)).rows;
        const [together] = await db.readTogether([selectAll.compile(db.kysely)]);
        expect(together).toEqual(byKysely);
        return byKysely;
      };
      expect(await read()).toEqual([
        { id: 1, a: "a1", b: "b1" },
        { id: 2, a: "a2", b: null },
      ]);
      // As many columns as before, other names: a field dropped and another added (by the writer,
      // while the reader keeps its prepared statement).
      await db.transaction(async (trx) => {
        await sql`ALTER TABLE fields_table DROP COLUMN a`.execute(trx);
        await sql`ALTER TABLE fields_table ADD COLUMN c TEXT`.execute(trx);
        await sql`UPDATE fields_table SET c = 'c' || id`.execute(trx);
      });
      expect(await read()).toEqual([
        { id: 1, b: "b1", c: "c1" },
        { id: 2, b: null, c: "c2" },
      ]);
      // A column named like Object.prototype's accessor stays a column.
      const proto = await sql<Record<string, unknown>>`SELECT 1 AS "__proto__", 2 AS "x"`.execute(db.kysely);
      expect(Object.getPrototypeOf(proto.rows[0])).toBe(Object.prototype);
      expect(Object.entries(proto.rows[0] ?? {})).toEqual([
        ["__proto__", 1],
        ["x", 2],
      ]);
    } finally {
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite rows after a schema change that is not (yet) committed", () => {
  let dir: string;
  let db: Db;
  const selectAll = sql<Record<string, unknown>>`SELECT * FROM fields_table ORDER BY id`;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-db-"));
    db = await openDatabase({ dataDir: dir });
    await db.transaction(async (trx) => {
      await sql`CREATE TABLE fields_table (id INTEGER PRIMARY KEY, a TEXT, b TEXT)`.execute(trx);
      await sql`INSERT INTO fields_table VALUES (1, 'a1', 'b1')`.execute(trx);
    });
  });
  afterEach(async () => {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const onWriter = () => db.transaction(async (trx) => (await selectAll.execute(trx)).rows);
  const onReader = async () => (await selectAll.execute(db.kysely)).rows;

  it("name the columns the reader sees once a change it read under commits", async () => {
    expect(await onReader()).toStrictEqual([{ id: 1, a: "a1", b: "b1" }]);
    await db.transaction(async (trx) => {
      await sql`ALTER TABLE fields_table DROP COLUMN a`.execute(trx);
      await sql`ALTER TABLE fields_table ADD COLUMN c TEXT`.execute(trx);
      await sql`UPDATE fields_table SET c = 'c' || id`.execute(trx);
      // Another request reads the table meanwhile, on the reader: the change is not committed.
      expect(await onReader()).toStrictEqual([{ id: 1, a: "a1", b: "b1" }]);
    });
    expect(await onReader()).toStrictEqual([{ id: 1, b: "b1", c: "c1" }]);
    expect(await db.readTogether([selectAll.compile(db.kysely)])).toStrictEqual([
      [{ id: 1, b: "b1", c: "c1" }],
    ]);
  });

  it("name the columns the table has again after a change was rolled back", async () => {
    await expect(
      db.transaction(async (trx) => {
        await sql`ALTER TABLE fields_table DROP COLUMN a`.execute(trx);
        await sql`ALTER TABLE fields_table ADD COLUMN c TEXT`.execute(trx);
        expect((await selectAll.execute(trx)).rows).toStrictEqual([{ id: 1, b: "b1", c: null }]);
        throw new Error("refused");
      }),
    ).rejects.toThrow("refused");
    expect(await onWriter()).toStrictEqual([{ id: 1, a: "a1", b: "b1" }]);
  });
});
