import type { Insertable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { FeatureServiceTable } from "../db/schema.js";

export interface ServiceRow {
  item_id: string;
  name: string;
  definition: string;
  layers: string;
  tables: string;
  modified: number;
  /** 1: every edit is refused, the owner's included (a read-only collaboration copy). */
  read_only: number;
}

/** Service names are unique regardless of case: `name_key` is the lower-case name, derived here only. */
export type NewServiceRow = Omit<Insertable<FeatureServiceTable>, "name_key">;

export function findService(q: Queryable, name: string): Promise<ServiceRow | undefined> {
  return q
    .selectFrom("feature_services")
    .select(["item_id", "name", "definition", "layers", "tables", "modified", "read_only"])
    .where("name_key", "=", name.toLowerCase())
    .executeTakeFirst();
}

/** The hosted service of an item, if it is one. */
export function findServiceOfItem(q: Queryable, itemId: string): Promise<ServiceRow | undefined> {
  return q
    .selectFrom("feature_services")
    .select(["item_id", "name", "definition", "layers", "tables", "modified", "read_only"])
    .where("item_id", "=", itemId)
    .executeTakeFirst();
}

export async function insertService(q: Queryable, row: NewServiceRow): Promise<void> {
  await q
    .insertInto("feature_services")
    .values({ ...row, name_key: row.name.toLowerCase() })
    .execute();
}
