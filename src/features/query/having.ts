/**
 * A layer query's `havingClause`: a condition on the groups of a statistics query, as ArcGIS
 * documents it (`COUNT(objectid) > 100`, `SUM(pop) > 1000 AND state <> 'CA'`). It is read by the
 * `where` parser with aggregates switched on, checked here against the layer's fields and the
 * group-by fields, and evaluated here, in the process, on each group: the statistics query computes
 * the aggregates the condition names beside those of `outStatistics` (`statistics.ts`).
 *
 * Why in the process rather than as SQL: STDDEV and VAR are computed in the process from sums
 * (SQLite has no built-in for them), and a condition evaluated on the very numbers the answer
 * shows holds or fails alike on both engines. The clause's text never becomes SQL at all.
 *
 * The semantics are SQL's, as the `where` compiler gives them on both engines: three-valued logic
 * (a comparison with NULL is unknown, and an unknown condition drops the group), integer division
 * truncating toward zero, division by zero NULL, text compared by code point, and operands of
 * different types refused before anything runs. Of the `where` subset the clause takes
 * comparisons, AND/OR/NOT, IN, BETWEEN, IS NULL, arithmetic, literals, aggregates and the group-by
 * fields; text and date functions belong in `where`, on the rows before they are grouped.
 */
import { errors } from "../../errors.js";
import { fieldNamed, type LayerField, type LayerSchema } from "../layer-schema.js";
import { describeWhereError } from "./where.js";
import { type ValueType, valueTypeOf } from "./where-compiler.js";
import { type AggregateFunction, type Expr, parseWhere } from "./where-parser.js";

/** The statistics both `outStatistics` and a `havingClause` name, in ArcGIS's spelling. */
export type AggregateType = "count" | "sum" | "min" | "max" | "avg" | "stddev" | "var";

/** Most different aggregates one clause names: each is a column of the statistics statement. */
export const MAX_HAVING_AGGREGATES = 100;

export interface HavingAggregate {
  type: AggregateType;
  /** Undefined for `COUNT(*)`. */
  field?: LayerField;
}

export interface Having {
  /** The aggregates the condition names, each once; the statistics query computes them per group. */
  aggregates: HavingAggregate[];
  /**
   * Whether a group passes: its group-by values in the order of `groupByFieldsForStatistics`, the
   * values of `aggregates` in their order (as the answer gives them: dates and numbers as numbers),
   * and the moment CURRENT_DATE and CURRENT_TIMESTAMP stand for.
   */
  holds(groupValues: readonly unknown[], aggregateValues: readonly unknown[], now: number): boolean;
}

type Value = number | string | boolean | null;

interface Row {
  groups: readonly unknown[];
  aggregates: readonly unknown[];
  now: number;
}

interface Checked {
  type: ValueType;
  run: (row: Row) => Value;
}

const PARAMETER = "havingClause";
const bad = (message: string, position: number) =>
  errors.invalidParameter(
    PARAMETER,
    describeWhereError({ kind: "typeMismatch", message, position }, PARAMETER),
  );

const numeric = (type: ValueType) => type === "integer" || type === "float" || type === "null";

/** Code point order, as SQLite's BINARY collation and PostgreSQL's "C" compare text (not UTF-16 units). */
export function compareText(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length) {
    const x = a.codePointAt(i) as number;
    const y = b.codePointAt(i) as number;
    if (x !== y) return x < y ? -1 : 1;
    // Equal code points take equal code units, so one index walks both strings.
    i += x > 0xffff ? 2 : 1;
  }
  return Math.sign(a.length - b.length);
}

/** -1, 0 or 1; null when either side is NULL. The checker has made sure both are of one kind. */
function compare(a: Value, b: Value): number | null {
  if (a === null || b === null) return null;
  if (typeof a === "string" && typeof b === "string") return compareText(a, b);
  return Math.sign((a as number) - (b as number));
}

const and = (values: Value[]): Value =>
  values.includes(false) ? false : values.includes(null) ? null : true;
const or = (values: Value[]): Value => (values.includes(true) ? true : values.includes(null) ? null : false);
const not = (value: Value): Value => (value === null ? null : !value);

class Checker {
  readonly aggregates: HavingAggregate[] = [];

