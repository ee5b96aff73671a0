import { sql } from "kysely";
import { type Engine, later, type Queryable } from "../db/database.js";
import { prepared } from "../db/pg-driver.js";
import type {
  NotificationAttemptTable,
  NotificationTable,
  WebhookSettingsTable,
  WebhookTable,
} from "../db/schema.js";
import {
  type EventRow,
  lockOutboxForNewWebhook,
  markDispatched,
  takeUndispatched,
} from "../events/outbox.js";
import { newId } from "../ids.js";
import type { Page } from "../validation/paging.js";
import {
  type AttemptResult,
  type AttemptVerdict,
  afterAttempt,
  DEFAULT_SETTINGS,
  deactivationPolicyOf,
  failureCountStart,
  type NotificationUpdate,
  type WebhookConfig,
  type WebhookSettings,
} from "./delivery-rules.js";

/**
 * Every query on webhooks, their notifications and attempts, and the delivery settings. The
 * notification life cycle is here as named transitions: `queueNotification` (pending, due now),
 * `claimDue` (a lease for one attempt), `recordOutcomes` (delivered, retry later, or failed, and
 * the deactivation that may follow), `releaseLeases` (handed back unattempted) and
 * `requeueNotifications` (a fresh series of attempts).
 */

export type WebhookRow = WebhookTable;
export type NotificationRow = NotificationTable;
export type AttemptRow = NotificationAttemptTable;

/** A notification claimed for one attempt, with its webhook as it was when claimed. */
export interface Claimed {
  notification: NotificationRow;
  webhook: WebhookRow;
}

/** One finished attempt, to record. */
export interface Outcome extends AttemptResult {
  claimed: Claimed;
  started: number;
  durationMs: number;
}

/** What a webhook definition is made of; the repository derives the rest. */
export interface WebhookFields {
  name: string;
  payloadUrl: string;
  secret: string;
  changes: string;
  /** Trigger URIs, already checked. */
  events: readonly string[];
  config: WebhookConfig;
}

/** Rows per statement in batched writes: well under PostgreSQL's 65,535 parameters. */
const CHUNK = 500;
/** Notifications per insert: 13 columns each, still well under the parameter limit. */
const INSERT_CHUNK = 1000;

export function findWebhook(q: Queryable, id: string): Promise<WebhookRow | undefined> {
  return q.selectFrom("webhooks").selectAll().where("id", "=", id).executeTakeFirst();
}

/** One page of webhooks, oldest first, and how many there are. */
export async function webhookPage(q: Queryable, page: Page): Promise<{ total: number; rows: WebhookRow[] }> {
  const [count, rows] = await Promise.all([
    q
      .selectFrom("webhooks")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .executeTakeFirstOrThrow(),
    q
      .selectFrom("webhooks")
      .selectAll()
      .orderBy("created")
      .orderBy("id")
      .limit(page.num)
      .offset(page.start - 1)
      .execute(),
  ]);
  return { total: Number(count.n), rows };
}

/** Webhooks that receive new events. */
export function activeWebhooks(q: Queryable): Promise<WebhookRow[]> {
  return q.selectFrom("webhooks").selectAll().where("is_active", "=", 1).execute();
}

/** Events taken for dispatch, with the webhooks active when they were taken. */
export interface DispatchBatch {
  events: EventRow[];
  webhooks: WebhookRow[];
  /**
   * PostgreSQL: the rows `notifications` had when its statistics were last gathered (its
   * `reltuples`; -1 never), read with the events. Undefined on SQLite.
   */
  notificationsKnown?: number;
}

/**
 * Takes the oldest events not yet dispatched, at most `limit`, marking them dispatched, and reads
 * the active webhooks (only when there are events). Call it in the transaction that queues their
 * notifications, so that an event is dispatched whole or not at all.
 *
 * On PostgreSQL this is one statement: the events are locked `SKIP LOCKED` (several nodes dispatch
 * side by side, each taking events the others have not locked) and marked, and the webhooks read
 * in the same snapshot, so every webhook whose creation committed before an event did is among
 * them. On SQLite (one writer) a read, the webhooks and the mark.
 */
