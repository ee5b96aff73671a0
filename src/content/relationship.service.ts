import { type Caller, isCaller, requirePrivilege } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { canViewItem } from "./access.js";
import { findItemForUpdate, findItems, type ItemRow, sharedGroupIdsOf } from "./item.repository.js";
import type { ItemService } from "./item.service.js";
import {
  countRelationships,
  countReverseRelationships,
  type Direction,
  deleteRelationship,
  findRelationship,
  insertRelationship,
  listRelationships,
  type RelationshipKey,
  type RelationshipRow,
} from "./relationship.repository.js";
import { mustOwnDestination, relationshipType } from "./relationship-types.js";

/**
 * Relationships an item has at most as origin, and at most as destination from items of its own
 * owner: relatedItems reads them all (to leave out the items the caller may not see before
 * paging), so this bounds its work.
 */
export const MAX_RELATIONSHIPS_PER_ITEM = 1000;
/**
 * Relationships an item has at most as destination from items of other owners. They have their own
 * allowance, so that whoever sees an item cannot use up its owner's by relating their items to it;
 * relatedItems in the reverse direction thus reads at most both allowances.
 */
export const MAX_RELATIONSHIPS_FROM_OTHERS = 1000;

/** Relationship types as sent (any case), in the documented spelling; unknown ones name the parameter. */
export function relationshipTypesOf(parameter: string, names: readonly string[]): string[] {
  return names.map((name) => {
    const type = relationshipType(name);
    if (!type) throw errors.invalidParameter(parameter, `is '${name}', which is not a relationship type`);
    return type;
  });
}

/**
 * Item relationships (`addRelationship`, `deleteRelationship`, `relatedItems`). They change
 * neither item (ArcGIS has no webhook trigger for them), so they record no event.
 */
export class RelationshipService {
  constructor(
    private readonly db: Db,
    private readonly items: ItemService,
  ) {}

  /**
   * Relates two items. The caller adds to their own content (`content/users/<caller>`), must see
   * both items and own the origin; types whose rule says so need the destination owned as well.
   */
  async add(caller: Caller | null, username: string, key: RelationshipKey): Promise<void> {
    requirePrivilege(caller, "portal:user:createItem");
    if (!isCaller(caller, username))
      throw errors.forbidden("Relationships are added by the user who adds them.");
    const { origin, destination } = await this.ends(caller, key);
    if (origin.owner_id !== caller.userId) {
      throw errors.forbidden(`Only the owner of item '${key.originId}' may relate it to other items.`);
    }
    if (mustOwnDestination(key.type) && destination.owner_id !== caller.userId) {
      throw errors.forbidden(`A ${key.type} relationship needs its destination item to be yours as well.`);
    }
    await this.db.transaction(async (trx) => {
      // Both ends are locked (on PostgreSQL), in the order of their ids so that two requests
      // relating the same items both ways cannot wait for each other, before their relationships
      // are counted: two requests at once must not both pass a cap.
      const locked = new Map<string, ItemRow>();
      for (const id of [key.originId, key.destinationId].sort()) {
        const row = await findItemForUpdate(trx, this.db.engine, id);
        if (!row) throw errors.itemNotFound(id);
        locked.set(id, row);
      }
      if ((await countRelationships(trx, key.originId, "forward")) >= MAX_RELATIONSHIPS_PER_ITEM) {
        throw this.full(key.originId, MAX_RELATIONSHIPS_PER_ITEM, "relationships");
      }
      // The destination's relationships from its owner's items and those from others' items are
      // counted apart: others cannot fill the allowance its owner relates their own items with.
      const ownerId = locked.get(key.destinationId)?.owner_id ?? "";
      const fromOwner = locked.get(key.originId)?.owner_id === ownerId;
      const origins = { ownerId, owners: fromOwner ? "same" : "others" } as const;
      const most = fromOwner ? MAX_RELATIONSHIPS_PER_ITEM : MAX_RELATIONSHIPS_FROM_OTHERS;
      if ((await countReverseRelationships(trx, key.destinationId, origins)) >= most) {
        throw this.full(
          key.destinationId,
          most,
          fromOwner ? "relationships from its owner's items" : "relationships from other owners' items",
        );
      }
      const added = await insertRelationship(trx, {
        origin_id: key.originId,
        destination_id: key.destinationId,
        type: key.type,
        created_by: caller.userId,
        created: Date.now(),
      });
      if (!added) {
        throw errors.conflict(
          `Items '${key.originId}' and '${key.destinationId}' already have a ${key.type} relationship.`,
        );
      }
    });
  }

