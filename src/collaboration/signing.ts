import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
} from "node:crypto";

/**
 * Ed25519 signatures over canonical JSON. Invitation and response files and every call one portal
 * makes to another are signed this way, so that neither a file an administrator carries between
 * portals nor a request on the wire can be altered unnoticed.
 *
 * Canonical JSON: object keys sorted, no whitespace. A signed document can then be pretty-printed,
 * re-indented or re-serialised by any JSON library and still verify.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

export interface KeyPair {
  /** Base64 of the raw 32-byte public key; what peers store and files carry. */
  publicKey: string;
  /** PKCS#8 PEM of the private key. */
  privateKey: string;
}

export function generateKeyPair(): KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const jwk = publicKey.export({ format: "jwk" });
  return {
    publicKey: Buffer.from(jwk.x as string, "base64url").toString("base64"),
    privateKey: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
  };
}

export function signDocument(document: unknown, privateKeyPem: string): string {
  return sign(null, Buffer.from(canonicalJson(document)), createPrivateKey(privateKeyPem)).toString("base64");
}

/** Whether `signature` is `publicKey`'s signature of `document`; false for malformed input. */
export function verifyDocument(document: unknown, signature: string, publicKey: string): boolean {
  try {
    const raw = Buffer.from(publicKey, "base64");
    if (raw.length !== 32) return false;
    const key = createPublicKey({
      key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") },
      format: "jwk",
    });
    return verify(null, Buffer.from(canonicalJson(document)), key, Buffer.from(signature, "base64"));
  } catch {
    return false;
  }
}

/** Short form of a public key for administrators to compare out of band (SHA-256, hex pairs). */
export function fingerprint(publicKey: string): string {
  const hex = createHash("sha256").update(Buffer.from(publicKey, "base64")).digest("hex");
  return (hex.slice(0, 32).match(/../g) ?? []).join(":");
}

export function digestOf(document: unknown): string {
  return createHash("sha256").update(canonicalJson(document)).digest("hex");
}
