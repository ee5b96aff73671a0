import type pg from "pg";
import type { PostgisSetting } from "../config.js";

/**
 * PostGIS, when portico uses it in a PostgreSQL database (`PORTICO_POSTGIS`). Hosted feature
 * layers then keep a geometry column with a GiST index beside the Esri JSON they store, and a
 * spatial query lets the database decide what it can decide exactly (see
 * `features/query/run-query.ts`); without it the same queries use a GiST index on the bounds and
 * decide in the process. The answers are the same either way.
 */
export interface Postgis {
  /**
   * The schema of the extension's types, functions and operators, quoted as an identifier. Every
   * reference to them is qualified with it: portico's own schema (a test's, or an operator's) is
   * often the only one on the connection's search_path.
   */
  schema: string;
  /** The extension's version, `3.3.2`. */
  version: string;
}

/** What `preparePostgis` found: the extension to use, or why there is none, in a sentence. */
export type PostgisState = { postgis: Postgis; note: string } | { postgis: undefined; note: string };

/** The oldest PostGIS whose `ST_Intersects` tells the planner to use the index (3.0). */
const MINIMUM_MAJOR_VERSION = 3;

/** SQLSTATE unique_violation: a concurrent CREATE EXTENSION by someone who did not take our lock. */
const UNIQUE_VIOLATION = "23505";

const quoteIdentifier = (name: string) => `"${name.replaceAll('"', '""')}"`;

async function installed(client: pg.ClientBase): Promise<{ schema: string; version: string } | undefined> {
  const { rows } = await client.query<{ schema: string; version: string }>(
    `SELECT n.nspname AS schema, e.extversion AS version
     FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'postgis'`,
  );
  return rows[0];
}

/**
 * Creates the extension in `public` (where PostgreSQL puts it by default, and where every schema
 * of the database can reach it), or in `fallbackSchema` when the database has no `public`. Nodes
 * and test files starting at once would race: two `CREATE EXTENSION IF NOT EXISTS` both find it
 * missing and one fails on a unique index of pg_extension or pg_type. A transaction-scoped
 * advisory lock serializes portico's attempts; a unique violation from anyone else's is tried
 * again once the other has committed.
 */
async function create(client: pg.ClientBase, fallbackSchema: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await client.query("BEGIN");
    try {
      await client.query("SELECT pg_advisory_xact_lock(hashtext('portico'), hashtext('postgis'))");
      const { rows } = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = 'public'");
      const schema = rows.length > 0 ? "public" : fallbackSchema;
      await client.query(`CREATE EXTENSION IF NOT EXISTS postgis SCHEMA ${quoteIdentifier(schema)}`);
      await client.query("COMMIT");
      return;
    } catch (err) {
      await client.query("ROLLBACK");
      if ((err as { code?: string }).code !== UNIQUE_VIOLATION || attempt >= 3) throw err;
    }
  }
}

/**
 * Decides whether portico uses PostGIS in the database `client` is connected to, creating the
 * extension when the setting allows and the server has it (`pg_available_extensions`). With `on`,
 * a database without it stops the start, saying why; with `auto` it is only noted.
 */
export async function preparePostgis(
  client: pg.ClientBase,
  setting: PostgisSetting,
  porticoSchema: string,
): Promise<PostgisState> {
  if (setting === "off") return { postgis: undefined, note: "PostGIS not used (PORTICO_POSTGIS=off)" };
  const unavailable = (reason: string): PostgisState => {
    if (setting === "on") throw new Error(`PORTICO_POSTGIS is on, but ${reason}`);
    return { postgis: undefined, note: `PostGIS not used: ${reason}` };
  };
  let found = await installed(client);
  if (!found) {
    const { rows } = await client.query("SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'");
    if (rows.length === 0) {
      return unavailable(
        "the database server has no PostGIS (install its package, e.g. postgresql-<version>-postgis-3)",
      );
    }
    try {
      await create(client, porticoSchema);
    } catch (err) {
      return unavailable(
        `CREATE EXTENSION postgis failed (${(err as Error).message}); a superuser can run it in this database`,
      );
    }
    found = await installed(client);
    if (!found) return unavailable("the extension postgis could not be found after creating it");
  }
  const major = Number(found.version.split(".")[0]);
  if (!(major >= MINIMUM_MAJOR_VERSION)) {
    return unavailable(`its PostGIS is ${found.version}; portico needs ${MINIMUM_MAJOR_VERSION}.0 or later`);
  }
  return {
    postgis: { schema: quoteIdentifier(found.schema), version: found.version },
    note: `PostGIS ${found.version} used (schema ${found.schema})`,
  };
}