export async function takeForDispatch(q: Queryable, engine: Engine, limit: number): Promise<DispatchBatch> {
  if (engine === "postgres") {
    const { rows } = await sql<{
      events: EventRow[] | null;
      webhooks: WebhookRow[] | null;
      notifications_known: number | null;
    }>`
      WITH picked AS MATERIALIZED (
        SELECT seq FROM events WHERE dispatched = 0 ORDER BY seq LIMIT ${limit} FOR UPDATE SKIP LOCKED
      ), taken AS (
        UPDATE events AS e SET dispatched = 1 FROM picked WHERE e.seq = picked.seq RETURNING e.*
      )
      SELECT (SELECT json_agg(t ORDER BY t.seq) FROM taken AS t) AS events,
        CASE WHEN EXISTS (SELECT 1 FROM taken)
          THEN (SELECT json_agg(w) FROM webhooks AS w WHERE w.is_active = 1) END AS webhooks,
        (SELECT reltuples FROM pg_catalog.pg_class WHERE oid = 'notifications'::regclass)
          AS notifications_known`.execute(q);
    const row = rows[0];
    return {
      events: row?.events ?? [],
      webhooks: row?.webhooks ?? [],
      notificationsKnown: Number(row?.notifications_known ?? -1),
    };
  }
  const events = await takeUndispatched(q, engine, limit);
  if (events.length === 0) return { events, webhooks: [] };
  const webhooks = await activeWebhooks(q);
  await markDispatched(q, events);
  return { events, webhooks };
}

/**
 * PostgreSQL only: `takeForDispatch` for when no webhook is active, as one statement that is its
 * own transaction (one round trip, committed without waiting for the disk: a mark that a crash of
 * the database loses only has the events dispatched again). It marks up to `limit` events
 * dispatched only if no webhook is active in its snapshot, in which every event it takes
 * committed, so it does what a dispatch would; otherwise it takes nothing and says how many are
 * active. Returns how many events it took.
 */
export async function dispatchUnwanted(
  q: Queryable,
  limit: number,
): Promise<{ activeWebhooks: number; taken: number }> {
  // Run after every few commits under writes: kept parsed and planned per connection (its
  // planning cost about three times its execution when nothing is pending).
  const query = sql<{ active_webhooks: number; taken: number }>`
    WITH active AS MATERIALIZED (
      SELECT count(*) AS n FROM webhooks WHERE is_active = 1
    ), picked AS MATERIALIZED (
      SELECT seq FROM events WHERE dispatched = 0 AND (SELECT n FROM active) = 0
      ORDER BY seq LIMIT ${limit} FOR UPDATE SKIP LOCKED
    ), taken AS (
      UPDATE events AS e SET dispatched = 1 FROM picked WHERE e.seq = picked.seq RETURNING e.seq
    )
    SELECT (SELECT n FROM active) AS active_webhooks, (SELECT count(*) FROM taken) AS taken,
      set_config('synchronous_commit', 'off', true) AS lazy_commit`;
  const { rows } = await q.executeQuery<{ active_webhooks: number; taken: number }>(
    prepared(query.compile(q)),
  );
  const row = rows[0];
  return { activeWebhooks: Number(row?.active_webhooks ?? 0), taken: Number(row?.taken ?? 0) };
}

/**
 * Adds an active webhook; its failure count starts at its creation. Call it first in its
 * transaction: every event whose transaction commits after it is the webhook's, including those of
 * writes under way meanwhile (`lockOutboxForNewWebhook`).
 */
export async function insertWebhook(
  q: Queryable,
  fields: WebhookFields,
  ownerId: string,
  now: number,
): Promise<WebhookRow> {
  await lockOutboxForNewWebhook(q);
  const row: WebhookRow = {
    id: newId(),
    name: fields.name,
    payload_url: fields.payloadUrl,
    secret: fields.secret,
    is_active: 1,
    changes: fields.changes,
    events: JSON.stringify(fields.events),
    config: JSON.stringify(fields.config),
    owner_id: ownerId,
    modified_id: ownerId,
    count_since: now,
    created: now,
    modified: now,
  };
  await q.insertInto("webhooks").values(row).execute();
  return row;
}

