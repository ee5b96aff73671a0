import { afterEach, describe, expect, it, vi } from "vitest";
import { BodyPace, PreAuthBudget, senderOf } from "./preauth-budget.js";

const MB = 1024 * 1024;

describe("PreAuthBudget", () => {
  it("draws from the first byte, only what was covered", () => {
    const budget = new PreAuthBudget(8 * MB);
    const share = budget.open("a");
    expect(share.cover(10)).toBe(true);
    expect(budget.inUse).toBe(10);
    share.release();
    expect(budget.inUse).toBe(0);
  });

  it("refuses a share the budget cannot cover, and gives everything back once", () => {
    const budget = new PreAuthBudget(12 * MB);
    const a = budget.open("a", true);
    const b = budget.open("b", true);
    expect(a.cover(8 * MB)).toBe(true);
    expect(a.cover(9 * MB)).toBe(true);
    expect(budget.inUse).toBe(9 * MB);
    expect(b.cover(4 * MB)).toBe(false);
    expect(b.cover(3 * MB)).toBe(true);
    expect(budget.inUse).toBe(12 * MB);
    a.release();
    a.release();
    expect(budget.inUse).toBe(3 * MB);
    expect(a.cover(2 * MB)).toBe(false);
    b.release();
    expect(budget.inUse).toBe(0);
  });

  it("lets one sender hold at most a quarter of the budget, across its requests", () => {
    const budget = new PreAuthBudget(16 * MB);
    const first = budget.open("10.0.0.1");
    const second = budget.open("10.0.0.1");
    expect(first.cover(3 * MB)).toBe(true);
    expect(second.cover(1 * MB)).toBe(true);
    expect(second.cover(1 * MB + 1)).toBe(false);
    expect(budget.heldBy("10.0.0.1")).toBe(4 * MB);
    // Another sender still has its own quarter.
    expect(budget.open("10.0.0.2").cover(4 * MB)).toBe(true);
    first.release();
    expect(second.cover(4 * MB)).toBe(true);
  });

  it("counts IPv6 senders by /64 and IPv4-mapped addresses as IPv4", () => {
    expect(senderOf("2001:db8:1:2:aaaa::1")).toBe(senderOf("2001:0db8:1:2:bbbb::2"));
    expect(senderOf("2001:db8:1:3::1")).not.toBe(senderOf("2001:db8:1:2::1"));
    expect(senderOf("::ffff:127.0.0.2")).toBe("127.0.0.2");
  });
});

describe("BodyPace", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("aborts when a window passes with too few bytes, and not while they keep coming", () => {
    vi.useFakeTimers();
    const pace = new BodyPace(1000, 100);
    for (let i = 0; i < 5; i++) {
      pace.arrived(100);
      vi.advanceTimersByTime(1000);
    }
    expect(pace.signal.aborted).toBe(false);
    pace.arrived(99);
    vi.advanceTimersByTime(1000);
    expect(pace.signal.aborted).toBe(true);
    expect((pace.signal.reason as { messageCode: string }).messageCode).toBe("GEN_0408");
  });

  it("watches no more once stopped", () => {
    vi.useFakeTimers();
    const pace = new BodyPace(1000, 100);
    pace.stop();
    vi.advanceTimersByTime(5000);
    expect(pace.signal.aborted).toBe(false);
  });
});
