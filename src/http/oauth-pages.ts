import { createHash, timingSafeEqual } from "node:crypto";
import { escapeHtml } from "./directory/html.js";

/**
 * The pages of the OAuth 2.0 sign-in (`oauth2/authorize`): the form, the code shown for
 * out-of-band apps, and the page that says why a request cannot be signed in. Real pages: labels,
 * no script, nothing inline but their style (allowed by its hash), never framed.
 */

const STYLE =
  "body{font-family:system-ui,sans-serif;max-width:26rem;margin:3rem auto;padding:0 1rem}" +
  "label{display:block;margin-top:1rem}input[type=text],input[type=password]{width:100%;padding:.4rem;box-sizing:border-box}" +
  "button{margin-top:1.5rem;padding:.5rem 1.5rem}.error{color:#a00;border:1px solid #a00;padding:.5rem}" +
  "code{word-break:break-all;background:#f5f5f5;padding:.5rem;display:block}";
const STYLE_HASH = createHash("sha256").update(STYLE).digest("base64");

/**
 * The page's policy: its style, a form posted to the portal itself, whose answer may redirect to
 * the app's redirect URI (browsers apply `form-action` to the redirect too), no framing.
 */
export function pageCsp(redirectTarget?: string): string {
  const target = redirectTarget ? ` ${redirectTarget}` : "";
  return `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; base-uri 'none'; form-action 'self'${target}; frame-ancestors 'none'`;
}

/**
 * What `form-action` must allow for a redirect to `uri`: its origin for a web URI, its scheme for
 * a native app's; nothing for a URI that cannot be a CSP source.
 */
export function redirectSource(uri: string): string | undefined {
  try {
    const url = new URL(uri);
    if (url.protocol === "http:" || url.protocol === "https:") return url.origin;
    return /^[a-z][a-z0-9+.-]*:$/i.test(url.protocol) ? url.protocol : undefined;
  } catch {
    return undefined;
  }
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body>${body}</body></html>
`;
}

/** The authorize request's parameters the form carries to its POST. */
export const AUTHORIZE_FIELDS = [
  "client_id",
  "response_type",
  "redirect_uri",
  "state",
  "expiration",
  "code_challenge",
  "code_challenge_method",
] as const;
export type AuthorizeFields = Partial<Record<(typeof AUTHORIZE_FIELDS)[number], string>>;

export function signInPage(options: {
  appTitle: string;
  portalName: string;
  fields: AuthorizeFields;
  csrfToken: string;
  username?: string | undefined;
  error?: string | undefined;
}): string {
  const hidden = AUTHORIZE_FIELDS.filter((name) => options.fields[name] !== undefined)
    .map(
      (name) => `<input type="hidden" name="${name}" value="${escapeHtml(options.fields[name] as string)}">`,
    )
    .join("\n");
  const error = options.error ? `<p class="error" role="alert">${escapeHtml(options.error)}</p>` : "";
  return page(
    `Sign in to ${options.portalName}`,
    `<main><h1>Sign in to ${escapeHtml(options.portalName)}</h1>
<p><strong>${escapeHtml(options.appTitle)}</strong> asks to use your account.</p>
${error}
<form method="post" action="authorize" autocomplete="on">
${hidden}
<input type="hidden" name="csrf_token" value="${escapeHtml(options.csrfToken)}">
<label for="username">Username</label>
<input type="text" id="username" name="username" autocomplete="username" required value="${escapeHtml(options.username ?? "")}">
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form></main>`,
  );
}

/** The code of an out-of-band app, for the user to copy into it. */
export function codePage(code: string): string {
  return page(
    "Authorization code",
    `<main><h1>Signed in</h1><p>Copy this code into the application:</p>
<label for="code">Authorization code</label><code id="code">${escapeHtml(code)}</code></main>`,
  );
}

/** Why the request cannot be signed in (an unknown app, an unregistered redirect URI). */
export function errorPage(message: string): string {
  return page(
    "Cannot sign in",
    `<main><h1>Cannot sign in</h1><p class="error" role="alert">${escapeHtml(message)}</p></main>`,
  );
}

// --------------------------------------------------------------------------------------- cookies

/** The cookie of the form's secret (CSRF), and the portal's sign-in session (`platformSelf`). */
export const FORM_COOKIE = "portico_oauth_form";
export const SESSION_COOKIE = "portico_auth";

/** The cookies of a request's `Cookie` header, by name (the first of a repeated name). */
export function cookiesOf(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name in out) continue;
    out[name] = part.slice(eq + 1).trim();
  }
  return out;
}

export function setCookie(
  name: string,
  value: string,
  options: { path: string; maxAgeSeconds: number; secure: boolean; sameSite: "Strict" | "Lax" | "None" },
): string {
  return [
    `${name}=${value}`,
    `Path=${options.path}`,
    `Max-Age=${options.maxAgeSeconds}`,
    "HttpOnly",
    `SameSite=${options.sameSite}`,
    ...(options.secure ? ["Secure"] : []),
  ].join("; ");
}

/**
 * The form's CSRF binding: the form carries a random secret, the cookie its hash together with
 * the authorize request it was shown for. Another site can neither read the secret nor set the
 * cookie, and a secret shown for one request does not sign in another.
 */
export function formBinding(secret: string, fields: AuthorizeFields): string {
  const request = JSON.stringify(AUTHORIZE_FIELDS.map((name) => fields[name] ?? null));
  return createHash("sha256").update(`${secret}\n${request}`).digest("base64url");
}

export function formBindingMatches(
  secret: string,
  fields: AuthorizeFields,
  cookie: string | undefined,
): boolean {
  if (cookie === undefined || secret === "") return false;
  const a = Buffer.from(formBinding(secret, fields));
  const b = Buffer.from(cookie);
  return a.length === b.length && timingSafeEqual(a, b);
}
