import type { Transaction } from "kysely";
import {
  actorOf,
  type Caller,
  hasPrivilege,
  isCaller,
  isDefaultAdministrator,
  requireMayGrant,
  requireMayManageAccountOf,
  requirePrivilege,
  unseen,
} from "../auth/caller.js";
import type { PasswordHasher } from "../auth/password.js";
import { hashNewPassword } from "../auth/password-change.js";
import { BUILT_IN_PRIVILEGES, type BuiltInRole, baseRoleOf, isBuiltInRole } from "../auth/privileges.js";
import { type LockoutPolicy, lockoutStatus } from "../auth/security-policy.js";
import { clearSignInFailures, findSignInFailuresOf, recordPassword } from "../auth/sign-in.repository.js";
import { deleteTokensOfUser } from "../auth/token.repository.js";
import { FeedCache } from "../db/cache.js";
import { type Db, isUniqueViolation, later } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { newId } from "../ids.js";
import { lockOrganization } from "../portal/org.repository.js";
import type { PortalService } from "../portal/portal.service.js";
import { findRole } from "../roles/role.repository.js";
import { type Page, pageInfo } from "../validation/paging.js";
import {
  changeToBuiltInRoleQuery,
  countFullAdministrators,
  deleteUser,
  findAccount,
  findUser,
  findUserForUpdate,
  insertUser,
  isEnabledFullAdministrator,
  listUsers,
  lockAccount,
  type NewUserRow,
  ownsContent,
  roleChangeChanges,
  type USER_SORT_FIELDS,
  type UserRow,
  updateRoleQuery,
  updateUser,
} from "./user.repository.js";

export interface NewUser {
  username: string;
  password: string;
  firstName: string;
  lastName: string;
  fullName?: string | undefined;
  email: string;
  role?: string | undefined;
  description?: string | undefined;
  userLicenseTypeId?: string | undefined;
}

export interface ProfileChanges {
  firstName?: string | undefined;
  lastName?: string | undefined;
  fullName?: string | undefined;
  description?: string | undefined;
  email?: string | undefined;
  access?: string | undefined;
  tags?: string[] | undefined;
  culture?: string | undefined;
  region?: string | undefined;
  units?: string | undefined;
  password?: string | undefined;
  oldPassword?: string | undefined;
}

export interface UserPage extends Page {
  sortField: keyof typeof USER_SORT_FIELDS;
  sortOrder: "asc" | "desc";
}

/**
 * The groups of a user as group resources with the user's membership, from the groups layer
 * above (`GroupService.groupsOf`), handed in by `createServices`.
 */
export type GroupsOf = (
  userId: string,
  username: string,
  seenBy: Caller | null,
) => Promise<Record<string, unknown>[]>;

/** Largest `properties` object a user may store, as JSON text (`setProperties`). */
export const MAX_USER_PROPERTIES_CHARS = 64 * 1024;

/** Which fields of a user a caller may see. */
type UserView = "full" | "member" | "public";

type Trx = Transaction<Database>;

