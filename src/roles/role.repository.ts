import type { Insertable, Selectable, Updateable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { RoleTable } from "../db/schema.js";

export type RoleRow = Selectable<RoleTable>;

export function findRole(q: Queryable, id: string): Promise<RoleRow | undefined> {
  return q.selectFrom("roles").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function insertRole(q: Queryable, row: Insertable<RoleTable>): Promise<void> {
  await q.insertInto("roles").values(row).execute();
}

export async function updateRole(q: Queryable, id: string, patch: Updateable<RoleTable>): Promise<void> {
  await q.updateTable("roles").set(patch).where("id", "=", id).execute();
}

export async function deleteRole(q: Queryable, id: string): Promise<void> {
  await q.deleteFrom("roles").where("id", "=", id).execute();
}

export async function listRoles(
  q: Queryable,
  page: { offset: number; limit: number },
): Promise<{ total: number; rows: RoleRow[] }> {
  const totalRow = await q
    .selectFrom("roles")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .executeTakeFirstOrThrow();
  const rows = await q
    .selectFrom("roles")
    .selectAll()
    .orderBy("created")
    .orderBy("id")
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { total: Number(totalRow.n), rows };
}
