import type { Db } from "../db/database.js";
import type { NotificationTable } from "../db/schema.js";
import type { DeliveryOutcome } from "../observability/metrics.js";
import { type OutboundGuard, OutboundRefused } from "../outbound/guard.js";
import { deliveryHeaders } from "./signature.js";
import { parseTrigger, type Trigger, triggerCovers } from "./triggers.js";
import {
  DEFAULT_DEACTIVATION_POLICY,
  type DeliveryControl,
  newNotification,
  type WebhookConfig,
  type WebhookRow,
  type WebhookSettings,
} from "./webhook.service.js";

/**
 * Delivers webhook notifications, at least once (`wire.md` §7).
 *
 * 1. Dispatch: outbox events not yet dispatched are matched against every active webhook's
 *    triggers; the matching notifications are inserted and the events marked dispatched in one
 *    transaction, so a crash either dispatches an event whole or not at all.
 * 2. Send: due notifications are claimed with a lease, POSTed through the address guard, and their
 *    outcome recorded. A crash after sending and before recording resends (a duplicate the
 *    receiver recognizes by `webhook-id`); a crash never loses one: the lease runs out and the
 *    notification is claimed again.
 *
 * The engine wakes on every committed event (the `events` change; NOTIFY across nodes on
 * PostgreSQL) and polls as a backstop. Each webhook has at most `perWebhook` attempts in flight,
 * so a slow or dead receiver holds only its own slots and never delays the others.
 */

export interface DeliveryOptions {
  db: Db;
  guard: OutboundGuard;
  /** The webhook service: it hands URL checks and wake-ups to the engine, and owns the settings. */
  webhooks: { attach(control: DeliveryControl): void; deliverySettings(): Promise<WebhookSettings> };
  portalUrl: () => string;
  onError: (err: unknown, what: string) => void;
  /** Told how recorded attempts ended, after their outcome committed (for metrics). */
  onOutcome?: (outcome: DeliveryOutcome, count: number) => void;
  /** Attempts in flight across all webhooks. */
  maxInFlight?: number;
  /** Attempts in flight to one webhook. */
  perWebhook?: number;
  /** Backstop for wake-ups missed (another node's events while the feed was down). */
  pollMs?: number;
}

/** How much of a receiver's answer is kept per attempt. */
const RESPONSE_EXCERPT_BYTES = 4096;
/** Events turned into notifications per dispatch transaction. */
const DISPATCH_BATCH = 500;
/** A receiver's Retry-After is honoured up to this long. */
const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;
/**
 * Extra lease beyond the attempt timeout, for recording the outcome; also how long after the
 * attempt's timeout a node that died mid-attempt holds up the notification on PostgreSQL.
 */
const LEASE_MARGIN_MS = 5_000;
/** A check of the payload URL at creation gets this long, whatever the settings say. */
const CHECK_TIMEOUT_MS = 10_000;
const DAY_MS = 24 * 60 * 60 * 1000;
/** Rows per statement in batched writes: well under PostgreSQL's 65,535 parameters. */
const CHUNK = 500;

interface Claimed {
  notification: NotificationTable;
  webhook: WebhookRow;
}

interface Outcome {
  claimed: Claimed;
  started: number;
  durationMs: number;
  statusCode: number | null;
  error: string;
  excerpt: string;
  retryAfterMs: number | undefined;
}

export class DeliveryEngine implements DeliveryControl {
  private readonly maxInFlight: number;
  private readonly perWebhook: number;
  private readonly inFlight = new Map<string, number>();
  private inFlightTotal = 0;
  private running = false;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly outcomes: Outcome[] = [];
  private flushing: Promise<void> | undefined;
  private readonly idle = new Set<() => void>();
  /** Cuts off attempts a shutdown could not wait for. */
  private readonly abort = new AbortController();
  /** Notifications whose attempt was cut off by the shutdown: their leases are released. */
  private readonly handedBack: string[] = [];

  constructor(private readonly options: DeliveryOptions) {
    this.maxInFlight = options.maxInFlight ?? 64;
    this.perWebhook = options.perWebhook ?? 16;
    options.webhooks.attach(this);
  }

