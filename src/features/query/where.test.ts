import { describe, expect, it } from "vitest";
import { compileWhere, describeWhereError, WHERE_LIMITS, type WhereField } from "./where.js";
import { type Expr, parseWhere } from "./where-parser.js";

/** The tree as a compact s-expression, so precedence reads at a glance. */
function show(e: Expr): string {
  switch (e.type) {
    case "number":
      return String(e.value);
    case "string":
      return `'${e.value}'`;
    case "null":
      return "NULL";
    case "dateLiteral":
      return `@${e.value}`;
    case "current":
      return `current_${e.which}`;
    case "field":
      return e.name;
    case "negate":
      return `(neg ${show(e.operand)})`;
    case "arithmetic":
    case "compare":
      return `(${e.op} ${show(e.left)} ${show(e.right)})`;
    case "and":
    case "or":
      return `(${e.type} ${e.operands.map(show).join(" ")})`;
    case "not":
      return `(not ${show(e.operand)})`;
    case "in":
      return `(${e.negated ? "not-in" : "in"} ${show(e.operand)} ${e.list.map(show).join(" ")})`;
    case "between":
      return `(${e.negated ? "not-between" : "between"} ${show(e.operand)} ${show(e.low)} ${show(e.high)})`;
    case "like":
      return `(${e.negated ? "not-like" : "like"} ${show(e.operand)} '${e.pattern}'${e.escape ? ` ${e.escape}` : ""})`;
    case "isNull":
      return `(${e.negated ? "is-not-null" : "is-null"} ${show(e.operand)})`;
    case "call":
      return `(${e.name} ${show(e.argument)})`;
    case "substring":
      return `(substring ${show(e.operand)} ${e.start} ${e.length})`;
    case "trim":
      return `(trim ${e.side} ${e.characters ? show(e.characters) : "-"} ${show(e.operand)})`;
    case "cast":
      return `(cast ${show(e.operand)} ${e.target}${e.length ? ` ${e.length}` : ""})`;
    case "extract":
      return `(extract ${e.field} ${show(e.operand)})`;
    case "aggregate":
      return `(${e.fn} ${e.field ?? "*"})`;
  }
}

function tree(where: string): string {
  const parsed = parseWhere(where);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.error));
  return show(parsed.value);
}

function parseError(where: string) {
  const parsed = parseWhere(where);
  if (parsed.ok) throw new Error(`${where} parsed`);
  return parsed.error;
}

