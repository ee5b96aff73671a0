import type { Transaction } from "kysely";
import { actorOf, type Caller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors } from "../errors.js";
import { type ChangeEvent, recordEvent } from "../events/outbox.js";
import type { PortalService } from "../portal/portal.service.js";
import { canViewItem, viewerOf } from "./access.js";
import { eachItemAlone, requireBulkCaller } from "./bulk.js";
import {
  findItem,
  type ItemRow,
  sharedGroupIds,
  shareItem,
  unshareItem,
  updateItem,
} from "./item.repository.js";
import type { ItemService } from "./item.service.js";

type Trx = Transaction<Database>;

export interface ShareRequest {
  /** Group ids to share with. */
  groups: readonly string[];
  /** true shares with everyone (public), false withdraws it, undefined leaves it. */
  everyone?: boolean | undefined;
  /** Same for the organization. */
  org?: boolean | undefined;
}

/**
 * Sharing items with groups, the organization and everyone (`wire.md` §6). An item's `access` is
 * derived: public if shared with everyone, org if with the organization, shared if with a group,
 * private otherwise. Each change records the item event and, per group, the group event, in the
 * same transaction.
 */
export class SharingService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly items: ItemService,
  ) {}

  /** `content/users/<u>/items/<id>/share` */
  async share(caller: Caller | null, username: string, itemId: string, request: ShareRequest) {
    const canSharePublic = (await this.portal.get()).settings.canSharePublic === true;
    return { notSharedWith: await this.shareIn(caller, username, itemId, request, canSharePublic), itemId };
  }

  /** `content/users/<u>/items/<id>/unshare` */
  async unshare(caller: Caller | null, username: string, itemId: string, groups: readonly string[]) {
    return { notUnsharedFrom: await this.unshareIn(caller, username, itemId, groups), itemId };
  }

  /**
   * `content/items/<id>/share`, the path of callers who do not own the item: a group's owner or
   * manager shares an item they can see into that group, if the whole organization sees it already
   * or its owner is a member of the group; an administrator with
   * `portal:admin:shareToGroup` any item into any group (ArcGIS's "share item as group admin").
   * Groups the caller does not manage come back in `notSharedWith`; the owner, calling here, has
   * the owner's rules.
   */
  async shareAsGroupManager(caller: Caller, itemId: string, groups: readonly string[]) {
    const notSharedWith = await this.db.transaction(async (trx) => {
      const { item, owns } = await this.itemForGroupManager(trx, caller, itemId);
      const mayShare = owns
        ? (groupId: string) => this.mayShareInto(trx, caller, groupId)
        : async (groupId: string) =>
            (await this.managesSharingIn(trx, caller, groupId)) &&
            (caller.privileges.has("portal:admin:shareToGroup") ||
              item.access === "org" ||
              item.access === "public" ||
              (await this.isMember(trx, groupId, item.owner_id)));
      return this.shareOne(trx, caller, item, { groups }, false, mayShare);
    });
    return { notSharedWith, itemId };
  }

  /** `content/items/<id>/unshare`: the same callers take the item out of the groups they manage. */
  async unshareAsGroupManager(caller: Caller, itemId: string, groups: readonly string[]) {
    const notUnsharedFrom = await this.db.transaction(async (trx) => {
      const { item, owns } = await this.itemForGroupManager(trx, caller, itemId);
      const mayUnshare = owns ? undefined : (groupId: string) => this.managesSharingIn(trx, caller, groupId);
      return this.unshareOne(trx, caller, item, groups, mayUnshare);
    });
    return { notUnsharedFrom, itemId };
  }

  /** `content/users/<u>/shareItems`: several items at once; each item succeeds or fails alone. */
  async shareItems(
    caller: Caller | null,
    username: string,
    itemIds: readonly string[],
    request: ShareRequest,
  ) {
    requireBulkCaller(caller, username, "portal:admin:shareToGroup", "share or unshare");
    const canSharePublic = (await this.portal.get()).settings.canSharePublic === true;
    const results = await eachItemAlone(
      itemIds,
      async (itemId) => ({
        notSharedWith: await this.shareIn(caller, username, itemId, request, canSharePublic),
      }),
      { notSharedWith: [...request.groups] },
    );
    return { results };
  }

  /** `content/users/<u>/unshareItems` */
  async unshareItems(
    caller: Caller | null,
    username: string,
    itemIds: readonly string[],
    groups: readonly string[],
  ) {
    requireBulkCaller(caller, username, "portal:admin:shareToGroup", "share or unshare");
    const results = await eachItemAlone(
      itemIds,
      async (itemId) => ({ notUnsharedFrom: await this.unshareIn(caller, username, itemId, groups) }),
      { notUnsharedFrom: [...groups] },
    );
    return { results };
  }

  /** Shares one item in its own transaction; answers the groups it could not be shared with. */
  private shareIn(
    caller: Caller | null,
    username: string,
    itemId: string,
    request: ShareRequest,
    canSharePublic: boolean,
  ): Promise<string[]> {
    return this.db.transaction(async (trx) => {
      const item = await this.items.mustOwnOrAdminister(
        trx,
        caller,
        username,
        itemId,
        "portal:admin:shareToGroup",
      );
      const who = caller as Caller;
      return this.shareOne(trx, who, item, request, canSharePublic, (groupId) =>
        this.mayShareInto(trx, who, groupId),
      );
    });
  }

  private unshareIn(
    caller: Caller | null,
    username: string,
    itemId: string,
    groups: readonly string[],
  ): Promise<string[]> {
    return this.db.transaction(async (trx) => {
      const item = await this.items.mustOwnOrAdminister(
        trx,
        caller,
        username,
        itemId,
        "portal:admin:shareToGroup",
      );
      return this.unshareOne(trx, caller as Caller, item, groups);
    });
  }

  private async shareOne(
    trx: Trx,
    caller: Caller,
    item: ItemRow,
    request: ShareRequest,
    canSharePublic: boolean,
    mayShareInto: (groupId: string) => Promise<boolean>,
  ): Promise<string[]> {
    const isAdmin = (p: string) => caller.privileges.has(p);
    if (request.everyone === true) {
      if (!canSharePublic) {
        throw errors.invalidParameter(
          "everyone",
          "is not allowed: the organization does not share content publicly",
        );
      }
      if (!isAdmin("portal:user:shareToPublic") && !isAdmin("portal:admin:shareToPublic")) {
        throw errors.forbidden("Requires the privilege portal:user:shareToPublic.");
      }
    }
    if (request.org === true && !isAdmin("portal:user:shareToOrg") && !isAdmin("portal:admin:shareToOrg")) {
      throw errors.forbidden("Requires the privilege portal:user:shareToOrg.");
    }
    if (
      request.groups.length > 0 &&
      !isAdmin("portal:user:shareToGroup") &&
      !isAdmin("portal:admin:shareToGroup")
    ) {
      throw errors.forbidden("Requires the privilege portal:user:shareToGroup.");
    }

    const notSharedWith: string[] = [];
    const sharedTo: string[] = [];
    for (const groupId of new Set(request.groups)) {
      if (!(await mayShareInto(groupId))) {
        notSharedWith.push(groupId);
        continue;
      }
      // Already shared, or shared by a concurrent request a moment ago: nothing to do, and no
      // event. (A read-then-insert would race on PostgreSQL, where the loser hits the primary key.)
      if (!(await shareItem(trx, item.id, groupId))) continue;
      sharedTo.push(groupId);
      await recordEvent(
        trx,
        event("group", "share", groupId, caller, { sharedItems: [{ itemId: item.id, itemType: item.type }] }),
      );
    }

    const before = item.access;
    const access = await this.deriveAccess(trx, item, request);
    if (access !== before) await updateItem(trx, item.id, { access });
    if (request.everyone === true && before !== "public") sharedTo.push("Everyone");
    else if (request.org === true && before !== "org" && before !== "public") sharedTo.push("Organization");
    if (sharedTo.length > 0) {
      await recordEvent(trx, event("item", "share", item.id, caller, { sharedToGroups: sharedTo }));
    }
    const withdrawn = withdrawnScopes(before, access);
    if (withdrawn.length > 0) {
      await recordEvent(trx, event("item", "unshare", item.id, caller, { unsharedFromGroups: withdrawn }));
    }
    return notSharedWith;
  }

  private async unshareOne(
    trx: Trx,
    caller: Caller,
    item: ItemRow,
    groups: readonly string[],
    mayUnshareFrom?: (groupId: string) => Promise<boolean>,
  ): Promise<string[]> {
    const notUnsharedFrom: string[] = [];
    const removed: string[] = [];
    for (const groupId of new Set(groups)) {
      if (
        (mayUnshareFrom && !(await mayUnshareFrom(groupId))) ||
        !(await unshareItem(trx, item.id, groupId))
      ) {
        notUnsharedFrom.push(groupId);
        continue;
      }
      removed.push(groupId);
      await recordEvent(
        trx,
        event("group", "unshare", groupId, caller, {
          unsharedItems: [{ itemId: item.id, itemType: item.type }],
        }),
      );
    }
    if (removed.length > 0) {
      const access = await this.deriveAccess(trx, item, { groups: [] });
      if (access !== item.access) await updateItem(trx, item.id, { access });
      await recordEvent(trx, event("item", "unshare", item.id, caller, { unsharedFromGroups: removed }));
    }
    return notUnsharedFrom;
  }

  /**
   * The item a caller who may not own it acts on through `content/items/<id>/...`: one they can
   * see, or any with `portal:admin:shareToGroup`. Others hear that it does not exist.
   */
  private async itemForGroupManager(
    trx: Trx,
    caller: Caller,
    itemId: string,
  ): Promise<{ item: ItemRow; owns: boolean }> {
    const item = await findItem(trx, itemId);
    if (!item) throw errors.itemNotFound(itemId);
    const owns = item.owner_id === caller.userId;
    if (!owns && !caller.privileges.has("portal:admin:shareToGroup")) {
      const org = await this.portal.get();
      const viewer = await viewerOf(trx, caller, org.settings.access === "public");
      if (!canViewItem(viewer, item, await sharedGroupIds(trx, itemId))) throw errors.itemNotFound(itemId);
    }
    return { item, owns };
  }

  /**
   * Whether the user belongs to the group. A group manager shares an item the organization cannot
   * already see (private, or shared with some groups) only into a group its owner belongs to:
   * seeing an item through some other group must not let anyone widen who sees it.
   */
  private async isMember(trx: Trx, groupId: string, userId: string): Promise<boolean> {
    const row = await trx
      .selectFrom("group_members")
      .select("user_id")
      .where("group_id", "=", groupId)
      .where("user_id", "=", userId)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Whether the caller manages what is shared in a group: its owner or a manager (member type
   * `admin`), or an administrator with `portal:admin:shareToGroup`.
   */
  private async managesSharingIn(trx: Trx, caller: Caller, groupId: string): Promise<boolean> {
    const group = await trx.selectFrom("groups").select("id").where("id", "=", groupId).executeTakeFirst();
    if (!group) return false;
    if (caller.privileges.has("portal:admin:shareToGroup")) return true;
    const membership = await trx
      .selectFrom("group_members")
      .select("member_type")
      .where("group_id", "=", groupId)
      .where("user_id", "=", caller.userId)
      .executeTakeFirst();
    return membership !== undefined && membership.member_type !== "member";
  }

  /**
   * Members may share into their groups (view-only groups: only the owner and group admins);
   * administrators with `portal:admin:shareToGroup` into any group.
   */
  private async mayShareInto(trx: Trx, caller: Caller, groupId: string): Promise<boolean> {
    const group = await trx
      .selectFrom("groups")
      .select(["id", "is_view_only"])
      .where("id", "=", groupId)
      .executeTakeFirst();
    if (!group) return false;
    if (caller.privileges.has("portal:admin:shareToGroup")) return true;
    const membership = await trx
      .selectFrom("group_members")
      .select("member_type")
      .where("group_id", "=", groupId)
      .where("user_id", "=", caller.userId)
      .executeTakeFirst();
    if (!membership) return false;
    return group.is_view_only === 0 || membership.member_type !== "member";
  }

  /**
   * The item's access after a share request: everyone and the organization as asked (withdrawing
   * everyone keeps the organization unless `org=false` too, since public implies it), else shared
   * when any group holds the item, else private.
   */
  private async deriveAccess(trx: Trx, item: ItemRow, request: ShareRequest): Promise<string> {
    if (request.everyone ?? item.access === "public") return "public";
    if (request.org ?? (item.access === "org" || item.access === "public")) return "org";
    const share = await trx
      .selectFrom("item_shares")
      .select("group_id")
      .where("item_id", "=", item.id)
      .limit(1)
      .executeTakeFirst();
    return share ? "shared" : "private";
  }
}

/**
 * `content/users/<u>/...` is that user's content (ArcGIS: "available only to the user and to
 * administrators"): another member acting there is refused as a whole, not item by item.
 */

/** A sharing event: what changed (`sharedToGroups`, `sharedItems`, ...) is in its properties. */
function event(
  source: "item" | "group",
  operation: "share" | "unshare",
  objectId: string,
  caller: Caller,
  properties: Record<string, unknown>,
): ChangeEvent {
  return { source, operation, objectId, actor: actorOf(caller), properties };
}

/** Scopes an access change withdrew: public -> org withdraws Everyone, and so on. */
function withdrawnScopes(before: string, after: string): string[] {
  const rank: Record<string, number> = { private: 0, shared: 0, org: 1, public: 2 };
  const out: string[] = [];
  if ((rank[before] ?? 0) >= 2 && (rank[after] ?? 0) < 2) out.push("Everyone");
  if ((rank[before] ?? 0) >= 1 && (rank[after] ?? 0) < 1) out.push("Organization");
  return out;
}