/** Changes a webhook's definition; `events` and `config` only when given. False when there is none. */
export async function updateWebhook(
  q: Queryable,
  id: string,
  fields: Omit<WebhookFields, "events" | "config"> & Partial<Pick<WebhookFields, "events" | "config">>,
  modifiedId: string,
  now: number,
): Promise<boolean> {
  const r = await q
    .updateTable("webhooks")
    .set({
      name: fields.name,
      payload_url: fields.payloadUrl,
      secret: fields.secret,
      changes: fields.changes,
      ...(fields.events ? { events: JSON.stringify(fields.events) } : {}),
      ...(fields.config !== undefined ? { config: JSON.stringify(fields.config) } : {}),
      modified_id: modifiedId,
      modified: now,
    })
    .where("id", "=", id)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) > 0;
}

/** Deletes a webhook with its notifications and attempts (foreign keys cascade). False when there is none. */
export async function deleteWebhook(q: Queryable, id: string): Promise<boolean> {
  const r = await q.deleteFrom("webhooks").where("id", "=", id).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/**
 * Activates or deactivates; activation starts a clean failure count (`wire.md` §7). False when
 * there is none. Call it first in its transaction: an activation, like a creation, holds back the
 * events of writes under way (`lockOutboxForNewWebhook`).
 */
export async function setWebhookActive(
  q: Queryable,
  id: string,
  active: boolean,
  modifiedId: string,
  now: number,
): Promise<boolean> {
  if (active) await lockOutboxForNewWebhook(q);
  const r = await q
    .updateTable("webhooks")
    .set({
      is_active: active ? 1 : 0,
      ...(active ? { count_since: now } : {}),
      modified_id: modifiedId,
      modified: now,
    })
    .where("id", "=", id)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) > 0;
}

/** One page of a webhook's notifications, newest first, and how many it has. */
export async function notificationPage(
  q: Queryable,
  webhookId: string,
  page: Page,
): Promise<{ total: number; rows: NotificationRow[] }> {
  const [count, rows] = await Promise.all([
    q
      .selectFrom("notifications")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("webhook_id", "=", webhookId)
      .executeTakeFirstOrThrow(),
    q
      .selectFrom("notifications")
      .selectAll()
      .where("webhook_id", "=", webhookId)
      .orderBy("created", "desc")
      .orderBy("id", "desc")
      .limit(page.num)
      .offset(page.start - 1)
      .execute(),
  ]);
  return { total: Number(count.n), rows };
}

/** Every attempt of the notifications, in attempt order. */
export async function attemptsOf(q: Queryable, notificationIds: readonly string[]): Promise<AttemptRow[]> {
  if (notificationIds.length === 0) return [];
  return q
    .selectFrom("notification_attempts")
    .selectAll()
    .where("notification_id", "in", notificationIds)
    .orderBy("attempt")
    .execute();
}

export function findNotification(
  q: Queryable,
  webhookId: string,
  notificationId: string,
): Promise<Pick<NotificationRow, "status"> | undefined> {
  return q
    .selectFrom("notifications")
    .select("status")
    .where("id", "=", notificationId)
    .where("webhook_id", "=", webhookId)
    .executeTakeFirst();
}

/** What a notification is made of; the repository derives the rest. */
export interface NotificationFields {
  webhookId: string;
  /** The outbox event delivered; empty for a ping. */
  eventId: string;
  payload: unknown;
}

/** Adds a pending notification, due now, with its own id (its `webhook-id` on every attempt). */
export async function queueNotification(
  q: Queryable,
  fields: NotificationFields,
  now: number,
): Promise<NotificationRow> {
  const row = pendingNotification(fields, now);
  await q.insertInto("notifications").values(row).execute();
  return row;
}

/**
 * `queueNotification` for many, in bounded statements. Nothing reads their answer: on PostgreSQL
 * they travel with the transaction's COMMIT (`later`), where a failure fails it.
 */
export async function queueNotifications(
  q: Queryable,
  entries: readonly NotificationFields[],
  now: number,
): Promise<void> {
  const rows = entries.map((e) => pendingNotification(e, now));
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    await later(
      q,
      q
        .insertInto("notifications")
        .values(rows.slice(i, i + INSERT_CHUNK))
        .compile(),
    );
  }
}

