import {
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type DatabaseMetadataOptions,
  type Dialect,
  type Kysely,
  PostgresDialect,
  type PostgresDialectConfig,
  type SchemaMetadata,
  sql,
  type TableMetadata,
} from "kysely";
import { BatchingPostgresDriver } from "./pg-driver.js";

/** Kysely's bookkeeping tables (`DEFAULT_MIGRATION_TABLE`, `DEFAULT_MIGRATION_LOCK_TABLE`). */
const KYSELY_TABLES = ["kysely_migration", "kysely_migration_lock"];

interface ColumnRow {
  column: string;
  not_null: boolean;
  has_default: boolean;
  table: string;
  table_type: string;
  type: string;
  type_schema: string;
  column_description: string | null;
  auto_incrementing: string | null;
}

/**
 * Kysely's PostgreSQL introspector, confined to one schema. Kysely's own lists the columns of every
 * table in every schema of the database, calling `has_schema_privilege(name)` and
 * `pg_get_serial_sequence(name)` on each: functions that look names up in the current catalog,
 * while the listing reads the catalog as of its snapshot. A schema or table that another session
 * drops while the listing runs is still in the snapshot but no longer by name, and the listing
 * fails with `schema "…" does not exist` (3F000) or `relation "…" does not exist` (42P01). The
 * migrator lists tables this way on every start, to find its own bookkeeping tables; another
 * application's, or another test's, `DROP SCHEMA` could then stop portico starting. Only portico's
 * schema matters to it, and nobody else drops that.
 */
export class SchemaIntrospector implements DatabaseIntrospector {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly schema: string,
  ) {}

  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{ name: string }>`
      SELECT nspname AS name FROM pg_catalog.pg_namespace WHERE nspname = ${this.schema}`.execute(this.db);
    return rows.map((row) => ({ name: row.name }));
  }

  async getTables(
    options: DatabaseMetadataOptions = { withInternalKyselyTables: false },
  ): Promise<TableMetadata[]> {
    const { rows } = await sql<ColumnRow>`
      SELECT a.attname AS column, a.attnotnull AS not_null, a.atthasdef AS has_default,
        c.relname AS table, c.relkind AS table_type, typ.typname AS type, dtns.nspname AS type_schema,
        col_description(a.attrelid, a.attnum) AS column_description,
        pg_get_serial_sequence(quote_ident(ns.nspname) || '.' || quote_ident(c.relname), a.attname)
          AS auto_incrementing
      FROM pg_catalog.pg_attribute a
      JOIN pg_catalog.pg_class c ON a.attrelid = c.oid
      JOIN pg_catalog.pg_namespace ns ON c.relnamespace = ns.oid
      JOIN pg_catalog.pg_type typ ON a.atttypid = typ.oid
      JOIN pg_catalog.pg_namespace dtns ON typ.typnamespace = dtns.oid
      WHERE ns.nspname = ${this.schema} AND c.relkind IN ('r', 'v', 'p')
        AND a.attnum >= 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`.execute(this.db);
    const tables = new Map<string, TableMetadata>();
    for (const row of rows) {
      if (!options.withInternalKyselyTables && KYSELY_TABLES.includes(row.table)) continue;
      let table = tables.get(row.table);
      if (!table) {
        table = { name: row.table, schema: this.schema, isView: row.table_type === "v", columns: [] };
        tables.set(row.table, table);
      }
      (table.columns as TableMetadata["columns"][number][]).push({
        name: row.column,
        dataType: row.type,
        dataTypeSchema: row.type_schema,
        isNullable: !row.not_null,
        hasDefaultValue: row.has_default,
        isAutoIncrementing: row.auto_incrementing !== null,
        ...(row.column_description === null ? {} : { comment: row.column_description }),
      });
    }
    return [...tables.values()];
  }

  async getMetadata(options?: DatabaseMetadataOptions): Promise<DatabaseMetadata> {
    return { tables: await this.getTables(options) };
  }
}

/** Kysely's PostgreSQL dialect, whose introspection (the migrator's) sees only `schema`. */
export function schemaScopedPostgresDialect(
  config: PostgresDialectConfig,
  schema: string,
  options: { batching?: boolean } = {},
): Dialect {
  const base = new PostgresDialect(config);
  return {
    createDriver: () =>
      options.batching
        ? new BatchingPostgresDriver(config.pool as ConstructorParameters<typeof BatchingPostgresDriver>[0])
        : base.createDriver(),
    createQueryCompiler: () => base.createQueryCompiler(),
    createAdapter: () => base.createAdapter(),
    createIntrospector: (db) => new SchemaIntrospector(db, schema),
  };
}
