import type { Db } from "../db/database.js";
import { markDispatched, takeUndispatched } from "../events/outbox.js";
import type { DeliveryOutcome } from "../observability/metrics.js";
import { type OutboundGuard, OutboundRefused } from "../outbound/guard.js";
import {
  attemptTimeoutMs,
  retryAfterMs,
  type WebhookConfig,
  type WebhookSettings,
} from "./delivery-rules.js";
import { deliveryHeaders } from "./signature.js";
import { parseTrigger, type Trigger, triggerCovers } from "./triggers.js";
import {
  activeWebhooks,
  type Claimed,
  claimDue,
  type NotificationFields,
  type Outcome,
  queueNotifications,
  recordOutcomes,
  releaseAllLeases,
  releaseLeases,
  type WebhookRow,
} from "./webhook.repository.js";
import type { DeliveryControl } from "./webhook.service.js";

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
/**
 * Extra lease beyond the attempt timeout, for recording the outcome; also how long after the
 * attempt's timeout a node that died mid-attempt holds up the notification on PostgreSQL.
 */
const LEASE_MARGIN_MS = 5_000;
/** A check of the payload URL at creation gets this long, whatever the settings say. */
const CHECK_TIMEOUT_MS = 10_000;

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
      await db.transaction((trx) => releaseAllLeases(trx));
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
        await this.options.db.transaction((trx) => releaseLeases(trx, ids));
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
    return db.transaction(async (trx) => {
      const events = await takeUndispatched(trx, db.engine, DISPATCH_BATCH);
      if (events.length === 0) return 0;
      const subscriptions = (await activeWebhooks(trx)).map((w) => ({ webhook: w, triggers: triggersOf(w) }));
      const now = Date.now();
      const notifications: NotificationFields[] = [];
      for (const event of events) {
        const fields = { source: event.source, operation: event.operation, objectId: event.object_id };
        for (const { webhook, triggers } of subscriptions) {
          if (!triggers.some((t) => triggerCovers(t, fields))) continue;
          notifications.push({
            webhookId: webhook.id,
            eventId: event.id,
            payload: {
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
            },
          });
        }
      }
      await queueNotifications(trx, notifications, now);
      await markDispatched(trx, events);
      return events.length;
    });
  }

  /** Claims what is due, up to the free slots, and starts sending it. */
  private async claimAndSend(): Promise<void> {
    const free = this.maxInFlight - this.inFlightTotal;
    if (free <= 0) return;
    const { db } = this.options;
    const settings = await this.options.webhooks.deliverySettings();
    const now = Date.now();
    const leaseMs = attemptTimeoutMs(settings) + LEASE_MARGIN_MS;
    const claimed = await db.transaction((trx) =>
      claimDue(trx, db.engine, {
        now,
        leaseMs,
        max: free,
        room: (webhookId) => this.perWebhook - (this.inFlight.get(webhookId) ?? 0),
      }),
    );
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
      const limit = attemptTimeoutMs(settings);
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
        retryAfterMs: retryAfterMs(res.headers["retry-after"], Date.now()),
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
    const { db } = this.options;
    const tally = await db.transaction((trx) => recordOutcomes(trx, db.engine, batch, settings, Date.now()));
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
