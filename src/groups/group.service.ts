import type { Transaction } from "kysely";
import { actorOf, type Caller, isCaller, requirePrivilege, unseen } from "../auth/caller.js";
import type { Privilege } from "../auth/privileges.js";
import { canViewGroup } from "../content/access.js";
import type { ItemService } from "../content/item.service.js";
import { type Db, isUniqueViolation, type Queryable } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors } from "../errors.js";
import { type ChangeEvent, recordEvent } from "../events/outbox.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import { findUser } from "../users/user.repository.js";
import { type Page, pageInfo } from "../validation/paging.js";
import {
  deleteApplication,
  deleteExpiredInvitation,
  deleteGroup,
  deleteInvitation,
  deleteMember,
  findApplication,
  findGroup,
  findGroups,
  findInvitation,
  findMember,
  findUsersByName,
  type GroupRow,
  type GroupSortField,
  type InvitationRow,
  type ItemVisibility,
  insertApplication,
  insertGroup,
  insertInvitation,
  insertMember,
  listApplications,
  listGroupItems,
  listGroupsOfUser,
  listInvitationsOfUser,
  listMembers,
  type MemberFilter,
  type MemberSortField,
  type MemberType,
  memberTypesOf,
  type NewGroup,
  searchMembers,
  setMemberType,
  updateGroup,
} from "./group.repository.js";

type Trx = Transaction<Database>;

export type GroupAccess = "private" | "org" | "public";

export interface GroupFields {
  title?: string | undefined;
  access?: GroupAccess | undefined;
  description?: string | undefined;
  snippet?: string | undefined;
  tags?: string[] | undefined;
  isInvitationOnly?: boolean | undefined;
  isViewOnly?: boolean | undefined;
  autoJoin?: boolean | undefined;
  sortField?: GroupSortField | undefined;
  sortOrder?: "asc" | "desc" | undefined;
}

/** What a caller may do to a group beyond reading it. */
interface Authority {
  /** The org-wide privilege that stands in for ownership. */
  adminPrivilege: Privilege;
  /** Whether group administrators (member type `admin`) may do it too. */
  groupAdmins: boolean;
  /** Said in the 403 answer. */
  action: string;
}

/**
 * Groups and their membership (`wire.md` §6, `interface.md` §6). Every change records its webhook
 * event in the same transaction. Membership is read from the database on each request, so no
 * cache needs telling when it changes.
 */
