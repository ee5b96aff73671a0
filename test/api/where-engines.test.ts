/**
 * The `where` compiler's fragments run against a real database of the engine under test
 * (PORTICO_TEST_ENGINE: in-memory SQLite, or a schema of its own on PostgreSQL), over a small
 * hand-made table. The expected ids are worked out by hand from the rows below, so the same
 * expectations on both engines prove that both select the same rows for every construct.
 */
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileWhere, type WhereField } from "../../src/features/query/where.js";
import { engine } from "../helpers/portico.js";

const at = (iso: string): number => Date.parse(iso);

// id, name, pop, area, born (epoch ms, UTC), code
const ROWS: Array<[number, string, number | null, number | null, number | null, string | null]> = [
  [1, "Alpha", 100, 2.75, at("2020-01-15T00:00:00Z"), "A_1"],
  [2, "beta", 250, 10.0, at("2021-06-30T12:34:56Z"), "b%2"],
  [3, "Gamma Ray", null, 0.5, at("2019-12-31T23:59:59Z"), null],
  [4, "delta", -7, null, null, "x"],
  [5, " \u00e9psilon ", 0, 3.0, at("2020-02-29T06:00:00Z"), "\u00c9"],
  [6, "ALPHA", 5, 1.25, -500, ""],
];

const FIELDS: Record<string, WhereField> = {
  OBJECTID: { column: "id", type: "esriFieldTypeOID" },
  Name: { column: "name", type: "esriFieldTypeString" },
  Pop: { column: "pop", type: "esriFieldTypeInteger" },
  Area: { column: "area", type: "esriFieldTypeDouble" },
  Born: { column: "born", type: "esriFieldTypeDate" },
  Code: { column: "code", type: "esriFieldTypeString" },
  Shape: { column: "shape", type: "esriFieldTypeGeometry" },
};

/** 2021-06-30T18:00:00Z: CURRENT_DATE is that day's midnight, UTC. */
const NOW = at("2021-06-30T18:00:00Z");

interface Db {
  select(where: string, parameters: Array<number | string>): Promise<number[]>;
  count(table: string): Promise<number>;
  close(): Promise<void>;
}

async function openSqlite(): Promise<Db> {
  const db = new Database(":memory:");
  db.exec(
    "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, pop INTEGER, area REAL, born INTEGER, code TEXT, shape BLOB)",
  );
  db.exec("CREATE TABLE sentinel (v INTEGER)");
  db.exec("INSERT INTO sentinel VALUES (42)");
  const insert = db.prepare("INSERT INTO t (id, name, pop, area, born, code) VALUES (?, ?, ?, ?, ?, ?)");
  for (const row of ROWS) insert.run(...row);
  return {
    select: async (where, parameters) =>
      (
        db.prepare(`SELECT id FROM t WHERE ${where} ORDER BY id`).all(...parameters) as Array<{ id: number }>
      ).map((r) => r.id),
    count: async (table) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n,
    close: async () => {
      db.close();
    },
  };
}

async function openPostgres(): Promise<Db> {
  const client = new pg.Client({ connectionString: process.env.PORTICO_TEST_DATABASE_URL });
  await client.connect();
  const schema = `where_${randomBytes(6).toString("hex")}`;
  await client.query(`CREATE SCHEMA ${schema}`);
  await client.query(`SET search_path TO ${schema}`);
  await client.query(
    "CREATE TABLE t (id integer PRIMARY KEY, name text, pop integer, area double precision, born bigint, code text, shape bytea)",
  );
  await client.query("CREATE TABLE sentinel (v integer)");
  await client.query("INSERT INTO sentinel VALUES (42)");
  for (const row of ROWS) {
    await client.query(
      "INSERT INTO t (id, name, pop, area, born, code) VALUES ($1, $2, $3, $4, $5, $6)",
      row,
    );
  }
  return {
    select: async (where, parameters) =>
      (await client.query(`SELECT id FROM t WHERE ${where} ORDER BY id`, parameters)).rows.map((r) =>
        Number(r.id),
      ),
    count: async (table) => Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n),
    close: async () => {
      await client.query(`DROP SCHEMA ${schema} CASCADE`);
      await client.end();
    },
  };
}

let db: Db;
beforeAll(async () => {
  db = engine === "postgres" ? await openPostgres() : await openSqlite();
});
afterAll(async () => {
  await db?.close();
});

async function run(where: string): Promise<number[]> {
  const compiled = compileWhere(where, { engine, fields: FIELDS, now: NOW });
  if (!compiled.ok) throw new Error(`${where}: refused ${JSON.stringify(compiled.error)}`);
  return db.select(compiled.value.sql, compiled.value.parameters);
}

const ALL = [1, 2, 3, 4, 5, 6];

