import { describe, expect, it } from "vitest";
import {
  generatePassword,
  hashPassword,
  needsRehash,
  PasswordHasher,
  TEST_SCRYPT_COST,
  verifyPassword,
} from "./password.js";

describe("password hashing", () => {
  it("verifies the right password and refuses a wrong one", async () => {
    const hash = await hashPassword("correct horse battery staple");
    expect(hash).toMatch(/^scrypt\$16\$8\$2\$/);
    expect(hash).not.toContain("correct horse");
    expect(await verifyPassword("correct horse battery staple", hash)).toBe(true);
    expect(await verifyPassword("correct horse battery stapl", hash)).toBe(false);
    expect(needsRehash(hash)).toBe(false);
  });

  it("salts every hash", async () => {
    expect(await hashPassword("same")).not.toBe(await hashPassword("same"));
  });

  it("treats hashes with older parameters as valid but due for an upgrade", () => {
    expect(needsRehash("scrypt$14$8$1$c2FsdA==$a2V5")).toBe(true);
  });

  it("refuses malformed stored hashes", async () => {
    expect(await verifyPassword("x", "plain-text")).toBe(false);
  });

  it("generates long random passwords", () => {
    const a = generatePassword();
    expect(a).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(generatePassword()).not.toBe(a);
  });

  it("hashes at OWASP's cost unless a test portal asks for the cheaper test cost, and upgrades such hashes", async () => {
    const production = new PasswordHasher();
    const test = new PasswordHasher(undefined, TEST_SCRYPT_COST);
    const strong = await production.hash("correct horse", "t");
    const cheap = await test.hash("correct horse", "t");
    expect(strong).toMatch(/^scrypt\$16\$8\$2\$/);
    expect(cheap).toMatch(/^scrypt\$10\$8\$1\$/);
    // Verification reads the cost stored with the hash, whoever made it.
    expect(await production.verify("correct horse", cheap, "t")).toBe(true);
    expect(await test.verify("correct horse", strong, "t")).toBe(true);
    expect(await test.verify("correct hors", cheap, "t")).toBe(false);
    // A cheap hash that reaches a real portal is upgraded at the next sign-in.
    expect(production.needsRehash(cheap)).toBe(true);
    expect(production.needsRehash(strong)).toBe(false);
    expect(test.needsRehash(cheap)).toBe(false);
    expect(await test.verifyUnknown("anything", "t")).toBe(false);
  });
});
