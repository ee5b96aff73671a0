import { describe, expect, it } from "vitest";
import {
  fieldWords,
  ftsQuery,
  ftsText,
  MAX_OCCURRENCES,
  MAX_POSITION,
  tsqueryLiteral,
  tsvectorLiteral,
  wordQuery,
  words,
} from "./words.js";

describe("words", () => {
  it("splits at anything but letters and digits, lower-cased and without accents", () => {
    expect(words("City Parks")).toEqual(["city", "parks"]);
    expect(words("100% Done_report")).toEqual(["100", "done", "report"]);
    expect(words("Café Zürich İstanbul ÉCOLE")).toEqual(["cafe", "zurich", "istanbul", "ecole"]);
    expect(words("foo-bar.baz@qux")).toEqual(["foo", "bar", "baz", "qux"]);
    expect(words("東京 タワー")).toEqual(["東京", "タワー"]);
    expect(words("%_ ·!")).toEqual([]);
  });

  it("cuts very long words the same way everywhere", () => {
    expect(words("a".repeat(500))).toEqual(["a".repeat(100)]);
  });
});

describe("fieldWords", () => {
  it("leaves a gap between values, so a phrase never spans two tags", () => {
    const f = fieldWords(["parks", "city"]);
    expect(f).toEqual(["parks", null, "city"]);
    expect(ftsText(f)).toBe("parks · city");
    expect(tsvectorLiteral(f)).toBe("'parks':1 'city':3");
  });

  it("keeps PostgreSQL's limits on positions and repeats on both engines", () => {
    const repeated = fieldWords([Array.from({ length: 300 }, () => "x").join(" ")]);
    expect(repeated.filter((w) => w === "x")).toHaveLength(MAX_OCCURRENCES);
    const long = fieldWords([Array.from({ length: 20_000 }, (_, i) => `w${i}`).join(" ")]);
    expect(long).toHaveLength(MAX_POSITION);
    expect(tsvectorLiteral(["a", null, "b", "a"])).toBe("'a':1,4 'b':3");
  });
});

describe("wordQuery", () => {
  it("reads words, phrases and a trailing prefix", () => {
    expect(wordQuery("Parks")).toEqual({ kind: "words", words: ["parks"], prefix: false });
    expect(wordQuery("city par*")).toEqual({ kind: "words", words: ["city", "par"], prefix: true });
    expect(wordQuery("e_r")).toEqual({ kind: "words", words: ["e", "r"], prefix: false });
    expect(wordQuery("**")).toEqual({ kind: "everything" });
    expect(wordQuery("%")).toEqual({ kind: "nothing" });
  });

  it("writes FTS5 and tsquery phrases", () => {
    const q = { words: ["city", "par"], prefix: true };
    expect(ftsQuery(q)).toBe('"city par"*');
    expect(ftsQuery(q, "title")).toBe('title : "city par"*');
    expect(tsqueryLiteral(q)).toBe("'city' <-> 'par':*");
    expect(tsqueryLiteral({ words: ["lake"], prefix: false })).toBe("'lake'");
  });
});
