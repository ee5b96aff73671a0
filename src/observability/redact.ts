/**
 * Names of query-string parameters whose values are secrets, lower-case. `token` is what the
 * server reads as a credential (`tokenOf` in `http/pipeline.ts`); the others carry a credential in
 * ArcGIS and OAuth 2 requests (`oauth2/revokeToken`'s `auth_token`, an authorization `code` and its
 * PKCE `code_verifier`, a `client_secret`, a `refresh_token`), or a password or secret that a careless client could put in
 * a URL although the operations that take them want POST.
 */
const SECRET_NAMES: ReadonlySet<string> = new Set([
  "token",
  "auth_token",
  "access_token",
  "refresh_token",
  "servertoken",
  "apikey",
  "api_key",
  "password",
  "oldpassword",
  "newpassword",
  "securityanswer",
  "secret",
  "client_secret",
  "code",
  "code_verifier",
]);

export const REDACTED = "[REDACTED]";

/**
 * A parameter name as the query-string parser reads it, for comparison only: `+` is a space and
 * every percent-encoded ASCII character is decoded, even where the rest of the name is not valid
 * percent-encoding (`%74oken` is `token` to the parser, so it must be here too). Non-ASCII escapes
 * are left alone: no secret name has one.
 */
function decodedName(raw: string): string {
  // Most names are plain (`f`, `token`): nothing to decode.
  if (!raw.includes("%") && !raw.includes("+")) return raw.toLowerCase();
  return raw
    .replace(/\+/g, " ")
    .replace(/%([0-7][0-9a-f])/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
    .toLowerCase();
}

/**
 * The URL with the value of every secret query parameter replaced by `[REDACTED]`; everything
 * else (the path, other parameters, the names as sent) stays as it was, so that log lines remain
 * useful. Names are compared decoded and case-insensitively; parameters are separated by `&`, as
 * the server's own parser separates them, so a value runs to the next `&`.
 */
export function redactUrl(url: string): string {
  const start = url.indexOf("?");
  if (start < 0) return url;
  // Walked by index rather than split and joined: run for every access line, and a URL without
  // secrets is handed back as it came, with nothing allocated.
  let redacted = "";
  let copied = 0;
  // The next `=` is searched again only once passed: searched from every parameter, a query of
  // many parameters without one (`?a&a&a...`) would be read to its end once per parameter.
  let eq = -1;
  for (let from = start + 1; from <= url.length; ) {
    if (eq < from) {
      eq = url.indexOf("=", from);
      if (eq < 0) break;
    }
    let end = url.indexOf("&", from);
    if (end < 0) end = url.length;
    if (eq >= 0 && eq < end && SECRET_NAMES.has(decodedName(url.slice(from, eq)))) {
      redacted += `${url.slice(copied, eq + 1)}${REDACTED}`;
      copied = end;
    }
    from = end + 1;
  }
  return copied === 0 ? url : redacted + url.slice(copied);
}
