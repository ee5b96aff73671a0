import { later, type Queryable } from "../db/database.js";
import type { SyncJobTable, SyncScheduleTable, SyncStatus } from "../db/schema.js";
import { nextFire } from "./sync-schedule.js";
import type { TaskResult } from "./sync-task.js";
import { recordSyncSuccess } from "./workspace.repository.js";

/**
 * Sync jobs and schedules. A job is running while its status is one of `RUNNING`; a unique index
 * over running jobs keeps one per workspace (migration 0006). A schedule's `next_fire` is derived
 * here from its start and interval, whatever changes it.
 */

export const RUNNING: readonly SyncStatus[] = ["submitted", "started", "in_progress"];

export type ExecType = SyncJobTable["exec_type"];

// ---------------------------------------------------------------- jobs

/**
 * Inserts a submitted job; fails with a unique violation while another job of the workspace runs
 * (on PostgreSQL at the transaction's commit, which the insert travels with: `later`).
 */
export async function insertJob(
  q: Queryable,
  job: { id: string; workspaceId: string; collaborationId: string; execType: ExecType },
  now: number,
): Promise<void> {
  await later(
    q,
    q
      .insertInto("sync_jobs")
      .values({
        id: job.id,
        workspace_id: job.workspaceId,
        collaboration_id: job.collaborationId,
        exec_type: job.execType,
        status: "submitted",
        created: now,
        start_time: now,
        end_time: -1,
        heartbeat: now,
        summary: "Submitted.",
        results: "[]",
      })
      .compile(),
  );
}

export function findRunningJob(q: Queryable, workspaceId: string): Promise<SyncJobTable | undefined> {
  return q
    .selectFrom("sync_jobs")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("status", "in", [...RUNNING])
    .executeTakeFirst();
}

/** A job known to exist (one this process submitted). */
export function findJob(q: Queryable, id: string): Promise<SyncJobTable> {
  return q.selectFrom("sync_jobs").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
}

export function findJobOf(
  q: Queryable,
  workspaceId: string,
  syncId: string,
): Promise<SyncJobTable | undefined> {
  return q
    .selectFrom("sync_jobs")
    .selectAll()
    .where("id", "=", syncId)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}

/** A workspace's latest jobs, newest first. */
export function listJobs(q: Queryable, workspaceId: string, limit: number): Promise<SyncJobTable[]> {
  return q
    .selectFrom("sync_jobs")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .orderBy("created", "desc")
    .limit(limit)
    .execute();
}

export function jobTasks(row: SyncJobTable): TaskResult[] {
  return JSON.parse(row.results) as TaskResult[];
}

/** Updates a running job; false when it is no longer running. */
export async function updateRunningJob(
  q: Queryable,
  id: string,
  patch: Partial<Pick<SyncJobTable, "status" | "start_time" | "heartbeat" | "summary">>,
): Promise<boolean> {
  const r = await q
    .updateTable("sync_jobs")
    .set(patch)
    .where("id", "=", id)
    .where("status", "in", [...RUNNING])
    .executeTakeFirst();
  return Number(r.numUpdatedRows) > 0;
}

/**
 * Ends a running job with its outcome; a job that completed becomes its workspace's last
 * successful sync. A job no longer running (judged dead meanwhile) is left as it is.
 */
export async function finishJob(
  q: Queryable,
  job: { id: string; workspaceId: string },
  outcome: { status: SyncStatus; summary: string; tasks: readonly TaskResult[] },
  now: number,
): Promise<void> {
  const r = await q
    .updateTable("sync_jobs")
    .set({
      status: outcome.status,
      end_time: now,
      heartbeat: now,
      summary: outcome.summary,
      results: JSON.stringify(outcome.tasks),
    })
    .where("id", "=", job.id)
    .where("status", "in", [...RUNNING])
    .executeTakeFirst();
  if (Number(r.numUpdatedRows) > 0 && outcome.status === "completed")
    await recordSyncSuccess(q, job.workspaceId, now);
}

