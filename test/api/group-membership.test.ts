import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

type User = { username: string; password: string; token: string };

/**
 * Joining and leaving groups, join requests, the members list, a user's groups, sharing by group
 * managers who do not own the item, invitations' fields, and a user's properties and tags.
 */
describe("group membership", () => {
  let portal: TestPortal;
  let owner: User;
  let manager: User;
  let member: User;
  let joiner: User;
  let outsider: User;

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("gm_owner");
    manager = await portal.addUser("gm_manager");
    member = await portal.addUser("gm_member");
    joiner = await portal.addUser("gm_joiner");
    outsider = await portal.addUser("gm_outsider");
  });
  afterAll(async () => {
    await portal.stop();
  });

  async function createGroup(token: string, params: Record<string, unknown>) {
    const r = await portal.post("/community/createGroup", params, token);
    if (!r.success) throw new Error(`createGroup failed: ${JSON.stringify(r)}`);
    return r.group as { id: string; title: string };
  }

  async function events(groupId: string, operation: string) {
    return (await outbox(portal))
      .filter((e) => e.source === "group" && e.object_id === groupId && e.operation === operation)
      .map((e) => ({ ...e, properties: JSON.parse(e.properties) as Record<string, unknown> }));
  }

  /** A group owned by `owner` with `manager` as a group manager and `member` as a member. */
  async function staffedGroup(title: string, params: Record<string, unknown> = {}) {
    const group = await createGroup(owner.token, { title, access: "org", ...params });
    await portal.post(
      `/community/groups/${group.id}/addUsers`,
      { admins: manager.username, users: member.username },
      owner.token,
    );
    return group;
  }

  it("lists the user's groups with their membership in community/self and, for the user and administrators, community/users/<u>", async () => {
    const group = await staffedGroup("Self Groups");
    const self = await portal.get("/community/self", {}, manager.token);
    const listed = self.groups.find((g: { id: string }) => g.id === group.id);
    expect(listed).toMatchObject({
      id: group.id,
      title: "Self Groups",
      owner: owner.username,
      access: "org",
      userMembership: { username: manager.username, memberType: "admin" },
    });
    const asAdmin = await portal.get(`/community/users/${owner.username}`, {}, portal.adminToken);
    expect(asAdmin.groups.find((g: { id: string }) => g.id === group.id).userMembership).toEqual({
      username: owner.username,
      memberType: "owner",
    });
    // Another member sees the profile without its groups.
    const asMember = await portal.get(`/community/users/${owner.username}`, {}, outsider.token);
    expect(asMember.username).toBe(owner.username);
    expect(asMember.groups).toBeUndefined();
  });

  it("keeps community/self current when the user's memberships or the group change", async () => {
    const group = await staffedGroup("Changing Group");
    const find = async () =>
      (await portal.get("/community/self", {}, member.token)).groups.find(
        (g: { id: string }) => g.id === group.id,
      );
    expect((await find()).userMembership.memberType).toBe("member");
    await portal.post(`/community/groups/${group.id}/updateUsers`, { admins: member.username }, owner.token);
    expect((await find()).userMembership.memberType).toBe("admin");
    await portal.post(`/community/groups/${group.id}/update`, { title: "Changed Group" }, owner.token);
    expect((await find()).title).toBe("Changed Group");
    await portal.post(`/community/groups/${group.id}/removeUsers`, { users: member.username }, owner.token);
    expect(await find()).toBeUndefined();
  });

  it("adds a member who joins an autoJoin group, with the addUsers event", async () => {
    const group = await createGroup(owner.token, {
      title: "Open Door",
      access: "org",
      autoJoin: true,
    });
    expect((await portal.get(`/community/groups/${group.id}`, {}, owner.token)).autoJoin).toBe(true);
    const r = await portal.post(`/community/groups/${group.id}/join`, {}, joiner.token);
    expect(r).toEqual({ success: true, groupId: group.id });
    const seen = await portal.get(`/community/groups/${group.id}`, {}, joiner.token);
    expect(seen.userMembership.memberType).toBe("member");
    const [added] = await events(group.id, "addUsers");
    expect(added?.actor_username).toBe(joiner.username);
    expect(added?.properties).toEqual({ addedUserNames: [joiner.username] });
    const again = await portal.post(`/community/groups/${group.id}/join`, {}, joiner.token);
    expect(again.error.code).toBe(400);
    expect(again.error.message).toMatch(/already a member/);
  });

  it("records a join request for a group that needs approval, which a manager lists and accepts", async () => {
    const group = await staffedGroup("Needs Approval");
    expect(await portal.post(`/community/groups/${group.id}/join`, {}, joiner.token)).toEqual({
      success: true,
      groupId: group.id,
    });
    // Asking again is the same request, with no second event.
    await portal.post(`/community/groups/${group.id}/join`, {}, joiner.token);
    const requested = await events(group.id, "join");
    expect(requested).toHaveLength(1);
    expect(requested[0]?.actor_username).toBe(joiner.username);
    expect(
      (await portal.get(`/community/groups/${group.id}`, {}, joiner.token)).userMembership.memberType,
    ).toBe("none");

    const refused = await portal.get(`/community/groups/${group.id}/applications`, {}, member.token);
    expect(refused.error.code).toBe(403);
    const listed = await portal.get(`/community/groups/${group.id}/applications`, {}, manager.token);
    expect(listed.applications).toEqual([
      { username: joiner.username, fullName: `Test ${joiner.username}`, received: expect.any(Number) },
    ]);
    const stolen = await portal.post(
      `/community/groups/${group.id}/applications/${joiner.username}/accept`,
      {},
      member.token,
    );
    expect(stolen.error.code).toBe(403);
    const accepted = await portal.post(
      `/community/groups/${group.id}/applications/${joiner.username}/accept`,
      {},
      manager.token,
    );
    expect(accepted).toEqual({ success: true, username: joiner.username, groupId: group.id });
    expect(
      (await portal.get(`/community/groups/${group.id}`, {}, joiner.token)).userMembership.memberType,
    ).toBe("member");
    const added = (await events(group.id, "addUsers")).at(-1);
    expect(added?.actor_username).toBe(manager.username);
    expect(added?.properties).toEqual({ addedUserNames: [joiner.username] });
    expect(
      (await portal.get(`/community/groups/${group.id}/applications`, {}, owner.token)).applications,
    ).toEqual([]);
  });

  it("lets a manager decline a join request, and answers a missing one with not found", async () => {
    const group = await staffedGroup("Declines");
    await portal.post(`/community/groups/${group.id}/join`, {}, outsider.token);
    const declined = await portal.post(
      `/community/groups/${group.id}/applications/${outsider.username}/decline`,
      {},
      owner.token,
    );
    expect(declined).toEqual({ success: true, username: outsider.username, groupId: group.id });
    expect(
      (await portal.get(`/community/groups/${group.id}`, {}, outsider.token)).userMembership.memberType,
    ).toBe("none");
    const again = await portal.post(
      `/community/groups/${group.id}/applications/${outsider.username}/accept`,
      {},
      owner.token,
    );
    expect(again.error.code).toBe(400);
    expect(again.error.details.join(" ")).toMatch(/does not exist/);
  });

  it("refuses to join an invitation-only group, and hides private groups from those who would join", async () => {
    const closed = await createGroup(owner.token, { title: "Closed", access: "org", isInvitationOnly: true });
    const refused = await portal.post(`/community/groups/${closed.id}/join`, {}, outsider.token);
    expect(refused.error.code).toBe(403);
    expect(refused.error.details.join(" ")).toMatch(/invitation only/);
    const hidden = await createGroup(owner.token, { title: "Hidden" });
    const unseen = await portal.post(`/community/groups/${hidden.id}/join`, {}, outsider.token);
    expect(unseen.error.code).toBe(400);
    expect(await events(hidden.id, "join")).toEqual([]);
  });

  it("lets members leave, recorded as their removal, but not the owner or non-members", async () => {
    const group = await staffedGroup("Leavers");
    const left = await portal.post(`/community/groups/${group.id}/leave`, {}, member.token);
    expect(left).toEqual({ success: true, groupId: group.id });
    expect(
      (await portal.get(`/community/groups/${group.id}`, {}, member.token)).userMembership.memberType,
    ).toBe("none");
    const [removed] = await events(group.id, "removeUsers");
    expect(removed?.actor_username).toBe(member.username);
    expect(removed?.properties).toEqual({ removedUserNames: [member.username] });
    const ownerLeaves = await portal.post(`/community/groups/${group.id}/leave`, {}, owner.token);
    expect(ownerLeaves.error.code).toBe(400);
    expect(ownerLeaves.error.message).toMatch(/owner cannot leave/);
    const notMember = await portal.post(`/community/groups/${group.id}/leave`, {}, outsider.token);
    expect(notMember.error.code).toBe(400);
    expect(notMember.error.message).toMatch(/not a member/);
  });

  it("pages, filters and sorts a group's members in userList, for members and administrators only", async () => {
    const group = await staffedGroup("Listed");
    const all = await portal.get(`/community/groups/${group.id}/userList`, {}, member.token);
    expect(all).toMatchObject({ total: 3, start: 1, num: 25, nextStart: -1 });
    expect(all.owner).toMatchObject({
      username: owner.username,
      memberType: "owner",
      fullName: `Test ${owner.username}`,
    });
    expect(all.users.map((u: { username: string }) => u.username)).toEqual(
      [owner.username, manager.username, member.username].sort(),
    );
    expect(all.users[0]).toEqual({
      username: expect.any(String),
      fullName: expect.any(String),
      memberType: expect.stringMatching(/^(owner|admin|member)$/),
      thumbnail: null,
      joined: expect.any(Number),
      orgId: expect.any(String),
    });

    const page = await portal.get(
      `/community/groups/${group.id}/userlist`,
      { num: 1, start: 2, sortField: "username", sortOrder: "desc" },
      member.token,
    );
    expect(page).toMatchObject({ total: 3, start: 2, num: 1, nextStart: 3 });
    expect(page.users.map((u: { username: string }) => u.username)).toEqual([
      [owner.username, manager.username, member.username].sort().reverse()[1],
    ]);
    const admins = await portal.get(
      `/community/groups/${group.id}/userList`,
      { memberType: "admin" },
      owner.token,
    );
    expect(admins.users.map((u: { username: string }) => u.username).sort()).toEqual(
      [owner.username, manager.username].sort(),
    );
    const named = await portal.get(
      `/community/groups/${group.id}/userList`,
      { name: "MANAGER" },
      owner.token,
    );
    expect(named.users.map((u: { username: string }) => u.username)).toEqual([manager.username]);
    const wildcard = await portal.get(`/community/groups/${group.id}/userList`, { name: "%" }, owner.token);
    expect(wildcard.total).toBe(0);
    const future = await portal.get(
      `/community/groups/${group.id}/userList`,
      { joined: `${Date.now() + 60_000},` },
      owner.token,
    );
    expect(future.total).toBe(0);
    const past = await portal.get(
      `/community/groups/${group.id}/userList`,
      { joined: `,${Date.now()}` },
      owner.token,
    );
    expect(past.total).toBe(3);

    const outside = await portal.get(`/community/groups/${group.id}/userList`, {}, outsider.token);
    expect(outside.error.code).toBe(403);
    const asAdmin = await portal.get(`/community/groups/${group.id}/userList`, {}, portal.adminToken);
    expect(asAdmin.total).toBe(3);
    const badJoined = await portal.get(
      `/community/groups/${group.id}/userList`,
      { joined: "yesterday" },
      owner.token,
    );
    expect(badJoined.error.code).toBe(400);
    expect(badJoined.error.message).toMatch(/'joined'/);
    const badSort = await portal.get(
      `/community/groups/${group.id}/userList`,
      { sortField: "email" },
      owner.token,
    );
    expect(badSort.error.message).toMatch(/'sortField'/);
    const tooMany = await portal.get(`/community/groups/${group.id}/userList`, { num: 101 }, owner.token);
    expect(tooMany.error.message).toMatch(/'num'/);
  });

  it("lets a group manager share and unshare another member's item in the groups they manage, with events", async () => {
    const group = await staffedGroup("Managed Sharing");
    const other = await createGroup(owner.token, { title: "Not Managed", access: "org" });
    await portal.post(`/community/groups/${other.id}/addUsers`, { users: manager.username }, owner.token);
    const item = await portal.post(
      `/content/users/${member.username}/addItem`,
      { title: "Member Map", type: "Web Map", text: "{}" },
      member.token,
    );
    await portal.post(
      `/content/users/${member.username}/items/${item.id}/share`,
      { org: true },
      member.token,
    );

    const shared = await portal.post(
      `/content/items/${item.id}/share`,
      { groups: `${group.id},${other.id}` },
      manager.token,
    );
    expect(shared).toEqual({ notSharedWith: [other.id], itemId: item.id });
    const [share] = await events(group.id, "share");
    expect(share?.actor_username).toBe(manager.username);
    expect(share?.properties).toEqual({ sharedItems: [{ itemId: item.id, itemType: "Web Map" }] });

    const plain = await portal.post(`/content/items/${item.id}/unshare`, { groups: group.id }, member.token);
    // The owner may unshare through this path too.
    expect(plain).toEqual({ notUnsharedFrom: [], itemId: item.id });
    await portal.post(`/content/items/${item.id}/share`, { groups: group.id }, manager.token);
    const byOutsider = await portal.post(
      `/content/items/${item.id}/unshare`,
      { groups: group.id },
      outsider.token,
    );
    expect(byOutsider).toEqual({ notUnsharedFrom: [group.id], itemId: item.id });
    const unshared = await portal.post(
      `/content/items/${item.id}/unshare`,
      { groups: group.id },
      manager.token,
    );
    expect(unshared).toEqual({ notUnsharedFrom: [], itemId: item.id });
    expect((await events(group.id, "unshare")).at(-1)?.actor_username).toBe(manager.username);
  });

  it("hides another member's private item from a group manager, and lets an administrator share any item", async () => {
    const group = await staffedGroup("Private Items");
    const item = await portal.post(
      `/content/users/${outsider.username}/addItem`,
      { title: "Private Notes", type: "Web Map", text: "{}" },
      outsider.token,
    );
    const hidden = await portal.post(`/content/items/${item.id}/share`, { groups: group.id }, manager.token);
    expect(hidden.error.code).toBe(400);
    expect(hidden.error.message).toMatch(/not found|does not exist/i);
    const byAdmin = await portal.post(
      `/content/items/${item.id}/share`,
      { groups: group.id },
      portal.adminToken,
    );
    expect(byAdmin).toEqual({ notSharedWith: [], itemId: item.id });
    const after = await portal.get(`/content/items/${item.id}`, {}, outsider.token);
    expect(after.access).toBe("shared");
    const missing = await portal.post(`/content/items/${item.id}/share`, {}, manager.token);
    expect(missing.error.message).toMatch(/'groups'/);
    const badGroup = await portal.post(
      `/content/items/${item.id}/share`,
      { groups: "not-an-id!" },
      manager.token,
    );
    expect(badGroup.error.message).toMatch(/'groups'/);
  });

  it("refuses a manager sharing an item they see through another group into a group its owner is not in", async () => {
    // The owner shares a private item with one group only; a member of it manages a group of
    // their own. Sharing into that group would show the item to people the owner never chose.
    const through = await createGroup(outsider.token, { title: "Only Here", access: "org" });
    await portal.post(`/community/groups/${through.id}/addUsers`, { users: joiner.username }, outsider.token);
    const item = await portal.post(
      `/content/users/${outsider.username}/addItem`,
      { title: "For One Group", type: "Web Map", text: "{}" },
      outsider.token,
    );
    await portal.post(
      `/content/users/${outsider.username}/items/${item.id}/share`,
      { groups: through.id },
      outsider.token,
    );
    const own = await createGroup(joiner.token, { title: "Joiner's Own", access: "org" });
    await portal.post(`/community/groups/${own.id}/addUsers`, { users: member.username }, joiner.token);
    const widened = await portal.post(`/content/items/${item.id}/share`, { groups: own.id }, joiner.token);
    expect(widened).toEqual({ notSharedWith: [own.id], itemId: item.id });
    const seen = await portal.get(`/content/items/${item.id}`, {}, member.token);
    expect(seen.error?.code).toBe(400);
  });

  it("shows an administrator who views users only the groups of a user they may see", async () => {
    const role = await portal.post("/portals/self/createRole", { name: "User Viewer" }, portal.adminToken);
    await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: ["portal:admin:viewUsers", "portal:user:joinGroup"] } },
      portal.adminToken,
    );
    const viewer = await portal.addUser("gm_user_viewer");
    await portal.post(
      "/portals/self/updateUserRole",
      { user: viewer.username, role: role.id },
      portal.adminToken,
    );
    const secret = await createGroup(owner.token, { title: "Secret Plans", access: "private" });
    const open = await createGroup(owner.token, { title: "Open Plans", access: "org" });
    const listed = await portal.get(`/community/users/${owner.username}`, {}, viewer.token);
    const ids = listed.groups.map((g: { id: string }) => g.id);
    expect(ids).toContain(open.id);
    expect(ids).not.toContain(secret.id);
    // The owner still sees both in their own resource.
    const self = await portal.get("/community/self", {}, owner.token);
    expect(self.groups.map((g: { id: string }) => g.id)).toEqual(
      expect.arrayContaining([secret.id, open.id]),
    );
  });

  it("refuses joining or accepting an invitation to a role without portal:user:joinGroup, and member user searches by role or last sign-in", async () => {
    const role = await portal.post("/portals/self/createRole", { name: "No Joining" }, portal.adminToken);
    await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: ["portal:user:createItem"] } },
      portal.adminToken,
    );
    const limited = await portal.addUser("gm_no_join");
    await portal.post(
      "/portals/self/updateUserRole",
      { user: limited.username, role: role.id },
      portal.adminToken,
    );
    const { token } = limited;
    const group = await createGroup(owner.token, {
      title: "Door Without Joining",
      access: "org",
      autoJoin: true,
    });
    const join = await portal.post(`/community/groups/${group.id}/join`, {}, token);
    expect(join.error.code).toBe(403);
    await portal.post(`/community/groups/${group.id}/invite`, { users: limited.username }, owner.token);
    const [invitation] = (await portal.get(`/community/users/${limited.username}/invitations`, {}, token))
      .userInvitations;
    const accept = await portal.post(
      `/community/users/${limited.username}/invitations/${invitation.id}/accept`,
      {},
      token,
    );
    expect(accept.error.code).toBe(403);
    const search = await portal.get("/community/users", { q: "*" }, token);
    expect(search.error.code).toBe(403);

    const byRole = await portal.get("/community/users", { q: "role:org_admin" }, member.token);
    expect(byRole.error.message).toMatch(/'q'/);
    const byLastLogin = await portal.get(
      "/community/users",
      { q: "*", sortField: "lastlogin" },
      member.token,
    );
    expect(byLastLogin.error.message).toMatch(/'sortField'/);
    const asAdmin = await portal.get("/community/users", { q: "role:org_admin" }, portal.adminToken);
    expect(asAdmin.error).toBeUndefined();
  });

  it("gives invitations their email, type, dates and expiration, one by id, and lets them expire", async () => {
    const group = await createGroup(owner.token, { title: "Invitations", access: "org" });
    await portal.post(`/community/groups/${group.id}/invite`, { users: outsider.username }, owner.token);
    const [invitation] = (
      await portal.get(`/community/users/${outsider.username}/invitations`, {}, outsider.token)
    ).userInvitations;
    expect(invitation).toMatchObject({
      targetType: "group",
      targetId: group.id,
      groupId: group.id,
      email: `${outsider.username}@example.com`,
      role: "group_member",
      type: "user",
      dateAccepted: -1,
      username: outsider.username,
    });
    expect(invitation.expiration - invitation.created).toBe(14 * 24 * 60 * 60 * 1000);
    const one = await portal.get(
      `/community/users/${outsider.username}/invitations/${invitation.id}`,
      {},
      outsider.token,
    );
    expect(one).toEqual(invitation);
    const snooping = await portal.get(
      `/community/users/${outsider.username}/invitations/${invitation.id}`,
      {},
      member.token,
    );
    expect(snooping.error.code).toBe(403);
    const unknown = await portal.get(
      `/community/users/${outsider.username}/invitations/nope`,
      {},
      outsider.token,
    );
    expect(unknown.error.code).toBe(400);

    // Two weeks later the invitation has expired: not listed, not accepted; a new one replaces it.
    await portal.portico.db.kysely
      .updateTable("group_invitations")
      .set({ created: Date.now() - 15 * 24 * 60 * 60 * 1000 })
      .where("id", "=", invitation.id)
      .execute();
    expect(
      (await portal.get(`/community/users/${outsider.username}/invitations`, {}, outsider.token))
        .userInvitations,
    ).toEqual([]);
    const late = await portal.post(
      `/community/users/${outsider.username}/invitations/${invitation.id}/accept`,
      {},
      outsider.token,
    );
    expect(late.error.code).toBe(400);
    const reinvited = await portal.post(
      `/community/groups/${group.id}/invite`,
      { users: outsider.username },
      owner.token,
    );
    expect(reinvited).toEqual({ success: true, notInvited: [] });
    const [fresh] = (
      await portal.get(`/community/users/${outsider.username}/invitations`, {}, outsider.token)
    ).userInvitations;
    const declined = await portal.post(
      `/community/users/${outsider.username}/invitations/${fresh.id}/decline`,
      {},
      outsider.token,
    );
    expect(declined).toEqual({ success: true, id: fresh.id, username: outsider.username, groupId: group.id });
  });

  it("stores a user's properties, theirs to set, bounded in size and checked as a JSON object", async () => {
    expect(await portal.get(`/community/users/${joiner.username}/properties`, {}, joiner.token)).toEqual({
      properties: {},
    });
    const set = await portal.post(
      `/community/users/${joiner.username}/setProperties`,
      { properties: JSON.stringify({ mapViewer: "modern", landingPage: { url: "https://example.com" } }) },
      joiner.token,
    );
    expect(set).toEqual({ success: true });
    expect(await portal.get(`/community/users/${joiner.username}/properties`, {}, joiner.token)).toEqual({
      properties: { mapViewer: "modern", landingPage: { url: "https://example.com" } },
    });
    const asAdmin = await portal.get(`/community/users/${joiner.username}/properties`, {}, portal.adminToken);
    expect(asAdmin.properties.mapViewer).toBe("modern");
    const other = await portal.get(`/community/users/${joiner.username}/properties`, {}, outsider.token);
    expect(other.error.code).toBe(403);
    const otherSets = await portal.post(
      `/community/users/${joiner.username}/setProperties`,
      { properties: "{}" },
      outsider.token,
    );
    expect(otherSets.error.code).toBe(403);
    for (const bad of ["[1]", "not json", JSON.stringify({ big: "x".repeat(70_000) })]) {
      const r = await portal.post(
        `/community/users/${joiner.username}/setProperties`,
        { properties: bad },
        joiner.token,
      );
      expect(r.error.code).toBe(400);
      expect(r.error.message).toMatch(/'properties'/);
    }
    const missing = await portal.post(`/community/users/${joiner.username}/setProperties`, {}, joiner.token);
    expect(missing.error.message).toMatch(/properties/);
  });

  it("counts the tags of a user's items, for the user and administrators", async () => {
    const tagger = await portal.addUser("gm_tagger");
    for (const tags of ["rivers, lakes", "rivers", "Rivers, dams"]) {
      await portal.post(
        `/content/users/${tagger.username}/addItem`,
        { title: `Tagged ${tags}`, type: "Web Map", text: "{}", tags },
        tagger.token,
      );
    }
    const r = await portal.get(`/community/users/${tagger.username}/tags`, {}, tagger.token);
    expect(r).toEqual({
      tags: [
        { tag: "rivers", count: 3 },
        { tag: "dams", count: 1 },
        { tag: "lakes", count: 1 },
      ],
    });
    expect(
      (await portal.get(`/community/users/${tagger.username}/tags`, {}, portal.adminToken)).tags,
    ).toHaveLength(3);
    expect(
      (await portal.get(`/community/users/${tagger.username}/tags`, {}, outsider.token)).error.code,
    ).toBe(403);
    expect((await portal.get(`/community/users/nobody_here/tags`, {}, portal.adminToken)).error.code).toBe(
      400,
    );
  });
});
