import fs from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, PostgresDialect, SqliteDialect, type Transaction } from "kysely";
import pg from "pg";
import type { Database } from "./schema.js";

export type Engine = "sqlite" | "postgres";

/** A Kysely handle: the database itself or a transaction. Repositories accept either. */
export type Queryable = Kysely<Database> | Transaction<Database>;

export interface Db {
  engine: Engine;
  /** The PostgreSQL schema portico's tables live in; undefined on SQLite. */
  schema: string | undefined;
  kysely: Kysely<Database>;
  /** Runs `work` in one transaction: a change and the events it causes commit together. */
  transaction<T>(work: (trx: Transaction<Database>) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface DbOptions {
  /** postgres:// URL; when absent the embedded SQLite file `<dataDir>/portico.sqlite` is used. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** PostgreSQL schema to work in (tests give each run its own); created when missing. */
  schema?: string | undefined;
}

export async function openDatabase(options: DbOptions): Promise<Db> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.schema);
  return openSqlite(options.dataDir);
}

function openSqlite(dataDir: string): Db {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, "portico.sqlite");
  const sqlite = new SQLite(file);
  // WAL lets readers proceed during a write; synchronous=FULL makes each commit durable, which is
  // what "a change and its events commit together" promises after a power cut, not only a crash.
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = FULL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  const kysely = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  return {
    engine: "sqlite",
    schema: undefined,
    kysely,
    // Kysely serialises every query on the single SQLite connection, so a transaction here holds
    // that connection until it ends: keep slow work (password hashing, network calls) outside.
    transaction: (work) => kysely.transaction().execute(work),
    close: () => kysely.destroy(),
  };
}

async function openPostgres(url: string, schema: string | undefined): Promise<Db> {
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`invalid PostgreSQL schema name: ${schema}`);
  }
  if (schema) {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    } finally {
      await admin.end();
    }
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    // bigint (int8) columns hold epoch milliseconds and counts, all far below 2^53.
    types: {
      getTypeParser: (oid: number, format?: "text" | "binary") =>
        oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as "text"),
    },
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  });
  const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  let current: string;
  try {
    const { rows } = await pool.query<{ schema: string | null }>("SELECT current_schema() AS schema");
    current = rows[0]?.schema ?? "public";
  } catch (err) {
    await pool.end();
    throw err;
  }
  return {
    engine: "postgres",
    schema: current,
    kysely,
    transaction: (work) => kysely.transaction().execute(work),
    close: () => kysely.destroy(),
  };
}

/** True when `err` is a unique-constraint violation on either engine. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string };
  return (
    e?.code === "23505" ||
    e?.code === "SQLITE_CONSTRAINT_UNIQUE" ||
    e?.code === "SQLITE_CONSTRAINT_PRIMARYKEY"
  );
}
