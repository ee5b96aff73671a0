import {
  applyPage,
  type DataOutcome,
  type LayerCursor,
  type LayerOutcome,
  type LayerReport,
  layerCursors,
  newLayerOutcome,
  reached,
  saveSendCursor,
  sendCursors,
} from "../collaboration/layer-copy.js";
import { FEATURES_PER_PAGE, PAGE_BYTES, SERVICES_PER_CALL } from "../collaboration/layer-copy-messages.js";
import { type CopyDecision, defineCopy, editability } from "../collaboration/layer-copy-receiver.js";
import {
  type ChangePage,
  readChanges,
  type ServiceState,
  serviceStates,
} from "../collaboration/layer-copy-source.js";
import { applyCopyEdits, type EditsOutcome, newEditsOutcome } from "../collaboration/layer-edits.js";
import type { TaskResult } from "../collaboration/sync-task.js";
import { findLink } from "../collaboration/workspace.repository.js";
import { FEATURE_SERVICE_TYPE } from "../features/feature-services.service.js";
import { layerStates } from "../features/layer-store.js";
import { findOrganization } from "../portal/org.repository.js";
import { JobFailed, type SyncContext } from "./sync-transfer.js";

/**
 * The data of hosted feature layers in a sync, in both directions, when the receiving side's group
 * link says `copyFeatureServiceData`. Guests start every call, so this portal (a guest) drives it:
 *
 * - Receive direction (this guest's link copies): every Feature Service copy held from the host
 *   is compared with the host's service (`layerServices`: its definition's version and each
 *   layer's data moment); a new one becomes a hosted service of this portal, a changed definition
 *   is applied, and each layer whose moment passed the copy's cursor takes its changes in pages
 *   (`layerChanges`), each page stored with the cursor in one transaction.
 * - Send direction (the host's link copies): the same, mirrored: the host says what it holds of
 *   this portal's services (`copyState`), this portal sends definitions (`copyDefine`) and pages
 *   of its own layers (`copyPage`), and the host checks and stores them as this portal would.
 *
 * Pages are sized to what the sync's package budget has left. A copy that cannot be made (over
 * `maxItemSizeInMB`, or a definition the receiver cannot hold) stays a reference to the origin's
 * URL with `copyByRefIfCopyFail`, and fails otherwise.
 *
 * In a `bidirectionalSyncCapable` workspace copies are editable, and before a layer takes its
 * origin's changes the copy's own edits go to the origin, which applies them and decides
 * conflicts (`layer-edits.ts`): the guest's copy sends them (`layerEdits`); the host's copy's are
 * taken by this portal (`copyEdits`), applied here, and acknowledged (`copyEditsDone`). A layer
 * whose edits could not all go back does not take its origin's changes in this sync (they would
 * overwrite what was not sent).
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
  const bidirectional = ctx.config.bidirectionalSyncCapable === true;
  const servicesBase = `${await ownAddress(ctx)}/rest/services`;
  const outcomes: DataOutcome[] = [];
  for (let i = 0; i < held.length; i += SERVICES_PER_CALL) {
    const batch = held.slice(i, i + SERVICES_PER_CALL);
    // The copies' own edits go first, so that the host's state asked next already holds them.
    const pushed = new Map<string, Map<number, LayerReport>>();
    if (bidirectional)
      for (const h of batch)
        pushed.set(h.origin_item_id, await sendCopyEdits(ctx, h.item_id, h.origin_item_id));
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
      const access = editability(state, bidirectional);
      const decision = await defineCopy(
        ctx.db,
        {
          workspaceId: ctx.workspaceId,
          originPortalId: ctx.host.portal_id,
          originId: h.origin_item_id,
          itemId: h.item_id,
        },
        state,
        { servicesBase, maxItemSizeInMB: ctx.config.maxItemSizeInMB, byRef, bidirectional },
      );
      const edits = pushed.get(h.origin_item_id) ?? new Map<number, LayerReport>();
      const outcome = outcomeOf(task, { id: h.origin_item_id, title: h.title }, decision, access.why);
      if (outcome.mode !== "copy") {
        outcomes.push(outcome);
        continue;
      }
      const cursors = await layerCursors(ctx.db.kysely, h.item_id);
      for (const { id, moment } of state.moments) {
        const cursor = cursors.get(id);
        // A layer the copy does not hold (one whose definition cannot hold data) has no cursor.
        if (!cursor) continue;
        const report: LayerReport = edits.get(id) ?? newLayerOutcome(id);
        edits.delete(id);
        if (report.editsBack?.notProcessed) {
          report.notProcessed =
            "the copy's edits did not all reach the origin; its changes come on the next sync";
        } else if (cursor.rows.moment < moment || cursor.deletes.moment < moment) {
          await pullLayer(ctx, { originId: h.origin_item_id, itemId: h.item_id }, id, moment, cursor, report);
        } else if (!report.editsBack) {
          continue;
        }
        outcome.layers.push(report);
      }
      outcome.layers.push(...edits.values());
      if (decision.mode !== "current" || outcome.layers.length > 0) outcomes.push(outcome);
    }
  }
  if (outcomes.length > 0) task.featureData = [...(task.featureData ?? []), ...outcomes];
}

/** The item's outcome for a definition decision; a failed copy fails its item in the task. */
function outcomeOf(
  task: TaskResult,
  item: { id: string; title: string },
  decision: CopyDecision,
  readOnly: string | undefined,
): DataOutcome {
  const base = { id: item.id, title: item.title, ...(readOnly ? { readOnly } : {}) };
  if (decision.mode === "current" || decision.mode === "copy") return { ...base, mode: "copy", layers: [] };
  if (decision.mode === "failed") {
    if (decision.removed) task.succeeded = task.succeeded.filter((s) => s.id !== item.id);
    task.failed.push({
      id: item.id,
      title: item.title,
      reason: `its feature data could not be copied: ${decision.reason}`,
    });
  }
  return { ...base, mode: decision.mode, reason: decision.reason, layers: [] };
}

