import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * How many notifications each user has sent in the current hour (`createNotification` of a group
 * or of the organization), one row per sender: the quota every node counts against, in the
 * transaction that stores the notifications. The row goes with its user.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createTable("notification_quotas")
    .addColumn("sender_id", "text", (c) => c.primaryKey().references("users.id").onDelete("cascade"))
    /** Start of the hour counted (milliseconds since the epoch, a whole hour). */
    .addColumn("window_start", "bigint", (c) => c.notNull())
    /** Notifications (one per recipient) sent in that hour. */
    .addColumn("sent", "integer", (c) => c.notNull())
    .execute();
}
