import { CompiledQuery } from "kysely";
import type { Engine, Queryable } from "../../db/database.js";
import type { Postgis } from "../../db/postgis.js";
import { errors } from "../../errors.js";
import { type Bounds, boundsOf, type Geometry } from "../geometry/esri-json.js";
import { type Margin, queryMargins } from "../geometry/margins.js";
import { prepareFilter } from "../geometry/relate.js";
import { polygonWkb } from "../geometry/wkb.js";
import { type LayerField, type LayerSchema, OID_COLUMN, SHAPE_COLUMN } from "../layer-schema.js";
import { GEOMETRY_COLUMN, layerSrid, readShape, tableName } from "../layer-store.js";
import type { LayerQuery } from "./layer-query.js";
import { direction, orderTerm, sortKey } from "./order.js";
import { statisticsOf as runStatistics } from "./statistics.js";
import { compileWhere, describeWhereError, type WhereField } from "./where.js";

/**
 * Runs a `LayerQuery` against a layer's table. Everything that can be decided in SQL is (the
 * `where`, object ids, bounds against the spatial index, order, paging, counts, statistics);
 * what cannot, the exact spatial relation of a stored geometry, is decided here, in the same code
 * for both engines, on the candidates the index found, read in batches.
 *
 * With PostGIS, an Intersects query (the relation of every map and most clients) is decided in
 * the database but for the features near the query geometry's boundary (margins.ts): those are
 * related here, and their object ids join the statement. Counts, pages and statistics are then
 * SQL again, and only the features asked for travel. The other relations relate here, on the
 * candidates PostGIS's index finds.
 */

/** A stored row as read: attributes by field name, and the geometry when asked for. */
export interface FeatureRow {
  attributes: Record<string, unknown>;
  geometry: Geometry | null;
}

export type QueryResult =
  | { mode: "features" | "distinct"; rows: FeatureRow[]; exceeded: boolean }
  | { mode: "count"; count: number }
  | { mode: "ids"; objectIds: number[] }
  | { mode: "extent"; extent: Bounds | null; count: number }
  | { mode: "statistics"; rows: Record<string, unknown>[] };

/** Candidates read per statement when the stored geometries must be related in the process. */
const BATCH = 2_000;
/**
 * Most candidates one query relates in the process: a query that needs more (a polygon over a
 * million-feature layer, asking for everything) is refused with advice, rather than holding a core.
 */
export const MAX_CANDIDATES = 250_000;

/** Builds SQL text with positional parameters for either engine. */
class Statement {
  text = "";
  readonly parameters: unknown[] = [];
  constructor(readonly engine: Engine) {}
  add(text: string): this {
    this.text += text;
    return this;
  }
  value(v: unknown): this {
    this.parameters.push(v);
    this.text += this.engine === "postgres" ? `$${this.parameters.length}` : "?";
    return this;
  }
  /** A number bound as a double on both engines (better-sqlite3 binds every number as REAL anyway). */
  number(v: number): this {
    this.value(v);
    if (this.engine === "postgres") this.text += "::float8";
    return this;
  }
  copy(): Statement {
    const s = new Statement(this.engine);
    s.text = this.text;
    s.parameters.push(...this.parameters);
    return s;
  }
}

const quote = (identifier: string) => `"${identifier}"`;
const col = (field: LayerField) => `t.${quote(field.column)}`;

export function whereFields(schema: LayerSchema): Record<string, WhereField> {
  return Object.fromEntries(schema.fields.map((f) => [f.name, { column: f.column, type: f.type }]));
}

export interface QueryContext {
  q: Queryable;
  engine: Engine;
  itemId: string;
  schema: LayerSchema;
  now: number;
  /** Extra condition from ownership-based access control: only rows whose creator is this user. */
  creator?: { field: LayerField; username: string };
  /** PostGIS, when the layer tables have `geom` (db/postgis.ts). */
  postgis: Postgis | undefined;
}

/** An Intersects filter decided by the database (see `runQuery`). */
interface DatabaseDecision {
  postgis: Postgis;
  /** Inside the query geometry with a margin: features that meet it match; null if there is none. */
  inner: Margin | null;
  /** The features between the margins that match, as related in the process. */
  nearMatches: number[];
}

/** A query as it runs: its context, and the database's part of its spatial filter when it has one. */
type Run = QueryContext & { decided?: DatabaseDecision };

