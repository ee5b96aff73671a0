import { claimDeferred, deferSync, freeDeferred } from "../collaboration/cluster-sync.repository.js";
import { findHost } from "../collaboration/collaboration.repository.js";
import { type HostState, receives, type SyncStarter, sends } from "../collaboration/collaboration-types.js";
import { dropCollaboration } from "../collaboration/drop-cascade.js";
import { applyHostState } from "../collaboration/host-state.js";
import {
  acceptedKeys,
  CALL_REFUSED,
  PARTICIPATION_ENDED,
  PeerCallFailed,
  type PeerClient,
  revokedKeys,
} from "../collaboration/peer.js";
import { answerProblem, MB } from "../collaboration/peer-messages.js";
import {
  type ExecType,
  failRunningJobs,
  findRunningJob,
  finishJob,
  insertJob,
  updateRunningJob,
} from "../collaboration/sync.repository.js";
import { jobStatus, summarize, type TaskResult } from "../collaboration/sync-task.js";
import {
  findLink,
  findWorkspaceById,
  modesOf,
  workspaceConfig,
} from "../collaboration/workspace.repository.js";
import { type Db, isUniqueViolation } from "../db/database.js";
import type { AccessMode, ParticipantTable, SyncJobTable } from "../db/schema.js";
import { newId } from "../ids.js";
import { JobFailed, receive, send } from "./sync-transfer.js";

export interface SyncRunnerOptions {
  db: Db;
  peers: PeerClient;
  /** This portal's organization id: the sender of every peer call. */
  selfId: () => Promise<string>;
  /** A sync whose heartbeat is older than this is taken for dead (`Config.syncStaleSeconds`). */
  staleMs: number;
  onError: (err: unknown, what: string) => void;
}

/**
 * Runs syncs (`wire.md` §8) on a guest, one at a time per workspace (a unique index over running
 * jobs, so on every node).
 *
 * A sync first asks the host for the collaboration's current state (access modes, workspaces,
 * delete policies; a guest the host removed learns it here), then moves items in each direction
 * the two access modes allow (`sync-transfer.ts`). The receiver stores a page of items in one
 * transaction (each item in one of its own when the page's fails). Nothing is staged in temporary
 * files, so a sync that fails or whose process dies leaves no files behind, and the next sync
 * resumes from what was stored. A running job beats a heartbeat; one whose heartbeat stops is
 * failed by `sweepStale`, here or on another node.
 */
export class SyncRunner implements SyncStarter {
  private readonly db: Db;
  private readonly peers: PeerClient;
  private readonly selfId: () => Promise<string>;
  private readonly staleMs: number;
  private readonly onError: SyncRunnerOptions["onError"];
  private readonly running = new Map<string, Promise<void>>();
  private stopping = false;
  private readonly abort = new AbortController();

  constructor(options: SyncRunnerOptions) {
    this.db = options.db;
    this.peers = options.peers;
    this.selfId = options.selfId;
    this.staleMs = options.staleMs;
    this.onError = options.onError;
  }

  async start(): Promise<void> {
    if (this.db.engine === "sqlite") {
      // One process owns an SQLite store: a job still marked running was cut off by a stop.
      await this.failJobs("the portal stopped while the sync ran; start a new sync", undefined);
    }
  }

  /** Running syncs stop at their next batch and are marked failed; resolves once they have. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort();
    await Promise.allSettled([...this.running.values()]);
  }

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
        if (!this.stopping)
          this.startDeferred(workspaceId).catch((err: unknown) => this.onError(err, "deferred sync failed"));
      });
    this.running.set(jobId, run);
    return run;
  }

  /**
   * Starts a scheduled or realtime sync; when one runs, it starts once that one ends. The waiting
   * sync is kept in the database (`sync_deferred`), so it outlives a restart, and whichever node
   * sees the workspace free first starts it: the node that ran the sync, as it ends, or any node's
   * scheduler (`startFreeDeferred`), when that node died.
   */
  async startBackground(collaborationId: string, workspaceId: string, execType: ExecType) {
    const job = await this.submit(collaborationId, workspaceId, execType);
    if (typeof job === "object") {
      if (execType === "manual") return;
      await this.db.transaction((trx) => deferSync(trx, collaborationId, workspaceId, execType, Date.now()));
      return;
    }
    // Not awaited: a schedule tick or realtime check starts syncs and goes on.
    void this.launch(job, collaborationId, workspaceId);
  }

