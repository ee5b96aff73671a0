import {
  createGroup,
  createGroupNotification,
  createItem,
  createOrgNotification,
  getGroupCategorySchema,
  getPortalSettings,
  getUniqueServiceName,
  getUserNotifications,
  isServiceNameAvailable,
  removeNotification,
  searchCommunityUsers,
  searchGroupContent,
  searchGroups,
  searchItems,
  searchUsers,
  shareItemWithGroup,
  updateItem,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, request } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Esri's client (@esri/arcgis-rest-portal 4.10.2) searching items, groups, a group's content and
 * users, sending and reading notifications, and reading the portal helpers, on a running portico.
 */
describe("Esri arcgis-rest-js search, notification and portal functions", () => {
  let portal: TestPortal;
  let admin: ArcGISIdentityManager;
  let owner: ArcGISIdentityManager;
  let member: ArcGISIdentityManager;
  let groupId: string;
  /** The publisher's token from generateToken, unbound: the client's token is bound to its referer. */
  let ownerToken: string;
  const ids: Record<string, string> = {};

  const signIn = async (username: string, password: string) =>
    ArcGISIdentityManager.signIn({ username, password, portal: portal.api });

  beforeAll(async () => {
    portal = await startTestPortal();
    const a = await portal.addUser("search_admin", "org_admin");
    const o = await portal.addUser("search_owner", "org_publisher");
    const m = await portal.addUser("search_member");
    admin = await signIn(a.username, a.password);
    owner = await signIn(o.username, o.password);
    member = await signIn(m.username, m.password);
    ownerToken = o.token;
    await portal.post(
      `/community/users/${m.username}/update`,
      { fullname: "Marta Quill", access: "org" },
      m.token,
    );

    const add = async (key: string, item: Record<string, unknown>) => {
      const created = await createItem({ item: item as never, authentication: owner });
      ids[key] = created.id;
    };
    await add("oslo", {
      title: "Oslo Parks",
      type: "Web Map",
      tags: ["parks", "norway"],
      extent: [
        [10.6, 59.8],
        [10.9, 60.0],
      ],
      categories: ["/Categories/Parks"],
    });
    await add("quito", {
      title: "Quito Rivers",
      type: "Web Map",
      tags: ["rivers"],
      extent: [
        [-78.6, -0.3],
        [-78.4, -0.1],
      ],
      categories: ["/Categories/Water"],
    });
    await add("notes", { title: "Oslo Parks notes", type: "Document Link", tags: ["parks"] });

    const group = await createGroup({
      group: { title: "Search Group", access: "org" },
      authentication: owner,
    });
    groupId = group.group.id;
    await request(`${portal.api}/community/groups/${groupId}/addUsers`, {
      params: { users: member.username },
      authentication: owner,
    });
    await shareItemWithGroup({ id: ids.oslo as string, groupId, authentication: owner });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("searchItems honours filter as an exact field match beside q", async () => {
    const exact = await searchItems({ q: "", filter: 'title:"Oslo Parks"', authentication: owner } as never);
    expect(exact.results.map((r) => r.id)).toEqual([ids.oslo]);
    const typed = await searchItems({ q: "parks", filter: 'type:"Web Map"', authentication: owner } as never);
    expect(typed.results.map((r) => r.id)).toEqual([ids.oslo]);
    expect(typed.total).toBe(1);
  });

  it("searchItems answers countFields as aggregations over every match", async () => {
    const counted = await searchItems({
      q: "owner:search_owner",
      countFields: "type,tags",
      countSize: 2,
      num: 1,
      authentication: owner,
    } as never);
    expect(counted.results).toHaveLength(1);
    expect(counted.aggregations).toEqual({
      counts: [
        {
          fieldName: "type",
          fieldValues: [
            { value: "web map", count: 2 },
            { value: "document link", count: 1 },
          ],
        },
        {
          fieldName: "tags",
          fieldValues: [
            { value: "parks", count: 2 },
            { value: "norway", count: 1 },
          ],
        },
      ],
    });
  });

  it("searchItems finds items whose extent meets bbox, and items by category", async () => {
    const near = await searchItems({
      q: "",
      params: { bbox: "10,59,11,61" },
      authentication: owner,
    } as never);
    expect(near.results.map((r) => r.id)).toEqual([ids.oslo]);
    expect(near.results[0]?.extent).toEqual([
      [10.6, 59.8],
      [10.9, 60],
    ]);
    const water = await searchItems({
      q: "",
      categories: ["/Categories/Water"],
      authentication: owner,
    } as never);
    expect(water.results.map((r) => r.id)).toEqual([ids.quito]);
    expect(water.results[0]?.categories).toEqual(["/Categories/Water"]);
    // updateItem replaces the categories; the search follows.
    await updateItem({
      item: { id: ids.quito, categories: ["/Categories/Parks"] } as never,
      authentication: owner,
    });
    const parks = await searchItems({
      q: "",
      categories: ["/categories/parks"],
      sortField: "title",
      authentication: owner,
    } as never);
    expect(parks.results.map((r) => r.id)).toEqual([ids.oslo, ids.quito]);
  });

  it("searchGroups finds the group by title", async () => {
    const found = await searchGroups({ q: "title:Search", authentication: member });
    expect(found.results.map((g) => g.id)).toEqual([groupId]);
    expect(found.total).toBe(1);
  });

  it("searchGroupContent searches only the group's items", async () => {
    const found = await searchGroupContent({ groupId, q: "parks", authentication: member });
    expect(found.results.map((r) => r.id)).toEqual([ids.oslo]);
    expect(found).toMatchObject({ total: 1, start: 1, nextStart: -1 });
  });

  it("searchUsers (organization) and searchCommunityUsers find members by name", async () => {
    const org = await searchUsers({ q: "marta", authentication: admin });
    expect(org.results.map((u) => u.username)).toEqual(["search_member"]);
    expect(org.results[0]).toMatchObject({ fullName: "Marta Quill", email: expect.any(String) });
    const community = await searchCommunityUsers({
      q: "username:search_*",
      sortField: "username",
      authentication: member,
    });
    expect(community.results.map((u) => u.username)).toEqual([
      "search_admin",
      "search_member",
      "search_owner",
    ]);
    // A member sees other members' public profile, not their e-mail.
    expect(community.results[0]?.email).toBeUndefined();
    expect(community.total).toBe(3);
  });

  it("createGroupNotification and createOrgNotification store notifications that getUserNotifications lists and removeNotification removes", async () => {
    const sent = await createGroupNotification({
      id: groupId,
      subject: "Parks",
      message: "The park maps are shared.",
      authentication: owner,
    });
    expect(sent.success).toBe(true);
    const org = await createOrgNotification({
      users: [member.username],
      subject: "Maintenance",
      message: "Down on Sunday.",
      notificationChannelType: "builtin",
      authentication: admin,
    });
    expect(org).toEqual({ success: true });

    const listed = await getUserNotifications({ authentication: member });
    expect(listed.notifications).toHaveLength(2);
    const [newest, older] = listed.notifications;
    expect(newest).toMatchObject({
      type: "org_notification",
      target: member.username,
      targetType: "user",
      received: expect.any(Number),
      data: { subject: "Maintenance", message: "Down on Sunday.", fromUser: "search_admin" },
    });
    expect(older).toMatchObject({
      type: "group_notification",
      data: { groupId, groupTitle: "Search Group", subject: "Parks", fromUser: "search_owner" },
    });

    const removed = await removeNotification({ id: older?.id as string, authentication: member });
    expect(removed).toEqual({ success: true, notificationId: older?.id });
    const left = await getUserNotifications({ authentication: member });
    expect(left.notifications.map((n) => n.id)).toEqual([newest?.id]);
  });

  it("getPortalSettings answers the organization's settings", async () => {
    const settings = await getPortalSettings(undefined, { authentication: member });
    expect(settings).toMatchObject({
      allowedRedirectUris: [],
      helperServices: expect.any(Object),
      informationalBanner: { enabled: false },
    });
  });

  it("isServiceNameAvailable and getUniqueServiceName check hosted service names", async () => {
    const created = await portal.post(
      "/content/users/search_owner/createService",
      { outputType: "featureService", createParameters: { name: "Parks" } },
      ownerToken,
    );
    expect(created.success).toBe(true);
    expect(await isServiceNameAvailable("parks", "Feature Service", owner)).toEqual({ available: false });
    expect(await isServiceNameAvailable("Lakes", "Feature Service", owner)).toEqual({ available: true });
    // The client counts from `step`; it must be given 0 (without it, it asks for one name forever).
    expect(await getUniqueServiceName("Parks", "Feature Service", owner, 0)).toBe("Parks_1");
  });

  it("getGroupCategorySchema answers the schema the group's owner assigned", async () => {
    expect(await getGroupCategorySchema(groupId, { authentication: member })).toEqual({ categorySchema: [] });
    const schema = [{ title: "Categories", categories: [{ title: "Parks", categories: [] }] }];
    const assigned = await request(`${portal.api}/community/groups/${groupId}/assignCategorySchema`, {
      params: { categorySchema: { categorySchema: schema } },
      authentication: owner,
    });
    expect(assigned.success).toBe(true);
    expect(await getGroupCategorySchema(groupId, { authentication: member })).toEqual({
      categorySchema: schema,
    });
  });
});
