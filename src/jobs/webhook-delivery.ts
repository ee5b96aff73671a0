import { setMaxListeners } from "node:events";
import type { Db } from "../db/database.js";
import type { DeliveryOutcome } from "../observability/metrics.js";
import type { OutboundGuard } from "../outbound/guard.js";
import { describeFailure, postSigned } from "../webhooks/attempt.js";
import {
  attemptTimeoutMs,
  retryAfterMs,
  type WebhookConfig,
  type WebhookSettings,
} from "../webhooks/delivery-rules.js";
import { parseTrigger, type Trigger, triggerCovers } from "../webhooks/triggers.js";
import {
  analyzeNotifications,
  type Claimed,
  claimDue,
  dispatchUnwanted,
  type NotificationFields,
  noDurableCommit,
  type Outcome,
  queueNotifications,
  recordOutcomes,
  releaseAllLeases,
  releaseLeases,
  takeForDispatch,
  type WebhookRow,
} from "../webhooks/webhook.repository.js";
import type { WebhookService } from "../webhooks/webhook.service.js";
import type { WakeUp } from "./wake-up.js";

/**
 * Delivers webhook notifications, at least once (`wire.md` §7).
 *
 * 1. Dispatch: outbox events not yet dispatched are matched against every active webhook's
 *    triggers; the matching notifications are inserted and the events marked dispatched in one
 *    transaction, so a crash either dispatches an event whole or not at all. On PostgreSQL an
 *    event recorded while no webhook is active is stored already dispatched (`recordEvents`).
 * 2. Send: due notifications are claimed with a lease, POSTed through the address guard, and their
 *    outcome recorded. A crash after sending and before recording resends (a duplicate the
 *    receiver recognizes by `webhook-id`); a crash never loses one: the lease runs out and the
 *    notification is claimed again.
 *
 * Claims, sends and records overlap instead of taking turns, and each costs a few statements for
 * many notifications:
 * - a slot is free again as soon as its receiver answered: the outcome waits, with its lease, for
 *   the next recording transaction, which takes every outcome that finished meanwhile (at most
 *   `UNRECORDED_FACTOR` times `maxInFlight` wait; past that nothing more is claimed until a record
 *   commits);
 * - claims take more notifications than there are slots (per webhook and in all), held here in
 *   the order claimed, so a freed slot starts the next attempt at once rather than after the next
 *   claim's round trip. A webhook whose receiver answers fast has up to three times its slots held
 *   (`claimDepth`), one whose pace is unknown or slow as many as its slots: a claim then feeds a
 *   fast receiver for several round trips of its own. A held notification keeps the lease of its
 *   claim (attempt timeout + 5 s); one whose lease no longer covers a whole attempt when its slot
 *   comes is handed back unattempted (its lease released) instead of being sent.
 *
 * The job wakes on every committed event (the `events` change; NOTIFY across nodes on
 * PostgreSQL), when the webhook service queues notifications (pings, redeliveries) or activates a
 * webhook (its `WakeUp`), and polls as a backstop. Each webhook has at most `perWebhook` attempts in flight,
 * so a slow or dead receiver holds only its own slots and never delays the others.
 */

