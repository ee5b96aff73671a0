import { describe, expect, it } from "vitest";
import { PorticoError } from "../errors.js";
import { GROUP_FIELDS, ITEM_FIELDS, parseQuery, type QueryNode } from "./query.js";

const parse = (q: string) => parseQuery(q, ITEM_FIELDS);
const term = (field: string | null, value: string): QueryNode => ({ kind: "term", field, value });

function refusal(q: string, fields: readonly string[] = ITEM_FIELDS): PorticoError {
  try {
    parseQuery(q, fields);
  } catch (err) {
    if (err instanceof PorticoError) return err;
    throw err;
  }
  throw new Error(`'${q}' was accepted`);
}

describe("parseQuery", () => {
  it("matches everything for an empty query or *", () => {
    expect(parse("")).toEqual({ kind: "all" });
    expect(parse("   ")).toEqual({ kind: "all" });
    expect(parse("*")).toEqual({ kind: "all" });
  });

  it("reads bare words and quoted phrases", () => {
    expect(parse("parks")).toEqual(term(null, "parks"));
    expect(parse('"city parks"')).toEqual(term(null, "city parks"));
  });

  it("AND-s adjacent terms by default", () => {
    expect(parse('parks "bike lanes"')).toEqual({
      kind: "and",
      children: [term(null, "parks"), term(null, "bike lanes")],
    });
  });

  it("reads every item field, case-insensitively, with plain or quoted values", () => {
    expect(parse("title:parks")).toEqual(term("title", "parks"));
    expect(parse("Owner:jdoe")).toEqual(term("owner", "jdoe"));
    expect(parse('type:"Feature Service"')).toEqual(term("type", "Feature Service"));
    expect(parse("tags:water")).toEqual(term("tags", "water"));
    expect(parse("group:abc123")).toEqual(term("group", "abc123"));
    expect(parse("id:0123abcd")).toEqual(term("id", "0123abcd"));
    expect(parse("access:public")).toEqual(term("access", "public"));
    expect(parse("orgid:xyz")).toEqual(term("orgid", "xyz"));
  });

  it("keeps colons inside a value", () => {
    expect(parse("id:a:b")).toEqual(term("id", "a:b"));
    expect(parse('title:"a: b"')).toEqual(term("title", "a: b"));
  });

  it("gives OR a lower precedence than AND, and NOT the highest", () => {
    expect(parse("a b OR c")).toEqual({
      kind: "or",
      children: [{ kind: "and", children: [term(null, "a"), term(null, "b")] }, term(null, "c")],
    });
    expect(parse("a AND NOT b")).toEqual({
      kind: "and",
      children: [term(null, "a"), { kind: "not", child: term(null, "b") }],
    });
    expect(parse("NOT owner:x")).toEqual({ kind: "not", child: term("owner", "x") });
  });

  it("groups with parentheses, also after a field", () => {
    expect(parse("(a OR b) AND c")).toEqual({
      kind: "and",
      children: [{ kind: "or", children: [term(null, "a"), term(null, "b")] }, term(null, "c")],
    });
    expect(parse('tags:(water OR "sea level")')).toEqual({
      kind: "or",
      children: [term("tags", "water"), term("tags", "sea level")],
    });
  });

  it("treats lower-case operators as words", () => {
    expect(parse("salt and pepper")).toEqual({
      kind: "and",
      children: [term(null, "salt"), term(null, "and"), term(null, "pepper")],
    });
  });

  it("refuses unknown fields, naming q and the field", () => {
    const err = refusal("color:red");
    expect(err.code).toBe(400);
    expect(err.message).toContain("'q'");
    expect(err.message).toContain("'color'");
    // Groups have no `type` or `group` field.
    expect(refusal("type:x", GROUP_FIELDS).message).toContain("'type'");
  });

  it("refuses malformed queries", () => {
    for (const q of ["(a OR b", "a OR b)", '"open', "title:", "a AND", "OR a", "()", "owner:(a owner:b)"]) {
      const err = refusal(q);
      expect(err.code, q).toBe(400);
      expect(err.message, q).toContain("'q'");
      expect(err.details[0], q).toMatch(/^'q' /);
    }
  });

  it("limits nesting, terms and length", () => {
    expect(refusal(`${"(".repeat(40)}a${")".repeat(40)}`).message).toContain("deep");
    expect(refusal(Array.from({ length: 70 }, (_, i) => `w${i}`).join(" ")).message).toContain("terms");
    expect(refusal("x".repeat(3000)).message).toContain("characters");
    // Counted in characters, not UTF-16 code units; refused at once however long.
    expect(parse("😀".repeat(2048))).toEqual(term(null, "😀".repeat(2048)));
    expect(refusal("😀".repeat(2049)).message).toContain("characters");
    expect(refusal("x".repeat(50_000_000)).message).toContain("characters");
  });

  it("limits the words of a phrase and the length of a prefix, for words only", () => {
    const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ");
    expect(parse(`"${words(16)}"`)).toEqual(term(null, words(16)));
    expect(refusal(`"${words(17)}"`).message).toContain("more than 16 words");
    expect(refusal(`title:"${words(17)}"`).message).toContain("more than 16 words");
    expect(parse("pa*")).toEqual(term(null, "pa*"));
    expect(refusal("p*").message).toContain("at least 2 characters");
    expect(refusal("title:p*").message).toContain("'p*'");
    // Values of other fields are compared whole, not as words.
    expect(parse("owner:a*")).toEqual(term("owner", "a*"));
  });

  it("answers a repeated term once, and counts the words of distinct terms only", () => {
    const phrase = '"the of and to"';
    expect(parse(Array.from({ length: 64 }, () => phrase).join(" OR "))).toEqual(term(null, "the of and to"));
    expect(parse(`a OR a OR b`)).toEqual({ kind: "or", children: [term(null, "a"), term(null, "b")] });
    expect(parse(`(a b) (a b) c`)).toEqual({
      kind: "and",
      children: [{ kind: "and", children: [term(null, "a"), term(null, "b")] }, term(null, "c")],
    });
    const words = (n: number, from: number) => Array.from({ length: n }, (_, i) => `w${from + i}`).join(" ");
    // 8 distinct phrases of 16 words: 128 words. One more word is refused, a repeat is not.
    const eight = Array.from({ length: 8 }, (_, i) => `"${words(16, i * 16)}"`);
    expect(parse([...eight, ...eight].join(" OR ")).kind).toBe("or");
    expect(refusal([...eight, "extra"].join(" OR ")).message).toContain("more than 128 words");
    // `title:` looks up other rows than a bare phrase: counted apart.
    expect(refusal([...eight, `title:"${words(1, 0)}"`].join(" OR ")).message).toContain("128 words");
    // Other fields do not count.
    expect(parse([...eight, "owner:someone"].join(" OR ")).kind).toBe("or");
  });
});
