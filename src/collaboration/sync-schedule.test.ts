import { describe, expect, it } from "vitest";
import { nextFire } from "./sync-schedule.js";

describe("nextFire", () => {
  const start = 1_000;
  const hour = 100;

  it("is the start time until the start time has come", () => {
    expect(nextFire(start, hour, 0)).toBe(1_000);
    expect(nextFire(start, hour, 999)).toBe(1_000);
    expect(nextFire(start, hour, 1_000)).toBe(1_000);
  });

  it("is the first fire time at or after now once the schedule has started", () => {
    expect(nextFire(start, hour, 1_001)).toBe(1_100);
    expect(nextFire(start, hour, 1_100)).toBe(1_100);
    expect(nextFire(start, hour, 1_101)).toBe(1_200);
  });

  it("skips the fire times missed while paused instead of catching up", () => {
    // Paused from before 1,100 until 1,450: 1,100, 1,200, 1,300 and 1,400 are not fired.
    expect(nextFire(start, hour, 1_450)).toBe(1_500);
  });
});
