import { describe, expect, it } from "vitest";
import { fieldNamed, type LayerField, layerSchema } from "../layer-schema.js";
import { compareText, readHaving } from "./having.js";

const schema = layerSchema(
  {
    id: 0,
    name: "t",
    fields: [
      { name: "state", type: "esriFieldTypeString" },
      { name: "pop", type: "esriFieldTypeInteger" },
      { name: "area", type: "esriFieldTypeDouble" },
      { name: "seen", type: "esriFieldTypeDate" },
      { name: "shape_blob", type: "esriFieldTypeBlob" },
    ],
  },
  "table",
  {},
);
const state = fieldNamed(schema, "state") as LayerField;
const NOW = Date.UTC(2024, 5, 15, 12);

/** Whether a group passes, its aggregates given by name (`COUNT(*)`, `SUM(pop)`) in any order. */
function holds(text: string, groupValues: unknown[], aggregates: Record<string, unknown>): boolean {
  const having = readHaving(text, schema, [state]);
  const values = having.aggregates.map((a) => {
    const key = `${a.type.toUpperCase()}(${a.field?.name ?? "*"})`;
    if (!(key in aggregates)) throw new Error(`no value for ${key}`);
    return aggregates[key];
  });
  return having.holds(groupValues, values, NOW);
}

function refusal(text: string): string {
  try {
    readHaving(text, schema, [state]);
  } catch (error) {
    return JSON.stringify(error);
  }
  throw new Error(`${text} was read`);
}

