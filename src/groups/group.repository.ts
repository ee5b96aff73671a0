import { type Insertable, type Selectable, sql, type Updateable } from "kysely";
import type { ItemRow } from "../content/item.repository.js";
import { noteChange } from "../db/change-feed.js";
import type { Queryable } from "../db/database.js";
import type {
  GroupApplicationTable,
  GroupInvitationTable,
  GroupMemberTable,
  GroupTable,
} from "../db/schema.js";

export type GroupRow = Selectable<GroupTable>;
export type MemberRow = Selectable<GroupMemberTable>;
export type InvitationRow = Selectable<GroupInvitationTable>;
export type ApplicationRow = Selectable<GroupApplicationTable>;
export type MemberType = "owner" | "admin" | "member";

export function findGroup(q: Queryable, id: string): Promise<GroupRow | undefined> {
  return q.selectFrom("groups").selectAll().where("id", "=", id).executeTakeFirst();
}

/** `title_key` is the lower-case title that lookups and sorting use: derived here only. */
/** Several groups by id, in one query; missing ones are left out. */
export function findGroups(q: Queryable, ids: readonly string[]): Promise<GroupRow[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return q
    .selectFrom("groups")
    .selectAll()
    .where("id", "in", [...ids])
    .execute();
}

/** The user's membership of each of some groups it belongs to, in one query. */
export async function memberTypesOf(
  q: Queryable,
  userId: string,
  groupIds: readonly string[],
): Promise<Map<string, MemberType>> {
  if (groupIds.length === 0) return new Map();
  const rows = await q
    .selectFrom("group_members")
    .select(["group_id", "member_type"])
    .where("user_id", "=", userId)
    .where("group_id", "in", [...groupIds])
    .execute();
  return new Map(rows.map((m) => [m.group_id, m.member_type as MemberType]));
}

export type NewGroup = Omit<Insertable<GroupTable>, "title_key">;
export type GroupChanges = Omit<Updateable<GroupTable>, "title_key">;

export async function insertGroup(q: Queryable, row: NewGroup): Promise<void> {
  await q
    .insertInto("groups")
    .values({ ...row, title_key: row.title.toLowerCase() })
    .execute();
}

export async function updateGroup(q: Queryable, id: string, patch: GroupChanges): Promise<void> {
  // Every member's own resource lists the group with its fields (`groups` of `community/self`).
  noteChange(q, "members");
  await q
    .updateTable("groups")
    .set({ ...patch, ...(patch.title !== undefined ? { title_key: patch.title.toLowerCase() } : {}) })
    .where("id", "=", id)
    .execute();
}

/**
 * Deletes a group; memberships, invitations and shares go with it (foreign keys cascade). Items
 * that were `shared` only with this group are left shared with nobody, so they become `private`.
 */
export async function deleteGroup(q: Queryable, id: string): Promise<void> {
  // Its members' groups and the sharing (and access) of its items change, all at once.
  noteChange(q, "members");
  noteChange(q, "content");
  const shared = await q.selectFrom("item_shares").select("item_id").where("group_id", "=", id).execute();
  await q.deleteFrom("groups").where("id", "=", id).execute();
  const itemIds = shared.map((r) => r.item_id);
  if (itemIds.length === 0) return;
  await q
    .updateTable("items")
    .set({ access: "private" })
    .where("id", "in", itemIds)
    .where("access", "=", "shared")
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(selectFrom("item_shares").select("item_id").whereRef("item_shares.item_id", "=", "items.id")),
      ),
    )
    .execute();
}

export function findMember(q: Queryable, groupId: string, userId: string): Promise<MemberRow | undefined> {
  return q
    .selectFrom("group_members")
    .selectAll()
    .where("group_id", "=", groupId)
    .where("user_id", "=", userId)
    .executeTakeFirst();
}

/** A group's members; at most `limit` of them when given (for callers that refuse past a size). */
export function listMembers(q: Queryable, groupId: string, limit?: number): Promise<MemberRow[]> {
  const query = q.selectFrom("group_members").selectAll().where("group_id", "=", groupId);
  return (limit === undefined ? query : query.orderBy("user_id").limit(limit)).execute();
}

/** The memberships in a group of the users named (usernames, any case); non-members are left out. */
export function membersNamed(
  q: Queryable,
  groupId: string,
  usernames: readonly string[],
): Promise<MemberRow[]> {
  if (usernames.length === 0) return Promise.resolve([]);
  return q
    .selectFrom("group_members")
    .selectAll()
    .where("group_id", "=", groupId)
    .where(
      "user_id",
      "in",
      q
        .selectFrom("users")
        .select("id")
        .where(
          "username_key",
          "in",
          usernames.map((u) => u.toLowerCase()),
        ),
    )
    .execute();
}

