import { sql } from "kysely";
import type { Db, Queryable } from "../db/database.js";
import { OID_COLUMN } from "../features/layer-schema.js";
import { beginLayerEdit, deleteRows, MOMENT_COLUMN, tableName } from "../features/layer-store.js";
import {
  addCounts,
  attachmentOwners,
  type CheckedFeature,
  type Conflict,
  checkFeatures,
  type LayerCursor,
  type LayerOutcome,
  newLayerOutcome,
  openLayer,
  recordApplied,
  takeAttachmentIds,
  writeFeatures,
} from "./layer-copy.js";
import type { ChangePage } from "./layer-copy-source.js";

/**
 * Bidirectional sync of hosted layer data: the origin's side of edits made on a copy. A copy in
 * a `bidirectionalSyncCapable` workspace is editable; its edits (rows and tombstones written at
 * the copy's own moments, not those a sync stored) travel to the origin at the next sync, and the
 * origin applies them here, each feature checked as `applyEdits` checks it.
 *
 * The rule for conflicts, decided by the origin per feature: a feature conflicts when both sides
 * changed it since the copy last took the origin's changes (the copy's cursor, `seen`), that is
 * the origin's row or tombstone of it is past that cursor and was not stored from this copy. Then
 * the later edit wins by edit moment (an update against an update, a delete against an update
 * alike: a delete is an edit at the moment of its tombstone), and on equal moments the origin
 * wins. Edit moments are each portal's clock (milliseconds) at the edit; a feature a sync stored
 * keeps the moment of the edit at its source (`collaboration_feature_moments`), so a third portal's
 * edit is judged by when it was made, not by when it arrived. When the origin wins, nothing is
 * written and the origin's version reaches the copy with the origin's next changes; when the copy
 * wins, its version (or its delete) is stored. Each conflict is reported per feature.
 *
 * Features are matched by object id and GlobalID together: a copy's new feature whose object id is
 * taken at the origin by another feature (both added one since the last sync) is stored under a
 * fresh object id, and so is not "the same"; an attachment id taken by another feature gets a
 * fresh id. Those features are written at a moment of their own that is not marked as coming from
 * the copy, so they travel back to the copy like the origin's own changes; everything else is
 * written at a moment marked as coming from the copy, which the origin's changes for that copy
 * leave out (no echo).
 */

export interface EditsOutcome extends LayerOutcome {
  conflicts: Conflict[];
}

const MAX_CONFLICTS_LISTED = 100;

export const newEditsOutcome = (id: number): EditsOutcome => ({ ...newLayerOutcome(id), conflicts: [] });

const after = (a: { moment: number; objectId: number }, b: { moment: number; objectId: number }) =>
  a.moment > b.moment || (a.moment === b.moment && a.objectId > b.objectId);

interface Held {
  moment: number;
  globalId: string | null;
}

/** The origin's rows and tombstones of `ids`, with their moments and GlobalIDs. */
async function heldState(
  trx: Queryable,
  itemId: string,
  layerId: number,
  gidColumn: string | undefined,
  ids: readonly number[],
): Promise<{ rows: Map<number, Held>; tombs: Map<number, Held> }> {
  const rows = new Map<number, Held>();
  const tombs = new Map<number, Held>();
  if (ids.length === 0) return { rows, tombs };
  const found = await sql<{ oid: number; m: number; gid: string | null }>`
    SELECT ${sql.id(OID_COLUMN)} AS oid, ${sql.id(MOMENT_COLUMN)} AS m, ${gidColumn ? sql.id(gidColumn) : sql`NULL`} AS gid
    FROM ${sql.id(tableName(itemId, layerId))} WHERE ${sql.id(OID_COLUMN)} IN (${sql.join([...ids])})
  `.execute(trx);
  for (const r of found.rows) rows.set(Number(r.oid), { moment: Number(r.m), globalId: r.gid });
  const gone = await trx
    .selectFrom("feature_deletes")
    .select(["object_id", "edit_moment", "global_id"])
    .where("item_id", "=", itemId)
    .where("layer_id", "=", layerId)
    .where("object_id", "in", [...ids])
    .execute();
  for (const r of gone)
    tombs.set(Number(r.object_id), { moment: Number(r.edit_moment), globalId: r.global_id });
  return { rows, tombs };
}