const after = (a: { moment: number; objectId: number }, b: { moment: number; objectId: number }) =>
  a.moment > b.moment || (a.moment === b.moment && a.objectId > b.objectId);

/** Why the sync cannot move another page now, or undefined. */
function stopped(ctx: SyncContext): string | undefined {
  if (ctx.lost.value) return "the sync stalled past the dead-sync limit; the rest moves on the next sync";
  if (ctx.budget.bytes <= 0)
    return "the sync reached the workspace's maxReplicationPackageSizeInMB; the rest moves on the next sync";
  return undefined;
}

const pageBudget = (ctx: SyncContext) => Math.max(1, Math.min(PAGE_BYTES, ctx.budget.bytes));

/** Whether a page moves forward within the window asked for; anything else is a broken answer. */
function soundPage(page: ChangePage, from: LayerCursor, upTo: number): boolean {
  const progressed = after(page.rowsNext, from.rows) || after(page.deletesNext, from.deletes);
  return !(
    page.rowsNext.moment > upTo ||
    page.deletesNext.moment > upTo ||
    after(from.rows, page.rowsNext) ||
    after(from.deletes, page.deletesNext) ||
    (!page.done && !progressed) ||
    page.features.length > FEATURES_PER_PAGE
  );
}

/** Moves one layer's changes from the host up to `upTo` in pages, while the sync's package budget lasts. */
async function pullLayer(
  ctx: SyncContext,
  copy: { originId: string; itemId: string },
  layerId: number,
  upTo: number,
  from: LayerCursor,
  outcome: LayerOutcome,
): Promise<void> {
  let cursor = from;
  for (;;) {
    const stop = stopped(ctx);
    if (stop) {
      outcome.notProcessed = stop;
      return;
    }
    const page = await ctx.ask<ChangePage>("layerChanges", {
      workspaceId: ctx.workspaceId,
      id: copy.originId,
      layerId,
      rowsAfter: cursor.rows,
      deletesAfter: cursor.deletes,
      upTo,
      maxBytes: pageBudget(ctx),
    });
    ctx.budget.bytes -= JSON.stringify(page).length;
    if (!soundPage(page, cursor, upTo)) {
      outcome.notProcessed = `the host's answer to 'layerChanges' was refused: its cursors do not move forward within moment ${upTo}`;
      return;
    }
    const next: LayerCursor = page.done ? reached(upTo) : { rows: page.rowsNext, deletes: page.deletesNext };
    await applyPage(ctx.db, copy.itemId, layerId, page, next, outcome, ctx.host.portal_id);
    cursor = next;
    if (page.done) return;
  }
}

function addTo(into: LayerOutcome, from: LayerOutcome) {
  into.added += from.added;
  into.updated += from.updated;
  into.deleted += from.deleted;
  into.failed += from.failed;
  for (const f of from.failures) if (into.failures.length < 20) into.failures.push(f);
}

function addConflicts(report: LayerReport, from: EditsOutcome | LayerReport) {
  const conflicts = (from as EditsOutcome).conflicts ?? [];
  if (conflicts.length > 0) report.conflicts = [...(report.conflicts ?? []), ...conflicts].slice(0, 100);
}

/**
 * Sends the edits made on this portal's copy `itemId` (of the host's `originId`) since they were
 * last sent, layer by layer, each page followed by the copy's send cursor; what a sync stored
 * here from the host is left out. Per layer, what the host stored and the conflicts it decided.
 */
