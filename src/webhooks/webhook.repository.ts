import type { Engine, Queryable } from "../db/database.js";
import type {
  NotificationAttemptTable,
  NotificationTable,
  WebhookSettingsTable,
  WebhookTable,
} from "../db/schema.js";
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

/** Adds an active webhook; its failure count starts at its creation. */
export async function insertWebhook(
  q: Queryable,
  fields: WebhookFields,
  ownerId: string,
  now: number,
): Promise<WebhookRow> {
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

/** Activates or deactivates; activation starts a clean failure count (`wire.md` §7). False when there is none. */
export async function setWebhookActive(
  q: Queryable,
  id: string,
  active: boolean,
  modifiedId: string,
  now: number,
): Promise<boolean> {
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

/** `queueNotification` for many, in bounded statements. */
export async function queueNotifications(
  q: Queryable,
  entries: readonly NotificationFields[],
  now: number,
): Promise<void> {
  const rows = entries.map((e) => pendingNotification(e, now));
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
    await q
      .insertInto("notifications")
      .values(rows.slice(i, i + INSERT_CHUNK))
      .execute();
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
 * Leases due notifications for one attempt each, until `now + leaseMs`: at most `max`, and per
 * webhook at most what `room` says it can take. Notifications of inactive webhooks wait.
 */
export async function claimDue(
  q: Queryable,
  engine: Engine,
  claim: { now: number; leaseMs: number; max: number; room: (webhookId: string) => number },
): Promise<Claimed[]> {
  const { now } = claim;
  const webhooks = await q.selectFrom("webhooks").selectAll().execute();
  const byId = new Map(webhooks.map((w) => [w.id, w]));
  const inactive = webhooks.filter((w) => w.is_active !== 1);
  // No join, and inactive webhooks excluded with NOT IN, which no index can serve: both
  // engines then read the due index in order and stop at the limit. (An IN list of active
  // webhooks made SQLite pick the per-webhook index and sort every pending row.) Four times the
  // free slots are read, so that webhooks without room leave enough for the others.
  let query = q
    .selectFrom("notifications")
    .selectAll()
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
  // Several nodes claim side by side on PostgreSQL, each taking rows the others have not locked.
  if (engine === "postgres") query = query.forUpdate().skipLocked();
  const candidates = await query.execute();
  // Slots per webhook: a receiver with a backlog takes only its share.
  const taken = new Map<string, number>();
  const chosen: Claimed[] = [];
  for (const n of candidates) {
    if (chosen.length >= claim.max) break;
    const webhook = byId.get(n.webhook_id);
    // A webhook created after the list above was read: its notifications wait for the next claim.
    if (!webhook) continue;
    const count = taken.get(n.webhook_id) ?? 0;
    if (count >= claim.room(n.webhook_id)) continue;
    taken.set(n.webhook_id, count + 1);
    chosen.push({ notification: n, webhook });
  }
  if (chosen.length === 0) return [];
  await q
    .updateTable("notifications")
    .set({ lease_until: now + claim.leaseMs })
    .where(
      "id",
      "in",
      chosen.map((c) => c.notification.id),
    )
    .execute();
  return chosen;
}

/**
 * Records finished attempts: one attempt row each, the notification's next state
 * (`afterAttempt`), and the deactivation of webhooks that answered 410 Gone or reached their
 * policy's number of failures. Attempts of notifications deleted meanwhile (with their webhook)
 * are dropped. Returns how many attempts ended each way.
 */
export async function recordOutcomes(
  q: Queryable,
  engine: Engine,
  batch: readonly Outcome[],
  settings: WebhookSettings,
  now: number,
): Promise<Record<AttemptVerdict, number>> {
  const tally: Record<AttemptVerdict, number> = { delivered: 0, retrying: 0, failed: 0 };
  const deactivate = new Set<string>();
  const failedFor = new Set<string>();
  const ids = batch.map((o) => o.claimed.notification.id);
  const existing = new Set<string>();
  for (let i = 0; i < ids.length; i += CHUNK) {
    let query = q
      .selectFrom("notifications")
      .select("id")
      .where("id", "in", ids.slice(i, i + CHUNK));
    // Locked, so a webhook deleted by another transaction cannot take them away before the
    // attempts referring to them are inserted (the delete waits, or has already happened).
    if (engine === "postgres") query = query.forUpdate();
    const rows = await query.execute();
    for (const r of rows) existing.add(r.id);
  }
  const live = batch.filter((o) => existing.has(o.claimed.notification.id));
  const attemptRows: AttemptRow[] = live.map((o) => ({
    notification_id: o.claimed.notification.id,
    attempt: o.claimed.notification.total_attempts + 1,
    started: o.started,
    duration_ms: o.durationMs,
    status_code: o.statusCode,
    error: o.error,
    response_excerpt: o.excerpt,
  }));
  for (let i = 0; i < attemptRows.length; i += CHUNK) {
    await q
      .insertInto("notification_attempts")
      .values(attemptRows.slice(i, i + CHUNK))
      .execute();
  }
  // Outcomes that leave notifications in the same state share one UPDATE: most batches are
  // all first-attempt successes with the same answer, so a batch costs a few statements.
  const updates = new Map<string, { update: NotificationUpdate; ids: string[] }>();
  for (const o of live) {
    const n = o.claimed.notification;
    const { verdict, gone, update } = afterAttempt(n, o, settings, now);
    tally[verdict]++;
    const key = JSON.stringify(update);
    const group = updates.get(key) ?? { update, ids: [] };
    group.ids.push(n.id);
    updates.set(key, group);
    if (gone) deactivate.add(n.webhook_id);
    else if (update.status === "failed") failedFor.add(n.webhook_id);
  }
  for (const { update, ids: groupIds } of updates.values()) {
    for (let i = 0; i < groupIds.length; i += CHUNK) {
      await q
        .updateTable("notifications")
        .set(update)
        .where("id", "in", groupIds.slice(i, i + CHUNK))
        .execute();
    }
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
