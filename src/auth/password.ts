import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from "node:crypto";

/**
 * Password hashing with scrypt, a memory-hard function built into Node (no native add-on).
 * Parameters follow OWASP's scrypt guidance (N=2^16, r=8, p=2: 64 MiB per hash) and are stored
 * with each hash, so they can be raised later and old hashes upgraded at the next sign-in.
 */
const LOG2_N = 16;
const R = 8;
const P = 2;
const KEY_LENGTH = 32;
const MAX_MEMORY = 256 * 1024 * 1024;

function scrypt(password: string, salt: Buffer, log2n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCallback(password, salt, KEY_LENGTH, { N: 2 ** log2n, r, p, maxmem: MAX_MEMORY }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, LOG2_N, R, P);
  return `scrypt$${LOG2_N}$${R}$${P}$${salt.toString("base64")}$${key.toString("base64")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [, log2n, r, p, salt, expected] = parts as [string, string, string, string, string, string];
  const key = await scrypt(password, Buffer.from(salt, "base64"), Number(log2n), Number(r), Number(p));
  const want = Buffer.from(expected, "base64");
  return want.length === key.length && timingSafeEqual(key, want);
}

export function needsRehash(stored: string): boolean {
  return !stored.startsWith(`scrypt$${LOG2_N}$${R}$${P}$`);
}

/**
 * A hash of a random password, verified against when a username does not exist, so that an
 * unknown username takes as long to reject as a wrong password.
 */
let dummyHash: Promise<string> | undefined;
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword(randomBytes(16).toString("hex"));
  return dummyHash;
}

/** A strong generated password for the first administrator: 24 characters, about 143 bits. */
export function generatePassword(): string {
  return randomBytes(18).toString("base64url");
}
