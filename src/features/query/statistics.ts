import type { Engine } from "../../db/database.js";
import type { LayerField } from "../layer-schema.js";
import { storedAsText } from "../layer-store.js";
import type { AggregateType } from "./having.js";
import type { LayerQuery, Statistic } from "./layer-query.js";
import { orderTerm } from "./order.js";

/**
 * A statistics query (`outStatistics`, `groupByFieldsForStatistics`, `havingClause`) over the rows
 * the rest of the query selects, written once for both engines.
 *
 * - One grouped statement computes the aggregates of `outStatistics` and those the `havingClause`
 *   names. AVG, STDDEV and VAR are computed here from counts and sums (SQLite has no STDDEV or
 *   VAR, and its AVG and PostgreSQL's numeric AVG round differently), so both engines answer the
 *   same numbers; MIN and MAX of text compare by code point on both.
 * - Percentiles: PostgreSQL has `percentile_cont`/`percentile_disc … WITHIN GROUP`, SQLite has
 *   neither. Both engines run the same window statement instead, numbering each group's non-null
 *   values in the asked order and returning only the (at most three) rows around the percentile's
 *   position; the value is then computed here as PostgreSQL's functions compute it: continuous,
 *   the values at floor and ceiling of p·(n-1) interpolated, `lo + (p·(n-1) - floor) · (hi - lo)`;
 *   discrete, the value at position max(1, ceil(p·n)).
 * - The `havingClause` is evaluated on each group's computed values (see `having.ts`).
 */

/** The statement builder of `run-query.ts`, as far as the statistics use it. */
export interface SqlStatement {
  text: string;
  readonly parameters: unknown[];
  add(text: string): this;
  /** A number bound as a double on both engines. */
  number(v: number): this;
}

/** What the statistics need of the query runner. */
export interface StatisticsSource<S extends SqlStatement> {
  engine: Engine;
  /** An empty statement. */
  statement(): S;
  /** ` FROM <layer table> t WHERE …`: every filter of the query, its parameters numbered from the first. */
  filtered(): S;
  rows(statement: S): Promise<Record<string, unknown>[]>;
  /** The column of a field, qualified by the table alias `t`. */
  column(field: LayerField): string;
  /** A value read from a field's column as the answer gives it (numbers for numbers and dates). */
  value(field: LayerField, raw: unknown): unknown;
}

/** What computing one aggregate needs of the source. */
type Columns = Pick<StatisticsSource<SqlStatement>, "engine" | "column" | "value">;

interface Aggregate {
  type: AggregateType;
  field?: LayerField;
}

/** The select list items that compute `aggregate` as `a<i>…`, read back by `aggregateValue`. */
function aggregateColumns(source: Columns, aggregate: Aggregate, i: number): string {
  const c = aggregate.field ? source.column(aggregate.field) : "*";
  switch (aggregate.type) {
    case "count":
      return `count(${c}) AS a${i}`;
    case "sum":
      return `sum(${c}) AS a${i}`;
    case "min":
    case "max":
      // PostgreSQL orders text by the database's collation, SQLite by code point: "C" is the latter.
      return source.engine === "postgres" && aggregate.field && storedAsText(aggregate.field)
        ? `${aggregate.type}(${c} COLLATE "C") AS a${i}`
        : `${aggregate.type}(${c}) AS a${i}`;
    case "avg":
      return `count(${c}) AS a${i}_n, sum(${c}) AS a${i}_s`;
    case "stddev":
    case "var":
      return `count(${c}) AS a${i}_n, sum(${c} * 1.0) AS a${i}_s, sum(${c} * 1.0 * ${c}) AS a${i}_q`;
  }
}

function aggregateValue(
  source: Columns,
  aggregate: Aggregate,
  row: Record<string, unknown>,
  i: number,
): unknown {
  const number = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  switch (aggregate.type) {
    case "count":
    case "sum":
      return number(row[`a${i}`]);
    case "min":
    case "max": {
      const v = row[`a${i}`];
      return aggregate.field ? source.value(aggregate.field, v) : number(v);
    }
    case "avg": {
      const n = Number(row[`a${i}_n`] ?? 0);
      return n > 0 ? Number(row[`a${i}_s`]) / n : null;
    }
    case "stddev":
    case "var": {
      // The sample variance, from sums.
      const n = Number(row[`a${i}_n`] ?? 0);
      const sum = Number(row[`a${i}_s`] ?? 0);
      const squares = Number(row[`a${i}_q`] ?? 0);
      const variance = n > 1 ? Math.max(0, (squares - (sum * sum) / n) / (n - 1)) : null;
      return variance === null ? null : aggregate.type === "var" ? variance : Math.sqrt(variance);
    }
  }
}

const isPercentile = (s: Statistic) => s.type === "percentile_cont" || s.type === "percentile_disc";

