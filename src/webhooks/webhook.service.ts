import { type Caller, requirePrivilege } from "../auth/caller.js";
import { FeedCache } from "../db/cache.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import type { PortalService } from "../portal/portal.service.js";
import { type Page, pageInfo } from "../validation/paging.js";
import type { PayloadUrlCheck } from "./attempt.js";
import type { WebhookConfig, WebhookSettings } from "./delivery-rules.js";
import { parseTrigger } from "./triggers.js";
import {
  attemptsOf,
  deleteWebhook,
  findNotification,
  findWebhook,
  insertWebhook,
  notificationPage,
  queueNotification,
  readSettings,
  requeueNotifications,
  saveSettings,
  setWebhookActive,
  updateWebhook,
  type WebhookRow,
  webhookPage,
} from "./webhook.repository.js";

/**
 * Organization webhooks (`interface.md` §2.2, §4.2; `wire.md` §7): their definitions, the
 * organization's delivery settings, and the delivery history. Delivery itself is a background
 * job's (`src/jobs/webhook-delivery.ts`); this service wakes it when it queues notifications.
 * Every payload URL is checked before it is saved: the check is a constructor argument, so no
 * way of building the service can skip it.
 */

/** The routes declare it (the pipeline refuses before validation); the service checks it again. */
export const WEBHOOK_PRIVILEGE = "portal:admin:manageWebhooks" as const;

export interface WebhookInput {
  name: string;
  url: string;
  secret?: string | undefined;
  config?: WebhookConfig | undefined;
  changes: "allChanges" | "manualChanges";
  events?: readonly string[] | undefined;
}

/** What this service needs beyond the database, given when it is built. */
export interface WebhookServiceDeps {
  /** Checks a payload URL before it is saved (`payloadUrlCheck`, through the address guard). */
  checkPayloadUrl: PayloadUrlCheck;
  /** The portal's URL as payloads give it. */
  portalUrl: () => string;
  /** Delivery (`WebhookDelivery`), told when notifications were queued or became deliverable. */
  delivery: { wake(): void };
}

export function webhookJson(row: WebhookRow, orgId: string) {
  return {
    id: row.id,
    accountId: orgId,
    name: row.name,
    payloadUrl: row.payload_url,
    secret: row.secret,
    isActive: row.is_active === 1,
    changes: row.changes,
    events: JSON.parse(row.events) as string[],
    config: JSON.parse(row.config) as WebhookConfig,
    ownerId: row.owner_id,
    modifiedId: row.modified_id,
    created: row.created,
    modified: row.modified,
  };
}

/** Trigger URIs of a subscription; `allChanges` is everything (`/`). */
export function subscriptionOf(changes: string, events: readonly string[] | undefined): string[] {
  if (changes === "allChanges") return ["/"];
  if (!events || events.length === 0) throw errors.missingParameter("events");
  for (const uri of events) {
    const parsed = parseTrigger(uri);
    if (typeof parsed === "string") throw errors.invalidParameter("events", `'${uri}' ${parsed}`);
  }
  return [...new Set(events)];
}

