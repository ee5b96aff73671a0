import { CompiledQuery, type Selectable, type Updateable } from "kysely";
import { type Change, noteChange } from "../db/change-feed.js";
import type { Engine, Queryable } from "../db/database.js";
import { fixedStatement } from "../db/fixed-statement.js";
import { prepared } from "../db/pg-driver.js";
import type { UserTable } from "../db/schema.js";
import { type Actor, NO_WEBHOOK_ACTIVE_TEXT, triggerUri } from "../events/outbox.js";

export type UserRow = Selectable<UserTable>;

export function findUser(q: Queryable, username: string): Promise<UserRow | undefined> {
  return q
    .selectFrom("users")
    .selectAll()
    .where("username_key", "=", username.toLowerCase())
    .executeTakeFirst();
}

/** `username_key` is the lower-case username (usernames are unique regardless of case): derived here only. */
export type NewUserRow = Omit<UserRow, "username_key">;
export type UserChanges = Omit<Updateable<UserTable>, "username_key">;

/** Writes a new user; answers the row as stored. */
export async function insertUser(q: Queryable, row: NewUserRow): Promise<UserRow> {
  const stored = { ...row, username_key: row.username.toLowerCase() };
  await q.insertInto("users").values(stored).execute();
  return stored;
}

export async function updateUser(q: Queryable, id: string, patch: UserChanges): Promise<void> {
  await q
    .updateTable("users")
    .set({
      ...patch,
      ...(patch.username !== undefined ? { username_key: patch.username.toLowerCase() } : {}),
    })
    .where("id", "=", id)
    .execute();
}

/** Memberships and owned content go with the user (foreign keys cascade). */
export async function deleteUser(q: Queryable, id: string): Promise<void> {
  noteChange(q, `members:${id}`);
  noteChange(q, "content");
  await q.deleteFrom("users").where("id", "=", id).execute();
}

