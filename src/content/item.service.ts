import type { Readable } from "node:stream";
import type { Transaction } from "kysely";
import {
  actorOf,
  type Caller,
  isCaller,
  requireMayManageAccountOf,
  requirePrivilege,
  unseen,
} from "../auth/caller.js";
import { FeedCache } from "../db/cache.js";
import { type Db, isUniqueViolation } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { newId } from "../ids.js";
import { jsonValue, storedJsonList } from "../json-answer.js";
import type { PortalService } from "../portal/portal.service.js";
import { findAccount, findUser } from "../users/user.repository.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { canViewItem, type Viewer, viewerOf } from "./access.js";
import { eachItemAlone, requireBulkCaller } from "./bulk.js";
import { type Box, extentJson } from "./extent.js";
import {
  countInfoFiles,
  deleteFile,
  type FileSource,
  findFile,
  headOf,
  readHead,
  readStream,
  type StoredFile,
  writeFile,
} from "./file-store.js";
import { IMAGE_HEAD_BYTES, imageType, type ThumbnailType } from "./file-types.js";
import {
  countItemsInFolder,
  deleteFolder,
  deleteItem,
  type FolderRow,
  findFolder,
  findItem,
  findItemForUpdate,
  type ItemRow,
  type ItemStorageCleaner,
  insertFolder,
  insertItem,
  listFolders,
  listOwnItems,
  type NewFolder,
  replaceCategories,
  replaceTags,
  sharedGroupIds,
  sharedGroupIdsOf,
  tagCountsOfOwner,
  updateItem,
} from "./item.repository.js";
import { infoFileType, infoKind, itemInfoXml, MAX_INFO_FILES } from "./item-info.js";

type Trx = Transaction<Database>;

/** Distinct tags `community/users/<u>/tags` lists at most, the most used first. */
const MAX_USER_TAGS = 10_000;

/**
 * An uploaded or inline file of an item: its bytes in memory (`text`) or in a file on disk (an
 * upload), stored a chunk at a time either way.
 */
export type ItemFile = { filename: string; contentType: string } & FileSource;

/** A stored file of an item to answer with; `open` streams its bytes a chunk at a time. */
export interface ItemFileDownload {
  filename: string;
  contentType: string;
  size: number;
  open(): Readable;
}

export interface ItemFields {
  title?: string | undefined;
  type?: string | undefined;
  typeKeywords?: string[] | undefined;
  description?: string | undefined;
  snippet?: string | undefined;
  tags?: string[] | undefined;
  url?: string | undefined;
  properties?: Record<string, unknown> | undefined;
  /** WGS 84 extent; cleared with `clearEmptyFields`. */
  extent?: Box | undefined;
  /** Category paths such as `/Categories/Water`; needs a categorizing privilege. */
  categories?: string[] | undefined;
  /** The item's data as an uploaded `file`; it wins over `text`. */
  data?: ItemFile | undefined;
  /** The item's data sent as the `text` parameter: stored as `data.json` when it parses as JSON. */
  text?: string | undefined;
  thumbnail?: ItemFile | undefined;
  /**
   * `addItem` with `multipart=true`: the name of the data to come in parts (`addPart`, `commit`);
   * the item has no data until then.
   */
  multipartFilename?: string | undefined;
}

/**
 * Data sent as text is served back as JSON when it is JSON (a web map's definition), as plain text
 * otherwise; the file name records which, so the item's `data` answers with the right type.
 */
function textData(text: string): ItemFile {
  let isJson = true;
  try {
    JSON.parse(text);
  } catch {
    isJson = false;
  }
  return {
    filename: isJson ? "data.json" : "data.txt",
    contentType: isJson ? "application/json" : "text/plain; charset=utf-8",
    data: Buffer.from(text, "utf8"),
  };
}

/** The extent columns of an item: a box, or none (all four null). */
function extentColumns(box: Box | null) {
  return {
    extent_xmin: box?.xmin ?? null,
    extent_ymin: box?.ymin ?? null,
    extent_xmax: box?.xmax ?? null,
    extent_ymax: box?.ymax ?? null,
  };
}

