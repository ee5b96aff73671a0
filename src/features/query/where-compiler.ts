/**
 * The compiler of a parsed `where` (see `where-parser.ts`) into a SQL fragment with bound
 * parameters, for SQLite and PostgreSQL, written so that both engines select the same rows.
 *
 * - No value is ever written into the SQL text: every literal is a parameter, wrapped in an
 *   explicit CAST (better-sqlite3 binds every JavaScript number as REAL, and PostgreSQL cannot
 *   type `$1 + $2`). Columns come only from the caller's field list, double-quoted.
 * - Values are typed (integer, float, string, date, boolean); operands of different types are
 *   refused rather than left to SQLite's affinities and PostgreSQL's errors, which differ.
 * - Dates are epoch milliseconds (UTC) in integer columns. DATE/TIMESTAMP literals, CURRENT_DATE
 *   and CURRENT_TIMESTAMP are computed here (CURRENT_* from the `now` the caller gives, UTC) and
 *   bound as integers, so both engines compare the same numbers; EXTRACT reads the UTC calendar.
 * - Integer division truncates toward zero on both engines; division by zero is NULL on both
 *   (`NULLIF`), where PostgreSQL alone would raise.
 * - Text compares by code point on both: PostgreSQL's comparisons get `COLLATE "C"`, which is
 *   SQLite's BINARY order for UTF-8.
 * - LIKE is case-insensitive, as on ArcGIS Online's hosted layers, for ASCII letters only (SQLite's
 *   built-in folding); PostgreSQL folds with `translate` to match, and has its default backslash
 *   escape switched off (`ESCAPE ''`). UPPER and LOWER fold ASCII letters only, on both.
 */
import type { CastTarget, Expr, ExtractField } from "./where-parser.js";

export type WhereEngine = "sqlite" | "postgres";

export type EsriFieldType =
  | "esriFieldTypeSmallInteger"
  | "esriFieldTypeInteger"
  | "esriFieldTypeBigInteger"
  | "esriFieldTypeSingle"
  | "esriFieldTypeDouble"
  | "esriFieldTypeString"
  | "esriFieldTypeDate"
  | "esriFieldTypeDateOnly"
  | "esriFieldTypeTimeOnly"
  | "esriFieldTypeTimestampOffset"
  | "esriFieldTypeOID"
  | "esriFieldTypeGeometry"
  | "esriFieldTypeBlob"
  | "esriFieldTypeRaster"
  | "esriFieldTypeGUID"
  | "esriFieldTypeGlobalID"
  | "esriFieldTypeXML";

export interface WhereField {
  /** The column that stores the field, as named in the database (quoted by the compiler). */
  readonly column: string;
  readonly type: EsriFieldType;
}

export interface CompileOptions {
  readonly engine: WhereEngine;
  /** The layer's fields by name; `where` names them in any case, as ArcGIS allows. */
  readonly fields: Readonly<Record<string, WhereField>>;
  /** The moment CURRENT_DATE and CURRENT_TIMESTAMP stand for, in epoch milliseconds. */
  readonly now: number;
  /** The number of the first PostgreSQL placeholder ($n), when the fragment joins a larger query. */
  readonly firstParameter?: number;
}

export interface WhereFragment {
  readonly sql: string;
  readonly parameters: Array<number | string>;
}

export type WhereCompileError =
  | { kind: "unknownField"; name: string; position: number }
  | { kind: "ambiguousField"; name: string; position: number }
  | { kind: "unsupportedField"; name: string; fieldType: EsriFieldType; position: number }
  | { kind: "typeMismatch"; message: string; position: number };

export type ValueType = "integer" | "float" | "string" | "date" | "null" | "boolean";

interface Compiled {
  readonly sql: string;
  readonly type: ValueType;
}

class CompileFailure {
  constructor(readonly error: WhereCompileError) {}
}

const mismatch = (message: string, position: number): CompileFailure =>
  new CompileFailure({ kind: "typeMismatch", message, position });

const FIELD_TYPES: Partial<Record<EsriFieldType, ValueType>> = {
  esriFieldTypeSmallInteger: "integer",
  esriFieldTypeInteger: "integer",
  esriFieldTypeBigInteger: "integer",
  esriFieldTypeOID: "integer",
  esriFieldTypeSingle: "float",
  esriFieldTypeDouble: "float",
  esriFieldTypeString: "string",
  esriFieldTypeGUID: "string",
  esriFieldTypeGlobalID: "string",
  esriFieldTypeDate: "date",
};

/** The type a field's values have in a condition; undefined for fields a condition cannot use. */
export const valueTypeOf = (type: EsriFieldType): ValueType | undefined => FIELD_TYPES[type];

const ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz";

const SQLITE_EXTRACT: Record<ExtractField, string> = {
  YEAR: "%Y",
  MONTH: "%m",
  DAY: "%d",
  HOUR: "%H",
  MINUTE: "%M",
  SECOND: "%S",
};

const numeric = (type: ValueType): boolean => type === "integer" || type === "float" || type === "null";

const quoteIdentifier = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** Lower-cases ASCII letters only, as SQLite's LIKE and lower() do. */
const foldAscii = (text: string): string => text.replace(/[A-Z]/g, (c) => c.toLowerCase());

class Compiler {
  readonly parameters: Array<number | string> = [];
  private readonly fields = new Map<string, WhereField | "ambiguous">();
  private readonly pg: boolean;

  constructor(private readonly options: CompileOptions) {
    this.pg = options.engine === "postgres";
    for (const [name, field] of Object.entries(options.fields)) {
      const key = name.toLowerCase();
      this.fields.set(key, this.fields.has(key) ? "ambiguous" : field);
    }
  }

  private bind(value: number | string): string {
    this.parameters.push(value);
    return this.pg ? `$${(this.options.firstParameter ?? 1) + this.parameters.length - 1}` : "?";
  }

  private integer(value: number): string {
    return `CAST(${this.bind(value)} AS ${this.pg ? "bigint" : "INTEGER"})`;
  }

  private text(value: string): string {
    return `CAST(${this.bind(value)} AS ${this.pg ? "text" : "TEXT"})`;
  }

  predicate(expr: Expr): string {
    const compiled = this.expr(expr);
    if (compiled.type !== "boolean") throw mismatch("where must be a condition, such as 1=1", expr.position);
    return compiled.sql;
  }

