import { deleteCopy } from "../collaboration/copy.repository.js";
import {
  applyPage,
  applyServiceState,
  type DataOutcome,
  findDataCopy,
  type LayerCursor,
  type LayerOutcome,
  layerCursors,
  newLayerOutcome,
  reached,
  saveDataCopy,
} from "../collaboration/layer-copy.js";
import { FEATURES_PER_PAGE, PAGE_BYTES, SERVICES_PER_CALL } from "../collaboration/layer-copy-messages.js";
import type { ChangePage, ServiceState } from "../collaboration/layer-copy-source.js";
import { MB } from "../collaboration/peer-messages.js";
import type { TaskResult } from "../collaboration/sync-task.js";
import { findLink } from "../collaboration/workspace.repository.js";
import { deleteItem, findItem } from "../content/item.repository.js";
import { recordEvent } from "../events/outbox.js";
import { FEATURE_SERVICE_TYPE } from "../features/feature-services.service.js";
import { dropServiceStorage } from "../features/layer-store.js";
import { findOrganization } from "../portal/org.repository.js";
import type { SyncContext } from "./sync-transfer.js";

/**
 * The data of hosted feature layers, in a sync's receive direction, when this portal's group link
 * says `copyFeatureServiceData`. It runs after the items moved: every Feature Service copy held
 * from the host in the workspace is compared with the host's service (`layerServices`: its
 * definition's version and each layer's data moment); a new one becomes a hosted service of this
 * portal, a changed definition is applied, and each layer whose moment passed the copy's cursor
 * takes its changes in pages (`layerChanges`), each page stored with the cursor in one
 * transaction. Pages are sized to what the sync's package budget has left. A copy that cannot be
 * made (over `maxItemSizeInMB`, or a definition this portal cannot hold) stays a reference to the
 * origin's URL with `copyByRefIfCopyFail`, and fails otherwise.
 *
 * The other direction (a guest's layers copied into its host) is not done yet: items a guest
 * sends still travel by reference, and so do edits made on a copy (bidirectional sync).
 */
export async function copyFeatureData(ctx: SyncContext, task: TaskResult) {
  const link = await findLink(ctx.db.kysely, ctx.workspaceId);
  if (link?.copy_feature_data !== 1) return;
  const byRef = link.copy_by_ref_if_copy_fail === 1;
  const held = await ctx.db.kysely
    .selectFrom("collaboration_copies as c")
    .innerJoin("items as i", "i.id", "c.item_id")
    .select(["c.origin_item_id", "c.item_id", "i.title"])
    .where("c.workspace_id", "=", ctx.workspaceId)
    .where("c.origin_portal_id", "=", ctx.host.portal_id)
    .where("c.origin_version", "!=", -1)
    .where("i.type", "=", FEATURE_SERVICE_TYPE)
    .orderBy("c.origin_item_id")
    .execute();
  if (held.length === 0) return;
  const servicesBase = `${await ownAddress(ctx)}/rest/services`;
  const maxItem = ctx.config.maxItemSizeInMB * MB;
  const outcomes: DataOutcome[] = [];
  for (let i = 0; i < held.length; i += SERVICES_PER_CALL) {
    const batch = held.slice(i, i + SERVICES_PER_CALL);
    const ids = batch.map((h) => h.origin_item_id);
    const { services } = await ctx.ask<{ services: ServiceState[] }>("layerServices", {
      workspaceId: ctx.workspaceId,
      ids,
    });
    const byId = new Map(services.filter((s) => ids.includes(s.id)).map((s) => [s.id, s]));
    for (const h of batch) {
      const state = byId.get(h.origin_item_id);
      // Not a hosted service at the origin (a registered service URL): it stays a reference.
      if (!state) continue;
      const outcome = await copyOne(
        ctx,
        task,
        { originId: h.origin_item_id, itemId: h.item_id, title: h.title },
        state,
        {
          servicesBase,
          maxItem,
          byRef,
        },
      );
      if (outcome) outcomes.push(outcome);
    }
  }
  if (outcomes.length > 0) task.featureData = outcomes;
}

async function copyOne(
  ctx: SyncContext,
  task: TaskResult,
  copy: { originId: string; itemId: string; title: string },
  state: ServiceState,
  options: { servicesBase: string; maxItem: number; byRef: boolean },
): Promise<DataOutcome | undefined> {
  const data = await findDataCopy(ctx.db.kysely, copy.itemId);
  const changedDefinition = !data || data.origin_modified !== state.modified;
  // A reference stays one until its origin's definition changes (it may then fit).
  if (data?.mode === "reference" && !changedDefinition) return undefined;
  const outcome: DataOutcome = { id: copy.originId, title: copy.title, mode: "copy", layers: [] };
  if (changedDefinition) {
    let refusal: string | undefined;
    if (data?.mode !== "copy" && state.bytes > options.maxItem) {
      refusal = `its data (about ${(state.bytes / MB).toFixed(1)} MB) is over the workspace's maxItemSizeInMB (${ctx.config.maxItemSizeInMB})`;
    } else {
      const applied = await applyServiceState(ctx.db, copy.itemId, state, options.servicesBase);
      if (!applied.ok) refusal = applied.reason;
    }
    if (refusal) return refuse(ctx, task, copy, state, data?.mode === "copy", refusal, options.byRef);
  }
  const cursors = await layerCursors(ctx.db.kysely, copy.itemId);
  for (const { id, moment } of state.moments) {
    const cursor = cursors.get(id);
    // A layer the copy does not hold (one whose definition cannot hold data) has no cursor.
    if (!cursor) continue;
    if (cursor.rows.moment >= moment && cursor.deletes.moment >= moment) continue;
    outcome.layers.push(await copyLayer(ctx, copy, id, moment, cursor));
  }
  if (!changedDefinition && outcome.layers.length === 0) return undefined;
  return outcome;
}

