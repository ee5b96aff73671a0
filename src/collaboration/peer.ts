import { createHash, randomUUID } from "node:crypto";
import type { Db } from "../db/database.js";
import { isUniqueViolation, later } from "../db/database.js";
import type { ParticipantTable } from "../db/schema.js";
import { type OutboundGuard, OutboundRefused } from "../outbound/guard.js";
import { digestOf, generateKeyPair, type KeyPair, signDocument, verifyDocument } from "./signing.js";

/**
 * Portal-to-portal calls. Every call is a signed envelope: who calls (`from`, an organization id),
 * whom (`to`), for which collaboration, which operation, when, a nonce, and the body. The callee
 * checks the signature against the public key exchanged in the invitation files, the clock window
 * and the nonce (a replayed call is refused), so no shared password exists anywhere.
 *
 * The guest starts every call of a sync (hosts often cannot reach their guests); the host calls a
 * guest only to tell it something changed, and a guest it cannot reach learns it on its next sync.
 */
export interface PeerEnvelope {
  collaborationId: string;
  from: string;
  to: string;
  op: string;
  issued: number;
  nonce: string;
  body: Record<string, unknown>;
}

/**
 * Headers in which a call names its collaboration and its sender (the envelope's
 * `collaborationId` and `from`), so that the callee can refuse a large body from a portal it does
 * not know before reading it. They prove nothing: the signature in the body still decides.
 */
export const PEER_HEADERS = { collaboration: "x-portico-collaboration", from: "x-portico-from" } as const;

/**
 * The header of the callee's signature over its answer (`answerDocument`). Requests are signed in
 * their body; answers in this header, so that the body stays the plain ArcGIS-style JSON.
 */
export const ANSWER_SIGNATURE_HEADER = "x-portico-answer-signature";

/**
 * What a callee signs for its answer: the digest of the exact request it answers (envelope and
 * signature, so an answer cannot be replayed for another call, nor one call's answer be obtained
 * by sending the callee an altered copy of it), the HTTP status, and the SHA-256 of the exact
 * bytes of the body. Over plain HTTP, something between the portals can then neither alter an
 * answer nor make one up (a forged COLLAB_0410 that would make a guest drop a collaboration).
 */
export function answerDocument(
  request: { envelope: unknown; signature: unknown },
  status: number,
  body: string,
) {
  return {
    request: digestOf({ envelope: request.envelope, signature: request.signature }),
    status,
    body: createHash("sha256").update(body).digest("hex"),
  };
}

/**
 * What a host answers a guest it no longer counts (removed, left, collaboration deleted), and a
 * call it cannot authenticate (`errors.peerCallRefused`) among others: codes of `errors.ts`.
 */
export { CALL_REFUSED, PARTICIPATION_ENDED } from "../errors.js";

/** `PeerCallFailed.messageCode` of an answer whose signature is missing or wrong. */
export const ANSWER_REFUSED = "answer-refused";

/** How far a call's `issued` may be from the callee's clock. */
export const PEER_CLOCK_WINDOW_MS = 5 * 60 * 1000;
/** Largest answer read from a peer: a batch of items with their data. */
const MAX_PEER_RESPONSE_BYTES = 160 * 1024 * 1024;

/** Why a peer call failed, in words for a sync's results and the administrator. */
export class PeerCallFailed extends Error {
  constructor(
    message: string,
    /** The callee's error code when it answered with one (for example 403 for a removed guest). */
    readonly code?: number,
    readonly messageCode?: string,
  ) {
    super(message);
    this.name = "PeerCallFailed";
  }
}

/** This portal's signing key, made on first use and kept in the database. */
/** How long a node signs with the key pair it read before it reads it again. */
const KEY_CACHE_MS = 5000;

export class PortalKeys {
  private cached: KeyPair | undefined;
  private cachedAt = 0;

  constructor(private readonly db: Db) {}

  /** The private key of one of this portal's key pairs, current or retired, by its public key. */
  async privateFor(publicKey: string): Promise<string> {
    const row = await this.db.kysely
      .selectFrom("portal_keys")
      .select("private_key")
      .where("public_key", "=", publicKey)
      .executeTakeFirst();
    if (!row) throw new PeerCallFailed("the key this message is to be signed with is no longer kept here");
    return row.private_key;
  }

  /** Drops the cached pair (this node rotated it). */
  forget(): void {
    this.cached = undefined;
  }