/** Appends a margin in the layer's SRID: a box, or polygons as WKB. */
function addMargin(s: Statement, postgis: Postgis, margin: Margin, srid: number): void {
  if ("box" in margin) {
    const b = margin.box;
    s.add(`${postgis.schema}.ST_MakeEnvelope(`)
      .number(b.xmin)
      .add(", ")
      .number(b.ymin)
      .add(", ")
      .number(b.xmax)
      .add(", ")
      .number(b.ymax)
      .add(`, ${srid})`);
  } else {
    s.add(`${postgis.schema}.ST_GeomFromWKB(`).value(polygonWkb(margin.polygons)).add(`::bytea, ${srid})`);
  }
}

/** FROM and WHERE of the query: every SQL-decidable filter. */
function filtered(ctx: Run, query: LayerQuery): Statement {
  const table = tableName(ctx.itemId, ctx.schema.id);
  const s = new Statement(ctx.engine).add(` FROM ${quote(table)} t WHERE 1=1`);
  if (query.where.trim() !== "") {
    const compiled = compileWhere(query.where, {
      engine: ctx.engine,
      fields: whereFields(ctx.schema),
      now: ctx.now,
      firstParameter: s.parameters.length + 1,
    });
    if (!compiled.ok) throw errors.invalidParameter("where", describeWhereError(compiled.error));
    s.add(` AND (${compiled.value.sql})`);
    s.parameters.push(...compiled.value.parameters);
  }
  if (query.objectIds) {
    if (query.objectIds.length === 0) s.add(" AND 1=0");
    else {
      // One parameter for the whole list: a query takes up to MAX_QUERY_OBJECT_IDS ids, more
      // than either engine binds in one statement (SQLite 32,766, PostgreSQL 65,535).
      if (ctx.engine === "sqlite") {
        s.add(` AND t.${quote(OID_COLUMN)} IN (SELECT value FROM json_each(`)
          .value(JSON.stringify(query.objectIds))
          .add("))");
      } else {
        s.add(` AND t.${quote(OID_COLUMN)} = ANY(CAST(`)
          .value(query.objectIds)
          .add(" AS bigint[]))");
      }
    }
  }
  if (ctx.creator) {
    s.add(` AND ${col(ctx.creator.field)} = `).value(ctx.creator.username);
  }
  if (query.afterObjectId !== undefined) {
    s.add(` AND t.${quote(OID_COLUMN)} > `).value(query.afterObjectId);
  }
  if (query.spatial) {
    const boxes = query.spatial.boxes;
    if (boxes.length === 0) s.add(" AND 1=0");
    else {
      s.add(" AND (");
      boxes.forEach((b, i) => {
        if (i > 0) s.add(" OR ");
        // The index finds candidates and the table's own doubles decide: the R*Tree and PostGIS's
        // index hold 32-bit boxes rounded outwards, and PostgreSQL's `&&` on its built-in boxes
        // takes boxes less than 1e-6 apart for overlapping (its geometric types compare with
        // that tolerance).
        if (ctx.postgis) {
          s.add(`(t.${quote(GEOMETRY_COLUMN)} OPERATOR(${ctx.postgis.schema}.&&) `);
          addMargin(s, ctx.postgis, { box: b }, layerSrid(ctx.schema));
        } else if (ctx.engine === "sqlite") {
          s.add(`(t.${quote(OID_COLUMN)} IN (SELECT id FROM ${quote(`${table}_rt`)} WHERE xmax >= `)
            .number(b.xmin)
            .add(" AND xmin <= ")
            .number(b.xmax)
            .add(" AND ymax >= ")
            .number(b.ymin)
            .add(" AND ymin <= ")
            .number(b.ymax)
            .add(")");
        } else {
          s.add("(box(point(t.minx, t.miny), point(t.maxx, t.maxy)) && box(point(")
            .number(b.xmin)
            .add(", ")
            .number(b.ymin)
            .add("), point(")
            .number(b.xmax)
            .add(", ")
            .number(b.ymax)
            .add("))");
        }
        s.add(" AND t.maxx >= ")
          .number(b.xmin)
          .add(" AND t.minx <= ")
          .number(b.xmax)
          .add(" AND t.maxy >= ")
          .number(b.ymin)
          .add(" AND t.miny <= ")
          .number(b.ymax)
          .add(")");
      });
      s.add(")");
    }
  }
  if (ctx.decided) {
    const { postgis, inner, nearMatches } = ctx.decided;
    s.add(" AND (");
    if (inner) {
      s.add(`${postgis.schema}.ST_Intersects(t.${quote(GEOMETRY_COLUMN)}, `);
      addMargin(s, postgis, inner, layerSrid(ctx.schema));
      s.add(") OR ");
    }
    s.add(`t.${quote(OID_COLUMN)} = ANY(CAST(`)
      .value(nearMatches)
      .add(" AS bigint[])))");
  }
  return s;
}