/**
 * A copy that cannot be made: with `copyByRefIfCopyFail` the item stays (a reference to the
 * origin's URL, as items travel without it) and the outcome says why; without it the item fails,
 * and a copy made by this sync is removed so that the next sync tries again. A copy made earlier
 * whose origin's new definition cannot be held keeps its last state and fails with the reason.
 */
async function refuse(
  ctx: SyncContext,
  task: TaskResult,
  copy: { originId: string; itemId: string; title: string },
  state: ServiceState,
  wasCopied: boolean,
  reason: string,
  byRef: boolean,
): Promise<DataOutcome> {
  if (byRef && !wasCopied) {
    await ctx.db.transaction((trx) =>
      saveDataCopy(trx, { item_id: copy.itemId, mode: "reference", reason, origin_modified: state.modified }),
    );
    return { id: copy.originId, title: copy.title, mode: "reference", reason, layers: [] };
  }
  if (!wasCopied) {
    await ctx.db.transaction(async (trx) => {
      const item = await findItem(trx, copy.itemId);
      if (!item) return;
      await deleteItem(trx, item.id, dropServiceStorage);
      await deleteCopy(trx, {
        workspaceId: ctx.workspaceId,
        originPortalId: ctx.host.portal_id,
        originItemId: copy.originId,
      });
      await recordEvent(trx, {
        source: "item",
        operation: "delete",
        objectId: item.id,
        actor: { id: item.owner_id, username: item.owner },
      });
    });
    task.succeeded = task.succeeded.filter((s) => s.id !== copy.originId);
  }
  const why = `its feature data could not be copied: ${reason}`;
  task.failed.push({ id: copy.originId, title: copy.title, reason: why });
  return { id: copy.originId, title: copy.title, mode: "failed", reason, layers: [] };
}

const after = (a: { moment: number; objectId: number }, b: { moment: number; objectId: number }) =>
  a.moment > b.moment || (a.moment === b.moment && a.objectId > b.objectId);

/** Moves one layer's changes up to `upTo` in pages, while the sync's package budget lasts. */
async function copyLayer(
  ctx: SyncContext,
  copy: { originId: string; itemId: string },
  layerId: number,
  upTo: number,
  from: LayerCursor,
): Promise<LayerOutcome> {
  const outcome = newLayerOutcome(layerId);
  let cursor = from;
  for (;;) {
    if (ctx.lost.value) {
      outcome.notProcessed = "the sync stalled past the dead-sync limit; the rest moves on the next sync";
      return outcome;
    }
    if (ctx.budget.bytes <= 0) {
      outcome.notProcessed =
        "the sync reached the workspace's maxReplicationPackageSizeInMB; the rest moves on the next sync";
      return outcome;
    }
    const maxBytes = Math.max(1, Math.min(PAGE_BYTES, ctx.budget.bytes));
    const page = await ctx.ask<ChangePage>("layerChanges", {
      workspaceId: ctx.workspaceId,
      id: copy.originId,
      layerId,
      rowsAfter: cursor.rows,
      deletesAfter: cursor.deletes,
      upTo,
      maxBytes,
    });
    ctx.budget.bytes -= JSON.stringify(page).length;
    const progressed = after(page.rowsNext, cursor.rows) || after(page.deletesNext, cursor.deletes);
    // A page must move forward within the window asked for; anything else is a broken answer.
    if (
      page.rowsNext.moment > upTo ||
      page.deletesNext.moment > upTo ||
      after(cursor.rows, page.rowsNext) ||
      after(cursor.deletes, page.deletesNext) ||
      (!page.done && !progressed) ||
      page.features.length > FEATURES_PER_PAGE
    ) {
      outcome.notProcessed = `the host's answer to 'layerChanges' was refused: its cursors do not move forward within moment ${upTo}`;
      return outcome;
    }
    const next: LayerCursor = page.done ? reached(upTo) : { rows: page.rowsNext, deletes: page.deletesNext };
    await applyPage(ctx.db, copy.itemId, layerId, page, next, outcome);
    cursor = next;
    if (page.done) return outcome;
  }
}

/** This portal's address in the collaboration (what the host invited): its hosted services live below it. */
async function ownAddress(ctx: SyncContext): Promise<string> {
  const org = await findOrganization(ctx.db.kysely);
  const row = await ctx.db.kysely
    .selectFrom("collaboration_participants as p")
    .innerJoin("workspaces as w", "w.collaboration_id", "p.collaboration_id")
    .select("p.portal_url")
    .where("w.id", "=", ctx.workspaceId)
    .where("p.portal_id", "=", org?.id ?? "")
    .executeTakeFirst();
  if (!row) throw new Error("this portal is not a participant of the workspace's collaboration");
  return row.portal_url;
}