const CASES: Array<[string, number[]]> = [
  // The classic and comparisons; NULL never compares.
  ["1=1", ALL],
  ["1=0", []],
  ["pop > 100", [2]],
  ["pop >= 100", [1, 2]],
  ["pop <> 100", [2, 4, 5, 6]],
  ["pop != 100", [2, 4, 5, 6]],
  ["pop < 0", [4]],
  ["pop <= 0", [4, 5]],
  ["POP = 5", [6]],
  ['"pop" = 5', [6]],
  ["objectid = 3", [3]],
  ["pop = NULL", []],
  ["NULL IS NULL", ALL],
  ["1.5e1 = 15", ALL],
  // Text: equality is exact, order is by code point (space < 'A' < 'B' < 'a').
  ["name = 'Alpha'", [1]],
  ["name < 'B'", [1, 5, 6]],
  ["name >= 'a'", [2, 4]],
  ["name = 'O''Brien' OR name = 'beta'", [2]],
  ["name = ''' OR 1=1 --'", []],
  // Boolean logic and precedence: AND binds tighter than OR, NOT tighter than AND.
  ["pop > 50 AND area > 5", [2]],
  ["pop > 50 OR area < 1", [1, 2, 3]],
  ["pop = 5 OR pop = 100 AND area > 5", [6]],
  ["(pop = 5 OR pop = 100) AND area > 2", [1]],
  ["NOT pop > 100", [1, 4, 5, 6]],
  ["NOT (pop > 100 OR area > 2)", [6]],
  ["NOT pop > 100 AND area > 2", [1, 5]],
  // IN and BETWEEN, and NOT IN with a NULL in the list, which selects nothing.
  ["pop IN (5, 100, 7)", [1, 6]],
  ["pop NOT IN (5, 100)", [2, 4, 5]],
  ["pop NOT IN (5, NULL)", []],
  ["name IN ('beta', 'delta')", [2, 4]],
  ["pop BETWEEN 0 AND 100", [1, 5, 6]],
  ["pop NOT BETWEEN 0 AND 100", [2, 4]],
  ["area BETWEEN 1 AND 3", [1, 5, 6]],
  ["pop BETWEEN 0 AND 100 AND area > 2", [1, 5]],
  // LIKE: case-insensitive for ASCII letters on both engines, no escape unless one is named.
  ["name LIKE 'alpha'", [1, 6]],
  ["name LIKE 'A%'", [1, 6]],
  ["name LIKE '%a'", [1, 2, 4, 6]],
  ["name LIKE '_e%'", [2, 4]],
  ["name NOT LIKE '%a%'", [5]],
  ["code LIKE '%\\_%' ESCAPE '\\'", [1]],
  ["code LIKE '%!%%' ESCAPE '!'", [2]],
  ["code LIKE 'a\\_1'", []],
  ["code LIKE '\u00e9'", []],
  // IS [NOT] NULL.
  ["code IS NULL", [3]],
  ["code IS NOT NULL", [1, 2, 4, 5, 6]],
  ["area IS NULL", [4]],
  // Arithmetic: integer division truncates toward zero, division by zero is NULL.
  ["pop + 10 > 100", [1, 2]],
  ["pop * 2 = 10", [6]],
  ["pop / 2 = 2", [6]],
  ["pop / 2 = -3", [4]],
  ["pop / 0 IS NULL", ALL],
  ["area / 2 > 1", [1, 2, 5]],
  ["-pop > 0", [4]],
  ["- pop = 7", [4]],
  ["pop - -7 = 0", [4]],
  ["7 / 2 = 3", ALL],
  ["2 + 3 * 4 = 14", ALL],
  ["(2 + 3) * 4 = 20", ALL],
  ["10 - 4 - 3 = 3", ALL],
  // Functions. UPPER and LOWER fold ASCII letters only.
  ["UPPER(name) = 'ALPHA'", [1, 6]],
  ["lower(name) = 'gamma ray'", [3]],
  ["UPPER(name) = ' \u00e9PSILON '", [5]],
  ["CHAR_LENGTH(name) = 9", [3, 5]],
  ["CHAR_LENGTH(code) = 0", [6]],
  ["SUBSTRING(name FROM 1 FOR 3) = 'Alp'", [1]],
  ["SUBSTRING(name FROM 0 FOR 3) = 'Al'", [1]],
  ["SUBSTRING(name FROM -5 FOR 3) = ''", ALL],
  ["SUBSTRING(name FROM 3) = 'ta'", [2]],
  ["TRIM(name) = '\u00e9psilon'", [5]],
  ["TRIM(LEADING FROM name) = '\u00e9psilon '", [5]],
  ["TRIM(TRAILING 'a' FROM name) = 'bet'", [2]],
  ["TRIM(BOTH 'A' FROM name) = 'LPH'", [6]],
  ["CAST(area AS INTEGER) = 2", [1]],
  ["CAST(pop AS VARCHAR) = '-7'", [4]],
  ["CAST(pop AS VARCHAR(2)) = '25'", [2]],
  ["CAST(pop AS FLOAT) / 2 = 2.5", [6]],
  // Dates: epoch milliseconds, literals and EXTRACT in UTC, CURRENT_* from the given moment.
  ["EXTRACT(YEAR FROM born) = 2020", [1, 5]],
  ["EXTRACT(MONTH FROM born) = 12", [3, 6]],
  ["EXTRACT(SECOND FROM born) = 59", [3, 6]],
  ["EXTRACT(HOUR FROM born) = 12 AND EXTRACT(MINUTE FROM born) = 34", [2]],
  ["EXTRACT(DAY FROM born) = 29", [5]],
  ["born = TIMESTAMP '2021-06-30 12:34:56'", [2]],
  ["born >= DATE '2020-01-01'", [1, 2, 5]],
  ["born < date '2020-01-01'", [3, 6]],
  ["born BETWEEN DATE '2020-01-01' AND DATE '2020-12-31'", [1, 5]],
  ["born < CURRENT_DATE", [1, 3, 5, 6]],
  ["born < CURRENT_DATE()", [1, 3, 5, 6]],
  ["born < CURRENT_TIMESTAMP", [1, 2, 3, 5, 6]],
];

