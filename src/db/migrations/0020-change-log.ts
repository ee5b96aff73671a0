import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * PostgreSQL: the change log through which nodes tell each other what a transaction made stale
 * (see change-feed.ts). Each transaction that changes something cached writes a row in the same
 * transaction, stamped with its transaction id; after the commit the node wakes the others with a
 * NOTIFY outside any transaction, and each reads the rows committed since its last snapshot (and
 * does so every second anyway, for a NOTIFY lost to a crash). Rows are pruned after a few minutes.
 * SQLite has one process per database and needs no log.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  if (engine !== "postgres") return;
  await db.schema
    .createTable("change_log")
    .addColumn("xid", sql`xid8`, (c) => c.notNull().defaultTo(sql`pg_current_xact_id()`))
    /** The node that made the change, which has already dropped what it cached. */
    .addColumn("node", "text", (c) => c.notNull())
    /** The changes, comma-separated (`auth:<userId>,events`). */
    .addColumn("changes", "text", (c) => c.notNull())
    .addColumn("at", "timestamptz", (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await db.schema.createIndex("change_log_xid").on("change_log").column("xid").execute();
}
