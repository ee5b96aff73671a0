import { type Db, isUniqueViolation } from "../db/database.js";
import type { AccessMode, SyncJobTable } from "../db/schema.js";
import { newId } from "../ids.js";
import { findHost, listGuests } from "./collaboration.repository.js";
import {
  type HostState,
  type Notifier,
  receives,
  sends,
  type WorkspaceConfig,
} from "./collaboration-types.js";
import { dropCollaboration } from "./drop-cascade.js";
import { applyHostState } from "./host-state.js";
import { CALL_REFUSED, PARTICIPATION_ENDED, PeerCallFailed, type PeerClient } from "./peer.js";
import {
  admitExport,
  answerProblem,
  BATCH_BYTES,
  BATCH_ITEMS,
  type CallLimits,
  itemLimits,
  MAX_TRANSPORT_BYTES,
  MB,
  type Offered,
} from "./peer-messages.js";
import {
  applyItems,
  difference,
  exportItems,
  type Holdings,
  holdings,
  type ItemResult,
  type OfferEntry,
  offer,
  offerFingerprint,
  withdrawItems,
} from "./replication.js";
import {
  claimFire,
  dueSchedules,
  type ExecType,
  failRunningJobs,
  findRunningJob,
  finishJob,
  insertJob,
  updateRunningJob,
} from "./sync.repository.js";
import { failTask, finishTask, newTask, record, summarize, type TaskResult } from "./sync-task.js";
import {
  findLink,
  findWorkspaceById,
  modesOf,
  realtimeLinks,
  workspaceConfig,
} from "./workspace.repository.js";

/**
 * Syncs (`wire.md` §8): jobs, their one-at-a-time rule, schedules and realtime triggers. What
 * administrators call is `sync.service.ts`; what the other portal calls, `peer-endpoint.ts`.
 *
 * A sync runs on a guest. It first asks the host for the collaboration's current state (access
 * modes, workspaces, delete policies; a guest the host removed learns it here), then moves items
 * in each direction the two access modes allow, comparing what the sender offers (items shared to
 * its linked group, received copies excluded) with what the receiver holds (its copies, by origin
 * id and version). Only the difference moves, in bounded batches, each item in its own
 * transaction on the receiver. Nothing is staged in temporary files, so a sync that fails or
 * whose process dies leaves no files behind, and the next sync resumes from what was stored.
 */

/** Debounce of realtime triggers: changes within this window make one sync. */
const REALTIME_DELAY_MS = 500;

export interface SyncOptions {
  db: Db;
  peers: PeerClient;
  /** This portal's organization id: the sender of every peer call. */
  selfId: () => Promise<string>;
  notifier: Notifier;
  staleMs: number;
  onError: (err: unknown, what: string) => void;
}

export class SyncEngine {
  private readonly db: Db;
  private readonly peers: PeerClient;
  private readonly selfId: () => Promise<string>;
  private readonly notifier: Notifier;
  private readonly staleMs: number;
  private readonly onError: SyncOptions["onError"];
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly running = new Map<string, Promise<void>>();
  /** Workspaces whose scheduled or realtime sync arrived while one ran: started when it ends. */
  private readonly deferred = new Map<string, ExecType>();
  private readonly fingerprints = new Map<string, string>();
  private realtimeTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private abort = new AbortController();

  constructor(options: SyncOptions) {
    this.db = options.db;
    this.peers = options.peers;
    this.selfId = options.selfId;
    this.notifier = options.notifier;
    this.staleMs = options.staleMs;
    this.onError = options.onError;
  }

