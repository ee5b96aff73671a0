import type { Engine } from "../../db/database.js";
import type { LayerField } from "../layer-schema.js";
import { storedAsText } from "../layer-store.js";

/**
 * One `ORDER BY` term that orders alike on both engines (every query's pages, distinct values and
 * statistics groups must be the same on SQLite and PostgreSQL):
 * - text by code point: SQLite compares UTF-8 bytes, which is code point order; PostgreSQL uses the
 *   database's collation (a locale's, on most installations) unless told `COLLATE "C"`;
 * - nulls first when ascending and last when descending: SQLite's rule, the reverse of
 *   PostgreSQL's default, so it is written out for both. Not for a column that holds no null (the
 *   object id, a field that is not nullable): PostgreSQL would then sort instead of walking the
 *   primary key's index, which orders nulls last.
 */
export function orderTerm(engine: Engine, column: string, field: LayerField, descending: boolean): string {
  return `${sortKey(engine, column, field)} ${direction(field, descending)}`;
}

/** The expression to order `field`'s column by (its text by code point). */
export function sortKey(engine: Engine, column: string, field: LayerField): string {
  return engine === "postgres" && storedAsText(field) ? `${column} COLLATE "C"` : column;
}

/** The direction of an order term, with where nulls go when the column may hold them. */
export function direction(field: LayerField, descending: boolean): string {
  const way = descending ? "DESC" : "ASC";
  if (field.type === "esriFieldTypeOID" || !field.nullable) return way;
  return `${way} ${descending ? "NULLS LAST" : "NULLS FIRST"}`;
}
