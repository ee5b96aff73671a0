import { describe, expect, it } from "vitest";
import {
  brokenRules,
  DEFAULT_LOCKOUT_POLICY,
  DEFAULT_PASSWORD_POLICY,
  lockoutStatus,
  type PasswordPolicy,
  policyChanges,
  requireCompliantPassword,
  securityPolicyJson,
  securityPolicyOf,
} from "./security-policy.js";

const strict: PasswordPolicy = {
  ...DEFAULT_PASSWORD_POLICY,
  minLength: 12,
  minUpper: 2,
  minLower: 1,
  minLetter: 4,
  minDigit: 2,
  minOther: 1,
};

describe("password policy", () => {
  it("names every rule a password breaks", () => {
    expect(brokenRules(strict, "abc")).toEqual([
      "at least 12 characters (minLength)",
      "at least 2 upper-case letters (minUpper)",
      "at least 4 letters (minLetter)",
      "at least 2 digits (minDigit)",
      "at least 1 character other than a letter or digit (minOther)",
    ]);
    expect(brokenRules(strict, "ABcd12-xxxxx")).toEqual([]);
  });

  it("counts characters, not UTF-16 units, and non-ASCII letters and digits as such", () => {
    expect(brokenRules({ ...DEFAULT_PASSWORD_POLICY, minLength: 8 }, "😀😀😀😀😀😀😀")).toEqual([
      "at least 8 characters (minLength)",
    ]);
    expect(brokenRules({ ...strict, minLength: 8, minOther: null }, "ÄÖüß٣٤xx")).toEqual([]);
  });

  it("accepts any password of 8 characters by default", () => {
    expect(brokenRules(DEFAULT_PASSWORD_POLICY, "aaaaaaaa")).toEqual([]);
    expect(() => requireCompliantPassword(strict, "short", "password")).toThrow(
      /'password'.*minLength.*minUpper/,
    );
  });

  it("answers as ArcGIS: type default until changed, only the rules that are set", () => {
    expect(securityPolicyJson(securityPolicyOf("{}"))).toEqual({
      passwordPolicy: { type: "default", minLength: 8, created: -1, modified: -1 },
      lockoutPolicy: DEFAULT_LOCKOUT_POLICY,
    });
    const stored = JSON.stringify({ passwordPolicy: { minDigit: 1, minUpper: null }, modified: 5 });
    expect(securityPolicyJson(securityPolicyOf(stored)).passwordPolicy).toEqual({
      type: "custom",
      minLength: 8,
      minDigit: 1,
      created: -1,
      modified: 5,
    });
  });
});

describe("lockout status", () => {
  const now = 10_000_000;
  it("shows a lock until it runs out, and failures only within their window", () => {
    expect(lockoutStatus(undefined, DEFAULT_LOCKOUT_POLICY, now)).toEqual({
      locked: false,
      lockedUntil: -1,
      failedLoginAttempts: 0,
    });
    const locked = { failures: 5, first_failure: now - 1000, locked_until: now + 1000 };
    expect(lockoutStatus(locked, DEFAULT_LOCKOUT_POLICY, now)).toEqual({
      locked: true,
      lockedUntil: now + 1000,
      failedLoginAttempts: 5,
    });
    expect(lockoutStatus({ ...locked, locked_until: now - 1 }, DEFAULT_LOCKOUT_POLICY, now).locked).toBe(
      false,
    );
    const recent = { failures: 2, first_failure: now - 60_000, locked_until: 0 };
    expect(lockoutStatus(recent, DEFAULT_LOCKOUT_POLICY, now).failedLoginAttempts).toBe(2);
    const old = { failures: 2, first_failure: now - 16 * 60_000, locked_until: 0 };
    expect(lockoutStatus(old, DEFAULT_LOCKOUT_POLICY, now).failedLoginAttempts).toBe(0);
  });
});

describe("securityPolicy/update changes", () => {
  it("sets rules sent with a value and leaves rules not sent alone", () => {
    const changes = policyChanges({ minLength: 12, maxFailedAttempts: 3 }, new Set());
    expect(changes).toEqual({ passwordPolicy: { minLength: 12 }, lockoutPolicy: { maxFailedAttempts: 3 } });
  });

  it("clears a rule sent empty: to null where it may be absent, back to its default otherwise", () => {
    const changes = policyChanges({}, new Set(["minUpper", "minLength", "lockoutDurationInMinutes"]));
    expect(changes.passwordPolicy).toHaveProperty("minUpper", null);
    // Present with an undefined value: merged over the stored policy, it removes the stored one.
    expect(Object.keys(changes.passwordPolicy)).toContain("minLength");
    expect(changes.passwordPolicy.minLength).toBeUndefined();
    expect(Object.keys(changes.lockoutPolicy)).toEqual(["lockoutDurationInMinutes"]);
    expect(changes.lockoutPolicy.lockoutDurationInMinutes).toBeUndefined();
  });
});
