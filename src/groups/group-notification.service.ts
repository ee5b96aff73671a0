import type { Caller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import {
  deliver,
  MAX_NOTIFICATION_RECIPIENTS,
  type NotificationMessage,
} from "../users/notification.service.js";
import { listMembers, membersNamed } from "./group.repository.js";
import type { GroupService } from "./group.service.js";

/** Most members `notifyAll` reaches in one call; a larger group is notified by lists of members. */
export const MAX_GROUP_NOTIFY_ALL = 5000;

export interface GroupNotification {
  subject: string;
  message: string;
  /** Usernames; empty or absent with `notifyAll`: every member but the sender. */
  users: readonly string[];
  notifyAll: boolean;
}

/**
 * `community/groups/<id>/createNotification`. As the ArcGIS reference has it, the group's managers
 * (owner, group managers, administrators who update groups) notify every member or a list of
 * them; another member notifies one member at a time. Recipients must be members; the
 * notifications are stored for them in one transaction, never mailed.
 */
export class GroupNotificationService {
  constructor(
    private readonly db: Db,
    private readonly groups: GroupService,
  ) {}

  async notify(caller: Caller | null, groupId: string, request: GroupNotification): Promise<void> {
    if (caller === null) throw errors.tokenRequired();
    const all = request.notifyAll || request.users.length === 0;
    if (request.users.length > MAX_NOTIFICATION_RECIPIENTS) {
      throw errors.invalidParameter("users", `must name at most ${MAX_NOTIFICATION_RECIPIENTS} users`);
    }
    // Read before the transaction: on SQLite a read outside it would wait for its connection.
    const { row, membership } = await this.groups.seen(caller, groupId);
    const manages =
      row.owner_id === caller.userId ||
      membership === "admin" ||
      caller.privileges.has("portal:admin:updateGroups");
    if (!manages) {
      if (membership === "none") throw errors.forbidden(`Only members may notify group '${groupId}'.`);
      if (all || request.users.length !== 1) {
        throw errors.forbidden("A member who does not manage the group may notify one member at a time.");
      }
    }
    await this.db.transaction(async (trx) => {
      let recipients: string[];
      if (all) {
        // One more than may be notified (and the caller, who is left out) tells that there are too
        // many without reading every membership of a large group.
        const members = await listMembers(trx, groupId, MAX_GROUP_NOTIFY_ALL + 2);
        recipients = members.filter((m) => m.user_id !== caller.userId).map((m) => m.user_id);
        if (recipients.length > MAX_GROUP_NOTIFY_ALL) {
          throw errors.invalidParameter(
            "notifyAll",
            `reaches more than ${MAX_GROUP_NOTIFY_ALL} members; name the users instead`,
          );
        }
      } else {
        const members = await membersNamed(trx, groupId, request.users);
        const byName = new Map(members.map((m) => [m.username.toLowerCase(), m.user_id]));
        recipients = [];
        for (const username of new Set(request.users.map((u) => u.toLowerCase()))) {
          const id = byName.get(username);
          if (id === undefined) {
            throw errors.invalidParameter("users", `'${username}' is not a member of group '${groupId}'`);
          }
          recipients.push(id);
        }
      }
      const message: NotificationMessage = {
        type: "group_notification",
        subject: request.subject,
        message: request.message,
        data: { groupId: row.id, groupTitle: row.title, fromUser: caller.username },
      };
      await deliver(trx, caller.userId, recipients, message);
    });
  }
}
