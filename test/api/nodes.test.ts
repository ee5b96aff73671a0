import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pendingMigrations } from "../../src/db/migrate.js";
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

// Schemas other than portico's come and go in a shared database (another application's, another
// test file's). Reading their catalog entries while another session drops them fails ('schema
// "…" does not exist'), so nothing portico runs at start may read them: Kysely's own introspector,
// which its migrator uses to find its tables, lists every schema (see SchemaIntrospector).
if (engine === "postgres")
  describe("a PostgreSQL database shared with other schemas", () => {
    const other = newStore();
    let portal: TestPortal;
    const admin = async (text: string) => {
      const client = new pg.Client({ connectionString: process.env.PORTICO_TEST_DATABASE_URL });
      await client.connect();
      try {
        await client.query(text);
      } finally {
        await client.end();
      }
    };
    beforeAll(async () => {
      // Another schema with tables, Kysely's bookkeeping tables among them.
      await admin(`CREATE SCHEMA ${other.schema};
        CREATE TABLE ${other.schema}.kysely_migration (name varchar(255) PRIMARY KEY, timestamp varchar(255));
        CREATE TABLE ${other.schema}.elsewhere (id serial PRIMARY KEY)`);
      portal = await startTestPortal();
    });
    afterAll(async () => {
      await portal?.stop();
      await other.destroy();
    });

    it("looks for its migration tables in its own schema only", async () => {
      const { db } = portal.portico;
      for (const handle of [db.writer, db.kysely]) {
        const tables = await handle.introspection.getTables({ withInternalKyselyTables: true });
        expect(new Set(tables.map((t) => t.schema))).toEqual(new Set([portal.store.schema]));
        expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["kysely_migration", "users"]));
        expect((await handle.introspection.getSchemas()).map((s) => s.name)).toEqual([portal.store.schema]);
      }
      // What the migrator found is portico's own bookkeeping: every migration applied.
      expect(await pendingMigrations(db)).toEqual([]);
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
