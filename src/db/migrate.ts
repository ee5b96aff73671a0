import type { Kysely, Migration, MigrationProvider } from "kysely";
import { Migrator } from "kysely";
import { syncSpatialStorage } from "../features/layer-store.js";
import type { Db, Engine } from "./database.js";
import * as m0001 from "./migrations/0001-initial.js";
import * as m0002 from "./migrations/0002-content.js";
import * as m0003 from "./migrations/0003-search-indexes.js";
import * as m0004 from "./migrations/0004-tag-search.js";
import * as m0005 from "./migrations/0005-webhooks.js";
import * as m0006 from "./migrations/0006-collaboration.js";
import * as m0007 from "./migrations/0007-file-chunks.js";
import * as m0008 from "./migrations/0008-sign-in-security.js";
import * as m0009 from "./migrations/0009-full-text-search.js";
import * as m0010 from "./migrations/0010-feature-layers.js";
import * as m0011 from "./migrations/0011-feature-attachments.js";
import * as m0012 from "./migrations/0012-group-applications.js";
import * as m0013 from "./migrations/0013-item-relationships.js";
import * as m0014 from "./migrations/0014-search-notifications.js";
import * as m0015 from "./migrations/0015-item-resources.js";
import * as m0016 from "./migrations/0016-oauth.js";
import * as m0017 from "./migrations/0017-export-jobs.js";
import * as m0019 from "./migrations/0019-notification-quotas.js";
import * as m0020 from "./migrations/0020-change-log.js";
import * as m0023 from "./migrations/0023-feature-edit-tracking.js";
import * as m0025 from "./migrations/0025-peer-notices.js";
import * as m0026 from "./migrations/0026-key-rotation.js";
import * as m0027 from "./migrations/0027-bidirectional-layer-sync.js";
import * as m0028 from "./migrations/0028-read-only-copies.js";

/**
 * Forward-only migrations, applied in name order at start-up. Add a new file for every change;
 * never edit one that has shipped. Kysely's migrator takes a lock (an advisory lock on
 * PostgreSQL), so several nodes starting at once apply each migration exactly once.
 */
const MIGRATIONS: Record<string, { up(db: Kysely<unknown>, engine: Engine): Promise<void> }> = {
  "0001-initial": m0001,
  "0002-content": m0002,
  "0003-search-indexes": m0003,
  "0004-tag-search": m0004,
  "0005-webhooks": m0005,
  "0006-collaboration": m0006,
  "0007-file-chunks": m0007,
  "0008-sign-in-security": m0008,
  "0009-full-text-search": m0009,
  "0010-feature-layers": m0010,
  "0011-feature-attachments": m0011,
  "0012-group-applications": m0012,
  "0013-item-relationships": m0013,
  "0014-search-notifications": m0014,
  "0015-item-resources": m0015,
  "0016-oauth": m0016,
  "0017-export-jobs": m0017,
  "0019-notification-quotas": m0019,
  "0020-change-log": m0020,
  "0023-feature-edit-tracking": m0023,
  "0025-peer-notices": m0025,
  "0026-key-rotation": m0026,
  "0027-bidirectional-layer-sync": m0027,
  "0028-read-only-copies": m0028,
};

/** Every migration this version knows, in order. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(MIGRATIONS);

function provider(engine: Engine): MigrationProvider {
  return {
    async getMigrations() {
      const out: Record<string, Migration> = {};
      for (const [name, m] of Object.entries(MIGRATIONS)) out[name] = { up: (db) => m.up(db, engine) };
      return out;
    },
  };
}

function migratorOf(db: Db, handle: Kysely<unknown> = db.writer as unknown as Kysely<unknown>): Migrator {
  return new Migrator({
    db: handle,
    provider: provider(db.engine),
    // Kysely looks for its bookkeeping tables in every schema unless told which one; another
    // application (or test run) in the same database would otherwise make it skip creating ours.
    ...(db.schema ? { migrationTableSchema: db.schema } : {}),
  });
}

/** Migrations this code knows that the database has not applied (a node of an older deployment, or a failed upgrade). */
export async function pendingMigrations(db: Db): Promise<string[]> {
  const all = await migratorOf(db, db.kysely as unknown as Kysely<unknown>).getMigrations();
  return all.filter((m) => m.executedAt === undefined).map((m) => m.name);
}

/**
 * Applies the pending migrations, then brings the layer tables in line with whether PostGIS is
 * used (`syncSpatialStorage`), which can change between starts without a migration.
 */
export async function migrateToLatest(db: Db): Promise<string[]> {
  const applied = await applyMigrations(db);
  await syncSpatialStorage(db);
  return applied;
}

/**
 * Applies the pending migrations only: they need no PostGIS, so a start runs them while PostGIS is
 * prepared (`DbOptions.beforeReady`), and `syncSpatialStorage` once it is.
 */
export async function applyMigrations(db: Db): Promise<string[]> {
  const { error, results } = await migratorOf(db).migrateToLatest();
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}

/** Applies the migrations up to and including `name` (tests of a later migration's data move). */
export async function migrateTo(db: Db, name: string): Promise<void> {
  const { error } = await migratorOf(db).migrateTo(name);
  if (error) throw error;
}
