import fs from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import pg from "pg";
import type { Config } from "../config.js";
import { dataDirInUse } from "../db/database.js";
import { MIGRATION_NAMES } from "../db/migrate.js";
import { PORTICO_VERSION } from "../version.js";

/**
 * `portico doctor`: checks a deployment's settings and database without changing anything, and
 * says what to fix. It reads the database with its own read-only connection, so it runs beside
 * live nodes (on SQLite too, where `serve` holds the data directory's lock) and never applies a
 * migration or creates the organization.
 *
 * Every line is `ok`, `warn` or `FAIL`; the exit code is 1 when any check failed.
 */

type Level = "ok" | "warn" | "FAIL";
export interface Finding {
  level: Level;
  check: string;
  detail: string;
}

/** Leases and heartbeats compare times written by different nodes; beyond this, say so. */
const MAX_CLOCK_SKEW_MS = 2000;
/** A notification due this long without being claimed means no node is delivering. */
const OVERDUE_MS = 5 * 60 * 1000;

/** What doctor reads, whichever engine holds it. */
interface Reader {
  /** Lists the tables of portico's schema (as `name`). */
  tablesQuery: string;
  describe: string;
  query<T>(text: string): Promise<T[]>;
  /** The database server's clock (PostgreSQL); undefined for an embedded database. */
  now(): Promise<number | undefined>;
  close(): Promise<void>;
}

export async function doctor(config: Config): Promise<Finding[]> {
  const findings: Finding[] = [];
  const add = (level: Level, check: string, detail: string) => findings.push({ level, check, detail });
  add("ok", "version", `portico ${PORTICO_VERSION} on Node.js ${process.versions.node}`);
  settings(config, add);

  let reader: Reader | undefined;
  try {
    reader = config.databaseUrl ? await postgres(config.databaseUrl) : sqlite(config.dataDir, add);
  } catch (err) {
    add("FAIL", "database", `cannot be reached: ${(err as Error).message}`);
  }
  if (!reader) return findings;
  try {
    add("ok", "database", reader.describe);
    await database(reader, add);
    if (config.databaseUrl) await postgis(reader, config, add);
  } catch (err) {
    add("FAIL", "database", `a check failed: ${(err as Error).message}`);
  } finally {
    await reader.close();
  }
  return findings;
}

function settings(config: Config, add: (level: Level, check: string, detail: string) => void) {
  add("ok", "settings", "every setting is valid");
  const loopback = ["127.0.0.1", "::1", "localhost"].includes(config.host);
  if (config.publicUrl === undefined) {
    if (config.databaseUrl || !loopback) {
      add(
        "warn",
        "public URL",
        "PORTICO_PUBLIC_URL is not set: the URLs the server hands out (item and service URLs, webhook portalURL, collaboration invitations) use each node's listening address; set it to the address clients and other portals use",
      );
    }
  } else {
    add("ok", "public URL", config.publicUrl);
    if (config.publicUrl.startsWith("http:")) {
      add(
        "warn",
        "public URL",
        "is plain HTTP: tokens and passwords cross the network readable; terminate TLS in front",
      );
    }
    if (config.publicUrl.startsWith("https:") && config.trustProxy === false) {
      add(
        "warn",
        "trusted proxy",
        "the public URL is HTTPS but PORTICO_TRUST_PROXY is not set: behind a TLS-terminating proxy every request looks like HTTP (allSSL refuses it, request IPs are the proxy's)",
      );
    }
  }
  if (config.outboundAllow.length > 0) {
    add(
      "warn",
      "outbound calls",
      `PORTICO_OUTBOUND_ALLOW lets webhooks and peer calls reach ${config.outboundAllow.join(", ")}; keep it to the addresses that need it`,
    );
  }
  if (!config.metricsAllow.every((c) => c.startsWith("127.") || c === "::1/128")) {
    add("ok", "metrics", `served to ${config.metricsAllow.join(", ")}`);
  }
}