describe("parseWhere", () => {
  it("binds OR loosest, then AND, then NOT, then comparisons, then + -, then * /, then unary minus", () => {
    expect(tree("a = 1 OR b = 2 AND c = 3")).toBe("(or (= a 1) (and (= b 2) (= c 3)))");
    expect(tree("NOT a = 1 AND b = 2")).toBe("(and (not (= a 1)) (= b 2))");
    expect(tree("(a = 1 OR b = 2) AND c = 3")).toBe("(and (or (= a 1) (= b 2)) (= c 3))");
    expect(tree("a + b * c = -d / 2 - 1")).toBe("(= (+ a (* b c)) (- (/ (neg d) 2) 1))");
    expect(tree("10 - 4 - 3 = 3")).toBe("(= (- (- 10 4) 3) 3)");
    expect(tree("a = 1 OR b = 2 OR c = 3")).toBe("(or (= a 1) (= b 2) (= c 3))");
    expect(tree("NOT NOT a = 1")).toBe("(not (not (= a 1)))");
  });

  it("reads every construct of the subset", () => {
    expect(tree("1=1")).toBe("(= 1 1)");
    expect(tree("a <> 1 AND a != 2 AND a <= 3 AND a >= 4 AND a < 5 AND a > 6")).toBe(
      "(and (<> a 1) (<> a 2) (<= a 3) (>= a 4) (< a 5) (> a 6))",
    );
    expect(tree("a IN (1, 2, 'x') AND a NOT IN (3)")).toBe("(and (in a 1 2 'x') (not-in a 3))");
    expect(tree("a BETWEEN 1 AND 2 AND b NOT BETWEEN -1 AND 1 + 1")).toBe(
      "(and (between a 1 2) (not-between b -1 (+ 1 1)))",
    );
    expect(tree("a LIKE 'x%' AND b NOT LIKE '%\\_%' ESCAPE '\\'")).toBe(
      "(and (like a 'x%') (not-like b '%\\_%' \\))",
    );
    expect(tree("a IS NULL OR a IS NOT NULL")).toBe("(or (is-null a) (is-not-null a))");
    expect(tree("name = 'O''Brien'")).toBe("(= name 'O'Brien')");
    expect(tree('"my field" = 1.5')).toBe("(= my field 1.5)");
    expect(tree("d = DATE '2012-05-29'")).toBe(`(= d @${Date.UTC(2012, 4, 29)})`);
    expect(tree("d = timestamp '2012-05-29 15:14:25'")).toBe(`(= d @${Date.UTC(2012, 4, 29, 15, 14, 25)})`);
    expect(tree("d < CURRENT_DATE OR d < CURRENT_TIMESTAMP()")).toBe(
      "(or (< d current_date) (< d current_timestamp))",
    );
    expect(tree("UPPER(a) = LOWER(b) AND CHAR_LENGTH(a) > 2")).toBe(
      "(and (= (UPPER a) (LOWER b)) (> (CHAR_LENGTH a) 2))",
    );
    expect(tree("SUBSTRING(a FROM 2 FOR 3) = SUBSTRING(b FROM -1)")).toBe(
      "(= (substring a 2 3) (substring b -1 undefined))",
    );
    expect(tree("TRIM(a) = TRIM(LEADING FROM b) AND TRIM(TRAILING 'x' FROM c) = TRIM('y' FROM d)")).toBe(
      "(and (= (trim BOTH - a) (trim LEADING - b)) (= (trim TRAILING 'x' c) (trim BOTH 'y' d)))",
    );
    expect(tree("CAST(a AS INTEGER) = CAST(b AS DOUBLE PRECISION) AND CAST(c AS VARCHAR(5)) = 'x'")).toBe(
      "(and (= (cast a INTEGER) (cast b FLOAT)) (= (cast c VARCHAR 5) 'x'))",
    );
    expect(tree("EXTRACT(MONTH FROM d) = 11")).toBe("(= (extract MONTH d) 11)");
  });

  it("names the position of a syntax error", () => {
    expect(parseError("pop > ")).toEqual({ kind: "syntax", message: "unexpected end of where", position: 6 });
    expect(parseError("pop >> 1")).toMatchObject({ kind: "syntax", position: 5 });
    expect(parseError("name = 'open")).toMatchObject({
      kind: "syntax",
      message: "unterminated string",
      position: 7,
    });
    expect(parseError("a = 1 AND")).toMatchObject({ kind: "syntax", position: 9 });
    expect(parseError("(a = 1")).toMatchObject({
      kind: "syntax",
      message: "expected ')', found end of where",
    });
    expect(parseError("a = 1 b")).toMatchObject({ kind: "syntax", position: 6 });
    expect(parseError("d = DATE '2021-02-30'")).toMatchObject({ kind: "syntax", position: 9 });
    expect(parseError("d = TIMESTAMP '2021-02-03'")).toMatchObject({ kind: "syntax" });
    expect(parseError("a LIKE b")).toMatchObject({
      kind: "syntax",
      message: "LIKE expects a quoted pattern",
    });
    expect(parseError("a LIKE 'x' ESCAPE 'ab'")).toMatchObject({ kind: "syntax" });
    expect(parseError("a LIKE 'x!' ESCAPE '!'")).toMatchObject({ kind: "syntax" });
    expect(parseError("a LIKE '!x' ESCAPE '!'")).toMatchObject({ kind: "syntax" });
    expect(parseError("EXTRACT(WEEK FROM d) = 1")).toMatchObject({ kind: "syntax", position: 8 });
    expect(parseError("CAST(a AS DATE) = 1")).toMatchObject({ kind: "syntax", position: 10 });
    expect(parseError("SUBSTRING(a FROM b) = 'x'")).toMatchObject({ kind: "syntax" });
    expect(parseError("SUBSTRING(a FROM 1 FOR -1) = 'x'")).toMatchObject({ kind: "syntax" });
    expect(parseError("12abc = 1")).toMatchObject({ kind: "syntax", position: 0 });
  });

  it("refuses comments, separators, concatenation and characters outside the subset by name", () => {
    expect(parseError("1=1 -- x")).toMatchObject({ message: "comments are not allowed", position: 4 });
    expect(parseError("1=1 /* x */")).toMatchObject({ message: "comments are not allowed", position: 4 });
    expect(parseError("1=1; DROP TABLE t")).toMatchObject({ message: "';' is not allowed", position: 3 });
    expect(parseError("a || 'x' = 'y'")).toMatchObject({
      message: "the || operator is not supported",
      position: 2,
    });
    expect(parseError("a::text = 'y'")).toMatchObject({ kind: "syntax", position: 1 });
    expect(parseError("a = 'x\u0000'")).toMatchObject({
      message: "NUL characters are not allowed",
      position: 6,
    });
    expect(parseError("a IN (SELECT b FROM t)")).toMatchObject({
      kind: "syntax",
      message: "unexpected SELECT",
    });
    expect(parseError("1=1 UNION SELECT 1")).toMatchObject({ kind: "syntax" });
  });

  it("refuses an unknown function by its name, such as a database's own", () => {
    expect(parseError("pg_sleep(10) IS NULL")).toEqual({
      kind: "unknownFunction",
      name: "pg_sleep",
      position: 0,
    });
    expect(parseError("a = load_extension('x')")).toEqual({
      kind: "unknownFunction",
      name: "load_extension",
      position: 4,
    });
  });

  it("reads aggregates of a field or of * only when asked to, for a havingClause", () => {
    const having = (text: string) => {
      const parsed = parseWhere(text, { aggregates: true });
      if (!parsed.ok) throw new Error(JSON.stringify(parsed.error));
      return show(parsed.value);
    };
    expect(having("COUNT(*) > 1 AND sum(pop) / Count(\"Pop\") >= 2.5 OR NOT max(kind) = 'x'")).toBe(
      "(or (and (> (COUNT *) 1) (>= (/ (SUM pop) (COUNT Pop)) 2.5)) (not (= (MAX kind) 'x')))",
    );
    expect(having("AVG(a) - STDDEV(a) < VAR(b) AND MIN(c) IS NOT NULL AND kind IN ('a')")).toBe(
      "(and (< (- (AVG a) (STDDEV a)) (VAR b)) (is-not-null (MIN c)) (in kind 'a'))",
    );
    // A where takes no aggregate, and an aggregate takes a field, not an expression.
    expect(parseError("COUNT(*) > 1")).toEqual({
      kind: "syntax",
      message: "COUNT is an aggregate function, which only havingClause takes",
      position: 0,
    });
    expect(parseError("a = 1 OR sum(a) > 1")).toMatchObject({ kind: "syntax", position: 9 });
    for (const [text, position] of [
      ["SUM(*) > 1", 4],
      ["SUM(a + 1) > 1", 6],
      ["COUNT(DISTINCT a) > 1", 15],
      ["MAX(SUM(a)) > 1", 7],
      ["SUM(NULL) > 1", 4],
      ["COUNT() > 1", 6],
    ] as const) {
      const parsed = parseWhere(text, { aggregates: true });
      expect(parsed.ok, text).toBe(false);
      if (!parsed.ok) expect(parsed.error, text).toMatchObject({ kind: "syntax", position });
    }
    const end = parseWhere("COUNT(*) >", { aggregates: true });
    expect(end.ok || end.error).toEqual({
      kind: "syntax",
      message: "unexpected end of havingClause",
      position: 10,
    });
  });

  it("refuses a where longer than the limit before reading it", () => {
    const long = `a IN (${Array.from({ length: 40_000 }, () => "1").join(",")})`;
    expect(long.length).toBeGreaterThan(WHERE_LIMITS.maxLength);
    expect(parseError(long)).toEqual({ kind: "tooLong", length: long.length, max: WHERE_LIMITS.maxLength });
  });

  it("refuses deep nesting without exhausting the stack, however it nests", () => {
    const depth = 30_000;
    for (const where of [
      `${"(".repeat(depth)}1=1${")".repeat(depth)}`,
      `${"NOT ".repeat(depth)}1=1`,
      `${"-".repeat(1)}${"(-".repeat(depth)}1${")".repeat(depth)} = 1`,
      `${"UPPER(".repeat(depth)}a${")".repeat(depth)} = 'A'`,
    ]) {
      expect(parseError(where.slice(0, WHERE_LIMITS.maxLength))).toMatchObject({ kind: "tooDeep" });
    }
    // A long chain of one operator is as deep as it is long, and is refused the same way.
    expect(parseError(`${Array.from({ length: 100 }, () => "1").join(" + ")} = 1`)).toMatchObject({
      kind: "tooDeep",
    });
    // Nesting within the limit is read.
    expect(parseWhere(`${"(".repeat(20)}1=1${")".repeat(20)}`).ok).toBe(true);
  });

  it("keeps a long OR chain or IN list wide rather than deep, up to the node limit", () => {
    const ors = Array.from({ length: 2_000 }, (_, i) => `a = ${i}`).join(" OR ");
    expect(parseWhere(ors).ok).toBe(true);
    const list = `a IN (${Array.from({ length: 5_000 }, (_, i) => i).join(",")})`;
    expect(parseWhere(list).ok).toBe(true);
    const tooMany = `a IN (${Array.from({ length: WHERE_LIMITS.maxNodes }, () => "1").join(",")})`;
    expect(tooMany.length).toBeLessThanOrEqual(WHERE_LIMITS.maxLength);
    expect(parseError(tooMany)).toMatchObject({ kind: "tooComplex", max: WHERE_LIMITS.maxNodes });
  });
});

