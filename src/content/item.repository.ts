import type { Insertable, Selectable, Updateable } from "kysely";
import { noteChange } from "../db/change-feed.js";
import { type Engine, later, type Queryable } from "../db/database.js";
import type { FolderTable, ItemTable } from "../db/schema.js";
import { categoryKey } from "./extent.js";
import { refreshItemWords, writeItemsWords, writeItemWords } from "./word-index.js";

export type ItemRow = Selectable<ItemTable>;
export type FolderRow = Selectable<FolderTable>;

/**
 * The lower-case copies of an item's owner, title and type that lookups and sorting use. Only this
 * repository writes them, from the columns they copy, so they cannot fall out of step.
 */
type ItemKeyColumns = "owner_key" | "title_key" | "type_key";
export type NewItem = Omit<Insertable<ItemTable>, ItemKeyColumns>;
export type ItemChanges = Omit<Updateable<ItemTable>, ItemKeyColumns>;
export type NewFolder = Omit<FolderRow, "title_key">;

function itemKeys(columns: ItemChanges): Pick<Updateable<ItemTable>, ItemKeyColumns> {
  return {
    ...(columns.owner !== undefined ? { owner_key: columns.owner.toLowerCase() } : {}),
    ...(columns.title !== undefined ? { title_key: columns.title.toLowerCase() } : {}),
    ...(columns.type !== undefined ? { type_key: columns.type.toLowerCase() } : {}),
  };
}

export function findItem(q: Queryable, id: string): Promise<ItemRow | undefined> {
  return q.selectFrom("items").selectAll().where("id", "=", id).executeTakeFirst();
}

/**
 * Reads an item and, on PostgreSQL, locks its row until the transaction ends, so that what a
 * change decides from the item and its dependents (a count of its resources, info files,
 * parts or relationships against a cap) still holds when the change is written: a second
 * request for the same item waits here, then counts what the first one wrote. SQLite
 * transactions are already serialised.
 */
export function findItemForUpdate(q: Queryable, engine: Engine, id: string): Promise<ItemRow | undefined> {
  const query = q.selectFrom("items").selectAll().where("id", "=", id);
  return (engine === "postgres" ? query.forUpdate() : query).executeTakeFirst();
}

/**
 * Several items by id, locked on PostgreSQL until the transaction ends (taken in id order, so that
 * two transactions locking overlapping sets wait rather than deadlock): what a change of many
 * copies from them (the owner, access and time its tag rows copy) is then what it writes over, as
 * `findItemForUpdate` does for one. Ids of missing items are left out.
 */
export function findItemsForUpdate(q: Queryable, engine: Engine, ids: readonly string[]): Promise<ItemRow[]> {
  if (ids.length === 0) return Promise.resolve([]);
  const query = q
    .selectFrom("items")
    .selectAll()
    .where("id", "in", [...ids])
    .orderBy("id");
  return (engine === "postgres" ? query.forUpdate() : query).execute();
}

/** Several items by id, in one query; ids of missing items are left out. */
export function findItems(q: Queryable, ids: readonly string[]): Promise<ItemRow[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return q
    .selectFrom("items")
    .selectAll()
    .where("id", "in", [...ids])
    .execute();
}

export async function insertItem(
  q: Queryable,
  row: NewItem,
  tags: readonly string[],
  categories: readonly string[] = [],
): Promise<void> {
  await q
    .insertInto("items")
    .values({
      ...row,
      owner_key: row.owner.toLowerCase(),
      title_key: row.title.toLowerCase(),
      type_key: row.type.toLowerCase(),
    })
    .execute();
  await replaceTags(q, row.id, tags);
  if (categories.length > 0) await replaceCategories(q, row.id, categories);
  await writeItemWords(q, {
    id: row.id,
    title: row.title,
    description: row.description,
    snippet: row.snippet,
    tags: row.tags,
  });
}

