import { describe, expect, it } from "vitest";
import {
  Availability,
  type AvailabilityChange,
  isConnectionLoss,
  isPoolWaitTimeout,
  isTransientConflict,
  ReachabilityCheck,
} from "./availability.js";

describe("isConnectionLoss", () => {
  it("recognizes a terminated backend, a shutting-down server and a refused connection", () => {
    expect(isConnectionLoss(Object.assign(new Error("terminating connection"), { code: "57P01" }))).toBe(
      true,
    );
    expect(isConnectionLoss(Object.assign(new Error("starting up"), { code: "57P03" }))).toBe(true);
    expect(isConnectionLoss(Object.assign(new Error("idle-session timeout"), { code: "57P05" }))).toBe(true);
    expect(isConnectionLoss(Object.assign(new Error("connection failure"), { code: "08006" }))).toBe(true);
    expect(isConnectionLoss(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))).toBe(
      true,
    );
    expect(isConnectionLoss(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(isConnectionLoss(new Error("Connection terminated due to connection timeout"))).toBe(true);
    const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    expect(isConnectionLoss(new AggregateError([refused, refused]))).toBe(true);
  });

  it("does not take a wrong statement, a constraint or a timeout of the statement itself for a loss", () => {
    expect(isConnectionLoss(Object.assign(new Error("syntax error"), { code: "42601" }))).toBe(false);
    expect(isConnectionLoss(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
    expect(isConnectionLoss(Object.assign(new Error("canceling statement"), { code: "57014" }))).toBe(false);
    expect(isConnectionLoss(Object.assign(new Error("busy"), { code: "SQLITE_BUSY" }))).toBe(false);
    expect(isConnectionLoss(new Error("Connection"))).toBe(false);
    expect(isConnectionLoss("Connection terminated")).toBe(false);
    expect(isConnectionLoss(undefined)).toBe(false);
  });
});

describe("Availability", () => {
  it("reports one loss and one return per outage, whichever links fail in it", () => {
    let now = 1000;
    const changes: AvailabilityChange[] = [];
    const availability = new Availability(
      (c) => changes.push(c),
      () => now,
    );
    const error = new Error("gone");
    availability.lost("changeFeed", error);
    availability.lost("queries", new Error("also gone"));
    availability.lost("changeFeed", new Error("again"));
    now = 4000;
    availability.restored("changeFeed");
    expect(availability.up).toBe(false);
    now = 6000;
    availability.restored("queries");
    availability.restored("queries");
    expect(availability.up).toBe(true);
    expect(changes).toEqual([
      { state: "lost", link: "changeFeed", error },
      { state: "restored", downMs: 5000 },
    ]);
  });
});

describe("ReachabilityCheck", () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

  it("reports nothing when one connection was closed but the server answers", async () => {
    const changes: AvailabilityChange[] = [];
    let probes = 0;
    const check = new ReachabilityCheck(
      async () => {
        probes++;
      },
      new Availability((c) => changes.push(c)),
    );
    check.suspect(new Error("Connection terminated unexpectedly"));
    await settle();
    expect(probes).toBe(1);
    expect(changes).toEqual([]);
    check.close();
  });

  it("does not probe when the pool had no free connection in time: the node is busy, not cut off", async () => {
    let probes = 0;
    const changes: AvailabilityChange[] = [];
    const check = new ReachabilityCheck(
      async () => {
        probes++;
        throw refused;
      },
      new Availability((c) => changes.push(c)),
    );
    const poolWait = new Error("timeout exceeded when trying to connect");
    expect(isPoolWaitTimeout(poolWait)).toBe(true);
    expect(isConnectionLoss(poolWait)).toBe(false);
    check.suspect(poolWait);
    await settle();
    expect(probes).toBe(0);
    expect(changes).toEqual([]);
    expect(isPoolWaitTimeout(new Error("Connection terminated due to connection timeout"))).toBe(false);
    check.close();
  });

  it("ignores errors that are not a lost connection", async () => {
    let probes = 0;
    const check = new ReachabilityCheck(
      async () => {
        probes++;
      },
      new Availability(() => {}),
    );
    check.suspect(Object.assign(new Error("syntax error"), { code: "42601" }));
    await settle();
    expect(probes).toBe(0);
    check.close();
  });

  it("marks the database lost when the probe fails, probes again until it answers, then restored", async () => {
    const changes: AvailabilityChange[] = [];
    let failures = 2;
    const check = new ReachabilityCheck(
      async () => {
        if (failures-- > 0) throw refused;
      },
      new Availability((c) => changes.push(c)),
    );
    check.suspect(refused);
    // Further failures during the outage start no second check.
    check.suspect(refused);
    const deadline = Date.now() + 10_000;
    while (changes.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(changes).toEqual([
      { state: "lost", link: "queries", error: refused },
      { state: "restored", downMs: expect.any(Number) },
    ]);
    check.close();
  });
});

describe("transient conflicts", () => {
  it("are PostgreSQL's deadlocks and serialization failures, not other errors", () => {
    const pgError = (code: string) => Object.assign(new Error("pg"), { code });
    expect(isTransientConflict(pgError("40P01"))).toBe(true);
    expect(isTransientConflict(pgError("40001"))).toBe(true);
    for (const code of ["23505", "57014", "08006", "40"])
      expect(isTransientConflict(pgError(code))).toBe(false);
    expect(isTransientConflict(new Error("deadlock detected"))).toBe(false);
    expect(isTransientConflict(undefined)).toBe(false);
  });
});