export async function statisticsOf<S extends SqlStatement>(
  source: StatisticsSource<S>,
  query: LayerQuery,
  now: number,
): Promise<Record<string, unknown>[]> {
  const stats = query.statistics ?? [];
  const groupBy = query.groupBy ?? [];
  const having = query.having;

  // The aggregates to compute, each once: those answered, then those only the havingClause names.
  const aggregates: Aggregate[] = [];
  const indexOf = (a: Aggregate): number => {
    const found = aggregates.findIndex((b) => b.type === a.type && b.field === a.field);
    return found >= 0 ? found : aggregates.push(a) - 1;
  };
  const statIndex = stats.map(({ type, field }) =>
    type === "percentile_cont" || type === "percentile_disc"
      ? -1
      : indexOf({ type, ...(field ? { field } : {}) }),
  );
  const havingIndex = having?.aggregates.map(indexOf) ?? [];

  const parts = [
    ...groupBy.map((f, i) => `${source.column(f)} AS g${i}`),
    ...aggregates.map((a, i) => aggregateColumns(source, a, i)),
  ];
  // Percentiles alone without groups still select the one row of the whole selection.
  if (parts.length === 0) parts.push("count(*) AS n_");
  const s = source.statement().add(`SELECT ${parts.join(", ")}`);
  const f = source.filtered();
  s.text += f.text;
  s.parameters.push(...f.parameters);
  if (groupBy.length > 0) {
    s.add(` GROUP BY ${groupBy.map((g) => source.column(g)).join(", ")}`);
    const order = query.orderBy.filter((o) => groupBy.includes(o.field));
    const orderText = (order.length > 0 ? order : groupBy.map((field) => ({ field, descending: false })))
      .map((o) => orderTerm(source.engine, source.column(o.field), o.field, o.descending))
      .join(", ");
    s.add(` ORDER BY ${orderText}`);
  }
  const rows = await source.rows(s);

  const groupValues = (row: Record<string, unknown>) =>
    groupBy.map((field, i) => source.value(field, row[`g${i}`]));
  // One statement after another: on PostgreSQL they may share the caller's connection.
  const percentiles: (Map<string, unknown> | undefined)[] = [];
  for (const st of stats)
    percentiles.push(isPercentile(st) ? await percentilesOf(source, st, groupBy) : undefined);

  const out: Record<string, unknown>[] = [];
  for (const row of rows) {
    const groups = groupValues(row);
    const values = aggregates.map((a, i) => aggregateValue(source, a, row, i));
    const havingValues = havingIndex.map((i) => values[i]);
    if (having && !having.holds(groups, havingValues, now)) continue;
    const answer: Record<string, unknown> = {};
    groupBy.forEach((field, i) => {
      answer[field.name] = groups[i];
    });
    const key = JSON.stringify(groups);
    stats.forEach((st, i) => {
      const found = percentiles[i];
      answer[st.outName] = found ? (found.get(key) ?? null) : values[statIndex[i] as number];
    });
    out.push(answer);
  }
  return out;
}

/**
 * A percentile statistic per group, keyed by the JSON of the group's values. One window statement
 * reads at most three values per group, around the percentile's position; groups whose values are
 * all NULL are absent (their percentile is NULL).
 */
async function percentilesOf<S extends SqlStatement>(
  source: StatisticsSource<S>,
  st: Statistic,
  groupBy: readonly LayerField[],
): Promise<Map<string, unknown>> {
  const field = st.field as LayerField;
  const { value: p, descending } = st.percentile as NonNullable<Statistic["percentile"]>;
  const c = source.column(field);
  const partition =
    groupBy.length > 0 ? `PARTITION BY ${groupBy.map((g) => source.column(g)).join(", ")} ` : "";
  const groups = groupBy.map((g, i) => `${source.column(g)} AS g${i}`);
  const s = source
    .statement()
    .add(
      `SELECT * FROM (SELECT ${[
        ...groups,
        `${c} AS v_`,
        `row_number() OVER (${partition}ORDER BY ${c} ${descending ? "DESC" : "ASC"}) AS rn_`,
        `count(*) OVER (${partition.trimEnd()}) AS n_`,
      ].join(", ")}`,
    );
  const f = source.filtered();
  s.text += f.text;
  s.parameters.push(...f.parameters);
  s.add(` AND ${c} IS NOT NULL) w WHERE `);
  // Loose bounds: the exact positions are chosen below, in the same arithmetic on both engines.
  if (st.type === "percentile_cont") s.add("abs(w.rn_ - 1 - ").number(p).add(" * (w.n_ - 1)) <= 1");
  else s.add("(w.rn_ = 1 OR abs(w.rn_ - ").number(p).add(" * w.n_) <= 1)");

  const candidates = new Map<string, { n: number; values: Map<number, unknown> }>();
  for (const row of await source.rows(s)) {
    const key = JSON.stringify(groupBy.map((g, i) => source.value(g, row[`g${i}`])));
    let group = candidates.get(key);
    if (!group) {
      group = { n: Number(row.n_), values: new Map() };
      candidates.set(key, group);
    }
    group.values.set(Number(row.rn_), row.v_);
  }
  const out = new Map<string, unknown>();
  for (const [key, { n, values }] of candidates) {
    if (st.type === "percentile_disc") {
      out.set(key, source.value(field, values.get(Math.max(1, Math.ceil(p * n)))));
      continue;
    }
    const position = p * (n - 1);
    const below = Math.floor(position);
    const above = Math.ceil(position);
    const lo = Number(values.get(below + 1));
    const hi = Number(values.get(above + 1));
    out.set(key, below === above ? lo : lo + (position - below) * (hi - lo));
  }
  return out;
}