/** Setting an item's categories needs a categorizing privilege, as in ArcGIS. */
function requireCategorizing(caller: Caller | null): void {
  if (caller?.privileges.has("portal:admin:categorizeItems")) return;
  requirePrivilege(caller, "portal:user:categorizeItems");
}

/**
 * Items and folders (`wire.md` §6): each change writes its webhook event in the same transaction.
 */
export class ItemService {
  /**
   * The groups of each signed-in caller, which every read of shared content needs: a membership
   * change (`members`, noted by the group repository in the change's transaction) drops the
   * user's entry on every node.
   */
  private readonly memberships: FeedCache<string, { userId: string; groupIds: ReadonlySet<string> }>;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    /** What a deleted item keeps outside the content tables (hosted layers), dropped with it. */
    private readonly dropStorage: ItemStorageCleaner,
  ) {
    this.memberships = new FeedCache(db.feed, ["members"], (entry) => entry.userId);
  }

  async viewer(caller: Caller | null): Promise<Viewer> {
    const org = await this.portal.get();
    const orgIsPublic = org.settings.access === "public";
    if (!caller) return { caller, groupIds: new Set(), orgIsPublic };
    const entry = await this.memberships.get(caller.userId, async () => {
      const viewer = await viewerOf(this.db.kysely, caller, orgIsPublic);
      return { userId: caller.userId, groupIds: viewer.groupIds };
    });
    return { caller, groupIds: entry?.groupIds ?? new Set(), orgIsPublic };
  }

  /** The item, if the caller may see it (see `visible`). */
  async get(caller: Caller | null, id: string): Promise<Record<string, unknown>> {
    const { row, shared } = await this.visible(caller, id);
    return this.itemJson(row, shared);
  }

  /**
   * `content/users/<u>/items/<id>` (ArcGIS's user item): the item and its sharing (`access` and
   * the ids of the groups it is shared with), for its owner and for administrators who view every
   * item. Another member who sees the item is refused; one who does not, or who names another
   * owner in the path, hears that it does not exist.
   */
  async userItem(caller: Caller | null, username: string, id: string) {
    if (caller === null) throw errors.tokenRequired();
    const { row, shared } = await this.visible(caller, id);
    if (row.owner.toLowerCase() !== username.toLowerCase()) throw errors.itemNotFound(id);
    if (row.owner_id !== caller.userId && !caller.privileges.has("portal:admin:viewItems")) {
      throw errors.forbidden(`Only the owner or an administrator may see the sharing of item '${id}'.`);
    }
    return { item: await this.itemJson(row, shared), sharing: { access: row.access, groups: shared } };
  }

  async data(caller: Caller | null, id: string): Promise<ItemFileDownload | undefined> {
    await this.visible(caller, id);
    const file = await findFile(this.db.kysely, id, "data");
    return file ? this.download(file, file.contentType) : undefined;
  }

  /**
   * The item's thumbnail, answered only as the PNG, GIF or JPEG image its first bytes say it is,
   * whatever type it was stored with (a peer portal's copy says what it likes).
   */
  async thumbnail(caller: Caller | null, id: string): Promise<ItemFileDownload> {
    await this.visible(caller, id);
    const file = await findFile(this.db.kysely, id, "thumbnail");
    const type = file && imageType(await readHead(this.db.kysely, file, IMAGE_HEAD_BYTES));
    if (!file || !type) throw errors.notFound(`A PNG, GIF or JPEG thumbnail of item '${id}'`);
    return this.download(file, type);
  }

  /** `info/iteminfo.xml`: the item's information document, made from the item as it is now. */
  async itemInfo(caller: Caller | null, id: string): Promise<string> {
    const { row } = await this.visible(caller, id);
    return itemInfoXml({
      ...row,
      typeKeywords: JSON.parse(row.type_keywords) as string[],
      tags: JSON.parse(row.tags) as string[],
    });
  }

  /**
   * A file of the item's info folder (`updateinfo`), `folder` and `name` as in its URL; the item's
   * metadata is `metadata/metadata.xml`. Its visibility is the item's, checked before the file is
   * looked up.
   */
  async infoFile(caller: Caller | null, id: string, folder: string | undefined, name: string) {
    await this.visible(caller, id);
    const file = await findFile(this.db.kysely, id, infoKind(folder, name));
    if (!file) throw errors.notFound(`File '${folder ? `${folder}/` : ""}${name}' of item '${id}'`);
    return this.download(file, file.contentType);
  }

  /**
   * `updateinfo`: stores a file in the item's info folder (replacing one of the same name), checked
   * as `infoFileType` says; an update of the item, with its event.
   */
  async updateInfo(
    caller: Caller | null,
    username: string,
    id: string,
    file: ItemFile,
    folder: string | undefined,
  ): Promise<{ owner: string; folder: string | null }> {
    const contentType = infoFileType(file.filename, folder, await headOf(file, IMAGE_HEAD_BYTES));
    const kind = infoKind(folder, file.filename);
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const row = await this.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      const replaces = await findFile(trx, id, kind);
      if (!replaces && (await countInfoFiles(trx, id)) >= MAX_INFO_FILES) {
        throw errors.invalidParameter(
          "file",
          `cannot be added: item '${id}' holds ${MAX_INFO_FILES} info files, the most it may`,
        );
      }
      await writeFile(trx, id, kind, { name: file.filename, contentType }, file);
      await updateItem(trx, id, { modified: Math.max(now, row.modified + 1) });
      await recordEvent(
        trx,
        { source: "item", operation: "update", objectId: id, actor: actorOf(caller) },
        now,
      );
      return { owner: row.owner, folder: row.folder_id };
    });
  }

  /** `deleteThumbnail`: the item has no thumbnail any more; an update of the item, with its event. */
  async deleteThumbnail(caller: Caller | null, username: string, id: string): Promise<void> {
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const row = await this.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      await deleteFile(trx, id, "thumbnail");
      await updateItem(trx, id, { thumbnail: null, modified: Math.max(now, row.modified + 1) });
      await recordEvent(
        trx,
        { source: "item", operation: "update", objectId: id, actor: actorOf(caller) },
        now,
      );
    });
  }

  private download(file: StoredFile, contentType: string): ItemFileDownload {
    return {
      filename: file.name,
      contentType,
      size: file.size,
      open: () => readStream(this.db.kysely, file),
    };
  }

  /** Adds an item; answers its id and the folder it went to. */
  async add(caller: Caller | null, username: string, folder: string | undefined, fields: ItemFields) {
    requirePrivilege(caller, "portal:user:createItem");
    this.requireOwnContent(caller, username);
    if (!fields.title) throw errors.missingParameter("title");
    if (!fields.type) throw errors.missingParameter("type");
    if (fields.categories !== undefined) requireCategorizing(caller);
    await this.checkThumbnail(fields.thumbnail);
    const withTitle = { ...fields, title: fields.title, type: fields.type };
    return this.db.transaction((trx) => this.insertIn(trx, caller, username, folder, withTitle));
  }

  /**
   * Writes a new item, its files and its add event in `trx`, so that a change that creates an item
   * along with more (a hosted service and its definition) commits as one. Privileges and fields
   * are the caller's to check.
   */
  async insertIn(
    trx: Trx,
    caller: Caller,
    username: string,
    folder: string | undefined,
    fields: ItemFields & { title: string; type: string },
  ): Promise<{ id: string; folder: string | null }> {
    const now = Date.now();
    const id = newId();
    const owner = await this.ownerRow(trx, username);
    const folderRow = folder ? await this.mustFindFolder(trx, owner.id, folder) : undefined;
    const tags = fields.tags ?? [];
    await insertItem(
      trx,
      {
        id,
        owner_id: owner.id,
        owner: owner.username,
        folder_id: folderRow?.id ?? null,
        title: fields.title,
        type: fields.type,
        type_keywords: JSON.stringify(fields.typeKeywords ?? []),
        description: fields.description ?? "",
        snippet: fields.snippet ?? "",
        tags: JSON.stringify(tags),
        url: fields.url ?? null,
        properties: fields.properties ? JSON.stringify(fields.properties) : null,
        access: "private",
        protected: 0,
        // Measured when the data is written, below.
        size: 0,
        thumbnail: fields.thumbnail ? `thumbnail/${fields.thumbnail.filename}` : null,
        created: now,
        modified: now,
        ...extentColumns(fields.extent ?? null),
      },
      tags,
      fields.categories ?? [],
    );
    const dataSize = await this.storeFiles(trx, id, fields);
    if (dataSize !== undefined) await updateItem(trx, id, { size: dataSize });
    await recordEvent(trx, { source: "item", operation: "add", objectId: id, actor: actorOf(caller) }, now);
    return { id, folder: folderRow?.id ?? null };
  }

  async update(
    caller: Caller | null,
    username: string,
    id: string,
    fields: ItemFields,
    cleared: string[],
  ): Promise<void> {
    await this.checkThumbnail(fields.thumbnail);
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const row = await this.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      await this.applyUpdate(trx, caller, row, fields, cleared, now);
    });
  }

  /**
   * Writes an update of an item the caller may change (`row`, loaded in `trx`): its fields, its
   * files, its `modified`, and its `update` event, so that a change that updates an item along
   * with more (a multipart upload's commit) commits as one. Thumbnails are the caller's to check.
   */
  async applyUpdate(
    trx: Trx,
    caller: Caller | null,
    row: ItemRow,
    fields: ItemFields,
    cleared: string[],
    now: number,
  ): Promise<void> {
    const id = row.id;
    const tags = fields.tags ?? (cleared.includes("tags") ? [] : undefined);
    const categories = fields.categories ?? (cleared.includes("categories") ? [] : undefined);
    if (categories !== undefined) requireCategorizing(caller);
    const dataSize = await this.storeFiles(trx, id, fields);
    await updateItem(trx, id, {
      ...(fields.title !== undefined ? { title: fields.title } : {}),
      ...(fields.typeKeywords !== undefined ? { type_keywords: JSON.stringify(fields.typeKeywords) } : {}),
      ...(fields.description !== undefined || cleared.includes("description")
        ? { description: fields.description ?? "" }
        : {}),
      ...(fields.snippet !== undefined || cleared.includes("snippet")
        ? { snippet: fields.snippet ?? "" }
        : {}),
      ...(tags !== undefined ? { tags: JSON.stringify(tags) } : {}),
      ...(fields.url !== undefined || cleared.includes("url") ? { url: fields.url ?? null } : {}),
      ...(fields.properties !== undefined || cleared.includes("properties")
        ? { properties: fields.properties ? JSON.stringify(fields.properties) : null }
        : {}),
      ...(dataSize !== undefined ? { size: dataSize } : {}),
      ...(fields.thumbnail ? { thumbnail: `thumbnail/${fields.thumbnail.filename}` } : {}),
      ...(fields.extent !== undefined || cleared.includes("extent")
        ? extentColumns(fields.extent ?? null)
        : {}),
      modified: Math.max(now, row.modified + 1),
    });
    if (tags !== undefined) await replaceTags(trx, id, tags);
    if (categories !== undefined) await replaceCategories(trx, id, categories);
    await recordEvent(
      trx,
      { source: "item", operation: "update", objectId: id, actor: actorOf(caller) },
      now,
    );
  }

  async delete(caller: Caller | null, username: string, id: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      const row = await this.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:deleteItems");
      if (row.protected) {
        throw errors.conflict(`Item '${id}' is protected from deletion.`, "Unprotect it first.");
      }
      // An Application item's registration and its grants go with it (the cascade of 0016);
      // deleteItem tells the token caches.
      await deleteItem(trx, id, this.dropStorage);
      await recordEvent(trx, { source: "item", operation: "delete", objectId: id, actor: actorOf(caller) });
    });
  }

  /**
   * `content/users/<u>/deleteItems`: deletes each item as `delete` does, in its own transaction;
   * each succeeds or fails alone (a protected item, another user's) and says so in its result.
   */
  async deleteItems(caller: Caller | null, username: string, ids: readonly string[]) {
    requireBulkCaller(caller, username, "portal:admin:deleteItems", "delete");
    const results = await eachItemAlone(
      ids,
      async (id) => {
        await this.delete(caller, username, id);
        return {};
      },
      {},
    );
    return { results };
  }

  async setProtected(caller: Caller | null, username: string, id: string, value: boolean): Promise<void> {
    await this.db.transaction(async (trx) => {
      await this.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      await updateItem(trx, id, { protected: value ? 1 : 0 });
      await recordEvent(trx, { source: "item", operation: "update", objectId: id, actor: actorOf(caller) });
    });
  }

  /**
   * Moves an item to a folder of its owner (`/` or empty: the root folder); answers the owner and
   * the folder's id (null for the root folder).
   */
  async move(caller: Caller | null, username: string, id: string, folder: string) {
    return this.db.transaction(async (trx) => {
      const row = await this.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      const target = folder === "/" ? undefined : await this.mustFindFolder(trx, row.owner_id, folder);
      const folderId = target?.id ?? null;
      // An item already in the folder has not moved: no event (moveItems may name it many times).
      if (folderId !== row.folder_id) {
        await updateItem(trx, id, { folder_id: folderId });
        await recordEvent(trx, { source: "item", operation: "move", objectId: id, actor: actorOf(caller) });
      }
      return { owner: row.owner, folder: folderId };
    });
  }

  /**
   * `content/users/<u>/moveItems`: moves each item as `move` does, in its own transaction, each
   * succeeding or failing alone. The folder is the user's, checked once before any item: a folder
   * that is not theirs is an error of the request, naming `folder`, not of every item.
   */
  async moveItems(caller: Caller | null, username: string, ids: readonly string[], folder: string) {
    requireBulkCaller(caller, username, "portal:admin:updateItems", "move");
    if (folder !== "/") {
      const owner = await findUser(this.db.kysely, username);
      if (!owner) throw errors.userNotFound(username);
      await this.mustFindFolder(this.db.kysely, owner.id, folder);
    }
    const results = await eachItemAlone(
      ids,
      async (id) => {
        await this.move(caller, username, id, folder);
        return {};
      },
      {},
    );
    return { results };
  }

  /**
   * Gives an item to another user (administrators with `portal:admin:reassignItems`). Taking
   * content from an account and putting content into one are both acts on those accounts, so the
   * caller must be allowed to manage each of them (`requireMayManageAccountOf`) unless it is the
   * caller's own.
   */
  async reassign(
    caller: Caller | null,
    username: string,
    id: string,
    targetUsername: string,
    targetFolder?: string,
  ): Promise<void> {
    requirePrivilege(caller, "portal:admin:reassignItems");
    await this.db.transaction(async (trx) => {
      const row = await findItem(trx, id);
      if (!row || row.owner.toLowerCase() !== username.toLowerCase()) throw errors.itemNotFound(id);
      const source = await findAccount(trx, row.owner);
      if (!source) throw errors.itemNotFound(id);
      const target = await findAccount(trx, targetUsername);
      if (!target) throw errors.invalidParameter("targetUsername", `'${targetUsername}' is not a user`);
      if (source.id !== caller.userId) requireMayManageAccountOf(caller, source, "reassign the content of");
      if (target.id !== caller.userId) requireMayManageAccountOf(caller, target, "reassign content to");
      const folder = targetFolder ? await this.mustFindFolder(trx, target.id, targetFolder) : undefined;
      await updateItem(trx, id, {
        owner_id: target.id,
        owner: target.username,
        folder_id: folder?.id ?? null,
      });
      await recordEvent(trx, {
        source: "item",
        operation: "reassign",
        objectId: id,
        actor: actorOf(caller),
        properties: { reassignedTo: [target.username] },
      });
    });
  }

  /** Creates a folder of the user's; answers it. */
  async createFolder(caller: Caller | null, username: string, title: string) {
    requirePrivilege(caller, "portal:user:createItem");
    this.requireOwnContent(caller, username);
    const folder: NewFolder = {
      id: newId(),
      owner_id: "",
      title,
      created: Date.now(),
    };
    try {
      await this.db.transaction(async (trx) => {
        const owner = await this.ownerRow(trx, username);
        folder.owner_id = owner.id;
        await insertFolder(trx, folder);
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw errors.invalidParameter("title", `a folder named '${title}' already exists`);
      }
      throw err;
    }
    return { username, id: folder.id, title };
  }

  /** Deletes an empty folder of the user's; answers it as it was. */
  async deleteFolder(caller: Caller | null, username: string, folderId: string) {
    if (caller === null) throw errors.tokenRequired();
    this.requireOwnContent(caller, username);
    return this.db.transaction(async (trx) => {
      const owner = await this.ownerRow(trx, username);
      const folder = await this.mustFindFolder(trx, owner.id, folderId);
      const count = await countItemsInFolder(trx, folder.id);
      if (count > 0) {
        throw errors.conflict(
          `Folder '${folder.title}' holds ${count} item(s).`,
          "Move or delete them first.",
        );
      }
      await deleteFolder(trx, folder.id);
      return { username: owner.username, id: folder.id, title: folder.title };
    });
  }

  /** `content/users/<u>[/<folder>]`: the user's items of one folder, and their folders. */
  async listUserContent(caller: Caller | null, username: string, folder: string | undefined, page: Page) {
    if (caller === null) throw errors.tokenRequired();
    if (!isCaller(caller, username) && !caller.privileges.has("portal:admin:viewItems")) {
      throw errors.forbidden();
    }
    const owner = await findUser(this.db.kysely, username);
    if (!owner) throw errors.userNotFound(username);
    const folderRow = folder ? await this.mustFindFolder(this.db.kysely, owner.id, folder) : undefined;
    const { total, rows } = await listOwnItems(this.db.kysely, owner.id, folderRow?.id ?? null, {
      offset: page.start - 1,
      limit: page.num,
    });
    const folders = await listFolders(this.db.kysely, owner.id);
    const items = await this.itemsJson(rows);
    return {
      username: owner.username,
      ...pageInfo(page, total, rows.length),
      currentFolder: folderRow ? folderJson(folderRow, owner.username) : null,
      items,
      folders: folders.map((f) => folderJson(f, owner.username)),
    };
  }

  /**
   * `community/users/<u>/tags`: the tags of the user's items with how many items have each; the
   * user's own, or an administrator's who can view every item.
   */
  async userTags(caller: Caller | null, username: string) {
    if (caller === null) throw errors.tokenRequired();
    if (!isCaller(caller, username)) requirePrivilege(caller, "portal:admin:viewItems");
    const owner = await findUser(this.db.kysely, username);
    if (!owner) throw errors.userNotFound(username);
    return { tags: await tagCountsOfOwner(this.db.kysely, owner.id, MAX_USER_TAGS) };
  }

  /** Item resources of a page of rows, with their shares read in one query. */
  async itemsJson(rows: readonly ItemRow[]): Promise<Record<string, unknown>[]> {
    const shares = await sharedGroupIdsOf(
      this.db.kysely,
      rows.map((r) => r.id),
    );
    return this.itemsJsonWithShares(rows, (r) => shares.get(r.id) ?? []);
  }

  /** Item resources of rows whose shares the caller read with them (a search page). */
  async itemsJsonWithShares<R extends ItemRow>(
    rows: readonly R[],
    sharesOf: (row: R) => readonly string[],
  ): Promise<Record<string, unknown>[]> {
    // The organization once for the page, not once per row.
    const org = await this.portal.get();
    return rows.map((r) => itemResource(r, sharesOf(r), org.id));
  }

  /** The ArcGIS item resource. */
  async itemJson(row: ItemRow, sharedGroups: readonly string[]): Promise<Record<string, unknown>> {
    return itemResource(row, sharedGroups, (await this.portal.get()).id);
  }

  /**
   * Loads an item the caller may see, with the groups it is shared with. A missing item and one
   * the caller may not see give the same answer (`unseen`): 499 to anonymous callers, 400 to
   * signed-in ones.
   */
  async visible(caller: Caller | null, id: string): Promise<{ row: ItemRow; shared: string[] }> {
    const row = await findItem(this.db.kysely, id);
    if (!row) throw unseen(caller, () => errors.itemNotFound(id));
    const shared = await sharedGroupIds(this.db.kysely, id);
    if (!canViewItem(await this.viewer(caller), row, shared))
      throw unseen(caller, () => errors.itemNotFound(id));
    return { row, shared };
  }

  /**
   * The item at `content/users/<username>/items/<id>`, owned by that user, that the caller may
   * change. A caller who may not even see it hears that it does not exist, as for a missing item or
   * another owner's name in the path; one who sees it but may not change it is refused (403). On
   * PostgreSQL the item's row stays locked until the transaction ends.
   */
  async mustOwnOrAdminister(
    trx: Trx,
    caller: Caller | null,
    username: string,
    id: string,
    adminPrivilege: string,
  ) {
    if (caller === null) throw errors.tokenRequired();
    // Locked (on PostgreSQL) before anything is decided: caps on the item's resources, info files
    // and parts are counted after this, and must not be passed by two requests at once.
    const row = await findItemForUpdate(trx, this.db.engine, id);
    if (!row || row.owner.toLowerCase() !== username.toLowerCase()) throw errors.itemNotFound(id);
    if (row.owner_id !== caller.userId && !caller.privileges.has(adminPrivilege)) {
      const org = await this.portal.get();
      const viewer = await viewerOf(trx, caller, org.settings.access === "public");
      if (!canViewItem(viewer, row, await sharedGroupIds(trx, id))) throw errors.itemNotFound(id);
      throw errors.forbidden(`Only the owner or an administrator may change item '${id}'.`);
    }
    return row;
  }

  private requireOwnContent(caller: Caller, username: string) {
    if (!isCaller(caller, username)) {
      throw errors.forbidden("Content can only be added to your own account.");
    }
  }

  private async ownerRow(trx: Trx, username: string) {
    const owner = await findUser(trx, username);
    if (!owner) throw errors.userNotFound(username);
    return owner;
  }

  private async mustFindFolder(q: Trx | Db["kysely"], ownerId: string, folder: string): Promise<FolderRow> {
    const row = await findFolder(q, ownerId, folder);
    if (!row) throw errors.invalidParameter("folder", `'${folder}' is not a folder of this user`);
    return row;
  }

  /** Thumbnails are PNG, GIF or JPEG images, by their first bytes; checked before any write. */
  private async checkThumbnail(thumbnail: ItemFile | undefined): Promise<ThumbnailType | undefined> {
    if (!thumbnail) return undefined;
    const type = imageType(await headOf(thumbnail, IMAGE_HEAD_BYTES));
    if (!type) throw errors.invalidParameter("thumbnail", "must be a PNG, GIF or JPEG image");
    return type;
  }

  /** Writes the item's files given in `fields`; answers the size of the data, when there is some. */
  private async storeFiles(trx: Trx, id: string, fields: ItemFields): Promise<number | undefined> {
    let dataSize: number | undefined;
    const data = fields.data ?? (fields.text !== undefined ? textData(fields.text) : undefined);
    if (data) {
      const stored = await writeFile(
        trx,
        id,
        "data",
        { name: data.filename, contentType: data.contentType },
        data,
      );
      dataSize = stored.size;
    }
    if (fields.multipartFilename !== undefined) {
      // The mark of an upload in parts: no bytes, the name the data will have (upload.service.ts).
      await writeFile(
        trx,
        id,
        "upload",
        { name: fields.multipartFilename, contentType: "application/octet-stream" },
        { data: Buffer.alloc(0) },
      );
    }
    if (fields.thumbnail) {
      // Stored with the type its bytes say, never the one the upload claimed.
      const contentType = (await this.checkThumbnail(fields.thumbnail)) as ThumbnailType;
      await writeFile(
        trx,
        id,
        "thumbnail",
        { name: fields.thumbnail.filename, contentType },
        fields.thumbnail,
      );
    }
    return dataSize;
  }
}

