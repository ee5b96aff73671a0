import type { Db } from "../db/database.js";
import type { ExportService } from "../features/export/export.service.js";
import type { DeliveryOutcome } from "../observability/metrics.js";
import type { OutboundGuard } from "../outbound/guard.js";
import type { WebhookService } from "../webhooks/webhook.service.js";
import { ExportRunner } from "./export-runner.js";
import type { SyncJobs } from "./sync-jobs.js";
import type { WakeUp } from "./wake-up.js";
import { WebhookDelivery } from "./webhook-delivery.js";

/**
 * The background work of one process, started and stopped in one place. Jobs take their
 * dependencies in their constructors; a service that leaves them work is handed a `WakeUp` the
 * job listens to, made before both. Collaboration's jobs (`createSyncJobs`) are built before the
 * services instead: a sync an administrator starts is run by the sync runner and may be waited
 * for, which a wake-up cannot answer; they need no service, only the database and the guard.
 */

export interface JobOptions {
  db: Db;
  /** Every outbound call goes through it. */
  guard: Pick<OutboundGuard, "post">;
  /** The webhook service keeps the delivery settings. */
  webhooks: Pick<WebhookService, "deliverySettings">;
  /** What the webhook service calls when it queued notifications. */
  webhookWakeUp: Pick<WakeUp, "listen">;
  /** Collaboration's jobs: the sync runner, the sync scheduler and the peer notifier. */
  sync: Pick<SyncJobs, "start" | "stop">;
  /** Exports: the service that runs their jobs, its wake-up and its directory of files. */
  exports: {
    service: Pick<ExportService, "nextDue" | "run">;
    wakeUp: Pick<WakeUp, "listen">;
    workDir: string;
  };
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
  const exportRunner = new ExportRunner({
    exports: options.exports.service,
    wakeUp: options.exports.wakeUp,
    workDir: options.exports.workDir,
    onError: options.onError,
  });
  return {
    webhookDelivery,
    async start() {
      await webhookDelivery.start();
      await options.sync.start();
      await exportRunner.start();
    },
    async stop() {
      // Side by side: syncs stop at their next batch while webhook attempts have their grace
      // period; an export is handed back at its next page.
      await Promise.all([
        webhookDelivery.stop(options.shutdownGraceMs),
        options.sync.stop(),
        exportRunner.stop(),
      ]);
    },
  };
}
