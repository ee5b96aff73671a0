import { createHash, randomBytes } from "node:crypto";
import type { TestPortal } from "./portico.js";

/** Registers a new Application item of `token`'s user as an app; answers registerApp's answer. */
export async function registerTestApp(
  portal: TestPortal,
  token: string,
  username: string,
  redirectUris: string[],
  appType = "browser",
): Promise<any> {
  const item = await portal.post(
    `/content/users/${username}/addItem`,
    { title: `App ${randomBytes(3).toString("hex")}`, type: "Application", tags: "app" },
    token,
  );
  if (!item.success) throw new Error(`addItem failed: ${JSON.stringify(item)}`);
  const app = await portal.post(
    "/oauth2/registerApp",
    { itemId: item.id, appType, redirect_uris: JSON.stringify(redirectUris) },
    token,
  );
  if (!app.client_id) throw new Error(`registerApp failed: ${JSON.stringify(app)}`);
  return app;
}

/** A PKCE verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

/** The sign-in page of an authorize URL: its HTML, headers, the form's secret and its cookie. */
export async function openSignInPage(url: string) {
  const res = await fetch(url, { redirect: "manual" });
  const html = await res.text();
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html)?.[1];
  const cookie = (res.headers.getSetCookie?.() ?? []).map((c) => c.split(";")[0]).join("; ");
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    fields[m[1] as string] = (m[2] as string).replaceAll("&amp;", "&").replaceAll("&quot;", '"');
  }
  return { res, html, csrf, cookie, fields };
}

/**
 * Fills the sign-in page of `authorizeUrl` as a user would and submits it; answers the POST's
 * answer (not followed), with the cookies it set.
 */
export async function signInThroughPage(
  authorizeUrl: string,
  username: string,
  password: string,
  tamper: { dropCsrf?: boolean } = {},
) {
  const page = await openSignInPage(authorizeUrl);
  const body = new URLSearchParams({ ...page.fields, username, password });
  if (page.csrf && !tamper.dropCsrf) body.set("csrf_token", page.csrf);
  const action = authorizeUrl.split("?")[0] as string;
  const res = await fetch(action, {
    method: "POST",
    body,
    redirect: "manual",
    headers: { cookie: tamper.dropCsrf ? "" : page.cookie },
  });
  const location = res.headers.get("location") ?? undefined;
  const setCookies = res.headers.getSetCookie?.() ?? [];
  return { res, location, html: location ? "" : await res.text(), setCookies };
}