  async start(): Promise<void> {
    if (this.db.engine === "sqlite") {
      // One process owns an SQLite store: a job still marked running was cut off by a stop.
      await this.failJobs("the portal stopped while the sync ran; start a new sync", undefined);
    }
    await this.sweepStale();
    await this.realtimeCheck(true);
    const every = (ms: number, work: () => Promise<void>, what: string) => {
      const t = setInterval(() => {
        if (!this.stopping) work().catch((err: unknown) => this.onError(err, what));
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    every(
      Math.max(1000, Math.floor(this.staleMs / 2)),
      () => this.sweepStale(),
      "sweeping dead syncs failed",
    );
    every(1000, () => this.fireSchedules(), "firing sync schedules failed");
    this.db.feed.subscribe("events", () => {
      if (this.stopping || this.realtimeTimer) return;
      this.realtimeTimer = setTimeout(() => {
        this.realtimeTimer = undefined;
        this.realtimeCheck(false).catch((err: unknown) => this.onError(err, "realtime sync check failed"));
      }, REALTIME_DELAY_MS);
    });
  }

  /** Stops timers; running syncs stop at their next batch and are marked failed. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    if (this.realtimeTimer) clearTimeout(this.realtimeTimer);
    this.abort.abort();
    await Promise.allSettled([...this.running.values()]);
  }

  // ---------------------------------------------------------------- jobs

  /** Inserts a job; answers its id, or the running job that kept it from starting. */
  async submit(
    collaborationId: string,
    workspaceId: string,
    execType: ExecType,
  ): Promise<string | SyncJobTable> {
    await this.sweepStale();
    const id = newId();
    const now = Date.now();
    try {
      await this.db.transaction((trx) => insertJob(trx, { id, workspaceId, collaborationId, execType }, now));
      return id;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      const running = await findRunningJob(this.db.kysely, workspaceId);
      if (!running) return this.submit(collaborationId, workspaceId, execType);
      return running;
    }
  }

  launch(jobId: string, collaborationId: string, workspaceId: string): Promise<void> {
    const run = this.run(jobId, collaborationId, workspaceId)
      .catch((err: unknown) => this.onError(err, `sync ${jobId} failed`))
      .finally(() => {
        this.running.delete(jobId);
        const again = this.deferred.get(workspaceId);
        if (again && !this.stopping) {
          this.deferred.delete(workspaceId);
          void this.startBackground(collaborationId, workspaceId, again);
        }
      });
    this.running.set(jobId, run);
    return run;
  }

  /** Starts a scheduled or realtime sync; when one runs, it starts once that one ends. */
  async startBackground(collaborationId: string, workspaceId: string, execType: ExecType) {
    const job = await this.submit(collaborationId, workspaceId, execType);
    if (typeof job === "object") {
      this.deferred.set(workspaceId, execType);
      // A sync running on another node finishes there; recheck once it should have.
      if (!this.isLocal(job.id))
        setTimeout(() => this.retryDeferred(collaborationId, workspaceId), 2000).unref();
      return;
    }
    // Not awaited: a schedule tick or realtime check starts syncs and goes on.
    void this.launch(job, collaborationId, workspaceId);
  }

  private isLocal(jobId: string) {
    return this.running.has(jobId);
  }

  private retryDeferred(collaborationId: string, workspaceId: string) {
    const again = this.deferred.get(workspaceId);
    if (!again || this.stopping) return;
    this.deferred.delete(workspaceId);
    this.startBackground(collaborationId, workspaceId, again).catch((err: unknown) =>
      this.onError(err, "deferred sync failed"),
    );
  }

  /** Updates a running job; false when it is no longer running. */
  private setJob(jobId: string, patch: Parameters<typeof updateRunningJob>[2]): Promise<boolean> {
    return this.db.transaction((trx) => updateRunningJob(trx, jobId, patch));
  }

  private async run(jobId: string, collaborationId: string, workspaceId: string): Promise<void> {
    const lost = { value: false };
    const heartbeat = setInterval(
      () => {
        this.setJob(jobId, { heartbeat: Date.now() })
          .then((updated) => {
            // Marked failed meanwhile (judged dead after a long stall): stop, a new sync may run.
            if (!updated) lost.value = true;
          })
          .catch((err: unknown) => this.onError(err, "sync heartbeat failed"));
      },
      Math.max(500, Math.floor(this.staleMs / 4)),
    );
    heartbeat.unref();
    const tasks: TaskResult[] = [];
    try {
      await this.setJob(jobId, {
        status: "started",
        start_time: Date.now(),
        heartbeat: Date.now(),
        summary: "Started.",
      });
      const selfId = await this.selfId();
      // The host's view wins: modes, workspaces, policies, and whether this portal still takes part.
      const state = await this.call<HostState>(
        await this.hostOf(collaborationId),
        collaborationId,
        "state",
        {},
      );
      const still = await applyHostState(this.db, selfId, collaborationId, state);
      const host = await this.hostOf(collaborationId).catch(() => undefined);
      const workspace = still ? await findWorkspaceById(this.db.kysely, workspaceId) : undefined;
      if (!workspace || !host)
        throw new JobFailed("the workspace was deleted by the host; replication through it has ended");
      const link = await findLink(this.db.kysely, workspaceId);
      if (!link)
        throw new JobFailed(
          "no group is linked to this workspace on this portal; link one with updatePortalGroupLink",
        );
      const modes =
        (await modesOf(this.db.kysely, [workspaceId])).get(workspaceId) ?? new Map<string, AccessMode>();
      const config = workspaceConfig(workspace);
      const budget = { bytes: config.maxReplicationPackageSizeInMB * MB };
      await this.setJob(jobId, { status: "in_progress", summary: "Moving items." });
      const ctx = {
        collaborationId,
        workspaceId,
        groupId: link.group_id,
        selfId,
        host,
        config,
        budget,
        lost,
      };
      if (sends(modes.get(host.portal_id)) && receives(modes.get(selfId)))
        tasks.push(await this.receive(ctx));
      if (sends(modes.get(selfId)) && receives(modes.get(host.portal_id))) tasks.push(await this.send(ctx));
      if (tasks.length === 0) {
        throw new JobFailed(
          "the access modes move nothing between this portal and the host in this workspace",
        );
      }
      const failedTasks = tasks.filter((t) => t.status === "failed").length;
      const status: SyncJobTable["status"] =
        failedTasks === tasks.length
          ? "failed"
          : tasks.some((t) => t.status !== "completed")
            ? "completed_with_failures"
            : "completed";
      const job = { id: jobId, workspaceId };
      const outcome = { status, summary: summarize(tasks), tasks };
      await this.db.transaction((trx) => finishJob(trx, job, outcome, Date.now()));
    } catch (err) {
      const reason =
        err instanceof JobFailed || err instanceof PeerCallFailed
          ? err.message
          : `internal error: ${(err as Error).message}`;
      if (!(err instanceof JobFailed || err instanceof PeerCallFailed)) this.onError(err, `sync ${jobId}`);
      const job = { id: jobId, workspaceId };
      const outcome = { status: "failed" as const, summary: `Failed: ${reason}`, tasks };
      await this.db.transaction((trx) => finishJob(trx, job, outcome, Date.now()));
    } finally {
      clearInterval(heartbeat);
    }
  }

  private hostOf(collaborationId: string) {
    return findHost(this.db.kysely, collaborationId);
  }

  private async call<T>(
    to: { portal_url: string; portal_id: string },
    collaborationId: string,
    op: string,
    body: Record<string, unknown>,
  ): Promise<T> {
    if (this.abort.signal.aborted) throw new JobFailed("the portal is stopping; start the sync again");
    let answer: unknown;
    try {
      answer = await this.peers.call<unknown>(to.portal_url, {
        collaborationId,
        from: await this.selfId(),
        to: to.portal_id,
        op,
        body,
      });
    } catch (err) {
      if (err instanceof PeerCallFailed && err.messageCode === PARTICIPATION_ENDED) {
        // The host deleted the collaboration or removed this portal: replication has ended here too.
        const selfId = await this.selfId();
        await this.db.transaction((trx) => dropCollaboration(trx, selfId, collaborationId));
        throw new JobFailed(`the host ended this portal's participation (${err.message})`);
      }
      if (err instanceof PeerCallFailed && err.messageCode === CALL_REFUSED) {
        // The host tells an unknown caller nothing more, so the likely cause is said here.
        throw new JobFailed(
          `${err.message}; a host refuses a guest's calls until its administrator imports the guest's invitation response`,
        );
      }
      throw err;
    }
    // Signed calls prove who answers, not that the answer is sound: its shape is checked first.
    const problem = answerProblem(op, answer);
    if (problem) throw new JobFailed(`the answer of ${to.portal_url} to '${op}' was refused: it ${problem}`);
    return answer as T;
  }

  /** Items the host offers that this portal lacks or holds an older version of. */
  private async receive(ctx: SyncContext): Promise<TaskResult> {
    const task = newTask(ctx.host.portal_id, ctx.host.portal_url, "receive");
    try {
      const { items: entries } = await this.call<{ items: OfferEntry[] }>(
        ctx.host,
        ctx.collaborationId,
        "offer",
        { workspaceId: ctx.workspaceId },
      );
      const held = await holdings(this.db.kysely, ctx.workspaceId, ctx.host.portal_id);
      const { changed, gone } = difference(entries, held);
      const target = {
        workspaceId: ctx.workspaceId,
        originPortalId: ctx.host.portal_id,
        groupId: ctx.groupId,
      };
      const deleteContributed = ctx.host.delete_contributed === 1;
      // The package budget was charged for each item's size in the offer.
      const offered: Offered = new Map(changed.map((e) => [e.id, e]));
      const fetchAndApply = async (ids: string[]) => {
        const { items } = await this.call<{ items: unknown[] }>(ctx.host, ctx.collaborationId, "export", {
          workspaceId: ctx.workspaceId,
          ids,
        });
        if (items.length > ids.length)
          throw new JobFailed(
            `the answer of ${ctx.host.portal_url} to 'export' was refused: it has ${items.length} entries for ${ids.length} requested items`,
          );
        return this.applyExports(
          target,
          items,
          ids,
          itemLimits(ctx.config, ctx.budget),
          offered,
          deleteContributed,
        );
      };
      await this.moveInBatches(task, ctx, changed, fetchAndApply);
      await this.withdrawInBatches(task, ctx, gone, fetchAndApply);
    } catch (err) {
      failTask(task, err);
    }
    return finishTask(task);
  }

  /** This portal's items the host lacks or holds an older version of. */
  private async send(ctx: SyncContext): Promise<TaskResult> {
    const task = newTask(ctx.host.portal_id, ctx.host.portal_url, "send");
    try {
      const entries = await offer(this.db.kysely, ctx.groupId);
      const { holdings: held } = await this.call<{ holdings: Holdings }>(
        ctx.host,
        ctx.collaborationId,
        "holdings",
        { workspaceId: ctx.workspaceId },
      );
      const { changed, gone } = difference(entries, held);
      await this.moveInBatches(task, ctx, changed, async (ids) => {
        const exports = await exportItems(this.db.kysely, ctx.groupId, ids);
        const present = exports.flatMap((e) => (e.state === "present" ? [e.item] : []));
        const missing = exports.flatMap((e) => (e.state === "present" ? [] : [{ id: e.id, state: e.state }]));
        const results: ItemResult[] = [];
        if (present.length > 0) {
          const r = await this.call<{ results: ItemResult[] }>(ctx.host, ctx.collaborationId, "apply", {
            workspaceId: ctx.workspaceId,
            items: present,
          });
          results.push(...r.results);
        }
        if (missing.length > 0) {
          const r = await this.call<{ results: ItemResult[] }>(ctx.host, ctx.collaborationId, "withdraw", {
            workspaceId: ctx.workspaceId,
            gone: missing,
          });
          results.push(...r.results);
        }
        return results;
      });
      await this.withdrawInBatches(task, ctx, gone, async (ids) => {
        const exports = await exportItems(this.db.kysely, ctx.groupId, ids);
        const states = exports.map((e) => ({
          id: e.id,
          state: e.state === "present" ? ("unshared" as const) : e.state,
        }));
        const r = await this.call<{ results: ItemResult[] }>(ctx.host, ctx.collaborationId, "withdraw", {
          workspaceId: ctx.workspaceId,
          gone: states,
        });
        return r.results;
      });
    } catch (err) {
      failTask(task, err);
    }
    return finishTask(task);
  }

  /** Applies a host's `export` answer to `requested`: only what was asked for, and only sound items. */
  private async applyExports(
    target: Target,
    entries: readonly unknown[],
    requested: readonly string[],
    limits: CallLimits,
    offered: Offered,
    deleteContributed: boolean,
  ): Promise<ItemResult[]> {
    const { accepted, gone, refused } = admitExport(entries, requested, limits, offered);
    const [applied, withdrawn] = await Promise.all([
      applyItems(this.db, target, accepted),
      withdrawItems(this.db, target, gone, deleteContributed),
    ]);
    return [...applied, ...withdrawn, ...refused];
  }

  /**
   * Moves `changed` in batches: items over the workspace's size limit fail at once, items past the
   * sync's package budget wait for the next sync, and a batch whose call fails leaves the rest
   * not processed, with the reason.
   */
  private async moveInBatches(
    task: TaskResult,
    ctx: SyncContext,
    changed: readonly OfferEntry[],
    move: (ids: string[]) => Promise<ItemResult[]>,
  ) {
    const maxItem = Math.min(ctx.config.maxItemSizeInMB * MB, MAX_TRANSPORT_BYTES);
    const queue: OfferEntry[] = [];
    for (const e of changed) {
      if (e.size > maxItem) {
        task.failed.push({
          id: e.id,
          title: e.title,
          reason:
            e.size > MAX_TRANSPORT_BYTES
              ? `its size (${(e.size / MB).toFixed(1)} MB) is over what one peer call carries (${MAX_TRANSPORT_BYTES / MB} MB)`
              : `its size (${(e.size / MB).toFixed(1)} MB) is over the workspace's maxItemSizeInMB (${ctx.config.maxItemSizeInMB})`,
        });
      } else if (e.size > ctx.budget.bytes) {
        task.notProcessed.push({
          id: e.id,
          title: e.title,
          reason: "the sync reached the workspace's maxReplicationPackageSizeInMB; it moves on the next sync",
        });
      } else {
        ctx.budget.bytes -= e.size;
        queue.push(e);
      }
    }
    let i = 0;
    while (i < queue.length) {
      const batch: OfferEntry[] = [];
      let bytes = 0;
      while (
        i < queue.length &&
        batch.length < BATCH_ITEMS &&
        (batch.length === 0 || bytes + (queue[i] as OfferEntry).size <= BATCH_BYTES)
      ) {
        const e = queue[i++] as OfferEntry;
        batch.push(e);
        bytes += e.size;
      }
      try {
        checkLost(ctx);
        record(task, await move(batch.map((e) => e.id)));
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        for (const e of [...batch, ...queue.slice(i)])
          task.notProcessed.push({ id: e.id, title: e.title, reason });
        throw err;
      }
    }
  }

  private async withdrawInBatches(
    task: TaskResult,
    ctx: SyncContext,
    gone: readonly string[],
    move: (ids: string[]) => Promise<ItemResult[]>,
  ) {
    for (let i = 0; i < gone.length; i += BATCH_ITEMS) {
      const batch = gone.slice(i, i + BATCH_ITEMS);
      try {
        checkLost(ctx);
        record(task, await move(batch));
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        for (const id of gone.slice(i)) task.notProcessed.push({ id, title: id, reason });
        throw err;
      }
    }
  }

  /** Marks running jobs failed: all of them (`heartbeatBefore` undefined) or those gone silent. */
  private async failJobs(reason: string, heartbeatBefore: number | undefined) {
    await this.db.transaction((trx) => failRunningJobs(trx, reason, Date.now(), heartbeatBefore));
  }

  /** A job whose heartbeat stopped belonged to a process that died: it fails, freeing the workspace. */
  async sweepStale(): Promise<void> {
    await this.failJobs(
      `the sync stopped reporting progress for ${Math.round(this.staleMs / 1000)} s (its process stopped); start a new sync`,
      Date.now() - this.staleMs,
    );
  }

  /** Fires due schedules. The conditional update is the claim: one node fires each due time. */
  private async fireSchedules() {
    const now = Date.now();
    for (const s of await dueSchedules(this.db.kysely, now)) {
      const claimed = await this.db.transaction((trx) => claimFire(trx, s, now));
      if (claimed) await this.startBackground(s.collaboration_id, s.workspace_id, "scheduled");
    }
  }

  // ---------------------------------------------------------------- realtime

  /**
   * Realtime links react to changes of what their group offers: a guest syncs; the host tells the
   * guests that receive. `offerFingerprint` says whether the offer changed.
   */
  private async realtimeCheck(initial: boolean) {
    const links = await realtimeLinks(this.db.kysely);
    for (const link of links) {
      const print = await offerFingerprint(this.db.kysely, link.group_id);
      const before = this.fingerprints.get(link.workspace_id);
      this.fingerprints.set(link.workspace_id, print);
      if (initial || before === print) continue;
      if (link.role === "guest") {
        await this.startBackground(link.collaboration_id, link.workspace_id, "realtime");
      } else {
        const selfId = await this.selfId();
        const modes = (await modesOf(this.db.kysely, [link.workspace_id])).get(link.workspace_id);
        if (!sends(modes?.get(selfId))) continue;
        const guests = await listGuests(this.db.kysely, link.collaboration_id);
        for (const g of guests) {
          if (receives(modes?.get(g.portal_id)))
            this.notifier.tell(g.portal_url, link.collaboration_id, g.portal_id, "nudge", {
              workspaceId: link.workspace_id,
            });
        }
      }
    }
  }
}

interface Target {
  workspaceId: string;
  originPortalId: string;
  groupId: string;
}

interface SyncContext {
  collaborationId: string;
  workspaceId: string;
  groupId: string;
  selfId: string;
  host: { portal_id: string; portal_url: string; delete_contributed: number };
  config: WorkspaceConfig;
  budget: { bytes: number };
  /** Set when the job was marked failed while it ran (it stalled past the dead-sync limit). */
  lost: { value: boolean };
}

class JobFailed extends Error {}

function checkLost(ctx: SyncContext) {
  if (ctx.lost.value) {
    throw new JobFailed("the sync stalled past the dead-sync limit and was marked failed; start a new sync");
  }
}
