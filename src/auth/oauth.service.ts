import { timingSafeEqual } from "node:crypto";
import type { Db, Queryable } from "../db/database.js";
import { errors } from "../errors.js";
import {
  type AuthService,
  hashToken,
  newSecret,
  OAUTH_CLIENT,
  type PasswordSignIn,
  SESSION_CLIENT,
  type SignInSettings,
  tokenMinutes,
} from "./auth.service.js";
import {
  type AppRow,
  deleteRefreshToken,
  findApp,
  findRefreshToken,
  insertAppToken,
  insertCode,
  insertRefreshToken,
  takeCode,
} from "./oauth.repository.js";
import {
  type ChallengeMethod,
  challengeRefusal,
  OOB_REDIRECT,
  originOf,
  redirectUriRegistered,
  verifierMatches,
} from "./oauth-rules.js";
import { insertToken } from "./token.repository.js";
import type { Presenter } from "./token-binding.js";

/**
 * Stores a token made through OAuth (only its hash), for a user and the app it was made for; such
 * tokens are bound to no referer.
 */
function storeToken(
  q: Queryable,
  token: string,
  grant: { userId: string; clientId: string; now: number; expires: number },
  client: string = OAUTH_CLIENT,
): Promise<void> {
  return insertToken(q, {
    token_hash: hashToken(token),
    user_id: grant.userId,
    created: grant.now,
    expires: grant.expires,
    client,
    referer: "",
    client_id: grant.clientId,
  });
}

/** An authorization code lives this long (RFC 6749 §4.1.2 recommends at most 10 minutes). */
const CODE_MINUTES = 5;
/** An access token made from a code or a refresh token (ArcGIS: 30 minutes). */
const ACCESS_MINUTES = 30;
/** A refresh token, unless authorize's `expiration` asks for less (ArcGIS: two weeks). */
const REFRESH_MINUTES = 20_160;
/** A token of the implicit grant (`response_type=token`), unless `expiration` asks for another. */
const IMPLICIT_MINUTES = 120;
/** A token of `client_credentials`, unless `expiration` asks for another (ArcGIS: 2 hours). */
const APP_TOKEN_MINUTES = 120;
/** The portal's sign-in session behind its cookie (what `platformSelf` reads). */
const SESSION_MINUTES = 120;

/** `oauth2/authorize`'s parameters, as checked by `checkAuthorize`. */
export interface AuthorizeRequest {
  clientId: string;
  responseType: "code" | "token";
  redirectUri: string;
  /** Minutes: the refresh token's lifetime (code), or the token's (token). */
  expiration?: number | undefined;
  codeChallenge?: { challenge: string; method: ChallengeMethod } | undefined;
}

/** What a sign-in through `authorize` grants. */
export interface Authorization {
  /** The code (`response_type=code`), or the token and its lifetime (`token`). */
  answer: { code: string } | { access_token: string; expires_in: number; username: string; ssl: boolean };
  /** The portal's sign-in session, for its cookie. */
  session: { token: string; maxAgeSeconds: number };
}

export interface TokenAnswer {
  access_token: string;
  expires_in: number;
  username?: string;
  ssl?: boolean;
  refresh_token?: string;
  refresh_token_expires_in?: number;
}

export interface TokenGrantRequest {
  grantType: string;
  clientId: string;
  clientSecret?: string | undefined;
  redirectUri?: string | undefined;
  code?: string | undefined;
  codeVerifier?: string | undefined;
  refreshToken?: string | undefined;
  /** Minutes (`client_credentials`). */
  expiration?: number | undefined;
}

/**
 * OAuth 2.0 grants (README, OAuth 2.0): the sign-in of `authorize` and the codes it makes, the
 * token endpoint's grants, `exchangeToken`, `validateAppAccess` and `platformSelf`. Tokens made
 * here are rows of the one token table, marked with their app, so they work, expire and are
 * revoked as `generateToken`'s are.
 */
export class OAuthService {
  constructor(
    private readonly db: Db,
    private readonly auth: AuthService,
    private readonly settings: () => Promise<SignInSettings>,
  ) {}

  /** The registered app of a client id; refused as `invalid_client` when there is none. */
  private async app(clientId: string, param = "client_id"): Promise<AppRow> {
    const app = await findApp(this.db.kysely, clientId);
    if (!app) throw errors.oauth("invalid_client", `Invalid ${param}: no app is registered with it.`);
    return app;
  }