/**
 * Applies a page of a copy's edits to the origin's layer `layerId` of `itemId`, in one transaction.
 * `seen` is how far the copy has taken the origin's changes; `peer` is the copy's portal.
 */
export async function applyCopyEdits(
  db: Db,
  itemId: string,
  layerId: number,
  page: Pick<ChangePage, "features" | "deletes" | "moments" | "deleteMoments" | "deleteGlobalIds">,
  seen: LayerCursor,
  peer: string,
  outcome: EditsOutcome,
): Promise<void> {
  const counts = newEditsOutcome(layerId);
  await db.transaction(async (trx) => {
    const layer = await openLayer(trx, itemId, layerId);
    const { schema } = layer;
    const gidName = schema.globalIdField?.name;
    if (!gidName) throw new Error(`layer ${layerId} has no GlobalID field: its copies are read-only`);
    const now = Date.now();
    // Taken first: on PostgreSQL it locks the layer, so no edit slips between reading and writing.
    const edit = await beginLayerEdit(trx, itemId, layerId, now, 0);
    if (!edit) throw new Error(`layer ${layerId} holds no data`);
    const checked = checkFeatures(layer, page.features, now, counts);
    const deletes = page.deletes.filter((d) => !checked.has(d));
    const ids = [...new Set([...checked.keys(), ...deletes])];
    const { rows, tombs } = await heldState(trx, itemId, layerId, schema.globalIdField?.column, ids);
    const moments = [...new Set([...rows.values(), ...tombs.values()].map((h) => h.moment))];
    const fromPeer = new Set<number>();
    if (moments.length > 0) {
      const applied = await trx
        .selectFrom("collaboration_applied_moments")
        .select("moment")
        .where("item_id", "=", itemId)
        .where("layer_id", "=", layerId)
        .where("portal_id", "=", peer)
        .where("moment", "in", moments)
        .execute();
      for (const a of applied) fromPeer.add(Number(a.moment));
    }
    const sourceMoments = new Map<number, { row: number; edit: number }>();
    if (ids.length > 0) {
      const fm = await trx
        .selectFrom("collaboration_feature_moments")
        .select(["object_id", "row_moment", "edit_moment"])
        .where("item_id", "=", itemId)
        .where("layer_id", "=", layerId)
        .where("object_id", "in", ids)
        .execute();
      for (const r of fm)
        sourceMoments.set(Number(r.object_id), { row: Number(r.row_moment), edit: Number(r.edit_moment) });
    }
    /** When the origin's edit of `oid` (stored at `moment`) was made at its source. */
    const editMoment = (oid: number, moment: number) => {
      const s = sourceMoments.get(oid);
      return s && s.row === moment ? s.edit : moment;
    };
    const unseen = (oid: number, held: Held, cursor: LayerCursor["rows"]) =>
      !fromPeer.has(held.moment) && after({ moment: held.moment, objectId: oid }, cursor);
    const conflict = (objectId: number, copyWins: boolean, what: string, theirs: number, ours: number) => {
      if (counts.conflicts.length >= MAX_CONFLICTS_LISTED) return;
      counts.conflicts.push({
        objectId,
        winner: copyWins ? "copy" : "origin",
        reason: `${what}; the ${copyWins ? "copy's" : "origin's"} edit is the later (copy ${new Date(theirs).toISOString()}, origin ${new Date(ours).toISOString()})`,
      });
    };

    const echoed: CheckedFeature[] = [];
    const travelling: CheckedFeature[] = [];
    const written = new Map<number, number>(); // object id -> the copy's edit moment
    for (const [oid, f] of checked) {
      // No edit is later than now: a moment from the future would win every conflict.
      const theirs = Math.min(page.moments?.[f.index] ?? now, now);
      const gid = f.row.columns[schema.globalIdField?.column ?? ""] ?? null;
      const row = rows.get(oid);
      const tomb = tombs.get(oid);
      const same = (h: Held | undefined) => h !== undefined && (h.globalId === null || h.globalId === gid);
      if (row && same(row)) {
        if (unseen(oid, row, seen.rows)) {
          const ours = editMoment(oid, row.moment);
          const copyWins = theirs > ours;
          conflict(oid, copyWins, "both sides updated the feature", theirs, ours);
          if (!copyWins) continue;
        }
      } else if (!row && tomb && same(tomb) && unseen(oid, tomb, seen.deletes)) {
        const ours = editMoment(oid, tomb.moment);
        const copyWins = theirs > ours;
        conflict(oid, copyWins, "the origin deleted the feature the copy updated", theirs, ours);
        if (!copyWins) continue;
      } else if (row || (tomb && !same(tomb))) {
        // Another feature holds (or held) this object id here: the copy's new feature gets its own.
        travelling.push(f);
        written.set(oid, theirs);
        continue;
      }
      echoed.push(f);
      written.set(oid, theirs);
    }
    // An attachment id another feature holds here: the copy's attachment takes a fresh one.
    const owners = await attachmentOwners(
      trx,
      itemId,
      layerId,
      echoed.flatMap((f) => f.attachments.map((a) => a.id)),
    );
    for (let i = echoed.length - 1; i >= 0; i--) {
      const f = echoed[i] as CheckedFeature;
      const clash = f.attachments.filter((a) => {
        const owner = owners.get(a.id);
        return owner !== undefined && owner !== f.row.objectId;
      });
      if (clash.length === 0) continue;
      for (const a of clash) a.id = await takeAttachmentIds(trx, itemId, layerId, 1);
      echoed.splice(i, 1);
      travelling.push(f);
    }
    await writeFeatures(trx, db, itemId, layer, echoed, edit.moment, counts);

    const removed: number[] = [];
    for (const [i, oid] of page.deletes.entries()) {
      if (checked.has(oid)) continue;
      const theirs = Math.min(page.deleteMoments?.[i] ?? now, now);
      const gid = page.deleteGlobalIds?.[i] ?? null;
      const row = rows.get(oid);
      // Gone here already, or another feature: a feature the copy added and deleted before sending it.
      if (!row || (row.globalId !== null && gid !== null && row.globalId !== gid)) continue;
      if (unseen(oid, row, seen.rows)) {
        const ours = editMoment(oid, row.moment);
        const copyWins = theirs > ours;
        conflict(oid, copyWins, "the copy deleted the feature the origin updated", theirs, ours);
        if (!copyWins) continue;
      }
      removed.push(oid);
      written.set(oid, theirs);
    }
    if (removed.length > 0)
      counts.deleted += (await deleteRows(trx, itemId, schema, removed, edit.moment)).size;

    if (travelling.length > 0) {
      // A moment of their own, not marked as the copy's: these go back to it as they are here.
      const renumbered = travelling.filter((f) => rows.has(f.row.objectId) || tombs.has(f.row.objectId));
      const own = await beginLayerEdit(trx, itemId, layerId, now, renumbered.length);
      if (!own) throw new Error(`layer ${layerId} holds no data`);
      let next = own.firstObjectId;
      for (const f of renumbered) {
        const theirs = written.get(f.row.objectId) ?? now;
        f.row = { ...f.row, objectId: next++ };
        written.set(f.row.objectId, theirs);
      }
      await writeFeatures(trx, db, itemId, layer, travelling, own.moment, counts);
      await recordSourceMoments(
        trx,
        itemId,
        layerId,
        travelling.map((f) => f.row.objectId),
        own.moment,
        written,
      );
    }
    if (echoed.length + removed.length > 0) {
      await recordApplied(trx, itemId, layerId, edit.moment, peer);
      await recordSourceMoments(
        trx,
        itemId,
        layerId,
        [...echoed.map((f) => f.row.objectId), ...removed],
        edit.moment,
        written,
      );
    }
  });
  addCounts(outcome, counts);
  for (const c of counts.conflicts)
    if (outcome.conflicts.length < MAX_CONFLICTS_LISTED) outcome.conflicts.push(c);
}

/** Notes when each feature written at `rowMoment` was edited at its source. */
async function recordSourceMoments(
  trx: Queryable,
  itemId: string,
  layerId: number,
  ids: readonly number[],
  rowMoment: number,
  edited: Map<number, number>,
): Promise<void> {
  for (const oid of ids) {
    const values = { row_moment: rowMoment, edit_moment: edited.get(oid) ?? rowMoment };
    await trx
      .insertInto("collaboration_feature_moments")
      .values({ item_id: itemId, layer_id: layerId, object_id: oid, ...values })
      .onConflict((oc) => oc.columns(["item_id", "layer_id", "object_id"]).doUpdateSet(values))
      .execute();
  }
}