export class GroupService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly items: ItemService,
  ) {}

  /** Creates a group owned by the caller; answers the group resource. */
  async create(caller: Caller | null, fields: GroupFields & { title: string }) {
    requirePrivilege(caller, "portal:user:createGroup");
    const access = fields.access ?? "private";
    await this.checkAccess(caller, access);
    const now = Date.now();
    const row: NewGroup = {
      id: newId(),
      owner_id: caller.userId,
      owner: caller.username,
      title: fields.title,
      description: fields.description ?? "",
      snippet: fields.snippet ?? "",
      tags: JSON.stringify(fields.tags ?? []),
      access,
      is_invitation_only: fields.isInvitationOnly ? 1 : 0,
      is_view_only: fields.isViewOnly ? 1 : 0,
      auto_join: fields.autoJoin ? 1 : 0,
      protected: 0,
      sort_field: fields.sortField ?? "title",
      sort_order: fields.sortOrder ?? "asc",
      created: now,
      modified: now,
    };
    await this.withUniqueTitle(fields.title, () =>
      this.db.transaction(async (trx) => {
        await insertGroup(trx, row);
        await insertMember(trx, {
          group_id: row.id,
          user_id: caller.userId,
          username: caller.username,
          member_type: "owner",
          joined: now,
        });
        await this.event(trx, caller, row.id, "add", undefined, now);
      }),
    );
    const org = await this.portal.get();
    return groupJson({ ...row, auto_join: row.auto_join ?? 0 }, org.id, {
      username: caller.username,
      memberType: "owner",
    });
  }

  async get(caller: Caller | null, id: string) {
    const { row, membership } = await this.visible(this.db.kysely, caller, id);
    const org = await this.portal.get();
    return groupJson(row, org.id, caller ? { username: caller.username, memberType: membership } : null);
  }

  async update(
    caller: Caller | null,
    id: string,
    fields: GroupFields,
    cleared: readonly string[],
  ): Promise<void> {
    const now = Date.now();
    await this.withUniqueTitle(fields.title ?? "", () =>
      this.db.transaction(async (trx) => {
        const { row, caller: who } = await this.authorize(trx, caller, id, {
          adminPrivilege: "portal:admin:updateGroups",
          groupAdmins: true,
          action: "update",
        });
        if (fields.access !== undefined && fields.access !== row.access) {
          await this.checkAccess(who, fields.access);
        }
        const clears = (name: string) => cleared.includes(name);
        await updateGroup(trx, id, {
          ...(fields.title !== undefined ? { title: fields.title } : {}),
          ...(fields.access !== undefined ? { access: fields.access } : {}),
          ...(fields.description !== undefined || clears("description")
            ? { description: fields.description ?? "" }
            : {}),
          ...(fields.snippet !== undefined || clears("snippet") ? { snippet: fields.snippet ?? "" } : {}),
          ...(fields.tags !== undefined || clears("tags") ? { tags: JSON.stringify(fields.tags ?? []) } : {}),
          ...(fields.isInvitationOnly !== undefined
            ? { is_invitation_only: fields.isInvitationOnly ? 1 : 0 }
            : {}),
          ...(fields.isViewOnly !== undefined ? { is_view_only: fields.isViewOnly ? 1 : 0 } : {}),
          ...(fields.autoJoin !== undefined ? { auto_join: fields.autoJoin ? 1 : 0 } : {}),
          ...(fields.sortField !== undefined ? { sort_field: fields.sortField } : {}),
          ...(fields.sortOrder !== undefined ? { sort_order: fields.sortOrder } : {}),
          // Strictly later than before, so clients that compare `modified` see every update.
          modified: Math.max(now, row.modified + 1),
        });
        await this.event(trx, who, id, "update", undefined, now);
      }),
    );
  }

  async delete(caller: Caller | null, id: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      const { row, caller: who } = await this.authorize(trx, caller, id, {
        adminPrivilege: "portal:admin:deleteGroups",
        groupAdmins: false,
        action: "delete",
      });
      if (row.protected) {
        throw errors.conflict(`Group '${id}' is protected from deletion.`, "Unprotect it first.");
      }
      await deleteGroup(trx, id);
      await this.event(trx, who, id, "delete");
    });
  }

  async setProtected(caller: Caller | null, id: string, value: boolean): Promise<void> {
    await this.db.transaction(async (trx) => {
      const { caller: who } = await this.authorize(trx, caller, id, {
        adminPrivilege: "portal:admin:updateGroups",
        groupAdmins: false,
        action: value ? "protect" : "unprotect",
      });
      await updateGroup(trx, id, { protected: value ? 1 : 0 });
      await this.event(trx, who, id, value ? "protect" : "unprotect");
    });
  }

  /**
   * Invites users to join. `group_invitations` has no column for the role an invitation grants,
   * so every invitation makes a plain member; group administrators are appointed with updateUsers.
   * Answers the names not invited (unknown users, members, users already invited).
   */
  async invite(caller: Caller | null, id: string, usernames: readonly string[]) {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const { caller: who } = await this.authorize(trx, caller, id, membershipAuthority("invite users to"));
      const users = await this.resolveUsers(trx, usernames);
      const notInvited: string[] = [];
      const invited: string[] = [];
      for (const name of unique(usernames)) {
        const user = users.get(name.toLowerCase());
        // An expired invitation no longer counts: a new one takes its place.
        if (user) await deleteExpiredInvitation(trx, id, user.id, now - INVITATION_LIFETIME_MS);
        const fresh =
          user !== undefined &&
          (await findMember(trx, id, user.id)) === undefined &&
          (await insertInvitation(trx, {
            id: newId(),
            group_id: id,
            user_id: user.id,
            username: user.username,
            invited_by: who.username,
            created: now,
          }));
        if (fresh && user) invited.push(user.username);
        else notInvited.push(name);
      }
      if (invited.length > 0) {
        await this.event(trx, who, id, "invite", { invitedUserNames: invited }, now);
      }
      return { notInvited };
    });
  }

  /** Adds users directly; unknown users and members already in the group come back in `notAdded`. */
  async addUsers(
    caller: Caller | null,
    id: string,
    input: { users: readonly string[]; admins: readonly string[] },
  ) {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const {
        row,
        membership,
        caller: who,
      } = await this.authorize(trx, caller, id, membershipAuthority("add users to"));
      if (input.admins.length > 0 && !allows(MEMBER_TYPES, row, membership, who)) {
        throw errors.forbidden(
          `Only the owner or an administrator may add group managers (admins) to group '${id}'; group managers may add members (users).`,
        );
      }
      const adminKeys = new Set(input.admins.map((u) => u.toLowerCase()));
      const requested = unique([...input.admins, ...input.users]);
      const users = await this.resolveUsers(trx, requested);
      const notAdded: string[] = [];
      const added: string[] = [];
      for (const name of requested) {
        const user = users.get(name.toLowerCase());
        const inserted =
          user !== undefined &&
          (await insertMember(trx, {
            group_id: id,
            user_id: user.id,
            username: user.username,
            member_type: adminKeys.has(name.toLowerCase()) ? "admin" : "member",
            joined: now,
          }));
        if (inserted && user) {
          added.push(user.username);
          await deleteInvitation(trx, id, user.id);
          await deleteApplication(trx, id, user.id);
        } else {
          notAdded.push(name);
        }
      }
      if (added.length > 0) await this.event(trx, who, id, "addUsers", { addedUserNames: added }, now);
      return { notAdded };
    });
  }

  /** Removes members; the owner, unknown users and non-members come back in `notRemoved`. */
  async removeUsers(caller: Caller | null, id: string, usernames: readonly string[]) {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const { caller: who } = await this.authorize(trx, caller, id, membershipAuthority("remove users from"));
      const users = await this.resolveUsers(trx, usernames);
      const notRemoved: string[] = [];
      const removed: string[] = [];
      for (const name of unique(usernames)) {
        const user = users.get(name.toLowerCase());
        const member = user ? await findMember(trx, id, user.id) : undefined;
        if (!user || !member || member.member_type === "owner") {
          notRemoved.push(name);
          continue;
        }
        await deleteMember(trx, id, user.id);
        removed.push(user.username);
      }
      if (removed.length > 0) {
        await this.event(trx, who, id, "removeUsers", { removedUserNames: removed }, now);
      }
      return { notRemoved };
    });
  }

  /**
   * Changes member types: `admins` become group administrators, `users` plain members. Reserved to
   * the owner and organization administrators, as in ArcGIS; the owner's own type never changes.
   */
  async updateUsers(
    caller: Caller | null,
    id: string,
    input: { users: readonly string[]; admins: readonly string[] },
  ) {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const { caller: who } = await this.authorize(trx, caller, id, MEMBER_TYPES);
      const wanted = new Map<string, MemberType>();
      for (const name of input.users) wanted.set(name, "member");
      for (const name of input.admins) wanted.set(name, "admin");
      const users = await this.resolveUsers(trx, [...wanted.keys()]);
      const results: { username: string; success: boolean }[] = [];
      const updated: string[] = [];
      for (const [name, memberType] of wanted) {
        const user = users.get(name.toLowerCase());
        const member = user ? await findMember(trx, id, user.id) : undefined;
        if (!user || !member || member.member_type === "owner") {
          results.push({ username: name, success: false });
          continue;
        }
        if (member.member_type !== memberType) {
          await setMemberType(trx, id, user.id, memberType);
          updated.push(user.username);
        }
        results.push({ username: user.username, success: true });
      }
      if (updated.length > 0) {
        await this.event(trx, who, id, "updateUsers", { updatedUserNames: updated }, now);
      }
      return { results };
    });
  }

  /** `{owner, admins, users}`; `admins` includes the owner, as in ArcGIS. Members and administrators only. */
  async members(caller: Caller | null, id: string) {
    const { row, membership } = await this.visible(this.db.kysely, caller, id);
    if (membership === "none" && !caller?.privileges.has("portal:admin:viewGroups")) {
      throw errors.forbidden("Only members of the group may list its members.");
    }
    // Sorted here rather than by the database, whose collation differs between engines.
    const rows = (await listMembers(this.db.kysely, id)).sort((a, b) =>
      a.username < b.username ? -1 : a.username > b.username ? 1 : 0,
    );
    const admins = rows.filter((m) => m.member_type !== "member").map((m) => m.username);
    const users = rows.filter((m) => m.member_type === "member").map((m) => m.username);
    return { owner: row.owner, admins, users };
  }

  /**
   * The group, when the caller may see it, with the caller's membership: for the services built on
   * groups (notifications, category schemas, the search of a group's content).
   */
  async seen(caller: Caller | null, id: string) {
    return this.visible(this.db.kysely, caller, id);
  }

  /** The group, when the caller manages it: its owner, a group manager or `portal:admin:updateGroups`. */
  async managed(trx: Trx, caller: Caller | null, id: string, action: string) {
    return this.authorize(trx, caller, id, {
      adminPrivilege: "portal:admin:updateGroups",
      groupAdmins: true,
      action,
    });
  }

  /**
   * `content/items/<id>/groups`: the groups a visible item is shared with that the caller may see,
   * as ArcGIS sorts them: those the caller owns or administers (`admin`), those it is a member of
   * (`member`), and the others (`other`), each by title.
   */
  async ofItem(caller: Caller | null, itemId: string) {
    const { shared } = await this.items.visible(caller, itemId);
    const viewer = await this.items.viewer(caller);
    const org = await this.portal.get();
    const rows = await findGroups(this.db.kysely, shared);
    const memberships = caller ? await memberTypesOf(this.db.kysely, caller.userId, shared) : new Map();
    const out = { admin: [], member: [], other: [] } as Record<"admin" | "member" | "other", unknown[]>;
    for (const row of rows.sort((a, b) =>
      a.title_key < b.title_key ? -1 : a.title_key > b.title_key ? 1 : 0,
    )) {
      if (!canViewGroup(viewer, row)) continue;
      const memberType = memberships.get(row.id) ?? "none";
      const list =
        memberType === "owner" || memberType === "admin"
          ? "admin"
          : memberType === "member"
            ? "member"
            : "other";
      out[list].push(groupJson(row, org.id, caller ? { username: caller.username, memberType } : null));
    }
    return out;
  }

  /** The group's items the caller may see, in the group's sort order. */
  async content(caller: Caller | null, id: string, page: Page) {
    const { row, membership } = await this.visible(this.db.kysely, caller, id);
    let visibility: ItemVisibility;
    if (caller === null) visibility = { kind: "anonymous" };
    else if (membership !== "none" || caller.privileges.has("portal:admin:viewItems")) {
      visibility = { kind: "all" };
    } else {
      const groupIds = await this.db.kysely
        .selectFrom("group_members")
        .select("group_id")
        .where("user_id", "=", caller.userId)
        .execute();
      visibility = { kind: "signedIn", userId: caller.userId, groupIds: groupIds.map((g) => g.group_id) };
    }
    const { total, rows } = await listGroupItems(
      this.db.kysely,
      id,
      visibility,
      { sortField: row.sort_field as GroupSortField, sortOrder: row.sort_order === "desc" ? "desc" : "asc" },
      { offset: page.start - 1, limit: page.num },
    );
    const items = await this.items.itemsJson(rows);
    return { ...pageInfo(page, total, rows.length), items };
  }

  /** A user's pending invitations: theirs to read, or an administrator's who can view users. */
  async invitations(caller: Caller | null, username: string) {
    const user = await this.selfOrAdmin(this.db.kysely, caller, username, "portal:admin:viewUsers");
    const now = Date.now();
    const rows = await listInvitationsOfUser(this.db.kysely, user.id, now - INVITATION_LIFETIME_MS);
    return { userInvitations: rows.map((r) => invitationJson(r, user.email)) };
  }

  /** One pending invitation (`invitations/<id>`), to the same readers as the list. */
  async invitation(caller: Caller | null, username: string, invitationId: string) {
    const user = await this.selfOrAdmin(this.db.kysely, caller, username, "portal:admin:viewUsers");
    const now = Date.now();
    const rows = await listInvitationsOfUser(
      this.db.kysely,
      user.id,
      now - INVITATION_LIFETIME_MS,
      invitationId,
    );
    const row = rows[0];
    if (!row) throw errors.notFound(`Invitation '${invitationId}'`);
    return invitationJson(row, user.email);
  }

  /**
   * The invited user joins the group; the event is the one of a user being added. Answers the
   * invitation id and who joined which group.
   */
  async acceptInvitation(caller: Caller | null, username: string, invitationId: string) {
    // Accepting is joining: a role without the privilege joins no group, invited or not.
    requirePrivilege(caller, "portal:user:joinGroup");
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const invitation = await this.ownInvitation(trx, caller, username, invitationId, now);
      const joined = await insertMember(trx, {
        group_id: invitation.group_id,
        user_id: caller.userId,
        username: caller.username,
        member_type: "member",
        joined: now,
      });
      await deleteInvitation(trx, invitation.group_id, caller.userId);
      await deleteApplication(trx, invitation.group_id, caller.userId);
      if (joined) {
        const properties = { addedUserNames: [caller.username] };
        await this.event(trx, caller, invitation.group_id, "addUsers", properties, now);
      }
      return { id: invitation.id, username: caller.username, groupId: invitation.group_id };
    });
  }

  /** The invitation is dropped; answers its id and whose invitation to which group it was. */
  async declineInvitation(caller: Caller | null, username: string, invitationId: string) {
    if (caller === null) throw errors.tokenRequired();
    return this.db.transaction(async (trx) => {
      const invitation = await this.ownInvitation(trx, caller, username, invitationId, Date.now());
      await deleteInvitation(trx, invitation.group_id, caller.userId);
      return { id: invitation.id, username: caller.username, groupId: invitation.group_id };
    });
  }

  private async ownInvitation(
    trx: Trx,
    caller: Caller,
    username: string,
    invitationId: string,
    now: number,
  ): Promise<InvitationRow> {
    if (!isCaller(caller, username)) {
      throw errors.forbidden("Only the invited user may answer an invitation.");
    }
    const invitation = await findInvitation(trx, invitationId);
    // An expired invitation is as good as none: it can no longer be accepted.
    if (
      !invitation ||
      invitation.user_id !== caller.userId ||
      invitation.created + INVITATION_LIFETIME_MS <= now
    ) {
      throw errors.notFound(`Invitation '${invitationId}'`);
    }
    return invitation;
  }

  /**
   * The groups a user belongs to as group resources, each with that user's membership: the
   * `groups` of the user's own resource (`community/self`, `community/users/<u>`).
   */
  async groupsOf(
    userId: string,
    username: string,
    seenBy: Caller | null,
  ): Promise<Record<string, unknown>[]> {
    const org = await this.portal.get();
    const rows = await listGroupsOfUser(this.db.kysely, userId, MAX_GROUPS_LISTED);
    // Another caller (an administrator who views users) sees only the groups they may see
    // anyway: viewing users does not open private groups (that is `portal:admin:viewGroups`).
    const viewer = seenBy && seenBy.userId !== userId ? await this.items.viewer(seenBy) : undefined;
    return rows
      .filter((row) => viewer === undefined || canViewGroup(viewer, row))
      .map(({ member_type, ...row }) =>
        groupJson(row, org.id, { username, memberType: member_type as MemberType }),
      );
  }

  /**
   * `join`: a member of the organization joins a group that lets them in without approval
   * (`autoJoin`, not private); asks to join (a join request the managers accept or decline) any
   * other group they can see; an invitation-only group they cannot ask to join at all.
   */
  async join(caller: Caller | null, id: string): Promise<{ groupId: string; joined: boolean }> {
    requirePrivilege(caller, "portal:user:joinGroup");
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const { row, membership } = await this.visible(trx, caller, id);
      if (membership !== "none") {
        throw errors.conflict(`User '${caller.username}' is already a member of group '${id}'.`);
      }
      if (row.is_invitation_only) {
        throw errors.forbidden(
          `Group '${id}' is by invitation only: its owner or a manager must invite or add you.`,
        );
      }
      if (row.auto_join && row.access !== "private") {
        await insertMember(trx, {
          group_id: id,
          user_id: caller.userId,
          username: caller.username,
          member_type: "member",
          joined: now,
        });
        await deleteApplication(trx, id, caller.userId);
        await deleteInvitation(trx, id, caller.userId);
        await this.event(trx, caller, id, "addUsers", { addedUserNames: [caller.username] }, now);
        return { groupId: id, joined: true };
      }
      // Asking twice is one request; only the first is an event.
      const fresh = await insertApplication(trx, {
        group_id: id,
        user_id: caller.userId,
        username: caller.username,
        received: now,
      });
      if (fresh) await this.event(trx, caller, id, "join", undefined, now);
      return { groupId: id, joined: false };
    });
  }

  /** `leave`: any member but the owner leaves; recorded as the member's removal. */
  async leave(caller: Caller | null, id: string): Promise<{ groupId: string }> {
    if (caller === null) throw errors.tokenRequired();
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const { membership } = await this.visible(trx, caller, id);
      if (membership === "none") {
        throw errors.conflict(`User '${caller.username}' is not a member of group '${id}'.`);
      }
      if (membership === "owner") {
        throw errors.conflict(
          `The owner cannot leave group '${id}'.`,
          "Reassign the group to another member or delete it.",
        );
      }
      await deleteMember(trx, id, caller.userId);
      await this.event(trx, caller, id, "removeUsers", { removedUserNames: [caller.username] }, now);
      return { groupId: id };
    });
  }

  /** The pending join requests (`applications`), for the owner, managers and administrators. */
  async applications(caller: Caller | null, id: string) {
    return this.db.transaction(async (trx) => {
      await this.authorize(trx, caller, id, membershipAuthority("list the join requests of"));
      const rows = await listApplications(trx, id, MAX_APPLICATIONS_LISTED);
      return {
        applications: rows.map((r) => ({
          username: r.username,
          fullName: r.full_name,
          received: r.received,
        })),
      };
    });
  }

  /** Accepts a join request: the applicant becomes a member (the event of a user being added). */
  async acceptApplication(caller: Caller | null, id: string, username: string) {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const { caller: who } = await this.authorize(
        trx,
        caller,
        id,
        membershipAuthority("accept join requests to"),
      );
      const applicant = await this.application(trx, id, username);
      await deleteApplication(trx, id, applicant.user_id);
      await deleteInvitation(trx, id, applicant.user_id);
      const joined = await insertMember(trx, {
        group_id: id,
        user_id: applicant.user_id,
        username: applicant.username,
        member_type: "member",
        joined: now,
      });
      if (joined) await this.event(trx, who, id, "addUsers", { addedUserNames: [applicant.username] }, now);
      return { username: applicant.username, groupId: id };
    });
  }

  /** Declines a join request: it is dropped (ArcGIS has no webhook trigger for it). */
  async declineApplication(caller: Caller | null, id: string, username: string) {
    return this.db.transaction(async (trx) => {
      await this.authorize(trx, caller, id, membershipAuthority("decline join requests to"));
      const applicant = await this.application(trx, id, username);
      await deleteApplication(trx, id, applicant.user_id);
      return { username: applicant.username, groupId: id };
    });
  }

  /**
   * `userList`: one page of the members, owner included, with their full names, member types and
   * the dates they joined; to members and administrators, as the members list.
   */
  async userList(
    caller: Caller | null,
    id: string,
    filter: MemberFilter,
    order: { sortField: MemberSortField; sortOrder: "asc" | "desc" },
    page: Page,
  ) {
    const { row, membership } = await this.visible(this.db.kysely, caller, id);
    if (membership === "none" && !caller?.privileges.has("portal:admin:viewGroups")) {
      throw errors.forbidden("Only members of the group may list its members.");
    }
    const org = await this.portal.get();
    const { total, rows } = await searchMembers(this.db.kysely, id, filter, order, {
      offset: page.start - 1,
      limit: page.num,
    });
    const owner = await findUser(this.db.kysely, row.owner);
    const entry = (r: { username: string; full_name: string; member_type: string; joined: number }) => ({
      username: r.username,
      fullName: r.full_name,
      memberType: r.member_type,
      thumbnail: null,
      joined: r.joined,
      orgId: org.id,
    });
    const ownerMember = owner ? await findMember(this.db.kysely, id, owner.id) : undefined;
    return {
      ...pageInfo(page, total, rows.length),
      owner: {
        username: row.owner,
        fullName: owner?.full_name ?? row.owner,
        memberType: "owner",
        thumbnail: null,
        joined: ownerMember?.joined ?? row.created,
        orgId: org.id,
      },
      users: rows.map(entry),
    };
  }

  private async application(q: Queryable, groupId: string, username: string) {
    const user = (await findUsersByName(q, [username]))[0];
    const found = user ? await findApplication(q, groupId, user.id) : undefined;
    if (!found) throw errors.notFound(`A request of '${username}' to join group '${groupId}'`);
    return found;
  }

  /**
   * A group the caller may see, with the caller's membership. A missing group and a hidden one
   * give the same answer (`unseen`: 499 to anonymous callers, 400 to signed-in ones), so ids
   * cannot be probed.
   */
  private async visible(q: Queryable, caller: Caller | null, id: string) {
    const row = await findGroup(q, id);
    const member = row && caller ? await findMember(q, id, caller.userId) : undefined;
    const org = await this.portal.get();
    // `canViewGroup` asks only whether the caller belongs to this group, so that is all we load.
    const viewer = {
      caller,
      groupIds: new Set(member ? [id] : []),
      orgIsPublic: org.settings.access === "public",
    };
    if (!row || !canViewGroup(viewer, row)) throw unseen(caller, () => errors.groupNotFound(id));
    const membership: MemberType | "none" = member ? (member.member_type as MemberType) : "none";
    return { row, membership };
  }

  /** The group, when the caller may see it and act on it (owner, group administrator or privilege). */
  private async authorize(q: Queryable, caller: Caller | null, id: string, authority: Authority) {
    if (caller === null) throw errors.tokenRequired();
    const { row, membership } = await this.visible(q, caller, id);
    if (!allows(authority, row, membership, caller)) {
      const who = authority.groupAdmins ? "the owner, a group manager" : "the owner";
      throw errors.forbidden(`Only ${who} or an administrator may ${authority.action} group '${id}'.`);
    }
    return { row, membership, caller };
  }

  /** Group access beyond private needs a sharing privilege; public also needs the organization's consent. */
  private async checkAccess(caller: Caller, access: GroupAccess) {
    if (access === "org") requirePrivilege(caller, "portal:user:shareGroupToOrg");
    if (access === "public") {
      const org = await this.portal.get();
      if (org.settings.canSharePublic !== true) {
        throw errors.invalidParameter(
          "access",
          "cannot be public: the organization does not allow public sharing (canSharePublic is false)",
        );
      }
      requirePrivilege(caller, "portal:user:shareGroupToPublic");
    }
  }

  private async selfOrAdmin(q: Queryable, caller: Caller | null, username: string, privilege: Privilege) {
    if (caller === null) throw errors.tokenRequired();
    if (!isCaller(caller, username) && !caller.privileges.has(privilege)) {
      throw errors.forbidden();
    }
    const user = await findUser(q, username);
    if (!user) throw errors.userNotFound(username);
    return user;
  }

  private async resolveUsers(trx: Trx, usernames: readonly string[]) {
    const rows = await findUsersByName(trx, unique(usernames));
    return new Map(rows.map((r) => [r.username_key, r]));
  }

  private async withUniqueTitle<T>(title: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (isUniqueViolation(err)) throw errors.groupTitleTaken(title);
      throw err;
    }
  }

  private event(
    trx: Trx,
    caller: Caller,
    id: string,
    operation: string,
    properties?: ChangeEvent["properties"],
    when?: number,
  ) {
    return recordEvent(
      trx,
      {
        source: "group",
        operation,
        objectId: id,
        actor: actorOf(caller),
        ...(properties ? { properties } : {}),
      },
      when,
    );
  }
}

