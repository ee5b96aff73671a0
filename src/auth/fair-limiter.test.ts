import { describe, expect, it } from "vitest";
import { FairLimiter } from "./fair-limiter.js";

/** A task that finishes when the test says so, recording when it started. */
function gate(log: string[], name: string) {
  let open!: () => void;
  const done = new Promise<void>((resolve) => {
    open = resolve;
  });
  return {
    open: () => open(),
    task: async () => {
      log.push(name);
      await done;
      return name;
    },
  };
}

const busy = () => new Error("busy");
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("FairLimiter", () => {
  it("runs up to its concurrency at once and queues the rest", async () => {
    const limiter = new FairLimiter({ concurrency: 2, maxQueued: 10, maxQueuedPerKey: 10, busy });
    const log: string[] = [];
    const gates = ["a", "b", "c"].map((n) => gate(log, n));
    const runs = gates.map((g) => limiter.run("k", g.task));
    await tick();
    expect(log).toEqual(["a", "b"]);
    expect(limiter.load).toEqual({ running: 2, queued: 1 });
    gates[0]?.open();
    await tick();
    expect(log).toEqual(["a", "b", "c"]);
    for (const g of gates) g.open();
    expect(await Promise.all(runs)).toEqual(["a", "b", "c"]);
    expect(limiter.load).toEqual({ running: 0, queued: 0 });
  });

  it("refuses at once when the queue is full, and when one key holds its whole share", async () => {
    const limiter = new FairLimiter({ concurrency: 1, maxQueued: 3, maxQueuedPerKey: 2, busy });
    const log: string[] = [];
    const held = gate(log, "held");
    const first = limiter.run("attacker", held.task);
    const queued = [limiter.run("attacker", async () => "q1"), limiter.run("attacker", async () => "q2")];
    await expect(limiter.run("attacker", async () => "q3")).rejects.toThrow("busy");
    // Another key still finds room: the attacker's share is full, the queue is not.
    const other = limiter.run("user", async () => "user");
    await expect(limiter.run("third", async () => "x")).rejects.toThrow("busy");
    expect(limiter.load).toEqual({ running: 1, queued: 3 });
    held.open();
    expect(await Promise.all([first, ...queued, other])).toEqual(["held", "q1", "q2", "user"]);
  });

  it("serves waiting keys in turn, so a flood from one key delays another by one task", async () => {
    const limiter = new FairLimiter({ concurrency: 1, maxQueued: 100, maxQueuedPerKey: 50, busy });
    const order: string[] = [];
    const held = gate([], "held");
    const first = limiter.run("attacker", held.task);
    const flood = Array.from({ length: 20 }, (_, i) =>
      limiter.run("attacker", async () => {
        order.push(`attacker${i}`);
      }),
    );
    const user = limiter.run("user", async () => {
      order.push("user");
    });
    held.open();
    await Promise.all([first, ...flood, user]);
    expect(order.indexOf("user")).toBe(1);
  });

  it("frees the slot when a task fails", async () => {
    const limiter = new FairLimiter({ concurrency: 1, maxQueued: 1, maxQueuedPerKey: 1, busy });
    await expect(
      limiter.run("k", async () => {
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(await limiter.run("k", async () => "ok")).toBe("ok");
    expect(limiter.load).toEqual({ running: 0, queued: 0 });
  });
});
