import { describe, expect, it } from "vitest";
import { CATEGORY_SCHEMA_LIMITS, checkCategorySchema } from "./category-schema.js";

describe("checkCategorySchema", () => {
  it("takes the object ArcGIS documents and the bare array alike", () => {
    const roots = [
      { title: "Categories", categories: [{ title: "Water", categories: [{ title: "Rivers" }] }] },
    ];
    const expected = [
      {
        title: "Categories",
        categories: [{ title: "Water", categories: [{ title: "Rivers", categories: [] }] }],
      },
    ];
    expect(checkCategorySchema({ categorySchema: roots })).toEqual(expected);
    expect(checkCategorySchema(roots)).toEqual(expected);
  });

  it("refuses titles that are missing, repeated, too long or hold the path separator", () => {
    expect(checkCategorySchema([{ categories: [] }])).toContain("without a title");
    expect(checkCategorySchema([{ title: "C", categories: [{ title: "a" }, { title: "A" }] }])).toContain(
      "two categories",
    );
    expect(checkCategorySchema([{ title: "x".repeat(101) }])).toContain("longer than");
    expect(checkCategorySchema([{ title: "a/b" }])).toContain("path separator");
  });

  it("bounds roots, depth and the number of categories", () => {
    expect(checkCategorySchema([{ title: "a" }, { title: "b" }, { title: "c" }, { title: "d" }])).toContain(
      "root",
    );
    let deep: Record<string, unknown> = { title: "leaf" };
    for (let i = 0; i < CATEGORY_SCHEMA_LIMITS.levels + 1; i++) deep = { title: `l${i}`, categories: [deep] };
    expect(checkCategorySchema([deep])).toContain("deeper");
    const wide = Array.from({ length: 1001 }, (_, i) => ({ title: `c${i}` }));
    expect(checkCategorySchema([{ title: "Categories", categories: wide }])).toContain("more than 1000");
  });

  it("refuses what is not a schema", () => {
    for (const value of [null, 3, "x", { categorySchema: {} }, [[]], [{ title: "a", categories: {} }]]) {
      expect(checkCategorySchema(value)).toBeTypeOf("string");
    }
  });
});
