import { hash, randomBytes } from "node:crypto";
import type { Transaction } from "kysely";
import { FeedCache } from "../db/cache.js";
import type { Db, Queryable } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors, PorticoError } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { type Caller, makeCaller } from "./caller.js";
import {
  deleteAppToken,
  deleteExpiredGrants,
  deleteRefreshToken,
  findAppToken,
  findRefreshToken,
} from "./oauth.repository.js";
import type { PasswordHasher } from "./password.js";
import { hashNewPassword } from "./password-change.js";
import { LOCKOUT_RULE_RANGES, passwordExpiresAt, type SecurityPolicy } from "./security-policy.js";
import {
  deleteStaleSignInFailures,
  endSignInFailures,
  findSignInFailures,
  passwordSetAt,
  recordFailedAttempt,
  recordPassword,
  releaseSignInAttempt,
  reserveSignInAttempt,
} from "./sign-in.repository.js";
import {
  deleteExpiredTokens,
  deleteToken,
  deleteTokensOfUser,
  findTokenHolder,
  insertToken,
} from "./token.repository.js";
import {
  clientGroup,
  isIpAddress,
  normalizeIp,
  type Presenter,
  presenterAllowed,
  type TokenClient,
} from "./token-binding.js";

/** A sign-in with a password: `generateToken`, or the OAuth 2.0 sign-in page. */
export interface PasswordSignIn {
  username: string;
  password: string;
  /** Address the request came from: the hashing share (and a `requestip` token's binding). */
  requestIp: string;
  /** Sets a new password while signing in (how an expired password is changed). */
  newPassword?: string | undefined;
}

/**
 * What a successful sign-in grants, written in the transaction that records the sign-in (a token,
 * an authorization code): it gets the account, the time and the organization's settings.
 */
export type Grant<T> = (
  trx: Transaction<Database>,
  user: SignInAccount,
  now: number,
  org: SignInSettings,
) => Promise<T>;

export interface TokenRequest extends PasswordSignIn {
  /** Minutes; capped by the organization's maximum. */
  expiration?: number | undefined;
  client: TokenClient;
  /** Required with `client=referer`: the token then works only from pages under it. */
  referer?: string | undefined;
  /** Required with `client=ip`: the token then works only from that address. */
  ip?: string | undefined;
}

export interface IssuedToken {
  token: string;
  expires: number;
  ssl: boolean;
}

/** What signing in reads of the organization, as it is now. */
export interface SignInSettings {
  securityPolicy: SecurityPolicy;
  /** The longest lifetime a token may be given (the organization's maximum, or the default). */
  maxTokenMinutes: number;
  /** Whether the organization asks clients to use HTTPS (`allSSL`): said with each token. */
  allSSL: boolean;
}

/** The columns of an account that signing in reads. */
export interface SignInAccount {
  id: string;
  username: string;
  password_hash: string;
  disabled: number;
  created: number;
}

/**
 * What the authentication service needs of the organization and of the user accounts, handed to
 * it at construction: the portal and users build on authentication, so it imports neither.
 */
export interface AuthDependencies {
  signInSettings(): Promise<SignInSettings>;
  /** The account of a username in any case, if there is one. */
  findAccount(q: Queryable, username: string): Promise<SignInAccount | undefined>;
  /** Records a sign-in on the account: when, and a new or upgraded password hash. */
  recordSignIn(
    q: Queryable,
    userId: string,
    change: { last_login: number; password_hash?: string; modified?: number },
  ): Promise<void>;
}

interface TokenHolder {
  caller: Caller;
  expires: number;
  /** `generateToken`'s `client`, and the referer or address the token is bound to. */
  client: string;
  bound: string;
  /** The registered app the token was made for (null: `generateToken`'s). */
  clientId: string | null;
}

/**
 * `tokens.client` of a token made through OAuth 2.0 (usable from anywhere, as ArcGIS's OAuth
 * tokens are), and of the portal's own sign-in session behind its cookie (never usable as a
 * bearer token: only `oauth2/platformSelf` reads it).
 */
export const OAUTH_CLIENT = "oauth";
export const SESSION_CLIENT = "session";
/**
 * `tokens.client` of a sign-in to the API directory (the `f=html` pages) behind its cookie: never
 * usable as a bearer token either, so that the cookie's value, were it to leak, opens no API call;
 * only the directory's pages read it (`directorySession`).
 */