describe("havingClause", () => {
  it("lists each aggregate it names once, with its field", () => {
    const having = readHaving("COUNT(*) > 1 AND sum(POP) > count(*) AND SUM(pop) < MAX(area)", schema, [
      state,
    ]);
    expect(having.aggregates.map((a) => [a.type, a.field?.name])).toEqual([
      ["count", undefined],
      ["sum", "pop"],
      ["max", "area"],
    ]);
  });

  it("drops a group whose condition is unknown, as SQL's three-valued logic does", () => {
    expect(holds("SUM(pop) > 1", ["a"], { "SUM(pop)": null })).toBe(false);
    expect(holds("NOT (SUM(pop) > 1)", ["a"], { "SUM(pop)": null })).toBe(false);
    expect(holds("SUM(pop) > 1 OR COUNT(*) = 3", ["a"], { "SUM(pop)": null, "COUNT(*)": 3 })).toBe(true);
    expect(holds("SUM(pop) > 1 AND COUNT(*) = 4", ["a"], { "SUM(pop)": null, "COUNT(*)": 3 })).toBe(false);
    expect(holds("SUM(pop) IS NULL", ["a"], { "SUM(pop)": null })).toBe(true);
    expect(holds("state IS NOT NULL", [null], {})).toBe(false);
    // x NOT IN (1, NULL) is unknown when x is not 1; x IN (1, NULL) is true when x is 1.
    expect(holds("COUNT(*) NOT IN (1, NULL)", ["a"], { "COUNT(*)": 2 })).toBe(false);
    expect(holds("COUNT(*) IN (2, NULL)", ["a"], { "COUNT(*)": 2 })).toBe(true);
    expect(holds("COUNT(*) NOT IN (1, 3)", ["a"], { "COUNT(*)": 2 })).toBe(true);
    expect(holds("COUNT(*) NOT BETWEEN 1 AND NULL", ["a"], { "COUNT(*)": 0 })).toBe(true);
    expect(holds("COUNT(*) BETWEEN 1 AND NULL", ["a"], { "COUNT(*)": 2 })).toBe(false);
  });

  it("computes integer division truncating toward zero, and division by zero as NULL", () => {
    expect(holds("SUM(pop) / COUNT(*) = -2", ["a"], { "SUM(pop)": -7, "COUNT(*)": 3 })).toBe(true);
    expect(holds("SUM(pop) / 2.0 = -3.5", ["a"], { "SUM(pop)": -7 })).toBe(true);
    expect(holds("SUM(pop) / (COUNT(*) - 3) IS NULL", ["a"], { "SUM(pop)": 7, "COUNT(*)": 3 })).toBe(true);
    expect(holds("AVG(area) * 2 - 1 = 4", ["a"], { "AVG(area)": 2.5 })).toBe(true);
  });

  it("compares text by code point and dates as dates, CURRENT_DATE from the moment given", () => {
    // "😀" (U+1F600) is after U+FFFD by code point, before it by UTF-16 unit.
    expect(compareText("\u{1F600}", "\uFFFD")).toBe(1);
    expect(compareText("ab", "abc")).toBe(-1);
    expect(compareText("b", "abc")).toBe(1);
    expect(holds("MAX(state) > 'Z'", ["a"], { "MAX(state)": "Äpfel" })).toBe(true);
    expect(holds("state = 'a'", ["a"], {})).toBe(true);
    expect(holds("MIN(seen) >= DATE '2024-06-15'", ["a"], { "MIN(seen)": Date.UTC(2024, 5, 15) })).toBe(true);
    expect(holds("MIN(seen) = CURRENT_DATE", ["a"], { "MIN(seen)": Date.UTC(2024, 5, 15) })).toBe(true);
    expect(holds("MIN(seen) < CURRENT_TIMESTAMP", ["a"], { "MIN(seen)": NOW - 1 })).toBe(true);
  });

  it("refuses, naming havingClause, what SQL would refuse or the engines would read differently", () => {
    expect(refusal("pop > 1")).toContain("groupByFieldsForStatistics");
    expect(refusal("SUM(state) > 1")).toContain("numeric field");
    expect(refusal("AVG(seen) > 1")).toContain("numeric field");
    expect(refusal("MAX(shape_blob) IS NULL")).toContain("esriFieldTypeBlob");
    expect(refusal("COUNT(*) = 'x'")).toContain("cannot compare number with string");
    expect(refusal("MIN(seen) > 1")).toContain("cannot compare date with number");
    expect(refusal("COUNT(*) + 1")).toContain("condition");
    expect(refusal("(COUNT(*) > 1) = (COUNT(*) > 2)")).toContain("a condition cannot be compared");
    expect(refusal("COUNT(*) > 1 AND SUM(pop)")).toContain("AND expects a condition");
    expect(refusal("SUM(nope) > 1")).toContain("nope");
    expect(refusal("CAST(COUNT(*) AS VARCHAR) = '1'")).toContain("CAST is not supported");
    expect(refusal("EXTRACT(YEAR FROM MIN(seen)) = 1")).toContain("EXTRACT is not supported");
    for (const text of ["pop > 1", "COUNT(*) > 1;", "COUNT(*) >"])
      expect(refusal(text)).toContain("havingClause");
    const many = Array.from({ length: 101 }, (_, i) => `SUM(pop) + ${i} > MAX(pop)`);
    expect(readHaving(many.join(" OR "), schema, [state]).aggregates).toHaveLength(2);
    // Each different aggregate is a column of the statement: at most 100 of them.
    const wide = layerSchema(
      {
        id: 0,
        name: "w",
        fields: Array.from({ length: 60 }, (_, i) => ({ name: `v${i}`, type: "esriFieldTypeInteger" })),
      },
      "table",
      {},
    );
    const sums = Array.from({ length: 60 }, (_, i) => `SUM(v${i}) > 0`);
    const maxes = Array.from({ length: 60 }, (_, i) => `MAX(v${i}) > 0`);
    expect(readHaving([...sums, ...maxes.slice(0, 40)].join(" OR "), wide, []).aggregates).toHaveLength(100);
    expect(() => readHaving([...sums, ...maxes.slice(0, 41)].join(" OR "), wide, [])).toThrow(
      /more than 100 different aggregates/,
    );
  });
});
