import type { Selectable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { UserNotificationTable } from "../db/schema.js";

export type NotificationRow = Selectable<UserNotificationTable>;

/**
 * Notifications a user keeps: writing more drops the oldest beyond this, in the writing
 * transaction, so a busy sender cannot grow one user's list without end.
 */
export const MAX_NOTIFICATIONS_PER_USER = 500;

/**
 * Notifications (one per recipient) a user may send in an hour, counted in the database so that
 * the bound holds across nodes. One `notifyAll` of the largest group it reaches (5,000 members)
 * fits twice.
 */
export const MAX_NOTIFICATIONS_SENT_PER_HOUR = 10_000;

const HOUR_MS = 60 * 60 * 1000;

/**
 * Counts `n` more notifications sent by a user in the hour of `now` (a new hour starts again from
 * zero) and answers how many that makes, in the caller's transaction: a refused sending rolls
 * its count back with it. The upsert locks the sender's row on PostgreSQL, so two sendings of
 * one user at once count one after the other.
 */
export async function countSent(q: Queryable, senderId: string, n: number, now: number): Promise<number> {
  const windowStart = now - (now % HOUR_MS);
  const row = await q
    .insertInto("notification_quotas")
    .values({ sender_id: senderId, window_start: windowStart, sent: n })
    .onConflict((oc) =>
      oc.column("sender_id").doUpdateSet((eb) => ({
        sent: eb
          .case()
          .when("notification_quotas.window_start", "=", eb.ref("excluded.window_start"))
          .then(eb("notification_quotas.sent", "+", eb.ref("excluded.sent")))
          .else(eb.ref("excluded.sent"))
          .end(),
        window_start: eb.ref("excluded.window_start"),
      })),
    )
    .returning("sent")
    .executeTakeFirstOrThrow();
  return Number(row.sent);
}

/** When the hour of `now` ends: when a sender who spent its quota may send again. */
export function quotaResetsAt(now: number): number {
  return now - (now % HOUR_MS) + HOUR_MS;
}

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
