import { errors } from "../errors.js";
import type { Actor } from "../events/outbox.js";
import { BUILT_IN_PRIVILEGES, type BuiltInRole, isBuiltInRole, type Privilege } from "../roles/privileges.js";

/** The signed-in user a request acts for. Anonymous requests have no caller (`null`). */
export interface Caller {
  userId: string;
  username: string;
  role: BuiltInRole;
  roleId: string | null;
  privileges: ReadonlySet<string>;
}

export function makeCaller(row: {
  userId: string;
  username: string;
  role: string;
  roleId: string | null;
  rolePrivileges: string | null;
}): Caller {
  const role: BuiltInRole = isBuiltInRole(row.role) ? row.role : "org_user";
  const privileges: readonly string[] =
    row.roleId !== null ? (JSON.parse(row.rolePrivileges ?? "[]") as string[]) : BUILT_IN_PRIVILEGES[role];
  return {
    userId: row.userId,
    username: row.username,
    role,
    roleId: row.roleId,
    privileges: new Set(privileges),
  };
}

export function hasPrivilege(caller: Caller | null, privilege: Privilege): boolean {
  return caller?.privileges.has(privilege) === true;
}

/** Throws 499 for anonymous callers and 403 for callers without the privilege. */
export function requirePrivilege(caller: Caller | null, privilege: Privilege): asserts caller is Caller {
  if (caller === null) throw errors.tokenRequired();
  if (!caller.privileges.has(privilege)) throw errors.forbidden(`Requires the privilege ${privilege}.`);
}

export function actorOf(caller: Caller | null): Actor | null {
  return caller ? { id: caller.userId, username: caller.username } : null;
}