export const DIRECTORY_CLIENT = "directory";
/** How long a directory sign-in lasts, within the organization's longest token. */
const DIRECTORY_SESSION_MINUTES = 120;

/** Tokens that stand for a browser's sign-in behind a cookie, never for a bearer of the token. */
const cookieOnly = (client: string) => client === SESSION_CLIENT || client === DIRECTORY_CLIENT;

/** What a new token is bound to: the referer, the given address, or the requester's address. */
function boundTo(request: TokenRequest): string {
  if (request.client === "referer") {
    if (request.referer === undefined || request.referer === "") throw errors.missingParameter("referer");
    return request.referer;
  }
  if (request.client === "ip") {
    if (request.ip === undefined || request.ip === "") throw errors.missingParameter("ip");
    if (!isIpAddress(request.ip)) throw errors.invalidParameter("ip", "must be an IPv4 or IPv6 address");
    return normalizeIp(request.ip);
  }
  return normalizeIp(request.requestIp);
}

/** The locked answer, with the minutes left of a lock that ends at `until`. */
function lockedUntil(until: number, now: number) {
  return errors.accountLocked(Math.max(1, Math.ceil((until - now) / 60_000)));
}

/** Token lifetime when the request does not ask for one (ArcGIS: 60 minutes). */
const DEFAULT_TOKEN_MINUTES = 60;

export function hashToken(token: string): string {
  return hash("sha256", token, "base64url");
}

/** A new opaque credential (token, code, secret): 256 random bits. */
export function newSecret(): string {
  return randomBytes(32).toString("base64url");
}

/** The token's lifetime in minutes: what was asked for, or the default, within the maximum. */
export function tokenMinutes(asked: number | undefined, max: number): number {
  return Math.min(asked ?? DEFAULT_TOKEN_MINUTES, max);
}

/**
 * Sign-in with opaque bearer tokens. Only the SHA-256 of a token is stored; a token is valid while
 * its row exists and has not expired, so ending a user's sessions is one DELETE, effective on every
 * node at once.
 */
export class AuthService {
  /** Token holders by token hash: every authenticated request needs one. */
  private readonly holders: FeedCache<string, TokenHolder>;
  /** Tokens of `client_credentials` by hash (apps unregistered or given a new secret end them). */
  private readonly appTokens: FeedCache<string, { expires: number; clientId: string }>;

  constructor(
    private readonly db: Db,
    private readonly deps: AuthDependencies,
    private readonly hasher: PasswordHasher,
  ) {
    this.holders = new FeedCache(db.feed, ["auth"], (holder) => holder.caller.userId);
    this.appTokens = new FeedCache(db.feed, ["auth"]);
  }

  async generateToken(request: TokenRequest): Promise<IssuedToken> {
    const bound = boundTo(request);
    return this.signIn(request, async (trx, user, now, org) => {
      const expires = now + tokenMinutes(request.expiration, org.maxTokenMinutes) * 60_000;
      const token = newSecret();
      await insertToken(trx, {
        token_hash: hashToken(token),
        user_id: user.id,
        created: now,
        expires,
        client: request.client,
        referer: bound,
      });
      return { token, expires, ssl: org.allSSL };
    });
  }

