import type { Selectable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { UserNotificationTable } from "../db/schema.js";

export type NotificationRow = Selectable<UserNotificationTable>;

/**
 * Notifications a user keeps: writing more drops the oldest beyond this, in the writing
 * transaction, so a busy sender cannot grow one user's list without end.
 */
export const MAX_NOTIFICATIONS_PER_USER = 500;

/** Rows per INSERT, well under either engine's limit of bound parameters. */
const INSERT_BATCH = 200;

export async function insertNotifications(q: Queryable, rows: readonly NotificationRow[]): Promise<void> {
  for (let i = 0; i < rows.length; i += INSERT_BATCH) {
    await q
      .insertInto("user_notifications")
      .values(rows.slice(i, i + INSERT_BATCH))
      .execute();
  }
  const userIds = [...new Set(rows.map((r) => r.user_id))];
  for (let i = 0; i < userIds.length; i += INSERT_BATCH) {
    await pruneNotifications(q, userIds.slice(i, i + INSERT_BATCH));
  }
}

/** Deletes the notifications of these users beyond the newest `MAX_NOTIFICATIONS_PER_USER`. */
async function pruneNotifications(q: Queryable, userIds: readonly string[]): Promise<void> {
  await q
    .deleteFrom("user_notifications")
    .where("id", "in", (eb) =>
      eb
        .selectFrom((inner) =>
          inner
            .selectFrom("user_notifications")
            .select((w) => [
              "id",
              w.fn
                .agg<number>("row_number")
                .over((o) => o.partitionBy("user_id").orderBy("created", "desc").orderBy("id", "desc"))
                .as("n"),
            ])
            .where("user_id", "in", [...userIds])
            .as("ranked"),
        )
        .select("ranked.id")
        .where("ranked.n", ">", MAX_NOTIFICATIONS_PER_USER),
    )
    .execute();
}

/** A user's notifications, newest first. */
export function listNotifications(q: Queryable, userId: string): Promise<NotificationRow[]> {
  return q
    .selectFrom("user_notifications")
    .selectAll()
    .where("user_id", "=", userId)
    .orderBy("created", "desc")
    .orderBy("id", "desc")
    .limit(MAX_NOTIFICATIONS_PER_USER)
    .execute();
}

/** Deletes one notification of a user; false when the user has no such notification. */
export async function deleteNotification(q: Queryable, userId: string, id: string): Promise<boolean> {
  const r = await q
    .deleteFrom("user_notifications")
    .where("user_id", "=", userId)
    .where("id", "=", id)
    .executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}
