import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import type { SyncJobTable, SyncScheduleTable } from "../db/schema.js";
import { errors } from "../errors.js";
import { mustFindCollaboration, mustFindWorkspace } from "./collaboration-checks.js";
import { COLLABORATION_PRIVILEGE, type SyncStarter } from "./collaboration-types.js";
import {
  deleteSchedule,
  findJob,
  findJobOf,
  findSchedule,
  jobTasks,
  listJobs,
  saveSchedule,
  setScheduleState,
} from "./sync.repository.js";

/**
 * Syncs as administrators see them (`wire.md` §8): starting one, following its jobs, and the
 * schedules that start them on a guest. The jobs themselves run in `src/jobs`.
 */
export class SyncService {
  constructor(
    private readonly db: Db,
    /** Runs the syncs this service starts. */
    private readonly syncs: Pick<SyncStarter, "submit" | "launch">,
  ) {}

  /**
   * Starts a sync of a workspace (guest side). Refused, naming the running sync, while one runs.
   * Answers the job's id and, when `wait` is set, how the job finished.
   */
  async requestSync(
    caller: Caller | null,
    collaborationId: string,
    workspaceId: string,
    wait: boolean,
  ): Promise<{ jobId: string; finished?: Pick<SyncJobTable, "status" | "summary"> }> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    if (collab.role !== "guest") {
      throw errors.syncsStartedByGuests();
    }
    await mustFindWorkspace(this.db.kysely, collaborationId, workspaceId);
    const job = await this.syncs.submit(collaborationId, workspaceId, "manual");
    if (typeof job === "object") {
      throw errors.syncAlreadyRunning(job.id, job.status, job.start_time);
    }
    const done = this.syncs.launch(job, collaborationId, workspaceId);
    if (wait) {
      await done;
      const row = await findJob(this.db.kysely, job);
      return { jobId: job, finished: { status: row.status, summary: row.summary } };
    }
    return { jobId: job };
  }

  async status(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await mustFindWorkspace(this.db.kysely, collaborationId, workspaceId);
    const rows = await listJobs(this.db.kysely, workspaceId, 100);
    return { status: rows.map(jobJson) };
  }

  async statusOf(caller: Caller | null, collaborationId: string, workspaceId: string, syncId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await mustFindWorkspace(this.db.kysely, collaborationId, workspaceId);
    const row = await findJobOf(this.db.kysely, workspaceId, syncId);
    if (!row) throw errors.notFound(`Sync '${syncId}'`);
    const tasks = jobTasks(row);
    return {
      ...jobJson(row),
      participantTasks: tasks.map((t) => ({
        participantId: t.participantId,
        portalUrl: t.portalUrl,
        direction: t.direction,
        status: t.status,
        ...(t.error ? { error: t.error } : {}),
        succeededCount: t.succeeded.length,
        failedCount: t.failed.length,
        notProcessedCount: t.notProcessed.length,
        succeeded: t.succeeded,
        failed: t.failed,
        notProcessed: t.notProcessed,
        ...(t.featureData ? { featureData: t.featureData } : {}),
      })),
    };
  }

  async schedule(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await mustFindWorkspace(this.db.kysely, collaborationId, workspaceId);
    const row = await findSchedule(this.db.kysely, workspaceId);
    if (!row) throw errors.notFound(`A sync schedule of workspace '${workspaceId}'`);
    return scheduleJson(row);
  }

  async updateSchedule(
    caller: Caller | null,
    collaborationId: string,
    workspaceId: string,
    input: {
      startTime?: number | undefined;
      interval?: number | undefined;
      repeatCount?: number | undefined;
    },
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.guestWorkspace(collaborationId, workspaceId);
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const current = await findSchedule(trx, workspaceId);
      const intervalMs =
        input.interval !== undefined ? Math.round(input.interval * 3600_000) : current?.interval_ms;
      if (intervalMs === undefined) throw errors.missingParameter("interval");
      const schedule = {
        workspaceId,
        startTime: input.startTime ?? current?.start_time ?? now,
        intervalMs,
        repeatCount: input.repeatCount ?? current?.repeat_count ?? -1,
        paused: current?.state === "paused",
      };
      await saveSchedule(trx, schedule, current !== undefined, now);
    });
  }

  async deleteSchedule(caller: Caller | null, collaborationId: string, workspaceId: string): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.guestWorkspace(collaborationId, workspaceId);
    await this.db.transaction(async (trx) => {
      if (!(await deleteSchedule(trx, workspaceId)))
        throw errors.notFound(`A sync schedule of workspace '${workspaceId}'`);
    });
  }

  async setScheduleState(
    caller: Caller | null,
    collaborationId: string,
    workspaceId: string,
    state: "active" | "paused",
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.guestWorkspace(collaborationId, workspaceId);
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const row = await findSchedule(trx, workspaceId);
      if (!row) throw errors.notFound(`A sync schedule of workspace '${workspaceId}'`);
      if (row.state === "completed")
        throw errors.conflict("The schedule has fired its last time; update it to start again.");
      await setScheduleState(trx, row, state, now);
    });
  }

  private async guestWorkspace(collaborationId: string, workspaceId: string) {
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    if (collab.role !== "guest") {
      throw errors.schedulesKeptByGuests();
    }
    await mustFindWorkspace(this.db.kysely, collaborationId, workspaceId);
  }
}

function jobJson(row: SyncJobTable) {
  return {
    syncId: row.id,
    syncExecType: row.exec_type,
    startTime: row.start_time,
    endTime: row.end_time,
    status: row.status,
    summary: row.summary,
  };
}

function scheduleJson(row: SyncScheduleTable) {
  return {
    workspaceId: row.workspace_id,
    startTime: row.start_time,
    interval: row.interval_ms / 3600_000,
    repeatCount: row.repeat_count,
    fired: row.fired,
    nextFireTime: row.next_fire,
    state: row.state,
  };
}
