import {
  addGroupUsers,
  createGroup as esriCreateGroup,
  getGroup,
  getGroupContent,
  getGroupUsers,
  inviteGroupUsers,
  protectGroup,
  removeGroup,
  removeGroupUsers,
  unprotectGroup,
  updateGroup,
  updateUserMemberships,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, ArcGISRequestError } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

type User = { username: string; password: string; token: string };

describe("groups", () => {
  let portal: TestPortal;
  let owner: User;
  let member: User;
  let outsider: User;

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("group_owner");
    member = await portal.addUser("group_member");
    outsider = await portal.addUser("group_outsider");
  });
  afterAll(async () => {
    await portal.stop();
  });

  async function createGroup(token: string, params: Record<string, unknown>) {
    const r = await portal.post("/community/createGroup", params, token);
    if (!r.success) throw new Error(`createGroup failed: ${JSON.stringify(r)}`);
    return r.group as { id: string; title: string };
  }

  async function groupEvents(groupId: string) {
    return (await outbox(portal)).filter((e) => e.source === "group" && e.object_id === groupId);
  }

  async function lastEvent(groupId: string, operation: string) {
    const event = (await groupEvents(groupId)).filter((e) => e.operation === operation).at(-1);
    if (!event) throw new Error(`no ${operation} event for group ${groupId}`);
    return { ...event, properties: JSON.parse(event.properties) as Record<string, unknown> };
  }

  it("creates a group owned by its creator, who becomes its owner member, and records the add event", async () => {
    const r = await portal.post(
      "/community/createGroup",
      {
        title: "Hydrology",
        description: "Rivers and lakes",
        snippet: "Water people",
        tags: "water, rivers",
        isInvitationOnly: true,
        sortField: "modified",
        sortOrder: "desc",
      },
      owner.token,
    );
    expect(r.success).toBe(true);
    expect(r.group).toMatchObject({
      title: "Hydrology",
      owner: owner.username,
      description: "Rivers and lakes",
      snippet: "Water people",
      tags: ["water", "rivers"],
      access: "private",
      isInvitationOnly: true,
      isViewOnly: false,
      protected: false,
      sortField: "modified",
      sortOrder: "desc",
      thumbnail: null,
      capabilities: [],
      isReadOnly: false,
      userMembership: { username: owner.username, memberType: "owner" },
    });
    expect(r.group.id).toMatch(/^[0-9a-f]{32}$/);
    const read = await portal.get(`/community/groups/${r.group.id}`, {}, owner.token);
    expect(read).toEqual(r.group);
    const users = await portal.get(`/community/groups/${r.group.id}/users`, {}, owner.token);
    expect(users).toEqual({ owner: owner.username, admins: [owner.username], users: [] });
    const event = await lastEvent(r.group.id, "add");
    expect(event).toMatchObject({ uri: "/groups/add", actor_username: owner.username });
  });

  it("refuses a second group with the same title in any case, and writes nothing", async () => {
    await createGroup(owner.token, { title: "Unique Title" });
    const before = (await outbox(portal)).length;
    const r = await portal.post("/community/createGroup", { title: "UNIQUE title" }, outsider.token);
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("UNIQUE title");
    expect((await outbox(portal)).length).toBe(before);
  });

  it("refuses a missing or over-long title and a bad access value, naming each parameter", async () => {
    const long = await portal.post("/community/createGroup", { title: "x".repeat(251) }, owner.token);
    expect(long.error.code).toBe(400);
    expect(long.error.message).toContain("'title'");
    expect(long.error.message).toContain("250");
    const missing = await portal.post("/community/createGroup", { access: "secret" }, owner.token);
    expect(missing.error.message).toContain("'title'");
    expect(missing.error.details.join(" ")).toContain("'access'");
  });

  it("hides a private group from non-members and shows it to members and administrators", async () => {
    const group = await createGroup(owner.token, { title: "Private Circle" });
    const hidden = await portal.get(`/community/groups/${group.id}`, {}, outsider.token);
    expect(hidden.error).toMatchObject({ code: 400, messageCode: "COM_0036" });
    const missing = await portal.get(
      "/community/groups/0123456789abcdef0123456789abcdef",
      {},
      outsider.token,
    );
    expect(missing.error.message).toBe(hidden.error.message);
    await portal.post(`/community/groups/${group.id}/addUsers`, { users: member.username }, owner.token);
    const seen = await portal.get(`/community/groups/${group.id}`, {}, member.token);
    expect(seen.userMembership).toEqual({ username: member.username, memberType: "member" });
    const byAdmin = await portal.get(`/community/groups/${group.id}`, {}, portal.adminToken);
    expect(byAdmin.userMembership).toEqual({ username: ADMIN.username, memberType: "none" });
  });

  it("shows an org group to every signed-in member, as a non-member to outsiders", async () => {
    const group = await createGroup(owner.token, { title: "Whole Org", access: "org" });
    const seen = await portal.get(`/community/groups/${group.id}`, {}, outsider.token);
    expect(seen).toMatchObject({ access: "org", userMembership: { memberType: "none" } });
  });

  it("shows anonymous callers no group of a private organization, not even a public one", async () => {
    const group = await createGroup(owner.token, { title: "Open House", access: "public" });
    // Anonymous callers are asked for a token for what they may not see, as for what does not exist.
    const r = await portal.get(`/community/groups/${group.id}`);
    expect(r.error).toMatchObject({ code: 499, messageCode: "GWM_0002" });
    const content = await portal.get(`/content/groups/${group.id}`);
    expect(content.error).toMatchObject({ code: 499, messageCode: "GWM_0002" });
    expect((await portal.get(`/community/groups/${group.id}`, {}, outsider.token)).access).toBe("public");
  });

  it("refuses public groups while the organization's canSharePublic is false", async () => {
    const off = await portal.post("/portals/self/update", { canSharePublic: false }, portal.adminToken);
    expect(off.success).toBe(true);
    try {
      const created = await portal.post(
        "/community/createGroup",
        { title: "Too Public", access: "public" },
        owner.token,
      );
      expect(created.error.code).toBe(400);
      expect(created.error.message).toContain("'access'");
      expect(created.error.message).toContain("canSharePublic");
      const group = await createGroup(owner.token, { title: "Still Private" });
      const updated = await portal.post(
        `/community/groups/${group.id}/update`,
        { access: "public" },
        owner.token,
      );
      expect(updated.error.message).toContain("canSharePublic");
      expect((await portal.get(`/community/groups/${group.id}`, {}, owner.token)).access).toBe("private");
    } finally {
      await portal.post("/portals/self/update", { canSharePublic: true }, portal.adminToken);
    }
  });

  it("updates fields, clears those sent empty, keeps the rest, and records an update event", async () => {
    const group = await createGroup(owner.token, {
      title: "Before",
      description: "old description",
      snippet: "old snippet",
      tags: "a,b",
    });
    const r = await portal.post(
      `/community/groups/${group.id}/update`,
      { title: "After", description: "", tags: "c", access: "org", isViewOnly: true },
      owner.token,
    );
    expect(r).toEqual({ success: true, groupId: group.id });
    const read = await portal.get(`/community/groups/${group.id}`, {}, owner.token);
    expect(read).toMatchObject({
      title: "After",
      description: "",
      snippet: "old snippet",
      tags: ["c"],
      access: "org",
      isViewOnly: true,
    });
    expect(read.modified).toBeGreaterThan(read.created);
    const event = await lastEvent(group.id, "update");
    expect(event).toMatchObject({ uri: `/groups/${group.id}/update`, actor_username: owner.username });
  });

  it("lets a group manager update the group but refuses a plain member and an outsider with 403", async () => {
    const group = await createGroup(owner.token, { title: "Managed", access: "org" });
    await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: member.username, admins: outsider.username },
      owner.token,
    );
    const byManager = await portal.post(
      `/community/groups/${group.id}/update`,
      { snippet: "by manager" },
      outsider.token,
    );
    expect(byManager.success).toBe(true);
    const byMember = await portal.post(
      `/community/groups/${group.id}/update`,
      { snippet: "by member" },
      member.token,
    );
    expect(byMember.error.code).toBe(403);
    const stranger = await portal.addUser("group_stranger");
    const byStranger = await portal.post(
      `/community/groups/${group.id}/update`,
      { snippet: "x" },
      stranger.token,
    );
    expect(byStranger.error.code).toBe(403);
    expect((await portal.get(`/community/groups/${group.id}`, {}, owner.token)).snippet).toBe("by manager");
  });

  it("lets only the owner or an administrator delete a group, a member gets 403", async () => {
    const group = await createGroup(owner.token, { title: "Short Lived", access: "org" });
    await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: member.username, admins: outsider.username },
      owner.token,
    );
    expect((await portal.post(`/community/groups/${group.id}/delete`, {}, member.token)).error.code).toBe(
      403,
    );
    expect((await portal.post(`/community/groups/${group.id}/delete`, {}, outsider.token)).error.code).toBe(
      403,
    );
    const other = await createGroup(owner.token, { title: "Admin Deletes" });
    expect(await portal.post(`/community/groups/${other.id}/delete`, {}, portal.adminToken)).toEqual({
      success: true,
      groupId: other.id,
    });
    const event = await lastEvent(other.id, "delete");
    expect(event).toMatchObject({ uri: `/groups/${other.id}/delete`, actor_username: ADMIN.username });
  });

  it("deletes a group with its memberships, invitations and shares; items shared only there become private", async () => {
    const group = await createGroup(owner.token, { title: "Doomed" });
    await portal.post(`/community/groups/${group.id}/addUsers`, { users: member.username }, owner.token);
    await portal.post(`/community/groups/${group.id}/invite`, { users: outsider.username }, owner.token);
    const item = await portal.post(
      `/content/users/${owner.username}/addItem`,
      { title: "Shared map", type: "Web Map", text: "{}" },
      owner.token,
    );
    const share = await portal.post(
      `/content/users/${owner.username}/items/${item.id}/share`,
      { groups: group.id },
      owner.token,
    );
    expect(share.notSharedWith).toEqual([]);
    expect((await portal.get(`/content/items/${item.id}`, {}, owner.token)).access).toBe("shared");

    expect(await portal.post(`/community/groups/${group.id}/delete`, {}, owner.token)).toEqual({
      success: true,
      groupId: group.id,
    });
    expect((await portal.get(`/community/groups/${group.id}`, {}, owner.token)).error.messageCode).toBe(
      "COM_0036",
    );
    const db = portal.portico.db.kysely;
    for (const table of ["group_members", "group_invitations", "item_shares"] as const) {
      const rows = await db.selectFrom(table).selectAll().where("group_id", "=", group.id).execute();
      expect(rows).toEqual([]);
    }
    const after = await portal.get(`/content/items/${item.id}`, {}, owner.token);
    expect(after).toMatchObject({ access: "private", groupIds: [] });
    const invitations = await portal.get(
      `/community/users/${outsider.username}/invitations`,
      {},
      outsider.token,
    );
    expect(invitations.userInvitations.filter((i: any) => i.targetId === group.id)).toEqual([]);
  });

  it("refuses to delete a protected group until it is unprotected, recording protect and unprotect", async () => {
    const group = await createGroup(owner.token, { title: "Guarded", access: "org" });
    await portal.post(`/community/groups/${group.id}/addUsers`, { admins: member.username }, owner.token);
    expect((await portal.post(`/community/groups/${group.id}/protect`, {}, member.token)).error.code).toBe(
      403,
    );
    expect(await portal.post(`/community/groups/${group.id}/protect`, {}, owner.token)).toEqual({
      success: true,
    });
    expect((await portal.get(`/community/groups/${group.id}`, {}, owner.token)).protected).toBe(true);
    const refused = await portal.post(`/community/groups/${group.id}/delete`, {}, owner.token);
    expect(refused.error.code).toBe(400);
    expect(refused.error.message).toContain("protected");
    const byAdmin = await portal.post(`/community/groups/${group.id}/delete`, {}, portal.adminToken);
    expect(byAdmin.error.message).toContain("protected");
    expect((await portal.post(`/community/groups/${group.id}/unprotect`, {}, owner.token)).success).toBe(
      true,
    );
    expect((await portal.post(`/community/groups/${group.id}/delete`, {}, owner.token)).success).toBe(true);
    const ops = (await groupEvents(group.id)).map((e) => e.operation);
    expect(ops).toEqual(["add", "addUsers", "protect", "unprotect", "delete"]);
    expect((await lastEvent(group.id, "protect")).uri).toBe(`/groups/${group.id}/protect`);
  });

  it("invites users, who list and accept their invitations; invite and addUsers events name them", async () => {
    const group = await createGroup(owner.token, { title: "Invitation Only", isInvitationOnly: true });
    const r = await portal.post(
      `/community/groups/${group.id}/invite`,
      { users: `${member.username},nobody_here,${owner.username}`, role: "group_member" },
      owner.token,
    );
    expect(r).toEqual({ success: true, notInvited: ["nobody_here", owner.username] });
    const invite = await lastEvent(group.id, "invite");
    expect(invite).toMatchObject({ uri: `/groups/${group.id}/invite`, actor_username: owner.username });
    expect(invite.properties).toEqual({ invitedUserNames: [member.username] });

    const again = await portal.post(
      `/community/groups/${group.id}/invite`,
      { users: member.username },
      owner.token,
    );
    expect(again.notInvited).toEqual([member.username]);

    const listed = await portal.get(`/community/users/${member.username}/invitations`, {}, member.token);
    expect(listed.userInvitations).toHaveLength(1);
    const invitation = listed.userInvitations[0];
    expect(invitation).toMatchObject({
      targetType: "group",
      targetId: group.id,
      group: { id: group.id, title: "Invitation Only", owner: owner.username },
      fromUsername: { username: owner.username },
    });
    const snooping = await portal.get(`/community/users/${member.username}/invitations`, {}, outsider.token);
    expect(snooping.error.code).toBe(403);
    const stolen = await portal.post(
      `/community/users/${member.username}/invitations/${invitation.id}/accept`,
      {},
      outsider.token,
    );
    expect(stolen.error.code).toBe(403);

    const accepted = await portal.post(
      `/community/users/${member.username}/invitations/${invitation.id}/accept`,
      {},
      member.token,
    );
    expect(accepted).toEqual({
      success: true,
      id: invitation.id,
      username: member.username,
      groupId: group.id,
    });
    const seen = await portal.get(`/community/groups/${group.id}`, {}, member.token);
    expect(seen.userMembership.memberType).toBe("member");
    const added = await lastEvent(group.id, "addUsers");
    expect(added).toMatchObject({ actor_username: member.username });
    expect(added.properties).toEqual({ addedUserNames: [member.username] });
    const after = await portal.get(`/community/users/${member.username}/invitations`, {}, member.token);
    expect(after.userInvitations).toEqual([]);
  });

  it("lets an invited user decline, leaving them outside the group", async () => {
    const group = await createGroup(owner.token, { title: "Declined" });
    await portal.post(`/community/groups/${group.id}/invite`, { users: outsider.username }, owner.token);
    const [invitation] = (
      await portal.get(`/community/users/${outsider.username}/invitations`, {}, outsider.token)
    ).userInvitations;
    const r = await portal.post(
      `/community/users/${outsider.username}/invitations/${invitation.id}/decline`,
      {},
      outsider.token,
    );
    expect(r.success).toBe(true);
    expect((await portal.get(`/community/groups/${group.id}`, {}, outsider.token)).error.code).toBe(400);
    const accept = await portal.post(
      `/community/users/${outsider.username}/invitations/${invitation.id}/accept`,
      {},
      outsider.token,
    );
    expect(accept.error.code).toBe(400);
  });

  it("refuses group_admin invitations and an unknown role, naming the role parameter", async () => {
    const group = await createGroup(owner.token, { title: "Role Check" });
    for (const role of ["group_admin", "emperor"]) {
      const r = await portal.post(
        `/community/groups/${group.id}/invite`,
        { users: member.username, role },
        owner.token,
      );
      expect(r.error.code).toBe(400);
      expect(r.error.message).toContain("'role'");
    }
  });

  it("adds users and admins, reporting unknown users and existing members in notAdded", async () => {
    const group = await createGroup(owner.token, { title: "Direct Adds" });
    const r = await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: `${member.username},ghost_user,${owner.username}`, admins: outsider.username },
      owner.token,
    );
    expect(r).toEqual({ notAdded: ["ghost_user", owner.username] });
    const event = await lastEvent(group.id, "addUsers");
    expect(event).toMatchObject({ uri: `/groups/${group.id}/addUsers`, actor_username: owner.username });
    expect(event.properties).toEqual({ addedUserNames: [outsider.username, member.username] });
    const users = await portal.get(`/community/groups/${group.id}/users`, {}, member.token);
    expect(users).toEqual({
      owner: owner.username,
      admins: [owner.username, outsider.username].sort(),
      users: [member.username],
    });
    const again = await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: member.username },
      owner.token,
    );
    expect(again).toEqual({ notAdded: [member.username] });
    expect((await groupEvents(group.id)).filter((e) => e.operation === "addUsers")).toHaveLength(1);
  });

  it("refuses addUsers to a plain member with 403 and lets an administrator add to any group", async () => {
    const group = await createGroup(owner.token, { title: "Admin Adds", access: "org" });
    await portal.post(`/community/groups/${group.id}/addUsers`, { users: member.username }, owner.token);
    const byMember = await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: outsider.username },
      member.token,
    );
    expect(byMember.error.code).toBe(403);
    const byAdmin = await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: outsider.username },
      portal.adminToken,
    );
    expect(byAdmin).toEqual({ notAdded: [] });
  });

  it("removes members but never the owner, reporting the rest in notRemoved", async () => {
    const group = await createGroup(owner.token, { title: "Removals" });
    await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: `${member.username},${outsider.username}` },
      owner.token,
    );
    const r = await portal.post(
      `/community/groups/${group.id}/removeUsers`,
      { users: `${member.username},${owner.username},ghost_user` },
      owner.token,
    );
    expect(r).toEqual({ notRemoved: [owner.username, "ghost_user"] });
    const event = await lastEvent(group.id, "removeUsers");
    expect(event).toMatchObject({ uri: `/groups/${group.id}/removeUsers` });
    expect(event.properties).toEqual({ removedUserNames: [member.username] });
    expect((await portal.get(`/community/groups/${group.id}`, {}, member.token)).error.code).toBe(400);
    const users = await portal.get(`/community/groups/${group.id}/users`, {}, owner.token);
    expect(users).toEqual({ owner: owner.username, admins: [owner.username], users: [outsider.username] });
  });

  it("promotes and demotes members with updateUsers, reporting each user, owner and administrators only", async () => {
    const group = await createGroup(owner.token, { title: "Promotions" });
    await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: member.username, admins: outsider.username },
      owner.token,
    );
    const byManager = await portal.post(
      `/community/groups/${group.id}/updateUsers`,
      { admins: member.username },
      outsider.token,
    );
    expect(byManager.error.code).toBe(403);
    const r = await portal.post(
      `/community/groups/${group.id}/updateUsers`,
      { admins: `${member.username},${owner.username}`, users: `${outsider.username},ghost_user` },
      owner.token,
    );
    expect(r.results).toEqual(
      expect.arrayContaining([
        { username: member.username, success: true },
        { username: owner.username, success: false },
        { username: outsider.username, success: true },
        { username: "ghost_user", success: false },
      ]),
    );
    expect(r.results).toHaveLength(4);
    const event = await lastEvent(group.id, "updateUsers");
    expect(event).toMatchObject({ uri: `/groups/${group.id}/updateUsers` });
    expect((event.properties.updatedUserNames as string[]).sort()).toEqual(
      [member.username, outsider.username].sort(),
    );
    const users = await portal.get(`/community/groups/${group.id}/users`, {}, owner.token);
    expect(users).toEqual({
      owner: owner.username,
      admins: [member.username, owner.username].sort(),
      users: [outsider.username],
    });
  });

  it("keeps a group manager from promoting a member by removing it and adding it back as a manager", async () => {
    const group = await createGroup(owner.token, { title: "No Back Door" });
    await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: member.username, admins: outsider.username },
      owner.token,
    );
    const manager = outsider;
    const removed = await portal.post(
      `/community/groups/${group.id}/removeUsers`,
      { users: member.username },
      manager.token,
    );
    expect(removed).toEqual({ notRemoved: [] });
    const readded = await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { admins: member.username },
      manager.token,
    );
    expect(readded.error).toMatchObject({ code: 403, messageCode: "GWM_0004" });
    expect(readded.error.details[0]).toContain("admins");
    // Refused as a whole: the plain members named beside it are not added either.
    const mixed = await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { users: member.username, admins: member.username },
      manager.token,
    );
    expect(mixed.error.code).toBe(403);
    expect(await portal.get(`/community/groups/${group.id}/users`, {}, owner.token)).toEqual({
      owner: owner.username,
      admins: [manager.username, owner.username].sort(),
      users: [],
    });
    // A group manager adds members; the owner and administrators choose managers.
    expect(
      await portal.post(`/community/groups/${group.id}/addUsers`, { users: member.username }, manager.token),
    ).toEqual({ notAdded: [] });
    await portal.post(`/community/groups/${group.id}/removeUsers`, { users: member.username }, owner.token);
    expect(
      await portal.post(
        `/community/groups/${group.id}/addUsers`,
        { admins: member.username },
        portal.adminToken,
      ),
    ).toEqual({ notAdded: [] });
    expect((await portal.get(`/community/groups/${group.id}/users`, {}, owner.token)).admins).toContain(
      member.username,
    );
  });

  it("lists a group's members only to its members and to administrators", async () => {
    const group = await createGroup(owner.token, { title: "Member List", access: "org" });
    expect((await portal.get(`/community/groups/${group.id}/users`, {}, outsider.token)).error.code).toBe(
      403,
    );
    const byAdmin = await portal.get(`/community/groups/${group.id}/users`, {}, portal.adminToken);
    expect(byAdmin).toEqual({ owner: owner.username, admins: [owner.username], users: [] });
    expect((await portal.get(`/community/groups/${group.id}/users`)).error.code).toBe(499);
  });

  it("lists the group's items each caller may see, paged", async () => {
    const group = await createGroup(owner.token, { title: "Shared Content", access: "org" });
    await portal.post(`/community/groups/${group.id}/addUsers`, { users: member.username }, owner.token);
    const ids: string[] = [];
    for (const title of ["Alpha", "Beta", "Gamma"]) {
      const item = await portal.post(
        `/content/users/${owner.username}/addItem`,
        { title, type: "Web Map", text: "{}" },
        owner.token,
      );
      ids.push(item.id);
      await portal.post(
        `/content/users/${owner.username}/items/${item.id}/share`,
        { groups: group.id, org: title === "Beta" },
        owner.token,
      );
    }
    const first = await portal.get(`/content/groups/${group.id}`, { num: 2 }, member.token);
    expect(first).toMatchObject({ total: 3, start: 1, num: 2, nextStart: 3 });
    expect(first.items.map((i: any) => i.title)).toEqual(["Alpha", "Beta"]);
    expect(first.items[0]).toMatchObject({ id: ids[0], owner: owner.username, groupIds: [group.id] });
    const second = await portal.get(`/content/groups/${group.id}`, { start: 3, num: 2 }, member.token);
    expect(second).toMatchObject({ total: 3, start: 3, nextStart: -1 });
    expect(second.items.map((i: any) => i.title)).toEqual(["Gamma"]);

    const outside = await portal.get(`/content/groups/${group.id}`, {}, outsider.token);
    expect(outside).toMatchObject({ total: 1, nextStart: -1 });
    expect(outside.items.map((i: any) => i.title)).toEqual(["Beta"]);

    const badPage = await portal.get(`/content/groups/${group.id}`, { num: 500 }, member.token);
    expect(badPage.error.message).toContain("'num'");
  });

  it("answers group operations with 499 to anonymous callers and 403 without the privileges", async () => {
    expect((await portal.post("/community/createGroup", { title: "Anonymous" })).error.code).toBe(499);
    const group = await createGroup(owner.token, { title: "Anonymous Target", access: "org" });
    for (const op of ["update", "delete", "protect", "invite", "addUsers", "removeUsers", "updateUsers"]) {
      const r = await portal.post(`/community/groups/${group.id}/${op}`, { users: member.username });
      expect(r.error.code, op).toBe(499);
    }

    const role = await portal.post(
      "/portals/self/createRole",
      { name: "Group Maker Only", description: "createGroup without sharing groups" },
      portal.adminToken,
    );
    await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: ["portal:user:createGroup"] } },
      portal.adminToken,
    );
    const noShare = await portal.addUser("group_maker");
    await portal.post(
      "/portals/self/updateUserRole",
      { user: noShare.username, role: role.id },
      portal.adminToken,
    );
    const token = await portal.signIn(noShare.username, noShare.password);
    expect(
      (await portal.post("/community/createGroup", { title: "Org Wide", access: "org" }, token)).error.code,
    ).toBe(403);
    expect(
      (await portal.post("/community/createGroup", { title: "Public One", access: "public" }, token)).error
        .code,
    ).toBe(403);
    expect((await portal.post("/community/createGroup", { title: "Mine Alone" }, token)).success).toBe(true);

    const viewer = await portal.post(
      "/portals/self/createRole",
      { name: "Viewer Only", description: "no createGroup" },
      portal.adminToken,
    );
    await portal.post(
      `/portals/self/roles/${viewer.id}/setPrivileges`,
      { privileges: { privileges: ["portal:user:viewOrgGroups"] } },
      portal.adminToken,
    );
    const looker = await portal.addUser("group_looker");
    await portal.post(
      "/portals/self/updateUserRole",
      { user: looker.username, role: viewer.id },
      portal.adminToken,
    );
    const lookerToken = await portal.signIn(looker.username, looker.password);
    const refused = await portal.post("/community/createGroup", { title: "Not Allowed" }, lookerToken);
    expect(refused.error.code).toBe(403);
    expect(refused.error.details.join(" ")).toContain("portal:user:createGroup");
  });

  it("serves Esri's arcgis-rest-js group functions unchanged", async () => {
    const authentication = await ArcGISIdentityManager.signIn({
      username: owner.username,
      password: owner.password,
      portal: portal.api,
    });
    const created = await esriCreateGroup({
      group: { title: "Esri Client Group", access: "org", tags: ["esri", "client"] },
      authentication,
    });
    expect(created.success).toBe(true);
    const id = created.group.id as string;
    const group = await getGroup(id, { authentication });
    expect(group).toMatchObject({ title: "Esri Client Group", tags: ["esri", "client"], access: "org" });
    await updateGroup({ group: { id, snippet: "from the client" }, authentication });
    expect((await getGroup(id, { authentication })).snippet).toBe("from the client");

    const added = await addGroupUsers({ id, users: [member.username, "ghost_user"], authentication });
    expect(added.notAdded).toEqual(["ghost_user"]);
    await updateUserMemberships({ id, users: [member.username], newMemberType: "admin", authentication });
    expect(await getGroupUsers(id, { authentication })).toEqual({
      owner: owner.username,
      admins: [member.username, owner.username].sort(),
      users: [],
    });
    const invited = await inviteGroupUsers({
      id,
      users: [outsider.username],
      role: "group_member",
      expiration: 1440,
      authentication,
    });
    expect(invited.success).toBe(true);
    const removed = await removeGroupUsers({ id, users: [member.username], authentication });
    expect(removed.notRemoved).toEqual([]);
    const content = await getGroupContent(id, { paging: { start: 1, num: 10 }, authentication });
    expect(content).toMatchObject({ total: 0, items: [], nextStart: -1 });

    await protectGroup({ id, authentication });
    await expect(removeGroup({ id, authentication })).rejects.toBeInstanceOf(ArcGISRequestError);
    await unprotectGroup({ id, authentication });
    expect((await removeGroup({ id, authentication })).success).toBe(true);
  });
});
