import {
  deleteFile,
  deleteFilesOf,
  type FileKind,
  type NewFile,
  readAllOf,
  writeFile,
  writeNewFiles,
} from "../content/file-store.js";
import {
  deleteItem,
  findItem,
  findItemsForUpdate,
  insertItem,
  insertItems,
  replaceTags,
  shareItem,
  shareItemsWith,
  unshareItem,
  updateItem,
  updateItems,
} from "../content/item.repository.js";
import type { Db, Engine, Queryable } from "../db/database.js";
import { type ChangeEvent, recordEvent, recordEvents } from "../events/outbox.js";
import { dropServiceStorage } from "../features/layer-store.js";
import { findGroup } from "../groups/group.repository.js";
import { newId } from "../ids.js";
import {
  type CopyKey,
  copiesAmong,
  copiesOf,
  deleteCopy,
  findCopy,
  listCopies,
  markWithdrawn,
  saveCopy,
  saveCopyVersions,
  saveNewCopies,
} from "./copy.repository.js";
import { findDataCopies, findDataCopy } from "./layer-copy.js";
import { findLink } from "./workspace.repository.js";

/**
 * What replication does to a portal's own content, on whichever side runs it: listing what a
 * workspace's linked group offers, packaging items, and applying received items or their
 * withdrawal. The sync engine decides what to move; this module moves it. Each change commits with
 * its events, and one bad item never undoes the others: the items received in a page (new copies
 * and new versions) commit together, and when that fails, and for every other change, one item per
 * transaction.
 */

/** One entry of a sender's offer: an item shared to the linked group that is not itself a copy. */
export interface OfferEntry {
  id: string;
  /** The item's `modified`; a copy holding an older version is out of date. */
  version: number;
  /** Bytes of data (the item's `size`). */
  size: number;
  title: string;
}

/** What a receiver holds of one origin's items: origin item id -> version (-1: withdrawn). */
export type Holdings = Record<string, number>;

export interface ItemPackage {
  id: string;
  version: number;
  title: string;
  type: string;
  typeKeywords: string[];
  description: string;
  snippet: string;
  tags: string[];
  url: string | null;
  properties: Record<string, unknown> | null;
  size: number;
  data: FilePackage | null;
  thumbnail: FilePackage | null;
}

export interface FilePackage {
  name: string;
  contentType: string;
  /** Base64. */
  content: string;
}

/** A sender's answer for one requested item: its package, or why it is no longer offered. */
export type Export =
  | { id: string; state: "present"; item: ItemPackage }
  | { id: string; state: "deleted" | "unshared" };

export type ItemAction = "created" | "updated" | "withdrawn" | "deleted";

export interface ItemResult {
  id: string;
  title: string;
  ok: boolean;
  action?: ItemAction;
  reason?: string;
}

/** Item ids of a linked group that replication may send: shared to it and not received copies. */
/** The items a linked group offers: shared to it, and not received copies. */
function offered(q: Queryable, groupId: string) {
  return q
    .selectFrom("item_shares as s")
    .innerJoin("items as i", "i.id", "s.item_id")
    .leftJoin("collaboration_copies as c", "c.item_id", "i.id")
    .where("s.group_id", "=", groupId)
    .where("c.item_id", "is", null);
}

export async function offer(q: Queryable, groupId: string): Promise<OfferEntry[]> {
  const rows = await offered(q, groupId)
    .select(["i.id", "i.modified", "i.size", "i.title"])
    .orderBy("i.id")
    .execute();
  return rows.map((r) => ({ id: r.id, version: Number(r.modified), size: Number(r.size), title: r.title }));
}

/**
 * A summary of the offer that changes whenever the offer does (an item added, removed or
 * changed: every change raises an item's `modified`), computed in the database rather than by
 * listing the items, since realtime links ask after every recorded change.
 */
export async function offerFingerprint(q: Queryable, groupId: string): Promise<string> {
  const row = await offered(q, groupId)
    .select((eb) => [
      eb.fn.countAll().as("n"),
      eb.fn.max("i.modified").as("newest"),
      eb.fn.sum("i.modified").as("total"),
    ])
    .executeTakeFirst();
  return `${row?.n ?? 0}:${row?.newest ?? 0}:${row?.total ?? 0}`;
}

/**
 * What must move from an offer to a receiver holding `held`: items new or changed, copies whose
 * origin left the offer, and `withdrawn` copies (left earlier, still not offered) whose origin the
 * receiver must still hear about if it is deleted, so that the delete policy reaches them too.
 */
