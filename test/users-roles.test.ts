import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, outbox, startTestPortal, type TestPortal } from "./helpers/portico.js";

const createUserPath = (portal: TestPortal) =>
  `${portal.portico.address}/portaladmin/security/users/createUser`;

describe("users", () => {
  let portal: TestPortal;
  let member: { username: string; password: string; token: string };
  beforeAll(async () => {
    portal = await startTestPortal();
    member = await portal.addUser("member_one");
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("creates a user and records the user add event in the outbox", async () => {
    const r = await portal.post(
      createUserPath(portal),
      {
        username: "new_person",
        password: "a-long-password",
        firstname: "New",
        lastname: "Person",
        email: "new@example.com",
        role: "org_publisher",
      },
      portal.adminToken,
    );
    expect(r).toMatchObject({ status: "success", success: true, username: "new_person" });
    const user = await portal.get("/community/users/new_person", {}, portal.adminToken);
    expect(user).toMatchObject({
      username: "new_person",
      fullName: "New Person",
      email: "new@example.com",
      role: "org_publisher",
      disabled: false,
      lastLogin: -1,
    });
    expect(user.privileges).toContain("portal:publisher:publishFeatures");
    const event = (await outbox(portal)).find((e) => e.object_id === "new_person" && e.operation === "add");
    expect(event).toMatchObject({ source: "user", uri: "/users/add", actor_username: ADMIN.username });
  });

  it("refuses a duplicate username regardless of case, and writes nothing", async () => {
    const before = (await outbox(portal)).length;
    const r = await portal.post(
      createUserPath(portal),
      { username: "MEMBER_ONE", password: "a-long-password", firstname: "A", lastname: "B", email: "a@b.c" },
      portal.adminToken,
    );
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("MEMBER_ONE");
    expect((await outbox(portal)).length).toBe(before);
  });

  it("names every invalid createUser parameter", async () => {
    const r = await portal.post(
      createUserPath(portal),
      { username: "x", password: "short", firstname: "A", lastname: "B", email: "not-an-email" },
      portal.adminToken,
    );
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'username'");
    expect(r.error.details.join(" ")).toContain("'password'");
    expect(r.error.details.join(" ")).toContain("'email'");
  });

  it("refuses createUser to a member with 403 and to anonymous callers with 499", async () => {
    const params = {
      username: "sneaky_user",
      password: "a-long-password",
      firstname: "A",
      lastname: "B",
      email: "a@b.c",
    };
    expect((await portal.post(createUserPath(portal), params, member.token)).error.code).toBe(403);
    expect((await portal.post(createUserPath(portal), params)).error.code).toBe(499);
  });

  it("shows members a trimmed profile of others and the full one of themselves", async () => {
    const other = await portal.get(`/community/users/${ADMIN.username}`, {}, member.token);
    expect(other.username).toBe(ADMIN.username);
    expect(other.email).toBeUndefined();
    expect(other.privileges).toBeUndefined();
    const self = await portal.get("/community/self", {}, member.token);
    expect(self.email).toBe("member_one@example.com");
    expect(self.role).toBe("org_user");
  });

  it("hides users from anonymous callers of a private organization", async () => {
    const r = await portal.get(`/community/users/${member.username}`);
    expect(r.error.code).toBe(400);
  });

  it("lets a member update their own profile but not someone else's", async () => {
    const ok = await portal.post(
      `/community/users/${member.username}/update`,
      { description: "Hydrologist", tags: "water,rivers" },
      member.token,
    );
    expect(ok.success).toBe(true);
    const self = await portal.get("/community/self", {}, member.token);
    expect(self.description).toBe("Hydrologist");
    expect(self.tags).toEqual(["water", "rivers"]);
    const denied = await portal.post(
      `/community/users/${ADMIN.username}/update`,
      { description: "x" },
      member.token,
    );
    expect(denied.error.code).toBe(403);
  });

  it("ends every token of a user whose password changes", async () => {
    const u = await portal.addUser("pw_changer");
    const second = await portal.signIn(u.username, u.password);
    const noOld = await portal.post(
      `/community/users/${u.username}/update`,
      { password: "brand-new-pass" },
      u.token,
    );
    expect(noOld.error.message).toContain("'oldPassword'");
    const r = await portal.post(
      `/community/users/${u.username}/update`,
      { password: "brand-new-pass", oldPassword: u.password },
      u.token,
    );
    expect(r.success).toBe(true);
    for (const t of [u.token, second])
      expect((await portal.get("/community/self", {}, t)).error.code).toBe(498);
    expect(await portal.signIn(u.username, "brand-new-pass")).toBeTypeOf("string");
  });

  it("disables a user, ending its tokens and refusing sign-in, and enables it again", async () => {
    const u = await portal.addUser("to_disable");
    expect((await portal.post(`/community/users/${u.username}/disable`, {}, portal.adminToken)).success).toBe(
      true,
    );
    expect((await portal.get("/community/self", {}, u.token)).error.code).toBe(498);
    const signIn = await portal.post("/generateToken", { username: u.username, password: u.password });
    expect(signIn.error.details).toEqual(["This account has been disabled."]);
    expect((await portal.post(`/community/users/${u.username}/enable`, {}, portal.adminToken)).success).toBe(
      true,
    );
    expect(await portal.signIn(u.username, u.password)).toBeTypeOf("string");
    const ops = (await outbox(portal)).filter((e) => e.object_id === u.username).map((e) => e.operation);
    expect(ops).toEqual(["add", "signin", "disable", "enable", "signin"]);
  });

  it("deletes a user and its tokens", async () => {
    const u = await portal.addUser("to_delete");
    expect((await portal.post(`/community/users/${u.username}/delete`, {}, portal.adminToken)).success).toBe(
      true,
    );
    expect((await portal.get("/community/self", {}, u.token)).error.code).toBe(498);
    expect((await portal.get(`/community/users/${u.username}`, {}, portal.adminToken)).error.code).toBe(400);
    const last = (await outbox(portal)).at(-1)!;
    expect(last).toMatchObject({ operation: "delete", uri: `/users/${u.username}/delete` });
  });

  it("never leaves the organization without an enabled administrator", async () => {
    const selfDelete = await portal.post(`/community/users/${ADMIN.username}/delete`, {}, portal.adminToken);
    expect(selfDelete.error.code).toBe(400);
    const demote = await portal.post(
      "/portals/self/updateUserRole",
      { user: ADMIN.username, role: "org_user" },
      portal.adminToken,
    );
    expect(demote.error.message).toContain("at least one enabled administrator");
    expect((await portal.get("/community/self", {}, portal.adminToken)).role).toBe("org_admin");
  });

  it("lists users with paging", async () => {
    const first = await portal.get(
      "/portals/self/users",
      { num: 2, sortField: "username" },
      portal.adminToken,
    );
    expect(first.num).toBe(2);
    expect(first.users).toHaveLength(2);
    expect(first.nextStart).toBe(3);
    const all: string[] = [];
    let start = 1;
    while (start !== -1) {
      const page = await portal.get("/portals/self/users", { start, num: 2 }, portal.adminToken);
      all.push(...page.users.map((u: { username: string }) => u.username));
      start = page.nextStart;
    }
    expect(all).toHaveLength(first.total);
    expect([...all].sort()).toEqual(all);
    expect(
      (await portal.get("/portals/self/users", { num: 101 }, portal.adminToken)).error.message,
    ).toContain("'num'");
    expect((await portal.get("/portals/self/users", {}, member.token)).error.code).toBe(403);
  });
});

describe("updateUserRole and custom roles", () => {
  let portal: TestPortal;
  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("sets a built-in role and records userRoleUpdatedTo", async () => {
    const u = await portal.addUser("role_target");
    const r = await portal.post(
      "/portals/self/updateUserRole",
      { user: u.username, role: "org_publisher" },
      portal.adminToken,
    );
    expect(r).toEqual({ success: true });
    expect((await portal.get("/community/self", {}, u.token)).role).toBe("org_publisher");
    const event = (await outbox(portal)).at(-1)!;
    expect(event).toMatchObject({ source: "user", operation: "updateUserRole", object_id: u.username });
    expect(JSON.parse(event.properties)).toEqual({ userRoleUpdatedTo: ["org_publisher"] });
  });

  it("refuses an unknown role or user naming the parameter, and records nothing", async () => {
    const before = (await outbox(portal)).length;
    const badRole = await portal.post(
      "/portals/self/updateUserRole",
      { user: ADMIN.username, role: "org_superuser" },
      portal.adminToken,
    );
    expect(badRole.error.message).toContain("'role'");
    const badUser = await portal.post(
      "/portals/self/updateUserRole",
      { user: "ghost_user", role: "org_user" },
      portal.adminToken,
    );
    expect(badUser.error.message).toContain("ghost_user");
    const missing = await portal.post(
      "/portals/self/updateUserRole",
      { role: "org_user" },
      portal.adminToken,
    );
    expect(missing.error.message).toContain("'user'");
    expect((await outbox(portal)).length).toBe(before);
  });

  it("checks the privilege: 403 for a member, 499 anonymous", async () => {
    const m = await portal.addUser("plain_member");
    const asMember = await portal.post(
      "/portals/self/updateUserRole",
      { user: m.username, role: "org_admin" },
      m.token,
    );
    expect(asMember.error.code).toBe(403);
    const anonymous = await portal.post("/portals/self/updateUserRole", {
      user: m.username,
      role: "org_admin",
    });
    expect(anonymous.error.code).toBe(499);
    expect((await portal.get("/community/self", {}, m.token)).role).toBe("org_user");
  });

  it("creates, reads, renames, lists and deletes a custom role with events", async () => {
    const created = await portal.post(
      "/portals/self/createRole",
      { name: "Analyst", description: "Runs analysis" },
      portal.adminToken,
    );
    expect(created.success).toBe(true);
    const id = created.id as string;
    expect(await portal.get(`/portals/self/roles/${id}`, {}, portal.adminToken)).toMatchObject({
      id,
      name: "Analyst",
      description: "Runs analysis",
    });
    const addEvent = (await outbox(portal)).at(-1)!;
    expect(addEvent).toMatchObject({ source: "role", operation: "add", uri: "/roles/add", object_id: id });
    expect(JSON.parse(addEvent.properties)).toEqual({ name: ["Analyst"] });

    expect(
      (await portal.post(`/portals/self/roles/${id}/update`, { name: "Senior Analyst" }, portal.adminToken))
        .success,
    ).toBe(true);
    expect((await outbox(portal)).at(-1)).toMatchObject({ operation: "update", uri: `/roles/${id}/update` });
    const list = await portal.get("/portals/self/roles", {}, portal.adminToken);
    expect(list.roles.map((r: { name: string }) => r.name)).toContain("Senior Analyst");
    expect(list.nextStart).toBe(-1);

    expect((await portal.post(`/portals/self/roles/${id}/delete`, {}, portal.adminToken)).success).toBe(true);
    expect((await outbox(portal)).at(-1)).toMatchObject({ operation: "delete", uri: `/roles/${id}/delete` });
    expect((await portal.get(`/portals/self/roles/${id}`, {}, portal.adminToken)).error.code).toBe(400);
  });

  it("refuses a duplicate role name, an over-long name and an unknown privilege", async () => {
    await portal.post("/portals/self/createRole", { name: "Unique Role" }, portal.adminToken);
    const dup = await portal.post("/portals/self/createRole", { name: "unique role" }, portal.adminToken);
    expect(dup.error.message).toContain("unique role");
    const long = await portal.post("/portals/self/createRole", { name: "x".repeat(129) }, portal.adminToken);
    expect(long.error.message).toContain("'name'");
    const role = await portal.post("/portals/self/createRole", { name: "Priv Test" }, portal.adminToken);
    const bad = await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: ["portal:user:createItem", "portal:admin:everything"] } },
      portal.adminToken,
    );
    expect(bad.error.message).toContain("portal:admin:everything");
    const malformed = await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: "{not json" },
      portal.adminToken,
    );
    expect(malformed.error.message).toContain("'privileges'");
    expect(
      (await portal.get(`/portals/self/roles/${role.id}/privileges`, {}, portal.adminToken)).privileges,
    ).toEqual([]);
  });

  it("lets a custom-role administrator assign only roles within its own privileges, and not touch default administrators", async () => {
    const role = await portal.post("/portals/self/createRole", { name: "Role Changer" }, portal.adminToken);
    const privileges = ["portal:admin:changeUserRoles", "portal:admin:viewUsers", "portal:user:joinGroup"];
    await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges } },
      portal.adminToken,
    );
    const changer = await portal.addUser("role_changer", role.id);
    const other = await portal.addUser("role_changed");
    const assign = (user: string, to: string) =>
      portal.post("/portals/self/updateUserRole", { user, role: to }, changer.token);

    // Making itself, or anyone, an administrator or a publisher would grant what it lacks.
    const self = await assign(changer.username, "org_admin");
    expect(self.error.code).toBe(403);
    expect(self.error.details[0]).toContain("privileges the caller does not hold");
    expect((await assign(other.username, "org_publisher")).error.code).toBe(403);
    expect((await portal.get("/community/self", {}, other.token)).role).toBe("org_user");
    // A default administrator's role is for default administrators to change.
    expect((await assign(ADMIN.username, "org_user")).error.code).toBe(403);
    expect((await portal.get("/community/self", {}, portal.adminToken)).role).toBe("org_admin");
    // Within its own privileges it may act: its own role, for instance.
    expect((await assign(other.username, role.id)).success).toBe(true);
    expect((await portal.get("/community/self", {}, other.token)).roleId).toBe(role.id);
  });

  it("keeps custom-role administrators from widening their own role or managing default administrators", async () => {
    const role = await portal.post("/portals/self/createRole", { name: "Account Keeper" }, portal.adminToken);
    const held = [
      "portal:admin:manageRoles",
      "portal:admin:updateUsers",
      "portal:admin:disableUsers",
      "portal:admin:viewUsers",
      "portal:user:joinGroup",
    ];
    await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: held } },
      portal.adminToken,
    );
    const keeper = await portal.addUser("account_keeper", role.id);
    const member = await portal.addUser("kept_member");
    const setPrivileges = (privileges: string[]) =>
      portal.post(
        `/portals/self/roles/${role.id}/setPrivileges`,
        { privileges: { privileges } },
        keeper.token,
      );

    const widened = await setPrivileges([...held, "portal:admin:changeUserRoles"]);
    expect(widened.error.code).toBe(403);
    expect(widened.error.details[0]).toContain("portal:admin:changeUserRoles");
    expect(
      (await portal.get(`/portals/self/roles/${role.id}/privileges`, {}, portal.adminToken)).privileges,
    ).toEqual(held);
    // Narrowing, or anything within what it holds, is its to do.
    expect((await setPrivileges(held.filter((p) => p !== "portal:user:joinGroup"))).success).toBe(true);

    // A default administrator's account: neither its password nor its enabled state.
    const reset = await portal.post(
      `/community/users/${ADMIN.username}/update`,
      { password: "taken-over-1234" },
      keeper.token,
    );
    expect(reset.error.code).toBe(403);
    expect(
      (await portal.post(`/community/users/${ADMIN.username}/disable`, {}, keeper.token)).error.code,
    ).toBe(403);
    expect((await portal.get("/community/self", {}, portal.adminToken)).username).toBe(ADMIN.username);
    // Other members' accounts are within its privileges.
    expect(
      (await portal.post(`/community/users/${member.username}/update`, { description: "kept" }, keeper.token))
        .success,
    ).toBe(true);
    expect((await portal.post(`/community/users/${member.username}/disable`, {}, keeper.token)).success).toBe(
      true,
    );
  });

  it("grants exactly the custom role's privileges to its holders", async () => {
    const role = await portal.post("/portals/self/createRole", { name: "User Viewer" }, portal.adminToken);
    const privileges = ["portal:admin:viewUsers", "portal:user:joinGroup"];
    expect(
      (
        await portal.post(
          `/portals/self/roles/${role.id}/setPrivileges`,
          { privileges: { privileges } },
          portal.adminToken,
        )
      ).success,
    ).toBe(true);
    const u = await portal.addUser("custom_holder");
    expect(
      (
        await portal.post(
          "/portals/self/updateUserRole",
          { user: u.username, role: role.id },
          portal.adminToken,
        )
      ).success,
    ).toBe(true);
    const self = await portal.get("/community/self", {}, u.token);
    expect(self).toMatchObject({ role: "org_admin", roleId: role.id });
    expect([...self.privileges].sort()).toEqual([...privileges].sort());
    // viewUsers lets them list users, but not change roles.
    expect((await portal.get("/portals/self/users", {}, u.token)).total).toBeGreaterThan(1);
    const change = await portal.post(
      "/portals/self/updateUserRole",
      { user: u.username, role: "org_admin" },
      u.token,
    );
    expect(change.error.code).toBe(403);
    // A role in use cannot be deleted.
    const del = await portal.post(`/portals/self/roles/${role.id}/delete`, {}, portal.adminToken);
    expect(del.error.message).toContain("assigned");
    // Dropping the admin privilege re-derives the holder's reported role.
    await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: ["portal:user:joinGroup"] } },
      portal.adminToken,
    );
    expect((await portal.get("/community/self", {}, u.token)).role).toBe("org_user");
  });
});
