import { createHash, randomBytes } from "node:crypto";
import { FeedCache } from "../db/cache.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { PortalService } from "../portal/portal.service.js";
import { findUser, updateUser } from "../users/user.repository.js";
import { type Caller, makeCaller } from "./caller.js";
import { dummyPasswordHash, hashPassword, needsRehash, verifyPassword } from "./password.js";
import { deleteExpiredTokens, deleteToken, findTokenHolder, insertToken } from "./token.repository.js";

export interface TokenRequest {
  username: string;
  password: string;
  /** Minutes; capped by the organization's maximum. */
  expiration?: number | undefined;
  client: "referer" | "ip" | "requestip";
  referer?: string | undefined;
  ip?: string | undefined;
  /** Address the request came from, used when `client` is `requestip`. */
  requestIp: string;
}

export interface IssuedToken {
  token: string;
  expires: number;
  ssl: boolean;
}

/** Token lifetime when the request does not ask for one (ArcGIS: 60 minutes). */
const DEFAULT_TOKEN_MINUTES = 60;

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("base64url");
}

/**
 * Sign-in with opaque bearer tokens. Only the SHA-256 of a token is stored; a token is valid while
 * its row exists and has not expired, so ending a user's sessions is one DELETE, effective on every
 * node at once.
 */
export class AuthService {
  /** Token holders by token hash: every authenticated request needs one. */
  private readonly holders: FeedCache<string, { caller: Caller; expires: number }>;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
  ) {
    this.holders = new FeedCache(db.feed, ["auth"], (holder) => holder.caller.userId);
  }

  async generateToken(request: TokenRequest): Promise<IssuedToken> {
    const user = await findUser(this.db.kysely, request.username);
    // Verify against a dummy hash for unknown users so both failures take the same time.
    const valid = await verifyPassword(request.password, user?.password_hash ?? (await dummyPasswordHash()));
    if (!user || !valid) throw errors.badCredentials();
    if (user.disabled) throw errors.accountDisabled();

    const org = await this.portal.get();
    const maxMinutes = PortalService.maxTokenMinutes(org.settings);
    const minutes = Math.min(request.expiration ?? DEFAULT_TOKEN_MINUTES, maxMinutes);
    const now = Date.now();
    const expires = now + minutes * 60_000;
    const token = randomBytes(32).toString("base64url");
    const upgradedHash = needsRehash(user.password_hash) ? await hashPassword(request.password) : undefined;

    await this.db.transaction(
      async (trx) => {
        await insertToken(trx, {
          token_hash: hashToken(token),
          user_id: user.id,
          created: now,
          expires,
          client: request.client,
          referer: request.client === "referer" ? (request.referer ?? "") : (request.ip ?? request.requestIp),
        });
        await updateUser(trx, user.id, {
          last_login: now,
          ...(upgradedHash ? { password_hash: upgradedHash } : {}),
        });
        await recordEvent(
          trx,
          {
            source: "user",
            operation: "signin",
            objectId: user.username,
            actor: { id: user.id, username: user.username },
          },
          now,
        );
      },
      // lastLogin is part of the signed-in user's cached resource.
      { changes: [`auth:${user.id}`] },
    );
    return { token, expires, ssl: org.settings.allSSL === true };
  }

  /**
   * The caller a token stands for. Throws 498 for an unknown, expired or disabled user's token.
   */
  async authenticate(token: string): Promise<Caller> {
    return (await this.session(token)).caller;
  }

  /** The caller of a valid token and when the token expires (epoch ms). */
  async session(token: string): Promise<{ caller: Caller; expires: number }> {
    const hash = hashToken(token);
    const holder = await this.holders.get(hash, async () => {
      const row = await findTokenHolder(this.db.kysely, hash);
      if (!row || row.disabled) return undefined;
      return { caller: Object.freeze(makeCaller(row)), expires: row.expires };
    });
    if (!holder) throw errors.invalidToken();
    if (holder.expires <= Date.now()) {
      this.holders.delete(hash);
      throw errors.invalidToken();
    }
    return holder;
  }

  /** Ends one token (sign-out). Records the signout event for its holder. */
  async revoke(token: string): Promise<void> {
    const hash = hashToken(token);
    await this.db.transaction(
      async (trx) => {
        const holder = await findTokenHolder(trx, hash);
        if (!holder) throw errors.invalidToken();
        await deleteToken(trx, hash);
        await recordEvent(trx, {
          source: "user",
          operation: "signout",
          objectId: holder.username,
          actor: { id: holder.userId, username: holder.username },
        });
        return holder.userId;
      },
      { changes: (userId) => [`auth:${userId}`] },
    );
  }

  /** Removes expired token rows; run periodically. */
  purgeExpired(): Promise<number> {
    return this.db.transaction((trx) => deleteExpiredTokens(trx, Date.now()));
  }
}
