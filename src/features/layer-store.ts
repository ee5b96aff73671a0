import { CompiledQuery, type Kysely, type RawBuilder, sql } from "kysely";
import type { Db, Engine, Queryable } from "../db/database.js";
import type { Postgis } from "../db/postgis.js";
import { deleteFeatureAttachments, deleteLayerAttachments } from "./attachment-store.js";
import { type Bounds, boundsOf, type Geometry } from "./geometry/esri-json.js";
import { esriWkb } from "./geometry/wkb.js";
import {
  type LayerField,
  type LayerSchema,
  layerSchema,
  OID_COLUMN,
  SchemaError,
  SHAPE_COLUMN,
} from "./layer-schema.js";
import { layerReference } from "./query/layer-query.js";
import type { LayerDefinition, ServiceProperties } from "./service-definition.js";

/**
 * The tables that hold the rows of hosted layers and tables, on SQLite and PostgreSQL.
 *
 * One table per layer, `fl_<service item id>_<layer id>`: the object id (`objectid`), a column per
 * field (`f_<name>`, typed), and for layers the geometry as Esri JSON text (`shape`, without its
 * spatial reference, which is the layer's) with its bounds (`minx`, `miny`, `maxx`, `maxy`).
 *
 * The spatial index is over those bounds. SQLite: an R*Tree (`<table>_rt`) kept by triggers, so
 * that no write can forget it; it stores 32-bit floats rounded outwards, so it finds a superset
 * and the exact bounds are compared on the table's own columns. PostgreSQL without PostGIS: a GiST
 * index on the built-in `box` of the bounds (no extension needed); its `&&` compares with a
 * tolerance of 1e-6, so there too the table's columns decide. Exact relations (a polygon that intersects a query polygon, not only its box) are
 * computed in the process, the same code for both engines, so both answer the same rows.
 *
 * PostgreSQL with PostGIS (db/postgis.ts): the table also has `geom`, the same geometry as PostGIS
 * reads it (wkb.ts; in the layer's EPSG code, `layerSrid`), written by the same statements as
 * `shape`, with a GiST index in place of the one on boxes; the query lets the database settle what
 * it can (run-query.ts). `syncSpatialStorage` adds the column to tables made without it, and drops
 * it when PostGIS is no longer used, so a table never holds a `geom` that writes did not keep.
 *
 * Every function takes a transaction or the database and does no more than its statement says:
 * callers keep a change and its bookkeeping in one transaction.
 */

/** Unused `Kysely` generic parameter: the layer tables are not in the typed schema. */
type AnyQueryable = Queryable | Kysely<unknown>;

export function tableName(itemId: string, layerId: number): string {
  // Item ids are 32 hexadecimal characters (`ids.ts`) and layer ids at most nine digits: the name
  // is a plain identifier of at most 45 characters on either engine, never quoted text from a caller.
  if (!/^[0-9a-f]{32}$/.test(itemId) || !Number.isInteger(layerId) || layerId < 0) {
    throw new Error(`not a layer of a hosted service: ${itemId}/${layerId}`);
  }
  return `fl_${itemId}_${layerId}`;
}

const id = (name: string) => sql.id(name);

/** Where layer tables are kept: the engine, and PostGIS when it is used (`Db` is one). */
export type LayerStore = Pick<Db, "engine" | "postgis">;

/**
 * The moment of the edit that last wrote a row: the layer's `data_last_edit_date` of that edit
 * (`beginLayerEdit`), so that a collaboration copying the layer can ask for what changed after a
 * moment it saw (migration 0023). Deleted rows leave a tombstone with theirs in `feature_deletes`.
 */
export const MOMENT_COLUMN = "edit_moment";

/** The geometry column kept beside `shape` when PostGIS is used. */
export const GEOMETRY_COLUMN = "geom";

/**
 * The SRID of a layer's `geom`: its spatial reference's EPSG code (Web Mercator's Esri codes give
 * 3857), or 0 for one without (an Esri code, a WKT). Queries give their geometries the same.
 */
export function layerSrid(schema: LayerSchema): number {
  const wkid = layerReference(schema).reference.wkid;
  // PostGIS takes SRIDs up to 999,999; EPSG codes are far below.
  return wkid !== undefined && wkid > 0 && wkid < 999_999 ? wkid : 0;
}

/** SQL text of `geom`'s value from WKB in the positional parameter `parameter` (`$7`). */
const geometryFromWkb = (postgis: Postgis, parameter: string, srid: number) =>
  `${postgis.schema}.ST_GeomFromWKB(${parameter}::bytea, ${srid})`;