/** The columns the full-text index of search is made from (migration 0009). */
const WORD_COLUMNS = ["title", "description", "snippet", "tags"] as const;

/**
 * New items, each with its tags, as `insertItem` stores one, in one statement per table rather
 * than a few per item: for stores of many items at once (a page of received collaboration items).
 */
export async function insertItems(
  q: Queryable,
  items: readonly { row: NewItem; tags: readonly string[] }[],
): Promise<void> {
  if (items.length === 0) return;
  await q
    .insertInto("items")
    .values(
      items.map(({ row }) => ({
        ...row,
        owner_key: row.owner.toLowerCase(),
        title_key: row.title.toLowerCase(),
        type_key: row.type.toLowerCase(),
      })),
    )
    .execute();
  // The tag rows copy the item's search columns, as `replaceTags` reads them back; here they are
  // the values just inserted.
  await insertTagRows(
    q,
    items.map(({ row, tags }) => ({ item: row, tags })),
  );
  await writeItemsWords(
    q,
    items.map(({ row }) => ({
      id: row.id,
      title: row.title,
      description: row.description,
      snippet: row.snippet,
      tags: row.tags,
    })),
  );
}

/** Tag rows of items, copying the search columns the items hold (see `replaceTags`). */
async function insertTagRows(
  q: Queryable,
  items: readonly {
    item: Pick<ItemRow, "id" | "modified" | "access" | "owner_id">;
    tags: readonly string[];
  }[],
): Promise<void> {
  const rows = items.flatMap(({ item, tags }) =>
    [...new Set(tags.map((t) => t.toLowerCase()))].map((tag_key) => ({
      item_id: item.id,
      tag_key,
      modified: item.modified,
      access: item.access,
      owner_id: item.owner_id,
    })),
  );
  if (rows.length > 0) await q.insertInto("item_tags").values(rows).execute();
}

/**
 * Changes several items, each by its own `patch`, and replaces their tags, as `updateItem` and
 * `replaceTags` change one: for stores of many items at once (a page of received collaboration
 * items). `item` is each row as read in this transaction. The updates (one per item) and the
 * delete of the old tags are not answered: on PostgreSQL they travel with the insert of the new
 * tags (`later`) instead of a round trip each, and a failure fails the transaction there. The
 * multi-row inserts go as statements of their own: written into the text as literals, their
 * values would cost more to inline than the round trip saves.
 */
export async function updateItems(
  q: Queryable,
  changes: readonly { item: ItemRow; patch: ItemChanges; tags: readonly string[] }[],
): Promise<void> {
  if (changes.length === 0) return;
  const after = changes.map(({ item, patch, tags }) => ({
    row: { ...item, ...patch } as ItemRow,
    patch,
    tags,
  }));
  for (const { row, patch } of after) {
    noteChange(q, `content:${row.id}`);
    await later(
      q,
      q
        .updateTable("items")
        .set({ ...patch, ...itemKeys(patch) })
        .where("id", "=", row.id)
        .compile(),
    );
  }
  // The tag rows copy the search columns the items hold after the change, as `replaceTags` reads them.
  await later(
    q,
    q
      .deleteFrom("item_tags")
      .where(
        "item_id",
        "in",
        after.map((a) => a.row.id),
      )
      .compile(),
  );
  await insertTagRows(
    q,
    after.map(({ row, tags }) => ({ item: row, tags })),
  );
  await writeItemsWords(
    q,
    after.filter(({ patch }) => WORD_COLUMNS.some((c) => patch[c] !== undefined)).map(({ row }) => row),
  );
}

/** Any column may decide who sees the item (owner, access) or be shown by a cache: `content` notes it. */
export async function updateItem(q: Queryable, id: string, patch: ItemChanges): Promise<void> {
  noteChange(q, `content:${id}`);
  await q
    .updateTable("items")
    .set({ ...patch, ...itemKeys(patch) })
    .where("id", "=", id)
    .execute();
  if (WORD_COLUMNS.some((c) => patch[c] !== undefined)) await refreshItemWords(q, id);
}