  async get(): Promise<KeyPair> {
    // Re-read every few seconds: another node may have rotated the key.
    if (this.cached && Date.now() - this.cachedAt < KEY_CACHE_MS) return this.cached;
    const row = await this.db.kysely
      .selectFrom("portal_keys")
      .selectAll()
      .where("id", "=", "portal")
      .executeTakeFirst();
    if (row) {
      this.cached = { publicKey: row.public_key, privateKey: row.private_key };
      this.cachedAt = Date.now();
      return this.cached;
    }
    const pair = generateKeyPair();
    try {
      await this.db.transaction((trx) =>
        trx
          .insertInto("portal_keys")
          .values({
            id: "portal",
            public_key: pair.publicKey,
            private_key: pair.privateKey,
            created: Date.now(),
          })
          .execute(),
      );
    } catch (err) {
      // Another node made it first; use that one.
      if (!isUniqueViolation(err)) throw err;
      this.cached = undefined;
      return this.get();
    }
    this.cached = pair;
    this.cachedAt = Date.now();
    return pair;
  }
}

/** A key a participant used before it rotated to its current one, as this portal learned it. */
export interface RetiredKey {
  /** Absent for a key this portal learned of only by its revocation. */
  publicKey?: string;
  fingerprint: string;
  /** Accepted until then (epoch ms); 0 once revoked. */
  until: number;
  revoked: boolean;
}

/** How long a participant's retired key is still accepted after it announced its successor. */
export const RETIRED_KEY_GRACE_MS = 60 * 60 * 1000;

export function retiredKeysOf(participant: { retired_keys?: string }): RetiredKey[] {
  try {
    const keys = JSON.parse(participant.retired_keys ?? "[]") as unknown;
    return Array.isArray(keys) ? (keys as RetiredKey[]) : [];
  } catch {
    return [];
  }
}

/**
 * The keys a participant's calls and answers may be signed with: its current key, and a key it
 * retired within the last hour unless revoked (a call signed just before the rotation, a node of
 * that portal that has not reloaded its key yet).
 */
export function acceptedKeys(
  participant: Pick<ParticipantTable, "public_key"> & { retired_keys?: string },
  now = Date.now(),
): string[] {
  const retired = retiredKeysOf(participant).flatMap((k) =>
    !k.revoked && k.publicKey && k.until > now ? [k.publicKey] : [],
  );
  return [participant.public_key, ...retired];
}

/** The keys of a participant that were revoked and that this portal still knows. */
export function revokedKeys(participant: { retired_keys?: string }): string[] {
  return retiredKeysOf(participant).flatMap((k) => (k.revoked && k.publicKey ? [k.publicKey] : []));
}

/** The API root of a portal from its URL as administrators write it (with or without /sharing/rest). */
export function normalizePortalUrl(value: string): string {
  const url = new URL(value);
  const path = url.pathname
    .replace(/\/+$/, "")
    .replace(/\/sharing\/rest$/i, "")
    .replace(/\/+$/, "");
  return `${url.protocol}//${url.host.toLowerCase()}${path}`;
}

export class PeerClient {
  constructor(
    private readonly guard: OutboundGuard,
    private readonly keys: PortalKeys,
  ) {}