  /**
   * Signs in with a password under the organization's rules (lockout, password expiry, disabled
   * accounts, the hashing limiter), records the sign-in, and writes what `grant` grants in the
   * same transaction.
   */
  async signIn<T>(request: PasswordSignIn, grant: Grant<T>): Promise<T> {
    const org = await this.deps.signInSettings();
    const { lockoutPolicy } = org.securityPolicy;
    // Failures are counted by name, whether an account has it or not, so that a locked answer
    // says nothing about which usernames exist. The attempt is counted before any hashing, in one
    // statement: a check made first and a count made after the hash would let a burst of parallel
    // guesses all pass the check. A locked name, or one whose run is full, costs no hashing.
    const ruleAt = (now: number) => ({
      windowStart: now - lockoutPolicy.failedAttemptsWindowInMinutes * 60_000,
      maxAttempts: lockoutPolicy.maxFailedAttempts,
      lockUntil: now + lockoutPolicy.lockoutDurationInMinutes * 60_000,
    });
    const reservedAt = Date.now();
    const run = await this.db.transaction((trx) =>
      reserveSignInAttempt(trx, request.username, reservedAt, ruleAt(reservedAt)),
    );
    if (run === undefined) {
      const failures = await findSignInFailures(this.db.kysely, request.username);
      const now = Date.now();
      const until =
        failures && failures.locked_until > now ? Number(failures.locked_until) : ruleAt(now).lockUntil;
      throw lockedUntil(until, now);
    }
    let failed = false;
    try {
      const user = await this.deps.findAccount(this.db.kysely, request.username);
      // Verify against a dummy hash for unknown users so both failures take the same time.
      const valid = user
        ? await this.hasher.verify(request.password, user.password_hash, clientGroup(request.requestIp))
        : await this.hasher.verifyUnknown(request.password, clientGroup(request.requestIp));
      if (!user || !valid) {
        failed = true;
        const now = Date.now();
        await this.db.transaction((trx) => recordFailedAttempt(trx, request.username, run, now, ruleAt(now)));
        throw errors.badCredentials();
      }
      return await this.issue(request, org, user, grant);
    } catch (err) {
      // The attempt was not a wrong password (the hashing queue was full, the account is disabled,
      // the new password was refused, the name was locked meanwhile): it does not count.
      if (!failed) await this.db.transaction((trx) => releaseSignInAttempt(trx, request.username, run));
      throw err;
    }
  }

  /** The right password was given: the new password, expiry and lock checks, then the token. */
  private async issue<T>(
    request: PasswordSignIn,
    org: SignInSettings,
    user: SignInAccount,
    grant: Grant<T>,
  ): Promise<T> {
    const { passwordPolicy } = org.securityPolicy;
    if (user.disabled) throw errors.accountDisabled();

    let newHash: string | undefined;
    if (request.newPassword !== undefined) {
      newHash = await hashNewPassword(
        { q: this.db.kysely, hasher: this.hasher },
        passwordPolicy,
        user,
        request.newPassword,
        "newPassword",
        clientGroup(request.requestIp),
      );
    } else {
      const expires = passwordExpiresAt(
        passwordPolicy,
        (await passwordSetAt(this.db.kysely, user.id)) ?? user.created,
      );
      if (expires !== undefined && expires <= Date.now()) {
        // The right password was given: the failures before it no longer count, unless they
        // locked the name (then the right password says nothing more than a wrong one).
        const now = Date.now();
        const locked = await this.db.transaction((trx) => endSignInFailures(trx, request.username, now));
        if (locked !== undefined) throw lockedUntil(locked, now);
        throw errors.passwordExpired();
      }
    }

    const now = Date.now();
    const upgradedHash =
      newHash === undefined && this.hasher.needsRehash(user.password_hash)
        ? await this.hasher.hash(request.password, clientGroup(request.requestIp))
        : undefined;

    return this.db.transaction(
      async (trx) => {
        // Checked in the transaction that issues the token: a lock set by attempts still being
        // checked when this one was admitted (or by a burst of more than the policy allows)
        // refuses the right password too, and nothing is written.
        const locked = await endSignInFailures(trx, request.username, now);
        if (locked !== undefined) throw lockedUntil(locked, now);
        // A new password ends the account's other sessions, as a change through `update` does.
        if (newHash !== undefined) {
          await deleteTokensOfUser(trx, user.id);
          await recordPassword(trx, user.id, newHash, now);
        }
        const granted = await grant(trx, user, now, org);
        const passwordHash = newHash ?? upgradedHash;
        await this.deps.recordSignIn(trx, user.id, {
          last_login: now,
          ...(passwordHash ? { password_hash: passwordHash } : {}),
          ...(newHash ? { modified: now } : {}),
        });
        // A password changed at sign-in is a user update, besides the sign-in itself.
        for (const operation of newHash !== undefined
          ? (["update", "signin"] as const)
          : (["signin"] as const)) {
          await recordEvent(
            trx,
            {
              source: "user",
              operation,
              objectId: user.username,
              actor: { id: user.id, username: user.username },
            },
            now,
          );
        }
        return granted;
      },
      // lastLogin is part of the signed-in user's cached resource.
      { changes: [`auth:${user.id}`] },
    );
  }