/** ArcGIS's invitations expire after two weeks. */
export const INVITATION_LIFETIME_MS = 14 * 24 * 60 * 60 * 1000;

/** ArcGIS lets a user belong to at most 512 groups; a user's resource lists no more than that. */
const MAX_GROUPS_LISTED = 512;

/** Join requests listed at once; a group with more is better served by a smaller audience. */
const MAX_APPLICATIONS_LISTED = 1000;

/** The ArcGIS invitation resource (`community/users/<u>/invitations[/<id>]`). */
function invitationJson(
  r: Awaited<ReturnType<typeof listInvitationsOfUser>>[number],
  email: string,
): Record<string, unknown> {
  return {
    id: r.id,
    targetType: "group",
    targetId: r.group_id,
    received: r.created,
    accepted: false,
    mustApprove: false,
    email,
    // Invitations store no role (see `invite`): every one makes a plain member.
    role: "group_member",
    type: "user",
    dateAccepted: -1,
    expiration: r.created + INVITATION_LIFETIME_MS,
    created: r.created,
    username: r.username,
    fromUsername: { username: r.invited_by },
    groupId: r.group_id,
    group: { id: r.group_id, title: r.title, owner: r.owner, access: r.access },
  };
}

function membershipAuthority(action: string): Authority {
  return { adminPrivilege: "portal:admin:assignToGroups", groupAdmins: true, action };
}