  constructor(
    private readonly schema: LayerSchema,
    private readonly groupBy: readonly LayerField[],
  ) {}

  condition(expr: Expr, what: string): Checked {
    const checked = this.expr(expr);
    if (checked.type !== "boolean")
      throw bad(`${what} expects a condition, such as COUNT(*) > 1`, expr.position);
    return checked;
  }

  private field(name: string, position: number): LayerField {
    const field = fieldNamed(this.schema, name);
    if (!field) {
      throw errors.invalidParameter(
        PARAMETER,
        describeWhereError({ kind: "unknownField", name, position }, PARAMETER),
      );
    }
    return field;
  }

  private typeOf(field: LayerField, position: number): ValueType {
    const type = valueTypeOf(field.type);
    if (type === undefined) {
      throw errors.invalidParameter(
        PARAMETER,
        describeWhereError(
          { kind: "unsupportedField", name: field.name, fieldType: field.type, position },
          PARAMETER,
        ),
      );
    }
    return type;
  }

  private aggregate(fn: AggregateFunction, name: string | undefined, position: number): Checked {
    const field = name === undefined ? undefined : this.field(name, position);
    let type: ValueType = "integer";
    if (field && fn !== "COUNT") {
      const fieldType = this.typeOf(field, position);
      if (fn === "MIN" || fn === "MAX") type = fieldType;
      else if (fieldType !== "integer" && fieldType !== "float") {
        throw bad(`${fn} expects a numeric field; '${field.name}' is ${field.type}`, position);
      } else type = fn === "SUM" && fieldType === "integer" ? "integer" : "float";
    }
    const wanted: HavingAggregate = { type: fn.toLowerCase() as AggregateType, ...(field ? { field } : {}) };
    let index = this.aggregates.findIndex((a) => a.type === wanted.type && a.field === wanted.field);
    if (index < 0) {
      if (this.aggregates.length >= MAX_HAVING_AGGREGATES) {
        throw bad(`names more than ${MAX_HAVING_AGGREGATES} different aggregates`, position);
      }
      index = this.aggregates.push(wanted) - 1;
    }
    const at = index;
    return { type, run: (row) => (row.aggregates[at] ?? null) as Value };
  }

  /** Operands compared with each other: of one kind (numbers, text or dates), NULL aside. */
  private comparable(exprs: Expr[], position: number): Checked[] {
    const checked = exprs.map((e) => this.expr(e));
    const kinds = new Set(
      checked
        .map((c) => (c.type === "integer" || c.type === "float" ? "number" : c.type))
        .filter((t) => t !== "null"),
    );
    if (kinds.has("boolean")) throw bad("a condition cannot be compared", position);
    if (kinds.size > 1) throw bad(`cannot compare ${[...kinds].join(" with ")}`, position);
    return checked;
  }