  /** Deletes a relationship; only the user who added it may (as ArcGIS documents). */
  async delete(caller: Caller | null, username: string, key: RelationshipKey): Promise<void> {
    requirePrivilege(caller, "portal:user:createItem");
    if (!isCaller(caller, username))
      throw errors.forbidden("Relationships are deleted by the user who added them.");
    await this.db.transaction(async (trx) => {
      const row = await findRelationship(trx, key);
      if (!row || row.created_by !== caller.userId) {
        // One the caller did not add is not theirs to know of.
        throw errors.notFound(
          `A ${key.type} relationship you added from item '${key.originId}' to item '${key.destinationId}'`,
        );
      }
      await deleteRelationship(trx, key);
    });
  }

  /**
   * The items related to a visible item by some types in one direction, leaving out those the
   * caller may not see, a page of them in creation order.
   */
  async related(
    caller: Caller | null,
    id: string,
    types: readonly string[],
    direction: Direction,
    order: "asc" | "desc",
    page: Page,
  ) {
    const { row: item } = await this.items.visible(caller, id);
    const rows = await this.listed(item.owner_id, id, types, direction, order);
    const otherIds = rows.map((r) => (direction === "forward" ? r.destination_id : r.origin_id));
    const byId = new Map((await findItems(this.db.kysely, otherIds)).map((row) => [row.id, row]));
    const shares = await sharedGroupIdsOf(this.db.kysely, [...byId.keys()]);
    const viewer = await this.items.viewer(caller);
    // The same item related by two types is listed once.
    const seen = new Set<string>();
    const visible = otherIds.flatMap((otherId) => {
      const row = byId.get(otherId);
      if (!row || seen.has(otherId) || !canViewItem(viewer, row, shares.get(otherId) ?? [])) return [];
      seen.add(otherId);
      return [row];
    });
    const pageRows = visible.slice(page.start - 1, page.start - 1 + page.num);
    return {
      ...pageInfo(page, visible.length, pageRows.length),
      relatedItems: await this.items.itemsJson(pageRows),
    };
  }

  /**
   * The relationships relatedItems reads: forward ones, or reverse ones from the item owner's items
   * and from others' items, each as many as its allowance (an item given to another owner may
   * leave more in one of them), in creation order.
   */
  private async listed(
    ownerId: string,
    id: string,
    types: readonly string[],
    direction: Direction,
    order: "asc" | "desc",
  ): Promise<RelationshipRow[]> {
    const q = this.db.kysely;
    if (direction === "forward") {
      return listRelationships(q, id, direction, types, order, MAX_RELATIONSHIPS_PER_ITEM);
    }
    const own = await listRelationships(q, id, direction, types, order, MAX_RELATIONSHIPS_PER_ITEM, {
      ownerId,
      owners: "same",
    });
    const others = await listRelationships(q, id, direction, types, order, MAX_RELATIONSHIPS_FROM_OTHERS, {
      ownerId,
      owners: "others",
    });
    const sign = order === "asc" ? 1 : -1;
    return [...own, ...others].sort(
      (a, b) =>
        sign * (Number(a.created) - Number(b.created)) ||
        (a.origin_id < b.origin_id ? -1 : a.origin_id > b.origin_id ? 1 : 0),
    );
  }

  private full(id: string, most: number, what: string) {
    return errors.conflict(
      `Item '${id}' has ${most} ${what}, the most an item may have.`,
      "Delete some of them first.",
    );
  }

  /** Both items of a relationship, each one the caller may see, of a type ArcGIS documents. */
  private async ends(caller: Caller, key: RelationshipKey) {
    if (key.originId === key.destinationId) {
      throw errors.invalidParameter("destinationItemId", "must be another item than originItemId");
    }
    const origin = (await this.items.visible(caller, key.originId)).row;
    const destination = (await this.items.visible(caller, key.destinationId)).row;
    return { origin, destination };
  }
}