function pendingNotification(fields: NotificationFields, now: number): NotificationRow {
  return {
    id: newId(),
    webhook_id: fields.webhookId,
    event_id: fields.eventId,
    payload: JSON.stringify(fields.payload),
    status: "pending",
    attempts: 0,
    total_attempts: 0,
    next_attempt: now,
    lease_until: 0,
    created: now,
    completed: null,
    last_status: null,
    last_response: "",
  };
}

/**
 * Queues again one notification that is not pending, or every failed one completed at or after
 * `since` (epoch ms). Each starts a fresh series of attempts with its original payload and id.
 * Returns how many were queued.
 */
export async function requeueNotifications(
  q: Queryable,
  webhookId: string,
  which: { notificationId?: string; since?: number },
  now: number,
): Promise<number> {
  let query = q
    .updateTable("notifications")
    .set({ status: "pending", attempts: 0, next_attempt: now, lease_until: 0, completed: null })
    .where("webhook_id", "=", webhookId);
  if (which.notificationId !== undefined) {
    query = query.where("id", "=", which.notificationId).where("status", "!=", "pending");
  } else {
    query = query.where("status", "=", "failed").where("completed", ">=", which.since ?? 0);
  }
  const r = await query.executeTakeFirst();
  return Number(r.numUpdatedRows);
}

/**
 * What a claim may take: `max` in all, and per webhook its `depth` (`perWebhook` for webhooks it
 * does not list) less what it has `inFlight` (in flight or held).
 */
export interface ClaimLimits {
  now: number;
  leaseMs: number;
  max: number;
  perWebhook: number;
  depth: ReadonlyMap<string, number>;
  inFlight: ReadonlyMap<string, number>;
}

/**
 * Leases due notifications for one attempt each, until `now + leaseMs`, within `ClaimLimits`.
 * Notifications of inactive webhooks wait. Due notifications are taken oldest first, four times
 * the free slots read, so that webhooks without room leave enough for the others.
 *
 * On PostgreSQL this is one statement, run on `q` as it is (a transaction or not); on SQLite call
 * it in a transaction.
 */
export async function claimDue(q: Queryable, engine: Engine, claim: ClaimLimits): Promise<Claimed[]> {
  if (engine === "postgres") return claimDuePostgres(q, claim);
  const { now } = claim;
  const room = (webhookId: string) =>
    (claim.depth.get(webhookId) ?? claim.perWebhook) - (claim.inFlight.get(webhookId) ?? 0);
  const webhooks = await q.selectFrom("webhooks").selectAll().execute();
  const byId = new Map(webhooks.map((w) => [w.id, w]));
  const inactive = webhooks.filter((w) => w.is_active !== 1);
  // No join, and inactive webhooks excluded with NOT IN, which no index can serve: SQLite then
  // reads the due index in order and stops at the limit. (An IN list of active webhooks made it
  // pick the per-webhook index and sort every pending row.) Candidates are read without their
  // payload; only the chosen ones are read whole.
  let query = q
    .selectFrom("notifications")
    .select(["id", "webhook_id"])
    .where("status", "=", "pending")
    .where("next_attempt", "<=", now)
    .where("lease_until", "<=", now)
    .orderBy("next_attempt")
    .orderBy("id")
    .limit(claim.max * 4);
  if (inactive.length > 0) {
    query = query.where(
      "webhook_id",
      "not in",
      inactive.map((w) => w.id),
    );
  }
  const candidates = await query.execute();
  // Slots per webhook: a receiver with a backlog takes only its share.
  const taken = new Map<string, number>();
  const chosen: string[] = [];
  for (const n of candidates) {
    if (chosen.length >= claim.max) break;
    // A webhook created after the list above was read: its notifications wait for the next claim.
    if (!byId.has(n.webhook_id)) continue;
    const count = taken.get(n.webhook_id) ?? 0;
    if (count >= room(n.webhook_id)) continue;
    taken.set(n.webhook_id, count + 1);
    chosen.push(n.id);
  }
  if (chosen.length === 0) return [];
  const rows = await q.selectFrom("notifications").selectAll().where("id", "in", chosen).execute();
  await q
    .updateTable("notifications")
    .set({ lease_until: now + claim.leaseMs })
    .where("id", "in", chosen)
    .execute();
  const byNotification = new Map(rows.map((r) => [r.id, r]));
  return chosen.flatMap((id) => {
    const notification = byNotification.get(id);
    const webhook = notification && byId.get(notification.webhook_id);
    return notification && webhook ? [{ notification, webhook }] : [];
  });
}

