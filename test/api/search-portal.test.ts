import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_NOTIFICATIONS_SENT_PER_HOUR } from "../../src/users/notification.repository.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Issue 15's search parameters, user searches, notifications, portal helpers and group category
 * schemas over plain HTTP: bad input named in the error envelope, who may do what, and the limits.
 * The documented answers through Esri's client are in esri-search-portal.test.ts.
 */

type User = { username: string; password: string; token: string };

let portal: TestPortal;
let admin: User;
let owner: User;
let member: User;
let outsider: User;
let groupId: string;
let itemId: string;

/** The parameter an error names, from `details` ("Invalid value for parameter 'x': …"). */
function refusal(answer: { error?: { code: number; message: string; details?: string[] } }) {
  return answer.error;
}

beforeAll(async () => {
  portal = await startTestPortal();
  admin = await portal.addUser("sp_admin", "org_admin");
  owner = await portal.addUser("sp_owner", "org_publisher");
  member = await portal.addUser("sp_member");
  outsider = await portal.addUser("sp_outsider");
  await portal.post(`/community/users/${outsider.username}/update`, { access: "private" }, outsider.token);
  const group = await portal.post(
    "/community/createGroup",
    { title: "SP Group", access: "private" },
    owner.token,
  );
  groupId = group.group.id;
  await portal.post(`/community/groups/${groupId}/addUsers`, { users: member.username }, owner.token);
  const item = await portal.post(
    `/content/users/${owner.username}/addItem`,
    { title: "Fjord", type: "Web Map", extent: "5,60,6,61", categories: "/Categories/Water" },
    owner.token,
  );
  itemId = item.id;
  await portal.post(
    `/content/users/${owner.username}/items/${itemId}/share`,
    { groups: groupId },
    owner.token,
  );
});
afterAll(async () => {
  await portal.stop();
});

describe("item search parameters", () => {
  it.each([
    ["filter", { filter: "parks" }, "a filter term is field"],
    ["filter", { filter: 'colour:"red"' }, "unknown field"],
    ["countFields", { countFields: "owner" }, "can be counted"],
    ["countFields", { countFields: "type,tags,access,categories" }, "at most 3"],
    ["countSize", { countSize: 201, countFields: "type" }, "200"],
    ["bbox", { bbox: "1,2,3" }, "four numbers"],
    ["bbox", { bbox: "0,80,10,-80" }, "ymin"],
    ["categories", { categories: "Water" }, "starting with '/'"],
    ["categories", { categories: JSON.stringify(Array.from({ length: 9 }, () => ["/a"])) }, "at most 8"],
  ])("refuses a bad %s, naming it", async (name, params, reason) => {
    const answer = await portal.get("/search", params, owner.token);
    expect(answer.error?.code).toBe(400);
    expect(JSON.stringify(answer.error)).toContain(`'${name}'`);
    expect(JSON.stringify(answer.error)).toContain(reason);
  });

  it("finds by a bbox across the antimeridian only what lies on either side of it", async () => {
    const across = await portal.get("/search", { bbox: "170,50,10,70" }, owner.token);
    expect(across.results.map((r: { id: string }) => r.id)).toEqual([itemId]);
    const pacific = await portal.get("/search", { bbox: "170,50,-170,70" }, owner.token);
    expect(pacific.total).toBe(0);
  });

  it("refuses an item extent outside WGS 84 or inverted, and clears it with clearEmptyFields", async () => {
    const bad = await portal.post(
      `/content/users/${owner.username}/addItem`,
      { title: "Bad", type: "Web Map", extent: "10,0,5,1" },
      owner.token,
    );
    expect(JSON.stringify(refusal(bad))).toContain("'extent'");
    const update = `/content/users/${owner.username}/items/${itemId}/update`;
    expect((await portal.post(update, { extent: "", clearEmptyFields: true }, owner.token)).success).toBe(
      true,
    );
    expect((await portal.get(`/content/items/${itemId}`, {}, owner.token)).extent).toEqual([]);
    await portal.post(update, { extent: "5,60,6,61" }, owner.token);
  });

  it("counts only what the caller may see", async () => {
    const seen = await portal.get("/search", { q: "fjord", countFields: "categories" }, outsider.token);
    expect(seen.total).toBe(0);
    expect(seen.aggregations).toEqual({ counts: [{ fieldName: "categories", fieldValues: [] }] });
    const byMember = await portal.get("/search", { q: "fjord", countFields: "categories" }, member.token);
    expect(byMember.aggregations.counts[0].fieldValues).toEqual([{ value: "/categories/water", count: 1 }]);
  });
});

