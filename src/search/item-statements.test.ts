import {
  type CompiledQuery,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from "kysely";
import { describe, expect, it } from "vitest";
import type { Engine } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { ItemStatements } from "./item-statements.js";
import { ITEM_FIELDS, parseQuery } from "./query.js";
import {
  countItems,
  countItemValues,
  findItems,
  type ItemCriteria,
  type SearchContext,
  type SearchViewer,
} from "./search.repository.js";

/** Kysely of either engine that compiles and never connects. */
function compiler(engine: Engine): Kysely<Database> {
  return new Kysely<Database>({
    dialect:
      engine === "sqlite"
        ? {
            createAdapter: () => new SqliteAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (db) => new SqliteIntrospector(db),
            createQueryCompiler: () => new SqliteQueryCompiler(),
          }
        : {
            createAdapter: () => new PostgresAdapter(),
            createDriver: () => new DummyDriver(),
            createIntrospector: (db) => new PostgresIntrospector(db),
            createQueryCompiler: () => new PostgresQueryCompiler(),
          },
  });
}

const ORG = "0123456789abcdef0123456789abcdef";
const member = (userId: string): SearchViewer => ({ userId, seesAll: false, orgIsPublic: true });
const criteria = (q: string, categories?: string[][]): ItemCriteria => ({
  node: parseQuery(q, ITEM_FIELDS),
  categories,
});
const sort = { column: "modified", direction: "desc" } as const;
const page = { offset: 0, limit: 10 };

/** Only the text and the values: what a driver sends. */
const sent = (c: CompiledQuery) => ({ sql: c.sql, parameters: [...c.parameters] });

describe.each(["sqlite", "postgres"] as const)("ItemStatements (%s)", (engine) => {
  const q = compiler(engine);
  const ctx = (deadline: number): SearchContext =>
    engine === "sqlite" ? { engine, deadline } : { engine, deadline: undefined };

  it("sends what a fresh compilation sends, on first use and from the cache", () => {
    const statements = new ItemStatements(q);
    const searches: [ItemCriteria, SearchViewer][] = [
      [criteria("owner:Alice"), member("u1")],
      [criteria("owner:bob"), member("u2")],
      [criteria("tags:Parks"), member("u1")],
      [criteria("tags:roads"), { userId: null, seesAll: false, orgIsPublic: true }],
      [criteria('type:"Web Map"'), member("u3")],
      [criteria('type:"feature service"'), { userId: "admin", seesAll: true, orgIsPublic: false }],
      [criteria("owner:carol AND (tags:a OR NOT type:csv)"), member("u1")],
      [criteria("owner:dave AND (tags:b OR NOT type:pdf)"), member("u4")],
      [criteria("access:shared", [["/categories/a", "/categories/b"], ["/categories/c"]]), member("u5")],
      [criteria("access:public", [["/categories/x", "/categories/y"], ["/categories/z"]]), member("u6")],
    ];
    for (let round = 0; round < 2; round++) {
      for (const [c, viewer] of searches) {
        const deadline = 1_700_000_000_000 + round;
        expect(sent(statements.count(c, ORG, viewer, ctx(deadline)))).toEqual(
          sent(countItems(q, c, ORG, viewer, ctx(deadline))),
        );
        expect(sent(statements.page(c, ORG, viewer, sort, page, ctx(deadline)))).toEqual(
          sent(findItems(q, c, ORG, viewer, sort, page, ctx(deadline))),
        );
        expect(sent(statements.countValues(c, ORG, viewer, "tags", 5, ctx(deadline)))).toEqual(
          sent(countItemValues(q, c, ORG, viewer, "tags", 5, ctx(deadline))),
        );
      }
    }
    // Seven shapes (owner, tags and type each by a member, tags anonymously, type by an
    // administrator, the tree, the categories), each with its three statements.
    expect(statements.cachedShapes).toBe(7 * 3);
  });

  it("learns a shape when it comes again, not on its first search", () => {
    const statements = new ItemStatements(q);
    const first = statements.page(criteria("owner:alice"), ORG, member("u1"), sort, page, ctx(1));
    expect(statements.cachedShapes).toBe(0);
    expect(sent(first)).toEqual(
      sent(findItems(q, criteria("owner:alice"), ORG, member("u1"), sort, page, ctx(1))),
    );
    statements.page(criteria("owner:bob"), ORG, member("u2"), sort, page, ctx(2));
    expect(statements.cachedShapes).toBe(1);
    // Another offset is another shape: seen once, not learned.
    statements.page(
      criteria("owner:bob"),
      ORG,
      member("u2"),
      sort,
      { ...page, offset: page.offset + 10 },
      ctx(2),
    );
    expect(statements.cachedShapes).toBe(1);
  });

  it("keeps shapes apart: each statement carries its own search's values", () => {
    const statements = new ItemStatements(q);
    const byOwner = statements.page(criteria("owner:Alice"), ORG, member("u1"), sort, page, ctx(1));
    const byType = statements.page(criteria('type:"Web Map"'), ORG, member("u2"), sort, page, ctx(2));
    const byOwnerAgain = statements.page(criteria("owner:bob"), ORG, member("u3"), sort, page, ctx(3));
    expect(byType.sql).not.toEqual(byOwner.sql);
    expect(byOwnerAgain.sql).toEqual(byOwner.sql);
    expect(byOwner.parameters).toContain("alice");
    expect(byOwner.parameters).toContain("u1");
    expect(byType.parameters).toContain("web map");
    expect(byType.parameters).toContain("u2");
    expect(byType.parameters).not.toContain("alice");
    expect(byOwnerAgain.parameters).toContain("bob");
    expect(byOwnerAgain.parameters).toContain("u3");
    expect(byOwnerAgain.parameters).not.toContain("alice");
    expect(byOwnerAgain.parameters).not.toContain("u1");
  });

  it("compiles each page size, offset and order into its own statement", () => {
    const statements = new ItemStatements(q);
    const c = criteria("owner:alice");
    const first = statements.page(c, ORG, member("u1"), sort, page, ctx(1));
    const second = statements.page(c, ORG, member("u1"), sort, { offset: 10, limit: 10 }, ctx(1));
    const bigger = statements.page(c, ORG, member("u1"), sort, { offset: 0, limit: 100 }, ctx(1));
    const byTitle = statements.page(
      c,
      ORG,
      member("u1"),
      { column: "title_key", direction: "asc" },
      page,
      ctx(1),
    );
    expect(new Set([first.sql, second.sql, bigger.sql, byTitle.sql]).size).toBe(4);
    expect(sent(second)).toEqual(
      sent(findItems(q, c, ORG, member("u1"), sort, { offset: 10, limit: 10 }, ctx(1))),
    );
  });

  it("compiles anew the terms whose statement depends on their value", () => {
    const statements = new ItemStatements(q);
    for (const orgid of [ORG, "ffffffffffffffffffffffffffffffff", ORG]) {
      const c = criteria(`orgid:${orgid} AND owner:alice`);
      expect(sent(statements.count(c, ORG, member("u1"), ctx(1)))).toEqual(
        sent(countItems(q, c, ORG, member("u1"), ctx(1))),
      );
    }
    const boxed: ItemCriteria = {
      ...criteria("owner:alice"),
      bbox: { xmin: 170, ymin: -10, xmax: -170, ymax: 10 },
    };
    const box: ItemCriteria = {
      ...criteria("owner:alice"),
      bbox: { xmin: -10, ymin: -10, xmax: 10, ymax: 10 },
    };
    for (const c of [boxed, box, boxed]) {
      expect(sent(statements.page(c, ORG, member("u1"), sort, page, ctx(1)))).toEqual(
        sent(findItems(q, c, ORG, member("u1"), sort, page, ctx(1))),
      );
    }
    const words = criteria("parks");
    const found = { ...ctx(1), words: new Map([['"parks"', "[1,2]"]]) };
    expect(sent(statements.count(words, ORG, member("u1"), found))).toEqual(
      sent(countItems(q, words, ORG, member("u1"), found)),
    );
    expect(statements.cachedShapes).toBe(0);
  });
});