/**
 * PostgreSQL: gathers the planner's statistics of `notifications` and `notification_attempts` now,
 * as autovacuum's ANALYZE would, and so makes every connection plan its statements on them afresh.
 * See `WebhookDelivery` for why the dispatcher does not wait for autovacuum.
 *
 * One message without values, so one implicit transaction: its `lock_timeout` holds for the
 * ANALYZE alone. ANALYZE waits for a VACUUM of the same table (an anti-wraparound one can take
 * hours); rather than hold a pooled connection that long (and trip the query-timeout watch, which
 * would take the database for gone), it gives up after `ANALYZE_LOCK_WAIT_MS` (55P03) and the next
 * threshold tries again.
 */
export async function analyzeNotifications(q: Queryable): Promise<void> {
  await sql
    .raw(`SET LOCAL lock_timeout = ${ANALYZE_LOCK_WAIT_MS}; ANALYZE notifications, notification_attempts`)
    .execute(q);
}

/** How long `analyzeNotifications` waits for a lock before it gives up. */
export const ANALYZE_LOCK_WAIT_MS = 2000;

/**
 * Lets the transaction commit without waiting for its WAL to reach the disk (PostgreSQL's
 * `synchronous_commit = off`, for this transaction only), for transactions whose loss to a crash
 * of the database costs nothing but doing them again: a dispatch that queued no notification
 * (its events are dispatched again, to the webhooks that then want them). Travels with the
 * transaction's next statement or its COMMIT.
 */
export async function noDurableCommit(q: Queryable, engine: Engine): Promise<void> {
  if (engine === "postgres") await later(q, sql`SET LOCAL synchronous_commit = off`.compile(q));
}

/**
 * `claimDue` in one statement, which may run on its own (it is its own transaction): the due
 * notifications are read (four times `max`, without locking them), ranked per webhook to keep
 * within each one's room, and only the chosen ones locked `SKIP LOCKED` (several nodes claim side
 * by side; a row another node locked or leased since the read is left out, its lease checked
 * again on the row as it is now), then leased, and returned with their webhook as it is now.
 *
 * The due notifications are read by walking `notifications_due` in order and stopping at the
 * limit, which the planner chooses only if it expects most due rows to pass the filter on
 * inactive webhooks. Written as `NOT EXISTS` (an anti-join), the estimate came from the statistics
 * of `webhooks`, and with one or a few webhooks it expected almost none to pass: every claim read
 * and sorted every due notification instead (auto_explain on the load cases' portal, PostgreSQL
 * 15: `Seq Scan` under a `Hash Anti Join`, then `Sort`, in 771 of the 915 claims over 2 ms, 7.6 ms
 * each). `NOT IN` a subquery is a hashed subplan, read once per claim, which the planner takes
 * for one row in two whatever the statistics, as the SQLite path's `NOT IN` a list is read.
 * (`webhooks.id` is a primary key, never null, so `NOT IN` means `NOT EXISTS` here.) With no
 * statistics of `notifications` at all the planner still reads every due row (a `Bitmap Heap
 * Scan`, then `Sort`): in a store analyzed before, until the dispatcher's `ANALYZE` after the
 * first thousand of a burst; in one never analyzed, until autovacuum's (`WebhookDelivery`).
 *
 * Its commit does not wait for the disk (`synchronous_commit = off` for this transaction only): a
 * lease that a database crash loses only lets the notification be sent again (with the same
 * `webhook-id`), which at-least-once delivery allows anyway; what was delivered is recorded
 * durably. Saves a disk flush per claim.
 */