  private expr(expr: Expr): Compiled {
    switch (expr.type) {
      case "number":
        return expr.integer
          ? { sql: this.integer(expr.value), type: "integer" }
          : {
              sql: `CAST(${this.bind(expr.value)} AS ${this.pg ? "double precision" : "REAL"})`,
              type: "float",
            };
      case "string":
        return { sql: this.text(expr.value), type: "string" };
      case "null":
        return { sql: "NULL", type: "null" };
      case "dateLiteral":
        return { sql: this.integer(expr.value), type: "date" };
      case "current": {
        const now = this.options.now;
        const value = expr.which === "date" ? now - (((now % 86_400_000) + 86_400_000) % 86_400_000) : now;
        return { sql: this.integer(value), type: "date" };
      }
      case "field":
        return this.field(expr.name, expr.position);
      case "negate": {
        const operand = this.expr(expr.operand);
        if (!numeric(operand.type)) throw mismatch("unary minus expects a number", expr.position);
        return { sql: `(- ${operand.sql})`, type: operand.type === "null" ? "null" : operand.type };
      }
      case "arithmetic": {
        const left = this.expr(expr.left);
        const right = this.expr(expr.right);
        if (!numeric(left.type) || !numeric(right.type)) {
          throw mismatch(`'${expr.op}' expects numbers`, expr.position);
        }
        const type = left.type === "float" || right.type === "float" ? "float" : "integer";
        const sql =
          expr.op === "/"
            ? `(${left.sql} / NULLIF(${right.sql}, 0))`
            : `(${left.sql} ${expr.op} ${right.sql})`;
        return { sql, type };
      }
      case "compare": {
        const [left, right] = this.comparable([expr.left, expr.right], expr.position);
        return { sql: `(${left} ${expr.op} ${right})`, type: "boolean" };
      }
      case "and":
      case "or": {
        const parts = expr.operands.map((operand) => {
          const compiled = this.expr(operand);
          if (compiled.type !== "boolean") {
            throw mismatch(`${expr.type.toUpperCase()} expects conditions`, operand.position);
          }
          return compiled.sql;
        });
        return { sql: balanced(parts, expr.type === "and" ? " AND " : " OR "), type: "boolean" };
      }
      case "not": {
        const operand = this.expr(expr.operand);
        if (operand.type !== "boolean") throw mismatch("NOT expects a condition", expr.position);
        return { sql: `(NOT ${operand.sql})`, type: "boolean" };
      }
      case "in": {
        const [operand, ...list] = this.comparable([expr.operand, ...expr.list], expr.position);
        return {
          sql: `(${operand} ${expr.negated ? "NOT IN" : "IN"} (${list.join(", ")}))`,
          type: "boolean",
        };
      }
      case "between": {
        const [operand, low, high] = this.comparable([expr.operand, expr.low, expr.high], expr.position);
        return {
          sql: `(${operand} ${expr.negated ? "NOT BETWEEN" : "BETWEEN"} ${low} AND ${high})`,
          type: "boolean",
        };
      }
      case "like": {
        const operand = this.expr(expr.operand);
        if (operand.type !== "string" && operand.type !== "null") {
          throw mismatch("LIKE expects text", expr.position);
        }
        const folded = this.pg
          ? `translate(${operand.sql}, '${ASCII_UPPER}', '${ASCII_LOWER}')`
          : `lower(${operand.sql})`;
        const pattern = this.text(foldAscii(expr.pattern));
        const escapeClause =
          expr.escape === undefined
            ? this.pg
              ? " ESCAPE ''"
              : ""
            : ` ESCAPE ${this.text(foldAscii(expr.escape))}`;
        return {
          sql: `(${folded} ${expr.negated ? "NOT LIKE" : "LIKE"} ${pattern}${escapeClause})`,
          type: "boolean",
        };
      }
      case "isNull": {
        const operand = this.expr(expr.operand);
        if (operand.type === "boolean")
          throw mismatch("IS NULL expects a value, not a condition", expr.position);
        return { sql: `(${operand.sql} ${expr.negated ? "IS NOT NULL" : "IS NULL"})`, type: "boolean" };
      }
      case "call": {
        const argument = this.text_(expr.argument, expr.name);
        if (expr.name === "CHAR_LENGTH") {
          return { sql: `${this.pg ? "char_length" : "length"}(${argument})`, type: "integer" };
        }
        const [from, to] = expr.name === "UPPER" ? [ASCII_LOWER, ASCII_UPPER] : [ASCII_UPPER, ASCII_LOWER];
        const sql = this.pg
          ? `translate(${argument}, '${from}', '${to}')`
          : `${expr.name.toLowerCase()}(${argument})`;
        return { sql, type: "string" };
      }
      case "substring": {
        const operand = this.text_(expr.operand, "SUBSTRING");
        // SQL's SUBSTRING(x FROM s FOR n) takes the characters at positions s … s+n-1 that exist;
        // SQLite's substr counts a start below 1 from the end instead. The literal bounds are
        // turned into SQL's meaning here, so that both engines are given a start of at least 1.
        const start = Math.max(expr.start, 1);
        if (expr.length === undefined) {
          const from = `CAST(${this.bind(start)} AS ${this.pg ? "integer" : "INTEGER"})`;
          return {
            sql: this.pg ? `substring(${operand} from ${from})` : `substr(${operand}, ${from})`,
            type: "string",
          };
        }
        const length = Math.max(expr.start + expr.length - start, 0);
        const from = `CAST(${this.bind(start)} AS ${this.pg ? "integer" : "INTEGER"})`;
        const count = `CAST(${this.bind(length)} AS ${this.pg ? "integer" : "INTEGER"})`;
        return {
          sql: this.pg
            ? `substring(${operand} from ${from} for ${count})`
            : `substr(${operand}, ${from}, ${count})`,
          type: "string",
        };
      }
      case "trim": {
        const characters = expr.characters ? this.text_(expr.characters, "TRIM") : this.text(" ");
        const operand = this.text_(expr.operand, "TRIM");
        if (this.pg)
          return { sql: `trim(${expr.side.toLowerCase()} ${characters} from ${operand})`, type: "string" };
        const fn = { BOTH: "trim", LEADING: "ltrim", TRAILING: "rtrim" }[expr.side];
        return { sql: `${fn}(${operand}, ${characters})`, type: "string" };
      }
      case "cast":
        return this.cast(expr.operand, expr.target, expr.length, expr.position);
      case "extract": {
        const operand = this.expr(expr.operand);
        if (operand.type !== "date" && operand.type !== "null") {
          throw mismatch("EXTRACT expects a date", expr.position);
        }
        // SQLite turns fractional epoch seconds into its whole-millisecond day count exactly;
        // PostgreSQL's to_timestamp keeps microseconds. The floor makes SECOND whole on both.
        const sql = this.pg
          ? `CAST(floor(EXTRACT(${expr.field} FROM (to_timestamp(CAST(${operand.sql} AS double precision) / 1000) AT TIME ZONE 'UTC'))) AS bigint)`
          : `CAST(strftime('${SQLITE_EXTRACT[expr.field]}', ${operand.sql} / 1000.0, 'unixepoch') AS INTEGER)`;
        return { sql, type: "integer" };
      }
      case "aggregate":
        // The parser reads aggregates only for a havingClause, which is not compiled here.
        throw mismatch(`${expr.fn} is an aggregate function, which only havingClause takes`, expr.position);
    }
  }

