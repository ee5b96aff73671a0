import { CompiledQuery, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchingPostgresDriver, deferred, inline, inOneMessage, prepared } from "./pg-driver.js";

describe("inline (values written into joined statements)", () => {
  it("writes strings, numbers, booleans and nulls as quoted literals outside quotes", () => {
    expect(
      inline(`select "a$1" from t where x = $1 and y = $2 and z = $3 and w = $4`, ["it's", 5, true, null]),
    ).toBe(`select "a$1" from t where x =  E'it''s'  and y =  '5'  and z =  'true'  and w =  NULL `);
    expect(inline("select $1", ["back\\slash"])).toBe(`select  E'back\\\\slash' `);
  });

  it("refuses what it cannot write safely, so the statement goes on its own", () => {
    expect(inline("select $1", [Buffer.from("x")])).toBeUndefined();
    expect(inline("select $1", [new Date()])).toBeUndefined();
    expect(inline("select $1", ["nul\0"])).toBeUndefined();
    expect(inline("select $1", [Number.NaN])).toBeUndefined();
    expect(inline("select $$ $1 $$", ["x"])).toBeUndefined();
    expect(inline("select E'\\' $1'", ["x"])).toBeUndefined();
    expect(inline("select 1 -- $1", ["x"])).toBeUndefined();
    expect(inline("select $2", ["x"])).toBeUndefined();
    expect(inline("select 1 /* $1 */", ["x"])).toBeUndefined();
    expect(inline("select a$1 from t", ["x"])).toBeUndefined();
    expect(inline("select $1a", ["x"])).toBeUndefined();
    expect(inline("select $1", [Number.POSITIVE_INFINITY])).toBeUndefined();
    expect(inline("select $1", [{ toString: () => "1); drop table t; --" }])).toBeUndefined();
  });
});

/** Values chosen to end a literal, start a comment or a statement, or pass for a parameter. */
const HOSTILE = [
  "",
  "'",
  "''",
  "\\",
  "\\'",
  "\\\\'",
  "'; DROP TABLE pg_driver_victim; --",
  "\\'; DROP TABLE pg_driver_victim; --",
  "x\\' || (SELECT 'pwned') || '",
  "$1",
  "$2 $1 $$",
  "$$; DROP TABLE pg_driver_victim; $$",
  "-- comment",
  "/* open comment",
  "*/ closed",
  "E'\\x41'",
  "\\n\\t\\x41\\u0041\\101",
  "U&'\\0041'",
  "naïve 日本語 🎉 \u00e9\u0301 \u2028 \ufeff",
  "tab\tnew\nline\rreturn",
  '"double" quotes',
];

/**
 * The inlined text against the real server, with `standard_conforming_strings` on and off: each
 * value comes back exactly, and nothing of it runs as SQL.
 */
describe("inlined literals on PostgreSQL", () => {
  const client = new pg.Client({
    connectionString: process.env.PORTICO_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  });
  beforeAll(async () => {
    await client.connect();
    await client.query("CREATE TEMP TABLE pg_driver_victim (v text)");
  });
  afterAll(async () => {
    await client.end();
  });

  for (const setting of ["on", "off"] as const) {
    it(`round-trips hostile strings with standard_conforming_strings = ${setting}`, async () => {
      await client.query(`SET standard_conforming_strings = ${setting}`);
      const shown = await client.query("SHOW standard_conforming_strings");
      expect(shown.rows[0].standard_conforming_strings).toBe(setting);
      // The setting is in force: a plain literal's backslash is an escape only when it is off.
      const plain = await client.query("SELECT '\\n' AS v");
      expect(plain.rows[0].v).toBe(setting === "on" ? "\\n" : "\n");
      for (const value of HOSTILE) {
        const text = inline("SELECT $1::text AS v, $2::text AS w, $3 AS n", [value, `${value}'${value}`, 7]);
        expect(text).toBeDefined();
        // Joined as the driver joins statements: one simple-protocol message of several.
        const results = (await client.query(
          `BEGIN; INSERT INTO pg_driver_victim (v) VALUES (${inline("$1", [value])}); ${text}; COMMIT`,
        )) as unknown as pg.QueryResult[];
        expect(results).toHaveLength(4);
        const row = results[2]?.rows[0];
        expect(row).toEqual({ v: value, w: `${value}'${value}`, n: "7" });
        const stored = await client.query("DELETE FROM pg_driver_victim RETURNING v");
        expect(stored.rows).toEqual([{ v: value }]);
      }
      // Refused, not written: the driver sends such values as parameters.
      expect(inline("SELECT $1::text AS v", ["nul\0byte"])).toBeUndefined();
    });
  }
});

