import { expect } from "vitest";
import {
  type Account,
  ADMINS,
  type Area,
  acct,
  as,
  asAdmin,
  bootstrap,
  type Call,
  type CallContext,
  type Case,
  c,
  E499,
  EVERYONE,
  GROUP_HIDDEN,
  holder,
  NOBODY_ELSE,
  newGroup,
  newOwnGroups,
  newUser,
  OK,
  OWNER_OR_ADMIN,
  ownGroup,
  ownGroupOf,
  portal,
  row,
  type Setup,
  SIGNED_IN,
  USER_HIDDEN,
  uid,
} from "./harness.js";

/*
 * The security matrix of the community (community-groups and community-users routes): groups and
 * their members, users, their profiles and their invitations.
 */

/** A refusal that is no matter of privilege: leaving a group one is not in. */
const NOT_A_MEMBER = { code: 400, messageCode: "GEN_0002" };

/** Group owner, group manager or administrator (update, invite, addUsers, removeUsers). */
const GROUP_MANAGERS = [c("own", SIGNED_IN), c("manager", SIGNED_IN), c("other", ADMINS)];
/** Group owner or administrator; group managers may not (delete, protect, updateUsers). */
const GROUP_OWNER = [c("own", SIGNED_IN), c("manager", ADMINS), c("other", ADMINS)];

const EXPECTED: Record<string, readonly Case[]> = {
  "community.self": [c("own", SIGNED_IN)],
  // A private organization shows no user to anonymous callers; a private profile only to its
  // owner and administrators. Anonymous callers are asked for a token (was USER_HIDDEN, as for
  // signed-in callers: issue 12 makes anonymous answers E499 for items, groups, users and services
  // alike, missing or hidden).
  "users.get": [
    c("own", row(E499, OK, OK, OK)),
    c("other", row(E499, OK, OK, OK)),
    c("private", row(E499, USER_HIDDEN, USER_HIDDEN, OK)),
  ],
  // Self or administrator (ArcGIS: a user updates their own profile; admins anyone's).
  "users.update": OWNER_OR_ADMIN,
  "users.delete": [c("other", ADMINS)],
  "users.disable": [c("other", ADMINS)],
  "users.enable": [c("other", ADMINS)],

  // Searches narrow what they return; they refuse no one (README).
  "search.groups": [c("org", EVERYONE)],

  // Every built-in role may create groups (portal:user:createGroup).
  "groups.create": [c("org", SIGNED_IN)],
  // Anonymous callers: E499 (was GROUP_HIDDEN; see users.get).
  "groups.get": [
    c("own", row(E499, OK, OK, OK)),
    c("other", row(E499, OK, OK, OK)),
    c("private", row(E499, GROUP_HIDDEN, GROUP_HIDDEN, OK)),
  ],
  "groups.update": GROUP_MANAGERS,
  "groups.delete": GROUP_OWNER,
  "groups.protect": GROUP_OWNER,
  "groups.unprotect": GROUP_OWNER,
  "groups.invite": GROUP_MANAGERS,
  "groups.addUsers": GROUP_MANAGERS,
  "groups.removeUsers": GROUP_MANAGERS,
  "groups.updateUsers": GROUP_OWNER,
  // ArcGIS group users: members of the group and administrators.
  "groups.users": [c("own", SIGNED_IN), c("manager", SIGNED_IN), c("other", ADMINS)],
  // A user's invitations: theirs, or an administrator's; only the invited user answers one.
  "users.invitations": OWNER_OR_ADMIN,
  "users.invitation": OWNER_OR_ADMIN,
  "users.invitations.accept": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "users.invitations.decline": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],

  // The user search needs a signed-in caller (the ArcGIS reference); it narrows, refusing no one.
  "users.search": [c("org", SIGNED_IN)],
  // Notifications are the recipient's alone, administrators' neither (README, Notifications).
  "users.notifications": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "users.notifications.delete": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  // Notifying every member: the group's managers or administrators who update groups.
  "groups.createNotification": GROUP_MANAGERS,
  // A group's category schema: read by whoever sees the group, changed by its managers.
  "groups.categorySchema": [
    c("own", row(E499, OK, OK, OK)),
    c("other", row(E499, OK, OK, OK)),
    c("private", row(E499, GROUP_HIDDEN, GROUP_HIDDEN, OK)),
  ],
  "groups.assignCategorySchema": GROUP_MANAGERS,
  "groups.deleteCategorySchema": GROUP_MANAGERS,
  // A user's tags and properties: theirs, or an administrator's (viewItems, viewUsers, updateUsers).
  "users.tags": OWNER_OR_ADMIN,
  "users.properties": OWNER_OR_ADMIN,
  "users.setProperties": OWNER_OR_ADMIN,
  // The paged members list: as groups.users.
  "groups.userList": [c("own", SIGNED_IN), c("manager", SIGNED_IN), c("other", ADMINS)],
  // Any signed-in member may ask to join a group they see (a join request here).
  "groups.join": [c("other", SIGNED_IN)],
  // Members leave; one who is not in the group cannot.
  "groups.leave": [c("manager", SIGNED_IN), c("other", row(E499, NOT_A_MEMBER, NOT_A_MEMBER, NOT_A_MEMBER))],
  // Join requests are the group managers' (ArcGIS: "group owners and managers"), and administrators'.
  "groups.applications": GROUP_MANAGERS,
  "groups.applications.accept": GROUP_MANAGERS,
  "groups.applications.decline": GROUP_MANAGERS,
};

