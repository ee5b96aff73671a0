import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { cookiesOf, setCookie } from "../oauth-pages.js";

/**
 * The sign-in of the API directory (the `f=html` pages) and of other pages of the portal built on
 * it: a cookie holding a session token that is no bearer token (`AuthService.directorySignIn`),
 * HttpOnly, SameSite=Strict, Secure over HTTPS. The pipeline accepts it as the caller's
 * credential only for `f=html` requests: a GET of a page that changes nothing, or a POST whose
 * form carries the session's CSRF value. An `f=json` request never reads it, so no other site can
 * make a signed-in browser call the API.
 */

/** The cookie of a directory sign-in. */
export const DIRECTORY_COOKIE = "portico_directory";
/** The cookie binding the sign-in form to the browser it was shown to (login CSRF). */
export const SIGN_IN_FORM_COOKIE = "portico_directory_form";
/** The hidden field every form of the directory carries: the session's CSRF value. */
export const CSRF_FIELD = "directory_csrf";

/** Longest cookie value read: a session token is 43 characters. */
const MAX_COOKIE_LENGTH = 128;

/** Where the cookies live: every API root of the portal (`/sharing/rest`, `/rest`, `/portaladmin`). */
export const cookiePath = (contextPath: string) => (contextPath === "" ? "/" : contextPath);

/** The directory session token of a request's `Cookie` header, if it carries a plausible one. */
export function directoryTokenOf(cookieHeader: string | undefined): string | undefined {
  const value = cookiesOf(cookieHeader)[DIRECTORY_COOKIE];
  if (value === undefined || value === "" || value.length > MAX_COOKIE_LENGTH) return undefined;
  return value;
}

/**
 * The CSRF value of a session: derived from its secret token, so it needs no storage and ends with
 * the session. Another site can read neither; knowing it tells nothing of the token (a hash, with
 * its own prefix so it is never the token's stored hash).
 */
export function csrfOf(sessionToken: string): string {
  return createHash("sha256").update(`portico directory csrf\n${sessionToken}`).digest("base64url");
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Whether a form's CSRF value is the one of the session whose cookie came with it. */
export function csrfMatches(given: string | undefined, sessionToken: string): boolean {
  return given !== undefined && given !== "" && sameText(given, csrfOf(sessionToken));
}

/** The `Set-Cookie` of a new sign-in. */
export function signInCookie(
  token: string,
  options: { contextPath: string; maxAgeSeconds: number; secure: boolean },
): string {
  return setCookie(DIRECTORY_COOKIE, token, {
    path: cookiePath(options.contextPath),
    maxAgeSeconds: options.maxAgeSeconds,
    secure: options.secure,
    sameSite: "Strict",
  });
}

/** The `Set-Cookie` that ends the sign-in in the browser. */
export function signOutCookie(options: { contextPath: string; secure: boolean }): string {
  return setCookie(DIRECTORY_COOKIE, "", {
    path: cookiePath(options.contextPath),
    maxAgeSeconds: 0,
    secure: options.secure,
    sameSite: "Strict",
  });
}

/**
 * A new sign-in form's secret and its cookie: the form carries the secret, the cookie its hash.
 * Another site can neither read the secret nor set the cookie, so it cannot sign a browser in to
 * an account of its choosing (login CSRF).
 */
export function signInFormBinding(options: { contextPath: string; secure: boolean; path: string }): {
  secret: string;
  cookie: string;
} {
  const secret = randomBytes(32).toString("base64url");
  return {
    secret,
    cookie: setCookie(SIGN_IN_FORM_COOKIE, hashOf(secret), {
      path: options.path,
      maxAgeSeconds: 3600,
      secure: options.secure,
      sameSite: "Strict",
    }),
  };
}

const hashOf = (secret: string) => createHash("sha256").update(secret).digest("base64url");

export function signInFormMatches(secret: string | undefined, cookieHeader: string | undefined): boolean {
  const cookie = cookiesOf(cookieHeader)[SIGN_IN_FORM_COOKIE];
  if (secret === undefined || secret === "" || cookie === undefined) return false;
  return sameText(hashOf(secret), cookie);
}

/**
 * Where a sign-in may send the browser back to: a path of this portal's API roots, as the page
 * that linked to the sign-in gave it, never another site (`//host`, a scheme, a backslash that
 * browsers read as a slash). Anything else goes to the directory's root.
 */
export function returnPath(next: string | undefined, contextPath: string): string {
  const home = `${contextPath}/sharing/rest`;
  if (next === undefined || next.length > 2048) return home;
  if (!/^\/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*$/.test(next) || next.startsWith("//")) return home;
  const roots = ["/sharing/rest", "/rest", "/portaladmin"].map((r) => `${contextPath}${r}`);
  const under = roots.some((root) => next === root || next.startsWith(`${root}/`));
  // A `..` segment could climb out of the roots once the browser resolves it.
  if (!under || /(^|\/)\.\.?(\/|$)/.test(next) || /%2e|%2f|%5c/i.test(next)) return home;
  return next;
}
