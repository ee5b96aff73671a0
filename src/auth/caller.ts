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

/** A caller with the built-in Administrator role (not a custom role based on it). */
export function isDefaultAdministrator(caller: Caller): boolean {
  return caller.role === "org_admin" && caller.roleId === null;
}

/**
 * Handing out privileges (assigning a role, setting a role's privileges) is limited to those the
 * caller holds: an administrator with a custom role (say, only changeUserRoles or manageRoles)
 * could otherwise make itself, or anyone, a full administrator. Default administrators hold every
 * privilege.
 */
export function requireMayGrant(caller: Caller, privileges: readonly string[], what: string): void {
  if (isDefaultAdministrator(caller)) return;
  const missing = privileges.filter((p) => !caller.privileges.has(p));
  if (missing.length > 0) {
    throw errors.forbidden(
      `${what} grants privileges the caller does not hold: ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ", …" : ""}.`,
    );
  }
}

/**
 * A default administrator's account (role, profile, password, enabled, existence) is managed by
 * default administrators only, so a custom-role administrator cannot take over or lock out one.
 */
export function requireMayManageAccountOf(
  caller: Caller,
  target: { role: string; role_id: string | null },
  what: string,
): void {
  if (target.role === "org_admin" && target.role_id === null && !isDefaultAdministrator(caller)) {
    throw errors.forbidden(`Only a default administrator may ${what} a default administrator.`);
  }
}

export function actorOf(caller: Caller | null): Actor | null {
  return caller ? { id: caller.userId, username: caller.username } : null;
}