/**
 * Who decides whether a member is a group manager. The ArcGIS REST reference: addUsers "allows
 * group owners, group managers, and organization administrators to add users", `admins` adding
 * them "as group managers"; removeUsers lets the same three remove "both users and group
 * managers", never the owner; invite is open to the owner, managers and administrators, and its
 * `role` "allows administrators to set the user's role in the group". The help on owning groups
 * names changing a member's role (promoting members to group managers) as the owner's option, and
 * the administrators' help lists "update a member's role in the group"; neither gives it to group
 * managers. So the member type is the owner's and administrators' to choose wherever it is chosen:
 * updateUsers, and `admins` of addUsers (invitations make plain members only). A group manager
 * adds members, or removing a member and adding it back with `admins` would be the promotion
 * updateUsers refuses.
 */
const MEMBER_TYPES: Authority = {
  adminPrivilege: "portal:admin:assignToGroups",
  groupAdmins: false,
  action: "change member types in",
};

function allows(
  authority: Authority,
  row: GroupRow,
  membership: MemberType | "none",
  caller: Caller,
): boolean {
  return (
    row.owner_id === caller.userId ||
    (authority.groupAdmins && membership === "admin") ||
    caller.privileges.has(authority.adminPrivilege)
  );
}

/** Usernames once each, keeping the first spelling (usernames are case-insensitive). */
function unique(usernames: readonly string[]): string[] {
  const seen = new Set<string>();
  return usernames.filter((u) => {
    const key = u.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** The ArcGIS group resource; `userMembership` only when the caller is known. */
export function groupJson(
  row: Omit<GroupRow, "title_key">,
  orgId: string,
  membership: { username: string; memberType: MemberType | "none" } | null,
): Record<string, unknown> {
  return {
    id: row.id,
    title: row.title,
    owner: row.owner,
    orgId,
    description: row.description,
    snippet: row.snippet,
    tags: JSON.parse(row.tags) as string[],
    phone: null,
    access: row.access,
    isInvitationOnly: row.is_invitation_only === 1,
    isViewOnly: row.is_view_only === 1,
    protected: row.protected === 1,
    autoJoin: row.auto_join === 1,
    sortField: row.sort_field,
    sortOrder: row.sort_order,
    created: row.created,
    modified: row.modified,
    thumbnail: null,
    capabilities: [],
    isFav: false,
    isReadOnly: false,
    ...(membership ? { userMembership: membership } : {}),
  };
}
