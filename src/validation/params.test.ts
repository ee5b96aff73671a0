import { describe, expect, it } from "vitest";
import { PorticoError } from "../errors.js";
import {
  codePointLength,
  jsonMembersExceed,
  MAX_JSON_MEMBERS,
  p,
  parseParams,
  withDeclaredNames,
} from "./params.js";

describe("parseParams", () => {
  const specs = {
    name: p.string({ required: true, maxLength: 5 }),
    count: p.integer({ min: 0, max: 10, also: [-1] }),
    flag: p.boolean(),
    tags: p.list({ maxItems: 3 }),
    config: p.json({ type: "object", properties: { n: { type: "integer" } }, required: ["n"] }),
  };

  it("converts form strings to typed values", () => {
    const { values, empty } = parseParams(specs, {
      name: "abc",
      count: "-1",
      flag: "TRUE",
      tags: "a, b,,c",
      config: '{"n":3}',
      ignored: "x",
    });
    expect(values).toEqual({ name: "abc", count: -1, flag: true, tags: ["a", "b", "c"], config: { n: 3 } });
    expect(empty.size).toBe(0);
  });

  it("counts characters, not UTF-16 units, against maximum lengths", () => {
    expect(parseParams(specs, { name: "😀😀😀😀😀" }).values.name).toBe("😀😀😀😀😀");
  });

  it("reports empty values separately and treats them as absent", () => {
    const { values, empty } = parseParams(specs, { name: "a", flag: "" });
    expect(values.flag).toBeUndefined();
    expect([...empty]).toEqual(["flag"]);
  });

  it("reports every invalid parameter, naming each", () => {
    let caught: unknown;
    try {
      parseParams(specs, { count: "2.5", flag: "yes", tags: "a,b,c,d", config: '{"n":"x"}' });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PorticoError);
    const error = caught as PorticoError;
    expect(error.message).toBe("Missing required parameter 'name'.");
    expect(error.details).toEqual([
      "'name' is required.",
      "'count' must be an integer.",
      "'flag' must be true or false.",
      "'tags' must have at most 3 entries (got 4).",
      "'config' must be integer at n.",
    ]);
  });

  it("explains malformed JSON", () => {
    expect(() => parseParams(specs, { name: "a", config: "{n:1}" })).toThrow(/'config': is not valid JSON/);
  });

  it("checks ranges with their exceptions", () => {
    expect(() => parseParams(specs, { name: "a", count: "11" })).toThrow(/between 0 and 10 \(or -1\)/);
  });

  it("refuses JSON nested deeper than 100 levels, however deep", () => {
    // `depth` objects, one inside the other, the outermost holding the required `n`.
    const nested = (depth: number) => `{"n":1,"a":${'{"a":'.repeat(depth - 2)}{}${"}".repeat(depth - 2)}}`;
    expect(parseParams(specs, { name: "a", config: nested(100) }).values.config).toBeDefined();
    for (const depth of [101, 100_000]) {
      expect(() => parseParams(specs, { name: "a", config: nested(depth) })).toThrow(
        /deeper than 100 levels/,
      );
    }
  });

  it("refuses NUL in strings, list entries and anywhere in JSON values", () => {
    for (const raw of [{ name: "a\u0000" }, { name: "a", tags: "x,y\u0000" }]) {
      expect(() => parseParams(specs, raw)).toThrow(/must not contain the NUL character/);
    }
    for (const config of ['{"n":1,"s":"\\u0000"}', '{"n":1,"\\u0000":2}', '{"n":1,"a":[["\\u0000"]]}']) {
      expect(() => parseParams(specs, { name: "a", config })).toThrow(/'config': must not contain the NUL/);
    }
  });
});

describe("length checks before any work", () => {
  it("refuses a value far over maxLength from its length alone, without counting it", () => {
    const r = p.string({ maxLength: 128 }).parse("x".repeat(50_000_000));
    expect(r).toEqual({ ok: false, reason: "must be at most 128 characters (got at least 25000000)" });
  });

  it("counts code points as the spread did: a surrogate pair is one, a lone surrogate one", () => {
    expect(codePointLength("a😀b")).toBe(3);
    expect(codePointLength("\ud800x")).toBe(2);
    expect(codePointLength("😀".repeat(128))).toBe(128);
    expect(p.string({ maxLength: 128 }).parse("😀".repeat(128)).ok).toBe(true);
    expect(p.string({ maxLength: 128 }).parse(`${"😀".repeat(100)}${"a".repeat(29)}`)).toEqual({
      ok: false,
      reason: "must be at most 128 characters (got 129)",
    });
    expect(p.string({ minLength: 2 }).parse("😀")).toEqual({
      ok: false,
      reason: "must be at least 2 characters",
    });
  });

  it("refuses oversized booleans, numbers, enum values and lists before walking them", () => {
    const huge = "1".repeat(10_000_000);
    expect(p.boolean().parse(`true${huge}`).ok).toBe(false);
    expect(p.integer().parse(huge)).toEqual({ ok: false, reason: "must be an integer" });
    expect(p.number().parse(huge)).toEqual({ ok: false, reason: "must be a number" });
    expect(p.string({ enum: ["a", "b"], caseInsensitive: true }).parse(huge).ok).toBe(false);
    const list = p.list({ maxItems: 2, item: { maxLength: 3 } });
    expect(list.parse(",".repeat(10_000_000))).toEqual({
      ok: false,
      reason: "must be at most 44 characters in all (got 10000000)",
    });
    expect(list.parse("a, b").ok).toBe(true);
  });

  it("tells JSON texts over the member limit without parsing them, ignoring commas in strings", () => {
    expect(jsonMembersExceed('{"a":"x,y,z"}', 1)).toBe(false);
    expect(jsonMembersExceed('{"a":1,"b":2,"c":3}', 1)).toBe(true);
    expect(jsonMembersExceed('["a\\"b,c", 1, 2]', 1)).toBe(true);
    expect(jsonMembersExceed('["a\\\\",","]', 1)).toBe(false);
    const many = `{${Array.from({ length: 100_002 }, (_, i) => `"k${i}":1`).join(",")}}`;
    expect(p.json({ type: "object" }).parse(many)).toEqual({
      ok: false,
      reason: `must have at most ${MAX_JSON_MEMBERS} members`,
    });
  });
});

describe("withDeclaredNames", () => {
  const specs = { outFields: p.string(), returnGeometry: p.boolean() };

  it("gives parameters sent in another case their declared names", () => {
    expect(withDeclaredNames({ outfields: "*", RETURNGEOMETRY: "false", f: "json" }, specs)).toEqual({
      outfields: "*",
      RETURNGEOMETRY: "false",
      f: "json",
      outFields: "*",
      returnGeometry: "false",
    });
  });

  it("keeps the value sent under the declared spelling when another spelling is sent too", () => {
    expect(withDeclaredNames({ outfields: "name", outFields: "*" }, specs).outFields).toBe("*");
    expect(withDeclaredNames({ outFields: "*", outfields: "name" }, specs).outFields).toBe("*");
  });
});
