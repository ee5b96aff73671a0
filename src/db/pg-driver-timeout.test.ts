import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { CompiledQuery, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Db, openDatabase } from "./database.js";
import { deferred, prepared } from "./pg-driver.js";

describe("query-timeout watch over a pipeline", () => {
  let db: Db;
  const schema = `review_watch_${process.pid}`;
  beforeAll(async () => {
    db = await openDatabase({
      // A PostgreSQL driver's test: the local server when no test database is named (as
      // pg-driver.test.ts), not the SQLite store that openDatabase opens without a URL.
      databaseUrl: process.env.PORTICO_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
      dataDir: fs.mkdtempSync(path.join(os.tmpdir(), "review-")),
      schema,
      queryTimeoutMs: 500,
      postgis: "off",
      poolSize: 1,
    });
    await sql`CREATE TABLE IF NOT EXISTS rt (id int PRIMARY KEY)`.execute(db.kysely);
  }, 30_000);
  afterAll(async () => {
    await sql.raw(`DROP SCHEMA ${schema} CASCADE`).execute(db.kysely);
    await db.close();
  });

  it("closes a connection whose pipeline gets no answer, and the pool goes on with a new one", async () => {
    const failed = await db.kysely
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(deferred(prepared(CompiledQuery.raw("INSERT INTO rt (id) VALUES ($1)", [1]))));
        await trx.executeQuery(prepared(CompiledQuery.raw("SELECT pg_sleep($1::float8) AS s", [1.5])));
      })
      .catch((err: unknown) => err);
    expect(String(failed)).toMatch(/no answer|not queryable|terminated/);
    await new Promise((r) => setTimeout(r, 1500));
    await db.kysely.transaction().execute(async (trx) => {
      await trx.executeQuery(deferred(prepared(CompiledQuery.raw("INSERT INTO rt (id) VALUES ($1)", [2]))));
      await trx.executeQuery(prepared(CompiledQuery.raw("SELECT pg_sleep($1::float8) AS s", [0])));
    });
    const { rows } = await sql<{ id: number }>`SELECT id FROM rt ORDER BY id`.execute(db.kysely);
    expect(rows).toEqual([{ id: 2 }]);
  }, 20_000);
});