  async start(): Promise<void> {
    const { db } = this.options;
    // One process owns an embedded database (portico.lock), so a lease still running at start-up
    // was held by a process that died: its notifications are due again now, not when it expires.
    // On PostgreSQL other nodes may be alive; there leases run out by themselves.
    if (db.engine === "sqlite") {
      await db.transaction(async (trx) => {
        await trx.updateTable("notifications").set({ lease_until: 0 }).where("lease_until", ">", 0).execute();
      });
    }
    db.feed.subscribe("events", () => this.wake());
    this.timer = setInterval(() => this.wake(), this.options.pollMs ?? 1000);
    this.timer.unref();
    this.wake();
  }

  /**
   * Stops claiming and waits up to `graceMs` for the attempts in flight, recording them. Attempts
   * still running then are cut off and handed back: their leases are released without counting
   * an attempt, so another node (or this one, restarted) sends them at once rather than when the
   * lease runs out. A receiver may have seen a cut-off attempt; it recognizes the resend by its
   * `webhook-id`, as with any retry.
   */
  async stop(graceMs = Number.POSITIVE_INFINITY): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    const deadline = Date.now() + graceMs;
    while (this.inFlightTotal > 0 || this.running || this.flushing) {
      if (Date.now() >= deadline && !this.abort.signal.aborted) this.abort.abort();
      await new Promise<void>((resolve) => {
        this.idle.add(resolve);
        setTimeout(resolve, Math.max(1, Math.min(50, deadline - Date.now()))).unref();
      });
    }
    await this.flush();
    if (this.handedBack.length > 0) {
      const ids = this.handedBack.splice(0, this.handedBack.length);
      try {
        await this.options.db.transaction(async (trx) => {
          for (let i = 0; i < ids.length; i += CHUNK) {
            await trx
              .updateTable("notifications")
              .set({ lease_until: 0 })
              .where("id", "in", ids.slice(i, i + CHUNK))
              .where("status", "=", "pending")
              .execute();
          }
        });
        this.options.onOutcome?.("handed_back", ids.length);
      } catch (err) {
        // Their leases then run out by themselves, and another node takes them over.
        this.options.onError(err, "handing back webhook attempts failed");
      }
    }
  }

  portalUrl(): string {
    return this.options.portalUrl();
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.pass());
  }

  async checkUrl(url: string, secret: string, webhookName: string): Promise<string | undefined> {
    const now = Date.now();
    // An empty notification: receivers see the signed headers and no events.
    const body = JSON.stringify({
      info: { webhookId: "", webhookName, portalURL: this.portalUrl(), when: now },
      events: [],
    });
    try {
      const res = await this.options.guard.post(url, {
        headers: {
          "content-type": "application/json",
          "user-agent": "portico-webhooks",
          ...deliveryHeaders(`check_${now}`, body, secret, new Date(now)),
        },
        body,
        connectTimeoutMs: CHECK_TIMEOUT_MS,
        totalTimeoutMs: CHECK_TIMEOUT_MS,
        maxResponseBytes: RESPONSE_EXCERPT_BYTES,
      });
      if (res.status >= 200 && res.status < 300) return undefined;
      return `${url} answered HTTP ${res.status}`;
    } catch (err) {
      return describeFailure(err);
    }
  }

  private async pass(): Promise<void> {
    try {
      do {
        this.again = false;
        while ((await this.dispatch()) === DISPATCH_BATCH && !this.stopped) {}
        if (!this.stopped) await this.claimAndSend();
      } while (this.again && !this.stopped);
    } catch (err) {
      this.options.onError(err, "webhook delivery pass failed");
    } finally {
      this.running = false;
      this.notifyIdle();
    }
  }

  /** Turns a batch of outbox events into notifications; returns how many events it took. */
  private async dispatch(): Promise<number> {
    const { db } = this.options;
    const portalURL = this.portalUrl();
    const result = await db.transaction(async (trx) => {
      let query = trx
        .selectFrom("events")
        .selectAll()
        .where("dispatched", "=", 0)
        .orderBy("seq")
        .limit(DISPATCH_BATCH);
      // Several nodes dispatch side by side on PostgreSQL, each taking events the others have not locked.
      if (db.engine === "postgres") query = query.forUpdate().skipLocked();
      const events = await query.execute();
      if (events.length === 0) return { taken: 0, created: 0 };
      const webhooks = await trx.selectFrom("webhooks").selectAll().where("is_active", "=", 1).execute();
      const subscriptions = webhooks.map((w) => ({ webhook: w, triggers: triggersOf(w) }));
      const now = Date.now();
      const notifications: NotificationTable[] = [];
      for (const event of events) {
        const fields = { source: event.source, operation: event.operation, objectId: event.object_id };
        for (const { webhook, triggers } of subscriptions) {
          if (!triggers.some((t) => triggerCovers(t, fields))) continue;
          notifications.push(
            newNotification(webhook, event.id, now, {
              info: { webhookId: webhook.id, webhookName: webhook.name, portalURL, when: now },
              events: [
                {
                  userId: event.actor_id,
                  username: event.actor_username,
                  when: event.occurred,
                  operation: event.operation,
                  source: event.source,
                  id: event.object_id,
                  properties: JSON.parse(event.properties) as unknown,
                },
              ],
            }),
          );
        }
      }
      // Bounded batches: PostgreSQL takes at most 65,535 parameters per statement.
      for (let i = 0; i < notifications.length; i += 1000) {
        await trx
          .insertInto("notifications")
          .values(notifications.slice(i, i + 1000))
          .execute();
      }
      await trx
        .updateTable("events")
        .set({ dispatched: 1 })
        .where(
          "seq",
          "in",
          events.map((e) => e.seq),
        )
        .execute();
      return { taken: events.length, created: notifications.length };
    });
    return result.taken;
  }

  /** Claims what is due, up to the free slots, and starts sending it. */
  private async claimAndSend(): Promise<void> {
    const free = this.maxInFlight - this.inFlightTotal;
    if (free <= 0) return;
    const { db } = this.options;
    const settings = await this.options.webhooks.deliverySettings();
    const now = Date.now();
    const leaseMs = timeoutMs(settings) + LEASE_MARGIN_MS;
    const claimed = await db.transaction(async (trx) => {
      const webhooks = await trx.selectFrom("webhooks").selectAll().execute();
      const byId = new Map(webhooks.map((w) => [w.id, w]));
      const inactive = webhooks.filter((w) => w.is_active !== 1);
      // No join, and inactive webhooks excluded with NOT IN, which no index can serve: both
      // engines then read the due index in order and stop at the limit. (An IN list of active
      // webhooks made SQLite pick the per-webhook index and sort every pending row.)
      let query = trx
        .selectFrom("notifications")
        .selectAll()
        .where("status", "=", "pending")
        .where("next_attempt", "<=", now)
        .where("lease_until", "<=", now)
        .orderBy("next_attempt")
        .orderBy("id")
        .limit(free * 4);
      if (inactive.length > 0) {
        query = query.where(
          "webhook_id",
          "not in",
          inactive.map((w) => w.id),
        );
      }
      if (db.engine === "postgres") query = query.forUpdate().skipLocked();
      const candidates = await query.execute();
      // Slots per webhook: a receiver with a backlog takes only its share.
      const taken = new Map<string, number>();
      const chosen: NotificationTable[] = [];
      for (const n of candidates) {
        if (chosen.length >= free) break;
        // A webhook created after the list above was read: its notifications wait for the next claim.
        if (!byId.has(n.webhook_id)) continue;
        const busy = (this.inFlight.get(n.webhook_id) ?? 0) + (taken.get(n.webhook_id) ?? 0);
        if (busy >= this.perWebhook) continue;
        taken.set(n.webhook_id, (taken.get(n.webhook_id) ?? 0) + 1);
        chosen.push(n);
      }
      if (chosen.length === 0) return [];
      await trx
        .updateTable("notifications")
        .set({ lease_until: now + leaseMs })
        .where(
          "id",
          "in",
          chosen.map((n) => n.id),
        )
        .execute();
      return chosen.map((n) => ({ notification: n, webhook: byId.get(n.webhook_id) as WebhookRow }));
    });
    for (const c of claimed) {
      this.inFlight.set(c.webhook.id, (this.inFlight.get(c.webhook.id) ?? 0) + 1);
      this.inFlightTotal++;
      void this.attempt(c, settings);
    }
    // More may be due than there were slots; each finished attempt wakes the engine again.
  }

  private async attempt(claimed: Claimed, settings: WebhookSettings): Promise<void> {
    const { notification, webhook } = claimed;
    const started = Date.now();
    const config = JSON.parse(webhook.config) as WebhookConfig;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "user-agent": "portico-webhooks",
      ...deliveryHeaders(notification.id, notification.payload, webhook.secret, new Date(started)),
    };
    if (config.sendSecretHeader && webhook.secret !== "") headers["x-esriHook-Secret"] = webhook.secret;
    let outcome: Outcome;
    try {
      const limit = timeoutMs(settings);
      const res = await this.options.guard.post(webhook.payload_url, {
        headers,
        body: notification.payload,
        connectTimeoutMs: limit,
        totalTimeoutMs: limit,
        maxResponseBytes: RESPONSE_EXCERPT_BYTES,
        signal: this.abort.signal,
      });
      outcome = {
        claimed,
        started,
        durationMs: Date.now() - started,
        statusCode: res.status,
        error: "",
        excerpt: res.excerpt,
        retryAfterMs: retryAfter(res.headers["retry-after"], Date.now()),
      };
    } catch (err) {
      if (this.abort.signal.aborted) {
        this.handedBack.push(notification.id);
        this.finished(webhook.id);
        return;
      }
      outcome = {
        claimed,
        started,
        durationMs: Date.now() - started,
        statusCode: null,
        error: describeFailure(err),
        excerpt: "",
        retryAfterMs: undefined,
      };
    }
    this.outcomes.push(outcome);
    await this.flush();
    this.finished(webhook.id);
  }

  private finished(webhookId: string): void {
    const left = (this.inFlight.get(webhookId) ?? 1) - 1;
    if (left === 0) this.inFlight.delete(webhookId);
    else this.inFlight.set(webhookId, left);
    this.inFlightTotal--;
    this.notifyIdle();
    this.wake();
  }

  /** Records finished attempts, many per transaction: attempts finish far faster than commits. */
  private async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.outcomes.length === 0) return;
    const batch = this.outcomes.splice(0, this.outcomes.length);
    this.flushing = this.record(batch)
      .catch((err: unknown) => {
        // Unrecorded attempts are made again when their lease runs out.
        this.options.onError(err, "recording webhook attempts failed");
      })
      .finally(() => {
        this.flushing = undefined;
      });
    await this.flushing;
  }

  private async record(batch: Outcome[]): Promise<void> {
    const settings = await this.options.webhooks.deliverySettings();
    const maxAttempts = Math.max(1, settings.notificationAttempts);
    const retryDelayMs = settings.notificationElapsedTimeInSeconds * 1000;
    const tally: Record<DeliveryOutcome, number> = { delivered: 0, retrying: 0, failed: 0, handed_back: 0 };
    await this.options.db.transaction(async (trx) => {
      const deactivate = new Set<string>();
      const failedFor = new Set<string>();
      const now = Date.now();
      // A notification deleted meanwhile (with its webhook) has nothing left to record.
      const ids = batch.map((o) => o.claimed.notification.id);
      const existing = new Set<string>();
      for (let i = 0; i < ids.length; i += CHUNK) {
        let query = trx
          .selectFrom("notifications")
          .select("id")
          .where("id", "in", ids.slice(i, i + CHUNK));
        // Locked, so a webhook deleted by another transaction cannot take them away before the
        // attempts referring to them are inserted (the delete waits, or has already happened).
        if (this.options.db.engine === "postgres") query = query.forUpdate();
        const rows = await query.execute();
        for (const r of rows) existing.add(r.id);
      }
      const live = batch.filter((o) => existing.has(o.claimed.notification.id));
      const attemptRows = live.map((o) => ({
        notification_id: o.claimed.notification.id,
        attempt: o.claimed.notification.total_attempts + 1,
        started: o.started,
        duration_ms: o.durationMs,
        status_code: o.statusCode,
        error: o.error,
        response_excerpt: o.excerpt,
      }));
      for (let i = 0; i < attemptRows.length; i += CHUNK) {
        await trx
          .insertInto("notification_attempts")
          .values(attemptRows.slice(i, i + CHUNK))
          .execute();
      }
      // Outcomes that leave notifications in the same state share one UPDATE: most batches are
      // all first-attempt successes with the same answer, so a batch costs a few statements.
      const updates = new Map<string, { set: Partial<NotificationTable>; ids: string[] }>();
      for (const o of live) {
        const n = o.claimed.notification;
        const delivered = o.statusCode !== null && o.statusCode >= 200 && o.statusCode < 300;
        const gone = o.statusCode === 410;
        const attempts = n.attempts + 1;
        const final = delivered || gone || attempts >= maxAttempts;
        const status = delivered ? "delivered" : final ? "failed" : "pending";
        tally[status === "pending" ? "retrying" : status]++;
        const set: Partial<NotificationTable> = {
          status,
          attempts,
          total_attempts: n.total_attempts + 1,
          next_attempt: final ? n.next_attempt : now + Math.max(retryDelayMs, o.retryAfterMs ?? 0),
          lease_until: 0,
          completed: final ? now : null,
          last_status: o.statusCode,
          last_response: o.error || o.excerpt,
        };
        const key = JSON.stringify(set);
        const group = updates.get(key) ?? { set, ids: [] };
        group.ids.push(n.id);
        updates.set(key, group);
        if (gone) deactivate.add(n.webhook_id);
        else if (status === "failed") failedFor.add(n.webhook_id);
      }
      for (const { set, ids: groupIds } of updates.values()) {
        for (let i = 0; i < groupIds.length; i += CHUNK) {
          await trx
            .updateTable("notifications")
            .set(set)
            .where("id", "in", groupIds.slice(i, i + CHUNK))
            .execute();
        }
      }
      // The deactivation policy: numberOfFailures failed notifications within daysInPast days,
      // counted from the last activation at the earliest.
      for (const webhookId of failedFor) {
        if (deactivate.has(webhookId)) continue;
        const webhook = batch.find((o) => o.claimed.webhook.id === webhookId)?.claimed.webhook as WebhookRow;
        const policy =
          (JSON.parse(webhook.config) as WebhookConfig).deactivationPolicy ?? DEFAULT_DEACTIVATION_POLICY;
        const current = await trx
          .selectFrom("webhooks")
          .select("count_since")
          .where("id", "=", webhookId)
          .executeTakeFirst();
        if (!current) continue;
        const since = Math.max(current.count_since, now - policy.daysInPast * DAY_MS);
        const failed = await trx
          .selectFrom("notifications")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .where("webhook_id", "=", webhookId)
          .where("status", "=", "failed")
          .where("completed", ">=", since)
          .executeTakeFirstOrThrow();
        if (Number(failed.n) >= policy.numberOfFailures) deactivate.add(webhookId);
      }
      if (deactivate.size > 0) {
        await trx
          .updateTable("webhooks")
          .set({ is_active: 0, modified: now })
          .where("id", "in", [...deactivate])
          .execute();
      }
    });
    for (const [outcome, count] of Object.entries(tally)) {
      this.options.onOutcome?.(outcome as DeliveryOutcome, count);
    }
  }

  private notifyIdle(): void {
    for (const resolve of this.idle) resolve();
    this.idle.clear();
  }
}

function triggersOf(webhook: WebhookRow): Trigger[] {
  const triggers: Trigger[] = [];
  for (const uri of JSON.parse(webhook.events) as string[]) {
    const t = parseTrigger(uri);
    // Stored URIs were checked when saved; one that no longer parses matches nothing.
    if (typeof t !== "string") triggers.push(t);
  }
  return triggers;
}

/** The per-attempt limit; a setting of 0 still gets a second, as nothing answers in no time. */
function timeoutMs(settings: WebhookSettings): number {
  return Math.max(1, settings.notificationTimeOutInSeconds) * 1000;
}

/** `Retry-After` as milliseconds from now (seconds or an HTTP date), capped; undefined when absent or unreadable. */
function retryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  const ms = /^\d+$/.test(text.trim()) ? Number(text.trim()) * 1000 : Date.parse(text) - now;
  if (!Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}

function describeFailure(err: unknown): string {
  if (err instanceof OutboundRefused) return `refused: ${err.message}`;
  const e = err as {
    name?: string;
    code?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "timed out";
  const code = e?.code ?? e?.cause?.code;
  const message = e?.cause?.message ?? e?.message ?? String(err);
  return code ? `${code}: ${message}` : message;
}
