import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Db, later, openDatabase } from "../../src/db/database.js";
import { migrateToLatest } from "../../src/db/migrate.js";

/**
 * Two nodes' databases over one PostgreSQL schema, in process: how one hears of the other's
 * commits through the change log (src/db/change-feed.ts), whatever order transactions commit in.
 */
const databaseUrl =
  process.env.PORTICO_TEST_ENGINE === "postgres" ? process.env.PORTICO_TEST_DATABASE_URL : undefined;

/** Polls `probe` until it returns true; the change log is read asynchronously. */
async function eventually(probe: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

if (databaseUrl)
  describe("the change log between two nodes (PostgreSQL)", () => {
    const schema = `t_${randomBytes(6).toString("hex")}`;
    const dirs: string[] = [];
    let a: Db;
    let b: Db;
    const heardOnB: (string | undefined)[] = [];
    const open = async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-changelog-"));
      dirs.push(dir);
      return openDatabase({ databaseUrl, dataDir: dir, schema });
    };
    beforeAll(async () => {
      a = await open();
      await migrateToLatest(a);
      b = await open();
      b.feed.subscribe("auth", (subject) => heardOnB.push(subject));
    });
    afterAll(async () => {
      await a?.close();
      await b?.close();
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
      for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
    });

    const touch = (subject: string, hold?: Promise<void>) =>
      a.transaction(
        async (trx) => {
          // A write first, so the transaction has its id before it waits.
          await sql`UPDATE roles SET modified = 0 WHERE id = ${subject}`.execute(trx);
          await hold;
        },
        { changes: [`auth:${subject}`] },
      );

    it("tells the other node of a commit, and only once it has committed", async () => {
      let release = () => {};
      const held = touch("late", new Promise<void>((resolve) => (release = resolve)));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(heardOnB).not.toContain("late");
      release();
      await held;
      await eventually(() => heardOnB.includes("late"), "b hears of the commit");
    });

    it("does not skip a transaction that took its id before another but committed after it", async () => {
      let release = () => {};
      const earlier = touch("earlier", new Promise<void>((resolve) => (release = resolve)));
      await new Promise((resolve) => setTimeout(resolve, 100));
      await touch("later");
      await eventually(() => heardOnB.includes("later"), "b hears of the later commit");
      // b has read past the earlier transaction's id (it was in progress then).
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(heardOnB).not.toContain("earlier");
      release();
      await earlier;
      await eventually(() => heardOnB.includes("earlier"), "b hears of the earlier transaction");
    });

    it("reads the log without a NOTIFY (one lost to a crash after the commit)", async () => {
      // A row committed as a transaction would write it, and nobody wakes b.
      await a.kysely.transaction().execute(async (trx) => {
        await later(
          trx,
          sql`INSERT INTO change_log (node, changes) VALUES ('crashed', 'auth:silent')`.compile(trx),
        );
      });
      await eventually(() => heardOnB.includes("silent"), "b reads the row on its own", 5000);
    });

    it("tells nothing of a transaction that rolled back", async () => {
      await expect(
        a.transaction(
          async (trx) => {
            await sql`UPDATE roles SET modified = 0 WHERE id = 'gone'`.execute(trx);
            throw new Error("rolls back");
          },
          { changes: ["auth:gone"] },
        ),
      ).rejects.toThrow("rolls back");
      await touch("after-rollback");
      await eventually(() => heardOnB.includes("after-rollback"), "b hears of the next commit");
      expect(heardOnB).not.toContain("gone");
    });
  });

if (!databaseUrl)
  describe("the change log on SQLite", () => {
    it("is not made: one process per database hears its own changes at commit", async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-changelog-"));
      const db = await openDatabase({ dataDir: dir });
      try {
        await migrateToLatest(db);
        const { rows } = await sql<{ name: string }>`
          SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'change_log'`.execute(db.kysely);
        expect(rows).toEqual([]);
        const heard: (string | undefined)[] = [];
        db.feed.subscribe("auth", (subject) => heard.push(subject));
        await db.transaction(async () => {}, { changes: ["auth:someone"] });
        expect(heard).toEqual(["someone"]);
      } finally {
        await db.close();
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  });