/** A notification for `user`, sent by the administrator; answers its id. */
async function notificationFor(user: Account): Promise<string> {
  await asAdmin("/portals/self/createNotification", { users: user.username, message: `note ${uid()}` });
  const r = await as(user, `/community/users/${user.username}/notifications`);
  return r.notifications[0].id as string;
}

const SCHEMA = { categorySchema: [{ title: "Categories", categories: [{ title: "Water" }] }] };

/** `owner`'s private group, and a group of `owner` that every caller manages. */
let privateGroup: string;
let managedGroup: string;

/** A fresh group of the target's owner; for `manager`, with the caller made a group manager. */
async function targetGroup(ctx: CallContext): Promise<{ id: string; owner: Account }> {
  const owner = holder(ctx);
  const id = await newGroup(owner);
  if (ctx.on === "manager" && ctx.who !== "anonymous") {
    await as(owner, `/community/groups/${id}/addUsers`, { admins: ctx.me.username });
  }
  return { id, owner };
}

async function invitationOf(username: string, groupId: string): Promise<string> {
  const r = await asAdmin(`/community/users/${username}/invitations`);
  const found = (r.userInvitations as any[]).find((i) => i.targetId === groupId);
  if (!found) throw new Error(`no invitation of ${username} to ${groupId}`);
  return found.id as string;
}

/** An invitation to a fresh group of `owner`: for the caller (`own`) or for `invitee` (`other`). */
async function invitationAnswer(ctx: CallContext): Promise<Call> {
  const invited = ctx.on === "own" && ctx.who !== "anonymous" ? ctx.me : acct.invitee;
  const groupId = await newGroup(acct.owner);
  await as(acct.owner, `/community/groups/${groupId}/invite`, { users: invited.username });
  return {
    path: { username: invited.username, invitationId: await invitationOf(invited.username, groupId) },
    check: (r) => expect(r.groupId).toBe(groupId),
  };
}

/** A fresh group of the target's owner (see `targetGroup`) to which `invitee` asked to join. */
async function applicationTo(ctx: CallContext): Promise<Call> {
  const { id } = await targetGroup(ctx);
  await as(acct.invitee, `/community/groups/${id}/join`);
  return {
    path: { groupId: id, applicant: acct.invitee.username },
    check: (r) => expect(r).toMatchObject({ username: acct.invitee.username, groupId: id }),
  };
}