function folderJson(row: FolderRow, username: string) {
  return { username, id: row.id, title: row.title, created: row.created };
}

/** The ArcGIS item resource of `row` in the organization `orgId`. */
export function itemResource(
  row: ItemRow,
  sharedGroups: readonly string[],
  orgId: string,
): Record<string, unknown> {
  return {
    id: row.id,
    owner: row.owner,
    orgId,
    created: row.created,
    modified: row.modified,
    guid: null,
    name: null,
    title: row.title,
    type: row.type,
    typeKeywords: JSON.parse(row.type_keywords) as string[],
    description: row.description,
    tags: JSON.parse(row.tags) as string[],
    snippet: row.snippet,
    thumbnail: row.thumbnail,
    extent: extentJson(row),
    categories: JSON.parse(row.categories) as string[],
    spatialReference: null,
    accessInformation: null,
    licenseInfo: null,
    culture: null,
    properties: row.properties ? (JSON.parse(row.properties) as unknown) : null,
    url: row.url,
    proxyFilter: null,
    access: row.access,
    size: row.size,
    protected: row.protected === 1,
    ownerFolder: row.folder_id,
    numComments: 0,
    numViews: 0,
    groupIds: sharedGroups,
  };
}

/**
 * `JSON.stringify(itemResource(row, sharedGroups, orgId))`, written directly: the stored lists are
 * copied in when already in the form `JSON.stringify` would give them (`storedJsonList`) instead
 * of parsed and written out again. Keep the keys in `itemResource`'s order; its unit test compares
 * the two on awkward rows.
 */
