import { claimPrint } from "../collaboration/cluster-sync.repository.js";
import { listGuests } from "../collaboration/collaboration.repository.js";
import { type Notifier, receives, sends } from "../collaboration/collaboration-types.js";
import { offerFingerprint } from "../collaboration/replication.js";
import { claimFire, dueSchedules } from "../collaboration/sync.repository.js";
import { modesOf, realtimeLinks } from "../collaboration/workspace.repository.js";
import type { Db } from "../db/database.js";
import type { SyncRunner } from "./sync-runner.js";

/** Debounce of realtime triggers: changes within this window make one sync. */
const REALTIME_DELAY_MS = 500;

export interface SyncSchedulerOptions {
  db: Db;
  runner: Pick<SyncRunner, "startBackground" | "sweepStale" | "startFreeDeferred">;
  /** Tells the guests of a realtime link on a host that there is something new. */
  notifier: Notifier;
  /** This portal's organization id. */
  selfId: () => Promise<string>;
  /** A sync whose heartbeat is older than this is taken for dead (`Config.syncStaleSeconds`). */
  staleMs: number;
  onError: (err: unknown, what: string) => void;
}

/**
 * What starts syncs without an administrator: sync schedules coming due, and realtime links
 * whose group's offer changed. Also sweeps syncs whose process died, so that their workspace is
 * free again without waiting for the next sync request.
 */
export class SyncScheduler {
  private readonly timers: NodeJS.Timeout[] = [];
  private realtimeTimer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(private readonly options: SyncSchedulerOptions) {}

  async start(): Promise<void> {
    const { db, runner, staleMs, onError } = this.options;
    await runner.sweepStale();
    // Changes made while this node (or every node) was down are seen now.
    await this.realtimeCheck();
    const every = (ms: number, work: () => Promise<void>, what: string) => {
      const t = setInterval(() => {
        if (!this.stopping) work().catch((err: unknown) => onError(err, what));
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(Math.max(1000, Math.floor(staleMs / 2)), () => runner.sweepStale(), "sweeping dead syncs failed");
    every(1000, () => this.fireSchedules(), "firing sync schedules failed");
    every(1000, () => runner.startFreeDeferred(), "starting deferred syncs failed");
    db.feed.subscribe("events", () => {
      if (this.stopping || this.realtimeTimer) return;
      this.realtimeTimer = setTimeout(() => {
        this.realtimeTimer = undefined;
        this.realtimeCheck().catch((err: unknown) => onError(err, "realtime sync check failed"));
      }, REALTIME_DELAY_MS);
    });
  }

  stop(): void {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    if (this.realtimeTimer) clearTimeout(this.realtimeTimer);
  }

  /** Fires due schedules. The conditional update is the claim: one node fires each due time. */
  private async fireSchedules() {
    const { db, runner } = this.options;
    const now = Date.now();
    for (const s of await dueSchedules(db.kysely, now)) {
      const claimed = await db.transaction((trx) => claimFire(trx, s, now));
      if (claimed) await runner.startBackground(s.collaboration_id, s.workspace_id, "scheduled");
    }
  }

  /**
   * Realtime links react to changes of what their group offers: a guest syncs; the host tells the
   * guests that receive. `offerFingerprint` says whether the offer changed since the fingerprint
   * recorded in the database; the node whose conditional update records the new one acts, so
   * each change is acted on once in a cluster, and a change made while the nodes were down is
   * acted on at the next start. Turning realtime on records the fingerprint changes are told
   * from (`startPrint`); a link without one (turned on before it was recorded so) is acted on at
   * its first check, on both sides: that check is the one a change wakes, and its fingerprint
   * already holds the change, so taking it as a mere baseline would lose the change.
   */
  private async realtimeCheck() {
    const { db, runner, notifier } = this.options;
    const links = await realtimeLinks(db.kysely);
    for (const link of links) {
      const print = await offerFingerprint(db.kysely, link.group_id);
      if (link.role === "guest") {
        const seen = await db.transaction((trx) => claimPrint(trx, link.workspace_id, print, Date.now()));
        if (seen !== "same")
          await runner.startBackground(link.collaboration_id, link.workspace_id, "realtime");
        continue;
      }
      const selfId = await this.options.selfId();
      // The nudges are queued in the transaction that records the fingerprint: both or neither.
      await db.transaction(async (trx) => {
        if ((await claimPrint(trx, link.workspace_id, print, Date.now())) === "same") return;
        const modes = (await modesOf(trx, [link.workspace_id])).get(link.workspace_id);
        if (!sends(modes?.get(selfId))) return;
        for (const g of await listGuests(trx, link.collaboration_id)) {
          if (receives(modes?.get(g.portal_id)))
            await notifier.tell(trx, g, link.collaboration_id, "nudge", { workspaceId: link.workspace_id });
        }
      });
    }
  }
}
