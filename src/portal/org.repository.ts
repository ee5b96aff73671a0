import type { Engine, Queryable } from "../db/database.js";

export interface OrgRow {
  id: string;
  settings: string;
  created: number;
  modified: number;
}

export async function findOrganization(
  q: Queryable,
): Promise<(OrgRow & { security_policy: string }) | undefined> {
  return q
    .selectFrom("organizations")
    .select(["id", "settings", "security_policy", "created", "modified"])
    .executeTakeFirst();
}

export async function saveSecurityPolicy(q: Queryable, id: string, policy: string): Promise<void> {
  await q.updateTable("organizations").set({ security_policy: policy }).where("id", "=", id).execute();
}

/**
 * Locks the organization row until the transaction ends (PostgreSQL), so that changes guarded by
 * an organization-wide rule (one enabled administrator at least, settings merged from the stored
 * ones) are serialised between nodes. SQLite transactions are already serialised.
 */
export async function lockOrganization(q: Queryable, engine: Engine): Promise<void> {
  if (engine === "postgres") await q.selectFrom("organizations").select("id").forUpdate().execute();
}

/** Creates the organization unless one exists (concurrent first start-ups create one). */
export async function insertOrganizationIfAbsent(q: Queryable, row: OrgRow): Promise<void> {
  await q
    .insertInto("organizations")
    .values({ ...row, singleton: 1 })
    .onConflict((oc) => oc.column("singleton").doNothing())
    .execute();
}

export async function saveSettings(
  q: Queryable,
  id: string,
  settings: string,
  modified: number,
): Promise<void> {
  await q.updateTable("organizations").set({ settings, modified }).where("id", "=", id).execute();
}
