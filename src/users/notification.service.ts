import { type Caller, isCaller, requirePrivilege } from "../auth/caller.js";
import type { Db, Queryable } from "../db/database.js";
import { errors } from "../errors.js";
import { newId } from "../ids.js";
import {
  countSent,
  deleteNotification,
  insertNotifications,
  listNotifications,
  MAX_NOTIFICATIONS_SENT_PER_HOUR,
  type NotificationRow,
  quotaResetsAt,
} from "./notification.repository.js";
import { findUser } from "./user.repository.js";

/** What a notification says; `data` adds what it is about (a group, the sender). */
export interface NotificationMessage {
  type: string;
  subject: string;
  message: string;
  data: Record<string, unknown>;
}

/** Most recipients one createNotification names (`users`); Esri's client sends 25 at a time. */
export const MAX_NOTIFICATION_RECIPIENTS = 100;

/**
 * Built-in notifications (`community/users/<u>/notifications`): stored and listed, never mailed,
 * whatever `notificationChannelType` asked for. Only the recipient reads or removes them, as the
 * ArcGIS reference says of the notification resource.
 */
export class NotificationService {
  constructor(private readonly db: Db) {}

  async list(caller: Caller | null, username: string) {
    const user = await this.recipient(caller, username);
    const rows = await listNotifications(this.db.kysely, user.id);
    return { notifications: rows.map((r) => notificationJson(r, user.username)) };
  }

  async remove(caller: Caller | null, username: string, id: string): Promise<void> {
    const user = await this.recipient(caller, username);
    if (!(await deleteNotification(this.db.kysely, user.id, id))) {
      throw errors.notFound(`Notification '${id}' of user '${user.username}'`);
    }
  }

  /**
   * `portals/self/createNotification`: administrators who view the organization's members notify
   * them by username. Sending a message changes no account, so it needs no account-managing
   * privilege. An unknown username refuses the whole call, and nothing is stored.
   */
  async notifyMembers(caller: Caller | null, usernames: readonly string[], message: NotificationMessage) {
    requirePrivilege(caller, "portal:admin:viewUsers");
    await this.db.transaction(async (trx) => {
      const recipients = [];
      for (const username of new Set(usernames.map((u) => u.toLowerCase()))) {
        const user = await findUser(trx, username);
        if (!user) throw errors.invalidParameter("users", `'${username}' is not a user of this organization`);
        recipients.push(user.id);
      }
      await deliver(trx, caller.userId, recipients, message);
    });
  }

  private async recipient(caller: Caller | null, username: string) {
    if (caller === null) throw errors.tokenRequired();
    if (!isCaller(caller, username)) {
      throw errors.forbidden("Only the recipient may read or remove a user's notifications.");
    }
    const user = await findUser(this.db.kysely, username);
    if (!user) throw errors.userNotFound(username);
    return user;
  }
}

/**
 * Stores one notification for each recipient (user ids), in the caller's transaction, counted
 * against the sender's hourly quota: past it, nothing is stored.
 */
export async function deliver(
  q: Queryable,
  senderId: string,
  userIds: readonly string[],
  message: NotificationMessage,
) {
  const created = Date.now();
  if ((await countSent(q, senderId, userIds.length, created)) > MAX_NOTIFICATIONS_SENT_PER_HOUR) {
    throw errors.notificationQuotaSpent(MAX_NOTIFICATIONS_SENT_PER_HOUR, quotaResetsAt(created));
  }
  const rows: NotificationRow[] = userIds.map((user_id) => ({
    id: newId(),
    user_id,
    type: message.type,
    subject: message.subject,
    message: message.message,
    data: JSON.stringify(message.data),
    created,
  }));
  await insertNotifications(q, rows);
}

/** The ArcGIS notification resource; `data` carries the subject and message too. */
function notificationJson(row: NotificationRow, username: string) {
  return {
    id: row.id,
    type: row.type,
    target: username,
    targetType: "user",
    received: Number(row.created),
    data: {
      ...(JSON.parse(row.data) as Record<string, unknown>),
      subject: row.subject,
      message: row.message,
    },
  };
}
