import type { SyncStatus } from "../db/schema.js";
import type { DataOutcome } from "./layer-copy.js";
import type { ItemResult } from "./replication.js";

/**
 * What a sync did with one participant in one direction: kept with its job (`sync_jobs.results`)
 * and shown by `syncStatus/<syncId>`.
 */

export interface ItemOutcome {
  id: string;
  title: string;
  action?: string;
  reason?: string;
}

export interface TaskResult {
  participantId: string;
  portalUrl: string;
  /** receive: items came from the participant; send: items went to it. */
  direction: "receive" | "send";
  status: "completed" | "completed_with_failures" | "failed";
  error?: string;
  succeeded: ItemOutcome[];
  failed: ItemOutcome[];
  notProcessed: ItemOutcome[];
  /** Hosted layers whose data was copied (`copyFeatureServiceData`): per item and layer, what moved. */
  featureData?: DataOutcome[];
}

export function newTask(participantId: string, portalUrl: string, direction: "receive" | "send"): TaskResult {
  return {
    participantId,
    portalUrl,
    direction,
    status: "completed",
    succeeded: [],
    failed: [],
    notProcessed: [],
  };
}

export function record(task: TaskResult, results: readonly ItemResult[]) {
  for (const r of results) {
    if (r.ok) task.succeeded.push({ id: r.id, title: r.title, ...(r.action ? { action: r.action } : {}) });
    else task.failed.push({ id: r.id, title: r.title, reason: r.reason ?? "failed" });
  }
}

export function failTask(task: TaskResult, err: unknown) {
  task.status = "failed";
  task.error = err instanceof Error ? err.message : String(err);
}

export function finishTask(task: TaskResult): TaskResult {
  if (task.status !== "failed" && (task.failed.length > 0 || task.notProcessed.length > 0))
    task.status = "completed_with_failures";
  return task;
}

/** A job's status from its tasks (there is at least one): failed only when every task failed. */
export function jobStatus(tasks: readonly TaskResult[]): SyncStatus {
  const failedTasks = tasks.filter((t) => t.status === "failed").length;
  if (failedTasks === tasks.length) return "failed";
  return tasks.some((t) => t.status !== "completed") ? "completed_with_failures" : "completed";
}

export function summarize(tasks: readonly TaskResult[]): string {
  return tasks
    .map(
      (t) =>
        `${t.direction === "receive" ? "from" : "to"} ${t.portalUrl}: ${t.succeeded.length} succeeded, ${t.failed.length} failed, ${t.notProcessed.length} not processed${t.error ? ` (${t.error})` : ""}`,
    )
    .join("; ");
}