function orderBy(engine: Engine, query: LayerQuery): string {
  const parts = query.orderBy.map((o) => orderTerm(engine, col(o.field), o.field, o.descending));
  // Ties broken by object id: pages never repeat or skip a feature.
  if (!query.orderBy.some((o) => o.field.column === OID_COLUMN)) parts.push(`t.${quote(OID_COLUMN)} ASC`);
  return ` ORDER BY ${parts.join(", ")}`;
}

async function rowsOf(ctx: Run, s: Statement): Promise<Record<string, unknown>[]> {
  try {
    const result = await ctx.q.executeQuery(CompiledQuery.raw(s.text, s.parameters));
    return result.rows as Record<string, unknown>[];
  } catch (err) {
    // PostgreSQL refuses arithmetic that overflows its types (`pop * 1e10 * 1e10`, `1e308 * 10`),
    // where SQLite turns to floating point. The only arithmetic a caller writes is in `where`.
    if (ctx.engine === "postgres" && (err as { code?: unknown }).code === NUMERIC_VALUE_OUT_OF_RANGE) {
      throw errors.invalidParameter("where", "computes a number beyond the range the database holds");
    }
    throw err;
  }
}

/** PostgreSQL's SQLSTATE for numeric_value_out_of_range. */
const NUMERIC_VALUE_OUT_OF_RANGE = "22003";

/** Attribute values as ArcGIS answers them: numbers for integer, double and date columns. */
function attributeValue(field: LayerField, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (field.type) {
    case "esriFieldTypeOID":
    case "esriFieldTypeSmallInteger":
    case "esriFieldTypeInteger":
    case "esriFieldTypeBigInteger":
    case "esriFieldTypeSingle":
    case "esriFieldTypeDouble":
    case "esriFieldTypeDate":
      return Number(value);
    default:
      return value;
  }
}

function selectList(fields: readonly LayerField[], withShape: boolean): string {
  const columns = fields.map((f, i) => `${col(f)} AS c${i}`);
  if (!columns.some((c) => c.startsWith(`t.${quote(OID_COLUMN)} `)))
    columns.unshift(`t.${quote(OID_COLUMN)} AS oid_`);
  if (withShape) columns.push(`t.${quote(SHAPE_COLUMN)} AS shape_`);
  return `SELECT ${columns.join(", ")}`;
}

function toFeature(
  row: Record<string, unknown>,
  fields: readonly LayerField[],
  schema: LayerSchema,
  withShape: boolean,
): FeatureRow {
  const attributes: Record<string, unknown> = {};
  fields.forEach((f, i) => {
    attributes[f.name] = attributeValue(f, row[`c${i}`]);
  });
  return { attributes, geometry: withShape ? readShape(row.shape_, schema) : null };
}

function objectIdOf(row: Record<string, unknown>, fields: readonly LayerField[]): number {
  const i = fields.findIndex((f) => f.column === OID_COLUMN);
  return Number(i >= 0 ? row[`c${i}`] : row.oid_);
}

/**
 * Reads candidates in batches and keeps those whose stored geometry relates as asked, calling
 * `keep` for each until it answers false. The candidates come in the query's order.
 */
