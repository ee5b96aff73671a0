import { randomBytes, scrypt as scryptCallback, timingSafeEqual } from "node:crypto";
import { errors } from "../errors.js";
import { FairLimiter } from "./fair-limiter.js";

/** scrypt's cost parameters: N = 2^log2n, block size r, parallelism p (memory: 128 * N * r bytes). */
export interface ScryptCost {
  log2n: number;
  r: number;
  p: number;
}

/**
 * Password hashing with scrypt, a memory-hard function built into Node (no native add-on).
 * Parameters follow OWASP's scrypt guidance (N=2^16, r=8, p=2: 64 MiB per hash) and are stored
 * with each hash, so they can be raised later and old hashes upgraded at the next sign-in.
 */
export const SCRYPT_COST: Readonly<ScryptCost> = Object.freeze({ log2n: 16, r: 8, p: 2 });

/**
 * 1 MiB per hash, some 150 times cheaper than SCRYPT_COST: for test portals whose tests do not test
 * hashing (most sign in and create accounts only to set up what they test). No operator setting
 * reaches it; only `startPortico`'s `testPasswordHashing` does. A hash made at this cost that
 * reaches a real portal is upgraded at its next sign-in (`needsRehash`).
 */
export const TEST_SCRYPT_COST: Readonly<ScryptCost> = Object.freeze({ log2n: 10, r: 8, p: 1 });

const KEY_LENGTH = 32;
const MAX_MEMORY = 256 * 1024 * 1024;

function scrypt(password: string, salt: Buffer, log2n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scryptCallback(password, salt, KEY_LENGTH, { N: 2 ** log2n, r, p, maxmem: MAX_MEMORY }, (err, key) =>
      err ? reject(err) : resolve(key),
    );
  });
}

export async function hashPassword(password: string, cost: ScryptCost = SCRYPT_COST): Promise<string> {
  const { log2n, r, p } = cost;
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, log2n, r, p);
  return `scrypt$${log2n}$${r}$${p}$${salt.toString("base64")}$${key.toString("base64")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [, log2n, r, p, salt, expected] = parts as [string, string, string, string, string, string];
  const key = await scrypt(password, Buffer.from(salt, "base64"), Number(log2n), Number(r), Number(p));
  const want = Buffer.from(expected, "base64");
  return want.length === key.length && timingSafeEqual(key, want);
}

export function needsRehash(stored: string, cost: ScryptCost = SCRYPT_COST): boolean {
  return !stored.startsWith(`scrypt$${cost.log2n}$${cost.r}$${cost.p}$`);
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
  /**
   * A hash of a random password, verified against when a username does not exist, so that an
   * unknown username takes as long to reject as a wrong password. Made at the hasher's cost.
   */
  private dummy: Promise<string> | undefined;

  constructor(
    limits: HashingLimits = DEFAULT_HASHING_LIMITS,
    private readonly cost: Readonly<ScryptCost> = SCRYPT_COST,
  ) {
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
    return this.limiter.run(source, () => hashPassword(password, this.cost));
  }

  verify(password: string, stored: string, source: string): Promise<boolean> {
    return this.limiter.run(source, () => verifyPassword(password, stored));
  }

  /** Verifies against the dummy hash: see `dummy`. */
  async verifyUnknown(password: string, source: string): Promise<false> {
    this.dummy ??= hashPassword(randomBytes(16).toString("hex"), this.cost);
    const stored = await this.dummy;
    await this.verify(password, stored, source);
    return false;
  }

  /** Whether `stored` was made at another cost than this hasher's (an upgrade is due). */
  needsRehash(stored: string): boolean {
    return needsRehash(stored, this.cost);
  }
}
