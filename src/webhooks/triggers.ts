import { USERNAME_PATTERN } from "../auth/username.js";
import type { EventSource } from "../events/outbox.js";

/**
 * Trigger URIs (`wire.md` §7, `interface.md` §4.2 and §6): what a webhook subscribes to. A URI
 * names the events it covers and all below it: `/` everything, `/items` every item event,
 * `/items/share` every item share, `/items/<id>` every event of one item, `/items/<id>/share`
 * the shares of one item. Every source has the any-object and one-object scopes of §6.
 */

const OPERATIONS: Readonly<Record<EventSource, readonly string[]>> = {
  item: [
    "add",
    "delete",
    "update",
    "move",
    "publish",
    "share",
    "unshare",
    "reassign",
    "addComment",
    "deleteComment",
    "updateComment",
  ],
  group: [
    "add",
    "update",
    "delete",
    "protect",
    "unprotect",
    "invite",
    "addUsers",
    "removeUsers",
    "updateUsers",
    "share",
    "unshare",
    // A request to join a group that needs approval (`community/groups/<id>/join`).
    "join",
  ],
  user: [
    "add",
    "signin",
    "signout",
    "delete",
    "update",
    "disable",
    "enable",
    "updateUserRole",
    "updateUserLicenseType",
  ],
  role: ["add", "update", "delete"],
};

const SOURCES: Readonly<Record<string, EventSource>> = {
  items: "item",
  groups: "group",
  users: "user",
  roles: "role",
};

/** Item, group and role ids are 32 hexadecimal digits; users are named by username. */
const ID_PATTERN = /^[0-9a-fA-F]{32}$/;

/** A parsed subscription; absent parts match anything. */
export interface Trigger {
  source?: EventSource;
  /** Item, group or role id, or username (compared case-insensitively). */
  object?: string;
  operation?: string;
}

/** Why `uri` is not a trigger URI, or the trigger it names. */
export function parseTrigger(uri: string): Trigger | string {
  if (uri === "/") return {};
  const parts = uri.split("/");
  if (parts[0] !== "" || parts.length > 4 || parts.slice(1).some((p) => p === "")) {
    return "is not a trigger URI such as /items or /groups/<id>/update";
  }
  const [, plural, second, third] = parts as [string, string, string | undefined, string | undefined];
  const source = SOURCES[plural];
  if (!source) return `starts with /${plural}; trigger URIs start with /items, /groups, /users or /roles`;
  const operations = OPERATIONS[source];
  if (second === undefined) return { source };
  if (third === undefined && operations.includes(second)) return { source, operation: second };
  const validObject = source === "user" ? USERNAME_PATTERN.test(second) : ID_PATTERN.test(second);
  if (!validObject) {
    return source === "user"
      ? `names neither a user nor one of ${operations.join(", ")}`
      : `names neither a ${source} id (32 hexadecimal digits) nor one of ${operations.join(", ")}`;
  }
  const object = second.toLowerCase();
  if (third === undefined) return { source, object };
  // "add" has no one-object scope: the object does not exist before it.
  if (third === "add" || !operations.includes(third)) {
    return `has no ${source} operation '${third}' (one of ${operations.filter((o) => o !== "add").join(", ")})`;
  }
  return { source, object, operation: third };
}

/** Whether an event falls under a trigger. */
export function triggerCovers(
  trigger: Trigger,
  event: { source: string; operation: string; objectId: string },
): boolean {
  if (trigger.source !== undefined && trigger.source !== event.source) return false;
  if (trigger.operation !== undefined && trigger.operation !== event.operation) return false;
  if (trigger.object !== undefined && trigger.object !== event.objectId.toLowerCase()) return false;
  return true;
}
