import type { Queryable } from "../db/database.js";
import type { SyncDeferredTable } from "../db/schema.js";
import { RUNNING } from "./sync.repository.js";

/**
 * What the nodes of a cluster decide once, in the database (migration 0025): which realtime
 * change was acted on, and which deferred syncs wait for their workspace to be free. Each
 * decision is a conditional write; the node whose write took effect acts, the others do nothing.
 */

/**
 * Records `print` as the offer fingerprint of a realtime workspace; answers whether this call
 * saw it change (`changed`), saw it for the first time (`first`: nothing to compare with), or
 * found it already recorded, by itself or by another node (`same`). Only `same` means "nothing to
 * do": a `first` print (a link turned realtime before `startPrint` was recorded with it) may
 * already hold the change whose event woke the caller.
 */
export async function claimPrint(
  q: Queryable,
  workspaceId: string,
  print: string,
  now: number,
): Promise<"first" | "changed" | "same"> {
  const row = await q
    .selectFrom("realtime_prints")
    .select("print")
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  if (!row) {
    const inserted = await q
      .insertInto("realtime_prints")
      .values({ workspace_id: workspaceId, print, modified: now })
      .onConflict((oc) => oc.column("workspace_id").doNothing())
      .executeTakeFirst();
    return Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0 ? "first" : "same";
  }
  if (row.print === print) return "same";
  const updated = await q
    .updateTable("realtime_prints")
    .set({ print, modified: now })
    .where("workspace_id", "=", workspaceId)
    .where("print", "=", row.print)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) > 0 ? "changed" : "same";
}

/**
 * Records `print` as the fingerprint a realtime link starts from, replacing one left from an
 * earlier time realtime was on (changes made while it was off are not realtime's to act on).
 */
export async function startPrint(q: Queryable, workspaceId: string, print: string, now: number) {
  await q
    .insertInto("realtime_prints")
    .values({ workspace_id: workspaceId, print, modified: now })
    .onConflict((oc) => oc.column("workspace_id").doUpdateSet({ print, modified: now }))
    .execute();
}

/** Keeps a scheduled or realtime sync that found its workspace busy; one waits per workspace. */
export async function deferSync(
  q: Queryable,
  collaborationId: string,
  workspaceId: string,
  execType: SyncDeferredTable["exec_type"],
  now: number,
): Promise<void> {
  await q
    .insertInto("sync_deferred")
    .values({
      workspace_id: workspaceId,
      collaboration_id: collaborationId,
      exec_type: execType,
      created: now,
    })
    .onConflict((oc) => oc.column("workspace_id").doNothing())
    .execute();
}

/** Deferred syncs whose workspace no sync holds now, on any node. */
export function freeDeferred(q: Queryable): Promise<SyncDeferredTable[]> {
  return q
    .selectFrom("sync_deferred as d")
    .selectAll("d")
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom("sync_jobs as j")
            .select("j.id")
            .whereRef("j.workspace_id", "=", "d.workspace_id")
            .where("j.status", "in", [...RUNNING]),
        ),
      ),
    )
    .orderBy("d.created")
    .limit(100)
    .execute();
}

/** Takes a deferred sync off the list: true for the one caller that took it. */
export async function claimDeferred(
  q: Queryable,
  workspaceId: string,
): Promise<SyncDeferredTable | undefined> {
  const row = await q
    .selectFrom("sync_deferred")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  if (!row) return undefined;
  const deleted = await q
    .deleteFrom("sync_deferred")
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return Number(deleted.numDeletedRows) > 0 ? row : undefined;
}
