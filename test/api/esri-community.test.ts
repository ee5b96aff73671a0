import {
  acceptInvitation,
  addGroupUsers,
  createGroup,
  createItem,
  declineInvitation,
  getGroupUsers,
  getUser,
  getUserInvitation,
  getUserInvitations,
  getUserMembership,
  getUserProperties,
  getUserTags,
  inviteGroupUsers,
  isItemSharedWithGroup,
  isOrgAdmin,
  joinGroup,
  leaveGroup,
  searchGroupUsers,
  setUserProperties,
  shareItemWithGroup,
  unshareItemWithGroup,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, request } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Esri's client (@esri/arcgis-rest-portal 4.10.2) for users and groups: membership, joining and
 * leaving, the members list, invitations, a user's tags and properties, and sharing by callers
 * who do not own the item. Each call's documented answer is checked.
 */
describe("Esri client: users and groups", () => {
  let portal: TestPortal;
  let admin: ArcGISIdentityManager;
  let owner: ArcGISIdentityManager;
  let member: ArcGISIdentityManager;

  const signIn = (username: string, password: string) =>
    ArcGISIdentityManager.signIn({ username, password, portal: portal.api });

  beforeAll(async () => {
    portal = await startTestPortal();
    const ownerUser = await portal.addUser("esri_group_owner");
    const memberUser = await portal.addUser("esri_group_member");
    admin = await signIn(ADMIN.username, ADMIN.password);
    owner = await signIn(ownerUser.username, ownerUser.password);
    member = await signIn(memberUser.username, memberUser.password);
  });
  afterAll(async () => {
    await portal.stop();
  });

  // The client's options type asks for an item `id` too (it extends the sharing options); the
  // function reads only the group.
  const membershipIn = (groupId: string, authentication: ArcGISIdentityManager) =>
    getUserMembership({ id: "", groupId, authentication });

  async function newGroup(title: string, extra: Record<string, unknown> = {}) {
    const { group } = await createGroup({
      group: { title, access: "org", tags: ["esri"], ...extra },
      authentication: owner,
    });
    return group.id as string;
  }

  it("tells organization administrators apart with isOrgAdmin", async () => {
    expect(await isOrgAdmin({ authentication: admin })).toBe(true);
    expect(await isOrgAdmin({ authentication: member })).toBe(false);
  });

  it("joins and leaves a group with joinGroup and leaveGroup; getUserMembership follows", async () => {
    const id = await newGroup("Esri Auto Join", { autoJoin: true });
    expect(await membershipIn(id, member)).toBe("none");
    expect(await joinGroup({ id, authentication: member })).toEqual({ success: true, groupId: id });
    expect(await membershipIn(id, member)).toBe("member");
    expect(await membershipIn(id, owner)).toBe("owner");
    const self = await getUser({ authentication: member });
    expect(self.groups?.find((g) => g.id === id)?.userMembership?.memberType).toBe("member");
    expect(await leaveGroup({ id, authentication: member })).toEqual({ success: true, groupId: id });
    expect(await membershipIn(id, member)).toBe("none");
    expect((await getGroupUsers(id, { authentication: owner })).users).toEqual([]);
  });

  it("asks to join a group that needs approval with joinGroup", async () => {
    const id = await newGroup("Esri Approval");
    expect(await joinGroup({ id, authentication: member })).toEqual({ success: true, groupId: id });
    expect(await membershipIn(id, member)).toBe("none");
  });

  it("searches a group's members with searchGroupUsers", async () => {
    const id = await newGroup("Esri Members");
    await addGroupUsers({ id, users: [member.username], admins: [admin.username], authentication: owner });
    const all = await searchGroupUsers(id, { authentication: member });
    expect(all).toMatchObject({ total: 3, start: 1, num: 25, nextStart: -1 });
    expect(all.owner).toMatchObject({ username: owner.username, memberType: "owner" });
    expect(all.users.map((u) => u.username)).toEqual(
      [admin.username, owner.username, member.username].sort(),
    );
    const admins = await searchGroupUsers(id, {
      memberType: "admin",
      sortField: "username",
      sortOrder: "desc",
      authentication: owner,
    });
    expect(admins.users.map((u) => u.username)).toEqual([admin.username, owner.username].sort().reverse());
    const page = await searchGroupUsers(id, { num: 1, start: 1, name: "member", authentication: owner });
    expect(page).toMatchObject({ total: 1, nextStart: -1 });
    expect(page.users[0]).toMatchObject({ username: member.username, memberType: "member" });
    const joinedBefore = await searchGroupUsers(id, { joined: [0, Date.now()], authentication: owner });
    expect(joinedBefore.total).toBe(3);
  });

  it("reads, accepts and declines invitations with getUserInvitations, getUserInvitation, acceptInvitation and declineInvitation", async () => {
    const first = await newGroup("Esri Invite One", { isInvitationOnly: true });
    const second = await newGroup("Esri Invite Two", { isInvitationOnly: true });
    for (const id of [first, second]) {
      await inviteGroupUsers({
        id,
        users: [member.username],
        role: "group_member",
        expiration: 20160,
        authentication: owner,
      });
    }
    const { userInvitations } = await getUserInvitations({ authentication: member });
    const mine = userInvitations.filter((i) => i.groupId === first || i.groupId === second);
    expect(mine).toHaveLength(2);
    for (const invitation of mine) {
      expect(invitation).toMatchObject({
        targetType: "group",
        email: `${member.username}@example.com`,
        role: "group_member",
        type: "user",
        accepted: false,
        dateAccepted: -1,
        username: member.username,
        fromUsername: { username: owner.username },
      });
      expect(invitation.expiration).toBeGreaterThan(invitation.created);
    }
    const toFirst = mine.find((i) => i.groupId === first);
    const toSecond = mine.find((i) => i.groupId === second);
    if (!toFirst || !toSecond) throw new Error("invitations missing");
    expect(await getUserInvitation({ invitationId: toFirst.id, authentication: member })).toEqual(toFirst);

    expect(await acceptInvitation({ invitationId: toFirst.id, authentication: member })).toEqual({
      success: true,
      id: toFirst.id,
      username: member.username,
      groupId: first,
    });
    expect(await membershipIn(first, member)).toBe("member");
    expect(await declineInvitation({ invitationId: toSecond.id, authentication: member })).toEqual({
      success: true,
      id: toSecond.id,
      username: member.username,
      groupId: second,
    });
    expect(await membershipIn(second, member)).toBe("none");
  });

  it("lists the tags of a user's items with getUserTags", async () => {
    for (const tags of [["esri", "water"], ["esri"]]) {
      await createItem({
        item: { title: `Tags ${tags.join(" ")}`, type: "Web Map", tags },
        authentication: member,
      });
    }
    const { tags } = await getUserTags({ authentication: member });
    expect(tags).toEqual([
      { tag: "esri", count: 2 },
      { tag: "water", count: 1 },
    ]);
    const byName = await getUserTags({ username: member.username, authentication: admin });
    expect(byName.tags).toEqual(tags);
  });

  it("stores and reads a user's properties with setUserProperties and getUserProperties", async () => {
    // Before any are set, the client fills in mapViewer "modern".
    expect(await getUserProperties(member.username, { authentication: member })).toEqual({
      mapViewer: "modern",
    });
    const set = await setUserProperties(
      member.username,
      { mapViewer: "classic", landingPage: { url: "https://example.com/home" } },
      { authentication: member },
    );
    expect(set).toEqual({ success: true });
    expect(await getUserProperties(member.username, { authentication: member })).toEqual({
      mapViewer: "classic",
      landingPage: { url: "https://example.com/home" },
    });
  });

  it("shares and unshares another user's item as an administrator with shareItemWithGroup, isItemSharedWithGroup and unshareItemWithGroup", async () => {
    const item = await createItem({
      item: { title: "Owned Elsewhere", type: "Web Map" },
      authentication: member,
    });
    const id = item.id as string;
    // The owner is in the group; the administrator is not, and is added and removed by the client.
    const notMine = await newGroup("Esri Admin Shares");
    await addGroupUsers({ id: notMine, users: [member.username], authentication: owner });
    // The client answers undefined, not false, when its search finds nothing.
    expect(await isItemSharedWithGroup({ id, groupId: notMine, authentication: admin })).toBeFalsy();
    const shared = await shareItemWithGroup({
      id,
      groupId: notMine,
      owner: member.username,
      authentication: admin,
    });
    expect(shared).toMatchObject({ itemId: id, notSharedWith: [] });
    expect(await isItemSharedWithGroup({ id, groupId: notMine, authentication: admin })).toBe(true);
    expect(await membershipIn(notMine, admin)).toBe("none");

    // The administrator already in the group: the client reads that from the admin's groups.
    const mine = await newGroup("Esri Admin Member");
    await addGroupUsers({ id: mine, users: [member.username, admin.username], authentication: owner });
    const again = await shareItemWithGroup({
      id,
      groupId: mine,
      owner: member.username,
      authentication: admin,
    });
    expect(again).toMatchObject({ itemId: id, notSharedWith: [] });
    expect(await isItemSharedWithGroup({ id, groupId: mine, authentication: member })).toBe(true);
    expect(await membershipIn(mine, admin)).toBe("member");

    const unshared = await unshareItemWithGroup({
      id,
      groupId: mine,
      owner: member.username,
      authentication: admin,
    });
    expect(unshared).toMatchObject({ itemId: id, notUnsharedFrom: [] });
    expect(await isItemSharedWithGroup({ id, groupId: mine, authentication: admin })).toBeFalsy();
  });

  it("shares and unshares another member's item as the group's owner (not an administrator)", async () => {
    const item = await createItem({
      item: { title: "For The Group", type: "Web Map" },
      authentication: member,
    });
    const id = item.id as string;
    await request(`${portal.api}/content/users/${member.username}/items/${id}/share`, {
      params: { org: true },
      authentication: member,
    });
    const groupId = await newGroup("Esri Owner Shares");
    const shared = await shareItemWithGroup({ id, groupId, owner: member.username, authentication: owner });
    expect(shared).toMatchObject({ itemId: id, notSharedWith: [] });
    expect(await isItemSharedWithGroup({ id, groupId, authentication: owner })).toBe(true);
    const unshared = await unshareItemWithGroup({
      id,
      groupId,
      owner: member.username,
      authentication: owner,
    });
    expect(unshared).toMatchObject({ itemId: id, notUnsharedFrom: [] });
    expect(await isItemSharedWithGroup({ id, groupId, authentication: owner })).toBeFalsy();
  });
});