async function claimDuePostgres(q: Queryable, claim: ClaimLimits): Promise<Claimed[]> {
  const { now } = claim;
  const busy = JSON.stringify(Object.fromEntries(claim.inFlight));
  const depth = JSON.stringify(Object.fromEntries(claim.depth));
  const { rows } = await sql<NotificationRow & { webhook: WebhookRow }>`
    WITH candidates AS (
      SELECT n.id, n.webhook_id, n.next_attempt FROM notifications n
      WHERE n.status = 'pending' AND n.next_attempt <= ${now} AND n.lease_until <= ${now}
        AND n.webhook_id NOT IN (SELECT w.id FROM webhooks w WHERE w.is_active <> 1)
      ORDER BY n.next_attempt, n.id
      LIMIT ${claim.max * 4}
    ), ranked AS (
      SELECT id, webhook_id, next_attempt,
        row_number() OVER (PARTITION BY webhook_id ORDER BY next_attempt, id) AS nth
      FROM candidates
    ), roomy AS (
      SELECT id, row_number() OVER (ORDER BY next_attempt, id) AS nth
      FROM ranked
      WHERE nth <= COALESCE((${depth}::jsonb ->> webhook_id)::int, ${claim.perWebhook})
        - COALESCE((${busy}::jsonb ->> webhook_id)::int, 0)
    ), chosen AS MATERIALIZED (
      SELECT n.id FROM roomy JOIN notifications AS n ON n.id = roomy.id
      WHERE roomy.nth <= ${claim.max} AND n.status = 'pending' AND n.lease_until <= ${now}
      FOR UPDATE OF n SKIP LOCKED
    ), lazy_commit AS MATERIALIZED (
      SELECT set_config('synchronous_commit', 'off', true) AS setting
    )
    UPDATE notifications AS n SET lease_until = ${now + claim.leaseMs}
    FROM chosen, webhooks AS w, lazy_commit
    WHERE n.id = chosen.id AND w.id = n.webhook_id
    RETURNING n.*, to_jsonb(w) AS webhook`.execute(q);
  return rows
    .sort((a, b) => a.next_attempt - b.next_attempt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .map(({ webhook, ...notification }) => ({ notification, webhook }));
}

/**
 * Records finished attempts: one attempt row each, the notification's next state
 * (`afterAttempt`), and the deactivation of webhooks that answered 410 Gone or reached their
 * policy's number of failures. Attempts of notifications deleted meanwhile (with their webhook)
 * are dropped. Returns how many attempts ended each way.
 */
export async function recordOutcomes(
  q: Queryable,
  batch: readonly Outcome[],
  settings: WebhookSettings,
  now: number,
): Promise<Record<AttemptVerdict, number>> {
  const tally: Record<AttemptVerdict, number> = { delivered: 0, retrying: 0, failed: 0 };
  const deactivate = new Set<string>();
  const failedFor = new Set<string>();
  // Outcomes that leave notifications in the same state share one UPDATE: most batches are
  // all first-attempt successes with the same answer, so a batch costs a few statements.
  const judged = batch.map((o) => ({
    outcome: o,
    ...afterAttempt(o.claimed.notification, o, settings, now),
  }));
  const updates = new Map<string, { update: NotificationUpdate; ids: string[] }>();
  for (const { outcome, update } of judged) {
    const key = JSON.stringify(update);
    const group = updates.get(key) ?? { update, ids: [] };
    group.ids.push(outcome.claimed.notification.id);
    updates.set(key, group);
  }
  // The updates say which notifications still exist (those of a webhook deleted meanwhile are
  // gone) and lock them, so that a webhook deleted by another transaction cannot take them away
  // before the attempts referring to them are inserted (the delete waits, or has already
  // happened and the update found nothing). No read locks them first: locking a row writes it.
  const existing = new Set<string>();
  for (const { update, ids: groupIds } of updates.values()) {
    for (let i = 0; i < groupIds.length; i += CHUNK) {
      const rows = await q
        .updateTable("notifications")
        .set(update)
        .where("id", "in", groupIds.slice(i, i + CHUNK))
        .returning("id")
        .execute();
      for (const r of rows) existing.add(r.id);
    }
  }
  const live = judged.filter((j) => existing.has(j.outcome.claimed.notification.id));
  for (const { outcome, verdict, gone, update } of live) {
    tally[verdict]++;
    const webhookId = outcome.claimed.notification.webhook_id;
    if (gone) deactivate.add(webhookId);
    else if (update.status === "failed") failedFor.add(webhookId);
  }
  const attemptRows: AttemptRow[] = live.map(({ outcome: o }) => ({
    notification_id: o.claimed.notification.id,
    attempt: o.claimed.notification.total_attempts + 1,
    started: o.started,
    duration_ms: o.durationMs,
    status_code: o.statusCode,
    error: o.error,
    response_excerpt: o.excerpt,
  }));
  // Writes whose answer nobody reads: on PostgreSQL they travel with the COMMIT (`later`), so a
  // batch of one kind of outcome costs two round trips, the update and the commit.
  for (let i = 0; i < attemptRows.length; i += CHUNK) {
    await later(
      q,
      q
        .insertInto("notification_attempts")
        .values(attemptRows.slice(i, i + CHUNK))
        .compile(),
    );
  }
  // The deactivation policy: numberOfFailures failed notifications within daysInPast days,
  // counted from the last activation at the earliest.
  for (const webhookId of failedFor) {
    if (deactivate.has(webhookId)) continue;
    // The webhook as the batch's first attempt for it was claimed (`failedFor` holds only those).
    const webhook = batch.find((o) => o.claimed.webhook.id === webhookId)?.claimed.webhook;
    if (!webhook) continue;
    const policy = deactivationPolicyOf(webhook.config);
    const current = await q
      .selectFrom("webhooks")
      .select("count_since")
      .where("id", "=", webhookId)
      .executeTakeFirst();
    if (!current) continue;
    const failed = await q
      .selectFrom("notifications")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("webhook_id", "=", webhookId)
      .where("status", "=", "failed")
      .where("completed", ">=", failureCountStart(current.count_since, policy, now))
      .executeTakeFirstOrThrow();
    if (Number(failed.n) >= policy.numberOfFailures) deactivate.add(webhookId);
  }
  if (deactivate.size > 0) {
    await q
      .updateTable("webhooks")
      .set({ is_active: 0, modified: now })
      .where("id", "in", [...deactivate])
      .execute();
  }
  return tally;
}

/**
 * Releases the leases of pending notifications whose attempt was cut off, without counting an
 * attempt, so any node sends them at once rather than when the lease runs out.
 */
export async function releaseLeases(q: Queryable, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += CHUNK) {
    await q
      .updateTable("notifications")
      .set({ lease_until: 0 })
      .where("id", "in", ids.slice(i, i + CHUNK))
      .where("status", "=", "pending")
      .execute();
  }
}