/** `geom`'s value from WKB, or null. */
const geometryValue = (postgis: Postgis, wkb: Buffer | null, srid: number): RawBuilder<unknown> =>
  sql`${sql.raw(`${postgis.schema}.ST_GeomFromWKB(`)}${wkb}${sql.raw(`::bytea, ${srid})`)}`;

/**
 * The bounds of a geometry, in this order. Not `xmin` and friends: PostgreSQL has system columns
 * by those names.
 */
export const BOUNDS_COLUMNS = ["minx", "miny", "maxx", "maxy"] as const;

/** Field types stored as numbers; every other field (strings, GUIDs, date-only text) is text. */
const NUMERIC_TYPES: ReadonlySet<string> = new Set([
  "esriFieldTypeOID",
  "esriFieldTypeBigInteger",
  "esriFieldTypeDate",
  "esriFieldTypeSmallInteger",
  "esriFieldTypeInteger",
  "esriFieldTypeSingle",
  "esriFieldTypeDouble",
]);

/** Whether the field's column holds text (see `columnType`). */
export function storedAsText(field: LayerField): boolean {
  return !NUMERIC_TYPES.has(field.type);
}

function columnType(engine: Engine, field: LayerField): string {
  const pg = engine === "postgres";
  switch (field.type) {
    case "esriFieldTypeOID":
    case "esriFieldTypeBigInteger":
    case "esriFieldTypeDate":
      return pg ? "bigint" : "INTEGER";
    case "esriFieldTypeSmallInteger":
    case "esriFieldTypeInteger":
      return pg ? "integer" : "INTEGER";
    case "esriFieldTypeSingle":
    case "esriFieldTypeDouble":
      return pg ? "double precision" : "REAL";
    default:
      return pg ? "text" : "TEXT";
  }
}

function columnDdl(engine: Engine, field: LayerField): RawBuilder<unknown> {
  return sql`${id(field.column)} ${sql.raw(columnType(engine, field))}`;
}

/** Creates the table (and index) of a layer, and its entry in `feature_layers`. */
export async function createLayerStorage(
  q: AnyQueryable,
  store: LayerStore,
  itemId: string,
  schema: LayerSchema,
  now: number,
): Promise<void> {
  const { engine, postgis } = store;
  const table = tableName(itemId, schema.id);
  const columns: RawBuilder<unknown>[] = [
    sql`${id(OID_COLUMN)} ${sql.raw(engine === "postgres" ? "bigint" : "INTEGER")} PRIMARY KEY`,
    ...schema.fields.filter((f) => f.column !== OID_COLUMN).map((f) => columnDdl(engine, f)),
    sql`${id(MOMENT_COLUMN)} ${sql.raw(engine === "postgres" ? "bigint" : "INTEGER")} NOT NULL DEFAULT 0`,
  ];
  const real = engine === "postgres" ? "double precision" : "REAL";
  if (schema.geometryType) {
    columns.push(sql`${id(SHAPE_COLUMN)} ${sql.raw(engine === "postgres" ? "text" : "TEXT")}`);
    for (const c of BOUNDS_COLUMNS) columns.push(sql`${id(c)} ${sql.raw(real)}`);
    if (postgis) columns.push(sql`${id(GEOMETRY_COLUMN)} ${sql.raw(`${postgis.schema}.geometry`)}`);
  }
  await sql`CREATE TABLE ${id(table)} (${sql.join(columns)})`.execute(q);
  await sql`CREATE INDEX ${id(`${table}_em`)} ON ${id(table)} (${id(MOMENT_COLUMN)}, ${id(OID_COLUMN)})`.execute(
    q,
  );
  if (schema.geometryType) {
    if (engine === "sqlite") {
      const rt = `${table}_rt`;
      await sql`CREATE VIRTUAL TABLE ${id(rt)} USING rtree(id, xmin, xmax, ymin, ymax)`.execute(q);
      await sql`
        CREATE TRIGGER ${id(`${table}_ai`)} AFTER INSERT ON ${id(table)} WHEN new.minx IS NOT NULL
        BEGIN INSERT INTO ${id(rt)} VALUES (new.objectid, new.minx, new.maxx, new.miny, new.maxy); END
      `.execute(q);
      await sql`
        CREATE TRIGGER ${id(`${table}_ad`)} AFTER DELETE ON ${id(table)}
        BEGIN DELETE FROM ${id(rt)} WHERE id = old.objectid; END
      `.execute(q);
      await sql`
        CREATE TRIGGER ${id(`${table}_au`)} AFTER UPDATE OF minx, miny, maxx, maxy ON ${id(table)}
        BEGIN
          DELETE FROM ${id(rt)} WHERE id = old.objectid;
          INSERT INTO ${id(rt)} SELECT new.objectid, new.minx, new.maxx, new.miny, new.maxy
            WHERE new.minx IS NOT NULL;
        END
      `.execute(q);
    } else if (postgis) {
      await createGeometryIndex(q, table);
    } else {
      await createBoxIndex(q, table);
    }
  }
  await sql`
    INSERT INTO feature_layers (item_id, layer_id, table_name, last_edit_date, data_last_edit_date, next_object_id)
    VALUES (${itemId}, ${schema.id}, ${table}, ${now}, ${now}, 1)
  `.execute(q);
}