async function eachExactMatch(
  ctx: Run,
  query: LayerQuery,
  fields: readonly LayerField[],
  keep: (row: Record<string, unknown>, geometry: Geometry | null) => boolean,
): Promise<void> {
  const spatial = query.spatial;
  if (!spatial) throw new Error("eachExactMatch without a spatial filter");
  const matches = prepareFilter(spatial.geometry, spatial.rel);
  const base = filtered(ctx, query);
  let examined = 0;
  for (let offset = 0; ; offset += BATCH) {
    const s = new Statement(ctx.engine).add(selectList(fields, true));
    const rest = base.copy();
    // The FROM/WHERE text was numbered from $1: select lists carry no parameters, so it stays valid.
    s.text += rest.text;
    s.parameters.push(...rest.parameters);
    s.add(orderBy(ctx.engine, query)).add(" LIMIT ").value(BATCH).add(" OFFSET ").value(offset);
    const rows = await rowsOf(ctx, s);
    for (const row of rows) {
      const geometry = readShape(row.shape_, ctx.schema);
      if (geometry && matches(geometry) && !keep(row, geometry)) return;
    }
    examined += rows.length;
    if (rows.length < BATCH) return;
    if (examined >= MAX_CANDIDATES) {
      throw errors.invalidParameter(
        "geometry",
        `meets the bounds of more than ${MAX_CANDIDATES} features; narrow it, or add a where clause`,
      );
    }
  }
}

const needsExact = (query: LayerQuery) => query.spatial !== undefined && !query.spatial.boxesDecide;

/**
 * Whether the database may decide the query's spatial filter with PostGIS. Intersects only, and
 * not a point query on polygons: the process decides that one by the odd-even rule over all the
 * rings (rings.ts), which reads some invalid polygons otherwise than GEOS does.
 */
function databaseDecides(ctx: QueryContext, query: LayerQuery): ctx is QueryContext & { postgis: Postgis } {
  const spatial = query.spatial;
  return (
    ctx.postgis !== undefined &&
    spatial !== undefined &&
    !spatial.boxesDecide &&
    spatial.rel === "esriSpatialRelIntersects" &&
    !(spatial.geometry.type === "esriGeometryPoint" && ctx.schema.geometryType === "esriGeometryPolygon")
  );
}

/**
 * The object ids of the features that meet `outer` but not `inner` (near the query geometry's
 * boundary) and that intersect the query geometry as the process relates them.
 */
async function nearMatchesOf(
  ctx: QueryContext & { postgis: Postgis },
  query: LayerQuery,
  outer: Margin,
  inner: Margin | null,
): Promise<number[]> {
  const spatial = query.spatial;
  if (!spatial) throw new Error("nearMatchesOf without a spatial filter");
  const matches = prepareFilter(spatial.geometry, spatial.rel);
  const srid = layerSrid(ctx.schema);
  const geom = `t.${quote(GEOMETRY_COLUMN)}`;
  const base = filtered(ctx, query).add(` AND ${ctx.postgis.schema}.ST_Intersects(${geom}, `);
  addMargin(base, ctx.postgis, outer, srid);
  base.add(")");
  if (inner) {
    base.add(` AND NOT ${ctx.postgis.schema}.ST_Intersects(${geom}, `);
    addMargin(base, ctx.postgis, inner, srid);
    base.add(")");
  }
  const found: number[] = [];
  let examined = 0;
  for (let after = 0; ; ) {
    const s = new Statement(ctx.engine).add(
      `SELECT t.${quote(OID_COLUMN)} AS oid_, t.${quote(SHAPE_COLUMN)} AS shape_`,
    );
    const rest = base.copy();
    s.text += rest.text;
    s.parameters.push(...rest.parameters);
    // Object ids are positive: 0 is before the first.
    s.add(` AND t.${quote(OID_COLUMN)} > `)
      .value(after)
      .add(` ORDER BY t.${quote(OID_COLUMN)} LIMIT `)
      .value(BATCH);
    const rows = await rowsOf(ctx, s);
    for (const row of rows) {
      const geometry = readShape(row.shape_, ctx.schema);
      if (geometry && matches(geometry)) found.push(Number(row.oid_));
    }
    examined += rows.length;
    if (rows.length < BATCH) return found;
    after = Number(rows[rows.length - 1]?.oid_);
    if (examined >= MAX_CANDIDATES) {
      throw errors.invalidParameter(
        "geometry",
        `meets the bounds of more than ${MAX_CANDIDATES} features; narrow it, or add a where clause`,
      );
    }
  }
}

/** Whether PostGIS failed on a geometry (GEOS throws on some invalid polygons), not on the statement. */
const isGeometryEngineFailure = (err: unknown): boolean => {
  const e = err as { code?: unknown; message?: unknown };
  return e.code === "XX000" && typeof e.message === "string" && /GEOS|lwgeom/i.test(e.message);
};

