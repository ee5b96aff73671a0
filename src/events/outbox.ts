import type { Queryable } from "../db/database.js";
import { newId } from "../ids.js";

export type EventSource = "item" | "group" | "user" | "role";

/** Who made a change. `null` for the system itself (for example the first administrator). */
export interface Actor {
  id: string;
  username: string;
}

export interface ChangeEvent {
  source: EventSource;
  /** The operation name used in payloads and trigger URIs: add, update, delete, updateUserRole, ... */
  operation: string;
  /** Item id, group id, username or role id. */
  objectId: string;
  actor: Actor | null;
  /** Additional payload properties of `interface.md` §6, e.g. `{ userRoleUpdatedTo: ["org_user"] }`. */
  properties?: Record<string, unknown>;
}

const PLURAL: Record<EventSource, string> = { item: "items", group: "groups", user: "users", role: "roles" };

/**
 * The most specific trigger URI of an event (`wire.md` §7). "add" events have no per-object scope
 * (`/users/add`, `/roles/add`): the object does not exist before them.
 */
export function triggerUri(event: Pick<ChangeEvent, "source" | "operation" | "objectId">): string {
  const base = `/${PLURAL[event.source]}`;
  if (event.operation === "add") return `${base}/add`;
  return `${base}/${event.objectId}/${event.operation}`;
}

/**
 * Records an event in the outbox. Call it with the transaction that makes the change, so that the
 * change and its event commit, or roll back, together.
 */
export async function recordEvent(
  trx: Queryable,
  event: ChangeEvent,
  when: number = Date.now(),
): Promise<void> {
  await trx
    .insertInto("events")
    .values({
      id: newId(),
      occurred: when,
      source: event.source,
      operation: event.operation,
      object_id: event.objectId,
      actor_id: event.actor?.id ?? "",
      actor_username: event.actor?.username ?? "",
      properties: JSON.stringify(event.properties ?? {}),
      uri: triggerUri(event),
    })
    .execute();
}

/** The payload form of a recorded event (`wire.md` §7, one element of `events`). */
export interface EventPayload {
  userId: string;
  username: string;
  when: number;
  operation: string;
  source: EventSource;
  id: string;
  properties: Record<string, unknown>;
}

export async function listEvents(db: Queryable, afterSeq = 0, limit = 1000) {
  const rows = await db
    .selectFrom("events")
    .selectAll()
    .where("seq", ">", afterSeq)
    .orderBy("seq")
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    seq: r.seq,
    eventId: r.id,
    uri: r.uri,
    payload: {
      userId: r.actor_id,
      username: r.actor_username,
      when: r.occurred,
      operation: r.operation,
      source: r.source as EventSource,
      id: r.object_id,
      properties: JSON.parse(r.properties) as Record<string, unknown>,
    } satisfies EventPayload,
  }));
}