export function difference(entries: readonly OfferEntry[], held: Holdings) {
  const offered = new Set(entries.map((e) => e.id));
  const changed = entries.filter((e) => held[e.id] !== e.version);
  const gone: string[] = [];
  const withdrawn: string[] = [];
  for (const [id, version] of Object.entries(held)) {
    if (offered.has(id)) continue;
    (version === -1 ? withdrawn : gone).push(id);
  }
  return { changed, gone, withdrawn };
}

/** Packages `ids` as they are now in the linked group. */
export async function exportItems(q: Queryable, groupId: string, ids: readonly string[]): Promise<Export[]> {
  if (ids.length === 0) return [];
  const rows = await q
    .selectFrom("items")
    .selectAll()
    .where("id", "in", [...ids])
    .execute();
  const shared = new Set(
    (
      await q
        .selectFrom("item_shares")
        .select("item_id")
        .where("group_id", "=", groupId)
        .where("item_id", "in", [...ids])
        .execute()
    ).map((r) => r.item_id),
  );
  // A received copy is never sent on, even when asked for by id.
  const copies = await copiesAmong(q, ids);
  const byId = new Map(rows.map((r) => [r.id, r]));
  // The files of the whole page are read together (a few statements rather than two per file);
  // the answer holds them all anyway, base64 in JSON.
  const files = await readAllOf(
    q,
    ids.filter((id) => byId.has(id) && shared.has(id) && !copies.has(id)),
    ["data", "thumbnail"],
  );
  return ids.map((id): Export => {
    const row = byId.get(id);
    if (!row) return { id, state: "deleted" };
    if (!shared.has(id) || copies.has(id)) return { id, state: "unshared" };
    const stored = files.get(id);
    const file = (kind: FileKind): FilePackage | null => {
      const read = stored?.get(kind);
      return read
        ? { name: read.file.name, contentType: read.file.contentType, content: read.bytes.toString("base64") }
        : null;
    };
    return {
      id,
      state: "present",
      item: {
        id,
        version: Number(row.modified),
        title: row.title,
        type: row.type,
        typeKeywords: JSON.parse(row.type_keywords) as string[],
        description: row.description,
        snippet: row.snippet,
        tags: JSON.parse(row.tags) as string[],
        url: row.url,
        properties: row.properties ? (JSON.parse(row.properties) as Record<string, unknown>) : null,
        size: Number(row.size),
        data: file("data"),
        thumbnail: file("thumbnail"),
      },
    };
  });
}

interface Target {
  workspaceId: string;
  originPortalId: string;
  /** The receiver's linked group; copies are shared to it and owned by its owner. */
  groupId: string;
}

/**
 * Transactions of single items that one page's fallback or withdrawal runs at once on PostgreSQL.
 * Each holds a pooled connection until it commits, and the pool is shared with everything else the
 * portal does (10 connections for test portals): a page of 100 at once would queue behind itself
 * and starve the rest. On SQLite they all go at once, so that its group commit shares one fsync
 * among them.
 */
const ITEMS_AT_ONCE_ON_POSTGRES = 4;

/** `work` on each of `inputs`, at most `limit` at a time; results in the order of `inputs`. */
async function inTurns<I, R>(
  inputs: readonly I[],
  limit: number,
  work: (input: I) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(inputs.length);
  let next = 0;
  const worker = async () => {
    while (next < inputs.length) {
      const i = next++;
      results[i] = await work(inputs[i] as I);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, inputs.length) }, worker));
  return results;
}

function itemsAtOnce(db: Db): number {
  return db.engine === "postgres" ? ITEMS_AT_ONCE_ON_POSTGRES : Number.POSITIVE_INFINITY;
}

/**
 * Applies received items on this portal. A page is stored together, in one transaction of a few
 * statements for the whole page rather than a dozen round trips each: new copies, and new versions
 * of copies this portal holds. Every item that path leaves out (a copy whose item was deleted
 * here), and every item of a page whose transaction failed (nothing of which is kept), is applied
 * in a transaction of its own, so that one bad item fails alone and never undoes the others.
 */