async function database(reader: Reader, add: (level: Level, check: string, detail: string) => void) {
  const tables = await reader.query<{ name: string }>(reader.tablesQuery);
  if (!tables.some((t) => t.name === "kysely_migration")) {
    add("warn", "migrations", "the database is empty: `portico serve` creates the tables at its first start");
    return;
  }
  const applied = (await reader.query<{ name: string }>("SELECT name FROM kysely_migration")).map(
    (r) => r.name,
  );
  const pending = MIGRATION_NAMES.filter((n) => !applied.includes(n));
  const unknown = applied.filter((n) => !MIGRATION_NAMES.includes(n));
  if (unknown.length > 0) {
    add(
      "FAIL",
      "migrations",
      `the database has migrations this version does not know (${unknown.join(", ")}): it was upgraded by a newer portico; run that version`,
    );
  } else if (pending.length > 0) {
    add(
      "FAIL",
      "migrations",
      `not applied: ${pending.join(", ")}; start one node of this version (it applies them, under a lock) before the others`,
    );
    return;
  } else {
    add("ok", "migrations", `all ${applied.length} applied`);
  }

  const org = await reader.query<{ n: number | string }>("SELECT COUNT(*) AS n FROM organizations");
  const admins = await reader.query<{ n: number | string }>(
    "SELECT COUNT(*) AS n FROM users WHERE role = 'org_admin' AND disabled = 0",
  );
  if (Number(org[0]?.n) === 0) add("warn", "organization", "not created yet: `portico serve` creates it");
  if (Number(admins[0]?.n) === 0) {
    add("FAIL", "administrators", "no enabled administrator: nobody can manage the portal");
  } else {
    add("ok", "administrators", `${admins[0]?.n} enabled`);
  }

  const dbNow = await reader.now();
  if (dbNow !== undefined) {
    const skew = Date.now() - dbNow;
    if (Math.abs(skew) > MAX_CLOCK_SKEW_MS) {
      add(
        "warn",
        "clock",
        `this machine's clock is ${skew} ms off the database's: nodes compare leases and heartbeats by time; run NTP on every node`,
      );
    } else {
      add("ok", "clock", `within ${Math.abs(skew)} ms of the database's`);
    }
  }

  const now = dbNow ?? Date.now();
  const [outbox] = await reader.query<{ n: number | string }>(
    "SELECT COUNT(*) AS n FROM events WHERE dispatched = 0",
  );
  const [overdue] = await reader.query<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM notifications WHERE status = 'pending' AND next_attempt < ${now - OVERDUE_MS} AND lease_until < ${now}`,
  );
  const [stale] = await reader.query<{ n: number | string }>(
    `SELECT COUNT(*) AS n FROM sync_jobs WHERE status IN ('submitted', 'started', 'in_progress') AND heartbeat < ${now - OVERDUE_MS}`,
  );
  if (Number(overdue?.n) > 0) {
    add(
      "warn",
      "webhooks",
      `${overdue?.n} notifications have been due for over 5 minutes: is any node running? (outbox: ${outbox?.n} events waiting)`,
    );
  } else {
    add("ok", "webhooks", `outbox: ${outbox?.n} events waiting; no overdue notification`);
  }
  if (Number(stale?.n) > 0) {
    add(
      "warn",
      "syncs",
      `${stale?.n} syncs marked running have not reported for 5 minutes; a running node marks them failed after PORTICO_SYNC_STALE_SECONDS`,
    );
  } else {
    add("ok", "syncs", "no sync silent for long");
  }
}

/**
 * Whether `portico serve` will use PostGIS for hosted feature layers (see db/postgis.ts): the
 * extension in the database, or on the server for serve to create. Read-only: nothing is created.
 */
async function postgis(
  reader: Reader,
  config: Config,
  add: (level: Level, check: string, detail: string) => void,
) {
  if (config.postgis === "off") {
    add("ok", "PostGIS", "not used (PORTICO_POSTGIS=off): feature layers use the index on their bounds");
    return;
  }
  const [installed] = await reader.query<{ version: string; schema: string }>(
    `SELECT e.extversion AS version, n.nspname AS schema
     FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'postgis'`,
  );
  if (installed) {
    add("ok", "PostGIS", `${installed.version} (schema ${installed.schema}), used by hosted feature layers`);
    return;
  }
  const [available] = await reader.query<{ version: string }>(
    "SELECT default_version AS version FROM pg_available_extensions WHERE name = 'postgis'",
  );
  const level = config.postgis === "on" ? "FAIL" : "warn";
  if (available) {
    add(
      config.postgis === "on" ? "warn" : "ok",
      "PostGIS",
      `${available.version} is on the server but not in this database: \`portico serve\` creates it at start if its user may (CREATE EXTENSION postgis), else a superuser can`,
    );
  } else {
    add(
      level,
      "PostGIS",
      `not on the database server${config.postgis === "on" ? ", and PORTICO_POSTGIS is on: serve will not start" : ""}; feature layers use the index on their bounds (the postgresql-<version>-postgis-3 package adds it)`,
    );
  }
}

async function postgres(url: string): Promise<Reader> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ v: string; schema: string }>(
      "SELECT current_setting('server_version') AS v, current_schema() AS schema",
    );
    const where = new URL(url);
    return {
      tablesQuery:
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()",
      describe: `PostgreSQL ${rows[0]?.v} at ${where.host}${where.pathname}, schema ${rows[0]?.schema}`,
      query: async <T>(text: string) => (await client.query(text)).rows as T[],
      now: async () => {
        const r = await client.query<{ ms: string }>(
          "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS ms",
        );
        return Number(r.rows[0]?.ms);
      },
      close: () => client.end(),
    };
  } catch (err) {
    await client.end();
    throw err;
  }
}

function sqlite(
  dataDir: string,
  add: (level: Level, check: string, detail: string) => void,
): Reader | undefined {
  const file = path.join(dataDir, "portico.sqlite");
  if (!fs.existsSync(dataDir)) {
    add("warn", "data directory", `${dataDir} does not exist yet: \`portico serve\` creates it`);
    return undefined;
  }
  try {
    fs.accessSync(dataDir, fs.constants.W_OK);
  } catch {
    add("FAIL", "data directory", `${dataDir} is not writable by this user`);
  }
  if (!fs.existsSync(file)) {
    add("warn", "database", `${file} does not exist yet: \`portico serve\` creates it`);
    return undefined;
  }
  add(
    "ok",
    "data directory",
    dataDirInUse(dataDir)
      ? `${dataDir} (a portico process is serving it)`
      : `${dataDir} (no process serving it)`,
  );
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  db.pragma("busy_timeout = 5000");
  const integrity = db.pragma("quick_check", { simple: true });
  if (integrity !== "ok")
    add("FAIL", "database file", `quick_check reports: ${String(integrity)}; restore a backup`);
  return {
    tablesQuery: "SELECT name FROM sqlite_master WHERE type = 'table'",
    describe: `SQLite ${db.prepare("SELECT sqlite_version() AS v").pluck().get() as string} at ${file}`,
    query: async <T>(text: string) => db.prepare(text).all() as T[],
    now: async () => undefined,
    close: async () => {
      db.close();
    },
  };
}
