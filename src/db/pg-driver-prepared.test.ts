import { CompiledQuery, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { BatchingPostgresDriver, deferred, inOneMessage, prepared, withCachedPlan } from "./pg-driver.js";

const url = process.env.PORTICO_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

function kyselyOver(pool: pg.Pool) {
  return new Kysely<unknown>({
    dialect: {
      createDriver: () => new BatchingPostgresDriver(pool),
      createQueryCompiler: () => new PostgresQueryCompiler(),
      createAdapter: () => new PostgresAdapter(),
      createIntrospector: (k) => new PostgresIntrospector(k),
    },
  });
}

describe("withCachedPlan eviction", () => {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const db = kyselyOver(pool);
  afterAll(async () => {
    await db.destroy();
  });
  const read = async (statements: CompiledQuery[]) =>
    (await db.executeQuery<unknown[]>(inOneMessage(statements))).rows;
  const plans = async () =>
    (
      await db.executeQuery<{ n: number }>(
        CompiledQuery.raw(
          "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'portico_plan_%'",
          [],
        ),
      )
    ).rows[0]?.n;

  it("does not wipe the connection's plans when a group's new statement evicts one the group uses", async () => {
    // A is prepared first, the oldest of 64 by preparation.
    const a = () => withCachedPlan(CompiledQuery.raw("SELECT 1000 + $1::int AS n", [1]));
    expect(await read([a()])).toEqual([[{ n: 1001 }]]);
    for (let i = 0; i < 63; i++)
      await read([withCachedPlan(CompiledQuery.raw(`SELECT ${i} + $1::int AS n`, [1]))]);
    // A used again (a hot search shape): now the most recently used.
    expect(await read([a()])).toEqual([[{ n: 1001 }]]);
    expect(await plans()).toBe(64);
    // A search whose count statement is A and whose page statement is new: preparing the new one
    // deallocates the least recently used, not A, which the same message EXECUTEs (were it
    // deallocated, 26000 would have every plan of the connection deallocated and prepared again).
    const b = withCachedPlan(CompiledQuery.raw("SELECT 2000 + $1::int AS n", [1]));
    expect(await read([a(), b])).toEqual([[{ n: 1001 }], [{ n: 2001 }]]);
    expect(await plans()).toBeGreaterThanOrEqual(63);
  });
});

describe("prepared pipeline", () => {
  const schema = `driver_review_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  const pool = new pg.Pool({ connectionString: url, max: 1, options: `-c search_path=${schema}` });
  const db = kyselyOver(pool);
  const insert = (id: number, v: unknown) =>
    prepared(CompiledQuery.raw("INSERT INTO t (id, v) VALUES ($1, $2)", [id, v]));
  const all = async () => (await admin.query(`SELECT id, v FROM ${schema}.t ORDER BY id`)).rows;
  beforeAll(async () => {
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
    await admin.query(`CREATE TABLE ${schema}.t (id int PRIMARY KEY, v text NOT NULL)`);
  });
  beforeEach(async () => {
    await admin.query(`DELETE FROM ${schema}.t`);
  });
  afterAll(async () => {
    await db.destroy();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  });

  it("keeps BEGIN and the deferred statements when a value fails to map before anything is sent", async () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const failed = await db
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(deferred(insert(1, "deferred")));
        // A client-side error (nothing reached the server): the transaction is intact, as with
        // Kysely's own driver, and the caller may go on.
        await trx.executeQuery(insert(2, circular)).catch(() => {});
        await trx.executeQuery(insert(3, "after"));
        throw new Error("roll it all back");
      })
      .catch((err: unknown) => err);
    expect((failed as Error).message).toBe("roll it all back");
    // Rolled back: nothing of the transaction may remain.
    expect(await all()).toEqual([]);
    await admin.query(`DELETE FROM ${schema}.t`);
  });

  it("does not fail a transaction with 42P05 after a failure skipped the Close of an unsure statement", async () => {
    const update = (id: number, v: unknown) =>
      prepared(CompiledQuery.raw("UPDATE t SET v = $2 WHERE id = $1", [id, v]));
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(insert(1, "a"));
      await trx.executeQuery(update(1, "b"));
    });
    // The update fails (NOT NULL): marked unsure, though it stays prepared on the server.
    const notNull = await db
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(update(1, null));
      })
      .catch((err: unknown) => err);
    expect((notNull as { code?: string }).code).toBe("23502");
    // A deferred insert fails (duplicate key) in the pipeline before the update's Close and Parse:
    // both skipped by the server, and the update's state is dropped instead of staying unsure.
    const duplicate = await db
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(deferred(insert(1, "dup")));
        await trx.executeQuery(update(1, "c"));
      })
      .catch((err: unknown) => err);
    expect((duplicate as { code?: string }).code).toBe("23505");
    // An ordinary transaction: the update is parsed without a Close while it still exists.
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(update(1, "d"));
    });
    expect(await all()).toEqual([{ id: 1, v: "d" }]);
    await admin.query(`DELETE FROM ${schema}.t`);
  });

  it("recovers its named statements after DEALLOCATE ALL", async () => {
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(insert(1, "a"));
    });
    await db.executeQuery(CompiledQuery.raw("DEALLOCATE ALL", []));
    // The first transaction to use one finds it gone (nothing of it written); the connection
    // then parses every statement it held again.
    const gone = await db
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(insert(2, "b"));
      })
      .catch((err: unknown) => err);
    expect((gone as { code?: string }).code).toBe("26000");
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(insert(3, "c"));
    });
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(insert(4, "d"));
    });
    expect((await all()).map((r) => r.id)).toEqual([1, 3, 4]);
    await admin.query(`DELETE FROM ${schema}.t`);
  });
});

describe("Pipeline type parser errors", () => {
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    types: {
      getTypeParser: (oid: number, format?: "text" | "binary") =>
        oid === 23
          ? () => {
              throw new Error("unparsable int4");
            }
          : pg.types.getTypeParser(oid, format as "text"),
    },
  });
  const db = kyselyOver(pool);
  afterAll(async () => {
    await db.destroy();
  });

  it("fails the statement, as pg's Query does, when a parser throws (not the process)", async () => {
    const plain = await db
      .executeQuery(CompiledQuery.raw("SELECT $1::int AS n", [1]))
      .catch((err: unknown) => err);
    expect((plain as Error).message).toBe("unparsable int4");
    const viaPipeline = await db
      .executeQuery(prepared(CompiledQuery.raw("SELECT $1::int AS n", [1])))
      .catch((err: unknown) => err);
    expect((viaPipeline as Error).message).toBe("unparsable int4");
  }, 5000);
});

describe("review: EXECUTE literals (passes: no injection found)", () => {
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    options: "-c standard_conforming_strings=off",
  });
  const db = kyselyOver(pool);
  afterAll(async () => {
    await db.destroy();
  });
  const hostile = [
    "'",
    "\\",
    "\\'",
    "\\\\'",
    "'); SELECT pg_sleep(5); --",
    "\\'); SELECT 1; --",
    "$1",
    "$$ $1 $$",
    "-- c",
    "/* c",
    "U&'\\0041'",
    "naïve 日本語 🎉 \u2028",
    "\ud800",
  ];
  it("round-trips hostile strings through EXECUTE with standard_conforming_strings off", async () => {
    for (const v of hostile) {
      const rows = (
        await db.executeQuery<unknown[]>(
          inOneMessage([withCachedPlan(CompiledQuery.raw("SELECT $1::text AS v, $2::int AS n", [v, -7]))]),
        )
      ).rows;
      expect(rows).toEqual([[{ v: v === "\ud800" ? "\ufffd" : v, n: -7 }]]);
    }
  });
});