const SETUP: Record<string, Setup> = {
  "community.self": async ({ me }) => ({ check: (r) => expect(r.username).toBe(me.username) }),
  "users.get": async (ctx) => {
    const username =
      ctx.on === "own" ? ctx.me.username : ctx.on === "other" ? acct.owner.username : acct.hermit.username;
    return { path: { username }, check: (r) => expect(r.username).toBe(username) };
  },
  "users.update": async (ctx) => ({
    path: { username: holder(ctx).username },
    params: { description: `profile ${uid()}` },
  }),
  "users.delete": async () => {
    const username = await newUser();
    return {
      path: { username },
      check: async () =>
        expect((await portal.get(`/community/users/${username}`, {}, bootstrap.token)).error.code).toBe(400),
    };
  },
  "users.disable": async () => {
    const username = await newUser();
    return {
      path: { username },
      check: async () =>
        expect((await portal.get(`/community/users/${username}`, {}, bootstrap.token)).disabled).toBe(true),
    };
  },
  "users.enable": async () => {
    const username = await newUser();
    await asAdmin(`/community/users/${username}/disable`);
    return {
      path: { username },
      check: async () =>
        expect((await portal.get(`/community/users/${username}`, {}, bootstrap.token)).disabled).toBe(false),
    };
  },

  "search.groups": async () => ({
    params: { q: "Group" },
    check: (r) => expect(Array.isArray(r.results)).toBe(true),
  }),

  "groups.create": async () => ({ params: { title: `Group ${uid()}`, access: "org" } }),
  "groups.get": async (ctx) => {
    const id =
      ctx.on === "own" ? ownGroupOf(holder(ctx)) : ctx.on === "other" ? ownGroup.owner : privateGroup;
    return { path: { groupId: id }, check: (r) => expect(r.id).toBe(id) };
  },
  "groups.update": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { snippet: `new ${uid()}` },
  }),
  "groups.delete": async (ctx) => ({ path: { groupId: (await targetGroup(ctx)).id } }),
  "groups.protect": async (ctx) => ({ path: { groupId: (await targetGroup(ctx)).id } }),
  "groups.unprotect": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/protect`);
    return { path: { groupId: id } };
  },
  "groups.invite": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { users: acct.invitee.username },
    check: (r) => expect(r.notInvited).toEqual([]),
  }),
  "groups.addUsers": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { users: acct.invitee.username },
    check: (r) => expect(r.notAdded).toEqual([]),
  }),
  "groups.removeUsers": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/addUsers`, { users: acct.invitee.username });
    return {
      path: { groupId: id },
      params: { users: acct.invitee.username },
      check: (r) => expect(r.notRemoved).toEqual([]),
    };
  },
  "groups.updateUsers": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/addUsers`, { users: acct.invitee.username });
    return {
      path: { groupId: id },
      params: { admins: acct.invitee.username },
      check: (r) => expect(r.results).toEqual([{ username: acct.invitee.username, success: true }]),
    };
  },
  "groups.users": async (ctx) => {
    const id =
      ctx.on === "own" ? ownGroupOf(holder(ctx)) : ctx.on === "manager" ? managedGroup : ownGroup.owner;
    return { path: { groupId: id } };
  },
  "users.invitations": async (ctx) => ({
    path: { username: ctx.on === "own" ? ctx.me.username : acct.invitee.username },
    check: (r) => expect(Array.isArray(r.userInvitations)).toBe(true),
  }),
  "users.invitation": async (ctx) => {
    const call = await invitationAnswer(ctx);
    return { ...call, check: (r) => expect(r.id).toBe(call.path?.invitationId) };
  },
  "users.invitations.accept": invitationAnswer,
  "users.invitations.decline": invitationAnswer,

  "users.search": async ({ me }) => ({
    params: { q: `username:${me.username}` },
    check: (r) => expect(r.results.map((u: { username: string }) => u.username)).toEqual([me.username]),
  }),
  "users.notifications": async (ctx) => ({
    path: { username: holder(ctx).username },
    check: (r) => expect(Array.isArray(r.notifications)).toBe(true),
  }),
  "users.notifications.delete": async (ctx) => {
    const user = holder(ctx);
    const id = await notificationFor(user);
    return {
      path: { username: user.username, notificationId: id },
      check: async () => {
        const left = await as(user, `/community/users/${user.username}/notifications`);
        expect(left.notifications.map((n: { id: string }) => n.id)).not.toContain(id);
      },
    };
  },
  "groups.createNotification": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { subject: "s", message: `m ${uid()}`, notifyAll: true },
  }),
  "groups.categorySchema": async (ctx) => {
    const id =
      ctx.on === "own" ? ownGroupOf(holder(ctx)) : ctx.on === "other" ? ownGroup.owner : privateGroup;
    return { path: { groupId: id }, check: (r) => expect(Array.isArray(r.categorySchema)).toBe(true) };
  },
  "groups.assignCategorySchema": async (ctx) => {
    const id = (await targetGroup(ctx)).id;
    return {
      path: { groupId: id },
      params: { categorySchema: SCHEMA },
      check: async () => {
        const r = await portal.get(`/community/groups/${id}/categorySchema`, {}, bootstrap.token);
        expect(r.categorySchema[0].categories[0].title).toBe("Water");
      },
    };
  },
  "groups.deleteCategorySchema": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/assignCategorySchema`, { categorySchema: SCHEMA });
    return {
      path: { groupId: id },
      check: async () =>
        expect(await portal.get(`/community/groups/${id}/categorySchema`, {}, bootstrap.token)).toEqual({
          categorySchema: [],
        }),
    };
  },
  "users.tags": async (ctx) => ({
    path: { username: holder(ctx).username },
    check: (r) => expect(Array.isArray(r.tags)).toBe(true),
  }),
  "users.properties": async (ctx) => ({
    path: { username: holder(ctx).username },
    check: (r) => expect(typeof r.properties).toBe("object"),
  }),
  "users.setProperties": async (ctx) => {
    const username = holder(ctx).username;
    const mark = uid();
    return {
      path: { username },
      params: { properties: JSON.stringify({ mark }) },
      check: async () =>
        expect(
          (await portal.get(`/community/users/${username}/properties`, {}, bootstrap.token)).properties,
        ).toEqual({ mark }),
    };
  },
  "groups.userList": async (ctx) => {
    const id =
      ctx.on === "own" ? ownGroupOf(holder(ctx)) : ctx.on === "manager" ? managedGroup : ownGroup.owner;
    return { path: { groupId: id }, check: (r) => expect(r.total).toBeGreaterThan(0) };
  },
  "groups.join": async () => {
    const id = await newGroup(acct.owner);
    return { path: { groupId: id }, check: (r) => expect(r.groupId).toBe(id) };
  },
  "groups.leave": async (ctx) => {
    const { id } = await targetGroup(ctx);
    return { path: { groupId: id }, check: (r) => expect(r.groupId).toBe(id) };
  },
  "groups.applications": async (ctx) => {
    const call = await applicationTo(ctx);
    return {
      path: { groupId: call.path?.groupId ?? "" },
      check: (r) =>
        expect(r.applications.map((a: { username: string }) => a.username)).toEqual([acct.invitee.username]),
    };
  },
  "groups.applications.accept": applicationTo,
  "groups.applications.decline": applicationTo,
};

export const communityArea: Area = {
  files: ["community-groups.routes.ts", "community-users.routes.ts"],
  expected: EXPECTED,
  setup: SETUP,
  helpers: ["invitee", "hermit"],
  async prepare() {
    await as(acct.hermit, `/community/users/${acct.hermit.username}/update`, { access: "private" });
    await newOwnGroups();
    privateGroup = await newGroup(acct.owner, "private");
    managedGroup = await newGroup(acct.owner);
    await as(acct.owner, `/community/groups/${managedGroup}/addUsers`, {
      admins: `${acct.member.username},${acct.publisher.username},${acct.admin.username}`,
    });
  },
};