  private expr(expr: Expr): Checked {
    switch (expr.type) {
      case "number": {
        const value = expr.value;
        return { type: expr.integer ? "integer" : "float", run: () => value };
      }
      case "string": {
        const value = expr.value;
        return { type: "string", run: () => value };
      }
      case "null":
        return { type: "null", run: () => null };
      case "dateLiteral": {
        const value = expr.value;
        return { type: "date", run: () => value };
      }
      case "current": {
        const day = expr.which === "date";
        return {
          type: "date",
          run: ({ now }) => (day ? now - (((now % 86_400_000) + 86_400_000) % 86_400_000) : now),
        };
      }
      case "field": {
        const field = this.field(expr.name, expr.position);
        const at = this.groupBy.indexOf(field);
        if (at < 0) {
          throw bad(
            `names '${field.name}', which is not in groupByFieldsForStatistics; a field goes inside an aggregate, such as MAX(${field.name})`,
            expr.position,
          );
        }
        return { type: this.typeOf(field, expr.position), run: (row) => (row.groups[at] ?? null) as Value };
      }
      case "aggregate":
        return this.aggregate(expr.fn, expr.field, expr.position);
      case "negate": {
        const operand = this.expr(expr.operand);
        if (!numeric(operand.type)) throw bad("unary minus expects a number", expr.position);
        return {
          type: operand.type,
          run: (row) => {
            const v = operand.run(row);
            return v === null ? null : -(v as number);
          },
        };
      }
      case "arithmetic": {
        const left = this.expr(expr.left);
        const right = this.expr(expr.right);
        if (!numeric(left.type) || !numeric(right.type))
          throw bad(`'${expr.op}' expects numbers`, expr.position);
        const integer = left.type !== "float" && right.type !== "float";
        const op = expr.op;
        return {
          type: integer ? "integer" : "float",
          run: (row) => {
            const a = left.run(row) as number | null;
            const b = right.run(row) as number | null;
            if (a === null || b === null) return null;
            let v: number;
            if (op === "+") v = a + b;
            else if (op === "-") v = a - b;
            else if (op === "*") v = a * b;
            // Division by zero is NULL, as the where compiler makes it on both engines.
            else if (b === 0) return null;
            else v = integer ? Math.trunc(a / b) : a / b;
            if (!Number.isFinite(v))
              throw bad("computes a number beyond the range a double holds", expr.position);
            return v;
          },
        };
      }
      case "compare": {
        const [left, right] = this.comparable([expr.left, expr.right], expr.position) as [Checked, Checked];
        const test = {
          "=": (c: number) => c === 0,
          "<>": (c: number) => c !== 0,
          "<": (c: number) => c < 0,
          "<=": (c: number) => c <= 0,
          ">": (c: number) => c > 0,
          ">=": (c: number) => c >= 0,
        }[expr.op];
        return {
          type: "boolean",
          run: (row) => {
            const c = compare(left.run(row), right.run(row));
            return c === null ? null : test(c);
          },
        };
      }
      case "and":
      case "or": {
        const what = expr.type.toUpperCase();
        const operands = expr.operands.map((o) => this.condition(o, what));
        const combine = expr.type === "and" ? and : or;
        return { type: "boolean", run: (row) => combine(operands.map((o) => o.run(row))) };
      }
      case "not": {
        const operand = this.condition(expr.operand, "NOT");
        return { type: "boolean", run: (row) => not(operand.run(row)) };
      }
      case "in": {
        const [operand, ...list] = this.comparable([expr.operand, ...expr.list], expr.position) as [
          Checked,
          ...Checked[],
        ];
        const negated = expr.negated;
        return {
          type: "boolean",
          run: (row) => {
            const v = operand.run(row);
            const found = or(list.map((item) => (v === null ? null : eq(compare(v, item.run(row))))));
            return negated ? not(found) : found;
          },
        };
      }
      case "between": {
        const [operand, low, high] = this.comparable([expr.operand, expr.low, expr.high], expr.position) as [
          Checked,
          Checked,
          Checked,
        ];
        const negated = expr.negated;
        return {
          type: "boolean",
          run: (row) => {
            const v = operand.run(row);
            const above = compare(v, low.run(row));
            const below = compare(v, high.run(row));
            const within = and([above === null ? null : above >= 0, below === null ? null : below <= 0]);
            return negated ? not(within) : within;
          },
        };
      }
      case "isNull": {
        const operand = this.expr(expr.operand);
        if (operand.type === "boolean") throw bad("IS NULL expects a value, not a condition", expr.position);
        const negated = expr.negated;
        return { type: "boolean", run: (row) => (operand.run(row) === null) !== negated };
      }
      case "like":
      case "call":
      case "substring":
      case "trim":
      case "cast":
      case "extract": {
        const name = expr.type === "call" ? expr.name : expr.type.toUpperCase();
        throw bad(
          `${name} is not supported in havingClause; a condition on the rows goes in where`,
          expr.position,
        );
      }
    }
  }
}

const eq = (c: number | null): Value => (c === null ? null : c === 0);

/**
 * Reads a `havingClause` for a statistics query grouped by `groupBy` (none: the whole selection is
 * one group). Every problem is a 400 naming havingClause, before anything runs.
 */
export function readHaving(text: string, schema: LayerSchema, groupBy: readonly LayerField[]): Having {
  const parsed = parseWhere(text, { aggregates: true });
  if (!parsed.ok) throw errors.invalidParameter(PARAMETER, describeWhereError(parsed.error, PARAMETER));
  const checker = new Checker(schema, groupBy);
  const condition = checker.condition(parsed.value, PARAMETER);
  return {
    aggregates: checker.aggregates,
    holds: (groups, aggregates, now) => condition.run({ groups, aggregates, now }) === true,
  };
}
