import type { Db } from "../db/database.js";
import type { WorkspaceLinkTable } from "../db/schema.js";
import { errors } from "../errors.js";
import { findServiceOfItem } from "../features/feature-service.repository.js";
import { layerStates } from "../features/layer-store.js";
import type { WorkspaceConfig } from "./collaboration-types.js";
import {
  applyPage,
  COPY_CAPABILITIES,
  findDataCopy,
  type LayerCursor,
  layerCursors,
  newLayerOutcome,
  notEditable,
  reached,
  saveSendCursor,
  sendCursors,
} from "./layer-copy.js";
import { type CopyOptions, defineCopy, type HeldCopy } from "./layer-copy-receiver.js";
import { type ChangePage, readChanges, type ServiceState, serviceParts } from "./layer-copy-source.js";
import { applyCopyEdits, newEditsOutcome } from "./layer-edits.js";

/**
 * A host's answers to the layer-data calls of a guest beyond `layerServices` and `layerChanges`:
 *
 * - `layerEdits`: the guest's copy of one of the host's layers sends its edits (bidirectional).
 * - `copyState`, `copyDefine`, `copyPage`: the send direction, the guest's own hosted layers
 *   copied into the host when the host's group link says `copyFeatureServiceData`. The guest
 *   reads its pages and sends them; the host checks and stores them as a guest does in the
 *   receive direction (`layer-copy.ts`).
 * - `copyEdits`, `copyEditsDone`: the edits made on the host's copy of a guest's layer, which the
 *   guest takes and applies to its own layer (bidirectional), then acknowledges.
 *
 * Guests start every call (a host often cannot reach its guests), so these are the host's side
 * of every direction.
 */

export interface PeerCopyContext {
  db: Db;
  workspaceId: string;
  link: WorkspaceLinkTable;
  config: WorkspaceConfig;
  /** The calling guest's portal id and this portal's address in the collaboration. */
  guest: string;
  selfUrl: string;
}

const bidirectional = (config: WorkspaceConfig) => config.bidirectionalSyncCapable === true;

/** The host's copy of the guest's item `originId` in this workspace. */
async function heldCopy(ctx: PeerCopyContext, originId: string): Promise<HeldCopy> {
  const row = await ctx.db.kysely
    .selectFrom("collaboration_copies")
    .select("item_id")
    .where("workspace_id", "=", ctx.workspaceId)
    .where("origin_portal_id", "=", ctx.guest)
    .where("origin_item_id", "=", originId)
    .where("origin_version", "!=", -1)
    .executeTakeFirst();
  if (!row) throw errors.itemNotFound(originId);
  return { workspaceId: ctx.workspaceId, originPortalId: ctx.guest, originId, itemId: row.item_id };
}

const cursorList = (m: Map<number, LayerCursor>) => [...m].map(([id, c]) => ({ id, ...c }));

/** What the host holds of the guest's hosted services `ids`, and whether it copies their data. */
export async function copyState(ctx: PeerCopyContext, ids: readonly string[]) {
  if (ctx.link.copy_feature_data !== 1) return { copyData: false, copies: [] };
  const copies = [];
  for (const id of ids) {
    const held = await heldCopy(ctx, id).catch(() => undefined);
    if (!held) continue;
    const data = await findDataCopy(ctx.db.kysely, held.itemId);
    const service = await findServiceOfItem(ctx.db.kysely, held.itemId);
    const capabilities = service ? JSON.parse(service.definition).capabilities : COPY_CAPABILITIES;
    copies.push({
      id,
      mode: data?.mode ?? null,
      originModified: data ? Number(data.origin_modified) : null,
      editable: data?.mode === "copy" && capabilities !== COPY_CAPABILITIES,
      layers: cursorList(await layerCursors(ctx.db.kysely, held.itemId)),
    });
  }
  return { copyData: true, copies };
}

/** Brings the host's copy of a guest's service to its definition (`defineCopy`). */
export async function copyDefine(ctx: PeerCopyContext, state: ServiceState) {
  if (ctx.link.copy_feature_data !== 1)
    throw errors.invalidParameter("envelope", "asks to copy feature data into a group link that does not");
  const held = await heldCopy(ctx, state.id);
  const options: CopyOptions = {
    servicesBase: `${ctx.selfUrl}/rest/services`,
    maxItemSizeInMB: ctx.config.maxItemSizeInMB,
    byRef: ctx.link.copy_by_ref_if_copy_fail === 1,
    bidirectional: bidirectional(ctx.config),
  };
  const decision = await defineCopy(ctx.db, held, state, options);
  const layers =
    decision.mode === "failed" && decision.removed
      ? new Map()
      : await layerCursors(ctx.db.kysely, held.itemId);
  return { decision, layers: cursorList(layers) };
}