describe("group content search", () => {
  it("answers members, and hides a private group from others as a missing one", async () => {
    const found = await portal.get(`/content/groups/${groupId}/search`, { q: "fjord" }, member.token);
    expect(found.results.map((r: { id: string }) => r.id)).toEqual([itemId]);
    const hidden = await portal.get(`/content/groups/${groupId}/search`, { q: "fjord" }, outsider.token);
    expect(hidden.error?.code).toBe(400);
    const anonymous = await portal.get(`/content/groups/${groupId}/search`, { q: "fjord" });
    expect(anonymous.error?.code).toBe(499);
  });
});

describe("user searches", () => {
  it("keeps the organization's search to those who view users", async () => {
    expect((await portal.get("/portals/self/users/search", { q: "sp" }, member.token)).error?.code).toBe(403);
    const all = await portal.get("/portals/self/users/search", { q: "username:sp_*" }, admin.token);
    expect(all.results.map((u: { username: string }) => u.username).sort()).toEqual([
      "sp_admin",
      "sp_member",
      "sp_outsider",
      "sp_owner",
    ]);
  });

  it("shows members neither private profiles nor a way to search by e-mail", async () => {
    const found = await portal.get("/community/users", { q: "username:sp_*", num: 100 }, member.token);
    expect(found.results.map((u: { username: string }) => u.username)).not.toContain("sp_outsider");
    const byEmail = await portal.get("/community/users", { q: "email:someone@example.com" }, member.token);
    expect(JSON.stringify(byEmail.error)).toContain("unknown field 'email'");
    expect((await portal.get("/community/users", { q: "sp" })).error?.code).toBe(499);
    const own = await portal.get("/community/users", { q: "username:sp_outsider" }, outsider.token);
    expect(own.results).toHaveLength(1);
  });

  it("pages and sorts", async () => {
    const page = await portal.get(
      "/portals/self/users/search",
      { q: "username:sp_*", sortField: "username", sortOrder: "desc", num: 2, start: 2 },
      admin.token,
    );
    expect(page.results.map((u: { username: string }) => u.username)).toEqual(["sp_outsider", "sp_member"]);
    expect(page).toMatchObject({ total: 4, start: 2, num: 2, nextStart: 4 });
  });
});

