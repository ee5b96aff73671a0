import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely";
import { describe, expect, it } from "vitest";
import { fixedStatement } from "./fixed-statement.js";
import type { Database } from "./schema.js";

/** Compiles only: a fixed statement is about the text Kysely makes, not about running it. */
const kysely = new Kysely<Database>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (db) => new PostgresIntrospector(db),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});

describe("fixedStatement", () => {
  it("gives the text Kysely compiles, with each call's values and the statement's constants", () => {
    const statement = fixedStatement((q, id: string, modified: number, roleId: string | null) =>
      q.updateTable("users").set({ role: "org_user", role_id: roleId, modified }).where("id", "=", id),
    );
    const built = (id: string, modified: number, roleId: string | null) =>
      kysely
        .updateTable("users")
        .set({ role: "org_user", role_id: roleId, modified })
        .where("id", "=", id)
        .compile();
    for (const [id, modified, roleId] of [
      ["a", 1, null],
      ["b", 2, "r1"],
    ] as const) {
      const compiled = statement(kysely, id, modified, roleId);
      expect(compiled.sql).toBe(built(id, modified, roleId).sql);
      expect(compiled.parameters).toEqual(built(id, modified, roleId).parameters);
    }
  });

  it("refuses a statement that transforms a value, or leaves one out", () => {
    const lowered = fixedStatement((q, name: string) =>
      q.selectFrom("users").select("id").where("username_key", "=", name.toLowerCase()),
    );
    expect(() => lowered(kysely, "JDoe")).toThrow(/transformed/);
    const unused = fixedStatement((q, _name: string) => q.selectFrom("users").select("id"));
    expect(() => unused(kysely, "jdoe")).toThrow(/does not use value 0/);
  });
});