/** Enabled users holding the default administrator role (not a custom role derived from it). */
export async function countFullAdministrators(q: Queryable): Promise<number> {
  const row = await q
    .selectFrom("users")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("role", "=", "org_admin")
    .where("role_id", "is", null)
    .where("disabled", "=", 0)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export const USER_SORT_FIELDS = {
  username: "username_key",
  fullname: "full_name",
  created: "created",
  lastlogin: "last_login",
  role: "role",
} as const;

export async function listUsers(
  q: Queryable,
  page: {
    offset: number;
    limit: number;
    sortField: keyof typeof USER_SORT_FIELDS;
    sortOrder: "asc" | "desc";
  },
): Promise<{ total: number; rows: UserRow[] }> {
  const totalRow = await q
    .selectFrom("users")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .executeTakeFirstOrThrow();
  const rows = await q
    .selectFrom("users")
    .selectAll()
    .orderBy(USER_SORT_FIELDS[page.sortField], page.sortOrder)
    .orderBy("id", page.sortOrder)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { total: Number(totalRow.n), rows };
}

/** A user with the privileges of its custom role (`role_privileges`, null for a built-in role). */
export type AccountRow = UserRow & { role_privileges: string | null };

function selectAccount(q: Queryable, username: string) {
  return q
    .selectFrom("users")
    .leftJoin("roles", "roles.id", "users.role_id")
    .selectAll("users")
    .select("roles.privileges as role_privileges")
    .where("users.username_key", "=", username.toLowerCase());
}

/** A user and the privileges it holds, for deciding whether a caller may manage the account. */
export function findAccount(q: Queryable, username: string): Promise<AccountRow | undefined> {
  return selectAccount(q, username).executeTakeFirst();
}

/**
 * Reads a user with its privileges and, on PostgreSQL, locks the user's row until the transaction
 * ends, so that decisions taken from it (is this the last administrator? may the caller manage
 * it?) hold when the change is written. Changing a custom role's privileges rewrites its holders'
 * rows (`setBaseRoleForRoleHolders`), so it waits for this lock too. SQLite transactions are
 * already serialised.
 */
export function findUserForUpdate(
  q: Queryable,
  engine: Engine,
  username: string,
): Promise<AccountRow | undefined> {
  const query = selectAccount(q, username);
  return (engine === "postgres" ? query.forUpdate("users") : query).executeTakeFirst();
}

/**
 * What deciding on a change of role or of the disabled flag needs of an account: fewer columns
 * than `AccountRow` (none of the JSON ones), in a statement compiled once (see `fixedStatement`).
 */
export type LockedAccount = Pick<UserRow, "id" | "username" | "role" | "role_id" | "disabled"> & {
  role_privileges: string | null;
};

function selectLockedAccount(q: Queryable, usernameKey: string) {
  return q
    .selectFrom("users")
    .leftJoin("roles", "roles.id", "users.role_id")
    .select(["users.id", "users.username", "users.role", "users.role_id", "users.disabled"])
    .select("roles.privileges as role_privileges")
    .where("users.username_key", "=", usernameKey);
}

const lockedAccountPostgres = fixedStatement((q, usernameKey: string) =>
  selectLockedAccount(q, usernameKey).forUpdate("users"),
);
const lockedAccountSqlite = fixedStatement(selectLockedAccount);

/** `findUserForUpdate` reading only the columns of `LockedAccount`; the same lock. */
export async function lockAccount(
  q: Queryable,
  engine: Engine,
  username: string,
): Promise<LockedAccount | undefined> {
  const statement = engine === "postgres" ? lockedAccountPostgres : lockedAccountSqlite;
  const { rows } = await q.executeQuery<LockedAccount>(statement(q, username.toLowerCase()));
  return rows[0];
}

/** `updateUser` of the role columns, as a query not yet run (for `later`), compiled once. */
export const updateRoleQuery = fixedStatement(
  (q, id: string, role: string, roleId: string | null, modified: number) =>
    q.updateTable("users").set({ role, role_id: roleId, modified }).where("id", "=", id),
);

/** What a change of a user's role makes stale: its holder's authentication, and the outbox got an event. */
export function roleChangeChanges(userId: string): Change[] {
  return [`auth:${userId}`, "events"];
}

/** The text around a value in `text`, made by `make` (for texts that SQL completes with a column). */
function around(make: (value: string) => string): [string, string] {
  const mark = "\u0000";
  const [head = "", tail = ""] = make(mark).split(mark);
  return [head, tail];
}

const ROLE_EVENT = { source: "user", operation: "updateUserRole" } as const;
const [uriHead, uriTail] = around((username) => triggerUri({ ...ROLE_EVENT, objectId: username }));
const [changesHead, changesTail] = around((id) => roleChangeChanges(id).join(","));

/**
 * PostgreSQL: `updateUserRole` to a built-in role as one statement that is a transaction by itself
 * (`Db.changeInOneStatement`), for the accounts nothing needs deciding about beyond its WHERE:
 * neither an enabled default administrator (changing one must leave another, which the
 * transaction of `UserService.updateRole` checks) nor one already of that role (no change, no
 * event). The UPDATE locks the row and PostgreSQL checks the WHERE again on the row as it is once
 * locked (READ COMMITTED), so that what it decided holds when the change commits, as `lockAccount`'s
 * lock makes it hold. In the same statement, only for a row it changed: the event, as
 * `recordEvent` writes it (`dispatched` decided the same way), and the change log's row of
 * `roleChangeChanges` (`ChangeFeed.record`'s). Its rows: the changed user's id, none when the
 * WHERE excluded the account or there is none.
 */
export function changeToBuiltInRoleQuery(
  node: string,
  usernameKey: string,
  role: string,
  modified: number,
  eventId: string,
  actor: Actor | null,
  properties: string,
): CompiledQuery {
  return prepared(
    CompiledQuery.raw(
      `WITH changed AS (
  UPDATE users SET role = $1, role_id = NULL, modified = $2
  WHERE username_key = $3 AND (role_id IS NOT NULL OR (role <> $1 AND (role <> 'org_admin' OR disabled <> 0)))
  RETURNING id, username
), event AS (
  INSERT INTO events (id, occurred, source, operation, object_id, actor_id, actor_username, properties, uri, dispatched)
  SELECT $4, $2, $5, $6, username, $7, $8, $9, $10 || username || $11, ${NO_WEBHOOK_ACTIVE_TEXT} FROM changed
), logged AS (
  INSERT INTO change_log (node, changes) SELECT $12, $13 || id || $14 FROM changed
)
SELECT id FROM changed`,
      [
        role,
        modified,
        usernameKey,
        eventId,
        ROLE_EVENT.source,
        ROLE_EVENT.operation,
        actor?.id ?? "",
        actor?.username ?? "",
        properties,
        uriHead,
        uriTail,
        node,
        changesHead,
        changesTail,
      ],
    ),
  );
}

/** An enabled user with the default administrator role: the kind the organization must keep one of. */
export function isEnabledFullAdministrator(row: Pick<UserRow, "role" | "role_id" | "disabled">): boolean {
  return row.role === "org_admin" && row.role_id === null && row.disabled === 0;
}

/** Whether a user owns anything that would be orphaned by deleting the account. */
export async function ownsContent(q: Queryable, userId: string): Promise<{ items: number; groups: number }> {
  const items = await q
    .selectFrom("items")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("owner_id", "=", userId)
    .executeTakeFirstOrThrow();
  const groups = await q
    .selectFrom("groups")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("owner_id", "=", userId)
    .executeTakeFirstOrThrow();
  return { items: Number(items.n), groups: Number(groups.n) };
}
