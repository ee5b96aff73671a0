import { type Caller, requirePrivilege } from "../auth/caller.js";
import { FeedCache } from "../db/cache.js";
import type { Db } from "../db/database.js";
import type { NotificationTable, WebhookSettingsTable, WebhookTable } from "../db/schema.js";
import { errors } from "../errors.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { parseTrigger } from "./triggers.js";

/**
 * Organization webhooks (`interface.md` §2.2, §4.2; `wire.md` §7): their definitions, the
 * organization's delivery settings, and the delivery history. Delivery itself is the
 * `DeliveryEngine`'s; this service asks it to check payload URLs and to wake up.
 */

const PRIVILEGE = "portal:admin:manageWebhooks" as const;

/** ArcGIS's defaults for the delivery settings (`wire.md` §7). */
export const DEFAULT_SETTINGS = {
  notificationAttempts: 3,
  notificationTimeOutInSeconds: 10,
  notificationElapsedTimeInSeconds: 5,
} as const;

/** Used when a webhook's config has no deactivationPolicy. */
export const DEFAULT_DEACTIVATION_POLICY = { numberOfFailures: 5, daysInPast: 5 } as const;

export interface DeactivationPolicy {
  numberOfFailures: number;
  daysInPast: number;
}

/** What `config` holds: the ArcGIS deactivation policy and portico's own delivery option. */
export interface WebhookConfig {
  deactivationPolicy?: DeactivationPolicy;
  /** Also send the secret itself in `x-esriHook-Secret`, as the public portal does. Off by default. */
  sendSecretHeader?: boolean;
}

export interface WebhookSettings {
  notificationAttempts: number;
  notificationTimeOutInSeconds: number;
  notificationElapsedTimeInSeconds: number;
}

export interface WebhookInput {
  name: string;
  url: string;
  secret?: string | undefined;
  config?: WebhookConfig | undefined;
  changes: "allChanges" | "manualChanges";
  events?: readonly string[] | undefined;
}

/** What the engine does for this service. */
export interface DeliveryControl {
  /** Why the payload URL cannot be reached, or undefined when it answered. */
  checkUrl(url: string, secret: string, webhookName: string): Promise<string | undefined>;
  /** New notifications are waiting. */
  wake(): void;
  /** The portal's URL as payloads give it. */
  portalUrl(): string;
}

