import { describe, expect, it } from "vitest";
import {
  type AttemptResult,
  afterAttempt,
  attemptTimeoutMs,
  deactivationPolicyOf,
  failureCountStart,
  retryAfterMs,
} from "./delivery-rules.js";

const NOW = 1_700_000_000_000;
const settings = {
  notificationAttempts: 3,
  notificationTimeOutInSeconds: 10,
  notificationElapsedTimeInSeconds: 5,
};
const fresh = { attempts: 0, total_attempts: 0, next_attempt: NOW - 1000 };
const answered = (statusCode: number, retryAfter?: number): AttemptResult => ({
  statusCode,
  error: "",
  excerpt: `answer ${statusCode}`,
  retryAfterMs: retryAfter,
});
const unreachable: AttemptResult = {
  statusCode: null,
  error: "ECONNREFUSED: connect",
  excerpt: "",
  retryAfterMs: undefined,
};

describe("afterAttempt", () => {
  it("delivers on any 2xx and releases the lease", () => {
    for (const status of [200, 202, 204, 299]) {
      const { verdict, gone, update } = afterAttempt(fresh, answered(status), settings, NOW);
      expect({ verdict, gone }).toEqual({ verdict: "delivered", gone: false });
      expect(update).toEqual({
        status: "delivered",
        attempts: 1,
        total_attempts: 1,
        next_attempt: fresh.next_attempt,
        lease_until: 0,
        completed: NOW,
        last_status: status,
        last_response: `answer ${status}`,
      });
    }
  });

  it("retries after the configured interval while attempts are left", () => {
    const { verdict, update } = afterAttempt(fresh, answered(500), settings, NOW);
    expect(verdict).toBe("retrying");
    expect(update).toMatchObject({
      status: "pending",
      attempts: 1,
      next_attempt: NOW + 5000,
      completed: null,
    });
  });

  it("waits for a longer Retry-After, never for a shorter one", () => {
    expect(afterAttempt(fresh, answered(503, 60_000), settings, NOW).update.next_attempt).toBe(NOW + 60_000);
    expect(afterAttempt(fresh, answered(503, 1000), settings, NOW).update.next_attempt).toBe(NOW + 5000);
  });

  it("fails once the attempts of the settings are spent, keeping the last due time", () => {
    const third = { attempts: 2, total_attempts: 7, next_attempt: NOW - 5 };
    const { verdict, gone, update } = afterAttempt(third, unreachable, settings, NOW);
    expect({ verdict, gone }).toEqual({ verdict: "failed", gone: false });
    expect(update).toEqual({
      status: "failed",
      attempts: 3,
      total_attempts: 8,
      next_attempt: NOW - 5,
      lease_until: 0,
      completed: NOW,
      last_status: null,
      last_response: "ECONNREFUSED: connect",
    });
  });

  it("makes at least one attempt when the settings allow none", () => {
    const none = { ...settings, notificationAttempts: 0 };
    expect(afterAttempt(fresh, answered(500), none, NOW).verdict).toBe("failed");
  });

  it("fails at once on 410 Gone and marks the webhook gone", () => {
    const { verdict, gone, update } = afterAttempt(fresh, answered(410), settings, NOW);
    expect({ verdict, gone, status: update.status, attempts: update.attempts }).toEqual({
      verdict: "failed",
      gone: true,
      status: "failed",
      attempts: 1,
    });
  });
});

describe("attemptTimeoutMs", () => {
  it("is the setting in milliseconds, and at least a second", () => {
    expect(attemptTimeoutMs({ ...settings, notificationTimeOutInSeconds: 7 })).toBe(7000);
    expect(attemptTimeoutMs({ ...settings, notificationTimeOutInSeconds: 0 })).toBe(1000);
  });
});

describe("the deactivation policy", () => {
  it("is the webhook's own, or five failures in five days", () => {
    expect(deactivationPolicyOf('{"deactivationPolicy":{"numberOfFailures":2,"daysInPast":9}}')).toEqual({
      numberOfFailures: 2,
      daysInPast: 9,
    });
    expect(deactivationPolicyOf("{}")).toEqual({ numberOfFailures: 5, daysInPast: 5 });
  });

  it("counts failures of the last daysInPast days, but none before the last activation", () => {
    const policy = { numberOfFailures: 5, daysInPast: 2 };
    const twoDaysAgo = NOW - 2 * 86_400_000;
    expect(failureCountStart(0, policy, NOW)).toBe(twoDaysAgo);
    expect(failureCountStart(NOW - 3600_000, policy, NOW)).toBe(NOW - 3600_000);
  });
});

describe("retryAfterMs", () => {
  it("reads seconds and HTTP dates", () => {
    expect(retryAfterMs("120", NOW)).toBe(120_000);
    expect(retryAfterMs(" 3 ", NOW)).toBe(3000);
    expect(retryAfterMs(new Date(NOW + 90_000).toUTCString(), NOW)).toBe(90_000);
    expect(retryAfterMs(["7", "9"], NOW)).toBe(7000);
  });

  it("caps the wait at an hour", () => {
    expect(retryAfterMs("86400", NOW)).toBe(3600_000);
  });

  it("ignores what is absent, unreadable or past", () => {
    for (const value of [undefined, "", "soon", "-5", new Date(NOW - 1000).toUTCString()]) {
      expect(retryAfterMs(value, NOW), String(value)).toBeUndefined();
    }
  });
});
