import type { Selectable } from "kysely";
import { noteChange } from "../db/change-feed.js";
import { type Engine, later, type Queryable } from "../db/database.js";
import { fixedStatement } from "../db/fixed-statement.js";
import type { EventTable } from "../db/schema.js";
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
 * change and its event commit, or roll back, together. On PostgreSQL the row travels with the
 * transaction's next statement or its COMMIT (`later`).
 */
export async function recordEvent(
  trx: Queryable,
  event: ChangeEvent,
  when: number = Date.now(),
): Promise<void> {
  await recordEvents(trx, [event], when);
}

/** Several events, in this order, in one statement (one round trip, sent with the COMMIT). */
export async function recordEvents(
  trx: Queryable,
  events: readonly ChangeEvent[],
  when: number = Date.now(),
): Promise<void> {
  if (events.length === 0) return;
  const rows = events.map((event) => ({
    id: newId(),
    occurred: when,
    source: event.source,
    operation: event.operation,
    object_id: event.objectId,
    actor_id: event.actor?.id ?? "",
    actor_username: event.actor?.username ?? "",
    properties: event.properties === undefined ? "{}" : JSON.stringify(event.properties),
    uri: triggerUri(event),
  }));
  const one = rows.length === 1 ? rows[0] : undefined;
  await later(
    trx,
    one
      ? insertOneEvent(
          trx,
          one.id,
          one.occurred,
          one.source,
          one.operation,
          one.object_id,
          one.actor_id,
          one.actor_username,
          one.properties,
          one.uri,
        )
      : trx.insertInto("events").values(rows).compile(),
  );
  noteChange(trx, "events");
}

/** The insert of one event (most changes make one), compiled once (see `fixedStatement`). */
const insertOneEvent = fixedStatement(
  (
    q,
    id: string,
    occurred: number,
    source: string,
    operation: string,
    object_id: string,
    actor_id: string,
    actor_username: string,
    properties: string,
    uri: string,
  ) =>
    q
      .insertInto("events")
      .values({ id, occurred, source, operation, object_id, actor_id, actor_username, properties, uri }),
);

export type EventRow = Selectable<EventTable>;

/**
 * The oldest events not yet dispatched to webhooks, at most `limit`. Call it in the transaction
 * that marks them dispatched: on PostgreSQL they stay locked until it ends, and several nodes
 * dispatch side by side, each taking events the others have not locked.
 */
export function takeUndispatched(q: Queryable, engine: Engine, limit: number): Promise<EventRow[]> {
  let query = q.selectFrom("events").selectAll().where("dispatched", "=", 0).orderBy("seq").limit(limit);
  if (engine === "postgres") query = query.forUpdate().skipLocked();
  return query.execute();
}

export async function markDispatched(q: Queryable, events: readonly Pick<EventRow, "seq">[]): Promise<void> {
  await q
    .updateTable("events")
    .set({ dispatched: 1 })
    .where(
      "seq",
      "in",
      events.map((e) => e.seq),
    )
    .execute();
}