async function createBoxIndex(q: AnyQueryable, table: string): Promise<void> {
  await sql`
    CREATE INDEX IF NOT EXISTS ${id(`${table}_box`)} ON ${id(table)}
    USING gist (box(point(minx, miny), point(maxx, maxy)))
  `.execute(q);
}

async function createGeometryIndex(q: AnyQueryable, table: string): Promise<void> {
  await sql`
    CREATE INDEX IF NOT EXISTS ${id(`${table}_geom`)} ON ${id(table)} USING gist (${id(GEOMETRY_COLUMN)})
  `.execute(q);
}

/** Drops the table of one layer, its attachments and its entry; nothing when it has none. */
export async function dropLayerStorage(q: AnyQueryable, itemId: string, layerId: number): Promise<void> {
  const table = tableName(itemId, layerId);
  await deleteLayerAttachments(q, itemId, layerId);
  // The R*Tree exists on SQLite only; its triggers go with the table. IF EXISTS covers both engines.
  await sql`DROP TABLE IF EXISTS ${id(`${table}_rt`)}`.execute(q);
  await sql`DROP TABLE IF EXISTS ${id(table)}`.execute(q);
  await sql`DELETE FROM feature_layers WHERE item_id = ${itemId} AND layer_id = ${layerId}`.execute(q);
  await sql`DELETE FROM feature_deletes WHERE item_id = ${itemId} AND layer_id = ${layerId}`.execute(q);
}

/** Drops the tables of every layer of a service's item (before the item row goes). */
export async function dropServiceStorage(q: AnyQueryable, itemId: string): Promise<void> {
  const layers = await sql<{ layer_id: number }>`
    SELECT layer_id FROM feature_layers WHERE item_id = ${itemId}
  `.execute(q);
  for (const { layer_id } of layers.rows) await dropLayerStorage(q, itemId, Number(layer_id));
}

/** Adds columns for new fields; existing rows get the field's default, or null. */
export async function addFieldColumns(
  q: AnyQueryable,
  engine: Engine,
  itemId: string,
  layerId: number,
  fields: readonly LayerField[],
): Promise<void> {
  const table = tableName(itemId, layerId);
  for (const field of fields) {
    await sql`ALTER TABLE ${id(table)} ADD COLUMN ${columnDdl(engine, field)}`.execute(q);
    if (field.defaultValue !== null) {
      await sql`UPDATE ${id(table)} SET ${id(field.column)} = ${field.defaultValue}`.execute(q);
    }
  }
}

/** Drops the columns of removed fields, with the values they held. */
export async function dropFieldColumns(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  fields: readonly LayerField[],
): Promise<void> {
  const table = tableName(itemId, layerId);
  for (const field of fields) {
    await sql`ALTER TABLE ${id(table)} DROP COLUMN ${id(field.column)}`.execute(q);
  }
}

/** Whether the layer has storage (an entry in `feature_layers` and its table). */
export async function hasLayerStorage(q: AnyQueryable, itemId: string, layerId: number): Promise<boolean> {
  const found = await sql`
    SELECT 1 AS one FROM feature_layers WHERE item_id = ${itemId} AND layer_id = ${layerId}
  `.execute(q);
  return found.rows.length > 0;
}

/** Whether the layer holds any row. */
export async function layerHasRows(q: AnyQueryable, itemId: string, layerId: number): Promise<boolean> {
  const found = await sql`SELECT 1 AS one FROM ${id(tableName(itemId, layerId))} LIMIT 1`.execute(q);
  return found.rows.length > 0;
}

/** Whether some row of the layer holds null in the field's column. */
export async function fieldHasNull(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  field: LayerField,
): Promise<boolean> {
  const found = await sql`
    SELECT 1 AS one FROM ${id(tableName(itemId, layerId))} WHERE ${id(field.column)} IS NULL LIMIT 1
  `.execute(q);
  return found.rows.length > 0;
}

/** GlobalIDs updated per statement: two parameters each, well under both engines' limits. */
const GLOBAL_IDS_PER_STATEMENT = 5_000;

/**
 * Gives every row without a value in the field's column one of its own from `newId` (a GlobalID
 * field added to a layer that holds features: each feature needs a distinct one).
 */
