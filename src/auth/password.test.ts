import { describe, expect, it } from "vitest";
import { generatePassword, hashPassword, needsRehash, verifyPassword } from "./password.js";

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
});