/** Members of the organization: accounts, profiles, roles, and their events. */
export class UserService {
  /**
   * The signed-in user's own resource, by user id: part of every signed-in `portals/self`. It
   * lists the user's groups, so a change of the user's memberships (`members:<userId>`) or of any
   * group (`members`, noted by the group repository) drops it on every node.
   */
  private readonly selves: FeedCache<string, Record<string, unknown>>;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly hasher: PasswordHasher,
    private readonly groupsOf: GroupsOf,
  ) {
    this.selves = new FeedCache(db.feed, ["auth", "members"], (self) => self.id as string);
  }

  /**
   * Creates an account. `caller` null is the system itself (the first administrator), which may
   * hand the password's hash in, computed ahead (a first start hashes while it migrates).
   */
  async create(
    caller: Caller | null,
    input: NewUser,
    opts: { system?: boolean; passwordHash?: string } = {},
  ): Promise<UserRow> {
    if (!opts.system) requirePrivilege(caller, "portal:admin:inviteUsers");
    // The first administrator's password is the operator's, set before any policy exists.
    const passwordHash =
      opts.system || caller === null
        ? (opts.passwordHash ?? (await this.hasher.hash(input.password, "system")))
        : await hashNewPassword(
            { q: this.db.kysely, hasher: this.hasher },
            (await this.portal.get()).securityPolicy.passwordPolicy,
            null,
            input.password,
            "password",
            `user:${caller.userId}`,
          );
    const now = Date.now();
    try {
      return await this.db.transaction(async (trx) => {
        const { role, roleId, privileges } = await resolveRole(trx, input.role ?? "org_user", "role");
        if (caller) requireMayGrant(caller, privileges, "Assigning this role");
        const row: NewUserRow = {
          id: newId(),
          username: input.username,
          full_name: input.fullName ?? `${input.firstName} ${input.lastName}`.trim(),
          first_name: input.firstName,
          last_name: input.lastName,
          email: input.email,
          description: input.description ?? "",
          password_hash: passwordHash,
          role,
          role_id: roleId,
          disabled: 0,
          provider: "arcgis",
          user_type: input.userLicenseTypeId ?? "creatorUT",
          access: "org",
          culture: null,
          region: null,
          units: null,
          tags: "[]",
          created: now,
          modified: now,
          last_login: -1,
          properties: null,
        };
        const stored = await insertUser(trx, row);
        await recordPassword(trx, row.id, passwordHash, now);
        await recordEvent(
          trx,
          { source: "user", operation: "add", objectId: row.username, actor: actorOf(caller) },
          now,
        );
        return stored;
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw errors.usernameTaken(input.username);
      throw err;
    }
  }

  async get(caller: Caller | null, username: string): Promise<Record<string, unknown>> {
    const row = await findUser(this.db.kysely, username);
    const org = await this.portal.get();
    // A missing user and one the caller may not see give the same answer (`unseen`).
    const view = row ? viewOf(caller, row, org.settings.access === "public") : null;
    if (!row || view === null) throw unseen(caller, () => errors.userNotFound(username));
    const json = userJson(row, org.id, view, await this.customPrivileges([row]));
    if (view !== "full") return json;
    return {
      ...json,
      groups: await this.groupsOf(row.id, row.username, caller),
      ...(await this.lockouts(caller, [row], org)).get(row.id),
    };
  }

  /** The signed-in user's own resource (`community/self`). */
  async self(caller: Caller): Promise<Record<string, unknown>> {
    // Every signed-in `portals/self` asks: a cached answer is returned without awaiting the cache.
    const cached = this.selves.peek(caller.userId);
    if (cached !== undefined) return cached;
    const self = await this.selves.get(caller.userId, async () => {
      const row = await findUser(this.db.kysely, caller.username);
      if (!row) return undefined;
      const org = await this.portal.get();
      const json = userJson(row, org.id, "full", await this.customPrivileges([row]));
      return Object.freeze({ ...json, groups: await this.groupsOf(row.id, row.username, caller) });
    });
    if (!self) throw errors.invalidToken();
    return self;
  }

  async list(caller: Caller | null, page: UserPage) {
    requirePrivilege(caller, "portal:admin:viewUsers");
    const org = await this.portal.get();
    const { total, rows } = await listUsers(this.db.kysely, {
      offset: page.start - 1,
      limit: page.num,
      sortField: page.sortField,
      sortOrder: page.sortOrder,
    });
    const customs = await this.customPrivileges(rows);
    const lockouts = await this.lockouts(caller, rows, org);
    return {
      ...pageInfo(page, total, rows.length),
      users: rows.map((r) => ({ ...userJson(r, org.id, "full", customs), ...lockouts.get(r.id) })),
    };
  }

  async update(caller: Caller | null, username: string, changes: ProfileChanges): Promise<void> {
    if (caller === null) throw errors.tokenRequired();
    const isSelf = isCaller(caller, username);
    if (!isSelf) requirePrivilege(caller, "portal:admin:updateUsers");
    const profileFields = (["firstName", "lastName", "fullName", "description", "tags"] as const).filter(
      (f) => changes[f] !== undefined,
    );
    if (isSelf && profileFields.length > 0 && !hasPrivilege(caller, "portal:admin:updateUsers")) {
      const org = await this.portal.get();
      if (org.settings.updateUserProfileDisabled === true) {
        throw errors.forbidden(
          "The organization does not let members edit their profile (updateUserProfileDisabled is true).",
        );
      }
    }
    const target = await findAccount(this.db.kysely, username);
    if (!target) throw errors.userNotFound(username);
    const what = changes.password !== undefined ? "reset the password of" : "update";
    // Checked again in the transaction, on the locked row; checking first spares a refused caller
    // the cost of hashing a password.
    if (!isSelf) requireMayManageAccountOf(caller, target, what);
    let passwordHash: string | undefined;
    if (changes.password !== undefined) {
      const source = `user:${caller.userId}`;
      // Members changing their own password must prove they know the current one; an
      // administrator resetting someone else's does not.
      if (isSelf) {
        if (changes.oldPassword === undefined) throw errors.missingParameter("oldPassword");
        if (!(await this.hasher.verify(changes.oldPassword, target.password_hash, source))) {
          throw errors.invalidParameter("oldPassword", "does not match the current password");
        }
      }
      passwordHash = await hashNewPassword(
        { q: this.db.kysely, hasher: this.hasher },
        (await this.portal.get()).securityPolicy.passwordPolicy,
        target,
        changes.password,
        "password",
        source,
      );
    }
    const now = Date.now();
    await this.db.transaction(
      async (trx) => {
        const row = await findUserForUpdate(trx, this.db.engine, username);
        if (!row) throw errors.userNotFound(username);
        if (!isSelf) requireMayManageAccountOf(caller, row, what);
        await updateUser(trx, row.id, {
          ...(changes.firstName !== undefined ? { first_name: changes.firstName } : {}),
          ...(changes.lastName !== undefined ? { last_name: changes.lastName } : {}),
          ...(changes.fullName !== undefined ? { full_name: changes.fullName } : {}),
          ...(changes.description !== undefined ? { description: changes.description } : {}),
          ...(changes.email !== undefined ? { email: changes.email } : {}),
          ...(changes.access !== undefined ? { access: changes.access } : {}),
          ...(changes.tags !== undefined ? { tags: JSON.stringify(changes.tags) } : {}),
          ...(changes.culture !== undefined ? { culture: changes.culture } : {}),
          ...(changes.region !== undefined ? { region: changes.region } : {}),
          ...(changes.units !== undefined ? { units: changes.units } : {}),
          ...(passwordHash !== undefined ? { password_hash: passwordHash } : {}),
          modified: now,
        });
        // A new password ends every session of the account, including the one that changed it,
        // and unlocks sign-in (an administrator's reset is how a locked-out member gets back in).
        if (passwordHash !== undefined) {
          await deleteTokensOfUser(trx, row.id);
          await recordPassword(trx, row.id, passwordHash, now);
          await clearSignInFailures(trx, row.username);
        }
        await recordEvent(
          trx,
          { source: "user", operation: "update", objectId: row.username, actor: actorOf(caller) },
          now,
        );
        return row.id;
      },
      { changes: (userId) => [`auth:${userId}`] },
    );
  }

  async delete(caller: Caller | null, username: string): Promise<void> {
    requirePrivilege(caller, "portal:admin:deleteUsers");
    if (isCaller(caller, username)) {
      throw errors.conflict("You cannot delete your own account.", "Ask another administrator.");
    }
    await this.db.transaction(
      async (trx) => {
        const row = await findUserForUpdate(trx, this.db.engine, username);
        if (!row) throw errors.userNotFound(username);
        requireMayManageAccountOf(caller, row, "delete");
        // As in ArcGIS, an account that owns content is not deleted: its items and groups would
        // be orphaned. Reassign or delete them first.
        const owned = await ownsContent(trx, row.id);
        if (owned.items > 0 || owned.groups > 0) {
          throw errors.conflict(
            `User '${row.username}' owns ${owned.items} item(s) and ${owned.groups} group(s).`,
            "Reassign or delete them before deleting the account.",
          );
        }
        await deleteUser(trx, row.id);
        if (isEnabledFullAdministrator(row)) {
          await this.ensureAnAdministratorRemains(trx, "delete the last administrator");
        }
        await recordEvent(trx, {
          source: "user",
          operation: "delete",
          objectId: row.username,
          actor: actorOf(caller),
        });
        return row.id;
      },
      { changes: (userId) => [`auth:${userId}`] },
    );
  }

  async setDisabled(caller: Caller | null, username: string, disabled: boolean): Promise<void> {
    requirePrivilege(caller, "portal:admin:disableUsers");
    if (disabled && isCaller(caller, username)) {
      throw errors.conflict("You cannot disable your own account.", "Ask another administrator.");
    }
    await this.db.transaction(
      async (trx) => {
        const row = await lockAccount(trx, this.db.engine, username);
        if (!row) throw errors.userNotFound(username);
        requireMayManageAccountOf(caller, row, disabled ? "disable" : "enable");
        // Enabling also ends a lockout after failed sign-ins, on an enabled account too.
        if (!disabled) await clearSignInFailures(trx, row.username);
        if (Boolean(row.disabled) === disabled) return undefined;
        const now = Date.now();
        await updateUser(trx, row.id, { disabled: disabled ? 1 : 0, modified: now });
        if (disabled) {
          await deleteTokensOfUser(trx, row.id);
          if (isEnabledFullAdministrator(row)) {
            await this.ensureAnAdministratorRemains(trx, "disable the last administrator");
          }
        }
        await recordEvent(
          trx,
          {
            source: "user",
            operation: disabled ? "disable" : "enable",
            objectId: row.username,
            actor: actorOf(caller),
          },
          now,
        );
        return row.id;
      },
      { changes: (userId) => (userId ? [`auth:${userId}`] : []) },
    );
  }

  /** `updateUserRole` (`interface.md` §4.8): a built-in role name or a custom role id. */
  async updateRole(caller: Caller | null, username: string, role: string): Promise<void> {
    requirePrivilege(caller, "portal:admin:changeUserRoles");
    // A default administrator may manage every account and grant every role, so for a built-in
    // role nothing about the account is left to decide but what the statement's WHERE checks:
    // on PostgreSQL the change is one statement, one round trip (most role changes are these).
    // An account it leaves alone (none, an enabled default administrator, one of that role already)
    // goes through the transaction below, which decides and answers as for any caller.
    const inOne = this.db.changeInOneStatement;
    if (inOne && isDefaultAdministrator(caller) && isBuiltInRole(role)) {
      const now = Date.now();
      const properties = JSON.stringify({ userRoleUpdatedTo: [role] });
      const changed = await inOne<{ id: string }>(
        (node) =>
          changeToBuiltInRoleQuery(
            node,
            username.toLowerCase(),
            role,
            now,
            newId(),
            actorOf(caller),
            properties,
          ),
        (rows) => rows.flatMap((row) => roleChangeChanges(row.id)),
      );
      if (changed.length > 0) return;
    }
    await this.db.transaction(
      async (trx) => {
        const row = await lockAccount(trx, this.db.engine, username);
        if (!row) throw errors.userNotFound(username);
        const resolved = await resolveRole(trx, role, "role");
        requireMayManageAccountOf(caller, row, "change the role of");
        requireMayGrant(caller, resolved.privileges, "Assigning this role");
        if (resolved.role === row.role && resolved.roleId === row.role_id) return undefined;
        const now = Date.now();
        // Nothing here catches its failure: it may travel with the next statement (`later`).
        await later(trx, updateRoleQuery(trx, row.id, resolved.role, resolved.roleId, now));
        if (isEnabledFullAdministrator(row)) {
          await this.ensureAnAdministratorRemains(trx, "change the role of the last administrator");
        }
        await recordEvent(
          trx,
          {
            source: "user",
            operation: "updateUserRole",
            objectId: row.username,
            actor: actorOf(caller),
            properties: { userRoleUpdatedTo: [resolved.roleId ?? resolved.role] },
          },
          now,
        );
        return row.id;
      },
      { changes: (userId) => (userId ? [`auth:${userId}`] : []) },
    );
  }

  /**
   * `community/users/<u>/properties`: the JSON object the user stored (empty when none); theirs to
   * read, or an administrator's who can view users.
   */
  async properties(caller: Caller | null, username: string): Promise<Record<string, unknown>> {
    if (caller === null) throw errors.tokenRequired();
    if (!isCaller(caller, username)) requirePrivilege(caller, "portal:admin:viewUsers");
    const row = await findUser(this.db.kysely, username);
    if (!row) throw errors.userNotFound(username);
    return row.properties === null ? {} : (JSON.parse(row.properties) as Record<string, unknown>);
  }

  /**
   * `setProperties`: replaces the user's properties with `properties` (at most
   * `MAX_USER_PROPERTIES_CHARS` as JSON); the user's own, or an administrator's who can update users.
   * ArcGIS has no webhook trigger for it.
   */
  async setProperties(caller: Caller | null, username: string, properties: Record<string, unknown>) {
    if (caller === null) throw errors.tokenRequired();
    if (!isCaller(caller, username)) requirePrivilege(caller, "portal:admin:updateUsers");
    const text = JSON.stringify(properties);
    if (text.length > MAX_USER_PROPERTIES_CHARS) {
      throw errors.invalidParameter(
        "properties",
        `must be at most ${MAX_USER_PROPERTIES_CHARS} characters as JSON (it is ${text.length})`,
      );
    }
    await this.db.transaction(async (trx) => {
      const row = await findUserForUpdate(trx, this.db.engine, username);
      if (!row) throw errors.userNotFound(username);
      if (!isCaller(caller, username)) requireMayManageAccountOf(caller, row, "set the properties of");
      await updateUser(trx, row.id, { properties: text });
    });
  }

  /** True when at least one administrator account exists (enabled or not). */
  async hasAdministrator(): Promise<boolean> {
    const row = await this.db.kysely
      .selectFrom("users")
      .select("id")
      .where("role", "=", "org_admin")
      .where("role_id", "is", null)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Lockout state of the given users by user id (`locked`, `lockedUntil`, `failedLoginAttempts`),
   * for callers who administer users; nothing for others.
   */
  private async lockouts(
    caller: Caller | null,
    rows: UserRow[],
    org: { securityPolicy: { lockoutPolicy: LockoutPolicy } },
  ): Promise<Map<string, ReturnType<typeof lockoutStatus>>> {
    const out = new Map<string, ReturnType<typeof lockoutStatus>>();
    if (!hasPrivilege(caller, "portal:admin:viewUsers")) return out;
    const found = await findSignInFailuresOf(
      this.db.kysely,
      rows.map((r) => r.username),
    );
    const byKey = new Map(found.map((f) => [f.username_key, f]));
    const now = Date.now();
    for (const row of rows) {
      out.set(row.id, lockoutStatus(byKey.get(row.username_key), org.securityPolicy.lockoutPolicy, now));
    }
    return out;
  }

  /** Privileges of the custom roles the given users hold, by role id. */
  private async customPrivileges(rows: UserRow[]): Promise<Map<string, string[]>> {
    const ids = [...new Set(rows.map((r) => r.role_id).filter((id): id is string => id !== null))];
    const out = new Map<string, string[]>();
    for (const id of ids) {
      const role = await findRole(this.db.kysely, id);
      if (role) out.set(id, JSON.parse(role.privileges) as string[]);
    }
    return out;
  }

  /**
   * Called after a change that removed an enabled default administrator. Taking the organization
   * lock first serialises such changes between nodes (PostgreSQL), so two administrators demoting
   * each other at once cannot both succeed.
   */
  private async ensureAnAdministratorRemains(trx: Trx, action: string): Promise<void> {
    await lockOrganization(trx, this.db.engine);
    if ((await countFullAdministrators(trx)) === 0) throw errors.lastAdministrator(action);
  }
}

/** Resolves a role parameter: a built-in role name or the id of a custom role. */
async function resolveRole(
  trx: Trx,
  value: string,
  param: string,
): Promise<{ role: BuiltInRole; roleId: string | null; privileges: readonly string[] }> {
  if (isBuiltInRole(value)) return { role: value, roleId: null, privileges: BUILT_IN_PRIVILEGES[value] };
  const custom = await findRole(trx, value);
  if (!custom) {
    throw errors.invalidParameter(
      param,
      `must be org_admin, org_publisher, org_user or the id of a custom role; '${value}' is none of these`,
    );
  }
  const privileges = JSON.parse(custom.privileges) as string[];
  return { role: baseRoleOf(privileges), roleId: custom.id, privileges };
}

function viewOf(caller: Caller | null, row: UserRow, orgIsPublic: boolean): UserView | null {
  if (caller && (caller.userId === row.id || hasPrivilege(caller, "portal:admin:viewUsers"))) return "full";
  if (caller) return row.access === "private" ? null : "member";
  return orgIsPublic && row.access === "public" ? "public" : null;
}

/** The ArcGIS user resource (`wire.md` §4), trimmed to what the viewer may see. */
export function userJson(
  row: UserRow,
  orgId: string,
  view: UserView,
  customPrivileges: ReadonlyMap<string, string[]>,
): Record<string, unknown> {
  const base: Record<string, unknown> = {
    username: row.username,
    id: row.id,
    fullName: row.full_name,
    firstName: row.first_name,
    lastName: row.last_name,
    description: row.description,
    tags: JSON.parse(row.tags) as string[],
    culture: row.culture,
    region: row.region,
    units: row.units,
    thumbnail: null,
    access: row.access,
    orgId,
    created: row.created,
    modified: row.modified,
    provider: row.provider,
  };
  if (view !== "full") return base;
  const privileges: readonly string[] =
    row.role_id !== null
      ? (customPrivileges.get(row.role_id) ?? [])
      : BUILT_IN_PRIVILEGES[isBuiltInRole(row.role) ? row.role : "org_user"];
  return {
    ...base,
    email: row.email,
    role: row.role,
    ...(row.role_id !== null ? { roleId: row.role_id } : {}),
    privileges: [...privileges],
    userLicenseTypeId: row.user_type,
    userType: "arcgisonly",
    level: "2",
    disabled: row.disabled === 1,
    lastLogin: row.last_login,
    mfaEnabled: false,
  };
}
