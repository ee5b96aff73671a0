import type { Transaction } from "kysely";
import { actorOf, type Caller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { type Page, pageInfo } from "../validation/paging.js";
import {
  countResources,
  deleteFile,
  deleteResources,
  type FileSource,
  findFile,
  headOf,
  listResources,
  type ResourceRow,
  readStream,
  setResourceAccess,
  writeFile,
} from "./file-store.js";
import { IMAGE_HEAD_BYTES } from "./file-types.js";
import { updateItem } from "./item.repository.js";
import type { ItemFileDownload, ItemService } from "./item.service.js";
import { MAX_RESOURCES_PER_ITEM, resourceKind, resourcePathOf, resourceType } from "./item-resources.js";

/** Who may read a resource: everyone who sees the item (`inherit`), or only who may change it. */
export type ResourceAccess = "inherit" | "private";

/** Administrators who may change others' items may also read their private resources. */
const ADMIN_PRIVILEGE = "portal:admin:updateItems";

/** A resource to store: its checked path, its bytes, and its access when one was sent. */
export interface ResourceUpload {
  path: string;
  source?: FileSource | undefined;
  access?: ResourceAccess | undefined;
}

export type ResourceSort = "resource" | "size" | "created";

/** The changed item, as addResources and updateResources answer it. */
export interface ChangedItem {
  owner: string;
  folder: string | null;
}

/**
 * An item's resources (`addResources`, `updateResources`, `removeResources`, `resources`): files
 * kept beside the item's data as item files of kind `resources/<path>`. Changing them changes the
 * item (its owner, or administrators with `updateItems`): the item's `modified` moves and its
 * `update` event is recorded in the same transaction, as `updateinfo` does. Reading them is
 * seeing the item; a private resource is seen only by those who may change the item.
 */
export class ResourceService {
  constructor(
    private readonly db: Db,
    private readonly items: ItemService,
  ) {}

  /** Adds a resource; one of the same path is refused (updateResources replaces it). */
  async add(
    caller: Caller | null,
    username: string,
    id: string,
    upload: ResourceUpload,
  ): Promise<ChangedItem> {
    const source = upload.source;
    if (!source) throw errors.missingParameter("file", "Send a 'file' or 'text' with its 'fileName'.");
    const contentType = resourceType(upload.path, await headOf(source, IMAGE_HEAD_BYTES));
    const kind = resourceKind(upload.path);
    return this.change(caller, username, id, async (trx, now) => {
      if (await findFile(trx, id, kind)) {
        throw errors.invalidParameter(
          "fileName",
          `'${upload.path}' is a resource of item '${id}' already: replace it with updateResources`,
        );
      }
      if ((await countResources(trx, id)) >= MAX_RESOURCES_PER_ITEM) {
        throw errors.invalidParameter(
          "file",
          `cannot be added: item '${id}' holds ${MAX_RESOURCES_PER_ITEM} resources, the most it may`,
        );
      }
      await writeFile(
        trx,
        id,
        kind,
        { name: nameOf(upload.path), contentType, created: now, access: upload.access ?? "inherit" },
        source,
      );
    });
  }

  /**
   * Replaces a resource's bytes, its access, or both; it must exist. It keeps when it was added,
   * and its access unless one is sent.
   */
  async update(
    caller: Caller | null,
    username: string,
    id: string,
    upload: ResourceUpload,
  ): Promise<ChangedItem> {
    const source = upload.source;
    if (!source && !upload.access) {
      throw errors.missingParameter("file", "Send a 'file', a 'text' or an 'access' for the resource.");
    }
    const contentType = source
      ? resourceType(upload.path, await headOf(source, IMAGE_HEAD_BYTES))
      : undefined;
    const kind = resourceKind(upload.path);
    return this.change(caller, username, id, async (trx) => {
      const existing = await findFile(trx, id, kind);
      if (!existing) throw this.missing(id, upload.path);
      const access = upload.access ?? existing.access ?? "inherit";
      if (source && contentType) {
        await writeFile(
          trx,
          id,
          kind,
          { name: existing.name, contentType, created: existing.created ?? Date.now(), access },
          source,
        );
      } else {
        await setResourceAccess(trx, id, kind, access);
      }
    });
  }

  /** Removes one resource (`resource`, its path) or all of them (`deleteAll`). */
  async remove(
    caller: Caller | null,
    username: string,
    id: string,
    which: { path: string } | { all: true },
  ): Promise<void> {
    await this.change(caller, username, id, async (trx) => {
      if ("all" in which) {
        await deleteResources(trx, id);
        return;
      }
      const kind = resourceKind(which.path);
      if (!(await findFile(trx, id, kind))) throw this.missing(id, which.path);
      await deleteFile(trx, id, kind);
    });
  }

  /**
   * `content/items/<id>/resources`: the item's resources the caller may read, sorted and paged;
   * `access` is shown only to those who may change the item, as ArcGIS shows it.
   */
  async list(caller: Caller | null, id: string, sort: ResourceSort, descending: boolean, page: Page) {
    const { row } = await this.items.visible(caller, id);
    const privileged = this.mayChange(caller, row.owner_id);
    const rows = (await listResources(this.db.kysely, id)).filter(
      (r) => privileged || r.access !== "private",
    );
    rows.sort((a, b) => compare(a, b, sort) * (descending ? -1 : 1));
    const shown = rows.slice(page.start - 1, page.start - 1 + page.num);
    return {
      ...pageInfo(page, rows.length, shown.length),
      resources: shown.map((r) => ({
        resource: resourcePathOf(r.kind),
        created: r.created,
        size: r.size,
        ...(privileged ? { access: r.access } : {}),
      })),
    };
  }

  /** One resource, to stream; a private one only to those who may change the item. */
  async file(caller: Caller | null, id: string, path: string): Promise<ItemFileDownload> {
    const { row } = await this.items.visible(caller, id);
    const file = await findFile(this.db.kysely, id, resourceKind(path));
    if (!file || (file.access === "private" && !this.mayChange(caller, row.owner_id))) {
      throw this.missing(id, path);
    }
    return {
      filename: file.name,
      contentType: file.contentType,
      size: file.size,
      open: () => readStream(this.db.kysely, file),
    };
  }

  private mayChange(caller: Caller | null, ownerId: string): boolean {
    return caller !== null && (caller.userId === ownerId || caller.privileges.has(ADMIN_PRIVILEGE));
  }

  private missing(id: string, path: string) {
    return errors.notFound(`Resource '${path}' of item '${id}'`);
  }

  /** Runs a change of the item's resources with the item's update: its `modified` and its event. */
  private async change(
    caller: Caller | null,
    username: string,
    id: string,
    write: (trx: Transaction<Database>, now: number) => Promise<void>,
  ): Promise<ChangedItem> {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const row = await this.items.mustOwnOrAdminister(trx, caller, username, id, ADMIN_PRIVILEGE);
      await write(trx, now);
      await updateItem(trx, id, { modified: Math.max(now, row.modified + 1) });
      await recordEvent(
        trx,
        { source: "item", operation: "update", objectId: id, actor: actorOf(caller) },
        now,
      );
      return { owner: row.owner, folder: row.folder_id };
    });
  }
}

function nameOf(path: string): string {
  return path.split("/").at(-1) ?? path;
}

function compare(a: ResourceRow, b: ResourceRow, sort: ResourceSort): number {
  if (sort === "size") return a.size - b.size || a.kind.localeCompare(b.kind);
  if (sort === "created") return a.created - b.created || a.kind.localeCompare(b.kind);
  return a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0;
}