  /**
   * What `authenticate` answers for a user's token that the cache of token holders has, valid and
   * presented from where it may be used, without a promise: the pipeline asks this first on every
   * request. `undefined` when the cache cannot say (not cached, expired, refused, an app's token):
   * ask `authenticate`, which also gives the reason.
   */
  cachedCaller(token: string, presenter: Presenter): Caller | undefined {
    const holder = this.holders.peek(hashToken(token));
    if (holder === undefined || holder.expires <= Date.now() || cookieOnly(holder.client)) return undefined;
    if (holder.client !== OAUTH_CLIENT && !presenterAllowed(holder.client, holder.bound, presenter)) {
      return undefined;
    }
    return holder.caller;
  }

  /**
   * The caller a token stands for. Throws 498 for an unknown or expired token, a disabled user's,
   * and a token presented from where it may not be used (another referer or address than the one
   * it was made for).
   */
  async authenticate(token: string, presenter: Presenter): Promise<Caller | null> {
    try {
      return (await this.presentedSession(token, presenter)).caller;
    } catch (err) {
      // Not a user's token: perhaps an app's (`client_credentials`), which acts for no user, so the
      // request is anonymous (README, OAuth 2.0). Looked up second, so that a user's token found in
      // the cache of token holders costs no query.
      if (!(err instanceof PorticoError) || err.code !== 498) throw err;
      const hash = hashToken(token);
      const app = await this.appTokens.get(hash, async () => {
        const row = await findAppToken(this.db.kysely, hash);
        return row ? { expires: Number(row.expires), clientId: row.client_id } : undefined;
      });
      if (app === undefined) throw err;
      if (app.expires <= Date.now()) {
        this.appTokens.delete(hash);
        throw errors.invalidToken();
      }
      return null;
    }
  }

  /**
   * The user, expiry and app of a valid user token presented from where it may be used (what
   * `exchangeToken` and `validateAppAccess` read of the token they are given): a token bound to a
   * referer or an address is no more exchangeable from elsewhere than usable. Throws 498.
   */
  async tokenSession(
    token: string,
    presenter: Presenter,
  ): Promise<{ caller: Caller; expires: number; clientId: string | null }> {
    const session = await this.session(token);
    if (cookieOnly(session.client)) throw errors.invalidToken();
    if (session.client !== OAUTH_CLIENT && !presenterAllowed(session.client, session.bound, presenter)) {
      throw errors.invalidToken();
    }
    return { caller: session.caller, expires: session.expires, clientId: session.clientId };
  }

  /** The portal sign-in session behind the sign-in cookie, with the app it was made through. */
  async cookieSession(token: string): Promise<{ caller: Caller; clientId: string | null } | undefined> {
    try {
      const session = await this.session(token);
      if (session.client !== SESSION_CLIENT) return undefined;
      return { caller: session.caller, clientId: session.clientId };
    } catch {
      // An unknown or expired cookie is no session: platformSelf answers that nobody is signed in.
      return undefined;
    }
  }

  /**
   * Signs in to the API directory under the rules of `generateToken` (lockout, expiry, disabled
   * accounts): a session whose token goes into the directory's cookie, not to the caller.
   */
  async directorySignIn(request: PasswordSignIn): Promise<{ token: string; maxAgeSeconds: number }> {
    return this.signIn(request, async (trx, user, now, org) => {
      const token = newSecret();
      const minutes = Math.min(DIRECTORY_SESSION_MINUTES, org.maxTokenMinutes);
      await insertToken(trx, {
        token_hash: hashToken(token),
        user_id: user.id,
        created: now,
        expires: now + minutes * 60_000,
        client: DIRECTORY_CLIENT,
        referer: "",
      });
      return { token, maxAgeSeconds: minutes * 60 };
    });
  }

  /** The caller of a directory sign-in (its cookie's value); undefined when it is no valid one. */
  async directorySession(token: string): Promise<Caller | undefined> {
    try {
      const session = await this.session(token);
      return session.client === DIRECTORY_CLIENT ? session.caller : undefined;
    } catch (err) {
      // An unknown or expired cookie is no sign-in: the page is shown as to an anonymous caller.
      if (err instanceof PorticoError && err.code === 498) return undefined;
      throw err;
    }
  }