export interface WebhookDeliveryOptions {
  db: Db;
  guard: Pick<OutboundGuard, "post">;
  /** The delivery settings as they stand (kept by the webhook service, cached across claims). */
  settings: Pick<WebhookService, "deliverySettings">;
  /** Called by the webhook service when it queued notifications or made some deliverable. */
  wakeUp: Pick<WakeUp, "listen">;
  /** The portal's URL as payloads give it. */
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

/** Events turned into notifications per dispatch transaction. */
const DISPATCH_BATCH = 500;
/**
 * Extra lease beyond the attempt timeout, for recording the outcome; also how long after the
 * attempt's timeout a node that died mid-attempt holds up the notification on PostgreSQL.
 */
const LEASE_MARGIN_MS = 5_000;
/** Answered attempts waiting for their record, at most, in multiples of `maxInFlight`. */
const UNRECORDED_FACTOR = 4;
/** Notifications held for a webhook's slots, at most, in multiples of its slots. */
const MAX_HOLD_FACTOR = 3;
/**
 * How long the last of a webhook's held notifications should wait for its slot, at most: half the
 * lease's margin, so that held notifications are sent, not handed back, while the pace holds.
 */
const HOLD_WAIT_MS = LEASE_MARGIN_MS / 2;
/** Weight of the newest attempt in a webhook's pace (an exponentially weighted mean). */
const PACE_WEIGHT = 0.2;
/**
 * PostgreSQL: notifications this node queues before it has the statistics of `notifications`
 * gathered again, at least (and at least as many as the statistics last counted). See `queued`.
 */
const ANALYZE_AFTER_ROWS = 1_000;

/**
 * How many of a webhook's notifications a node may have in flight and held together: its slots,
 * and as many again times the number of slot-loads it gets through in `HOLD_WAIT_MS` at its pace
 * (the mean time of its recent attempts), between one and `MAX_HOLD_FACTOR`. At 1 to 3 loads held,
 * a claim's round trip to the database feeds a fast receiver for one to three of its own, where a
 * single load made one webhook's rate that of the claims (measured: `--cases delivery --pg`, one
 * webhook, 3,592-3,910/s with one load, 4,930-5,296/s with three). A receiver that takes over 1.25 s,
 * or whose pace is not known yet, gets one load, as before.
 */
export function claimDepth(slots: number, paceMs: number | undefined): number {
  if (paceMs === undefined) return 2 * slots;
  const loads = Math.floor(HOLD_WAIT_MS / Math.max(paceMs, 1));
  return slots * (1 + Math.min(MAX_HOLD_FACTOR, Math.max(1, loads)));
}

/** A claimed notification held until its webhook has a free slot. */
interface Held {
  claimed: Claimed;
  settings: WebhookSettings;
  leaseUntil: number;
}

export class WebhookDelivery {
  private readonly maxInFlight: number;
  private readonly perWebhook: number;
  private readonly inFlight = new Map<string, number>();
  private inFlightTotal = 0;
  /** Claimed notifications waiting for a slot, per webhook, in the order claimed. */
  private readonly held = new Map<string, Held[]>();
  private heldTotal = 0;
  /**
   * Each webhook's pace: the weighted mean duration of its recent attempts, in ms (one number per
   * webhook attempted since the start: a portal has few).
   */
  private readonly pace = new Map<string, number>();
  /** Held notifications whose lease ran short: released unattempted by the next record. */
  private readonly expired: string[] = [];
  private running = false;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly outcomes: Outcome[] = [];
  /** Outcomes queued or being recorded. */
  private unrecorded = 0;
  private flushing: Promise<void> | undefined;
  /**
   * Whether events may wait for dispatch: set by every committed event (this node's or, through
   * the change feed, another's) and by the poll, cleared before a dispatch reads. A pass woken by
   * a finished attempt then claims without asking the outbox first.
   */
  private eventsPending = true;
  /**
   * Whether notifications may be due: set by everything that can make them so (a dispatch that
   * queued some, the webhook service, a finished attempt or record, the poll), cleared before a
   * claim. A pass woken only by events that queued nothing (no webhook wants them, or another
   * node took them) then claims nothing.
   */
  private claimPending = true;
  /**
   * PostgreSQL: whether the last dispatch found no active webhook. The next one then tries
   * `dispatchUnwanted` first, which checks it again in its own snapshot (a hint, never trusted).
   */
  private noWebhooks = true;
  private readonly idle = new Set<() => void>();
  /** Cuts off attempts a shutdown could not wait for. */
  private readonly abort = new AbortController();
  /** Notifications whose attempt was cut off by the shutdown: their leases are released. */
  private readonly handedBack: string[] = [];
  /** PostgreSQL: notifications this node queued since it last had their statistics gathered. */
  private queuedSinceAnalyze = 0;
  private analyzing: Promise<void> | undefined;

