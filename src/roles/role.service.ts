import {
  actorOf,
  type Caller,
  requireMayChangeRole,
  requireMayGrant,
  requirePrivilege,
} from "../auth/caller.js";
import { baseRoleOf, isPrivilege } from "../auth/privileges.js";
import { type Db, isUniqueViolation } from "../db/database.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { newId } from "../ids.js";
import { type Page, pageInfo } from "../validation/paging.js";
import {
  countUsersWithRole,
  deleteRole,
  findRole,
  insertRole,
  listRoles,
  type RoleRow,
  setBaseRoleForRoleHolders,
  updateRole,
} from "./role.repository.js";

function roleJson(row: RoleRow, withPrivileges = false): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    created: row.created,
    modified: row.modified,
    ...(withPrivileges ? { privileges: JSON.parse(row.privileges) as string[] } : {}),
  };
}

/** Custom roles (`wire.md` §4). Built-in roles are fixed and not listed here, as in ArcGIS. */
export class RoleService {
  constructor(private readonly db: Db) {}

  async list(caller: Caller | null, page: Page, returnPrivileges: boolean) {
    requirePrivilege(caller, "portal:admin:viewUsers");
    const { total, rows } = await listRoles(this.db.kysely, { offset: page.start - 1, limit: page.num });
    return { ...pageInfo(page, total, rows.length), roles: rows.map((r) => roleJson(r, returnPrivileges)) };
  }

  async get(caller: Caller | null, id: string) {
    requirePrivilege(caller, "portal:admin:viewUsers");
    return roleJson(await this.mustFind(id));
  }

  async privileges(caller: Caller | null, id: string) {
    requirePrivilege(caller, "portal:admin:viewUsers");
    const row = await this.mustFind(id);
    return { id: row.id, privileges: JSON.parse(row.privileges) as string[] };
  }

  async create(caller: Caller | null, input: { name: string; description: string }): Promise<{ id: string }> {
    requirePrivilege(caller, "portal:admin:manageRoles");
    const now = Date.now();
    const id = newId().slice(0, 16);
    try {
      await this.db.transaction(async (trx) => {
        await insertRole(trx, {
          id,
          name: input.name,
          description: input.description,
          privileges: "[]",
          created: now,
          modified: now,
        });
        await recordEvent(
          trx,
          {
            source: "role",
            operation: "add",
            objectId: id,
            actor: actorOf(caller),
            properties: { name: [input.name] },
          },
          now,
        );
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw errors.roleNameTaken(input.name);
      throw err;
    }
    return { id };
  }

  async update(caller: Caller | null, id: string, changes: { name?: string; description?: string }) {
    requirePrivilege(caller, "portal:admin:manageRoles");
    const now = Date.now();
    try {
      await this.db.transaction(async (trx) => {
        const row = await findRole(trx, id);
        if (!row) throw errors.roleNotFound(id);
        await updateRole(trx, id, {
          ...(changes.name !== undefined ? { name: changes.name } : {}),
          ...(changes.description !== undefined ? { description: changes.description } : {}),
          modified: now,
        });
        await recordEvent(
          trx,
          { source: "role", operation: "update", objectId: id, actor: actorOf(caller) },
          now,
        );
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw errors.roleNameTaken(changes.name ?? "");
      throw err;
    }
  }

  /**
   * Replaces the privileges of a role. Users holding it get the built-in role it now derives from,
   * in the same transaction. The caller must hold every privilege the role has now and every new
   * one: narrowing a broader role would otherwise bring its holders within the caller's reach.
   */
  async setPrivileges(caller: Caller | null, id: string, privileges: string[]) {
    requirePrivilege(caller, "portal:admin:manageRoles");
    const unknown = privileges.filter((p) => !isPrivilege(p));
    if (unknown.length > 0) {
      throw errors.invalidParameter("privileges", `contains unknown privilege(s) ${unknown.join(", ")}`);
    }
    const unique = [...new Set(privileges)];
    requireMayGrant(caller, unique, "Setting these privileges");
    const now = Date.now();
    await this.db.transaction(
      async (trx) => {
        const row = await findRole(trx, id);
        if (!row) throw errors.roleNotFound(id);
        requireMayChangeRole(
          caller,
          { name: row.name, privileges: JSON.parse(row.privileges) as string[] },
          "change the privileges of",
        );
        await updateRole(trx, id, { privileges: JSON.stringify(unique), modified: now });
        await setBaseRoleForRoleHolders(trx, id, baseRoleOf(unique), now);
        await recordEvent(
          trx,
          { source: "role", operation: "update", objectId: id, actor: actorOf(caller) },
          now,
        );
      },
      { changes: ["auth"] },
    );
  }

  /**
   * Deletes a role nobody holds. Neither this nor `update` (name, description) changes what anyone
   * may do, so `manageRoles` is enough; holders move between roles through `updateUserRole`, which
   * has the account rule.
   */
  async delete(caller: Caller | null, id: string) {
    requirePrivilege(caller, "portal:admin:manageRoles");
    await this.db.transaction(
      async (trx) => {
        const row = await findRole(trx, id);
        if (!row) throw errors.roleNotFound(id);
        const holders = await countUsersWithRole(trx, id);
        if (holders > 0) throw errors.roleInUse(id, holders);
        await deleteRole(trx, id);
        await recordEvent(trx, { source: "role", operation: "delete", objectId: id, actor: actorOf(caller) });
      },
      { changes: ["auth"] },
    );
  }

  private async mustFind(id: string): Promise<RoleRow> {
    const row = await findRole(this.db.kysely, id);
    if (!row) throw errors.roleNotFound(id);
    return row;
  }
}