export async function fillGlobalIds(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  field: LayerField,
  newId: () => string,
): Promise<void> {
  const table = tableName(itemId, layerId);
  const rows = await sql<{ objectid: number }>`
    SELECT ${id(OID_COLUMN)} AS objectid FROM ${id(table)} WHERE ${id(field.column)} IS NULL
  `.execute(q);
  const ids = rows.rows.map((r) => Number(r.objectid));
  for (let start = 0; start < ids.length; start += GLOBAL_IDS_PER_STATEMENT) {
    const chunk = ids.slice(start, start + GLOBAL_IDS_PER_STATEMENT);
    const cases = chunk.map((objectId) => sql`WHEN ${objectId} THEN ${newId()}`);
    await sql`
      UPDATE ${id(table)} SET ${id(field.column)} = CASE ${id(OID_COLUMN)} ${sql.join(cases, sql` `)} END
      WHERE ${id(OID_COLUMN)} IN (${sql.join(chunk)})
    `.execute(q);
  }
}

export interface LayerState {
  layerId: number;
  lastEditDate: number;
  dataLastEditDate: number;
}

/** The edit dates of the stored layers of a service. */
export async function layerStates(q: AnyQueryable, itemId: string): Promise<Map<number, LayerState>> {
  const rows = await sql<{ layer_id: number; last_edit_date: number; data_last_edit_date: number }>`
    SELECT layer_id, last_edit_date, data_last_edit_date FROM feature_layers WHERE item_id = ${itemId}
  `.execute(q);
  return new Map(
    rows.rows.map((r) => [
      Number(r.layer_id),
      {
        layerId: Number(r.layer_id),
        lastEditDate: Number(r.last_edit_date),
        dataLastEditDate: Number(r.data_last_edit_date),
      },
    ]),
  );
}

/** An edit of a layer under way: its first fresh object id, and its moment (see `MOMENT_COLUMN`). */
export interface LayerEdit {
  firstObjectId: number;
  moment: number;
}

/**
 * Marks a layer's rows changed at `now` and gives `count` fresh object ids; undefined when the
 * layer has no storage. On PostgreSQL the row stays locked until the transaction ends: edits of
 * one layer go one after the other, so their moments (strictly growing) follow their commits.
 */
export async function beginLayerEdit(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  now: number,
  count: number,
): Promise<LayerEdit | undefined> {
  const row = await sql<{ next_object_id: number; data_last_edit_date: number }>`
    UPDATE feature_layers
    SET next_object_id = next_object_id + ${count},
        last_edit_date = CASE WHEN last_edit_date >= ${now} THEN last_edit_date + 1 ELSE ${now} END,
        data_last_edit_date = CASE WHEN data_last_edit_date >= ${now} THEN data_last_edit_date + 1 ELSE ${now} END
    WHERE item_id = ${itemId} AND layer_id = ${layerId}
    RETURNING next_object_id, data_last_edit_date
  `.execute(q);
  const found = row.rows[0];
  return found === undefined
    ? undefined
    : { firstObjectId: Number(found.next_object_id) - count, moment: Number(found.data_last_edit_date) };
}

/** Raises a layer's next object id to at least `next` (a copy keeps its origin's object ids). */
export async function reserveObjectIds(q: AnyQueryable, itemId: string, layerId: number, next: number) {
  await sql`
    UPDATE feature_layers SET next_object_id = ${next}
    WHERE item_id = ${itemId} AND layer_id = ${layerId} AND next_object_id < ${next}
  `.execute(q);
}

/** Gives rows the moment of an edit that changed what belongs to them (their attachments). */
export async function touchRows(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  objectIds: readonly number[],
  moment: number,
): Promise<void> {
  if (objectIds.length === 0) return;
  await sql`
    UPDATE ${id(tableName(itemId, layerId))} SET ${id(MOMENT_COLUMN)} = ${moment}
    WHERE ${id(OID_COLUMN)} IN (${sql.join([...objectIds])})
  `.execute(q);
}

/** Marks a layer's schema changed (fields added or removed) at `now`. */
export async function touchLayerSchema(q: AnyQueryable, itemId: string, layerId: number, now: number) {
  await sql`
    UPDATE feature_layers
    SET last_edit_date = CASE WHEN last_edit_date >= ${now} THEN last_edit_date + 1 ELSE ${now} END
    WHERE item_id = ${itemId} AND layer_id = ${layerId}
  `.execute(q);
}

/** A row to write: the object id, field columns by column name, and the geometry. */
export interface RowWrite {
  objectId: number;
  columns: Record<string, string | number | null>;
  /** Undefined: leave the stored geometry as it is (updates only). */
  geometry?: Geometry | null;
}