  constructor(private readonly options: WebhookDeliveryOptions) {
    this.maxInFlight = options.maxInFlight ?? 64;
    this.perWebhook = options.perWebhook ?? 16;
    // Every attempt in flight listens to the shutdown's signal (the guard removes its listener
    // when the attempt ends): past Node's default of 10, it warned of a leak that is none.
    setMaxListeners(this.maxInFlight + 1, this.abort.signal);
  }

  async start(): Promise<void> {
    const { db } = this.options;
    this.options.wakeUp.listen(() => this.wake());
    // One process owns an embedded database (portico.lock), so a lease still running at start-up
    // was held by a process that died: its notifications are due again now, not when it expires.
    // On PostgreSQL other nodes may be alive; there leases run out by themselves.
    if (db.engine === "sqlite") {
      await db.transaction((trx) => releaseAllLeases(trx));
    }
    db.feed.subscribe("events", () => this.eventsArrived());
    // Retries come due and leases of dead nodes run out without anyone announcing it.
    this.timer = setInterval(() => {
      this.eventsPending = true;
      this.wake();
    }, this.options.pollMs ?? 1000);
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
    // Claimed but never sent: released at the end, so that any node sends them at once.
    for (const queue of this.held.values())
      for (const h of queue) this.handedBack.push(h.claimed.notification.id);
    this.held.clear();
    this.heldTotal = 0;
    const deadline = Date.now() + graceMs;
    while (this.inFlightTotal > 0 || this.running || this.flushing || this.analyzing) {
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

  /** New events may be in the outbox: dispatch them, and claim only if that queued notifications. */
  private eventsArrived(): void {
    this.eventsPending = true;
    this.wake(false);
  }

  /** Runs a pass (another after the one running); `claim`: notifications may be due. */
  wake(claim = true): void {
    if (this.stopped) return;
    if (claim) this.claimPending = true;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.pass());
  }

  private async pass(): Promise<void> {
    try {
      do {
        this.again = false;
        if (this.eventsPending) {
          // Cleared before reading: an event committed during the read sets it again.
          this.eventsPending = false;
          try {
            for (;;) {
              const { taken, queued } = await this.dispatch();
              if (queued > 0) this.claimPending = true;
              if (taken < DISPATCH_BATCH || this.stopped) break;
            }
          } catch (err) {
            this.eventsPending = true;
            throw err;
          }
        }
        if (this.claimPending && !this.stopped) {
          // Cleared before claiming: whatever makes more due meanwhile sets it again.
          this.claimPending = false;
          try {
            await this.claimAndSend();
          } catch (err) {
            this.claimPending = true;
            throw err;
          }
        }
      } while (this.again && !this.stopped);
    } catch (err) {
      this.options.onError(err, "webhook delivery pass failed");
    } finally {
      this.running = false;
      this.notifyIdle();
    }
  }

  /**
   * Turns a batch of outbox events into notifications; returns how many events it took and how
   * many notifications it queued. On PostgreSQL two round trips: the events taken with the
   * webhooks (`takeForDispatch`), then the notifications with the COMMIT.
   */
  private async dispatch(): Promise<{ taken: number; queued: number }> {
    const { db } = this.options;
    if (db.engine === "postgres" && this.noWebhooks) {
      // One round trip while no webhook is active (a portal that has none).
      const { activeWebhooks, taken } = await dispatchUnwanted(db.kysely, DISPATCH_BATCH);
      if (activeWebhooks === 0) return { taken, queued: 0 };
      this.noWebhooks = false;
    }
    const portalURL = this.options.portalUrl();
    let known: number | undefined;
    const result = await db.transaction(async (trx) => {
      const { events, webhooks, notificationsKnown } = await takeForDispatch(trx, db.engine, DISPATCH_BATCH);
      known = notificationsKnown;
      if (events.length === 0) return { taken: 0, queued: 0 };
      this.noWebhooks = webhooks.length === 0;
      const subscriptions = webhooks.map((w) => ({ webhook: w, triggers: triggersOf(w) }));
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
      // Events that nobody wants: losing their mark to a database crash only dispatches them again.
      if (notifications.length === 0) await noDurableCommit(trx, db.engine);
      else await queueNotifications(trx, notifications, now);
      return { taken: events.length, queued: notifications.length };
    });
    if (known !== undefined && result.queued > 0) this.queued(result.queued, known);
    return result;
  }

  /**
   * PostgreSQL: has the statistics of `notifications` (and its attempts) gathered again once this
   * node queued as many notifications as they last counted, and at least `ANALYZE_AFTER_ROWS`,
   * without waiting for it.
   *
   * Each connection keeps the plan of the foreign-key check that every recorded attempt runs
   * against `notifications`, made from the statistics as they stood; it plans again only when
   * they change. Statistics gathered while the table was empty or small (a database analyzed
   * before any webhook, a table vacuumed after its webhooks were deleted) make that plan a
   * sequential scan, which a burst of events then runs once per attempt over a table grown to
   * thousands of rows: measured on PostgreSQL 15 (`--cases load --pg`, whose store was analyzed
   * before its first webhook), 0.2 to 0.5 s per recorded batch of a few hundred, 1,057 deliveries/s
   * to one webhook where a store never analyzed delivers 4,000 to 5,000/s. Autovacuum's ANALYZE
   * comes a minute later at best, long after the burst; and not at all where it is off.
   *
   * Never analyzed (`reltuples` -1), the table is assumed to hold at least 10 pages, which keeps
   * the check on the primary key's index: nothing to do then (and a new portal's burst measured
   * no faster with the ANALYZEs: `--cases delivery --pg`, fan-out 4,310 / 4,753 deliveries/s and
   * 161 / 153 µs of portico's CPU each with them, 4,771 / 4,966 and 141 / 139 µs without).
   */
  private queued(count: number, known: number): void {
    if (known < 0) return;
    this.queuedSinceAnalyze += count;
    if (this.analyzing || this.queuedSinceAnalyze < Math.max(ANALYZE_AFTER_ROWS, known)) return;
    this.queuedSinceAnalyze = 0;
    this.analyzing = analyzeNotifications(this.options.db.kysely)
      // Deliveries go on with the statistics as they are; the next threshold tries again.
      .catch((err) => this.options.onError(err, "gathering the statistics of webhook notifications failed"))
      .finally(() => {
        this.analyzing = undefined;
        this.notifyIdle();
      });
  }

  /**
   * Claims what is due, up to the slots (in flight and held) of each webhook and in all, and
   * starts sending what has a free slot.
   */
  private async claimAndSend(): Promise<void> {
    this.sendHeld();
    // In flight or held, per webhook and in all: twice the slots.
    const want = 2 * this.maxInFlight - this.inFlightTotal - this.heldTotal;
    if (want <= 0) return;
    // Recording fell behind: the next record's commit wakes the engine again.
    if (this.unrecorded >= this.maxInFlight * UNRECORDED_FACTOR) return;
    const { db } = this.options;
    const settings = await this.options.settings.deliverySettings();
    const now = Date.now();
    const leaseMs = attemptTimeoutMs(settings) + LEASE_MARGIN_MS;
    const taken = new Map(this.inFlight);
    for (const [webhookId, queue] of this.held)
      taken.set(webhookId, (taken.get(webhookId) ?? 0) + queue.length);
    const depth = new Map<string, number>();
    for (const [webhookId, paceMs] of this.pace) depth.set(webhookId, claimDepth(this.perWebhook, paceMs));
    const limits = {
      now,
      leaseMs,
      max: want,
      perWebhook: claimDepth(this.perWebhook, undefined),
      depth,
      inFlight: taken,
    };
    // On PostgreSQL one statement, its own transaction: one round trip.
    const claimed =
      db.engine === "postgres"
        ? await claimDue(db.kysely, db.engine, limits)
        : await db.transaction((trx) => claimDue(trx, db.engine, limits));
    if (this.stopped) {
      for (const c of claimed) this.handedBack.push(c.notification.id);
      return;
    }
    for (const c of claimed) {
      let queue = this.held.get(c.webhook.id);
      if (!queue) {
        queue = [];
        this.held.set(c.webhook.id, queue);
      }
      queue.push({ claimed: c, settings, leaseUntil: now + leaseMs });
      this.heldTotal++;
    }
    this.sendHeld();
    // More may be due than there were slots; each finished attempt wakes the engine again.
  }

  /** Starts the held notifications that have a free slot, oldest claim first per webhook. */
  private sendHeld(): void {
    if (this.stopped) return;
    for (const [webhookId, queue] of this.held) {
      while (
        queue.length > 0 &&
        this.inFlightTotal < this.maxInFlight &&
        (this.inFlight.get(webhookId) ?? 0) < this.perWebhook
      ) {
        const next = queue.shift() as Held;
        this.heldTotal--;
        if (Date.now() + attemptTimeoutMs(next.settings) > next.leaseUntil) {
          // Its lease would run out mid-attempt, when another node may take it over.
          this.expired.push(next.claimed.notification.id);
          continue;
        }
        this.inFlight.set(webhookId, (this.inFlight.get(webhookId) ?? 0) + 1);
        this.inFlightTotal++;
        void this.attempt(next.claimed, next.settings);
      }
      if (queue.length === 0) this.held.delete(webhookId);
    }
    if (this.expired.length > 0) void this.flush();
  }

  private async attempt(claimed: Claimed, settings: WebhookSettings): Promise<void> {
    const { notification, webhook } = claimed;
    const started = Date.now();
    const config = JSON.parse(webhook.config) as WebhookConfig;
    let outcome: Outcome;
    try {
      const res = await postSigned(this.options.guard, {
        url: webhook.payload_url,
        id: notification.id,
        body: notification.payload,
        secret: webhook.secret,
        sendSecretHeader: config.sendSecretHeader,
        when: new Date(started),
        timeoutMs: attemptTimeoutMs(settings),
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
    const paceMs = this.pace.get(webhook.id);
    this.pace.set(
      webhook.id,
      paceMs === undefined ? outcome.durationMs : paceMs + PACE_WEIGHT * (outcome.durationMs - paceMs),
    );
    this.outcomes.push(outcome);
    this.unrecorded++;
    // The slot is free once the receiver answered; the lease covers the outcome until recorded.
    this.finished(webhook.id);
    void this.flush();
  }

  private finished(webhookId: string): void {
    const left = (this.inFlight.get(webhookId) ?? 1) - 1;
    if (left === 0) this.inFlight.delete(webhookId);
    else this.inFlight.set(webhookId, left);
    this.inFlightTotal--;
    this.sendHeld();
    this.notifyIdle();
    this.wake();
  }

  /**
   * Records finished attempts, many per transaction: attempts finish far faster than commits.
   * One recording runs at a time; it takes everything that finished while the previous one ran.
   */
  private flush(): Promise<void> {
    if (!this.flushing) {
      this.flushing = this.recordAll().finally(() => {
        this.flushing = undefined;
        this.notifyIdle();
        // Claims may have stopped while recording lagged.
        this.wake();
      });
    }
    return this.flushing;
  }

  private async recordAll(): Promise<void> {
    while (this.expired.length > 0) {
      const ids = this.expired.splice(0, this.expired.length);
      try {
        await this.options.db.transaction((trx) => releaseLeases(trx, ids));
        this.options.onOutcome?.("handed_back", ids.length);
      } catch (err) {
        // Their leases then run out by themselves.
        this.options.onError(err, "handing back webhook notifications failed");
      }
    }
    while (this.outcomes.length > 0) {
      const batch = this.outcomes.splice(0, this.outcomes.length);
      try {
        await this.record(batch);
      } catch (err) {
        // Unrecorded attempts are made again when their lease runs out.
        this.options.onError(err, "recording webhook attempts failed");
      } finally {
        this.unrecorded -= batch.length;
      }
    }
  }

  private async record(batch: Outcome[]): Promise<void> {
    const settings = await this.options.settings.deliverySettings();
    const { db } = this.options;
    const tally = await db.transaction((trx) => recordOutcomes(trx, batch, settings, Date.now()));
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
