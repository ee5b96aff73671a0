import { type Selectable, sql } from "kysely";
import { noteChange } from "../db/change-feed.js";
import { type Engine, engineOf, later, type Queryable } from "../db/database.js";
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

/**
 * PostgreSQL: what an event's `dispatched` starts as, decided by the insert itself: already
 * dispatched (1) while no webhook is active, for there is nothing to dispatch it to; the
 * dispatcher would only mark it so after the commit, one more write of every event row (measured:
 * 12% of what the guest's database spends on a first sync's page, 300 events a page). Pending (0)
 * otherwise, as always.
 *
 * No webhook misses a change through it: a webhook is created or activated behind a SHARE lock of
 * `events` (`lockOutboxForNewWebhook`), which waits for every transaction that inserted an event
 * to end and holds new inserts back until the webhook commits. An insert's lock on `events` is
 * taken when the statement is analysed (or its cached plan locked), before the snapshot it
 * executes with (READ COMMITTED), so an insert held back sees the webhook it waited for. An
 * event whose transaction commits after the webhook is therefore recorded pending, as before;
 * one that commits before it is not the webhook's (the dispatcher may or may not still have found
 * it pending then, as before).
 */
export const NO_WEBHOOK_ACTIVE_TEXT =
  "(SELECT CASE WHEN EXISTS (SELECT 1 FROM webhooks WHERE is_active = 1) THEN 0 ELSE 1 END)";
const NO_WEBHOOK_ACTIVE = sql.raw<number>(NO_WEBHOOK_ACTIVE_TEXT);

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
      : insertEvents(trx, rows),
  );
  noteChange(trx, "events");
}

type EventInsert = Omit<EventRow, "seq" | "dispatched">;

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
  ) => {
    const row = { id, occurred, source, operation, object_id, actor_id, actor_username, properties, uri };
    return q
      .insertInto("events")
      .values(engineOf(q) === "postgres" ? { ...row, dispatched: NO_WEBHOOK_ACTIVE } : row);
  },
);

/**
 * Many events in one statement. On PostgreSQL the rows are selected from a VALUES list joined to
 * `NO_WEBHOOK_ACTIVE` once: the subquery in each row of a VALUES insert would be planned and run
 * once per row (measured: 300 rows took 13 ms that way, 2 ms so, 1.6 ms without it).
 */
function insertEvents(q: Queryable, rows: readonly EventInsert[]) {
  if (engineOf(q) !== "postgres") return q.insertInto("events").values(rows).compile();
  const values = sql.join(
    rows.map(
      (r) =>
        sql`(${r.id}, ${r.occurred}, ${r.source}, ${r.operation}, ${r.object_id}, ${r.actor_id}, ${r.actor_username}, ${r.properties}, ${r.uri})`,
    ),
  );
  return q
    .insertInto("events")
    .columns([
      "id",
      "occurred",
      "source",
      "operation",
      "object_id",
      "actor_id",
      "actor_username",
      "properties",
      "uri",
      "dispatched",
    ])
    .expression(
      sql`SELECT v.id, CAST(v.occurred AS bigint), v.source, v.operation, v.object_id, v.actor_id,
        v.actor_username, v.properties, v.uri, d.flag
      FROM (VALUES ${values}) AS v (id, occurred, source, operation, object_id, actor_id, actor_username, properties, uri)
      CROSS JOIN (SELECT ${NO_WEBHOOK_ACTIVE} AS flag) AS d`,
    )
    .compile();
}

/**
 * PostgreSQL: holds back the events of writes not yet committed and of writes to come until the
 * caller's transaction, which creates or activates a webhook, ends (see `NO_WEBHOOK_ACTIVE`).
 * Call it first in that transaction, holding nothing else: it waits for every transaction that
 * inserted an event to end. SQLite writes one transaction at a time, so an insert there never
 * overlaps the webhook's transaction.
 */
export async function lockOutboxForNewWebhook(q: Queryable): Promise<void> {
  if (engineOf(q) === "postgres") await sql`LOCK TABLE events IN SHARE MODE`.execute(q);
}

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