  /**
   * Checks an authorization request before the sign-in page is shown and again when it is
   * submitted; answers the app's title. Errors here are shown on the page, never redirected.
   */
  async checkAuthorize(request: AuthorizeRequest): Promise<{ title: string }> {
    const app = await this.app(request.clientId);
    if (!redirectUriRegistered(request.redirectUri, JSON.parse(app.redirect_uris) as string[])) {
      throw errors.oauth("invalid_request", "Invalid redirect_uri: it is not registered for this app.");
    }
    if (request.responseType === "token" && request.redirectUri === OOB_REDIRECT) {
      throw errors.oauth("invalid_request", "response_type=token cannot be delivered out of band.");
    }
    if (request.codeChallenge) {
      const refusal = challengeRefusal(request.codeChallenge.challenge, request.codeChallenge.method);
      if (refusal) throw errors.oauth("invalid_request", `Invalid PKCE parameters: ${refusal}.`);
      if (request.responseType !== "code") {
        throw errors.oauth("invalid_request", "code_challenge is for response_type=code.");
      }
    }
    return { title: app.title };
  }

  /**
   * Signs the user in (the rules of `generateToken`) and makes what the request asks for: a
   * code bound to the app, the redirect URI and the challenge, or a token; and the portal's own
   * sign-in session, bound to the app.
   */
  async authorize(request: AuthorizeRequest, signIn: PasswordSignIn): Promise<Authorization> {
    await this.checkAuthorize(request);
    return this.auth.signIn(signIn, async (trx, user, now, org) => {
      const sessionToken = newSecret();
      const sessionMinutes = Math.min(SESSION_MINUTES, org.maxTokenMinutes);
      await storeToken(
        trx,
        sessionToken,
        { userId: user.id, clientId: request.clientId, now, expires: now + sessionMinutes * 60_000 },
        SESSION_CLIENT,
      );
      const session = { token: sessionToken, maxAgeSeconds: sessionMinutes * 60 };
      if (request.responseType === "code") {
        const code = newSecret();
        await insertCode(trx, {
          code_hash: hashToken(code),
          client_id: request.clientId,
          user_id: user.id,
          redirect_uri: request.redirectUri,
          code_challenge: request.codeChallenge?.challenge ?? null,
          code_challenge_method: request.codeChallenge?.method ?? null,
          refresh_minutes: tokenMinutes(request.expiration ?? REFRESH_MINUTES, org.maxTokenMinutes),
          created: now,
          expires: now + CODE_MINUTES * 60_000,
        });
        return { answer: { code }, session };
      }
      const minutes = tokenMinutes(request.expiration ?? IMPLICIT_MINUTES, org.maxTokenMinutes);
      const token = newSecret();
      await storeToken(trx, token, {
        userId: user.id,
        clientId: request.clientId,
        now,
        expires: now + minutes * 60_000,
      });
      return {
        answer: { access_token: token, expires_in: minutes * 60, username: user.username, ssl: org.allSSL },
        session,
      };
    });
  }

  /** `oauth2/token`: one of the four grants ArcGIS names. */
  async token(request: TokenGrantRequest): Promise<TokenAnswer> {
    switch (request.grantType) {
      case "authorization_code":
        return this.codeGrant(request);
      case "refresh_token":
        return this.refreshGrant(request, false);
      case "exchange_refresh_token":
        return this.refreshGrant(request, true);
      case "client_credentials":
        return this.clientCredentials(request);
      default:
        throw errors.oauth(
          "unsupported_grant_type",
          "grant_type must be authorization_code, refresh_token, exchange_refresh_token or client_credentials.",
        );
    }
  }

  /**
   * A secret that was sent must be the app's. Wrong ones lock nothing: the secret is 256 random
   * bits, so guessing it is hopeless, and a lock per client id would let any anonymous caller shut
   * a server app out of `client_credentials` by sending a few wrong ones.
   */
  private checkSecret(app: AppRow, secret: string | undefined, required: boolean): void {
    if (secret === undefined) {
      if (required) throw errors.missingParameter("client_secret");
      return;
    }
    const sent = Buffer.from(hashToken(secret));
    const stored = Buffer.from(app.secret_hash);
    if (sent.length !== stored.length || !timingSafeEqual(sent, stored)) {
      throw errors.oauth("invalid_client", "Invalid client_secret.");
    }
  }

