import type { Db } from "../db/database.js";
import type { DeliveryOutcome } from "../observability/metrics.js";
import type { OutboundGuard } from "../outbound/guard.js";
import type { WebhookService } from "../webhooks/webhook.service.js";
import type { WakeUp } from "./wake-up.js";
import { WebhookDelivery } from "./webhook-delivery.js";

/**
 * The background work of one process, built in one place from what each job needs. Jobs take
 * their dependencies in their constructors; a service that leaves them work is handed a `WakeUp`
 * the job listens to, made before both.
 */

export interface JobOptions {
  db: Db;
  /** Every outbound call goes through it. */
  guard: Pick<OutboundGuard, "post">;
  /** The webhook service keeps the delivery settings. */
  webhooks: Pick<WebhookService, "deliverySettings">;
  /** What the webhook service calls when it queued notifications. */
  webhookWakeUp: Pick<WakeUp, "listen">;
  /** This portal's URL as payloads and other portals give it (public URL and context path). */
  portalUrl: () => string;
  /** How long webhook attempts in flight may finish at shutdown before they are handed back. */
  shutdownGraceMs: number;
  /** A background pass failed; the job carries on. */
  onError: (err: unknown, what: string) => void;
  /** How recorded webhook attempts ended (for metrics). */
  onDeliveryOutcome: (outcome: DeliveryOutcome, count: number) => void;
}

export interface Jobs {
  webhookDelivery: WebhookDelivery;
  /** Starts every job; called once the server listens. */
  start(): Promise<void>;
  /** Stops taking work and lets work in flight finish (webhook attempts within the grace period). */
  stop(): Promise<void>;
}

export function createJobs(options: JobOptions): Jobs {
  const webhookDelivery = new WebhookDelivery({
    db: options.db,
    guard: options.guard,
    settings: options.webhooks,
    wakeUp: options.webhookWakeUp,
    portalUrl: options.portalUrl,
    onError: options.onError,
    onOutcome: options.onDeliveryOutcome,
  });
  // Collaboration's sync runner, sync scheduler and peer notifier join here, started and stopped
  // beside webhook delivery.
  return {
    webhookDelivery,
    async start() {
      await webhookDelivery.start();
    },
    async stop() {
      await webhookDelivery.stop(options.shutdownGraceMs);
    },
  };
}
