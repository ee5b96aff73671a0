import { PeerClient, type PortalKeys } from "../collaboration/peer.js";
import type { Db } from "../db/database.js";
import type { OutboundGuard } from "../outbound/guard.js";
import { findOrganization } from "../portal/org.repository.js";
import { PeerNotifier } from "./peer-notifier.js";
import { SyncRunner } from "./sync-runner.js";
import { SyncScheduler } from "./sync-scheduler.js";

export interface SyncJobOptions {
  db: Db;
  /** Every call to another portal goes through it. */
  guard: OutboundGuard;
  /** This portal's signing key; the invitation service signs its files with the same. */
  keys: PortalKeys;
  /** See `Config.syncStaleSeconds`. */
  staleMs: number;
  /** A background pass failed; the job carries on. */
  onError: (err: unknown, what: string) => void;
}

/** Collaboration's background work, and what the collaboration services hand work to. */
export interface SyncJobs {
  /** Tells other portals that replication ended or that there is something to sync. */
  notifier: PeerNotifier;
  /** Runs syncs; the sync service and the peer endpoint start them through it. */
  runner: SyncRunner;
  /** Starts the runner and the schedules; called once the server listens. */
  start(): Promise<void>;
  /** Stops the schedules; running syncs stop at their next batch and are marked failed. */
  stop(): Promise<void>;
}

/**
 * Builds collaboration's jobs: the peer notifier, the sync runner and the sync scheduler. They
 * depend on the database and the repositories only, so they are built before the services,
 * which are handed the notifier and the runner in their constructors.
 */
export function createSyncJobs(options: SyncJobOptions): SyncJobs {
  const { db, staleMs, onError } = options;
  const peers = new PeerClient(options.guard, options.keys);
  const selfId = organizationId(db);
  const notifier = new PeerNotifier({ db, peers, selfId, onError });
  const runner = new SyncRunner({ db, peers, selfId, staleMs, onError });
  const scheduler = new SyncScheduler({ db, runner, notifier, selfId, staleMs, onError });
  return {
    notifier,
    runner,
    async start() {
      await runner.start();
      await scheduler.start();
      await notifier.start();
    },
    async stop() {
      scheduler.stop();
      await Promise.all([runner.stop(), notifier.stop()]);
    },
  };
}

/** The organization's id, read once: it is made at the first start and never changes. */
function organizationId(db: Db): () => Promise<string> {
  let id: string | undefined;
  return async () => {
    if (id === undefined) {
      const org = await findOrganization(db.kysely);
      if (!org) throw new Error("the organization has not been created; run migrations and start-up first");
      id = org.id;
    }
    return id;
  };
}