export async function applyItems(
  db: Db,
  target: Target,
  packages: readonly ItemPackage[],
): Promise<ItemResult[]> {
  const group = await findGroup(db.kysely, target.groupId);
  if (!group) {
    return packages.map((p) => ({
      id: p.id,
      title: p.title,
      ok: false,
      reason: "the linked group no longer exists",
    }));
  }
  let stored = new Map<string, ItemAction>();
  if (packages.length > 1) {
    try {
      stored = await db.transaction((trx) => storePage(trx, db.engine, target, group, packages));
    } catch {
      // Not a failure of any item yet: each is tried alone below, and fails with its own reason.
    }
  }
  const alone = await inTurns(
    packages.filter((pkg) => !stored.has(pkg.id)),
    itemsAtOnce(db),
    async (pkg): Promise<ItemResult> => {
      try {
        const action = await db.transaction((trx) => applyOne(trx, target, group, pkg));
        return { id: pkg.id, title: pkg.title, ok: true, action };
      } catch (err) {
        return {
          id: pkg.id,
          title: pkg.title,
          ok: false,
          reason: `could not be stored: ${(err as Error).message}`,
        };
      }
    },
  );
  const byId = new Map(alone.map((r) => [r.id, r]));
  return packages.map(
    (pkg) =>
      byId.get(pkg.id) ?? {
        id: pkg.id,
        title: pkg.title,
        ok: true,
        action: stored.get(pkg.id) ?? ("created" as const),
      },
  );
}

/** The columns of a copy's `items` row that come from its package. */
function packageFields(pkg: ItemPackage) {
  return {
    title: pkg.title,
    type: pkg.type,
    type_keywords: JSON.stringify(pkg.typeKeywords),
    description: pkg.description,
    snippet: pkg.snippet,
    tags: JSON.stringify(pkg.tags),
    url: pkg.url,
    properties: pkg.properties ? JSON.stringify(pkg.properties) : null,
    size: pkg.size,
    thumbnail: pkg.thumbnail ? `thumbnail/${pkg.thumbnail.name}` : null,
  };
}

/** A package's files, as `writeNewFiles` stores them for the item `itemId`. */
function packageFiles(pkg: ItemPackage, itemId: string): NewFile[] {
  return (
    [
      ["data", pkg.data],
      ["thumbnail", pkg.thumbnail],
    ] as const
  ).flatMap(([kind, file]) =>
    file
      ? [
          {
            itemId,
            kind,
            name: file.name,
            contentType: file.contentType,
            data: Buffer.from(file.content, "base64"),
          },
        ]
      : [],
  );
}

/**
 * Stores, in `trx`, a page of packages as `applyOne` stores each (item, tags, words, files,
 * sharing, events, copy record), with one statement per table for them all: new copies of origin
 * items this portal holds none of, new versions of those it holds. Answers what was done, by
 * origin id; a package whose copy's item is gone here is left out (`applyOne` makes it anew).
 */