async function sendCopyEdits(
  ctx: SyncContext,
  itemId: string,
  originId: string,
): Promise<Map<number, LayerReport>> {
  const out = new Map<number, LayerReport>();
  const sends = await sendCursors(ctx.db.kysely, itemId);
  const seen = await layerCursors(ctx.db.kysely, itemId);
  const states = await layerStates(ctx.db.kysely, itemId);
  for (const [layerId, sent] of sends) {
    const upTo = states.get(layerId)?.dataLastEditDate;
    const cursorSeen = seen.get(layerId);
    if (upTo === undefined || !cursorSeen) continue;
    if (sent.rows.moment >= upTo && sent.deletes.moment >= upTo) continue;
    const report: LayerReport = { ...newLayerOutcome(layerId), editsBack: newLayerOutcome(layerId) };
    const editsBack = report.editsBack as LayerOutcome;
    let moved = false;
    for await (const { page, next } of changePages(ctx, itemId, layerId, upTo, sent, editsBack)) {
      if (page.features.length + page.deletes.length > 0) {
        ctx.budget.bytes -= JSON.stringify(page).length;
        const { outcome } = await ctx.ask<{ outcome: EditsOutcome }>("layerEdits", {
          workspaceId: ctx.workspaceId,
          id: originId,
          layerId,
          page,
          seen: cursorSeen,
        });
        addTo(editsBack, outcome);
        addConflicts(report, outcome);
        moved = true;
      }
      await ctx.db.transaction((trx) => saveSendCursor(trx, itemId, layerId, next));
    }
    if (moved || editsBack.notProcessed) out.set(layerId, report);
  }
  return out;
}

/**
 * The send direction's layer data (the host's link copies): this portal's own hosted services
 * that the host holds copies of are brought to their definition there, the host's copies' edits
 * are taken and applied here (bidirectional), then each layer's changes go to the host in pages.
 */
export async function sendFeatureData(ctx: SyncContext, task: TaskResult) {
  const own = await ctx.db.kysely
    .selectFrom("item_shares as s")
    .innerJoin("items as i", "i.id", "s.item_id")
    .innerJoin("feature_services as f", "f.item_id", "s.item_id")
    .leftJoin("collaboration_copies as c", "c.item_id", "s.item_id")
    .select(["s.item_id", "i.title"])
    .where("s.group_id", "=", ctx.groupId)
    .where("c.item_id", "is", null)
    .orderBy("s.item_id")
    .execute();
  const bidirectional = ctx.config.bidirectionalSyncCapable === true;
  const outcomes: DataOutcome[] = [];
  for (let i = 0; i < own.length; i += SERVICES_PER_CALL) {
    const batch = own.slice(i, i + SERVICES_PER_CALL);
    const ids = batch.map((b) => b.item_id);
    const answer = await ctx.ask<{ copyData: boolean; copies: HostCopy[] }>("copyState", {
      workspaceId: ctx.workspaceId,
      ids,
    });
    if (!answer.copyData) return;
    const copies = new Map(answer.copies.filter((c) => ids.includes(c.id)).map((c) => [c.id, c]));
    for (const item of batch) {
      const copy = copies.get(item.item_id);
      // Not (yet) held by the host: the item did not reach it.
      if (!copy) continue;
      const outcome = await sendService(
        ctx,
        task,
        { id: item.item_id, title: item.title },
        copy,
        bidirectional,
      );
      if (outcome) outcomes.push(outcome);
    }
  }
  if (outcomes.length > 0) task.featureData = [...(task.featureData ?? []), ...outcomes];
}

interface HostCopy {
  id: string;
  mode: "copy" | "reference" | null;
  originModified: number | null;
  editable: boolean;
  layers: ({ id: number } & LayerCursor)[];
}