const after = (a: { moment: number; objectId: number }, b: { moment: number; objectId: number }) =>
  a.moment > b.moment || (a.moment === b.moment && a.objectId > b.objectId);

/** Stores one page of a guest's layer in the host's copy, with the cursor it reaches. */
export async function copyPage(
  ctx: PeerCopyContext,
  body: { id: string; layerId: number; page: ChangePage; next: LayerCursor },
) {
  const held = await heldCopy(ctx, body.id);
  if ((await findDataCopy(ctx.db.kysely, held.itemId))?.mode !== "copy") throw errors.itemNotFound(body.id);
  const cursor = (await layerCursors(ctx.db.kysely, held.itemId)).get(body.layerId);
  if (!cursor)
    throw errors.invalidParameter("envelope", `names layer ${body.layerId}, which the copy does not hold`);
  // A page moves forward, as a guest checks its host's pages.
  if (after(cursor.rows, body.next.rows) || after(cursor.deletes, body.next.deletes))
    throw errors.invalidParameter("envelope", "has a page whose cursors go back");
  const outcome = newLayerOutcome(body.layerId);
  await applyPage(ctx.db, held.itemId, body.layerId, body.page, body.next, outcome, ctx.guest);
  return { outcome };
}

/** A page of the edits made on the host's copy of a guest's layer since they were last taken. */
export async function copyEdits(
  ctx: PeerCopyContext,
  body: { id: string; layerId: number; maxBytes?: number },
) {
  const held = await heldCopy(ctx, body.id);
  if (!bidirectional(ctx.config))
    throw errors.invalidParameter(
      "envelope",
      "asks for edits of a copy in a workspace that is not bidirectionalSyncCapable",
    );
  const from = (await sendCursors(ctx.db.kysely, held.itemId)).get(body.layerId);
  const seen = (await layerCursors(ctx.db.kysely, held.itemId)).get(body.layerId);
  const state = (await layerStates(ctx.db.kysely, held.itemId)).get(body.layerId);
  if (!from || !seen || !state)
    throw errors.invalidParameter("envelope", `names layer ${body.layerId}, which the copy does not hold`);
  const upTo = state.dataLastEditDate;
  const page = await readChanges(
    ctx.db.kysely,
    held.itemId,
    body.layerId,
    {
      rowsAfter: from.rows,
      deletesAfter: from.deletes,
      upTo,
      ...(body.maxBytes ? { maxBytes: body.maxBytes } : {}),
    },
    ctx.guest,
  );
  if (!page) throw errors.itemNotFound(body.id);
  const next: LayerCursor = page.done ? reached(upTo) : { rows: page.rowsNext, deletes: page.deletesNext };
  return { page, seen, next };
}

/** The guest stored the host copy's edits up to `sent`: they are not offered again. */
export async function copyEditsDone(
  ctx: PeerCopyContext,
  body: { id: string; layerId: number; sent: LayerCursor },
) {
  const held = await heldCopy(ctx, body.id);
  const from = (await sendCursors(ctx.db.kysely, held.itemId)).get(body.layerId);
  if (!from)
    throw errors.invalidParameter("envelope", `names layer ${body.layerId}, which the copy does not hold`);
  if (after(from.rows, body.sent.rows) || after(from.deletes, body.sent.deletes)) return { success: true };
  await ctx.db.transaction((trx) => saveSendCursor(trx, held.itemId, body.layerId, body.sent));
  return { success: true };
}

/** A guest's copy of one of the host's layers sends its edits: applied as `layer-edits.ts` says. */
export async function takeGuestEdits(
  ctx: PeerCopyContext,
  body: { id: string; layerId: number; page: ChangePage; seen: LayerCursor },
) {
  if (!bidirectional(ctx.config))
    throw errors.invalidParameter(
      "envelope",
      "sends edits of a copy in a workspace that is not bidirectionalSyncCapable",
    );
  const row = await findServiceOfItem(ctx.db.kysely, body.id);
  if (!row) throw errors.itemNotFound(body.id);
  const parts = serviceParts(row);
  const why = notEditable({ ...parts });
  if (why) throw errors.invalidParameter("envelope", `sends edits of a service whose ${why}`);
  if (!(await layerStates(ctx.db.kysely, body.id)).has(body.layerId))
    throw errors.invalidParameter("envelope", `names layer ${body.layerId}, which holds no data`);
  const outcome = newEditsOutcome(body.layerId);
  await applyCopyEdits(ctx.db, body.id, body.layerId, body.page, body.seen, ctx.guest, outcome);
  return { outcome };
}