/** Releases every lease: for a start-up that knows no other process can hold one. */
export async function releaseAllLeases(q: Queryable): Promise<void> {
  await q.updateTable("notifications").set({ lease_until: 0 }).where("lease_until", ">", 0).execute();
}

/** The organization's delivery settings; ArcGIS's defaults until they are first saved. */
export async function readSettings(q: Queryable): Promise<WebhookSettings> {
  const row = await q.selectFrom("webhook_settings").selectAll().executeTakeFirst();
  if (!row) return { ...DEFAULT_SETTINGS };
  return {
    notificationAttempts: row.notification_attempts,
    notificationTimeOutInSeconds: row.timeout_seconds,
    notificationElapsedTimeInSeconds: row.elapsed_seconds,
  };
}

export async function saveSettings(q: Queryable, settings: WebhookSettings, now: number): Promise<void> {
  const row: WebhookSettingsTable = {
    singleton: 1,
    notification_attempts: settings.notificationAttempts,
    timeout_seconds: settings.notificationTimeOutInSeconds,
    elapsed_seconds: settings.notificationElapsedTimeInSeconds,
    modified: now,
  };
  await q
    .insertInto("webhook_settings")
    .values(row)
    .onConflict((oc) => oc.column("singleton").doUpdateSet(row))
    .execute();
}