  private async codeGrant(request: TokenGrantRequest): Promise<TokenAnswer> {
    if (request.code === undefined) throw errors.missingParameter("code");
    if (request.redirectUri === undefined) throw errors.missingParameter("redirect_uri");
    const app = await this.app(request.clientId);
    this.checkSecret(app, request.clientSecret, false);
    const org = await this.settings();
    const code = request.code;
    const result = await this.db.transaction(async (trx) => {
      // The code is spent whatever follows: a code tried with the wrong verifier or redirect URI
      // cannot be tried again (RFC 6749 §4.1.2, §10.5).
      const row = await takeCode(trx, hashToken(code));
      const user =
        row &&
        (await trx
          .selectFrom("users")
          .select(["id", "username", "disabled"])
          .where("id", "=", row.user_id)
          .executeTakeFirst());
      return { row, user };
    });
    const { row, user } = result;
    if (!row || row.expires <= Date.now() || row.client_id !== request.clientId) {
      throw errors.oauth("invalid_grant", "Invalid authorization code.");
    }
    if (row.redirect_uri !== request.redirectUri) {
      throw errors.oauth("invalid_grant", "Invalid redirect_uri: it is not the one the code was made for.");
    }
    if (row.code_challenge !== null) {
      if (request.codeVerifier === undefined) throw errors.missingParameter("code_verifier");
      if (
        !verifierMatches(
          request.codeVerifier,
          row.code_challenge,
          row.code_challenge_method as ChallengeMethod,
        )
      ) {
        throw errors.oauth("invalid_grant", "Invalid code_verifier.");
      }
    }
    if (!user || user.disabled) throw errors.oauth("invalid_grant", "Invalid authorization code.");
    const now = Date.now();
    const access = newSecret();
    const refresh = newSecret();
    const accessMinutes = Math.min(ACCESS_MINUTES, org.maxTokenMinutes);
    const refreshMinutes = Math.min(row.refresh_minutes, org.maxTokenMinutes);
    await this.db.transaction(async (trx) => {
      await storeToken(trx, access, {
        userId: user.id,
        clientId: app.client_id,
        now,
        expires: now + accessMinutes * 60_000,
      });
      await insertRefreshToken(trx, {
        token_hash: hashToken(refresh),
        client_id: app.client_id,
        user_id: user.id,
        created: now,
        expires: now + refreshMinutes * 60_000,
      });
    });
    return {
      access_token: access,
      expires_in: accessMinutes * 60,
      username: user.username,
      ssl: org.allSSL,
      refresh_token: refresh,
      refresh_token_expires_in: refreshMinutes * 60,
    };
  }

  /**
   * `refresh_token`: a new access token. `exchange_refresh_token`: a new refresh token (and an
   * access token) in place of the one sent, which ends; it asks for a registered redirect URI, as
   * ArcGIS does. A secret, when sent, must be the app's.
   */
  private async refreshGrant(request: TokenGrantRequest, exchange: boolean): Promise<TokenAnswer> {
    if (request.refreshToken === undefined) throw errors.missingParameter("refresh_token");
    const app = await this.app(request.clientId);
    this.checkSecret(app, request.clientSecret, false);
    if (exchange) {
      if (request.redirectUri === undefined) throw errors.missingParameter("redirect_uri");
      if (!redirectUriRegistered(request.redirectUri, JSON.parse(app.redirect_uris) as string[])) {
        throw errors.oauth("invalid_request", "Invalid redirect_uri: it is not registered for this app.");
      }
    }
    const org = await this.settings();
    const hash = hashToken(request.refreshToken);
    const now = Date.now();
    const access = newSecret();
    const accessMinutes = Math.min(ACCESS_MINUTES, org.maxTokenMinutes);
    const refreshMinutes = Math.min(REFRESH_MINUTES, org.maxTokenMinutes);
    const refresh = exchange ? newSecret() : undefined;
    const username = await this.db.transaction(async (trx) => {
      const row = await findRefreshToken(trx, hash);
      if (!row || row.expires <= now || row.client_id !== request.clientId || row.disabled) {
        throw errors.oauth("invalid_grant", "Invalid refresh_token.");
      }
      // The refresh token exchanged ends here; of concurrent exchanges of one (PostgreSQL, READ
      // COMMITTED), only the one whose DELETE removed it gets a new one.
      if (refresh !== undefined && (await deleteRefreshToken(trx, hash)) === 0) {
        throw errors.oauth("invalid_grant", "Invalid refresh_token.");
      }
      await storeToken(trx, access, {
        userId: row.user_id,
        clientId: app.client_id,
        now,
        expires: now + accessMinutes * 60_000,
      });
      if (refresh !== undefined) {
        await insertRefreshToken(trx, {
          token_hash: hashToken(refresh),
          client_id: app.client_id,
          user_id: row.user_id,
          created: now,
          expires: now + refreshMinutes * 60_000,
        });
      }
      return row.username;
    });
    return {
      access_token: access,
      expires_in: accessMinutes * 60,
      username,
      ssl: org.allSSL,
      ...(refresh !== undefined
        ? { refresh_token: refresh, refresh_token_expires_in: refreshMinutes * 60 }
        : {}),
    };
  }

