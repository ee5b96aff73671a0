import { describe, expect, it } from "vitest";
import { claimDepth } from "./webhook-delivery.js";

describe("claimDepth", () => {
  it("holds one load of slots while a webhook's pace is unknown or slow", () => {
    expect(claimDepth(16, undefined)).toBe(32);
    expect(claimDepth(16, 1300)).toBe(32);
    expect(claimDepth(16, 4000)).toBe(32);
    expect(claimDepth(16, 60_000)).toBe(32);
  });

  it("holds as many loads as the pace gets through in half the lease margin, three at most", () => {
    expect(claimDepth(16, 1250)).toBe(48);
    expect(claimDepth(16, 1000)).toBe(48);
    expect(claimDepth(16, 800)).toBe(64);
    expect(claimDepth(16, 5)).toBe(64);
    expect(claimDepth(16, 0)).toBe(64);
    expect(claimDepth(4, 2)).toBe(16);
  });
});
