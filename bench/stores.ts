import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { onCleanup } from "./cleanup.js";

export type EngineName = "sqlite" | "postgres";

export interface Engine {
  name: EngineName;
  /** For PostgreSQL: the server URL used to create and drop each run's database. */
  databaseUrl?: string;
}

/** Where one portal keeps its data, as the environment that points `portico serve` at it. */
export interface Store {
  env: Record<string, string>;
  destroy(): Promise<void>;
}

/**
 * A fresh, empty store. PostgreSQL gets a whole database rather than a schema because `serve`
 * has no setting for the schema (the tests' isolation works only in-process).
 */
export async function createStore(engine: Engine): Promise<Store> {
  // PostgreSQL portals still get a data directory, so none falls back to ./data in the repo.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-"));
  const env: Record<string, string> = { PORTICO_DATA_DIR: dataDir };
  let database: string | undefined;
  const destroy = async () => {
    unregister();
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (database && engine.databaseUrl) {
      // FORCE ends sessions a killed server may have left behind (PostgreSQL 13+).
      await adminQuery(engine.databaseUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    }
  };
  const unregister = onCleanup(destroy);

  if (engine.name === "postgres") {
    try {
      if (!engine.databaseUrl) throw new Error("PostgreSQL engine without a database URL");
      const name = `bench_${randomBytes(6).toString("hex")}`;
      await adminQuery(engine.databaseUrl, `CREATE DATABASE ${name}`);
      database = name;
      const url = new URL(engine.databaseUrl);
      url.pathname = `/${name}`;
      env.DATABASE_URL = url.toString();
    } catch (err) {
      await destroy();
      throw err;
    }
  }
  return { env, destroy };
}

async function adminQuery(databaseUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/**
 * For a PostgreSQL store on this machine: a function listing the server processes connected to
 * its database (the portal's pool), whose CPU time the load cases then read from /proc.
 * Undefined for SQLite, whose work is done in portico's own process.
 */
export function databasePids(store: Store): (() => Promise<number[]>) | undefined {
  const url = store.env.DATABASE_URL;
  if (!url) return undefined;
  return async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      // Only processes this machine can see: a server elsewhere is not measured.
      return rows.map((r) => r.pid).filter((pid) => fs.existsSync(`/proc/${pid}/stat`));
    } finally {
      await client.end();
    }
  };
}
