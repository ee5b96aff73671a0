import { afterAll, describe, expect, it } from "vitest";
import { newStore, outbox, startTestPortal } from "../helpers/portico.js";

describe("restart", () => {
  const store = newStore();
  afterAll(async () => {
    await store.destroy();
  });

  it("keeps the organization, users, custom roles, tokens and the event outbox", async () => {
    const first = await startTestPortal({ store, keepStore: true });
    const orgId = (await first.get("/portals/self", {}, first.adminToken)).id;
    await first.post(
      "/portals/self/update",
      { name: "Kept", allowedOrigins: ["https://kept.example.com"] },
      first.adminToken,
    );
    const member = await first.addUser("kept_member");
    const role = await first.post("/portals/self/createRole", { name: "Kept Role" }, first.adminToken);
    await first.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges: { privileges: ["portal:admin:viewUsers"] } },
      first.adminToken,
    );
    await first.post(
      "/portals/self/updateUserRole",
      { user: member.username, role: role.id },
      first.adminToken,
    );
    const events = await outbox(first);
    await first.stop();

    const second = await startTestPortal({ store, keepStore: true });
    try {
      const self = await second.get("/portals/self", {}, member.token);
      expect(self).toMatchObject({ id: orgId, name: "Kept", allowedOrigins: ["https://kept.example.com"] });
      expect(self.user).toMatchObject({ username: member.username, role: "org_admin", roleId: role.id });
      expect(self.user.privileges).toEqual(["portal:admin:viewUsers"]);
      // The second start found an administrator and created nothing: only its own sign-in is new.
      const after = await outbox(second);
      expect(after.slice(0, events.length)).toEqual(events);
      expect(after.slice(events.length).map((e) => e.operation)).toEqual(["signin"]);
    } finally {
      await second.stop();
    }
  });
});