/**
 * Keeps the tag index in step with the item's tags. The rows copy the item's search columns as
 * they are now; a trigger keeps them in step with later changes of the item (migration 0004).
 */
export async function replaceTags(q: Queryable, itemId: string, tags: readonly string[]): Promise<void> {
  await q.deleteFrom("item_tags").where("item_id", "=", itemId).execute();
  const keys = [...new Set(tags.map((t) => t.toLowerCase()))];
  if (keys.length === 0) return;
  const item = await q
    .selectFrom("items")
    .select(["modified", "access", "owner_id"])
    .where("id", "=", itemId)
    .executeTakeFirstOrThrow();
  await q
    .insertInto("item_tags")
    .values(keys.map((tag_key) => ({ item_id: itemId, tag_key, ...item })))
    .execute();
}

/**
 * Sets an item's categories: the list the item shows (`items.categories`) and the lower-case keys
 * search reads (`item_categories`), both here so that they cannot disagree. A path repeated
 * without regard to case is kept once, as first spelled.
 */
export async function replaceCategories(
  q: Queryable,
  itemId: string,
  categories: readonly string[],
): Promise<void> {
  const byKey = new Map<string, string>();
  for (const path of categories) if (!byKey.has(categoryKey(path))) byKey.set(categoryKey(path), path);
  noteChange(q, `content:${itemId}`);
  await q
    .updateTable("items")
    .set({ categories: JSON.stringify([...byKey.values()]) })
    .where("id", "=", itemId)
    .execute();
  await q.deleteFrom("item_categories").where("item_id", "=", itemId).execute();
  if (byKey.size === 0) return;
  await q
    .insertInto("item_categories")
    .values([...byKey.keys()].map((category_key) => ({ item_id: itemId, category_key })))
    .execute();
}

/**
 * Removes what an item keeps outside the content tables, in the deleting transaction: a hosted
 * service's layer tables, which no foreign key can remove. Content does not know those stores (the
 * hosted layers are built on items, not the other way round), so whoever deletes an item hands the
 * clean-up in; the type makes it impossible to forget.
 */
export type ItemStorageCleaner = (q: Queryable, itemId: string) => Promise<void>;

export async function deleteItem(q: Queryable, id: string, dropStorage: ItemStorageCleaner): Promise<void> {
  noteChange(q, `content:${id}`);
  // An Application item registered as an app takes the app, and every user's token made for it,
  // with it (the cascade of 0016): those tokens may be held in any node's cache of token holders,
  // whoever deletes the item (its owner, an administrator, the end of a replication).
  const app = await q
    .selectFrom("oauth_apps")
    .select("client_id")
    .where("item_id", "=", id)
    .executeTakeFirst();
  if (app) noteChange(q, "auth");
  await dropStorage(q, id);
  await q.deleteFrom("items").where("id", "=", id).execute();
}

/** Shares the item with a group; false when it already was (a concurrent share is not an error). */
export async function shareItem(q: Queryable, itemId: string, groupId: string): Promise<boolean> {
  noteChange(q, `content:${itemId}`);
  const inserted = await q
    .insertInto("item_shares")
    .values({ item_id: itemId, group_id: groupId })
    .onConflict((oc) => oc.columns(["item_id", "group_id"]).doNothing())
    .executeTakeFirst();
  return Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0;
}

/** Shares several items with a group, in one statement; the ids of those not shared with it before. */
export async function shareItemsWith(
  q: Queryable,
  itemIds: readonly string[],
  groupId: string,
): Promise<string[]> {
  if (itemIds.length === 0) return [];
  for (const id of itemIds) noteChange(q, `content:${id}`);
  const inserted = await q
    .insertInto("item_shares")
    .values(itemIds.map((item_id) => ({ item_id, group_id: groupId })))
    .onConflict((oc) => oc.columns(["item_id", "group_id"]).doNothing())
    .returning("item_id")
    .execute();
  return inserted.map((r) => r.item_id);
}

