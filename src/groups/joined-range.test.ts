import { describe, expect, it } from "vitest";
import { parseJoinedRange } from "./joined-range.js";

describe("parseJoinedRange", () => {
  it("takes a time stamp alone as that instant", () => {
    expect(parseJoinedRange("1484875784000")).toEqual({ from: 1484875784000, to: 1484875784000 });
  });

  it("takes a range with both ends, or with either end left out", () => {
    expect(parseJoinedRange("10,20")).toEqual({ from: 10, to: 20 });
    expect(parseJoinedRange("10,")).toEqual({ from: 10 });
    expect(parseJoinedRange(",20")).toEqual({ to: 20 });
    expect(parseJoinedRange(" 10 , 20 ")).toEqual({ from: 10, to: 20 });
  });

  it("rejects text that is not a time stamp, reversed ranges, empty ranges and more than two ends", () => {
    expect(parseJoinedRange("yesterday")).toMatch(/not a time stamp/);
    expect(parseJoinedRange("1e3")).toMatch(/not a time stamp/);
    expect(parseJoinedRange("20,10")).toMatch(/start after its end/);
    expect(parseJoinedRange(",")).toMatch(/at least one end/);
    expect(parseJoinedRange("1,2,3")).toMatch(/range/);
    expect(parseJoinedRange("1234567890123456")).toMatch(/not a time stamp/);
  });
});
