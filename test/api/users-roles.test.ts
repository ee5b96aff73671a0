import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ALL_PRIVILEGES, BUILT_IN_PRIVILEGES } from "../../src/auth/privileges.js";
import { ADMIN, engine, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

/** A PostgreSQL-only test: on a SQLite run it is not there at all (rather than reported skipped). */
const itOnPostgres = engine === "postgres" ? it : () => {};

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
    // Asked for a token, as for a user that does not exist (test/api/existence.test.ts).
    const r = await portal.get(`/community/users/${member.username}`);
    expect(r.error.code).toBe(499);
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

  it("records nothing when the user already holds the role", async () => {
    const u = await portal.addUser("role_unchanged");
    const before = (await outbox(portal)).length;
    const r = await portal.post(
      "/portals/self/updateUserRole",
      { user: u.username, role: "org_user" },
      portal.adminToken,
    );
    expect(r).toEqual({ success: true });
    expect((await outbox(portal)).length).toBe(before);
  });

  it("moves a custom role's holder, named in another case, to a built-in role with its event", async () => {
    const role = await portal.post("/portals/self/createRole", { name: "Leaving Role" }, portal.adminToken);
    const u = await portal.addUser("leaving_holder", role.id);
    expect((await portal.get("/community/self", {}, u.token)).roleId).toBe(role.id);
    const r = await portal.post(
      "/portals/self/updateUserRole",
      { user: u.username.toUpperCase(), role: "org_publisher" },
      portal.adminToken,
    );
    expect(r).toEqual({ success: true });
    const self = await portal.get("/community/self", {}, u.token);
    expect(self.role).toBe("org_publisher");
    expect(self.roleId).toBeUndefined();
    expect([...self.privileges].sort()).toEqual([...BUILT_IN_PRIVILEGES.org_publisher].sort());
    const event = (await outbox(portal)).at(-1)!;
    expect(event).toMatchObject({
      source: "user",
      operation: "updateUserRole",
      object_id: u.username,
      uri: `/users/${u.username}/updateUserRole`,
      actor_username: ADMIN.username,
    });
    expect(JSON.parse(event.properties)).toEqual({ userRoleUpdatedTo: ["org_publisher"] });
  });

  itOnPostgres(
    "on PostgreSQL commits a default administrator's change to a built-in role as one statement, its event and change log row in its transaction",
    async () => {
      const u = await portal.addUser("one_statement");
      const db = portal.portico.db;
      // Background work (the webhook dispatcher, the change feed) runs transactions of its own.
      const inOne = vi.spyOn(
        db as unknown as { changeInOneStatement: (...args: unknown[]) => Promise<unknown[]> },
        "changeInOneStatement",
      );
      try {
        const r = await portal.post(
          "/portals/self/updateUserRole",
          { user: u.username, role: "org_publisher" },
          portal.adminToken,
        );
        expect(r).toEqual({ success: true });
        expect(inOne).toHaveBeenCalledTimes(1);
        expect(await inOne.mock.results[0]?.value).toHaveLength(1);
      } finally {
        inOne.mockRestore();
      }
      // The user's row, its event and the change log's row of it, of one transaction. xmin is the
      // 32-bit transaction id; the change log keeps the 64-bit one (xid8).
      const { rows } = await sql<{ user_xid: string; event_xid: string }>`
        SELECT u.xmin::text AS user_xid, e.xmin::text AS event_xid
        FROM users u
        JOIN events e ON e.object_id = u.username AND e.operation = 'updateUserRole'
        JOIN change_log l ON l.changes = ${"auth:"} || u.id || ${",events"}
          AND (l.xid::text::bigint % 4294967296)::text = u.xmin::text
        WHERE u.username_key = ${u.username.toLowerCase()}`.execute(db.kysely);
      expect(rows).toHaveLength(1);
      const row = rows[0]!;
      expect(row.event_xid).toBe(row.user_xid);
    },
  );

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
    // With the User role's privileges, so that User accounts are within what it may manage.
    const privileges = [
      "portal:admin:changeUserRoles",
      "portal:admin:viewUsers",
      ...BUILT_IN_PRIVILEGES.org_user,
    ];
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
    // It holds every privilege of the User role, so User accounts are within what it may manage.
    const held = [
      "portal:admin:manageRoles",
      "portal:admin:updateUsers",
      "portal:admin:disableUsers",
      "portal:admin:viewUsers",
      ...BUILT_IN_PRIVILEGES.org_user,
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
    expect((await setPrivileges(held.filter((p) => p !== "portal:admin:manageRoles"))).success).toBe(true);

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

describe("custom-role administrators and broader accounts", () => {
  let portal: TestPortal;
  /** A custom role holding every privilege there is, and one holding only viewUsers + updateUsers. */
  let fullRole: string;
  let victim: { username: string; password: string; token: string };

  async function customRole(name: string, privileges: readonly string[]): Promise<string> {
    const role = await portal.post("/portals/self/createRole", { name }, portal.adminToken);
    const set = await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges } },
      portal.adminToken,
    );
    if (!set.success) throw new Error(`setPrivileges: ${JSON.stringify(set)}`);
    return role.id as string;
  }

  beforeAll(async () => {
    portal = await startTestPortal();
    fullRole = await customRole("Everything", ALL_PRIVILEGES);
    victim = await portal.addUser("broad_victim", fullRole);
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("refuses a viewUsers + updateUsers role the password reset that would let it sign in as an account with every privilege and grant itself that role", async () => {
    const narrow = ["portal:admin:viewUsers", "portal:admin:updateUsers"];
    const attacker = await portal.addUser("desk_attacker", await customRole("Password Desk", narrow));
    const stolen = "taken-over-password-1";

    // The attack as reported: reset the broader account's password (no old password is asked of
    // an administrator), sign in with it, and use its changeUserRoles to take its role.
    const reset = await portal.post(
      `/community/users/${victim.username}/update`,
      { password: stolen },
      attacker.token,
    );
    const signIn = await portal.post("/generateToken", {
      username: victim.username,
      password: stolen,
      client: "requestip",
    });
    const grant =
      typeof signIn.token === "string"
        ? await portal.post(
            "/portals/self/updateUserRole",
            { user: attacker.username, role: fullRole },
            signIn.token,
          )
        : undefined;
    const attackerNow = await portal.get(`/community/users/${attacker.username}`, {}, portal.adminToken);
    expect({
      reset: reset.error?.code ?? "success",
      signedInAsVictim: typeof signIn.token === "string",
      granted: grant?.success === true,
      attackerPrivileges: [...attackerNow.privileges].sort(),
    }).toEqual({
      reset: 403,
      signedInAsVictim: false,
      granted: false,
      attackerPrivileges: [...narrow].sort(),
    });
    expect(reset.error.details[0]).toContain(`'${victim.username}'`);

    // The victim's password and sessions are untouched.
    expect((await portal.get("/community/self", {}, victim.token)).username).toBe(victim.username);
    await portal.signIn(victim.username, victim.password);
    // Its profile is out of reach too, not only its password.
    const profile = await portal.post(
      `/community/users/${victim.username}/update`,
      { description: "defaced" },
      attacker.token,
    );
    expect(profile.error.code).toBe(403);
  });

  it("refuses a manageRoles + updateUsers role narrowing a broader role to bring its holders within reach, and so the password reset after it", async () => {
    const desk = ["portal:admin:manageRoles", "portal:admin:viewUsers", "portal:admin:updateUsers"];
    const attacker = await portal.addUser("role_narrower", await customRole("Role Desk", desk));
    const broad = [...ALL_PRIVILEGES].filter((p) => p !== "portal:admin:manageSecurity");
    const broadRole = await customRole("Broad Target", broad);
    const holder = await portal.addUser("broad_holder", broadRole);
    const stolen = "taken-over-password-2";

    // The attack as reported: cut the broader role down to {viewUsers}, which the attacker holds;
    // its holder is then within the account rule, so reset its password and sign in as it.
    const narrowed = await portal.post(
      `/portals/self/roles/${broadRole}/setPrivileges`,
      { privileges: { privileges: ["portal:admin:viewUsers"] } },
      attacker.token,
    );
    const reset = await portal.post(
      `/community/users/${holder.username}/update`,
      { password: stolen },
      attacker.token,
    );
    expect({
      narrowed: narrowed.error?.code ?? "success",
      reset: reset.error?.code ?? "success",
    }).toEqual({ narrowed: 403, reset: 403 });
    expect(narrowed.error.details[0]).toMatch(/role 'Broad Target' .* the caller lacks portal:/);
    const after = await portal.get(`/portals/self/roles/${broadRole}/privileges`, {}, portal.adminToken);
    expect([...after.privileges].sort()).toEqual([...broad].sort());
    expect((await portal.get("/community/self", {}, holder.token)).username).toBe(holder.username);

    // Narrowing a role within its own privileges, and widening it within them, stay its to do.
    const within = await customRole("Within Desk", ["portal:admin:viewUsers", "portal:admin:updateUsers"]);
    const setWithin = (privileges: string[]) =>
      portal.post(
        `/portals/self/roles/${within}/setPrivileges`,
        { privileges: { privileges } },
        attacker.token,
      );
    expect((await setWithin(["portal:admin:viewUsers"])).success).toBe(true);
    expect((await setWithin(desk)).success).toBe(true);
    // A default administrator changes any role.
    expect(
      (
        await portal.post(
          `/portals/self/roles/${broadRole}/setPrivileges`,
          { privileges: { privileges: ["portal:admin:viewUsers"] } },
          portal.adminToken,
        )
      ).success,
    ).toBe(true);
  });

  it("refuses changeUserRoles, disableUsers and deleteUsers on a broader account, and allows them on an equal one", async () => {
    const held = [
      "portal:admin:viewUsers",
      "portal:admin:changeUserRoles",
      "portal:admin:disableUsers",
      "portal:admin:deleteUsers",
      ...BUILT_IN_PRIVILEGES.org_user,
    ];
    const role = await customRole("Account Desk", held);
    const desk = await portal.addUser("account_desk", role);
    const peer = await portal.addUser("account_peer", role);
    const act = (path: string, params: Record<string, unknown> = {}) => portal.post(path, params, desk.token);

    const demote = await act("/portals/self/updateUserRole", { user: victim.username, role: "org_user" });
    const disable = await act(`/community/users/${victim.username}/disable`);
    const remove = await act(`/community/users/${victim.username}/delete`);
    expect([demote, disable, remove].map((r) => r.error?.code ?? "success")).toEqual([403, 403, 403]);
    const after = await portal.get(`/community/users/${victim.username}`, {}, portal.adminToken);
    expect(after).toMatchObject({ roleId: fullRole, disabled: false });

    // An account holding the same role is within the desk's privileges.
    expect(
      (await act("/portals/self/updateUserRole", { user: peer.username, role: "org_user" })).success,
    ).toBe(true);
    expect((await act(`/community/users/${peer.username}/disable`)).success).toBe(true);
    expect((await act(`/community/users/${peer.username}/enable`)).success).toBe(true);
    expect((await act(`/community/users/${peer.username}/delete`)).success).toBe(true);
  });

  it("refuses reassigning content out of or into a broader account", async () => {
    const held = ["portal:admin:reassignItems", "portal:admin:viewItems", ...BUILT_IN_PRIVILEGES.org_user];
    const mover = await portal.addUser("content_mover", await customRole("Content Mover", held));
    const addItem = async (owner: { username: string; token: string }) => {
      const r = await portal.post(
        `/content/users/${owner.username}/addItem`,
        { title: `Item of ${owner.username}`, type: "Web Map", text: "{}" },
        owner.token,
      );
      return r.id as string;
    };
    const theirs = await addItem(victim);
    const taken = await portal.post(
      `/content/users/${victim.username}/items/${theirs}/reassign`,
      { targetUsername: mover.username },
      mover.token,
    );
    expect(taken.error.code).toBe(403);
    const mine = await addItem(mover);
    const planted = await portal.post(
      `/content/users/${mover.username}/items/${mine}/reassign`,
      { targetUsername: victim.username },
      mover.token,
    );
    expect(planted.error.code).toBe(403);
    const owners = await Promise.all(
      [theirs, mine].map(
        async (id) => (await portal.get(`/content/items/${id}`, {}, portal.adminToken)).owner,
      ),
    );
    expect(owners).toEqual([victim.username, mover.username]);
  });
});
