import type { Caller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import {
  deleteUpload,
  type FileSource,
  findFile,
  listParts,
  readHead,
  writeFile,
  writeJoined,
} from "./file-store.js";
import { IMAGE_HEAD_BYTES } from "./file-types.js";
import { updateItem } from "./item.repository.js";
import type { ItemFields, ItemService } from "./item.service.js";
import { resourceType } from "./item-resources.js";

/** Part numbers ArcGIS documents (`addPart`): 1 to 10,000. */
export const MAX_PART_NUMBER = 10_000;
/** Largest part one `addPart` takes. */
export const MAX_PART_BYTES = 100 * 1024 * 1024;
/** Largest item data an upload in parts may make: all its parts together. */
export const MAX_MULTIPART_BYTES = 1024 * 1024 * 1024;

/** The item file kind of part `n`: zero-padded, so that the kinds sort as the numbers do. */
export function partKind(n: number): `parts/${string}` {
  return `parts/${String(n).padStart(5, "0")}`;
}

/** The part number of a part's kind. */
const partNumberOf = (kind: string) => Number(kind.slice("parts/".length));

/** What `status` answers of an item: `partial` while its upload in parts is not committed. */
export interface UploadStatus {
  itemId: string;
  status: "partial" | "completed";
  statusMessage: string;
}

/**
 * Uploads in parts (`addItem` with `multipart=true`, `addPart`, `parts`, `commit`, `cancel`,
 * `status`). The item is made at once, with no data and the mark of the upload (an item file of
 * kind `upload` naming the data to come); each part is an item file of its own, stored a chunk at
 * a time from the request's temporary file; `commit` makes the parts, one after the other, the
 * item's data (`writeJoined`: moving their chunks when every part but the last is a whole number
 * of chunks, copying them a chunk at a time otherwise), drops them and the mark, and applies the item fields sent with
 * it, in one transaction with the item's `update` event. Until then the item has no data. Only
 * the owner and administrators with `updateItems` take part.
 */
export class UploadService {
  constructor(
    private readonly db: Db,
    private readonly items: ItemService,
  ) {}

  /** Stores part `partNum`, replacing one of that number. */
  async addPart(
    caller: Caller | null,
    username: string,
    id: string,
    partNum: number,
    part: FileSource & { size: number },
  ): Promise<void> {
    await this.db.transaction(async (trx) => {
      await this.pending(trx, caller, username, id);
      const kind = partKind(partNum);
      const others = (await listParts(trx, id)).filter((p) => p.kind !== kind);
      const total = others.reduce((sum, p) => sum + p.size, 0) + part.size;
      if (total > MAX_MULTIPART_BYTES) {
        throw errors.invalidParameter(
          "file",
          `would make the parts of item '${id}' larger than ${MAX_MULTIPART_BYTES / (1024 * 1024)} MB, the most an upload may be`,
        );
      }
      await writeFile(trx, id, kind, { name: kind, contentType: "application/octet-stream" }, part);
    });
  }

  /** The numbers of the parts stored so far, in order. */
  async parts(caller: Caller | null, username: string, id: string): Promise<number[]> {
    return this.db.transaction(async (trx) => {
      await this.pending(trx, caller, username, id);
      return (await listParts(trx, id)).map((p) => partNumberOf(p.kind));
    });
  }

  /**
   * Makes the item's data of its parts in the order of their numbers, with the name given to
   * `addItem`; applies `fields` (the item's details sent with `commit`).
   */
  async commit(caller: Caller | null, username: string, id: string, fields: ItemFields): Promise<void> {
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const { row, mark } = await this.pending(trx, caller, username, id);
      const parts = await listParts(trx, id);
      const first = parts[0];
      if (!first) {
        throw errors.conflict(`Item '${id}' has no parts to commit.`, "Add them with addPart first.");
      }
      const contentType = resourceType(mark.name, await readHead(trx, first, IMAGE_HEAD_BYTES));
      const stored = await writeJoined(trx, id, "data", { name: mark.name, contentType }, parts);
      await deleteUpload(trx, id);
      await this.items.applyUpdate(trx, caller, row, fields, [], now);
      await updateItem(trx, id, { size: stored.size });
    });
  }

  /** Ends the upload: its parts are dropped; the item stays, without data. */
  async cancel(caller: Caller | null, username: string, id: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      await this.pending(trx, caller, username, id);
      await deleteUpload(trx, id);
    });
  }

  /** `partial` while the item's upload in parts is not committed, `completed` otherwise. */
  async status(caller: Caller | null, username: string, id: string): Promise<UploadStatus> {
    return this.db.transaction(async (trx) => {
      await this.items.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      const mark = await findFile(trx, id, "upload");
      return mark
        ? { itemId: id, status: "partial", statusMessage: "partial" }
        : { itemId: id, status: "completed", statusMessage: "completed" };
    });
  }

  /** The item the caller may change, with its upload in parts under way. */
  private async pending(
    trx: Parameters<ItemService["mustOwnOrAdminister"]>[0],
    caller: Caller | null,
    username: string,
    id: string,
  ) {
    const row = await this.items.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
    const mark = await findFile(trx, id, "upload");
    if (!mark) {
      throw errors.conflict(
        `Item '${id}' has no upload in parts under way.`,
        "Add the item with multipart=true and a filename first.",
      );
    }
    return { row, mark };
  }
}
