import type { WorkspaceConfig } from "../collaboration/collaboration-types.js";
import { heldVersions } from "../collaboration/copy.repository.js";
import {
  admitExport,
  BATCH_BYTES,
  BATCH_ITEMS,
  type CallLimits,
  itemLimits,
  MAX_TRANSPORT_BYTES,
  MB,
  type Offered,
} from "../collaboration/peer-messages.js";
import {
  applyItems,
  difference,
  exportItems,
  type Holdings,
  type ItemResult,
  type OfferEntry,
  offer,
  withdrawItems,
} from "../collaboration/replication.js";
import { failTask, finishTask, newTask, record, type TaskResult } from "../collaboration/sync-task.js";
import type { Db } from "../db/database.js";
import { copyFeatureData, sendFeatureData } from "./layer-copy-transfer.js";

/**
 * What one sync moves between a guest (this portal) and its host, in each direction: the
 * difference between what the sender offers and what the receiver holds, in bounded batches,
 * within the workspace's item size limit and package budget. Every call goes to the host.
 */

/** Why a sync failed, in words for its summary; no other error is the sync's own. */
export class JobFailed extends Error {}

export interface SyncContext {
  db: Db;
  /** Calls `op` on the host for this sync's collaboration. */
  ask: <T>(op: string, body: Record<string, unknown>) => Promise<T>;
  workspaceId: string;
  groupId: string;
  host: { portal_id: string; portal_url: string; delete_contributed: number };
  config: WorkspaceConfig;
  budget: { bytes: number };
  /** Set when the job was marked failed while it ran (it stalled past the dead-sync limit). */
  lost: { value: boolean };
}

interface Target {
  workspaceId: string;
  originPortalId: string;
  groupId: string;
}

function checkLost(ctx: SyncContext) {
  if (ctx.lost.value) {
    throw new JobFailed("the sync stalled past the dead-sync limit and was marked failed; start a new sync");
  }
}

/** Items the host offers that this portal lacks or holds an older version of. */
export async function receive(ctx: SyncContext): Promise<TaskResult> {
  const task = newTask(ctx.host.portal_id, ctx.host.portal_url, "receive");
  try {
    const { items: entries } = await ctx.ask<{ items: OfferEntry[] }>("offer", {
      workspaceId: ctx.workspaceId,
    });
    const held = await heldVersions(ctx.db.kysely, ctx.workspaceId, ctx.host.portal_id);
    const { changed, gone, withdrawn } = difference(entries, held);
    const target = {
      workspaceId: ctx.workspaceId,
      originPortalId: ctx.host.portal_id,
      groupId: ctx.groupId,
    };
    const deleteContributed = ctx.host.delete_contributed === 1;
    // The package budget was charged for each item's size in the offer.
    const offered: Offered = new Map(changed.map((e) => [e.id, e]));
    const fetchAndApply = async (ids: string[]) => {
      const { items } = await ctx.ask<{ items: unknown[] }>("export", {
        workspaceId: ctx.workspaceId,
        ids,
      });
      if (items.length > ids.length)
        throw new JobFailed(
          `the answer of ${ctx.host.portal_url} to 'export' was refused: it has ${items.length} entries for ${ids.length} requested items`,
        );
      return applyExports(
        ctx.db,
        target,
        items,
        ids,
        itemLimits(ctx.config, ctx.budget),
        offered,
        deleteContributed,
      );
    };
    await moveInBatches(task, ctx, changed, fetchAndApply);
    await withdrawInBatches(task, ctx, gone, fetchAndApply);
    // Copies withdrawn earlier: only an origin deleted since changes them (the delete policy).
    // An origin still there (unshared, or shared again: offered at the next sync) is left alone.
    await withdrawInBatches(task, ctx, withdrawn, async (ids) => {
      const { items } = await ctx.ask<{ items: unknown[] }>("export", { workspaceId: ctx.workspaceId, ids });
      const asked = new Set(ids);
      const deleted = items.flatMap((e) => {
        const entry = e as { id?: unknown; state?: unknown };
        if (entry.state !== "deleted" || typeof entry.id !== "string" || !asked.delete(entry.id)) return [];
        return [{ id: entry.id, state: "deleted" as const }];
      });
      return withdrawItems(ctx.db, target, deleted, deleteContributed);
    });
    await copyFeatureData(ctx, task);
  } catch (err) {
    failTask(task, err);
  }
  return finishTask(task);
}