/** Stops sharing the item with a group; false when it was not shared with it. */
export async function unshareItem(q: Queryable, itemId: string, groupId: string): Promise<boolean> {
  noteChange(q, `content:${itemId}`);
  const r = await q
    .deleteFrom("item_shares")
    .where("item_id", "=", itemId)
    .where("group_id", "=", groupId)
    .executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/**
 * The tags of an owner's items with the number of items that have each, most used first; at most
 * `limit`. Tags are as the search index keeps them: lower-case.
 */
export async function tagCountsOfOwner(
  q: Queryable,
  ownerId: string,
  limit: number,
): Promise<{ tag: string; count: number }[]> {
  const rows = await q
    .selectFrom("item_tags")
    .select(["tag_key", (eb) => eb.fn.countAll<number>().as("n")])
    .where("owner_id", "=", ownerId)
    .groupBy("tag_key")
    .orderBy("n", "desc")
    .orderBy("tag_key")
    .limit(limit)
    .execute();
  return rows.map((r) => ({ tag: r.tag_key, count: Number(r.n) }));
}

export function sharedGroupIds(q: Queryable, itemId: string): Promise<string[]> {
  return q
    .selectFrom("item_shares")
    .select("group_id")
    .where("item_id", "=", itemId)
    .execute()
    .then((rows) => rows.map((r) => r.group_id));
}

/** The groups each of several items is shared with, in one query (no query per item). */
export async function sharedGroupIdsOf(
  q: Queryable,
  itemIds: readonly string[],
): Promise<Map<string, string[]>> {
  const shares = new Map<string, string[]>(itemIds.map((id) => [id, []]));
  if (itemIds.length === 0) return shares;
  const rows = await q
    .selectFrom("item_shares")
    .select(["item_id", "group_id"])
    .where("item_id", "in", [...itemIds])
    .orderBy("group_id")
    .execute();
  for (const row of rows) shares.get(row.item_id)?.push(row.group_id);
  return shares;
}

export function findFolder(q: Queryable, ownerId: string, idOrTitle: string): Promise<FolderRow | undefined> {
  return q
    .selectFrom("folders")
    .selectAll()
    .where("owner_id", "=", ownerId)
    .where((eb) => eb.or([eb("id", "=", idOrTitle), eb("title_key", "=", idOrTitle.toLowerCase())]))
    .executeTakeFirst();
}

export function listFolders(q: Queryable, ownerId: string): Promise<FolderRow[]> {
  return q.selectFrom("folders").selectAll().where("owner_id", "=", ownerId).orderBy("created").execute();
}

export async function insertFolder(q: Queryable, row: NewFolder): Promise<void> {
  await q
    .insertInto("folders")
    .values({ ...row, title_key: row.title.toLowerCase() })
    .execute();
}

export async function deleteFolder(q: Queryable, id: string): Promise<void> {
  await q.deleteFrom("folders").where("id", "=", id).execute();
}

export async function countItemsInFolder(q: Queryable, folderId: string): Promise<number> {
  const row = await q
    .selectFrom("items")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("folder_id", "=", folderId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** A user's items in one folder (null: the root), newest first. */
export async function listOwnItems(
  q: Queryable,
  ownerId: string,
  folderId: string | null,
  page: { offset: number; limit: number },
): Promise<{ total: number; rows: ItemRow[] }> {
  const base = q
    .selectFrom("items")
    .where("owner_id", "=", ownerId)
    .where("folder_id", folderId === null ? "is" : "=", folderId);
  const total = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow();
  const rows = await base
    .selectAll()
    .orderBy("modified", "desc")
    .orderBy("id")
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { total: Number(total.n), rows };
}