  /** Starts the sync waiting for `workspaceId`, if there is one and this node claims it. */
  private async startDeferred(workspaceId: string): Promise<void> {
    const claimed = await this.db.transaction((trx) => claimDeferred(trx, workspaceId));
    if (claimed) await this.startBackground(claimed.collaboration_id, workspaceId, claimed.exec_type);
  }

  /** Starts the deferred syncs whose workspace is free (their sync ended on a node that died). */
  async startFreeDeferred(): Promise<void> {
    if (this.stopping) return;
    for (const d of await freeDeferred(this.db.kysely)) await this.startDeferred(d.workspace_id);
  }

  /** A job whose heartbeat stopped belonged to a process that died: it fails, freeing the workspace. */
  async sweepStale(): Promise<void> {
    await this.failJobs(
      `the sync stopped reporting progress for ${Math.round(this.staleMs / 1000)} s (its process stopped); start a new sync`,
      Date.now() - this.staleMs,
    );
  }

  /** Marks running jobs failed: all of them (`heartbeatBefore` undefined) or those gone silent. */
  private async failJobs(reason: string, heartbeatBefore: number | undefined) {
    await this.db.transaction((trx) => failRunningJobs(trx, reason, Date.now(), heartbeatBefore));
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
      // Side by side: on PostgreSQL each read is a round trip of its own.
      const [host, workspace, link, allModes] = await Promise.all([
        this.hostOf(collaborationId).catch(() => undefined),
        still ? findWorkspaceById(this.db.kysely, workspaceId) : undefined,
        findLink(this.db.kysely, workspaceId),
        modesOf(this.db.kysely, [workspaceId]),
      ]);
      if (!workspace || !host)
        throw new JobFailed("the workspace was deleted by the host; replication through it has ended");
      if (!link)
        throw new JobFailed(
          "no group is linked to this workspace on this portal; link one with updatePortalGroupLink",
        );
      const modes = allModes.get(workspaceId) ?? new Map<string, AccessMode>();
      const config = workspaceConfig(workspace);
      const budget = { bytes: config.maxReplicationPackageSizeInMB * MB };
      await this.setJob(jobId, { status: "in_progress", summary: "Moving items." });
      const ctx = {
        db: this.db,
        ask: <T>(op: string, body: Record<string, unknown>) => this.call<T>(host, collaborationId, op, body),
        workspaceId,
        groupId: link.group_id,
        host,
        config,
        budget,
        lost,
      };
      if (sends(modes.get(host.portal_id)) && receives(modes.get(selfId))) tasks.push(await receive(ctx));
      if (sends(modes.get(selfId)) && receives(modes.get(host.portal_id))) tasks.push(await send(ctx));
      if (tasks.length === 0) {
        throw new JobFailed(
          "the access modes move nothing between this portal and the host in this workspace",
        );
      }
      const job = { id: jobId, workspaceId };
      const outcome = { status: jobStatus(tasks), summary: summarize(tasks), tasks };
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
    to: Pick<ParticipantTable, "portal_url" | "portal_id" | "public_key" | "retired_keys">,
    collaborationId: string,
    op: string,
    body: Record<string, unknown>,
  ): Promise<T> {
    if (this.abort.signal.aborted) throw new JobFailed("the portal is stopping; start the sync again");
    let answer: unknown;
    try {
      answer = await this.peers.call<unknown>(
        to.portal_url,
        {
          collaborationId,
          from: await this.selfId(),
          to: to.portal_id,
          op,
          body,
        },
        acceptedKeys(to),
        { revokedKeys: revokedKeys(to) },
      );
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
}