/** Marks running jobs failed: all of them (`heartbeatBefore` undefined) or those gone silent. */
export async function failRunningJobs(
  q: Queryable,
  reason: string,
  now: number,
  heartbeatBefore: number | undefined,
): Promise<void> {
  let u = q
    .updateTable("sync_jobs")
    .set({ status: "failed", end_time: now, summary: `Failed: ${reason}` })
    .where("status", "in", [...RUNNING]);
  if (heartbeatBefore !== undefined) u = u.where("heartbeat", "<", heartbeatBefore);
  // Nobody reads its answer: on PostgreSQL it travels with the COMMIT.
  await later(q, u.compile());
}

// ---------------------------------------------------------------- schedules

export function findSchedule(q: Queryable, workspaceId: string): Promise<SyncScheduleTable | undefined> {
  return q
    .selectFrom("sync_schedules")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}

/** Writes a schedule afresh (`replacing` the one the workspace has): it has not fired yet. */
export async function saveSchedule(
  q: Queryable,
  s: { workspaceId: string; startTime: number; intervalMs: number; repeatCount: number; paused: boolean },
  replacing: boolean,
  now: number,
): Promise<void> {
  const row: SyncScheduleTable = {
    workspace_id: s.workspaceId,
    start_time: s.startTime,
    interval_ms: s.intervalMs,
    repeat_count: s.repeatCount,
    fired: 0,
    next_fire: nextFire(s.startTime, s.intervalMs, now),
    state: s.paused ? "paused" : "active",
    modified: now,
  };
  if (replacing)
    await q.updateTable("sync_schedules").set(row).where("workspace_id", "=", s.workspaceId).execute();
  else await q.insertInto("sync_schedules").values(row).execute();
}

/** Deletes a workspace's schedule; false when it had none. */
export async function deleteSchedule(q: Queryable, workspaceId: string): Promise<boolean> {
  const r = await q.deleteFrom("sync_schedules").where("workspace_id", "=", workspaceId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** Pauses or resumes; resuming skips the fires missed while paused rather than running them all at once. */
export async function setScheduleState(
  q: Queryable,
  schedule: SyncScheduleTable,
  state: "active" | "paused",
  now: number,
): Promise<void> {
  await q
    .updateTable("sync_schedules")
    .set({
      state,
      modified: now,
      ...(state === "active" ? { next_fire: nextFire(schedule.start_time, schedule.interval_ms, now) } : {}),
    })
    .where("workspace_id", "=", schedule.workspace_id)
    .execute();
}

export type DueSchedule = Awaited<ReturnType<typeof dueSchedules>>[number];

/** Active schedules whose next fire time has come, with their workspace's collaboration. */
export function dueSchedules(q: Queryable, now: number) {
  return q
    .selectFrom("sync_schedules as s")
    .innerJoin("workspaces as w", "w.id", "s.workspace_id")
    .select([
      "s.workspace_id",
      "s.next_fire",
      "s.fired",
      "s.repeat_count",
      "s.start_time",
      "s.interval_ms",
      "w.collaboration_id",
    ])
    .where("s.state", "=", "active")
    .where("s.next_fire", "<=", now)
    .where("s.next_fire", ">=", 0)
    .execute();
}

/**
 * Counts a due fire and moves the schedule to its next one (or completes it after its last). The
 * conditional update is the claim: of nodes that saw the same due time, one gets true.
 */
export async function claimFire(q: Queryable, s: DueSchedule, now: number): Promise<boolean> {
  const fired = s.fired + 1;
  const last = s.repeat_count >= 0 && fired > s.repeat_count;
  const r = await q
    .updateTable("sync_schedules")
    .set({
      fired,
      next_fire: last ? -1 : nextFire(s.start_time, s.interval_ms, now + 1),
      state: last ? "completed" : "active",
      modified: now,
    })
    .where("workspace_id", "=", s.workspace_id)
    .where("next_fire", "=", s.next_fire)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}
