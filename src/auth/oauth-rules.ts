import { createHash, timingSafeEqual } from "node:crypto";

/**
 * The rules of OAuth 2.0 that need no database: PKCE (RFC 7636), redirect URIs, app types.
 * Security-relevant and pure, so tested beside it.
 */

/** The redirect URI that asks for the code on a portal page instead of a redirect (ArcGIS: oob). */
export const OOB_REDIRECT = "urn:ietf:wg:oauth:2.0:oob";

export const APP_TYPES = ["browser", "server", "native", "multiple"] as const;
export type AppType = (typeof APP_TYPES)[number];

/** Most redirect URIs and referrers an app registers. */
export const MAX_REDIRECT_URIS = 100;
export const MAX_REDIRECT_URI_LENGTH = 2048;

/** A code verifier as RFC 7636 §4.1 allows it: 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
/** A code challenge: a verifier (plain) or the base64url SHA-256 of one (S256, 43 characters). */
const CHALLENGE = /^[A-Za-z0-9._~-]{43,128}$/;

export type ChallengeMethod = "S256" | "plain";

/** Why a code challenge cannot be accepted, or undefined when it can. */
export function challengeRefusal(challenge: string, method: string): string | undefined {
  if (method !== "S256" && method !== "plain") return "code_challenge_method must be S256 or plain";
  if (!CHALLENGE.test(challenge)) return "code_challenge must be 43 to 128 unreserved characters";
  return undefined;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Whether `verifier` answers the challenge the authorization was made with (RFC 7636 §4.6). */
export function verifierMatches(verifier: string, challenge: string, method: ChallengeMethod): boolean {
  if (!VERIFIER.test(verifier)) return false;
  const derived =
    method === "S256" ? createHash("sha256").update(verifier, "ascii").digest("base64url") : verifier;
  return sameText(derived, challenge);
}

/**
 * Why a URI cannot be registered as a redirect URI, or undefined: an absolute URI (http(s) for
 * web apps, a private scheme for native ones) without a fragment (RFC 6749 §3.1.2), or `oob`.
 */
export function redirectUriRefusal(uri: string): string | undefined {
  if (uri === OOB_REDIRECT) return undefined;
  if (uri.length > MAX_REDIRECT_URI_LENGTH) return `must be at most ${MAX_REDIRECT_URI_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return `'${uri}' is not an absolute URI`;
  }
  if (uri.includes("#")) return `'${uri}' must not have a fragment`;
  if (/^(javascript|data|vbscript|file|blob):$/i.test(url.protocol)) {
    return `'${uri}' has a scheme that cannot receive a redirect`;
  }
  if ((url.protocol === "http:" || url.protocol === "https:") && (url.username || url.password)) {
    return `'${uri}' must not carry credentials`;
  }
  return undefined;
}

/**
 * Whether a redirect URI of a request is one the app registered: compared exactly, as RFC 6749
 * §3.1.2.3 and ArcGIS ask; `oob` is always allowed (the code is shown on the portal's page).
 */
export function redirectUriRegistered(uri: string, registered: readonly string[]): boolean {
  return uri === OOB_REDIRECT || registered.includes(uri);
}

/** The origin a browser would send for pages at `uri` (`null` for a non-web scheme). */
export function originOf(uri: string): string | undefined {
  try {
    const url = new URL(uri);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** `uri` with the answer's parameters added to its query (`code`) or its fragment (`token`). */
export function withAnswer(uri: string, params: Record<string, string>, where: "query" | "fragment"): string {
  const encoded = new URLSearchParams(params).toString();
  if (where === "fragment") return `${uri}#${encoded}`;
  return `${uri}${uri.includes("?") ? "&" : "?"}${encoded}`;
}
