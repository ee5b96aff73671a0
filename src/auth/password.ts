import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from "node:crypto";
import { errors } from "../errors.js";
import { FairLimiter } from "./fair-limiter.js";

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

export interface HashingLimits {
  /** scrypt runs at once (64 MiB each). */
  concurrency: number;
  /** Hashes that may wait for a slot; more are refused at once. */
  maxQueued: number;
}

export const DEFAULT_HASHING_LIMITS: Readonly<HashingLimits> = Object.freeze({
  concurrency: 2,
  maxQueued: 32,
});

/**
 * Every password hash and verification of the process goes through one fair limiter: scrypt takes
 * 64 MiB and most of a core for a few hundred ms, so unbounded concurrent sign-ins are a cheap way
 * to exhaust memory and to starve real sign-ins. Each source (the caller's address, an IPv6 one by
 * its /64, or the account being changed) may hold a quarter of the queue at most, and waiting
 * sources are served in turn.
 */
export class PasswordHasher {
  private readonly limiter: FairLimiter;

  constructor(limits: HashingLimits = DEFAULT_HASHING_LIMITS) {
    this.limiter = new FairLimiter({
      concurrency: limits.concurrency,
      maxQueued: limits.maxQueued,
      maxQueuedPerKey: Math.max(1, Math.ceil(limits.maxQueued / 4)),
      busy: errors.signInBusy,
    });
  }

  /** Hashes being computed and waiting. */
  get load(): { running: number; queued: number } {
    return this.limiter.load;
  }

  hash(password: string, source: string): Promise<string> {
    return this.limiter.run(source, () => hashPassword(password));
  }

  verify(password: string, stored: string, source: string): Promise<boolean> {
    return this.limiter.run(source, () => verifyPassword(password, stored));
  }
}
