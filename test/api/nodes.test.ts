import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, engine, newStore, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { serviceAccessScenario } from "../helpers/service-access.js";

/** Polls `probe` until it returns true; change notifications between nodes arrive asynchronously. */
async function eventually(probe: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// Several nodes share one PostgreSQL database; SQLite is one process per data directory. Each
// engine's run declares only the behaviour that engine has.
if (engine === "postgres")
  describe("two nodes on one PostgreSQL schema", () => {
    const store = newStore();
    let a: TestPortal;
    let b: TestPortal;
    beforeAll(async () => {
      a = await startTestPortal({ store, keepStore: true });
      b = await startTestPortal({ store, keepStore: true });
    });
    afterAll(async () => {
      await b?.stop();
      await a?.stop();
      await store.destroy();
    });

    it("accepts on one node a token issued by the other", async () => {
      expect((await b.get("/community/self", {}, a.adminToken)).username).toBe(ADMIN.username);
    });

    it("shows a role change made on one node on the other, although the other had cached the token", async () => {
      const member = await a.addUser("two_node_member");
      expect((await b.get("/community/self", {}, member.token)).role).toBe("org_user");
      await a.post(
        "/portals/self/updateUserRole",
        { user: member.username, role: "org_publisher" },
        a.adminToken,
      );
      await eventually(
        async () => (await b.get("/community/self", {}, member.token)).role === "org_publisher",
        "node b reports the new role",
      );
    });

    it("refuses on one node the token of a user disabled on the other", async () => {
      const member = await a.addUser("two_node_disabled");
      expect((await b.get("/community/self", {}, member.token)).username).toBe(member.username);
      await a.post(`/community/users/${member.username}/disable`, {}, a.adminToken);
      await eventually(
        async () => (await b.get("/community/self", {}, member.token)).error?.code === 498,
        "node b refuses the token",
      );
    });

    it("applies every change of who may query a hosted layer made on one node on the other, which had the service cached", async () => {
      await serviceAccessScenario(a, b, "two_node_acc", (what, probe) =>
        eventually(probe, `node b shows: ${what}`),
      );
    });

    it("applies organization settings changed on one node on the other", async () => {
      expect((await b.get("/portals/self", {}, b.adminToken)).name).toBe("portico");
      await a.post("/portals/self/update", { name: "Changed on A" }, a.adminToken);
      await eventually(
        async () => (await b.get("/portals/self", {}, b.adminToken)).name === "Changed on A",
        "node b shows the new name",
      );
    });
  });

if (engine === "sqlite")
  describe("one process per SQLite data directory", () => {
    const store = newStore();
    let first: TestPortal;
    beforeAll(async () => {
      first = await startTestPortal({ store, keepStore: true });
    });
    afterAll(async () => {
      await first?.stop();
      await store.destroy();
    });

    it("refuses to start a second portal on the same data directory, naming it", async () => {
      await expect(startTestPortal({ store, keepStore: true })).rejects.toThrow(
        `another portico process is using ${store.dataDir}`,
      );
      // The first one is unaffected.
      expect((await first.get("/community/self", {}, first.adminToken)).role).toBe("org_admin");
    });
  });
