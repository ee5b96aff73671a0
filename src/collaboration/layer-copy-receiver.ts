import { deleteItem, findItem } from "../content/item.repository.js";
import type { Db } from "../db/database.js";
import { recordEvent } from "../events/outbox.js";
import { findServiceOfItem } from "../features/feature-service.repository.js";
import { dropServiceStorage } from "../features/layer-store.js";
import { deleteCopy } from "./copy.repository.js";
import {
  applyServiceState,
  COPY_CAPABILITIES,
  findDataCopy,
  notEditable,
  saveDataCopy,
} from "./layer-copy.js";
import type { ServiceState } from "./layer-copy-source.js";
import { MB } from "./peer-messages.js";

/**
 * The receiving side's decision about a hosted service it holds a copy of, whichever side it is
 * (a guest taking its host's layers, or a host taking what a guest contributes): whether the copy
 * is made or brought to the origin's definition, stays a reference (`copyByRefIfCopyFail`), or
 * fails, under the workspace's `maxItemSizeInMB`; and whether it can be edited (a
 * `bidirectionalSyncCapable` workspace, GlobalIDs in every layer).
 */

export interface HeldCopy {
  workspaceId: string;
  /** The origin's portal and item. */
  originPortalId: string;
  originId: string;
  /** The received item of this portal. */
  itemId: string;
}

export interface CopyOptions {
  servicesBase: string;
  maxItemSizeInMB: number;
  byRef: boolean;
  bidirectional: boolean;
}

export type CopyDecision =
  /** Nothing to do: the copy is at the origin's definition (or a reference that stays one). */
  | { mode: "current" }
  | { mode: "copy"; created: boolean }
  | { mode: "reference" | "failed"; reason: string; removed: boolean };

/** Whether the copy of `state` can be edited here; the reason when a bidirectional workspace's cannot. */
export function editability(
  state: ServiceState,
  bidirectional: boolean,
): { editable: boolean; why?: string } {
  if (!bidirectional) return { editable: false };
  const why = notEditable(state);
  return why ? { editable: false, why } : { editable: true };
}

/** Whether the copy held as `itemId` is at `state`'s definition, and as editable as it should be. */
export async function copyIsCurrent(db: Db, itemId: string, state: ServiceState, editable: boolean) {
  const data = await findDataCopy(db.kysely, itemId);
  if (!data || data.origin_modified !== state.modified) return false;
  if (data.mode === "reference") return true;
  const service = await findServiceOfItem(db.kysely, itemId);
  const capabilities = service ? JSON.parse(service.definition).capabilities : undefined;
  return (capabilities !== COPY_CAPABILITIES) === editable;
}

/**
 * Brings the copy held as `copy.itemId` to `state`'s definition. A copy that cannot be made: with
 * `byRef` the item stays (a reference to the origin's URL, as items travel without it) and the
 * decision says why; without it the item fails, and a copy never made is removed with its item
 * so that the next sync tries again. A copy made earlier whose origin's new definition cannot be
 * held keeps its last state and fails with the reason.
 */
export async function defineCopy(
  db: Db,
  copy: HeldCopy,
  state: ServiceState,
  options: CopyOptions,
): Promise<CopyDecision> {
  const { editable } = editability(state, options.bidirectional);
  if (await copyIsCurrent(db, copy.itemId, state, editable)) return { mode: "current" };
  const data = await findDataCopy(db.kysely, copy.itemId);
  const wasCopied = data?.mode === "copy";
  // A reference stays one until its origin's definition changes (it may then fit).
  let refusal: string | undefined;
  if (!wasCopied && state.bytes > options.maxItemSizeInMB * MB) {
    refusal = `its data (about ${(state.bytes / MB).toFixed(1)} MB) is over the workspace's maxItemSizeInMB (${options.maxItemSizeInMB})`;
  } else {
    const applied = await applyServiceState(db, copy.itemId, state, options.servicesBase, editable);
    if (applied.ok) return { mode: "copy", created: applied.value.created };
    refusal = applied.reason;
  }
  if (options.byRef && !wasCopied) {
    await db.transaction((trx) =>
      saveDataCopy(trx, {
        item_id: copy.itemId,
        mode: "reference",
        reason: refusal,
        origin_modified: state.modified,
      }),
    );
    return { mode: "reference", reason: refusal, removed: false };
  }
  if (!wasCopied) {
    await db.transaction(async (trx) => {
      const item = await findItem(trx, copy.itemId);
      if (!item) return;
      await deleteItem(trx, item.id, dropServiceStorage);
      await deleteCopy(trx, {
        workspaceId: copy.workspaceId,
        originPortalId: copy.originPortalId,
        originItemId: copy.originId,
      });
      await recordEvent(trx, {
        source: "item",
        operation: "delete",
        objectId: item.id,
        actor: { id: item.owner_id, username: item.owner },
      });
    });
  }
  return { mode: "failed", reason: refusal, removed: !wasCopied };
}