export async function runQuery(ctx: QueryContext, query: LayerQuery): Promise<QueryResult> {
  const spatial = query.spatial;
  if (spatial && databaseDecides(ctx, query)) {
    const margins = queryMargins(spatial.geometry);
    if (margins) {
      try {
        const nearMatches = await nearMatchesOf(ctx, query, margins.outer, margins.inner);
        const decided: DatabaseDecision = { postgis: ctx.postgis, inner: margins.inner, nearMatches };
        return await answer({ ...ctx, decided }, { ...query, spatial: { ...spatial, boxesDecide: true } });
      } catch (err) {
        // GEOS refused a stored geometry (jsts, reading it otherwise, may not): the process
        // relates every candidate instead, as without PostGIS, and answers the same.
        if (!isGeometryEngineFailure(err)) throw err;
      }
    }
  }
  return answer(ctx, query);
}

async function answer(ctx: Run, query: LayerQuery): Promise<QueryResult> {
  switch (query.mode) {
    case "count":
      return { mode: "count", count: await countOf(ctx, query) };
    case "ids":
      return { mode: "ids", objectIds: await idsOf(ctx, query) };
    case "extent":
      return { mode: "extent", ...(await extentOf(ctx, query)) };
    case "statistics":
      return { mode: "statistics", rows: await statisticsOf(ctx, query) };
    case "distinct":
      return distinctOf(ctx, query);
    case "features":
      return featuresOf(ctx, query);
  }
}

async function countOf(ctx: Run, query: LayerQuery): Promise<number> {
  if (needsExact(query)) {
    let n = 0;
    await eachExactMatch(ctx, query, [ctx.schema.objectIdField], () => {
      n++;
      return true;
    });
    return n;
  }
  const s = new Statement(ctx.engine).add("SELECT count(*) AS n");
  const f = filtered(ctx, query);
  s.text += f.text;
  s.parameters.push(...f.parameters);
  const rows = await rowsOf(ctx, s);
  return Number(rows[0]?.n ?? 0);
}

async function idsOf(ctx: Run, query: LayerQuery): Promise<number[]> {
  const ids: number[] = [];
  const fields = [ctx.schema.objectIdField];
  if (needsExact(query)) {
    await eachExactMatch(ctx, query, fields, (row) => {
      ids.push(objectIdOf(row, fields));
      return query.idsLimit === undefined || ids.length < query.idsLimit;
    });
    return ids;
  }
  const s = new Statement(ctx.engine).add(selectList(fields, false));
  const f = filtered(ctx, query);
  s.text += f.text;
  s.parameters.push(...f.parameters);
  s.add(orderBy(ctx.engine, query));
  if (query.idsLimit !== undefined) s.add(" LIMIT ").value(query.idsLimit);
  for (const row of await rowsOf(ctx, s)) ids.push(objectIdOf(row, fields));
  return ids;
}

async function extentOf(ctx: Run, query: LayerQuery): Promise<{ extent: Bounds | null; count: number }> {
  if (!ctx.schema.geometryType) return { extent: null, count: await countOf(ctx, query) };
  if (needsExact(query)) {
    let extent: Bounds | null = null;
    let count = 0;
    await eachExactMatch(ctx, query, [ctx.schema.objectIdField], (_row, geometry) => {
      count++;
      if (geometry) extent = union(extent, boundsOf(geometry));
      return true;
    });
    return { extent, count };
  }
  const s = new Statement(ctx.engine).add(
    "SELECT min(t.minx) AS xmin, min(t.miny) AS ymin, max(t.maxx) AS xmax, max(t.maxy) AS ymax, count(*) AS n",
  );
  const f = filtered(ctx, query);
  s.text += f.text;
  s.parameters.push(...f.parameters);
  const row = (await rowsOf(ctx, s))[0] ?? {};
  const count = Number(row.n ?? 0);
  if (row.xmin === null || row.xmin === undefined) return { extent: null, count };
  return {
    extent: {
      xmin: Number(row.xmin),
      ymin: Number(row.ymin),
      xmax: Number(row.xmax),
      ymax: Number(row.ymax),
    },
    count,
  };
}