  /**
   * Calls `op` on the portal at `portalUrl`, signed as `from`. Resolves with the answer's JSON;
   * rejects with `PeerCallFailed` saying why (refused address, network error, error answer).
   */
  async call<T>(
    portalUrl: string,
    envelope: Omit<PeerEnvelope, "issued" | "nonce">,
    /** The callee's keys its answer may be signed with (the trust exchange's, and any it rotated to). */
    calleeKeys: readonly string[],
    options: {
      /** Keys the callee revoked: an answer signed with one is refused, saying so. */
      revokedKeys?: readonly string[];
      timeoutMs?: number;
      /** The public key of the key to sign with (a retired one, for the message announcing its successor). */
      signWith?: string;
    } = {},
  ): Promise<T> {
    const timeoutMs = options.timeoutMs ?? 120_000;
    const full: PeerEnvelope = { ...envelope, issued: Date.now(), nonce: randomUUID() };
    const privateKey = options.signWith
      ? await this.keys.privateFor(options.signWith)
      : (await this.keys.get()).privateKey;
    const signature = signDocument(full, privateKey);
    let text: string;
    let status: number;
    let answerSignature: string | string[] | undefined;
    try {
      const res = await this.guard.post(`${portalUrl}/sharing/rest/portico/peer/${envelope.op}?f=json`, {
        headers: {
          "content-type": "application/json",
          [PEER_HEADERS.collaboration]: envelope.collaborationId,
          [PEER_HEADERS.from]: envelope.from,
        },
        body: JSON.stringify({ envelope: full, signature }),
        connectTimeoutMs: 10_000,
        totalTimeoutMs: timeoutMs,
        maxResponseBytes: MAX_PEER_RESPONSE_BYTES,
      });
      text = res.excerpt;
      status = res.status;
      answerSignature = res.headers[ANSWER_SIGNATURE_HEADER];
    } catch (err) {
      if (err instanceof OutboundRefused)
        throw new PeerCallFailed(`${portalUrl} refused by the address guard: ${err.message}`);
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;
      throw new PeerCallFailed(`${portalUrl} could not be reached (${cause ?? (err as Error).message})`);
    }
    // Nothing of an answer is believed before its signature is: not even an error it carries.
    const signed = answerDocument({ envelope: full, signature }, status, text);
    if (
      typeof answerSignature !== "string" ||
      !calleeKeys.some((key) => verifyDocument(signed, answerSignature, key))
    ) {
      const revoked =
        typeof answerSignature === "string" &&
        (options.revokedKeys ?? []).some((key) => verifyDocument(signed, answerSignature, key));
      throw new PeerCallFailed(
        revoked
          ? `${portalUrl} answered '${envelope.op}' signed with a key its portal revoked; the answer was refused`
          : `${portalUrl} answered '${envelope.op}' (HTTP ${status}) ${typeof answerSignature === "string" ? "with a signature that does not match its key" : "without a signature"}; the answer was refused (altered on the way, or not from that portal)`,
        undefined,
        ANSWER_REFUSED,
      );
    }
    let answer: Record<string, unknown>;
    try {
      answer = JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new PeerCallFailed(`${portalUrl} answered ${envelope.op} with HTTP ${status} and no JSON`);
    }
    const error = answer.error as
      | { code?: number; messageCode?: string; message?: string; details?: string[] }
      | undefined;
    if (error) {
      const details = error.details?.length ? ` (${error.details.join(" ")})` : "";
      throw new PeerCallFailed(
        `${portalUrl}: ${error.message ?? "error"}${details}`,
        error.code,
        error.messageCode,
      );
    }
    return answer as T;
  }
}

/** The refusal of a call signed with a key its portal revoked (`rotateKey`, `revokeKey`). */
export const REVOKED_KEY = "the call is signed with a key its portal revoked";

/** The refusal of a call whose signature does not match: its sender is not known to be anyone. */
export const SIGNATURE_MISMATCH = "the signature does not match the participant's key";

/**
 * Checks an incoming envelope's signature, clock and nonce; returns the reason it is refused. The
 * signature comes first: the other reasons are told only to a caller proven to be the participant.
 */
export async function peerRefusal(
  db: Db,
  envelope: PeerEnvelope,
  signature: string,
  participant: Pick<ParticipantTable, "public_key"> & { retired_keys?: string },
  selfId: string,
): Promise<string | undefined> {
  if (!acceptedKeys(participant).some((key) => verifyDocument(envelope, signature, key))) {
    if (revokedKeys(participant).some((key) => verifyDocument(envelope, signature, key))) return REVOKED_KEY;
    return SIGNATURE_MISMATCH;
  }
  if (envelope.to !== selfId) return "the call is addressed to another portal";
  const now = Date.now();
  if (typeof envelope.issued !== "number" || Math.abs(now - envelope.issued) > PEER_CLOCK_WINDOW_MS) {
    return "the call was issued outside the accepted clock window (5 minutes)";
  }
  try {
    // Neither answer is read: on PostgreSQL both travel with the COMMIT, one message for the
    // transaction, and a replayed nonce's unique violation is the commit's.
    await db.transaction(async (trx) => {
      await later(trx, trx.deleteFrom("peer_nonces").where("expires", "<", now).compile());
      await later(
        trx,
        trx
          .insertInto("peer_nonces")
          .values({ nonce: String(envelope.nonce), expires: envelope.issued + PEER_CLOCK_WINDOW_MS })
          .compile(),
      );
    });
  } catch (err) {
    if (isUniqueViolation(err)) return "the call was already received (replayed nonce)";
    throw err;
  }
  return undefined;
}