/** Adds a membership; false when the user already was a member (a concurrent add is not an error). */
export async function insertMember(q: Queryable, row: MemberRow): Promise<boolean> {
  noteChange(q, `members:${row.user_id}`);
  const result = await q
    .insertInto("group_members")
    .values(row)
    .onConflict((oc) => oc.columns(["group_id", "user_id"]).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

export async function deleteMember(q: Queryable, groupId: string, userId: string): Promise<void> {
  noteChange(q, `members:${userId}`);
  await q.deleteFrom("group_members").where("group_id", "=", groupId).where("user_id", "=", userId).execute();
}

export async function setMemberType(
  q: Queryable,
  groupId: string,
  userId: string,
  memberType: MemberType,
): Promise<void> {
  noteChange(q, `members:${userId}`);
  await q
    .updateTable("group_members")
    .set({ member_type: memberType })
    .where("group_id", "=", groupId)
    .where("user_id", "=", userId)
    .execute();
}

/** Users by username, case-insensitively. */
export function findUsersByName(
  q: Queryable,
  usernames: readonly string[],
): Promise<{ id: string; username: string; username_key: string }[]> {
  if (usernames.length === 0) return Promise.resolve([]);
  return q
    .selectFrom("users")
    .select(["id", "username", "username_key"])
    .where(
      "username_key",
      "in",
      usernames.map((u) => u.toLowerCase()),
    )
    .execute();
}

/** Records an invitation; false when the user already has one to this group. */
export async function insertInvitation(q: Queryable, row: InvitationRow): Promise<boolean> {
  const result = await q
    .insertInto("group_invitations")
    .values(row)
    .onConflict((oc) => oc.columns(["group_id", "user_id"]).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

export function findInvitation(q: Queryable, id: string): Promise<InvitationRow | undefined> {
  return q.selectFrom("group_invitations").selectAll().where("id", "=", id).executeTakeFirst();
}

export async function deleteInvitation(q: Queryable, groupId: string, userId: string): Promise<void> {
  await q
    .deleteFrom("group_invitations")
    .where("group_id", "=", groupId)
    .where("user_id", "=", userId)
    .execute();
}

/**
 * A user's pending invitations made after `since` (older ones have expired) with the group they
 * lead to, oldest first; only invitation `id` when given.
 */
export function listInvitationsOfUser(q: Queryable, userId: string, since: number, id?: string) {
  let query = q
    .selectFrom("group_invitations as inv")
    .innerJoin("groups as g", "g.id", "inv.group_id")
    .select([
      "inv.id",
      "inv.group_id",
      "inv.username",
      "inv.invited_by",
      "inv.created",
      "g.title",
      "g.owner",
      "g.access",
    ])
    .where("inv.user_id", "=", userId)
    .where("inv.created", ">", since);
  if (id !== undefined) query = query.where("inv.id", "=", id);
  return query.orderBy("inv.created").orderBy("inv.id").execute();
}

/** Drops a user's invitation to a group when it was made at or before `before` (it has expired). */
export async function deleteExpiredInvitation(
  q: Queryable,
  groupId: string,
  userId: string,
  before: number,
): Promise<void> {
  await q
    .deleteFrom("group_invitations")
    .where("group_id", "=", groupId)
    .where("user_id", "=", userId)
    .where("created", "<=", before)
    .execute();
}

/** Which of a group's items a caller may list (the rules of `canViewItem`, as SQL). */
export type ItemVisibility =
  /** Members of the group and item administrators: every item shared with it. */
  { kind: "all" } | { kind: "signedIn"; userId: string; groupIds: readonly string[] } | { kind: "anonymous" };

/** The column each group `sortField` orders its content by; items keep no ratings or view counts. */
const CONTENT_ORDER = {
  title: "i.title_key",
  owner: "i.owner_key",
  created: "i.created",
  modified: "i.modified",
  avgrating: "i.modified",
  numviews: "i.modified",
} as const;

export type GroupSortField = keyof typeof CONTENT_ORDER;

export async function listGroupItems(
  q: Queryable,
  groupId: string,
  visibility: ItemVisibility,
  order: { sortField: GroupSortField; sortOrder: "asc" | "desc" },
  page: { offset: number; limit: number },
): Promise<{ total: number; rows: ItemRow[] }> {
  let base = q
    .selectFrom("item_shares as s")
    .innerJoin("items as i", "i.id", "s.item_id")
    .where("s.group_id", "=", groupId);
  if (visibility.kind === "anonymous") {
    base = base.where("i.access", "=", "public");
  } else if (visibility.kind === "signedIn") {
    const { userId, groupIds } = visibility;
    base = base.where((eb) =>
      eb.or([
        eb("i.access", "in", ["org", "public"]),
        eb("i.owner_id", "=", userId),
        ...(groupIds.length > 0
          ? [
              eb.exists(
                eb
                  .selectFrom("item_shares as o")
                  .select("o.item_id")
                  .whereRef("o.item_id", "=", "i.id")
                  .where("o.group_id", "in", [...groupIds]),
              ),
            ]
          : []),
      ]),
    );
  }
  const total = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow();
  const rows = await base
    .selectAll("i")
    .orderBy(CONTENT_ORDER[order.sortField], order.sortOrder)
    .orderBy("i.id", order.sortOrder)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { total: Number(total.n), rows };
}

/**
 * The groups a user belongs to, with the user's member type, by title. At most `limit` of them:
 * ArcGIS lets a user join 512 groups.
 */
export function listGroupsOfUser(q: Queryable, userId: string, limit: number) {
  return q
    .selectFrom("group_members as m")
    .innerJoin("groups as g", "g.id", "m.group_id")
    .selectAll("g")
    .select("m.member_type")
    .where("m.user_id", "=", userId)
    .orderBy("g.title_key")
    .orderBy("g.id")
    .limit(limit)
    .execute();
}

/** Records a request to join; false when the user already asked to join this group. */
export async function insertApplication(q: Queryable, row: ApplicationRow): Promise<boolean> {
  const result = await q
    .insertInto("group_applications")
    .values(row)
    .onConflict((oc) => oc.columns(["group_id", "user_id"]).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

export function findApplication(
  q: Queryable,
  groupId: string,
  userId: string,
): Promise<ApplicationRow | undefined> {
  return q
    .selectFrom("group_applications")
    .selectAll()
    .where("group_id", "=", groupId)
    .where("user_id", "=", userId)
    .executeTakeFirst();
}

export async function deleteApplication(q: Queryable, groupId: string, userId: string): Promise<void> {
  await q
    .deleteFrom("group_applications")
    .where("group_id", "=", groupId)
    .where("user_id", "=", userId)
    .execute();
}

/** A group's requests to join with the applicants' full names, oldest first; at most `limit`. */
export function listApplications(q: Queryable, groupId: string, limit: number) {
  return q
    .selectFrom("group_applications as a")
    .innerJoin("users as u", "u.id", "a.user_id")
    .select(["a.username", "a.received", "u.full_name"])
    .where("a.group_id", "=", groupId)
    .orderBy("a.received")
    .orderBy("u.username_key")
    .limit(limit)
    .execute();
}

/** The orders of `userList`: by username, member type or the date the member joined. */
const MEMBER_ORDER = {
  username: "u.username_key",
  membertype: "m.member_type",
  joined: "m.joined",
} as const;

export type MemberSortField = keyof typeof MEMBER_ORDER;

export interface MemberFilter {
  /** Part of the username or the full, first or last name, case-insensitively. */
  name?: string | undefined;
  /** `admin` matches the owner too (the owner is a group manager). */
  memberType?: "admin" | "member" | undefined;
  /** Joined at or after / at or before, epoch ms. */
  joinedFrom?: number | undefined;
  joinedTo?: number | undefined;
}

/** One page of a group's members with their names, filtered and ordered in SQL. */
export async function searchMembers(
  q: Queryable,
  groupId: string,
  filter: MemberFilter,
  order: { sortField: MemberSortField; sortOrder: "asc" | "desc" },
  page: { offset: number; limit: number },
) {
  let base = q
    .selectFrom("group_members as m")
    .innerJoin("users as u", "u.id", "m.user_id")
    .where("m.group_id", "=", groupId);
  if (filter.name !== undefined) {
    // `%` and `_` typed by the caller are literal; both sides lower-cased, as PostgreSQL's LIKE
    // is case-sensitive where SQLite's is not.
    const pattern = `%${filter.name.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    const like = (column: "u.username_key" | "u.full_name" | "u.first_name" | "u.last_name") =>
      sql<boolean>`lower(${sql.ref(column)}) like ${pattern} escape '\\'`;
    base = base.where((eb) =>
      eb.or([like("u.username_key"), like("u.full_name"), like("u.first_name"), like("u.last_name")]),
    );
  }
  if (filter.memberType === "admin") base = base.where("m.member_type", "in", ["owner", "admin"]);
  if (filter.memberType === "member") base = base.where("m.member_type", "=", "member");
  if (filter.joinedFrom !== undefined) base = base.where("m.joined", ">=", filter.joinedFrom);
  if (filter.joinedTo !== undefined) base = base.where("m.joined", "<=", filter.joinedTo);
  const total = await base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow();
  const rows = await base
    .select(["u.username", "u.full_name", "m.member_type", "m.joined"])
    .orderBy(MEMBER_ORDER[order.sortField], order.sortOrder)
    .orderBy("u.username_key", order.sortOrder)
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return { total: Number(total.n), rows };
}
