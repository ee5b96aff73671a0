import type { Selectable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { ItemRelationshipTable } from "../db/schema.js";

export type RelationshipRow = Selectable<ItemRelationshipTable>;

/** Which end of its relationships an item is: `forward` lists where it is the origin. */
export type Direction = "forward" | "reverse";

export interface RelationshipKey {
  originId: string;
  destinationId: string;
  type: string;
}

/** Adds a relationship; false when the same one (origin, destination, type) already exists. */
export async function insertRelationship(q: Queryable, row: RelationshipRow): Promise<boolean> {
  const inserted = await q
    .insertInto("item_relationships")
    .values(row)
    .onConflict((oc) => oc.columns(["origin_id", "destination_id", "type"]).doNothing())
    .executeTakeFirst();
  return Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0;
}

export function findRelationship(q: Queryable, key: RelationshipKey): Promise<RelationshipRow | undefined> {
  return q
    .selectFrom("item_relationships")
    .selectAll()
    .where("origin_id", "=", key.originId)
    .where("destination_id", "=", key.destinationId)
    .where("type", "=", key.type)
    .executeTakeFirst();
}

export async function deleteRelationship(q: Queryable, key: RelationshipKey): Promise<void> {
  await q
    .deleteFrom("item_relationships")
    .where("origin_id", "=", key.originId)
    .where("destination_id", "=", key.destinationId)
    .where("type", "=", key.type)
    .execute();
}

/** How many relationships an item has at one end (of any type). */
export async function countRelationships(
  q: Queryable,
  itemId: string,
  direction: Direction,
): Promise<number> {
  const row = await q
    .selectFrom("item_relationships")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where(direction === "forward" ? "origin_id" : "destination_id", "=", itemId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Whose items the origins of an item's reverse relationships are: those of `ownerId` (`same`), or
 * everyone else's (`others`).
 */
export interface OriginOwners {
  ownerId: string;
  owners: "same" | "others";
}

/** How many relationships have this item as destination and an origin of the given owners. */
export async function countReverseRelationships(
  q: Queryable,
  itemId: string,
  origins: OriginOwners,
): Promise<number> {
  const row = await q
    .selectFrom("item_relationships")
    .innerJoin("items", "items.id", "item_relationships.origin_id")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("item_relationships.destination_id", "=", itemId)
    .where("items.owner_id", origins.owners === "same" ? "=" : "<>", origins.ownerId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The relationships of some types at one end of an item, in creation order, at most `limit`: the
 * items at their other end are what relatedItems answers. `origins` narrows reverse ones to the
 * origins of some owners.
 */
export function listRelationships(
  q: Queryable,
  itemId: string,
  direction: Direction,
  types: readonly string[],
  order: "asc" | "desc",
  limit: number,
  origins?: OriginOwners,
): Promise<RelationshipRow[]> {
  let query = q
    .selectFrom("item_relationships")
    .selectAll("item_relationships")
    .where(
      direction === "forward" ? "item_relationships.origin_id" : "item_relationships.destination_id",
      "=",
      itemId,
    )
    .where("item_relationships.type", "in", [...types]);
  if (origins) {
    query = query
      .innerJoin("items", "items.id", "item_relationships.origin_id")
      .where("items.owner_id", origins.owners === "same" ? "=" : "<>", origins.ownerId);
  }
  return query
    .orderBy("item_relationships.created", order)
    .orderBy(direction === "forward" ? "item_relationships.destination_id" : "item_relationships.origin_id")
    .limit(limit)
    .execute();
}