async function storePage(
  trx: Queryable,
  engine: Engine,
  target: Target,
  owner: { id: string; owner_id: string; owner: string },
  packages: readonly ItemPackage[],
): Promise<Map<string, ItemAction>> {
  const copies = await copiesOf(
    trx,
    target.workspaceId,
    target.originPortalId,
    packages.map((p) => p.id),
  );
  // Locked: a reassignment or sharing change committing meanwhile would otherwise leave the new
  // tag rows with the owner and access read here.
  const items = new Map(
    (await findItemsForUpdate(trx, engine, [...new Set(copies.values())])).map((i) => [i.id, i]),
  );
  const now = Date.now();
  const made = packages.filter((pkg) => !copies.has(pkg.id)).map((pkg) => ({ pkg, itemId: newId() }));
  const changed = packages.flatMap((pkg) => {
    const item = items.get(copies.get(pkg.id) ?? "");
    return item ? [{ pkg, item }] : [];
  });
  if (made.length === 0 && changed.length === 0) return new Map();
  // A copy holding its origin's feature data is a hosted service of this portal: it keeps its own URL.
  const dataCopies = await findDataCopies(
    trx,
    changed.map((c) => c.item.id),
  );
  await insertItems(
    trx,
    made.map(({ pkg, itemId }) => ({
      row: {
        id: itemId,
        owner_id: owner.owner_id,
        owner: owner.owner,
        folder_id: null,
        ...packageFields(pkg),
        access: "shared",
        protected: 0,
        created: now,
        modified: now,
      },
      tags: pkg.tags,
    })),
  );
  await updateItems(
    trx,
    changed.map(({ pkg, item }) => {
      const fields = packageFields(pkg);
      if (dataCopies.get(item.id)?.mode === "copy") fields.url = item.url;
      return {
        item,
        patch: {
          ...fields,
          access: item.access === "private" ? "shared" : item.access,
          modified: Math.max(now, item.modified + 1),
        },
        tags: pkg.tags,
      };
    }),
  );
  // A new version replaces every file of the copy, as `applyOne` does.
  await deleteFilesOf(
    trx,
    changed.map((c) => c.item.id),
  );
  const stored = [
    ...made.map(({ pkg, itemId }) => ({ pkg, itemId, action: "created" as const })),
    ...changed.map(({ pkg, item }) => ({ pkg, itemId: item.id, action: "updated" as const })),
  ];
  await writeNewFiles(
    trx,
    stored.flatMap(({ pkg, itemId }) => packageFiles(pkg, itemId)),
  );
  const shared = new Set(
    await shareItemsWith(
      trx,
      stored.map((m) => m.itemId),
      target.groupId,
    ),
  );
  const actor = { id: owner.owner_id, username: owner.owner };
  await recordEvents(
    trx,
    stored.flatMap(({ pkg, itemId, action }): ChangeEvent[] => [
      { source: "item", operation: action === "created" ? "add" : "update", objectId: itemId, actor },
      ...(shared.has(itemId)
        ? [
            {
              source: "group" as const,
              operation: "share",
              objectId: target.groupId,
              actor,
              properties: { sharedItems: [{ itemId, itemType: pkg.type }] },
            },
            {
              source: "item" as const,
              operation: "share",
              objectId: itemId,
              actor,
              properties: { sharedToGroups: [target.groupId] },
            },
          ]
        : []),
    ]),
    now,
  );
  await saveNewCopies(
    trx,
    made.map(({ pkg, itemId }) => ({ key: copyKey(target, pkg.id), itemId, version: pkg.version })),
  );
  await saveCopyVersions(
    trx,
    changed.map(({ pkg }) => ({ key: copyKey(target, pkg.id), version: pkg.version })),
  );
  return new Map(stored.map(({ pkg, action }) => [pkg.id, action]));
}

async function applyOne(
  trx: Queryable,
  target: Target,
  owner: { id: string; owner_id: string; owner: string },
  pkg: ItemPackage,
): Promise<ItemAction> {
  const now = Date.now();
  const actor = { id: owner.owner_id, username: owner.owner };
  const key = copyKey(target, pkg.id);
  const copy = await findCopy(trx, key);
  const existing = copy ? await findItem(trx, copy.item_id) : undefined;
  const fields = packageFields(pkg);
  // A copy holding its origin's feature data is a hosted service of this portal: it keeps its own URL.
  if (existing && (await findDataCopy(trx, existing.id))?.mode === "copy") fields.url = existing.url;
  let itemId: string;
  let action: ItemAction;
  if (existing) {
    itemId = existing.id;
    await updateItem(trx, itemId, {
      ...fields,
      access: existing.access === "private" ? "shared" : existing.access,
      modified: Math.max(now, existing.modified + 1),
    });
    await replaceTags(trx, itemId, pkg.tags);
    await deleteFile(trx, itemId);
    action = "updated";
  } else {
    itemId = newId();
    await insertItem(
      trx,
      {
        id: itemId,
        owner_id: owner.owner_id,
        owner: owner.owner,
        folder_id: null,
        ...fields,
        access: "shared",
        protected: 0,
        created: now,
        modified: now,
      },
      pkg.tags,
    );
    action = "created";
  }
  for (const [kind, file] of [
    ["data", pkg.data],
    ["thumbnail", pkg.thumbnail],
  ] as const) {
    if (file) {
      await writeFile(
        trx,
        itemId,
        kind,
        { name: file.name, contentType: file.contentType },
        { data: Buffer.from(file.content, "base64") },
      );
    }
  }
  await recordEvent(
    trx,
    { source: "item", operation: action === "created" ? "add" : "update", objectId: itemId, actor },
    now,
  );
  if (await shareItem(trx, itemId, target.groupId)) {
    await recordEvent(trx, {
      source: "group",
      operation: "share",
      objectId: target.groupId,
      actor,
      properties: { sharedItems: [{ itemId, itemType: pkg.type }] },
    });
    await recordEvent(trx, {
      source: "item",
      operation: "share",
      objectId: itemId,
      actor,
      properties: { sharedToGroups: [target.groupId] },
    });
  }
  await saveCopy(trx, key, itemId, pkg.version, copy !== undefined);
  return action;
}

