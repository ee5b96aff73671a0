import { describe, expect, it } from "vitest";
import { jsonValue, storedJsonList } from "./json-answer.js";

/** Strings drawn from the characters JSON treats specially, and some it does not. */
const PIECES = [
  '"',
  "\\",
  "/",
  "\b",
  "\f",
  "\n",
  "\r",
  "\t",
  "\u0000",
  "\u001f",
  "\u007f",
  "\u2028",
  "é",
  "😀",
  "\ud83d",
  "\ude00",
  "a",
  " ",
  ",",
  "[",
  "]",
  "\\u0041",
];

function randomString(random: () => number): string {
  let s = "";
  const length = Math.floor(random() * 6);
  for (let i = 0; i < length; i++) s += PIECES[Math.floor(random() * PIECES.length)];
  return s;
}

/** A small deterministic generator, so that a failure can be replayed. */
function generator(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

describe("jsonValue", () => {
  it("writes what JSON.stringify writes", () => {
    const random = generator(7);
    const values: (string | number | boolean | null)[] = [
      null,
      true,
      false,
      0,
      -0,
      1.5,
      -1e21,
      1e-7,
      Number.NaN,
      Infinity,
      "",
    ];
    for (let i = 0; i < 2000; i++) values.push(randomString(random));
    for (const value of values) expect(jsonValue(value)).toBe(JSON.stringify(value));
  });
});

describe("storedJsonList", () => {
  it("gives JSON.stringify(JSON.parse(text)) for lists JSON.stringify wrote", () => {
    const random = generator(11);
    for (let i = 0; i < 5000; i++) {
      const list = Array.from({ length: Math.floor(random() * 4) }, () => randomString(random));
      const text = JSON.stringify(list);
      expect(storedJsonList(text)).toBe(text);
    }
  });

  it("gives JSON.stringify(JSON.parse(text)) for texts in other forms", () => {
    for (const text of [
      '[ "a" ]',
      '["a", "b"]',
      '["\\u0041"]',
      '["\\/"]',
      '["\\u00e9"]',
      '["\\ud83d\\ude00"]',
      '["\\ud83d"]',
      '["\\u0008"]',
      '["\\u001f"]',
      '["a"]\n',
      "[1,2]",
      '["a",null]',
      '{"a":"b"}',
      '"a"',
      "[[]]",
    ]) {
      expect(storedJsonList(text)).toBe(JSON.stringify(JSON.parse(text)));
    }
  });

  it("refuses what is not JSON, as JSON.parse does", () => {
    expect(() => storedJsonList('["a"')).toThrow(SyntaxError);
    expect(() => storedJsonList("['a']")).toThrow(SyntaxError);
  });
});