/** Reads sent together (a search's statements), on the real server through the driver. */
describe("statements sent in one message", () => {
  const pool = new pg.Pool({
    connectionString: process.env.PORTICO_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
    // One connection: what a statement leaves behind on it is what the next one finds.
    max: 1,
  });
  const db = new Kysely<unknown>({
    dialect: {
      createDriver: () => new BatchingPostgresDriver(pool),
      createQueryCompiler: () => new PostgresQueryCompiler(),
      createAdapter: () => new PostgresAdapter(),
      createIntrospector: (k) => new PostgresIntrospector(k),
    },
  });
  afterAll(async () => {
    await db.destroy();
  });
  const read = async (statements: CompiledQuery[], settings?: Record<string, string>) =>
    (await db.executeQuery<unknown[]>(inOneMessage(statements, settings))).rows;
  const timeout = CompiledQuery.raw("SELECT current_setting('statement_timeout') AS t", []);

  it("answers each statement's rows, with the settings in force for them only", async () => {
    const rows = await read(
      [
        timeout,
        CompiledQuery.raw("SELECT $1::text AS v, $2::int AS n", ["it's", 3]),
        CompiledQuery.raw("SELECT 1 AS one WHERE false", []),
      ],
      { statement_timeout: "1234" },
    );
    expect(rows).toEqual([[{ t: "1234ms" }], [{ v: "it's", n: 3 }], []]);
    expect(await read([timeout])).toEqual([[{ t: "0" }]]);
  });

  for (const how of ["inlined", "as parameters"] as const) {
    it(`stops a statement past statement_timeout (${how}) and leaves the connection as it was`, async () => {
      // A Buffer is not written into the text: the statements then go one by one in a transaction.
      const slow = CompiledQuery.raw("SELECT pg_sleep(2), length($1::bytea) AS n", [
        how === "inlined" ? "x" : Buffer.from("x"),
      ]);
      const failed = await read([slow], { statement_timeout: "50" }).catch((err: unknown) => err);
      expect((failed as { code?: string }).code).toBe("57014");
      expect(await read([timeout])).toEqual([[{ t: "0" }]]);
      const { rows } = await db.executeQuery(
        CompiledQuery.raw("SELECT current_setting('statement_timeout') AS t", []),
      );
      expect(rows).toEqual([{ t: "0" }]);
    });
  }
});

/**
 * Prepared statements (parsed once per connection, then only bound) in transactions, with the
 * statements around them in one pipeline, on the real server through the driver.
 */