export class WebhookService {
  /**
   * The delivery settings, read by the delivery job for every claim and batch of outcomes. An
   * update announces `org`, so every node drops its copy.
   */
  private readonly settingsCache: FeedCache<"settings", WebhookSettings>;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly deps: WebhookServiceDeps,
  ) {
    this.settingsCache = new FeedCache(db.feed, ["org"]);
  }

  async list(caller: Caller | null, page: Page) {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const org = await this.portal.get();
    const { total, rows } = await webhookPage(this.db.kysely, page);
    return {
      ...pageInfo(page, total, rows.length),
      webhooks: rows.map((r) => webhookJson(r, org.id)),
    };
  }

  async get(caller: Caller | null, id: string) {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const org = await this.portal.get();
    return webhookJson(await this.mustFind(id), org.id);
  }

  /** Creates a webhook; answers its resource. */
  async create(caller: Caller | null, input: WebhookInput) {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const events = subscriptionOf(input.changes, input.events);
    const secret = input.secret ?? "";
    await this.checkUrl(input.url, secret, input.name);
    const fields = {
      name: input.name,
      payloadUrl: input.url,
      secret,
      changes: input.changes,
      events,
      config: input.config ?? {},
    };
    const now = Date.now();
    const row = await this.db.transaction((trx) => insertWebhook(trx, fields, caller.userId, now));
    const org = await this.portal.get();
    return webhookJson(row, org.id);
  }

  /**
   * Changes what is given; `url` and `secret` changes are checked like at creation. Answers the
   * webhook's resource as it now is.
   */
  async update(caller: Caller | null, id: string, input: Partial<WebhookInput>) {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const current = await this.mustFind(id);
    const changes = input.changes ?? current.changes;
    const events =
      input.changes !== undefined || input.events !== undefined
        ? subscriptionOf(changes, input.events ?? (JSON.parse(current.events) as string[]))
        : undefined;
    const url = input.url ?? current.payload_url;
    const secret = input.secret ?? current.secret;
    const name = input.name ?? current.name;
    if (input.url !== undefined || input.secret !== undefined) await this.checkUrl(url, secret, name);
    const fields = { name, payloadUrl: url, secret, changes, events, config: input.config };
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      if (!(await updateWebhook(trx, id, fields, caller.userId, now))) throw errors.webhookNotFound(id);
    });
    const org = await this.portal.get();
    return webhookJson(await this.mustFind(id), org.id);
  }

  async delete(caller: Caller | null, id: string): Promise<void> {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    await this.db.transaction(async (trx) => {
      if (!(await deleteWebhook(trx, id))) throw errors.webhookNotFound(id);
    });
  }

  /** Activation starts a clean failure count (`wire.md` §7). */
  async setActive(caller: Caller | null, id: string, active: boolean): Promise<void> {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      if (!(await setWebhookActive(trx, id, active, caller.userId, now))) throw errors.webhookNotFound(id);
    });
    if (active) this.deps.delivery.wake();
  }

  /** `notificationStatus`: the webhook's notifications, newest first, with every attempt. */
  async notificationStatus(caller: Caller | null, id: string, page: Page) {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    await this.mustFind(id);
    const { total, rows } = await notificationPage(this.db.kysely, id, page);
    const attempts = await attemptsOf(
      this.db.kysely,
      rows.map((r) => r.id),
    );
    return {
      ...pageInfo(page, total, rows.length),
      WebhookStatus: rows.map((n) => {
        const own = attempts.filter((a) => a.notification_id === n.id);
        const last = own.at(-1);
        return {
          id: n.id,
          isInvoked: n.status === "delivered",
          invokedTimestamp: last?.started ?? null,
          responseText: n.last_response,
          payload: JSON.parse(n.payload) as unknown,
          // portico's additions: where the notification stands and what each attempt met.
          status: n.status,
          created: n.created,
          nextAttempt: n.status === "pending" ? n.next_attempt : null,
          attempts: own.map((a) => ({
            attempt: a.attempt,
            started: a.started,
            durationMs: a.duration_ms,
            statusCode: a.status_code,
            error: a.error || null,
            responseText: a.response_excerpt,
          })),
        };
      }),
    };
  }

  /**
   * Queues one notification again, or every failed one completed at or after `since` (epoch ms).
   * Each starts a fresh series of attempts with its original payload and `webhook-id`. Answers how
   * many were queued.
   */
  async redeliver(
    caller: Caller | null,
    id: string,
    which: { notificationId?: string; since?: number },
  ): Promise<number> {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    await this.mustFind(id);
    const now = Date.now();
    const count = await this.db.transaction((trx) => requeueNotifications(trx, id, which, now));
    if (which.notificationId !== undefined && count === 0) {
      const exists = await findNotification(this.db.kysely, id, which.notificationId);
      if (!exists) throw errors.notFound(`Notification '${which.notificationId}' of webhook '${id}'`);
      throw errors.conflict("The notification is already waiting to be delivered.");
    }
    if (count > 0) this.deps.delivery.wake();
    return count;
  }

  /**
   * Queues a test notification (`source: webhook`, `operation: ping`) for this webhook alone;
   * answers the notification's id.
   */
  async ping(caller: Caller | null, id: string): Promise<string> {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const webhook = await this.mustFind(id);
    if (webhook.is_active !== 1) {
      throw errors.conflict("The webhook is inactive.", "Activate it before pinging it.");
    }
    const org = await this.portal.get();
    const now = Date.now();
    const payload = {
      info: {
        webhookId: webhook.id,
        webhookName: webhook.name,
        portalURL: this.deps.portalUrl(),
        when: now,
      },
      events: [
        {
          userId: caller.userId,
          username: caller.username,
          when: now,
          operation: "ping",
          source: "webhook",
          id: webhook.id,
          properties: { orgId: org.id },
        },
      ],
    };
    const notification = await this.db.transaction((trx) =>
      queueNotification(trx, { webhookId: webhook.id, eventId: "", payload }, now),
    );
    this.deps.delivery.wake();
    return notification.id;
  }

  async settings(caller: Caller | null): Promise<WebhookSettings> {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    return this.deliverySettings();
  }

  /** The settings as delivery applies them; no caller, for the engine. */
  async deliverySettings(): Promise<WebhookSettings> {
    return (await this.settingsCache.get("settings", () => readSettings(this.db.kysely))) as WebhookSettings;
  }

  async updateSettings(caller: Caller | null, changes: Partial<WebhookSettings>): Promise<WebhookSettings> {
    requirePrivilege(caller, WEBHOOK_PRIVILEGE);
    const next = { ...(await this.deliverySettings()), ...changes };
    const now = Date.now();
    await this.db.transaction((trx) => saveSettings(trx, next, now), { changes: ["org"] });
    return next;
  }

  private async checkUrl(url: string, secret: string, name: string): Promise<void> {
    const problem = await this.deps.checkPayloadUrl(url, secret, name);
    if (problem) throw errors.invalidParameter("url", `the payload URL check failed: ${problem}`);
  }

  private async mustFind(id: string): Promise<WebhookRow> {
    const row = await findWebhook(this.db.kysely, id);
    if (!row) throw errors.webhookNotFound(id);
    return row;
  }
}
