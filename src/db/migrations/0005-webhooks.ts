import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * Organization webhooks and their deliveries (`interface.md` §2.2, `wire.md` §7).
 *
 * - `events.dispatched` marks outbox rows already turned into notifications. A flag, not a cursor
 *   over `seq`: on PostgreSQL a transaction holding a lower `seq` can commit after a higher one,
 *   and a cursor would skip it. Events recorded before webhooks existed can match no webhook.
 * - `notifications`: one payload for one webhook, attempted until delivered or out of attempts;
 *   `lease_until` is how long the node that claimed it may work on it before others take over.
 * - `notification_attempts`: every attempt, with its outcome, for `notificationStatus`.
 * - `webhook_settings`: the organization's delivery settings (one row).
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .alterTable("events")
    .addColumn("dispatched", "integer", (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`UPDATE events SET dispatched = 1`.execute(db);
  await db.schema
    .createIndex("events_undispatched")
    .on("events")
    .column("seq")
    .where(sql.ref("dispatched"), "=", 0)
    .execute();

  await db.schema
    .createTable("webhooks")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("payload_url", "text", (c) => c.notNull())
    .addColumn("secret", "text", (c) => c.notNull())
    .addColumn("is_active", "integer", (c) => c.notNull())
    .addColumn("changes", "text", (c) => c.notNull())
    /** JSON array of trigger URIs. */
    .addColumn("events", "text", (c) => c.notNull())
    /** JSON object: deactivationPolicy and portico's own options. */
    .addColumn("config", "text", (c) => c.notNull())
    .addColumn("owner_id", "text", (c) => c.notNull())
    .addColumn("modified_id", "text", (c) => c.notNull())
    /** When the failure count starts: creation or the last activation. */
    .addColumn("count_since", "bigint", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("webhooks_name").on("webhooks").column("name").execute();

  await db.schema
    .createTable("notifications")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("webhook_id", "text", (c) => c.notNull().references("webhooks.id").onDelete("cascade"))
    /** The outbox event delivered; empty for a ping. */
    .addColumn("event_id", "text", (c) => c.notNull())
    .addColumn("payload", "text", (c) => c.notNull())
    /** pending | delivered | failed */
    .addColumn("status", "text", (c) => c.notNull())
    /** Attempts since the notification was (re)queued, judged against the attempt limit. */
    .addColumn("attempts", "integer", (c) => c.notNull())
    /** Attempts ever made, numbering `notification_attempts` across redeliveries. */
    .addColumn("total_attempts", "integer", (c) => c.notNull())
    .addColumn("next_attempt", "bigint", (c) => c.notNull())
    .addColumn("lease_until", "bigint", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("completed", "bigint")
    .addColumn("last_status", "integer")
    .addColumn("last_response", "text", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("notifications_due")
    .on("notifications")
    .columns(["next_attempt", "id"])
    .where(sql.ref("status"), "=", "pending")
    .execute();
  await db.schema
    .createIndex("notifications_webhook")
    .on("notifications")
    .columns(["webhook_id", "created", "id"])
    .execute();
  await db.schema
    .createIndex("notifications_failed")
    .on("notifications")
    .columns(["webhook_id", "completed"])
    .where(sql.ref("status"), "=", "failed")
    .execute();

  await db.schema
    .createTable("notification_attempts")
    .addColumn("notification_id", "text", (c) =>
      c.notNull().references("notifications.id").onDelete("cascade"),
    )
    .addColumn("attempt", "integer", (c) => c.notNull())
    .addColumn("started", "bigint", (c) => c.notNull())
    .addColumn("duration_ms", "integer", (c) => c.notNull())
    /** HTTP status, or null when no answer came (refused, timed out, connection failed). */
    .addColumn("status_code", "integer")
    .addColumn("error", "text", (c) => c.notNull())
    .addColumn("response_excerpt", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("notification_attempts_pk", ["notification_id", "attempt"])
    .execute();

  await db.schema
    .createTable("webhook_settings")
    .addColumn("singleton", "integer", (c) => c.primaryKey())
    .addColumn("notification_attempts", "integer", (c) => c.notNull())
    .addColumn("timeout_seconds", "integer", (c) => c.notNull())
    .addColumn("elapsed_seconds", "integer", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
}