describe("prepared statements", () => {
  const url = process.env.PORTICO_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const schema = `driver_prepared_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  const pool = new pg.Pool({
    connectionString: url,
    // Two connections, so that both have to prepare; every table in a schema of this file's own.
    max: 2,
    options: `-c search_path=${schema}`,
  });
  const db = new Kysely<unknown>({
    dialect: {
      createDriver: () => new BatchingPostgresDriver(pool),
      createQueryCompiler: () => new PostgresQueryCompiler(),
      createAdapter: () => new PostgresAdapter(),
      createIntrospector: (k) => new PostgresIntrospector(k),
    },
  });
  const insert = (id: number, v: unknown) =>
    deferred(prepared(CompiledQuery.raw("INSERT INTO t (id, v) VALUES ($1, $2)", [id, v])));
  const lock = (id: number) => prepared(CompiledQuery.raw("SELECT * FROM t WHERE id = $1 FOR UPDATE", [id]));
  const update = (id: number, v: unknown) =>
    prepared(CompiledQuery.raw("UPDATE t SET v = $2 WHERE id = $1", [id, v]));
  const all = async () => (await admin.query(`SELECT id, v FROM ${schema}.t ORDER BY id`)).rows;
  /** Prepared statements of the pool's sessions, as the server lists them. */
  const preparedOnServer = async () => {
    const clients = await Promise.all([pool.connect(), pool.connect()]);
    try {
      return await Promise.all(
        clients.map(
          async (c) => (await c.query("SELECT name FROM pg_prepared_statements ORDER BY name")).rows.length,
        ),
      );
    } finally {
      for (const c of clients) c.release();
    }
  };

  beforeAll(async () => {
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
    await admin.query(`CREATE TABLE ${schema}.t (id int PRIMARY KEY, v text NOT NULL)`);
  });
  afterAll(async () => {
    await db.destroy();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  });

  it("binds values to statements parsed once per connection, in one transaction with the rest", async () => {
    // Concurrent transactions: both connections run (and so prepare) the same statements.
    await Promise.all(
      [1, 2, 3, 4].map((id) =>
        db.transaction().execute(async (trx) => {
          await trx.executeQuery(insert(id, HOSTILE[id]));
          const { rows } = await trx.executeQuery(lock(id));
          expect(rows).toEqual([{ id, v: HOSTILE[id] }]);
          const updated = await trx.executeQuery(update(id, `${HOSTILE[id]}!`));
          expect(updated.numAffectedRows).toBe(1n);
        }),
      ),
    );
    expect(await all()).toEqual([1, 2, 3, 4].map((id) => ({ id, v: `${HOSTILE[id]}!` })));
    // Hostile values of every kind, as parameters: back exactly.
    await db.transaction().execute(async (trx) => {
      for (const [i, value] of [...HOSTILE, "nul\0byte".replace("\0", "")].entries()) {
        await trx.executeQuery(insert(100 + i, value));
      }
    });
    const stored = (await all()).filter((r) => r.id >= 100);
    expect(stored.map((r) => r.v)).toEqual([...HOSTILE, "nulbyte"]);
    // Each session holds the file's statements and BEGIN and COMMIT, parsed once each.
    const counts = await preparedOnServer();
    for (const n of counts) expect(n).toBeGreaterThanOrEqual(1);
    await admin.query(`DELETE FROM ${schema}.t`);
  });

  it("rolls back the whole transaction when a deferred statement fails, and the connection goes on", async () => {
    for (let round = 0; round < 3; round++) {
      const failed = await db
        .transaction()
        .execute(async (trx) => {
          await trx.executeQuery(insert(1, "kept only if all commit"));
          // A duplicate key: fails when it reaches the server, with the COMMIT.
          await trx.executeQuery(insert(1, "duplicate"));
        })
        .catch((err: unknown) => err);
      expect((failed as { code?: string }).code).toBe("23505");
      expect((await all()).filter((r) => r.id === 1)).toEqual([]);
      // The same statements then work on the same connections.
      await db.transaction().execute(async (trx) => {
        await trx.executeQuery(insert(round + 10, "ok"));
        await trx.executeQuery(update(round + 10, "updated"));
      });
    }
    expect(await all()).toEqual([10, 11, 12].map((id) => ({ id, v: "updated" })));
    await admin.query(`DELETE FROM ${schema}.t`);
  });

  it("fails a statement whose value cannot be written before anything is sent", async () => {
    const failed = await db
      .transaction()
      .execute(async (trx) => {
        await trx.executeQuery(insert(1, "first"));
        const circular: Record<string, unknown> = {};
        circular.self = circular;
        await trx.executeQuery(update(1, circular));
      })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(Error);
    expect(await all()).toEqual([]);
    await db.transaction().execute(async (trx) => {
      await trx.executeQuery(insert(1, "then"));
    });
    expect(await all()).toEqual([{ id: 1, v: "then" }]);
    await admin.query(`DELETE FROM ${schema}.t`);
  });

  it("parses a statement again after a change of its table made its plan unusable", async () => {
    await admin.query(`INSERT INTO ${schema}.t VALUES (1, 'a')`);
    const read = () => db.transaction().execute(async (trx) => (await trx.executeQuery(lock(1))).rows);
    // Prepared on both connections.
    await Promise.all([read(), read()]);
    await admin.query(`ALTER TABLE ${schema}.t ADD COLUMN w text NOT NULL DEFAULT 'w'`);
    // A `SELECT *` prepared before the change fails once on each connection ("cached plan must not
    // change result type"); it is then parsed again and answers with the new column.
    const first = await Promise.allSettled([read(), read()]);
    for (const r of first) {
      if (r.status === "rejected") expect((r.reason as { code?: string }).code).toBe("0A000");
      else expect(r.value).toEqual([{ id: 1, v: "a", w: "w" }]);
    }
    expect(await Promise.all([read(), read()])).toEqual([
      [{ id: 1, v: "a", w: "w" }],
      [{ id: 1, v: "a", w: "w" }],
    ]);
  });
});