  /**
   * A token for a server this portal owns (`generateToken` with `serverUrl` and `token`, as Esri's
   * clients ask for one for `/rest/services`): the hosted services share the portal's tokens, so
   * the answer is the same token with its own expiry; a server elsewhere (not `owningSystemUrl` or
   * below it) gets nothing.
   */
  async serverToken(request: {
    serverUrl: string;
    token: string;
    owningSystemUrl: string;
    presenter: Presenter;
    ssl: boolean;
  }): Promise<{ token: string; expires: number; ssl: boolean }> {
    const owner = request.owningSystemUrl.replace(/\/+$/, "").toLowerCase();
    const server = request.serverUrl.replace(/\/+$/, "").toLowerCase();
    if (server !== owner && !server.startsWith(`${owner}/`)) {
      throw errors.invalidParameter(
        "serverUrl",
        `must be a server of this portal (${request.owningSystemUrl})`,
      );
    }
    // The token must be one this request may present (its referer or address binding).
    const { expires } = await this.presentedSession(request.token, request.presenter);
    return { token: request.token, expires, ssl: request.ssl };
  }

  /**
   * As `authenticate`, with when the token expires (epoch ms): what exchanging a token for a
   * server's (`serverToken`) answers. The binding is checked there too, or a token taken from
   * elsewhere would be renewed into one that works anywhere the exchange is made.
   */
  private async presentedSession(
    token: string,
    presenter: Presenter,
  ): Promise<{ caller: Caller; expires: number }> {
    const session = await this.session(token);
    if (cookieOnly(session.client)) throw errors.invalidToken();
    if (session.client !== OAUTH_CLIENT && !presenterAllowed(session.client, session.bound, presenter)) {
      throw errors.invalidToken();
    }
    return { caller: session.caller, expires: session.expires };
  }

  /** The caller of a valid token, when the token expires (epoch ms) and what it is bound to. */
  private async session(token: string): Promise<TokenHolder> {
    const hash = hashToken(token);
    const holder = await this.holders.get(hash, async () => {
      const row = await findTokenHolder(this.db.kysely, hash);
      if (!row || row.disabled) return undefined;
      return {
        caller: Object.freeze(makeCaller(row)),
        expires: row.expires,
        client: row.client,
        bound: row.referer,
        clientId: row.clientId ?? null,
      };
    });
    if (!holder) throw errors.invalidToken();
    if (holder.expires <= Date.now()) {
      this.holders.delete(hash);
      throw errors.invalidToken();
    }
    return holder;
  }

  /**
   * Ends one token (sign-out): a token, an OAuth 2.0 refresh token, or an app's token. Records the
   * signout event for a user's.
   */
  async revoke(token: string): Promise<void> {
    const hash = hashToken(token);
    await this.db.transaction(
      async (trx) => {
        const holder = await findTokenHolder(trx, hash);
        if (!holder) {
          const refresh = await findRefreshToken(trx, hash);
          if (refresh) {
            await deleteRefreshToken(trx, hash);
            await recordEvent(trx, {
              source: "user",
              operation: "signout",
              objectId: refresh.username,
              actor: { id: refresh.user_id, username: refresh.username },
            });
            return refresh.user_id;
          }
          if ((await deleteAppToken(trx, hash)) > 0) return undefined;
          throw errors.invalidToken();
        }
        await deleteToken(trx, hash);
        await recordEvent(trx, {
          source: "user",
          operation: "signout",
          objectId: holder.username,
          actor: { id: holder.userId, username: holder.username },
        });
        return holder.userId;
      },
      { changes: (userId) => (userId === undefined ? ["auth"] : [`auth:${userId}`]) },
    );
  }

  /** Password hashes running and waiting now (the hashing limiter's state). */
  get hashingLoad(): { running: number; queued: number } {
    return this.hasher.load;
  }

  /**
   * Removes expired token rows, and failed sign-ins too old to count under any lockout policy
   * (most are of names no account has); run periodically.
   */
  purgeExpired(): Promise<number> {
    const now = Date.now();
    const longest =
      Math.max(
        LOCKOUT_RULE_RANGES.failedAttemptsWindowInMinutes.max,
        LOCKOUT_RULE_RANGES.lockoutDurationInMinutes.max,
      ) * 60_000;
    return this.db.transaction(
      async (trx) =>
        (await deleteExpiredTokens(trx, now)) +
        (await deleteExpiredGrants(trx, now)) +
        (await deleteStaleSignInFailures(trx, now - longest)),
    );
  }
}