  private field(name: string, position: number): Compiled {
    const field = this.fields.get(name.toLowerCase());
    if (field === undefined) throw new CompileFailure({ kind: "unknownField", name, position });
    if (field === "ambiguous") throw new CompileFailure({ kind: "ambiguousField", name, position });
    const type = FIELD_TYPES[field.type];
    if (type === undefined) {
      throw new CompileFailure({ kind: "unsupportedField", name, fieldType: field.type, position });
    }
    return { sql: quoteIdentifier(field.column), type };
  }

  /** An argument that must be text (or NULL). */
  private text_(expr: Expr, what: string): string {
    const compiled = this.expr(expr);
    if (compiled.type !== "string" && compiled.type !== "null")
      throw mismatch(`${what} expects text`, expr.position);
    return compiled.sql;
  }

  /** Operands that are compared with each other: of one type, and text in code point order. */
  private comparable(exprs: Expr[], position: number): string[] {
    const compiled = exprs.map((expr) => this.expr(expr));
    const kinds = new Set(
      compiled
        .map((c) => (c.type === "integer" || c.type === "float" ? "number" : c.type))
        .filter((t) => t !== "null"),
    );
    if (kinds.has("boolean")) throw mismatch("a condition cannot be compared", position);
    if (kinds.size > 1) throw mismatch(`cannot compare ${[...kinds].join(" with ")}`, position);
    const collate = this.pg && kinds.has("string");
    return compiled.map((c) => (collate && c.type === "string" ? `(${c.sql} COLLATE "C")` : c.sql));
  }

  private cast(
    operandExpr: Expr,
    target: CastTarget,
    length: number | undefined,
    position: number,
  ): Compiled {
    const operand = this.expr(operandExpr);
    const from = operand.type;
    if (from === "null")
      return {
        sql: "NULL",
        type: target === "VARCHAR" ? "string" : target === "INTEGER" ? "integer" : "float",
      };
    switch (target) {
      case "INTEGER":
        if (!numeric(from)) throw mismatch(`cannot CAST ${from} AS INTEGER`, position);
        // SQLite truncates a REAL cast to INTEGER; PostgreSQL rounds, unless told to truncate.
        if (from === "float") {
          return {
            sql: this.pg ? `CAST(trunc(${operand.sql}) AS bigint)` : `CAST(${operand.sql} AS INTEGER)`,
            type: "integer",
          };
        }
        return { sql: operand.sql, type: "integer" };
      case "FLOAT":
        if (!numeric(from)) throw mismatch(`cannot CAST ${from} AS FLOAT`, position);
        return { sql: `CAST(${operand.sql} AS ${this.pg ? "double precision" : "REAL"})`, type: "float" };
      case "VARCHAR": {
        // The engines spell floats differently (1e+20 against 1.0e+20): only integers become text.
        if (from !== "string" && from !== "integer")
          throw mismatch(`cannot CAST ${from} AS VARCHAR`, position);
        const text = from === "string" ? operand.sql : `CAST(${operand.sql} AS ${this.pg ? "text" : "TEXT"})`;
        if (length === undefined) return { sql: text, type: "string" };
        const count = `CAST(${this.bind(length)} AS ${this.pg ? "integer" : "INTEGER"})`;
        return {
          sql: this.pg ? `substring(${text} from 1 for ${count})` : `substr(${text}, 1, ${count})`,
          type: "string",
        };
      }
    }
  }
}

export function compileWhereAst(
  ast: Expr,
  options: CompileOptions,
): { ok: true; value: WhereFragment } | { ok: false; error: WhereCompileError } {
  const compiler = new Compiler(options);
  try {
    const sql = compiler.predicate(ast);
    return { ok: true, value: { sql, parameters: compiler.parameters } };
  } catch (error) {
    if (error instanceof CompileFailure) return { ok: false, error: error.error };
    throw error;
  }
}

/**
 * `(a OP b OP c …)` nested as a balanced tree: SQLite parses a flat chain into a tree as deep as it
 * is long and refuses one deeper than 1000 levels ("Expression tree is too large"), which a
 * `where` of a few thousand ORs (well within WHERE_LIMITS) would reach. Balanced, 20,000 operands
 * nest 15 levels. The operands keep their order, and with it the order of their `?` parameters.
 */
function balanced(parts: readonly string[], op: string): string {
  if (parts.length <= 2) return `(${parts.join(op)})`;
  const half = Math.ceil(parts.length / 2);
  return `(${balanced(parts.slice(0, half), op)}${op}${balanced(parts.slice(half), op)})`;
}