describe("notifications", () => {
  const notify = (token: string, params: Record<string, unknown>) =>
    portal.post(
      `/community/groups/${groupId}/createNotification`,
      { subject: "s", message: "m", ...params },
      token,
    );

  it("lets a member who does not manage the group notify one member, never everyone", async () => {
    expect((await notify(member.token, { notifyAll: true })).error?.code).toBe(403);
    expect((await notify(member.token, { users: `${owner.username},${member.username}` })).error?.code).toBe(
      403,
    );
    expect((await notify(member.token, { users: owner.username })).success).toBe(true);
    const ownerList = await portal.get(`/community/users/${owner.username}/notifications`, {}, owner.token);
    expect(ownerList.notifications[0].data).toMatchObject({ fromUser: member.username, groupId });
  });

  it("refuses those who cannot see the group, and recipients outside it", async () => {
    expect((await notify(outsider.token, { notifyAll: true })).error?.code).toBe(400);
    const stranger = await notify(owner.token, { users: outsider.username });
    expect(JSON.stringify(stranger.error)).toContain("'users'");
  });

  it("refuses bad input, naming the parameter, and stores nothing", async () => {
    const before = await portal.get(`/community/users/${member.username}/notifications`, {}, member.token);
    for (const [name, params] of [
      ["subject", { subject: "x".repeat(257) }],
      ["message", { message: "" }],
      ["notificationChannelType", { notificationChannelType: "push" }],
      ["users", { users: Array.from({ length: 101 }, (_, i) => `user_${i}`).join(",") }],
    ] as const) {
      const answer = await notify(owner.token, params);
      expect(JSON.stringify(answer.error), name).toContain(`'${name}'`);
    }
    const org = await portal.post(
      "/portals/self/createNotification",
      { users: `${member.username},nobody_here`, message: "m" },
      admin.token,
    );
    expect(JSON.stringify(org.error)).toContain("nobody_here");
    const after = await portal.get(`/community/users/${member.username}/notifications`, {}, member.token);
    expect(after.notifications).toEqual(before.notifications);
  });

  it("keeps notifications to their recipient, and the organization's to administrators", async () => {
    const theirs = await portal.get(`/community/users/${member.username}/notifications`, {}, admin.token);
    expect(theirs.error?.code).toBe(403);
    const sent = await portal.post(
      "/portals/self/createNotification",
      { users: member.username, message: "m" },
      owner.token,
    );
    expect(sent.error?.code).toBe(403);
    const missing = await portal.post(
      `/community/users/${member.username}/notifications/0123456789abcdef0123456789abcdef/delete`,
      {},
      member.token,
    );
    expect(missing.error?.code).toBe(400);
  });

  it("bounds the notifications one user sends in an hour, counting only what was sent", async () => {
    const db = portal.portico.db.kysely;
    const idOf = async (username: string) =>
      (
        await db
          .selectFrom("users")
          .select("id")
          .where("username_key", "=", username)
          .executeTakeFirstOrThrow()
      ).id;
    const hour = 60 * 60 * 1000;
    const thisHour = Date.now() - (Date.now() % hour);
    const spend = async (username: string, sent: number, windowStart = thisHour) => {
      const sender_id = await idOf(username);
      await db.deleteFrom("notification_quotas").where("sender_id", "=", sender_id).execute();
      await db
        .insertInto("notification_quotas")
        .values({ sender_id, window_start: windowStart, sent })
        .execute();
    };
    const sentBy = async (username: string) =>
      Number(
        (
          await db
            .selectFrom("notification_quotas")
            .select("sent")
            .where("sender_id", "=", await idOf(username))
            .executeTakeFirstOrThrow()
        ).sent,
      );
    const listOf = async (who: User) =>
      (await portal.get(`/community/users/${who.username}/notifications`, {}, who.token)).notifications;

    // A member with one notification left of this hour's quota sends it, and no more.
    await spend(member.username, MAX_NOTIFICATIONS_SENT_PER_HOUR - 1);
    expect((await notify(member.token, { users: owner.username })).success).toBe(true);
    const before = await listOf(owner);
    const over = await notify(member.token, { users: owner.username });
    expect(over.error).toMatchObject({ code: 400, messageCode: "GEN_0429" });
    expect(over.error.details[0]).toContain(`${MAX_NOTIFICATIONS_SENT_PER_HOUR} notifications`);
    expect(await listOf(owner)).toEqual(before);
    expect(await sentBy(member.username)).toBe(MAX_NOTIFICATIONS_SENT_PER_HOUR);
    // A new hour counts again from zero.
    await spend(member.username, MAX_NOTIFICATIONS_SENT_PER_HOUR, thisHour - hour);
    expect((await notify(member.token, { users: owner.username })).success).toBe(true);
    expect(await sentBy(member.username)).toBe(1);

    // The organization's notifications count per recipient: two do not fit in one place.
    await spend(admin.username, MAX_NOTIFICATIONS_SENT_PER_HOUR - 1);
    const memberBefore = await listOf(member);
    const two = await portal.post(
      "/portals/self/createNotification",
      { users: `${member.username},${owner.username}`, message: "m" },
      admin.token,
    );
    expect(two.error?.messageCode).toBe("GEN_0429");
    expect(await listOf(member)).toEqual(memberBefore);
    expect(await sentBy(admin.username)).toBe(MAX_NOTIFICATIONS_SENT_PER_HOUR - 1);
    const one = await portal.post(
      "/portals/self/createNotification",
      { users: member.username, message: "m" },
      admin.token,
    );
    expect(one.success).toBe(true);
    await db.deleteFrom("notification_quotas").execute();
  });

  it("keeps the newest 500 notifications of a user", async () => {
    const user = await portal.portico.db.kysely
      .selectFrom("users")
      .select("id")
      .where("username_key", "=", owner.username)
      .executeTakeFirstOrThrow();
    await portal.portico.db.kysely.deleteFrom("user_notifications").where("user_id", "=", user.id).execute();
    const rows = Array.from({ length: 500 }, (_, i) => ({
      id: `old${String(i).padStart(29, "0")}`,
      user_id: user.id,
      type: "org_notification",
      subject: "old",
      message: "old",
      data: "{}",
      created: 1000 + i,
    }));
    for (let i = 0; i < rows.length; i += 100) {
      await portal.portico.db.kysely
        .insertInto("user_notifications")
        .values(rows.slice(i, i + 100))
        .execute();
    }
    await portal.post(
      "/portals/self/createNotification",
      { users: owner.username, message: "new" },
      admin.token,
    );
    const list = await portal.get(`/community/users/${owner.username}/notifications`, {}, owner.token);
    expect(list.notifications).toHaveLength(500);
    expect(list.notifications[0].data.message).toBe("new");
    expect(list.notifications.at(-1).id).toBe(`old${String(1).padStart(29, "0")}`);
  });
});