  /** `client_credentials`: a token for the app itself, which acts for no user. */
  private async clientCredentials(request: TokenGrantRequest): Promise<TokenAnswer> {
    const app = await this.app(request.clientId);
    this.checkSecret(app, request.clientSecret, true);
    const org = await this.settings();
    const minutes = tokenMinutes(request.expiration ?? APP_TOKEN_MINUTES, org.maxTokenMinutes);
    const token = newSecret();
    const now = Date.now();
    await this.db.transaction((trx) =>
      insertAppToken(trx, {
        token_hash: hashToken(token),
        client_id: app.client_id,
        created: now,
        expires: now + minutes * 60_000,
      }),
    );
    return { access_token: token, expires_in: minutes * 60 };
  }

  /**
   * `exchangeToken`: a token of the same user for another app, living no longer than the token
   * given.
   */
  async exchangeToken(
    token: string,
    clientId: string,
    presenter: Presenter,
  ): Promise<{ token: string; expires: number; ssl: boolean }> {
    const app = await this.app(clientId);
    const session = await this.auth.tokenSession(token, presenter);
    const org = await this.settings();
    const now = Date.now();
    const expires = Math.min(session.expires, now + org.maxTokenMinutes * 60_000);
    const issued = newSecret();
    await this.db.transaction((trx) =>
      storeToken(trx, issued, {
        userId: session.caller.userId,
        clientId: app.client_id,
        now,
        expires: expires,
      }),
    );
    return { token: issued, expires, ssl: org.allSSL };
  }

  /**
   * `validateAppAccess`: whether the token's user may use the app. Every member may use every
   * registered app of the organization; portico has no view-only user types.
   */
  async validateAppAccess(
    token: string,
    clientId: string,
    presenter: Presenter,
  ): Promise<{ valid: boolean; viewOnlyUserTypeApp: boolean }> {
    await this.app(clientId);
    await this.auth.tokenSession(token, presenter);
    return { valid: true, viewOnlyUserTypeApp: false };
  }

  /**
   * `platformSelf`: a token for the user signed in to the portal (its sign-in cookie), for the
   * app that session was made through and nothing else, to a page at one of the app's redirect
   * URIs (the request's `Origin`, when a browser sends one, must be that URI's).
   */
  async platformSelf(request: {
    sessionToken: string | undefined;
    clientId: string;
    redirectUri: string;
    origin: string | undefined;
  }): Promise<{ username: string; token: string; expires_in: number }> {
    const app = await this.app(request.clientId, "X-Esri-Auth-Client-Id");
    if (
      request.redirectUri === OOB_REDIRECT ||
      !redirectUriRegistered(request.redirectUri, JSON.parse(app.redirect_uris) as string[])
    ) {
      throw errors.oauth(
        "invalid_request",
        "Invalid X-Esri-Auth-Redirect-Uri: it is not registered for this app.",
      );
    }
    if (request.origin !== undefined && request.origin !== originOf(request.redirectUri)) {
      throw errors.oauth("invalid_request", "The request's origin is not the redirect URI's.");
    }
    const session = request.sessionToken ? await this.auth.cookieSession(request.sessionToken) : undefined;
    if (!session || session.clientId !== app.client_id) {
      throw errors.oauth("invalid_grant", "Not signed in to the portal through this app.");
    }
    const org = await this.settings();
    const minutes = Math.min(ACCESS_MINUTES, org.maxTokenMinutes);
    const token = newSecret();
    const now = Date.now();
    await this.db.transaction((trx) =>
      storeToken(trx, token, {
        userId: session.caller.userId,
        clientId: app.client_id,
        now,
        expires: now + minutes * 60_000,
      }),
    );
    return { username: session.caller.username, token, expires_in: minutes * 60 };
  }
}