/** The stored text of a geometry: Esri JSON without the spatial reference and the flags. */
export function shapeText(geometry: Geometry): string {
  const {
    spatialReference: _sr,
    type: _type,
    hasZ,
    hasM,
    ...rest
  } = geometry as Geometry & {
    spatialReference?: unknown;
  };
  return JSON.stringify({ ...rest, ...(hasZ ? { hasZ } : {}), ...(hasM ? { hasM } : {}) });
}

function shapeValues(geometry: Geometry | null): (string | number | null)[] {
  if (!geometry) return [null, null, null, null, null];
  const b: Bounds = boundsOf(geometry);
  return [shapeText(geometry), b.xmin, b.ymin, b.xmax, b.ymax];
}

/** A stored geometry as the query code handles it: Esri JSON with its type and flags (`shapeText`'s inverse). */
export function readShape(text: unknown, schema: LayerSchema): Geometry | null {
  if (typeof text !== "string" || !schema.geometryType) return null;
  const g = JSON.parse(text) as Record<string, unknown>;
  g.type = schema.geometryType;
  g.hasZ = g.hasZ === true;
  g.hasM = g.hasM === true;
  return g as unknown as Geometry;
}

/** Bound parameters per statement: under SQLite's 32,766 and PostgreSQL's 65,535. */
const MAX_PARAMETERS = 30_000;
/** Tombstones per statement: five parameters each. */
const TOMBSTONES_PER_STATEMENT = Math.floor(MAX_PARAMETERS / 5);

/**
 * Inserts rows (object ids already given), in as few statements as the parameter limits allow.
 * The statement text is written here rather than through Kysely's `sql` template: a batch of
 * 2,000 features is 20,000 parameters, and building and compiling a template node for each of
 * them cost about a tenth of a bulk load's time. The text is the same for every full batch, so
 * SQLite's statement cache (database.ts) prepares it once.
 */
export async function insertRows(
  q: AnyQueryable,
  store: LayerStore,
  itemId: string,
  schema: LayerSchema,
  rows: readonly RowWrite[],
  moment: number,
): Promise<void> {
  if (rows.length === 0) return;
  const { engine } = store;
  const table = tableName(itemId, schema.id);
  const fields = schema.fields.filter((f) => f.column !== OID_COLUMN);
  const postgis = schema.geometryType ? store.postgis : undefined;
  const srid = postgis ? layerSrid(schema) : 0;
  // Column names come from the layer schema (`f_<name>`, checked there), quoted as identifiers.
  const names = [OID_COLUMN, MOMENT_COLUMN, ...fields.map((f) => f.column)];
  if (schema.geometryType) names.push(SHAPE_COLUMN, ...BOUNDS_COLUMNS);
  if (postgis) names.push(GEOMETRY_COLUMN);
  const head = `INSERT INTO "${table}" (${names.map((n) => `"${n.replaceAll('"', '""')}"`).join(", ")}) VALUES `;
  const perStatement = Math.max(1, Math.floor(MAX_PARAMETERS / names.length));
  for (let start = 0; start < rows.length; start += perStatement) {
    const batch = rows.slice(start, start + perStatement);
    const parameters: (string | number | Buffer | null)[] = [];
    const tuples: string[] = [];
    for (const row of batch) {
      const first = parameters.length;
      parameters.push(row.objectId, moment);
      for (const f of fields) parameters.push(row.columns[f.column] ?? null);
      if (schema.geometryType) parameters.push(...shapeValues(row.geometry ?? null));
      const marks: string[] = [];
      for (let i = first + 1; i <= parameters.length; i++) marks.push(engine === "postgres" ? `$${i}` : "?");
      if (postgis && schema.geometryType === "esriGeometryPoint") {
        // A point is its bounds' corner: the parameters already bound for minx and miny make it,
        // with no WKB to build and send (most bulk loads are points).
        const minx = parameters.length - 3;
        marks.push(
          `${postgis.schema}.ST_SetSRID(${postgis.schema}.ST_MakePoint($${minx}::float8, $${minx + 1}::float8), ${srid})`,
        );
      } else if (postgis) {
        parameters.push(row.geometry ? esriWkb(row.geometry) : null);
        marks.push(geometryFromWkb(postgis, `$${parameters.length}`, srid));
      }
      tuples.push(`(${marks.join(", ")})`);
    }
    await q.executeQuery(CompiledQuery.raw(head + tuples.join(", "), parameters));
  }
}