export type WebhookRow = WebhookTable;

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
  private control: DeliveryControl | undefined;
  /**
   * The delivery settings, read by the engine for every claim and every batch of outcomes. An
   * update announces `org`, so every node drops its copy.
   */
  private readonly settingsCache: FeedCache<"settings", WebhookSettings>;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
  ) {
    this.settingsCache = new FeedCache(db.feed, ["org"]);
  }

  /** Connects the delivery engine, which is built after the services. */
  attach(control: DeliveryControl): void {
    this.control = control;
  }

  async list(caller: Caller | null, page: Page) {
    requirePrivilege(caller, PRIVILEGE);
    const org = await this.portal.get();
    const [count, rows] = await Promise.all([
      this.db.kysely
        .selectFrom("webhooks")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .executeTakeFirstOrThrow(),
      this.db.kysely
        .selectFrom("webhooks")
        .selectAll()
        .orderBy("created")
        .orderBy("id")
        .limit(page.num)
        .offset(page.start - 1)
        .execute(),
    ]);
    return {
      ...pageInfo(page, Number(count.n), rows.length),
      webhooks: rows.map((r) => webhookJson(r, org.id)),
    };
  }

  async get(caller: Caller | null, id: string) {
    requirePrivilege(caller, PRIVILEGE);
    const org = await this.portal.get();
    return webhookJson(await this.mustFind(id), org.id);
  }

  async create(caller: Caller | null, input: WebhookInput) {
    requirePrivilege(caller, PRIVILEGE);
    const events = subscriptionOf(input.changes, input.events);
    const secret = input.secret ?? "";
    await this.checkUrl(input.url, secret, input.name);
    const now = Date.now();
    const row: WebhookRow = {
      id: newId(),
      name: input.name,
      payload_url: input.url,
      secret,
      is_active: 1,
      changes: input.changes,
      events: JSON.stringify(events),
      config: JSON.stringify(input.config ?? {}),
      owner_id: caller.userId,
      modified_id: caller.userId,
      count_since: now,
      created: now,
      modified: now,
    };
    await this.db.transaction(async (trx) => {
      await trx.insertInto("webhooks").values(row).execute();
    });
    const org = await this.portal.get();
    return { success: true, webhook: webhookJson(row, org.id) };
  }

  /** Changes what is given; `url` and `secret` changes are checked like at creation. */
  async update(caller: Caller | null, id: string, input: Partial<WebhookInput>) {
    requirePrivilege(caller, PRIVILEGE);
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
    const patch: Partial<WebhookRow> = {
      name,
      payload_url: url,
      secret,
      changes,
      ...(events ? { events: JSON.stringify(events) } : {}),
      ...(input.config !== undefined ? { config: JSON.stringify(input.config) } : {}),
      modified_id: caller.userId,
      modified: Date.now(),
    };
    await this.db.transaction(async (trx) => {
      const r = await trx.updateTable("webhooks").set(patch).where("id", "=", id).executeTakeFirst();
      if (Number(r.numUpdatedRows) === 0) throw errors.webhookNotFound(id);
    });
    const org = await this.portal.get();
    return { success: true, webhook: webhookJson(await this.mustFind(id), org.id) };
  }

  async delete(caller: Caller | null, id: string) {
    requirePrivilege(caller, PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const r = await trx.deleteFrom("webhooks").where("id", "=", id).executeTakeFirst();
      if (Number(r.numDeletedRows) === 0) throw errors.webhookNotFound(id);
    });
    return { success: true };
  }

  /** Activation starts a clean failure count (`wire.md` §7). */
  async setActive(caller: Caller | null, id: string, active: boolean) {
    requirePrivilege(caller, PRIVILEGE);
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const r = await trx
        .updateTable("webhooks")
        .set({
          is_active: active ? 1 : 0,
          ...(active ? { count_since: now } : {}),
          modified_id: caller.userId,
          modified: now,
        })
        .where("id", "=", id)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) === 0) throw errors.webhookNotFound(id);
    });
    if (active) this.control?.wake();
    return { success: true };
  }

  /** `notificationStatus`: the webhook's notifications, newest first, with every attempt. */
  async notificationStatus(caller: Caller | null, id: string, page: Page) {
    requirePrivilege(caller, PRIVILEGE);
    await this.mustFind(id);
    const q = this.db.kysely;
    const [count, rows] = await Promise.all([
      q
        .selectFrom("notifications")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("webhook_id", "=", id)
        .executeTakeFirstOrThrow(),
      q
        .selectFrom("notifications")
        .selectAll()
        .where("webhook_id", "=", id)
        .orderBy("created", "desc")
        .orderBy("id", "desc")
        .limit(page.num)
        .offset(page.start - 1)
        .execute(),
    ]);
    const attempts =
      rows.length === 0
        ? []
        : await q
            .selectFrom("notification_attempts")
            .selectAll()
            .where(
              "notification_id",
              "in",
              rows.map((r) => r.id),
            )
            .orderBy("attempt")
            .execute();
    return {
      ...pageInfo(page, Number(count.n), rows.length),
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
   * Each starts a fresh series of attempts with its original payload and `webhook-id`.
   */
  async redeliver(caller: Caller | null, id: string, which: { notificationId?: string; since?: number }) {
    requirePrivilege(caller, PRIVILEGE);
    await this.mustFind(id);
    const now = Date.now();
    const count = await this.db.transaction(async (trx) => {
      let query = trx
        .updateTable("notifications")
        .set({ status: "pending", attempts: 0, next_attempt: now, lease_until: 0, completed: null })
        .where("webhook_id", "=", id);
      if (which.notificationId !== undefined) {
        query = query.where("id", "=", which.notificationId).where("status", "!=", "pending");
      } else {
        query = query.where("status", "=", "failed").where("completed", ">=", which.since ?? 0);
      }
      const r = await query.executeTakeFirst();
      return Number(r.numUpdatedRows);
    });
    if (which.notificationId !== undefined && count === 0) {
      const exists = await this.db.kysely
        .selectFrom("notifications")
        .select("status")
        .where("id", "=", which.notificationId)
        .where("webhook_id", "=", id)
        .executeTakeFirst();
      if (!exists) throw errors.notFound(`Notification '${which.notificationId}' of webhook '${id}'`);
      throw errors.conflict("The notification is already waiting to be delivered.");
    }
    if (count > 0) this.control?.wake();
    return { success: true, redelivered: count };
  }

  /** Queues a test notification (`source: webhook`, `operation: ping`) for this webhook alone. */
  async ping(caller: Caller | null, id: string) {
    requirePrivilege(caller, PRIVILEGE);
    const webhook = await this.mustFind(id);
    if (webhook.is_active !== 1) {
      throw errors.conflict("The webhook is inactive.", "Activate it before pinging it.");
    }
    const org = await this.portal.get();
    const now = Date.now();
    const notification = newNotification(webhook, "", now, {
      info: {
        webhookId: webhook.id,
        webhookName: webhook.name,
        portalURL: this.control?.portalUrl() ?? "",
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
    });
    await this.db.transaction(async (trx) => {
      await trx.insertInto("notifications").values(notification).execute();
    });
    this.control?.wake();
    return { success: true, notificationId: notification.id };
  }

  async settings(caller: Caller | null): Promise<WebhookSettings> {
    requirePrivilege(caller, PRIVILEGE);
    return this.deliverySettings();
  }

  /** The settings as delivery applies them; no caller, for the engine. */
  async deliverySettings(): Promise<WebhookSettings> {
    return (await this.settingsCache.get("settings", () => readSettings(this.db))) as WebhookSettings;
  }

  async updateSettings(caller: Caller | null, changes: Partial<WebhookSettings>): Promise<WebhookSettings> {
    requirePrivilege(caller, PRIVILEGE);
    const next = { ...(await this.deliverySettings()), ...changes };
    const row: WebhookSettingsTable = {
      singleton: 1,
      notification_attempts: next.notificationAttempts,
      timeout_seconds: next.notificationTimeOutInSeconds,
      elapsed_seconds: next.notificationElapsedTimeInSeconds,
      modified: Date.now(),
    };
    await this.db.transaction(
      async (trx) => {
        await trx
          .insertInto("webhook_settings")
          .values(row)
          .onConflict((oc) => oc.column("singleton").doUpdateSet(row))
          .execute();
      },
      { changes: ["org"] },
    );
    return next;
  }

  private async checkUrl(url: string, secret: string, name: string): Promise<void> {
    if (!this.control) return;
    const problem = await this.control.checkUrl(url, secret, name);
    if (problem) throw errors.invalidParameter("url", `the payload URL check failed: ${problem}`);
  }

  private async mustFind(id: string): Promise<WebhookRow> {
    const row = await this.db.kysely
      .selectFrom("webhooks")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) throw errors.webhookNotFound(id);
    return row;
  }
}

async function readSettings(db: Db): Promise<WebhookSettings> {
  const row = await db.kysely.selectFrom("webhook_settings").selectAll().executeTakeFirst();
  if (!row) return { ...DEFAULT_SETTINGS };
  return {
    notificationAttempts: row.notification_attempts,
    notificationTimeOutInSeconds: row.timeout_seconds,
    notificationElapsedTimeInSeconds: row.elapsed_seconds,
  };
}

/** A pending notification of `payload` for `webhook`, due now. */
export function newNotification(
  webhook: Pick<WebhookRow, "id">,
  eventId: string,
  now: number,
  payload: unknown,
): NotificationTable {
  return {
    id: newId(),
    webhook_id: webhook.id,
    event_id: eventId,
    payload: JSON.stringify(payload),
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