export function itemResourceJson(row: ItemRow, sharedGroups: readonly string[], orgId: string): string {
  const extent = extentJson(row);
  return (
    `{"id":${jsonValue(row.id)},"owner":${jsonValue(row.owner)},"orgId":${jsonValue(orgId)}` +
    `,"created":${jsonValue(row.created)},"modified":${jsonValue(row.modified)},"guid":null,"name":null` +
    `,"title":${jsonValue(row.title)},"type":${jsonValue(row.type)}` +
    `,"typeKeywords":${storedJsonList(row.type_keywords)},"description":${jsonValue(row.description)}` +
    `,"tags":${storedJsonList(row.tags)},"snippet":${jsonValue(row.snippet)}` +
    `,"thumbnail":${jsonValue(row.thumbnail)},"extent":${extent.length === 0 ? "[]" : JSON.stringify(extent)}` +
    `,"categories":${storedJsonList(row.categories)},"spatialReference":null,"accessInformation":null` +
    `,"licenseInfo":null,"culture":null` +
    `,"properties":${row.properties ? JSON.stringify(JSON.parse(row.properties)) : "null"}` +
    `,"url":${jsonValue(row.url)},"proxyFilter":null,"access":${jsonValue(row.access)}` +
    `,"size":${jsonValue(row.size)},"protected":${row.protected === 1},"ownerFolder":${jsonValue(row.folder_id)}` +
    `,"numComments":0,"numViews":0,"groupIds":${sharedGroups.length === 0 ? "[]" : JSON.stringify(sharedGroups)}}`
  );
}
