import { type Caller, isCaller, requirePrivilege } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { canViewItem } from "./access.js";
import { findItemForUpdate, findItems, sharedGroupIdsOf } from "./item.repository.js";
import type { ItemService } from "./item.service.js";
import {
  countRelationships,
  type Direction,
  deleteRelationship,
  findRelationship,
  insertRelationship,
  listRelationships,
  type RelationshipKey,
} from "./relationship.repository.js";
import { mustOwnDestination, relationshipType } from "./relationship-types.js";

/**
 * Relationships an item has at each end, at most: relatedItems reads them all (to leave out the
 * items the caller may not see before paging), so this bounds its work.
 */
export const MAX_RELATIONSHIPS_PER_ITEM = 1000;

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
      for (const id of [key.originId, key.destinationId].sort()) {
        if (!(await findItemForUpdate(trx, this.db.engine, id))) throw errors.itemNotFound(id);
      }
      for (const [id, direction] of [
        [key.originId, "forward"],
        [key.destinationId, "reverse"],
      ] as const) {
        if ((await countRelationships(trx, id, direction)) >= MAX_RELATIONSHIPS_PER_ITEM) {
          throw errors.conflict(
            `Item '${id}' has ${MAX_RELATIONSHIPS_PER_ITEM} relationships, the most an item may have.`,
            "Delete some of them first.",
          );
        }
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
    await this.items.visible(caller, id);
    const rows = await listRelationships(
      this.db.kysely,
      id,
      direction,
      types,
      order,
      MAX_RELATIONSHIPS_PER_ITEM,
    );
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