describe("portal helpers", () => {
  it("keeps the service-name check to publishers and names bad parameters", async () => {
    const asUser = await portal.get(
      "/portals/self/isServiceNameAvailable",
      { name: "x", type: "Feature Service" },
      member.token,
    );
    expect(asUser.error?.code).toBe(403);
    const badType = await portal.get(
      "/portals/self/isServiceNameAvailable",
      { name: "x", type: "Image Service" },
      owner.token,
    );
    expect(JSON.stringify(badType.error)).toContain("'type'");
    const noName = await portal.get(
      "/portals/self/isServiceNameAvailable",
      { type: "Feature Service" },
      owner.token,
    );
    expect(JSON.stringify(noName.error)).toContain("name");
    expect(
      await portal.get(
        "/portals/self/isServiceNameAvailable",
        { name: "Any", type: "map service" },
        owner.token,
      ),
    ).toEqual({ available: true });
  });

  it("shows anonymous callers of a private organization no redirect URIs or helper services", async () => {
    await portal.post(
      "/portals/self/update",
      { allowedRedirectUris: ["https://app.example.com/callback"] },
      portal.adminToken,
    );
    const anonymous = await portal.get("/portals/self/settings");
    expect(anonymous).toMatchObject({ allowedRedirectUris: [], helperServices: {} });
    const signedIn = await portal.get("/portals/self/settings", {}, member.token);
    expect(signedIn.allowedRedirectUris).toEqual(["https://app.example.com/callback"]);
  });
});

describe("group category schemas", () => {
  const assign = (token: string, categorySchema: unknown) =>
    portal.post(`/community/groups/${groupId}/assignCategorySchema`, { categorySchema }, token);

  it("lets only the group's managers assign and delete it", async () => {
    const schema = { categorySchema: [{ title: "Categories", categories: [{ title: "Water" }] }] };
    expect((await assign(member.token, schema)).error?.code).toBe(403);
    expect((await assign(owner.token, schema)).success).toBe(true);
    const read = await portal.get(`/community/groups/${groupId}/categorySchema`, {}, member.token);
    expect(read.categorySchema[0].categories[0].title).toBe("Water");
    const hidden = await portal.get(`/community/groups/${groupId}/categorySchema`, {}, outsider.token);
    expect(hidden.error?.code).toBe(400);
    expect(
      (await portal.post(`/community/groups/${groupId}/deleteCategorySchema`, {}, member.token)).error?.code,
    ).toBe(403);
    expect(
      (await portal.post(`/community/groups/${groupId}/deleteCategorySchema`, {}, owner.token)).success,
    ).toBe(true);
    expect(await portal.get(`/community/groups/${groupId}/categorySchema`, {}, owner.token)).toEqual({
      categorySchema: [],
    });
  });

  it("refuses a malformed schema, naming categorySchema", async () => {
    for (const bad of ["not json", { categorySchema: [{ title: "a/b" }] }, [{ categories: [] }]]) {
      const answer = await assign(owner.token, bad);
      expect(JSON.stringify(answer.error)).toContain("categorySchema");
    }
  });
});
