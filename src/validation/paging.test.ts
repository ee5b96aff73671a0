import { describe, expect, it } from "vitest";
import { pageInfo, pageOf } from "./paging.js";

describe("paging", () => {
  it("defaults to the first ten", () => {
    expect(pageOf({})).toEqual({ start: 1, num: 10 });
  });

  it("points nextStart at the following page, and at -1 after the last", () => {
    expect(pageInfo({ start: 1, num: 2 }, 5, 2)).toEqual({ total: 5, start: 1, num: 2, nextStart: 3 });
    expect(pageInfo({ start: 5, num: 2 }, 5, 1)).toEqual({ total: 5, start: 5, num: 2, nextStart: -1 });
    expect(pageInfo({ start: 3, num: 2 }, 5, 2).nextStart).toBe(5);
    expect(pageInfo({ start: 4, num: 2 }, 5, 2).nextStart).toBe(-1);
    expect(pageInfo({ start: 9, num: 2 }, 5, 0).nextStart).toBe(-1);
  });
});
