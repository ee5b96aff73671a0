import { actorOf, type Caller, isCaller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import { type Page, pageInfo } from "../validation/paging.js";
import type { ItemService } from "./item.service.js";

/**
 * Comments on items. Anyone who can see an item and is signed in may comment while the
 * organization's `commentsEnabled` is true; authors edit their own, and the item's owner or an
 * administrator may delete any.
 */
export class CommentService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly items: ItemService,
  ) {}

  /** Adds a comment to an item; answers the new comment's id. */
  async add(caller: Caller | null, itemId: string, comment: string): Promise<string> {
    await this.requireEnabled();
    if (caller === null) throw errors.tokenRequired();
    await this.items.visible(caller, itemId);
    const id = newId();
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      await trx
        .insertInto("comments")
        .values({ id, item_id: itemId, owner: caller.username, comment, created: now, modified: now })
        .execute();
      await recordEvent(
        trx,
        { source: "item", operation: "addComment", objectId: itemId, actor: actorOf(caller) },
        now,
      );
    });
    return id;
  }

  /**
   * `content/items/<id>/comments`: a page of the item's comments, oldest first, with ArcGIS's
   * paging fields. A page at a time: anyone who sees an item may comment on it, so an item's
   * comments have no bound a listing of all of them could keep to.
   */
  async list(caller: Caller | null, itemId: string, page: Page) {
    await this.items.visible(caller, itemId);
    const q = this.db.kysely;
    const { total } = await q
      .selectFrom("comments")
      .select((eb) => eb.fn.countAll<number | string>().as("total"))
      .where("item_id", "=", itemId)
      .executeTakeFirstOrThrow();
    const rows = await q
      .selectFrom("comments")
      .selectAll()
      .where("item_id", "=", itemId)
      .orderBy("created")
      .orderBy("id")
      .offset(page.start - 1)
      .limit(page.num)
      .execute();
    return {
      ...pageInfo(page, Number(total), rows.length),
      comments: rows.map((r) => ({
        id: r.id,
        owner: r.owner,
        comment: r.comment,
        created: r.created,
        modified: r.modified,
      })),
    };
  }

  async update(caller: Caller | null, itemId: string, commentId: string, comment: string): Promise<void> {
    await this.requireEnabled();
    if (caller === null) throw errors.tokenRequired();
    await this.items.visible(caller, itemId);
    const now = Date.now();
    await this.db.transaction(async (trx) => {
      const row = await this.mustFind(trx, itemId, commentId);
      if (row.owner.toLowerCase() !== caller.username.toLowerCase()) {
        throw errors.forbidden("Only the author may edit a comment.");
      }
      await trx.updateTable("comments").set({ comment, modified: now }).where("id", "=", commentId).execute();
      await recordEvent(
        trx,
        { source: "item", operation: "updateComment", objectId: itemId, actor: actorOf(caller) },
        now,
      );
    });
  }

  async delete(caller: Caller | null, itemId: string, commentId: string): Promise<void> {
    if (caller === null) throw errors.tokenRequired();
    const { row: item } = await this.items.visible(caller, itemId);
    await this.db.transaction(async (trx) => {
      const row = await this.mustFind(trx, itemId, commentId);
      const mayDelete =
        isCaller(caller, row.owner) ||
        item.owner_id === caller.userId ||
        caller.privileges.has("portal:admin:updateItems");
      if (!mayDelete)
        throw errors.forbidden("Only the author, the item's owner or an administrator may delete it.");
      await trx.deleteFrom("comments").where("id", "=", commentId).execute();
      await recordEvent(trx, {
        source: "item",
        operation: "deleteComment",
        objectId: itemId,
        actor: actorOf(caller),
      });
    });
  }

  private async requireEnabled() {
    const org = await this.portal.get();
    if (org.settings.commentsEnabled !== true) {
      throw errors.forbidden("Comments are disabled in this organization (commentsEnabled is false).");
    }
  }

  private async mustFind(
    trx: Parameters<Parameters<Db["transaction"]>[0]>[0],
    itemId: string,
    commentId: string,
  ) {
    const row = await trx
      .selectFrom("comments")
      .selectAll()
      .where("id", "=", commentId)
      .where("item_id", "=", itemId)
      .executeTakeFirst();
    if (!row) throw errors.notFound(`Comment '${commentId}'`);
    return row;
  }
}
