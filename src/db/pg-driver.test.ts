import { CompiledQuery, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchingPostgresDriver, inline, inOneMessage } from "./pg-driver.js";

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
