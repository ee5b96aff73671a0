import type { Insertable, Selectable, Updateable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { RoleTable } from "../db/schema.js";

export type RoleRow = Selectable<RoleTable>;

export function findRole(q: Queryable, id: string): Promise<RoleRow | undefined> {
  return q.selectFrom("roles").selectAll().where("id", "=", id).executeTakeFirst();
}

/** `name_key` is the lower-case name (role names are unique regardless of case): derived here only. */
export type NewRole = Omit<Insertable<RoleTable>, "name_key">;
export type RoleChanges = Omit<Updateable<RoleTable>, "name_key">;

export async function insertRole(q: Queryable, row: NewRole): Promise<void> {
  await q
    .insertInto("roles")
    .values({ ...row, name_key: row.name.toLowerCase() })
    .execute();
}

export async function updateRole(q: Queryable, id: string, patch: RoleChanges): Promise<void> {
  await q
    .updateTable("roles")
    .set({ ...patch, ...(patch.name !== undefined ? { name_key: patch.name.toLowerCase() } : {}) })
    .where("id", "=", id)
    .execute();
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

/**
 * The users holding a custom role. Their `role` column is derived from the role's privileges (the
 * built-in role it extends), so this repository keeps it in step when the privileges change.
 */
export async function countUsersWithRole(q: Queryable, roleId: string): Promise<number> {
  const row = await q
    .selectFrom("users")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("role_id", "=", roleId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Re-derives `role` of every user holding a custom role whose privileges changed. */
export async function setBaseRoleForRoleHolders(q: Queryable, roleId: string, role: string, now: number) {
  await q.updateTable("users").set({ role, modified: now }).where("role_id", "=", roleId).execute();
}