function union(a: Bounds | null, b: Bounds): Bounds {
  if (!a) return { ...b };
  return {
    xmin: Math.min(a.xmin, b.xmin),
    ymin: Math.min(a.ymin, b.ymin),
    xmax: Math.max(a.xmax, b.xmax),
    ymax: Math.max(a.ymax, b.ymax),
  };
}

async function featuresOf(ctx: Run, query: LayerQuery): Promise<QueryResult> {
  const fields = query.outFields;
  const withShape = query.returnGeometry || query.returnCentroid;
  const wanted = query.limit + 1;
  let rows: FeatureRow[] = [];
  if (needsExact(query)) {
    let skipped = 0;
    await eachExactMatch(ctx, query, fields, (row, geometry) => {
      if (skipped < query.offset) {
        skipped++;
        return true;
      }
      rows.push({ ...toFeature(row, fields, ctx.schema, false), geometry: withShape ? geometry : null });
      return rows.length < wanted;
    });
  } else {
    const s = new Statement(ctx.engine).add(selectList(fields, withShape));
    const f = filtered(ctx, query);
    s.text += f.text;
    s.parameters.push(...f.parameters);
    s.add(orderBy(ctx.engine, query)).add(" LIMIT ").value(wanted).add(" OFFSET ").value(query.offset);
    rows = (await rowsOf(ctx, s)).map((row) => toFeature(row, fields, ctx.schema, withShape));
  }
  const exceeded = rows.length > query.limit;
  if (exceeded) rows = query.nothingWhenExceeded ? [] : rows.slice(0, query.limit);
  return { mode: "features", rows, exceeded };
}

async function distinctOf(ctx: Run, query: LayerQuery): Promise<QueryResult> {
  const fields = query.outFields;
  const wanted = query.limit + 1;
  let values: Record<string, unknown>[] = [];
  if (needsExact(query)) {
    const seen = new Set<string>();
    await eachExactMatch(ctx, query, fields, (row) => {
      const attributes = toFeature(row, fields, ctx.schema, false).attributes;
      const key = JSON.stringify(fields.map((f) => attributes[f.name]));
      if (!seen.has(key)) {
        seen.add(key);
        values.push(attributes);
      }
      return true;
    });
    values = values.slice(query.offset, query.offset + wanted);
  } else {
    // PostgreSQL orders a DISTINCT only by what it selects: the columns are selected as they are
    // ordered (text by code point), which changes no value.
    const columns = fields.map((f, i) => `${sortKey(ctx.engine, col(f), f)} AS c${i}`).join(", ");
    const s = new Statement(ctx.engine).add(`SELECT DISTINCT ${columns}`);
    const f = filtered(ctx, query);
    s.text += f.text;
    s.parameters.push(...f.parameters);
    const order = query.orderBy.filter((o) => fields.includes(o.field));
    const orderText = (order.length > 0 ? order : fields.map((field) => ({ field, descending: false })))
      .map((o) => `c${fields.indexOf(o.field)} ${direction(o.field, o.descending)}`)
      .join(", ");
    s.add(` ORDER BY ${orderText} LIMIT `).value(wanted).add(" OFFSET ").value(query.offset);
    values = (await rowsOf(ctx, s)).map((row) => toFeature(row, fields, ctx.schema, false).attributes);
  }
  const exceeded = values.length > query.limit;
  return {
    mode: "distinct",
    rows: values.slice(0, query.limit).map((attributes) => ({ attributes, geometry: null })),
    exceeded,
  };
}

/** Most object ids an exact spatial filter may hand to a statistics query. */
const MAX_STATISTICS_IDS = 30_000;

async function statisticsOf(ctx: Run, query: LayerQuery): Promise<Record<string, unknown>[]> {
  let restricted = query;
  if (needsExact(query)) {
    const ids = await idsOf(ctx, query);
    if (ids.length > MAX_STATISTICS_IDS) {
      throw errors.invalidParameter(
        "geometry",
        `matches more than ${MAX_STATISTICS_IDS} features for statistics; narrow it, or add a where clause`,
      );
    }
    const { spatial: _spatial, ...rest } = query;
    restricted = { ...rest, objectIds: ids };
  }
  return runStatistics(
    {
      engine: ctx.engine,
      statement: () => new Statement(ctx.engine),
      filtered: () => filtered(ctx, restricted),
      rows: (statement) => rowsOf(ctx, statement),
      column: col,
      value: attributeValue,
    },
    restricted,
    ctx.now,
  );
}
