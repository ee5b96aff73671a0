import { describe, expect, it } from "vitest";
import {
  canonicalJson,
  digestOf,
  fingerprint,
  generateKeyPair,
  signDocument,
  verifyDocument,
} from "./signing.js";

const document = { portalId: "p1", nested: { b: [1, "two", null], a: true }, name: "Ü ✓" };

describe("canonical JSON", () => {
  it("sorts keys at every depth and writes no whitespace", () => {
    expect(canonicalJson(document)).toBe(
      '{"name":"Ü ✓","nested":{"a":true,"b":[1,"two",null]},"portalId":"p1"}',
    );
  });

  it("is the same text for the same document whatever its key order or indentation", () => {
    const reordered = JSON.parse(
      JSON.stringify({ name: "Ü ✓", portalId: "p1", nested: { a: true, b: [1, "two", null] } }, null, 2),
    );
    expect(canonicalJson(reordered)).toBe(canonicalJson(document));
    expect(digestOf(reordered)).toBe(digestOf(document));
  });

  it("leaves out undefined members and writes undefined array entries as null, as JSON does", () => {
    expect(canonicalJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
  });
});

describe("signatures", () => {
  const keys = generateKeyPair();

  it("verify for the signer's key, after the document is re-serialised", () => {
    const signature = signDocument(document, keys.privateKey);
    const copy = JSON.parse(JSON.stringify(document, null, 4));
    expect(verifyDocument(copy, signature, keys.publicKey)).toBe(true);
  });

  it("fail when any value changes, even deep inside", () => {
    const signature = signDocument(document, keys.privateKey);
    const altered = { ...document, nested: { ...document.nested, b: [1, "two", 0] } };
    expect(verifyDocument(altered, signature, keys.publicKey)).toBe(false);
  });

  it("fail for another portal's key", () => {
    const signature = signDocument(document, keys.privateKey);
    expect(verifyDocument(document, signature, generateKeyPair().publicKey)).toBe(false);
  });

  it("answer false, never throw, for a malformed key or signature", () => {
    const signature = signDocument(document, keys.privateKey);
    expect(verifyDocument(document, signature, "not a key")).toBe(false);
    expect(verifyDocument(document, signature, Buffer.alloc(31).toString("base64"))).toBe(false);
    expect(verifyDocument(document, "%%%", keys.publicKey)).toBe(false);
    expect(verifyDocument(document, "", keys.publicKey)).toBe(false);
  });
});

describe("fingerprints", () => {
  it("are 16 hex pairs, the same for the same key and different for another", () => {
    const keys = generateKeyPair();
    expect(fingerprint(keys.publicKey)).toMatch(/^([0-9a-f]{2}:){15}[0-9a-f]{2}$/);
    expect(fingerprint(keys.publicKey)).toBe(fingerprint(keys.publicKey));
    expect(fingerprint(generateKeyPair().publicKey)).not.toBe(fingerprint(keys.publicKey));
  });
});