const FIELDS: Record<string, WhereField> = {
  POP: { column: "pop_2010", type: "esriFieldTypeInteger" },
  Name: { column: 'na"me', type: "esriFieldTypeString" },
  Born: { column: "born", type: "esriFieldTypeDate" },
  Shape: { column: "shape", type: "esriFieldTypeGeometry" },
  area: { column: "area1", type: "esriFieldTypeDouble" },
  AREA: { column: "area2", type: "esriFieldTypeDouble" },
};
const NOW = Date.UTC(2021, 5, 30, 18, 0, 0);

const sqlite = (where: string) => compileWhere(where, { engine: "sqlite", fields: FIELDS, now: NOW });
const postgres = (where: string, firstParameter?: number) =>
  compileWhere(where, { engine: "postgres", fields: FIELDS, now: NOW, firstParameter });

describe("compileWhere", () => {
  it("binds every value and quotes the caller's column, never the client's text", () => {
    expect(sqlite("pop = 5 AND name = 'x''y'")).toEqual({
      ok: true,
      value: {
        sql: `(("pop_2010" = CAST(? AS INTEGER)) AND ("na""me" = CAST(? AS TEXT)))`,
        parameters: [5, "x'y"],
      },
    });
    expect(postgres("pop = 5 AND name < 'x''y'", 3)).toEqual({
      ok: true,
      value: {
        sql: `(("pop_2010" = CAST($3 AS bigint)) AND (("na""me" COLLATE "C") < (CAST($4 AS text) COLLATE "C")))`,
        parameters: [5, "x'y"],
      },
    });
  });

  it("compiles LIKE to an ASCII case fold on both engines, without PostgreSQL's default escape", () => {
    expect(sqlite("name LIKE 'AB%'")).toEqual({
      ok: true,
      value: { sql: `(lower("na""me") LIKE CAST(? AS TEXT))`, parameters: ["ab%"] },
    });
    expect(postgres("name NOT LIKE 'A!%' ESCAPE '!'")).toEqual({
      ok: true,
      value: {
        sql: `(translate("na""me", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') NOT LIKE CAST($1 AS text) ESCAPE CAST($2 AS text))`,
        parameters: ["a!%", "!"],
      },
    });
    const plain = postgres("name LIKE 'a'");
    expect(plain.ok && plain.value.sql.endsWith("ESCAPE '')")).toBe(true);
  });

  it("turns DATE, TIMESTAMP and CURRENT_* into bound epoch milliseconds, UTC", () => {
    expect(
      sqlite("born >= DATE '2020-01-01' AND born < CURRENT_DATE AND born < CURRENT_TIMESTAMP"),
    ).toMatchObject({
      ok: true,
      value: { parameters: [Date.UTC(2020, 0, 1), Date.UTC(2021, 5, 30), NOW] },
    });
    // Before 1970 the day still starts at midnight UTC.
    const early = compileWhere("born < CURRENT_DATE", { engine: "sqlite", fields: FIELDS, now: -1 });
    expect(early).toMatchObject({ ok: true, value: { parameters: [Date.UTC(1969, 11, 31)] } });
  });

  it("guards division by zero and keeps the SQL free of the client's comment and quote characters", () => {
    const compiled = postgres("pop / 0 IS NULL AND name = '--;/*'");
    expect(compiled).toMatchObject({ ok: true, value: { parameters: [0, "--;/*"] } });
    expect(compiled.ok && compiled.value.sql).toContain("NULLIF(CAST($1 AS bigint), 0)");
    expect(compiled.ok && compiled.value.sql).not.toMatch(/--|;|\/\*/);
  });

  it("matches field names case-insensitively and refuses unknown, ambiguous and unqueryable fields by name", () => {
    expect(sqlite("Pop = 1").ok && sqlite("pOP = 1").ok && sqlite('"pop" = 1').ok).toBe(true);
    expect(sqlite("population = 1")).toEqual({
      ok: false,
      error: { kind: "unknownField", name: "population", position: 0 },
    });
    expect(sqlite("1 = 1 AND Area > 1")).toEqual({
      ok: false,
      error: { kind: "ambiguousField", name: "Area", position: 10 },
    });
    expect(sqlite("shape IS NULL")).toEqual({
      ok: false,
      error: { kind: "unsupportedField", name: "shape", fieldType: "esriFieldTypeGeometry", position: 0 },
    });
    // Names that look like something else are still only names of fields.
    expect(sqlite("sqlite_master = 1")).toMatchObject({ ok: false, error: { kind: "unknownField" } });
    expect(sqlite('"1=1) OR (1" = 1')).toMatchObject({
      ok: false,
      error: { kind: "unknownField", name: "1=1) OR (1" },
    });
  });

  it("refuses operands of different types rather than leave them to each engine's coercions", () => {
    for (const where of [
      "pop = '5'",
      "name = 5",
      "born = '2020-01-01'",
      "born = 1577836800000",
      "pop IN (1, 'a')",
      "pop BETWEEN 'a' AND 'z'",
      "name + 1 = 2",
      "-name = 'a'",
      "pop LIKE '5%'",
      "UPPER(pop) = 'A'",
      "EXTRACT(YEAR FROM pop) = 2020",
      "CAST(name AS INTEGER) = 1",
      "CAST(area AS VARCHAR) = '1'",
      "born + 1 > born",
      "(pop = 1) = (pop = 2)",
      "pop",
      "1 = 1 AND pop",
      "NOT pop",
      "(1 = 1) IS NULL",
    ]) {
      const compiled = compileWhere(where, {
        engine: "postgres",
        fields: { POP: FIELDS.POP, Name: FIELDS.Name, Born: FIELDS.Born, area: FIELDS.area } as Record<
          string,
          WhereField
        >,
        now: NOW,
      });
      expect(compiled, where).toMatchObject({ ok: false, error: { kind: "typeMismatch" } });
    }
  });

  it("describes every error with what it names", () => {
    const unknown = sqlite("colour = 'red'");
    expect(!unknown.ok && describeWhereError(unknown.error)).toBe(
      "where names a field that does not exist: 'colour' (at character 0)",
    );
    const fn = sqlite("pg_sleep(1) IS NULL");
    expect(!fn.ok && describeWhereError(fn.error)).toContain("'pg_sleep'");
    const bad = sqlite("pop >");
    expect(!bad.ok && describeWhereError(bad.error)).toBe(
      "Invalid where at character 5: unexpected end of where",
    );
  });
});
