import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Db, openDatabase } from "./database.js";
import { migrateToLatest } from "./migrate.js";

/** Group commit on a real SQLite file: many transactions share a commit, and fail alone. */
describe("SQLite transactions", () => {
  let dir: string;
  let db: Db;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-db-"));
    db = await openDatabase({ dataDir: dir });
    await migrateToLatest(db);
  });
  afterEach(async () => {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const role = (id: string) => ({
    id,
    name: id,
    name_key: id,
    description: "",
    privileges: "[]",
    created: 1,
    modified: 1,
  });

  it("commits concurrent transactions, rolling back only the one that fails", async () => {
    const published: (string | undefined)[] = [];
    db.feed.subscribe("auth", (subject) => published.push(subject));
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        db.transaction(
          async (trx) => {
            await trx
              .insertInto("roles")
              .values(role(`r${i}`))
              .execute();
            if (i === 7) throw new Error("unit 7 fails after writing");
            return i;
          },
          { changes: (n) => [`auth:${n}`] },
        ),
      ),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(19);
    expect(results[7]).toMatchObject({ status: "rejected", reason: new Error("unit 7 fails after writing") });
    const ids = (await db.kysely.selectFrom("roles").select("id").execute()).map((r) => r.id);
    expect(ids.sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => `r${i}`)
        .filter((id) => id !== "r7")
        .sort(),
    );
    // Only committed units announce their changes.
    expect(published.sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => String(i))
        .filter((n) => n !== "7")
        .sort(),
    );
  });

  it("keeps the effects of earlier units of a group visible to later ones", async () => {
    const [, seen] = await Promise.all([
      db.transaction((trx) => trx.insertInto("roles").values(role("first")).execute()),
      db.transaction(async (trx) => (await trx.selectFrom("roles").select("id").execute()).map((r) => r.id)),
    ]);
    expect(seen).toEqual(["first"]);
  });

  it("refuses a second process on the same data directory", async () => {
    await expect(openDatabase({ dataDir: dir })).rejects.toThrow(/another portico process is using/);
  });
});
