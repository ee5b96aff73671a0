import { createHash } from "node:crypto";
import { CompiledQuery, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  BatchingPostgresDriver,
  deferred,
  inline,
  inOneMessage,
  prepared,
  withCachedPlan,
} from "./pg-driver.js";

/** A Kysely over the driver under test, on `pool`. */
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

const PG_URL = process.env.PORTICO_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";

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
    connectionString: PG_URL,
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
    connectionString: PG_URL,
    // One connection: what a statement leaves behind on it is what the next one finds.
    max: 1,
  });
  /** Describe messages of portals the connection sent (node-postgres's connection, spied on). */
  let portalDescribes = 0;
  pool.on("connect", (client) => {
    const connection = (client as unknown as { connection: { describe(msg: { type: string }): void } })
      .connection;
    const describe = connection.describe.bind(connection);
    connection.describe = (msg) => {
      if (msg.type === "P") portalDescribes++;
      describe(msg);
    };
  });
  const db = kyselyOver(pool);
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

  for (const value of ["a string", "a Buffer"] as const) {
    it(`stops a statement past statement_timeout (${value}) and leaves the connection as it was`, async () => {
      // Values are bound, whatever their kind (a Buffer could not be written into a text).
      const slow = CompiledQuery.raw("SELECT pg_sleep(2), length($1::bytea) AS n", [
        value === "a string" ? "x" : Buffer.from("x"),
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

  const plans = async () =>
    (
      await db.executeQuery<{ statement: string }>(
        CompiledQuery.raw(
          "SELECT statement FROM pg_prepared_statements WHERE name LIKE 'portico_plan_%' ORDER BY prepare_time",
          [],
        ),
      )
    ).rows.map((r) => r.statement);

  it("runs a statement marked withCachedPlan from a statement prepared once on the connection", async () => {
    const text =
      "SELECT $1::text AS v, $2::int + 1 AS n, $3::text IS NULL AS absent, current_setting('statement_timeout') AS t";
    for (const [v, n] of [
      ["it's", 3],
      ["\\'; DROP TABLE pg_driver_victim; --", 41],
      ["$1", 0],
    ] as const) {
      const rows = await read([withCachedPlan(CompiledQuery.raw(text, [v, n, null]))], {
        statement_timeout: "1234",
      });
      expect(rows).toEqual([[{ v, n: n + 1, absent: true, t: "1234ms" }]]);
    }
    expect((await plans()).filter((p) => p.includes(text))).toHaveLength(1);
  });

  it("stops a prepared statement past statement_timeout", async () => {
    const slow = withCachedPlan(CompiledQuery.raw("SELECT pg_sleep($1::float8) AS s", [2]));
    const failed = await read([slow], { statement_timeout: "50" }).catch((err: unknown) => err);
    expect((failed as { code?: string }).code).toBe("57014");
    expect(await read([timeout])).toEqual([[{ t: "0" }]]);
    expect(await plans()).toContainEqual(expect.stringContaining("pg_sleep"));
  });

  it("parses the settings once per connection, as a named statement bound to each value", async () => {
    await read([timeout], { statement_timeout: "1234" });
    await read([timeout], { statement_timeout: "4321", lock_timeout: "99" });
    const { rows } = await db.executeQuery<{ name: string; from_sql: boolean }>(
      CompiledQuery.raw(
        "SELECT name, from_sql FROM pg_prepared_statements WHERE statement = 'SELECT set_config($1, $2, true)'",
        [],
      ),
    );
    expect(rows).toEqual([{ name: expect.stringMatching(/^portico_\d+$/), from_sql: false }]);
  });

  it("reads a prepared statement's rows without a row description once it has read one", async () => {
    const text = "SELECT $1::int AS n, $2::text AS t, NULL::int AS none, $3::bool AS b, 2.5::float8 AS f";
    const statement = (n: number) => withCachedPlan(CompiledQuery.raw(text, [n, `v${n}`, n > 1]));
    const before = portalDescribes;
    expect(await read([statement(1)], { statement_timeout: "1000" })).toEqual([
      [{ n: 1, t: "v1", none: null, b: false, f: 2.5 }],
    ]);
    // The first time only (the settings' statement was parsed and described by an earlier test).
    expect(portalDescribes - before).toBe(1);
    for (const n of [2, 3]) {
      const [rows] = await read([statement(n)], { statement_timeout: "1000" });
      expect(rows).toEqual([{ n, t: `v${n}`, none: null, b: true, f: 2.5 }]);
      // Made by the compiled literal: the columns in their order, on a plain object.
      expect(Object.keys(rows?.[0] as object)).toEqual(["n", "t", "none", "b", "f"]);
    }
    expect(portalDescribes - before).toBe(1);
  });

  it("keeps a __proto__ column a property of its row, never the row's prototype", async () => {
    const statement = () =>
      withCachedPlan(CompiledQuery.raw(`SELECT $1::text AS "__proto__", 1 AS n`, ["x"]));
    for (let i = 0; i < 2; i++) {
      const [[row]] = (await read([statement()])) as [[Record<string, unknown>]];
      expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(row, "__proto__")?.value).toBe("x");
      expect(row.n).toBe(1);
    }
  });

  it("sends a text PostgreSQL cannot prepare inlined, as before", async () => {
    // `$1 IS NULL` gives the parameter no type to prepare it with; a literal there is text.
    const rows = await read([withCachedPlan(CompiledQuery.raw("SELECT $1 IS NULL AS v", ["x"]))]);
    expect(rows).toEqual([[{ v: false }]]);
    expect(await plans()).not.toContainEqual(expect.stringContaining("$1 IS NULL"));
  });

  it("prepares again what DEALLOCATE ALL took from under it", async () => {
    const statement = () => withCachedPlan(CompiledQuery.raw("SELECT 2 * $1::int AS n", [21]));
    expect(await read([statement()])).toEqual([[{ n: 42 }]]);
    await db.executeQuery(CompiledQuery.raw("DEALLOCATE ALL", []));
    expect(await read([statement()])).toEqual([[{ n: 42 }]]);
    expect(await plans()).toEqual([expect.stringContaining("SELECT 2 * $1::int")]);
  });

  it("prepares again a statement whose columns changed since (a column added by a migration)", async () => {
    await db.executeQuery(CompiledQuery.raw("CREATE TEMP TABLE pg_driver_grown (a int)", []));
    await db.executeQuery(CompiledQuery.raw("INSERT INTO pg_driver_grown VALUES (1)", []));
    const statement = () =>
      withCachedPlan(CompiledQuery.raw("SELECT * FROM pg_driver_grown WHERE a = $1", [1]));
    expect(await read([statement()])).toEqual([[{ a: 1 }]]);
    await db.executeQuery(CompiledQuery.raw("ALTER TABLE pg_driver_grown ADD COLUMN b int DEFAULT 2", []));
    expect(await read([statement()])).toEqual([[{ a: 1, b: 2 }]]);
  });

  it("parses again a statement the connection still has where the driver does not know it (42P05)", async () => {
    const text = "SELECT 3 * $1::int AS n";
    // The name the driver gives the text (a digest of it), taken by a PREPARE the driver never saw.
    const name = `portico_plan_${createHash("sha256").update(text).digest("hex").slice(0, 32)}`;
    await db.executeQuery(CompiledQuery.raw(`PREPARE ${name} AS SELECT 0 AS n`, []));
    expect(await read([withCachedPlan(CompiledQuery.raw(text, [14]))])).toEqual([[{ n: 42 }]]);
  });

  it("prepares again every statement of a group that one change of their table made unusable", async () => {
    await db.executeQuery(CompiledQuery.raw("CREATE TEMP TABLE pg_driver_retyped (id int, a text)", []));
    await db.executeQuery(CompiledQuery.raw("INSERT INTO pg_driver_retyped VALUES (1, 'one')", []));
    const group = () => [
      withCachedPlan(CompiledQuery.raw("SELECT * FROM pg_driver_retyped WHERE id = $1", [1])),
      withCachedPlan(CompiledQuery.raw("SELECT a FROM pg_driver_retyped WHERE id = $1", [1])),
    ];
    expect(await read(group())).toEqual([[{ id: 1, a: "one" }], [{ a: "one" }]]);
    // Both statements' result type changes: the one retry must parse both again, not only the first.
    await db.executeQuery(
      CompiledQuery.raw("ALTER TABLE pg_driver_retyped ALTER COLUMN a TYPE varchar(20)", []),
    );
    expect(await read(group())).toEqual([[{ id: 1, a: "one" }], [{ a: "one" }]]);
  });

  it("keeps at most 64 prepared statements on a connection, dropping the oldest", async () => {
    for (let i = 0; i < 70; i++) {
      const rows = await read([withCachedPlan(CompiledQuery.raw(`SELECT ${i} + $1::int AS n`, [1]))]);
      expect(rows).toEqual([[{ n: i + 1 }]]);
    }
    const kept = await plans();
    expect(kept).toHaveLength(64);
    expect(kept[0]).toContain("SELECT 6 + $1::int");
    expect(kept[63]).toContain("SELECT 69 + $1::int");
    // A dropped one is prepared again when it comes back.
    expect(await read([withCachedPlan(CompiledQuery.raw("SELECT 0 + $1::int AS n", [5]))])).toEqual([
      [{ n: 5 }],
    ]);
  });
});

/**
 * Prepared statements (parsed once per connection, then only bound) in transactions, with the
 * statements around them in one pipeline, on the real server through the driver.
 */
describe("prepared statements", () => {
  const url = PG_URL;
  const schema = `driver_prepared_${process.pid}`;
  const admin = new pg.Client({ connectionString: url });
  const pool = new pg.Pool({
    connectionString: url,
    // Two connections, so that both have to prepare; every table in a schema of this file's own.
    max: 2,
    options: `-c search_path=${schema}`,
  });
  const db = kyselyOver(pool);
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

describe("withCachedPlan eviction", () => {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
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
  const admin = new pg.Client({ connectionString: PG_URL });
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1, options: `-c search_path=${schema}` });
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
    connectionString: PG_URL,
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

describe("review: values of a group's prepared statements (passes: no injection found)", () => {
  const pool = new pg.Pool({
    connectionString: PG_URL,
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
  it("round-trips hostile strings bound to a prepared statement with standard_conforming_strings off", async () => {
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

describe("a session the server ended", () => {
  const admin = new pg.Client({ connectionString: PG_URL });
  // One connection: the next statement is handed the client the failed one used, if it is kept.
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  const db = kyselyOver(pool);
  beforeAll(async () => {
    await admin.connect();
  });
  afterAll(async () => {
    await db.destroy();
    await admin.end();
  });

  it("is not given back to the pool, so the next statement runs on a new session", async () => {
    const pid = async () =>
      (await db.executeQuery<{ pid: number }>(CompiledQuery.raw("SELECT pg_backend_pid() AS pid", [])))
        .rows[0]?.pid;
    const first = await pid();
    // Its failure is taken at once: it may come while the termination below is still awaited.
    const sleeping = db.executeQuery(CompiledQuery.raw("SELECT pg_sleep(30)", [])).then(
      () => undefined,
      (err: unknown) => err,
    );
    await expect
      .poll(
        async () =>
          (
            await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'", [
              first,
            ])
          ).rowCount,
      )
      .toBe(1);
    await admin.query("SELECT pg_terminate_backend($1)", [first]);
    expect(await sleeping).toMatchObject({ code: "57P01" });
    const next = await pid();
    expect(next).toBeTypeOf("number");
    expect(next).not.toBe(first);
  });
});