describe(`where on ${engine}`, () => {
  for (const [where, expected] of CASES) {
    it(`${where} selects ${JSON.stringify(expected)}`, async () => {
      expect(await run(where)).toEqual(expected);
    });
  }
});

/** A small seeded generator, so that a failing string can be found again. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const HOSTILE = [
  "'",
  "''",
  '"',
  "--",
  "/*",
  "*/",
  ";",
  "UNION SELECT id FROM t",
  "DROP TABLE sentinel",
  "DELETE FROM t",
  "pg_sleep(1)",
  "load_extension('x')",
  "(SELECT 1)",
  "sqlite_master",
  "name",
  "pop",
  "Born",
  "=",
  "<>",
  "OR",
  "AND",
  "NOT",
  "1=1",
  "(",
  ")",
  ",",
  "\\",
  "%",
  "||",
  "$1",
  "?",
  ":x",
  "@a",
  "x'41'",
  "E'\\x27'",
  "CAST(",
  "AS",
  "text",
  "IN",
  "LIKE",
  "ESCAPE",
  "NULL",
  "'; DROP TABLE sentinel; --",
  "1",
  "0x10",
  "\u0000",
  "\n",
  "`",
  "[pop]",
  "UPPER(",
  "CHR(39)",
  "COLLATE",
  "::int",
];

describe(`hostile where on ${engine}`, () => {
  it("refuses statements, comments, subqueries and database functions by name", () => {
    for (const where of [
      "1=1; DROP TABLE sentinel",
      "1=1 -- and the rest",
      "1=1 /* */",
      "pop IN (SELECT pop FROM t)",
      "1=1 UNION SELECT id FROM sentinel",
      "pg_sleep(5) IS NULL",
      "load_extension('x') IS NULL",
      "name = 'a' || 'b'",
      "pop::text = '5'",
      "Shape IS NULL",
    ]) {
      expect(compileWhere(where, { engine, fields: FIELDS, now: NOW }).ok, where).toBe(false);
    }
  });

  it("either refuses a random hostile where or runs it without changing the database", async () => {
    const next = random(13);
    let compiled = 0;
    for (let i = 0; i < 3000; i++) {
      const parts = Array.from(
        { length: 1 + Math.floor(next() * 8) },
        () => HOSTILE[Math.floor(next() * HOSTILE.length)],
      );
      const joined = parts.join(next() < 0.5 ? " " : "");
      // Half are free-form; half put the hostile text inside a literal, where it must stay a value.
      const quoted = `'${joined.replaceAll("'", "''")}'`;
      const where =
        i % 2 === 0
          ? joined
          : ([`name = ${quoted}`, `code LIKE ${quoted} OR pop > 0`, `UPPER(name) IN (${quoted}, 'BETA')`][
              i % 3
            ] as string);
      const result = compileWhere(where, { engine, fields: FIELDS, now: NOW });
      if (!result.ok) continue;
      compiled++;
      // Nothing the caller wrote reaches the SQL text: values are parameters, names are columns.
      expect(result.value.sql, where).not.toMatch(
        /;|--|\/\*|sentinel|sqlite_master|pg_sleep|load_extension/i,
      );
      await db.select(result.value.sql, result.value.parameters);
    }
    // Enough of them compile for the execution half of this test to mean something.
    expect(compiled).toBeGreaterThan(1000);
    expect(await db.count("t")).toBe(ROWS.length);
    expect(await db.count("sentinel")).toBe(1);
  });
});
