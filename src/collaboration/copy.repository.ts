import { later, type Queryable } from "../db/database.js";
import type { CopyTable } from "../db/schema.js";

/**
 * The copies replication made on this portal (`collaboration_copies`): which item here holds
 * which origin item of which participant, in which workspace, at which version. A withdrawn copy
 * (its origin left the workspace, the item stays here) keeps its row with version -1.
 */

/** Which origin item, of which participant, in which workspace. */
export interface CopyKey {
  workspaceId: string;
  originPortalId: string;
  originItemId: string;
}

export const WITHDRAWN = -1;

export function findCopy(q: Queryable, key: CopyKey): Promise<Pick<CopyTable, "item_id"> | undefined> {
  return q
    .selectFrom("collaboration_copies")
    .select("item_id")
    .where("workspace_id", "=", key.workspaceId)
    .where("origin_portal_id", "=", key.originPortalId)
    .where("origin_item_id", "=", key.originItemId)
    .executeTakeFirst();
}

/** Records that `itemId` holds `version` of the origin item: `replacing` the record there is, or a first one. */
export async function saveCopy(
  q: Queryable,
  key: CopyKey,
  itemId: string,
  version: number,
  replacing: boolean,
): Promise<void> {
  if (replacing) {
    await q
      .updateTable("collaboration_copies")
      .set({ item_id: itemId, origin_version: version })
      .where("workspace_id", "=", key.workspaceId)
      .where("origin_portal_id", "=", key.originPortalId)
      .where("origin_item_id", "=", key.originItemId)
      .execute();
  } else {
    await q
      .insertInto("collaboration_copies")
      .values(copyRow(key, itemId, version))
      .execute();
  }
}

function copyRow(key: CopyKey, itemId: string, version: number) {
  return {
    workspace_id: key.workspaceId,
    origin_portal_id: key.originPortalId,
    origin_item_id: key.originItemId,
    item_id: itemId,
    origin_version: version,
  };
}

/** First records of several copies: each `itemId` holds `version` of its origin item. */
export async function saveNewCopies(
  q: Queryable,
  copies: readonly { key: CopyKey; itemId: string; version: number }[],
): Promise<void> {
  if (copies.length === 0) return;
  await q
    .insertInto("collaboration_copies")
    .values(copies.map(({ key, itemId, version }) => copyRow(key, itemId, version)))
    .execute();
}

/**
 * New versions held by copies already recorded (`saveCopy` replacing, for several), each key's
 * item unchanged. No answer is read: on PostgreSQL the updates travel with the transaction's next
 * statement (`later`).
 */
export async function saveCopyVersions(
  q: Queryable,
  copies: readonly { key: CopyKey; version: number }[],
): Promise<void> {
  for (const { key, version } of copies) {
    await later(
      q,
      q
        .updateTable("collaboration_copies")
        .set({ origin_version: version })
        .where("workspace_id", "=", key.workspaceId)
        .where("origin_portal_id", "=", key.originPortalId)
        .where("origin_item_id", "=", key.originItemId)
        .compile(),
    );
  }
}

/** The copies recorded among these origin items of one participant in a workspace: origin id -> item id here. */
export async function copiesOf(
  q: Queryable,
  workspaceId: string,
  originPortalId: string,
  originItemIds: readonly string[],
): Promise<Map<string, string>> {
  if (originItemIds.length === 0) return new Map();
  const rows = await q
    .selectFrom("collaboration_copies")
    .select(["origin_item_id", "item_id"])
    .where("workspace_id", "=", workspaceId)
    .where("origin_portal_id", "=", originPortalId)
    .where("origin_item_id", "in", [...originItemIds])
    .execute();
  return new Map(rows.map((r) => [r.origin_item_id, r.item_id]));
}

export async function markWithdrawn(q: Queryable, key: CopyKey): Promise<void> {
  await q
    .updateTable("collaboration_copies")
    .set({ origin_version: WITHDRAWN })
    .where("workspace_id", "=", key.workspaceId)
    .where("origin_portal_id", "=", key.originPortalId)
    .where("origin_item_id", "=", key.originItemId)
    .execute();
}

export async function deleteCopy(q: Queryable, key: CopyKey): Promise<void> {
  await q
    .deleteFrom("collaboration_copies")
    .where("workspace_id", "=", key.workspaceId)
    .where("origin_portal_id", "=", key.originPortalId)
    .where("origin_item_id", "=", key.originItemId)
    .execute();
}

/** The copies of these workspaces, of every origin or of one. */
export function listCopies(
  q: Queryable,
  workspaceIds: readonly string[],
  originPortalId?: string,
): Promise<CopyTable[]> {
  let query = q
    .selectFrom("collaboration_copies")
    .selectAll()
    .where("workspace_id", "in", [...workspaceIds]);
  if (originPortalId !== undefined) query = query.where("origin_portal_id", "=", originPortalId);
  return query.execute();
}

/** The origin versions held of one participant's items in a workspace, by origin item id. */
export async function heldVersions(
  q: Queryable,
  workspaceId: string,
  originPortalId: string,
): Promise<Record<string, number>> {
  // A copy whose item was deleted here is not held: the next sync brings it again.
  const rows = await q
    .selectFrom("collaboration_copies as c")
    .innerJoin("items as i", "i.id", "c.item_id")
    .select(["c.origin_item_id", "c.origin_version"])
    .where("c.workspace_id", "=", workspaceId)
    .where("c.origin_portal_id", "=", originPortalId)
    .execute();
  return Object.fromEntries(rows.map((r) => [r.origin_item_id, Number(r.origin_version)]));
}

/** Which of these items are copies. */
export async function copiesAmong(q: Queryable, itemIds: readonly string[]): Promise<Set<string>> {
  const rows = await q
    .selectFrom("collaboration_copies")
    .select("item_id")
    .where("item_id", "in", [...itemIds])
    .execute();
  return new Set(rows.map((r) => r.item_id));
}