/** This portal's items the host lacks or holds an older version of. */
export async function send(ctx: SyncContext): Promise<TaskResult> {
  const task = newTask(ctx.host.portal_id, ctx.host.portal_url, "send");
  try {
    const entries = await offer(ctx.db.kysely, ctx.groupId);
    const { holdings: held } = await ctx.ask<{ holdings: Holdings }>("holdings", {
      workspaceId: ctx.workspaceId,
    });
    const { changed, gone, withdrawn } = difference(entries, held);
    await moveInBatches(task, ctx, changed, async (ids) => {
      const exports = await exportItems(ctx.db.kysely, ctx.groupId, ids);
      const present = exports.flatMap((e) => (e.state === "present" ? [e.item] : []));
      const missing = exports.flatMap((e) => (e.state === "present" ? [] : [{ id: e.id, state: e.state }]));
      const results: ItemResult[] = [];
      if (present.length > 0) {
        const r = await ctx.ask<{ results: ItemResult[] }>("apply", {
          workspaceId: ctx.workspaceId,
          items: present,
        });
        results.push(...r.results);
      }
      if (missing.length > 0) {
        const r = await ctx.ask<{ results: ItemResult[] }>("withdraw", {
          workspaceId: ctx.workspaceId,
          gone: missing,
        });
        results.push(...r.results);
      }
      return results;
    });
    await withdrawInBatches(task, ctx, gone, async (ids) => {
      const exports = await exportItems(ctx.db.kysely, ctx.groupId, ids);
      const states = exports.map((e) => ({
        id: e.id,
        state: e.state === "present" ? ("unshared" as const) : e.state,
      }));
      const r = await ctx.ask<{ results: ItemResult[] }>("withdraw", {
        workspaceId: ctx.workspaceId,
        gone: states,
      });
      return r.results;
    });
    // Copies the host withdrew earlier: it hears of those whose origin was deleted here since.
    const deleted = (await exportItems(ctx.db.kysely, ctx.groupId, withdrawn)).flatMap((e) =>
      e.state === "deleted" ? [e.id] : [],
    );
    await withdrawInBatches(task, ctx, deleted, async (ids) => {
      const r = await ctx.ask<{ results: ItemResult[] }>("withdraw", {
        workspaceId: ctx.workspaceId,
        gone: ids.map((id) => ({ id, state: "deleted" as const })),
      });
      return r.results;
    });
    await sendFeatureData(ctx, task);
  } catch (err) {
    failTask(task, err);
  }
  return finishTask(task);
}

/** Applies a host's `export` answer to `requested`: only what was asked for, and only sound items. */
async function applyExports(
  db: Db,
  target: Target,
  entries: readonly unknown[],
  requested: readonly string[],
  limits: CallLimits,
  offered: Offered,
  deleteContributed: boolean,
): Promise<ItemResult[]> {
  const { accepted, gone, refused } = admitExport(entries, requested, limits, offered);
  const [applied, withdrawn] = await Promise.all([
    applyItems(db, target, accepted),
    withdrawItems(db, target, gone, deleteContributed),
  ]);
  return [...applied, ...withdrawn, ...refused];
}

/**
 * Moves `changed` in batches: items over the workspace's size limit fail at once, items past the
 * sync's package budget wait for the next sync, and a batch whose call fails leaves the rest
 * not processed, with the reason.
 */
async function moveInBatches(
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

async function withdrawInBatches(
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
