import { errors, type PorticoError } from "../errors.js";
import type { Actor } from "../events/outbox.js";
import { BUILT_IN_PRIVILEGES, type BuiltInRole, isBuiltInRole, type Privilege } from "./privileges.js";

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
  return {
    userId: row.userId,
    username: row.username,
    role,
    roleId: row.roleId,
    privileges: new Set(privilegesOf(row)),
  };
}

/**
 * The privileges an account holds: its custom role's (stored as JSON text on the role) when it has
 * one, otherwise those of its built-in role.
 */
export function privilegesOf(account: {
  role: string;
  roleId: string | null;
  rolePrivileges: string | null;
}): readonly string[] {
  if (account.roleId !== null) return JSON.parse(account.rolePrivileges ?? "[]") as string[];
  return BUILT_IN_PRIVILEGES[isBuiltInRole(account.role) ? account.role : "org_user"];
}

/** Whether `username` names the caller: usernames are unique without regard to case, as in ArcGIS. */
export function isCaller(caller: Caller, username: string): boolean {
  return caller.username.toLowerCase() === username.toLowerCase();
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
 * Changing what a role's holders may do (setting its privileges) is limited to administrators who
 * hold every privilege the role has now, as well as the new ones (`requireMayGrant`). Narrowing is
 * not harmless: cutting a broader role down to privileges the caller holds puts every holder
 * within `requireMayManageAccountOf`'s reach, and the caller could then reset their passwords and
 * sign in as them; with the rule, a role is changed only by someone who could manage its holders
 * already. Default administrators hold every privilege.
 */
export function requireMayChangeRole(
  caller: Caller,
  role: { name: string; privileges: readonly string[] },
  what: string,
): void {
  if (isDefaultAdministrator(caller)) return;
  const missing = role.privileges.filter((p) => !caller.privileges.has(p));
  if (missing.length > 0) {
    throw errors.forbidden(
      `Only an administrator holding every privilege of the role '${role.name}' may ${what} it; the caller lacks ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ", …" : ""}.`,
    );
  }
}

/**
 * An account an administrator acts on, as read by `findAccount` / `findUserForUpdate`: the user
 * with the privileges of its custom role (null for a built-in role).
 */
export interface ManagedAccount {
  username: string;
  role: string;
  role_id: string | null;
  role_privileges: string | null;
}

/**
 * Whether an administrator may act on another member's account: update its profile, reset its
 * password, change its role, disable, enable or delete it, or reassign its content to or from it.
 *
 * An administrator may manage only accounts whose privileges are a subset of its own. Otherwise a
 * custom role holding only viewUsers and updateUsers could reset the password of an account with
 * every privilege (no old password is asked of an administrator), sign in as it and grant itself
 * the lot; likewise changeUserRoles, disableUsers and deleteUsers against broader accounts. A
 * default administrator's account is managed by default administrators only, even by a custom role
 * holding every privilege, so that a custom role cannot take over or lock out the organization's
 * owners. Default administrators hold every privilege and manage everyone.
 *
 * A user acting on its own account is not managing another's: the self rules of each operation
 * (the old password, no disabling or deleting oneself) apply instead, so callers skip this check
 * for the caller's own account.
 */
export function requireMayManageAccountOf(caller: Caller, target: ManagedAccount, what: string): void {
  if (isDefaultAdministrator(caller)) return;
  if (target.role === "org_admin" && target.role_id === null) {
    throw errors.forbidden(`Only a default administrator may ${what} a default administrator.`);
  }
  const held = privilegesOf({
    role: target.role,
    roleId: target.role_id,
    rolePrivileges: target.role_privileges,
  });
  const missing = held.filter((p) => !caller.privileges.has(p));
  if (missing.length > 0) {
    throw errors.forbidden(
      `Only an administrator holding every privilege of '${target.username}' may ${what} it; the caller lacks ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ", …" : ""}.`,
    );
  }
}

export function actorOf(caller: Caller | null): Actor | null {
  return caller ? { id: caller.userId, username: caller.username } : null;
}

/**
 * The answer for an item, group, user or hosted service the caller may not see, whether it exists
 * or not, so that existence cannot be probed: an anonymous caller is asked for a token (499; ArcGIS
 * clients then offer to sign in), a signed-in caller hears that it "does not exist or is
 * inaccessible" (400). Callers compute it for a missing resource and a hidden one alike.
 */
export function unseen(caller: Caller | null, notFound: () => PorticoError): PorticoError {
  return caller === null ? errors.tokenRequired() : notFound();
}