async function sendService(
  ctx: SyncContext,
  task: TaskResult,
  item: { id: string; title: string },
  copy: HostCopy,
  bidirectional: boolean,
): Promise<DataOutcome | undefined> {
  const reports = new Map<number, LayerReport>();
  // The host copy's own edits first: the state read next holds them, so pages leave them out.
  if (bidirectional && copy.mode === "copy" && copy.editable)
    for (const { id } of copy.layers) {
      const r = await takeHostEdits(ctx, item.id, id);
      if (r) reports.set(id, r);
    }
  const [state] = await serviceStates(ctx.db.kysely, ctx.groupId, [item.id]);
  if (!state) return undefined;
  const access = editability(state, bidirectional);
  const current =
    copy.mode !== null &&
    copy.originModified === state.modified &&
    (copy.mode === "reference" || copy.editable === access.editable);
  let layers = new Map(copy.layers.map((l) => [l.id, { rows: l.rows, deletes: l.deletes }]));
  let decision: CopyDecision = { mode: "current" };
  if (!current) {
    const defined = await ctx.ask<{ decision: CopyDecision; layers: HostCopy["layers"] }>("copyDefine", {
      workspaceId: ctx.workspaceId,
      service: state,
    });
    decision = defined.decision;
    layers = new Map(defined.layers.map((l) => [l.id, { rows: l.rows, deletes: l.deletes }]));
  } else if (copy.mode === "reference") {
    return undefined;
  }
  const outcome = outcomeOf(task, item, decision, access.why);
  if (outcome.mode !== "copy") return outcome;
  for (const { id, moment } of state.moments) {
    const cursor = layers.get(id);
    if (!cursor) continue;
    const report: LayerReport = reports.get(id) ?? newLayerOutcome(id);
    reports.delete(id);
    if (report.editsBack?.notProcessed) {
      report.notProcessed = "the copy's edits did not all reach the origin; its changes go on the next sync";
    } else if (cursor.rows.moment < moment || cursor.deletes.moment < moment) {
      await pushLayer(ctx, item.id, id, moment, cursor, report);
    } else if (!report.editsBack) {
      continue;
    }
    outcome.layers.push(report);
  }
  outcome.layers.push(...reports.values());
  if (decision.mode === "current" && outcome.layers.length === 0) return undefined;
  return outcome;
}

/** Sends one of this portal's layers to the host's copy in pages, from the copy's cursor up to `upTo`. */
async function pushLayer(
  ctx: SyncContext,
  itemId: string,
  layerId: number,
  upTo: number,
  from: LayerCursor,
  outcome: LayerOutcome,
): Promise<void> {
  for await (const { page, next } of changePages(ctx, itemId, layerId, upTo, from, outcome)) {
    ctx.budget.bytes -= JSON.stringify(page).length;
    const r = await ctx.ask<{ outcome: LayerOutcome }>("copyPage", {
      workspaceId: ctx.workspaceId,
      id: itemId,
      layerId,
      page,
      next,
    });
    addTo(outcome, r.outcome);
  }
}

/**
 * The pages of this portal's changes to a layer of `itemId` from `from` up to `upTo`, each with the
 * cursor after it, sized to what is left of the sync's budget; what a sync stored here from the
 * host is left out. Ends after the last page, or when the sync must stop (saying why in
 * `outcome.notProcessed`).
 */
async function* changePages(
  ctx: SyncContext,
  itemId: string,
  layerId: number,
  upTo: number,
  from: LayerCursor,
  outcome: LayerOutcome,
): AsyncGenerator<{ page: NonNullable<Awaited<ReturnType<typeof readChanges>>>; next: LayerCursor }> {
  let cursor = from;
  for (;;) {
    const stop = stopped(ctx);
    if (stop) {
      outcome.notProcessed = stop;
      return;
    }
    const page = await readChanges(
      ctx.db.kysely,
      itemId,
      layerId,
      { rowsAfter: cursor.rows, deletesAfter: cursor.deletes, upTo, maxBytes: pageBudget(ctx) },
      ctx.host.portal_id,
    );
    if (!page) return;
    const next: LayerCursor = page.done ? reached(upTo) : { rows: page.rowsNext, deletes: page.deletesNext };
    yield { page, next };
    cursor = next;
    if (page.done) return;
  }
}

/**
 * Takes the edits made on the host's copy of this portal's layer, page by page, applies them
 * here as their origin (`applyCopyEdits`), and acknowledges each page once stored.
 */
async function takeHostEdits(
  ctx: SyncContext,
  itemId: string,
  layerId: number,
): Promise<LayerReport | undefined> {
  const report: LayerReport = { ...newLayerOutcome(layerId), editsBack: newLayerOutcome(layerId) };
  const editsBack = report.editsBack as LayerOutcome;
  let moved = false;
  for (;;) {
    const stop = stopped(ctx);
    if (stop) {
      editsBack.notProcessed = stop;
      return report;
    }
    const answer = await ctx.ask<{ page: ChangePage; seen: LayerCursor; next: LayerCursor }>("copyEdits", {
      workspaceId: ctx.workspaceId,
      id: itemId,
      layerId,
      maxBytes: pageBudget(ctx),
    });
    const { page } = answer;
    ctx.budget.bytes -= JSON.stringify(page).length;
    if (page.features.length + page.deletes.length > 0) {
      const outcome = newEditsOutcome(layerId);
      await applyCopyEdits(ctx.db, itemId, layerId, page, answer.seen, ctx.host.portal_id, outcome);
      addTo(editsBack, outcome);
      addConflicts(report, outcome);
      moved = true;
    }
    await ctx.ask("copyEditsDone", { workspaceId: ctx.workspaceId, id: itemId, layerId, sent: answer.next });
    if (page.done) return moved ? report : undefined;
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
  if (!row) throw new JobFailed("this portal is not a participant of the workspace's collaboration");
  return row.portal_url;
}
