/**
 * The console's session and its calls to the portal. It signs in through the portal's OAuth 2.0
 * authorize page as the built-in browser app `portico-console` with PKCE: the authorization code
 * comes back in the query and is removed from the address at once; the tokens live in
 * sessionStorage (this tab only, gone when it closes) and travel in the X-Esri-Authorization
 * header of POST requests, never in a URL.
 */

export interface ConsoleConfig {
  clientId: string;
  /** The portal's base URL, with its context path. */
  portal: string;
  redirectUri: string;
  /** The console's path (`/portico/console`). */
  base: string;
}

export const config: ConsoleConfig = JSON.parse(
  document.querySelector<HTMLMetaElement>('meta[name="portico-console"]')?.content ?? "{}",
) as ConsoleConfig;

export const API = `${config.portal}/sharing/rest`;

interface Session {
  token: string;
  refreshToken?: string | undefined;
  username: string;
  expires: number;
}

const SESSION_KEY = "portico-console.session";
const PKCE_KEY = "portico-console.pkce";

let session: Session | undefined = (() => {
  try {
    const raw = sessionStorage.getItem(SESSION_KEY);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  } catch {
    return undefined;
  }
})();

export const signedInAs = () => session?.username;

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: number | undefined,
    readonly details: string[],
  ) {
    super(message);
  }
  /** The message and its details, as the API gave them. */
  get full(): string {
    return [this.message, ...this.details].join(" ");
  }
}

function base64url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Sends the browser to the portal's sign-in page. */
export async function beginSignIn(): Promise<void> {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  // crypto.subtle exists only in secure contexts (https, localhost): elsewhere the challenge is
  // the verifier itself (RFC 7636 "plain"), which still binds the code to this tab.
  let challenge = verifier;
  let method = "plain";
  if (crypto.subtle) {
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
    challenge = base64url(new Uint8Array(digest));
    method = "S256";
  }
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state, hash: location.hash }));
  const params = new URLSearchParams({
    client_id: config.clientId,
    response_type: "code",
    redirect_uri: config.redirectUri,
    state,
    code_challenge: challenge,
    code_challenge_method: method,
  });
  location.assign(`${API}/oauth2/authorize?${params}`);
}

async function postForm(url: string, params: Record<string, string>, token?: string): Promise<any> {
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
  if (token) headers["x-esri-authorization"] = `Bearer ${token}`;
  const res = await fetch(url, {
    method: "POST",
    headers,
    body: new URLSearchParams({ f: "json", ...params }),
    credentials: "omit",
  });
  return res.json();
}

function remember(s: Session | undefined): void {
  session = s;
  if (s) sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
  else sessionStorage.removeItem(SESSION_KEY);
}

/**
 * Completes a sign-in when the portal sent the browser back with a code (or an error): the code
 * and state leave the address bar before anything else happens. Answers an error to show, if any.
 */
export async function completeSignIn(): Promise<string | undefined> {
  const query = new URLSearchParams(location.search);
  const code = query.get("code");
  const error = query.get("error");
  if (code === null && error === null) return undefined;
  const pending = JSON.parse(sessionStorage.getItem(PKCE_KEY) ?? "null") as {
    verifier: string;
    state: string;
    hash: string;
  } | null;
  sessionStorage.removeItem(PKCE_KEY);
  history.replaceState(null, "", `${config.redirectUri}${pending?.hash ?? ""}`);
  if (error !== null) return `Sign-in failed: ${query.get("error_description") ?? error}`;
  if (!pending || query.get("state") !== pending.state) {
    return "Sign-in failed: the answer does not belong to a sign-in started here. Sign in again.";
  }
  const answer = await postForm(`${API}/oauth2/token`, {
    grant_type: "authorization_code",
    client_id: config.clientId,
    code: code ?? "",
    redirect_uri: config.redirectUri,
    code_verifier: pending.verifier,
  });
  if (answer.error)
    return `Sign-in failed: ${answer.error_description ?? answer.error.message ?? answer.error}`;
  remember({
    token: answer.access_token,
    refreshToken: answer.refresh_token,
    username: answer.username,
    expires: Date.now() + answer.expires_in * 1000,
  });
  return undefined;
}

async function refresh(): Promise<boolean> {
  if (!session?.refreshToken) return false;
  const answer = await postForm(`${API}/oauth2/token`, {
    grant_type: "refresh_token",
    client_id: config.clientId,
    refresh_token: session.refreshToken,
  });
  if (answer.error || !answer.access_token) return false;
  remember({ ...session, token: answer.access_token, expires: Date.now() + answer.expires_in * 1000 });
  return true;
}

export async function signOut(): Promise<void> {
  const ending = session;
  remember(undefined);
  if (ending) {
    for (const token of [ending.refreshToken, ending.token]) {
      if (token) await postForm(`${API}/oauth2/revokeToken`, { auth_token: token }).catch(() => undefined);
    }
  }
}

export type Params = Record<string, string | number | boolean | undefined>;

function form(params: Params): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) if (v !== undefined) out[k] = String(v);
  return out;
}

/** Token expired or invalid (ArcGIS 498): one refresh, then the call again. */
const INVALID_TOKEN = 498;

/**
 * Calls the API at `path` (under /sharing/rest, or a full URL) with POST; answers the JSON, or
 * throws the API's error with its message and details.
 */
export async function api(path: string, params: Params = {}, files?: Record<string, File>): Promise<any> {
  if (!session) throw new ApiError("Not signed in.", 499, []);
  const url = path.startsWith("http") ? path : `${API}${path}`;
  const send = async () => {
    const headers: Record<string, string> = { "x-esri-authorization": `Bearer ${session?.token ?? ""}` };
    let body: BodyInit;
    if (files) {
      const data = new FormData();
      for (const [k, v] of Object.entries({ f: "json", ...form(params) })) data.append(k, v);
      for (const [k, f] of Object.entries(files)) data.append(k, f, f.name);
      body = data;
    } else {
      headers["content-type"] = "application/x-www-form-urlencoded";
      body = new URLSearchParams({ f: "json", ...form(params) });
    }
    const res = await fetch(url, { method: "POST", headers, body, credentials: "omit" });
    const type = res.headers.get("content-type") ?? "";
    if (!type.includes("json")) throw new ApiError(`Unexpected answer (HTTP ${res.status}).`, res.status, []);
    return res.json();
  };
  let answer = await send();
  if (answer?.error?.code === INVALID_TOKEN && (await refresh())) answer = await send();
  if (answer?.error) {
    const e = answer.error;
    throw new ApiError(String(e.message ?? "Request failed."), e.code, (e.details ?? []) as string[]);
  }
  return answer;
}

/** A JSON answer offered to the user as a file to save. */
export function download(name: string, json: unknown): void {
  const blob = new Blob([JSON.stringify(json, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