/** Updates one row; false when no row has that object id. */
export async function updateRow(
  q: AnyQueryable,
  store: LayerStore,
  itemId: string,
  schema: LayerSchema,
  row: RowWrite,
  moment: number,
): Promise<boolean> {
  const table = tableName(itemId, schema.id);
  const sets: RawBuilder<unknown>[] = Object.entries(row.columns).map(
    ([column, value]) => sql`${id(column)} = ${value}`,
  );
  if (schema.geometryType && row.geometry !== undefined) {
    const [shape, minx, miny, maxx, maxy] = shapeValues(row.geometry);
    sets.push(
      sql`${id(SHAPE_COLUMN)} = ${shape}`,
      sql`minx = ${minx}`,
      sql`miny = ${miny}`,
      sql`maxx = ${maxx}`,
      sql`maxy = ${maxy}`,
    );
    if (store.postgis) {
      const wkb = row.geometry ? esriWkb(row.geometry) : null;
      sets.push(sql`${id(GEOMETRY_COLUMN)} = ${geometryValue(store.postgis, wkb, layerSrid(schema))}`);
    }
  }
  if (sets.length > 0) sets.push(sql`${id(MOMENT_COLUMN)} = ${moment}`);
  if (sets.length === 0) {
    const found =
      await sql`SELECT 1 AS one FROM ${id(table)} WHERE ${id(OID_COLUMN)} = ${row.objectId}`.execute(q);
    return found.rows.length > 0;
  }
  const result = await sql`
    UPDATE ${id(table)} SET ${sql.join(sets)} WHERE ${id(OID_COLUMN)} = ${row.objectId}
  `.execute(q);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/**
 * Deletes rows by object id, and their attachments; answers the ids that existed. Each leaves a
 * tombstone at `moment` (undefined: none, for a copy replacing rows it is about to write again).
 */
export async function deleteRows(
  q: AnyQueryable,
  itemId: string,
  schema: LayerSchema,
  objectIds: readonly number[],
  moment: number | undefined,
): Promise<Set<number>> {
  const table = tableName(itemId, schema.id);
  const gone = new Set<number>();
  const perStatement = MAX_PARAMETERS;
  for (let start = 0; start < objectIds.length; start += perStatement) {
    const ids = objectIds.slice(start, start + perStatement);
    // The GlobalID goes into the tombstone: a peer matches features by it (migration 0027).
    const gid = schema.globalIdField?.column;
    const result = await sql<{ objectid: number; gid: string | null }>`
      DELETE FROM ${id(table)} WHERE ${id(OID_COLUMN)} IN (${sql.join(ids)})
      RETURNING ${id(OID_COLUMN)}, ${gid ? id(gid) : sql`NULL`} AS gid
    `.execute(q);
    for (const r of result.rows) gone.add(Number(r.objectid));
    // A feature's attachments go with it, in the same transaction: none outlives its feature.
    await deleteFeatureAttachments(q, itemId, schema.id, ids);
    // Object ids are never reused, so a tombstone is written once; a copy deleting again updates it.
    for (let t = 0; moment !== undefined && t < result.rows.length; t += TOMBSTONES_PER_STATEMENT) {
      const values = result.rows
        .slice(t, t + TOMBSTONES_PER_STATEMENT)
        .map((r) => sql`(${itemId}, ${schema.id}, ${Number(r.objectid)}, ${moment}, ${r.gid ?? null})`);
      await sql`
        INSERT INTO feature_deletes (item_id, layer_id, object_id, edit_moment, global_id) VALUES ${sql.join(values)}
        ON CONFLICT (item_id, layer_id, object_id)
        DO UPDATE SET edit_moment = excluded.edit_moment, global_id = excluded.global_id
      `.execute(q);
    }
  }
  return gone;
}

/** A position in a layer's changes: after the row (or tombstone) of this moment and object id. */
export interface ChangeCursor {
  moment: number;
  objectId: number;
}

/**
 * Rows written after `after` and at or before the moment `upTo`, in (moment, object id) order:
 * every column, with the geometry as stored (`shape`). `upTo` is a moment the layer had reached
 * when the reader began, so a page never holds an edit that committed after it. With
 * `exceptFrom`, rows a sync stored from that peer at their current moment are left out
 * (`collaboration_applied_moments`): what came from a peer is not sent back to it.
 */
export async function changedRows(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  after: ChangeCursor,
  upTo: number,
  limit: number,
  exceptFrom?: string,
): Promise<Record<string, unknown>[]> {
  const m = id(MOMENT_COLUMN);
  const o = id(OID_COLUMN);
  const found = await sql<Record<string, unknown>>`
    SELECT * FROM ${id(tableName(itemId, layerId))} t
    WHERE ${m} <= ${upTo} AND (${m} > ${after.moment} OR (${m} = ${after.moment} AND ${o} > ${after.objectId}))
      ${exceptFrom === undefined ? sql`` : notApplied(itemId, layerId, sql`t.${m}`, exceptFrom)}
    ORDER BY ${m}, ${o} LIMIT ${limit}
  `.execute(q);
  return found.rows;
}

const notApplied = (itemId: string, layerId: number, moment: RawBuilder<unknown>, peer: string) => sql`
  AND NOT EXISTS (
    SELECT 1 FROM collaboration_applied_moments a
    WHERE a.item_id = ${itemId} AND a.layer_id = ${layerId} AND a.moment = ${moment} AND a.portal_id = ${peer}
  )`;

/** A tombstone: its place in the layer's changes, and the GlobalID its feature had (when the layer has them). */
export interface Tombstone extends ChangeCursor {
  globalId: string | null;
}

/** Tombstones after `after`, up to the moment `upTo`, in (moment, object id) order; `exceptFrom` as for rows. */
export async function deletedRows(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  after: ChangeCursor,
  upTo: number,
  limit: number,
  exceptFrom?: string,
): Promise<Tombstone[]> {
  const found = await sql<{ object_id: number; edit_moment: number; global_id: string | null }>`
    SELECT object_id, edit_moment, global_id FROM feature_deletes d
    WHERE item_id = ${itemId} AND layer_id = ${layerId} AND edit_moment <= ${upTo}
      AND (edit_moment > ${after.moment} OR (edit_moment = ${after.moment} AND object_id > ${after.objectId}))
      ${exceptFrom === undefined ? sql`` : notApplied(itemId, layerId, sql`d.edit_moment`, exceptFrom)}
    ORDER BY edit_moment, object_id LIMIT ${limit}
  `.execute(q);
  return found.rows.map((r) => ({
    moment: Number(r.edit_moment),
    objectId: Number(r.object_id),
    globalId: r.global_id,
  }));
}

/** The object ids among `objectIds` whose rows exist, with their GlobalIDs when the layer has them. */
export async function existingRows(
  q: AnyQueryable,
  itemId: string,
  schema: LayerSchema,
  objectIds: readonly number[],
): Promise<Map<number, string | null>> {
  const table = tableName(itemId, schema.id);
  const out = new Map<number, string | null>();
  const g = schema.globalIdField?.column;
  for (let start = 0; start < objectIds.length; start += MAX_PARAMETERS) {
    const ids = objectIds.slice(start, start + MAX_PARAMETERS);
    const result = await sql<{ objectid: number; gid: string | null }>`
      SELECT ${id(OID_COLUMN)} AS objectid, ${g ? id(g) : sql`NULL`} AS gid
      FROM ${id(table)} WHERE ${id(OID_COLUMN)} IN (${sql.join(ids)})
    `.execute(q);
    for (const r of result.rows) out.set(Number(r.objectid), r.gid);
  }
  return out;
}

/** Object ids by GlobalID (`useGlobalIds`), for the GlobalIDs that exist. */
export async function objectIdsByGlobalId(
  q: AnyQueryable,
  itemId: string,
  schema: LayerSchema,
  globalIds: readonly string[],
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const g = schema.globalIdField?.column;
  if (!g) return out;
  const table = tableName(itemId, schema.id);
  for (let start = 0; start < globalIds.length; start += MAX_PARAMETERS) {
    const ids = globalIds.slice(start, start + MAX_PARAMETERS);
    const result = await sql<{ objectid: number; gid: string }>`
      SELECT ${id(OID_COLUMN)} AS objectid, ${id(g)} AS gid
      FROM ${id(table)} WHERE ${id(g)} IN (${sql.join(ids)})
    `.execute(q);
    for (const r of result.rows) out.set(r.gid, Number(r.objectid));
  }
  return out;
}

/** Rows whose `geom` one statement fills when a table gets the column. */
const BACKFILL_BATCH = 5_000;

interface SpatialTable {
  table_name: string;
  item_id: string;
  layer_id: number;
  has_geom: boolean;
  has_geom_index: boolean;
  has_box_index: boolean;
}

/** The layer's schema as its service's definition gives it now, for its SRID; undefined if unreadable. */
async function storedSchema(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
): Promise<LayerSchema | undefined> {
  const found = await sql<{ definition: string; layers: string }>`
    SELECT definition, layers FROM feature_services WHERE item_id = ${itemId}
  `.execute(q);
  const row = found.rows[0];
  if (!row) return undefined;
  const layer = (JSON.parse(row.layers) as LayerDefinition[]).find((l) => l.id === layerId);
  if (!layer) return undefined;
  try {
    return layerSchema(layer, "layer", JSON.parse(row.definition) as ServiceProperties);
  } catch (err) {
    if (err instanceof SchemaError) return undefined;
    throw err;
  }
}

/** Gives a table made without PostGIS its `geom`, filled from `shape`, and the index on it. */
async function addGeometryColumn(q: AnyQueryable, postgis: Postgis, t: SpatialTable): Promise<void> {
  const table = t.table_name;
  const schema = await storedSchema(q, t.item_id, Number(t.layer_id));
  const srid = schema ? layerSrid(schema) : 0;
  await sql`ALTER TABLE ${id(table)} ADD COLUMN ${id(GEOMETRY_COLUMN)} ${sql.raw(`${postgis.schema}.geometry`)}`.execute(
    q,
  );
  for (let after = 0; ; ) {
    const rows = await sql<{ objectid: number; shape: string }>`
      SELECT ${id(OID_COLUMN)} AS objectid, ${id(SHAPE_COLUMN)} AS shape FROM ${id(table)}
      WHERE ${id(OID_COLUMN)} > ${after} AND ${id(SHAPE_COLUMN)} IS NOT NULL
      ORDER BY ${id(OID_COLUMN)} LIMIT ${BACKFILL_BATCH}
    `.execute(q);
    if (rows.rows.length === 0) break;
    const ids = rows.rows.map((r) => Number(r.objectid));
    const wkbs = rows.rows.map((r) => esriWkb(storedGeometry(r.shape)));
    await sql`
      UPDATE ${id(table)} SET ${id(GEOMETRY_COLUMN)} = ${sql.raw(`${postgis.schema}.ST_GeomFromWKB(v.wkb, ${srid})`)}
      FROM unnest(${ids}::bigint[], ${wkbs}::bytea[]) AS v(id, wkb)
      WHERE ${id(table)}.${id(OID_COLUMN)} = v.id
    `.execute(q);
    after = ids[ids.length - 1] as number;
    if (rows.rows.length < BACKFILL_BATCH) break;
  }
}

/** A stored shape with the type its members imply (the backfill may not be able to read the layer's schema). */
function storedGeometry(text: string): Geometry {
  const g = JSON.parse(text) as Record<string, unknown>;
  g.type =
    "rings" in g
      ? "esriGeometryPolygon"
      : "paths" in g
        ? "esriGeometryPolyline"
        : "points" in g
          ? "esriGeometryMultipoint"
          : "esriGeometryPoint";
  return g as unknown as Geometry;
}

/**
 * Brings every layer table in line with whether PostGIS is used, at start-up after the migrations:
 * with PostGIS, a table made without it (before PostGIS was installed or turned on) gets `geom`,
 * filled from `shape`, and its index, and loses the index on boxes it no longer needs; without
 * it, a table loses a `geom` that writes would no longer keep, and gets the index on boxes back.
 * Nothing happens when every table is as it should be, the usual case. One transaction, under a
 * lock per schema, so nodes starting together do it once. Answers how many tables changed.
 *
 * Every node of a deployment must use PostGIS alike (same PORTICO_POSTGIS, one database): a node
 * without it would write rows without `geom`.
 */
export async function syncSpatialStorage(db: Db): Promise<number> {
  if (db.engine !== "postgres") return 0;
  const { postgis } = db;
  return db.writer.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('portico:layer-geometry'), hashtext(current_schema()))`.execute(
      trx,
    );
    const named = (suffix: string) => sql`to_regclass(quote_ident(f.table_name || ${suffix})) IS NOT NULL`;
    const column = (name: string) => sql`EXISTS (
      SELECT 1 FROM pg_attribute a
      WHERE a.attrelid = to_regclass(quote_ident(f.table_name)) AND a.attname = ${name} AND NOT a.attisdropped
    )`;
    const found = await sql<SpatialTable>`
      SELECT f.table_name, f.item_id, f.layer_id, ${column(GEOMETRY_COLUMN)} AS has_geom,
        ${named("_geom")} AS has_geom_index, ${named("_box")} AS has_box_index
      FROM feature_layers f WHERE ${column(SHAPE_COLUMN)}
    `.execute(trx);
    let changed = 0;
    for (const t of found.rows) {
      const table = t.table_name;
      if (postgis) {
        if (t.has_geom && t.has_geom_index && !t.has_box_index) continue;
        if (!t.has_geom) await addGeometryColumn(trx, postgis, t);
        await createGeometryIndex(trx, table);
        await sql`DROP INDEX IF EXISTS ${id(`${table}_box`)}`.execute(trx);
      } else {
        if (!t.has_geom && t.has_box_index) continue;
        // The column's index goes with it.
        await sql`ALTER TABLE ${id(table)} DROP COLUMN IF EXISTS ${id(GEOMETRY_COLUMN)}`.execute(trx);
        await createBoxIndex(trx, table);
      }
      changed++;
    }
    return changed;
  });
}
