import { randomUUID } from "node:crypto";
import type { Db } from "../db/database.js";
import { isUniqueViolation } from "../db/database.js";
import { type OutboundGuard, OutboundRefused } from "../outbound/guard.js";
import { generateKeyPair, type KeyPair, signDocument, verifyDocument } from "./signing.js";

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
 * What a host answers a guest it no longer counts (removed, left, collaboration deleted), and a
 * call it cannot authenticate (`errors.peerCallRefused`) among others: codes of `errors.ts`.
 */
export { CALL_REFUSED, PARTICIPATION_ENDED } from "../errors.js";

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
export class PortalKeys {
  private cached: KeyPair | undefined;

  constructor(private readonly db: Db) {}

  async get(): Promise<KeyPair> {
    if (this.cached) return this.cached;
    const row = await this.db.kysely
      .selectFrom("portal_keys")
      .selectAll()
      .where("id", "=", "portal")
      .executeTakeFirst();
    if (row) {
      this.cached = { publicKey: row.public_key, privateKey: row.private_key };
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
    return pair;
  }
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
    timeoutMs = 120_000,
  ): Promise<T> {
    const full: PeerEnvelope = { ...envelope, issued: Date.now(), nonce: randomUUID() };
    const { privateKey } = await this.keys.get();
    const signature = signDocument(full, privateKey);
    let text: string;
    let status: number;
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
    } catch (err) {
      if (err instanceof OutboundRefused)
        throw new PeerCallFailed(`${portalUrl} refused by the address guard: ${err.message}`);
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code;
      throw new PeerCallFailed(`${portalUrl} could not be reached (${cause ?? (err as Error).message})`);
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
  publicKey: string,
  selfId: string,
): Promise<string | undefined> {
  if (!verifyDocument(envelope, signature, publicKey)) return SIGNATURE_MISMATCH;
  if (envelope.to !== selfId) return "the call is addressed to another portal";
  const now = Date.now();
  if (typeof envelope.issued !== "number" || Math.abs(now - envelope.issued) > PEER_CLOCK_WINDOW_MS) {
    return "the call was issued outside the accepted clock window (5 minutes)";
  }
  try {
    await db.transaction(async (trx) => {
      await trx.deleteFrom("peer_nonces").where("expires", "<", now).execute();
      await trx
        .insertInto("peer_nonces")
        .values({ nonce: String(envelope.nonce), expires: envelope.issued + PEER_CLOCK_WINDOW_MS })
        .execute();
    });
  } catch (err) {
    if (isUniqueViolation(err)) return "the call was already received (replayed nonce)";
    throw err;
  }
  return undefined;
}