/**
 * Withdraws copies whose origin item left the workspace: each leaves the linked group. When the
 * origin was deleted (now, or after an unshare had already withdrawn the copy), the copy is
 * deleted if the contributor's delete policy says its items go with it and it is not protected,
 * and released otherwise: its origin is gone for good, so it is no longer a copy of anything.
 */
export async function withdrawItems(
  db: Db,
  target: Target,
  gone: readonly { id: string; state: "deleted" | "unshared" }[],
  deleteContributed: boolean,
): Promise<ItemResult[]> {
  return inTurns(gone, itemsAtOnce(db), async ({ id, state }): Promise<ItemResult> => {
    try {
      return await db.transaction(async (trx) => {
        const key = copyKey(target, id);
        const copy = await findCopy(trx, key);
        const item = copy ? await findItem(trx, copy.item_id) : undefined;
        const title = item?.title ?? id;
        if (!copy || !item) {
          await deleteCopy(trx, key);
          return { id, title, ok: true, action: "withdrawn" as const };
        }
        const actor = { id: item.owner_id, username: item.owner };
        if (state === "deleted" && deleteContributed && item.protected !== 1) {
          await deleteItem(trx, item.id, dropServiceStorage);
          await deleteCopy(trx, key);
          await recordEvent(trx, { source: "item", operation: "delete", objectId: item.id, actor });
          return { id, title, ok: true, action: "deleted" as const };
        }
        await unshareFrom(trx, item.id, item.type, target.groupId, actor);
        if (state === "deleted") await deleteCopy(trx, key);
        else await markWithdrawn(trx, key);
        return { id, title, ok: true, action: "withdrawn" as const };
      });
    } catch (err) {
      return { id, title: id, ok: false, reason: `could not be withdrawn: ${(err as Error).message}` };
    }
  });
}

function copyKey(target: Target, originItemId: string): CopyKey {
  return { workspaceId: target.workspaceId, originPortalId: target.originPortalId, originItemId };
}

async function unshareFrom(
  trx: Queryable,
  itemId: string,
  itemType: string,
  groupId: string,
  actor: { id: string; username: string },
) {
  if (!(await unshareItem(trx, itemId, groupId))) return;
  const still = await trx
    .selectFrom("item_shares")
    .select("group_id")
    .where("item_id", "=", itemId)
    .limit(1)
    .executeTakeFirst();
  const item = await findItem(trx, itemId);
  if (item && item.access === "shared" && !still) await updateItem(trx, itemId, { access: "private" });
  await recordEvent(trx, {
    source: "group",
    operation: "unshare",
    objectId: groupId,
    actor,
    properties: { unsharedItems: [{ itemId, itemType }] },
  });
  await recordEvent(trx, {
    source: "item",
    operation: "unshare",
    objectId: itemId,
    actor,
    properties: { unsharedFromGroups: [groupId] },
  });
}

/**
 * Ends what this portal holds for a workspace (or for one origin in it) when replication ends:
 * the copies are deleted when `deleteItems` (protected items excepted), else they stay as this
 * portal's own items. Either way they are no longer copies. With `leaveGroup`, kept items also
 * leave the linked group: the workspace goes on, and what was a copy must not be offered as this
 * portal's own item to the others.
 */
export async function releaseCopies(
  trx: Queryable,
  workspaceIds: readonly string[],
  deleteItems: (originPortalId: string) => boolean,
  originPortalId?: string,
  leaveGroup = false,
): Promise<number> {
  if (workspaceIds.length === 0) return 0;
  const copies = await listCopies(trx, workspaceIds, originPortalId);
  let deleted = 0;
  for (const copy of copies) {
    const item = await findItem(trx, copy.item_id);
    if (item && deleteItems(copy.origin_portal_id) && item.protected !== 1) {
      await deleteItem(trx, item.id, dropServiceStorage);
      await recordEvent(trx, {
        source: "item",
        operation: "delete",
        objectId: item.id,
        actor: { id: item.owner_id, username: item.owner },
      });
      deleted++;
    } else if (item && leaveGroup) {
      const link = await findLink(trx, copy.workspace_id);
      if (link)
        await unshareFrom(trx, item.id, item.type, link.group_id, {
          id: item.owner_id,
          username: item.owner,
        });
    }
    await deleteCopy(trx, {
      workspaceId: copy.workspace_id,
      originPortalId: copy.origin_portal_id,
      originItemId: copy.origin_item_id,
    });
  }
  return deleted;
}
