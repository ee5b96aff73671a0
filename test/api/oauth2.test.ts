import http from "node:http";
import type { AddressInfo } from "node:net";
import { getUser } from "@esri/arcgis-rest-portal";
import {
  ApplicationCredentialsManager,
  ArcGISIdentityManager,
  exchangeToken,
  fetchToken,
  platformSelf,
  validateAppAccess,
} from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deleteItem } from "../../src/content/item.repository.js";
import { openSignInPage, pkcePair, registerTestApp, signInThroughPage } from "../helpers/oauth.js";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * OAuth 2.0 with Esri's own client (@esri/arcgis-rest-request 4.10.2): registered apps, the
 * sign-in page of `authorize`, the token endpoint's grants, exchangeToken, validateAppAccess,
 * platformSelf, and what a hostile caller tries.
 */
describe("OAuth 2.0", () => {
  let portal: TestPortal;
  let member: { username: string; password: string; token: string };
  let app: any;
  const REDIRECT = "http://127.0.0.1:9/callback";
  const authorizeUrl = (params: Record<string, string>) =>
    `${portal.api}/oauth2/authorize?${new URLSearchParams({ client_id: app.client_id, redirect_uri: REDIRECT, response_type: "code", ...params })}`;
  const codeOf = (location: string | undefined) =>
    new URL(location as string).searchParams.get("code") as string;

  beforeAll(async () => {
    portal = await startTestPortal();
    member = await portal.addUser("oauth_member");
    app = await registerTestApp(
      portal,
      member.token,
      member.username,
      [REDIRECT, "urn:ietf:wg:oauth:2.0:oob"],
      "multiple",
    );
  });
  afterAll(async () => {
    await portal.stop();
  });

  describe("registered apps", () => {
    it("registerApp answers the registered app with its secret, once", async () => {
      expect(app).toMatchObject({
        appType: "multiple",
        redirect_uris: [REDIRECT, "urn:ietf:wg:oauth:2.0:oob"],
        httpReferrers: [],
        privileges: [],
      });
      expect(app.client_id).toMatch(/^[A-Za-z0-9]{16}$/);
      expect(app.client_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(app.registered).toBeTypeOf("number");
      const info = await portal.get(`/oauth2/apps/${app.client_id}`, {}, member.token);
      expect(info).toMatchObject({ client_id: app.client_id, itemId: app.itemId, appType: "multiple" });
      expect(info.client_secret).toBeUndefined();
      const byItem = await portal.get(
        `/content/users/${member.username}/items/${app.itemId}/registeredAppInfo`,
        {},
        member.token,
      );
      expect(byItem.client_id).toBe(app.client_id);
      // An administrator sees it; the secret is nowhere in the database.
      expect((await portal.get(`/oauth2/apps/${app.client_id}`, {}, portal.adminToken)).client_id).toBe(
        app.client_id,
      );
      const stored = await portal.portico.db.kysely.selectFrom("oauth_apps").selectAll().execute();
      expect(JSON.stringify(stored)).not.toContain(app.client_secret);
    });

    it("an app's item deleted by any path ends every user's tokens for it, cached ones too", async () => {
      const doomed = await registerTestApp(portal, member.token, member.username, [REDIRECT]);
      // Another user's token for the app, used once so that the token cache holds it.
      const adminsToken = await exchangeToken(portal.adminToken, doomed.client_id, portal.api);
      expect((await portal.get("/community/self", {}, adminsToken)).username).toBe(ADMIN.username);
      // Deleted as the end of a replication deletes a copy: through the repository, in a
      // transaction that declares no change of its own.
      await portal.portico.db.transaction((trx) => deleteItem(trx, doomed.itemId, async () => {}));
      expect((await portal.get("/community/self", {}, adminsToken)).error.code).toBe(498);
    });

    it("refuses to register an item of another type, another's item, or an unsafe redirect URI", async () => {
      const map = await portal.post(
        `/content/users/${member.username}/addItem`,
        { title: "a map", type: "Web Map", text: "{}" },
        member.token,
      );
      const wrongType = await portal.post(
        "/oauth2/registerApp",
        { itemId: map.id, appType: "browser", redirect_uris: "[]" },
        member.token,
      );
      expect(wrongType.error.details.join(" ")).toMatch(/Application/);
      const other = await portal.addUser("oauth_other");
      const notOwner = await portal.post(
        "/oauth2/registerApp",
        { itemId: app.itemId, appType: "browser", redirect_uris: "[]" },
        other.token,
      );
      expect(notOwner.error.code).toBe(400);
      const script = await portal.post(
        "/oauth2/registerApp",
        { itemId: app.itemId, appType: "browser", redirect_uris: '["javascript:alert(1)"]' },
        member.token,
      );
      expect(script.error.details.join(" ")).toMatch(/scheme/);
      // Another member does not learn of a private item's app.
      const notMine = await portal.get(`/oauth2/apps/${app.client_id}`, {}, other.token);
      expect(notMine.error.messageCode).toBe("CONT_0001");
    });

    it("update changes the redirect URIs; unregister and deleting the item end the app and its tokens", async () => {
      const other = await registerTestApp(portal, member.token, member.username, [REDIRECT]);
      const updated = await portal.post(
        `/oauth2/apps/${other.client_id}/update`,
        { redirect_uris: JSON.stringify([REDIRECT, "https://app.example.com/cb"]) },
        member.token,
      );
      expect(updated.redirect_uris).toEqual([REDIRECT, "https://app.example.com/cb"]);
      const exchanged = await exchangeToken(member.token, other.client_id, portal.api);
      expect((await portal.get("/community/self", {}, exchanged)).username).toBe(member.username);
      const gone = await portal.post(`/oauth2/apps/${other.client_id}/unregister`, {}, member.token);
      expect(gone).toEqual({ success: true, itemId: other.itemId });
      expect((await portal.get("/community/self", {}, exchanged)).error.code).toBe(498);

      const third = await registerTestApp(portal, member.token, member.username, [REDIRECT]);
      const token = await exchangeToken(member.token, third.client_id, portal.api);
      await portal.post(`/content/users/${member.username}/items/${third.itemId}/delete`, {}, member.token);
      expect((await portal.get("/community/self", {}, token)).error.code).toBe(498);
      expect((await portal.get(`/oauth2/apps/${third.client_id}`, {}, member.token)).error).toBeDefined();
    });
  });

  describe("authorize", () => {
    it("shows a real sign-in page that no other site may frame", async () => {
      const { res, html, csrf } = await openSignInPage(authorizeUrl({ state: "s1" }));
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/text\/html/);
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(html).toContain('<label for="username">');
      expect(html).toContain('<label for="password">');
      expect(html).not.toContain("<script");
      expect(csrf).toBeTypeOf("string");
    });

    it("shows errors about the app or the redirect URI on the page and never redirects to an unregistered URI", async () => {
      const wrongUri = await fetch(authorizeUrl({ redirect_uri: "https://evil.example.com/cb" }), {
        redirect: "manual",
      });
      expect(wrongUri.status).toBe(200);
      expect(wrongUri.headers.get("location")).toBeNull();
      expect(await wrongUri.text()).toMatch(/redirect_uri/);
      const unknown = await fetch(authorizeUrl({ client_id: "nosuchclient" }), { redirect: "manual" });
      expect(await unknown.text()).toMatch(/client_id/);
      // The form's post is checked again: a redirect URI changed in the form is refused.
      const page = await openSignInPage(authorizeUrl({}));
      const post = await fetch(`${portal.api}/oauth2/authorize`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie: page.cookie },
        body: new URLSearchParams({
          ...page.fields,
          redirect_uri: "https://evil.example.com/cb",
          csrf_token: page.csrf as string,
          username: member.username,
          password: member.password,
        }),
      });
      expect(post.headers.get("location")).toBeNull();
    });

    it("refuses a post without the form's secret (CSRF)", async () => {
      const r = await signInThroughPage(authorizeUrl({}), member.username, member.password, {
        dropCsrf: true,
      });
      expect(r.location).toBeUndefined();
      expect(r.html).toMatch(/not sent from this page/);
      expect(r.setCookies.some((c) => c.startsWith("portico_auth="))).toBe(false);
    });

    it("shows a wrong password on the page, and refuses a disabled user", async () => {
      const wrong = await signInThroughPage(authorizeUrl({}), member.username, "not-the-password");
      expect(wrong.location).toBeUndefined();
      expect(wrong.html).toMatch(/Invalid username or password/);
      expect(wrong.html).not.toContain("not-the-password");
      const disabled = await portal.addUser("oauth_disabled");
      await portal.post(`/community/users/${disabled.username}/disable`, {}, portal.adminToken);
      const r = await signInThroughPage(authorizeUrl({}), disabled.username, disabled.password);
      expect(r.location).toBeUndefined();
      expect(r.html).toMatch(/disabled/);
    });

    it("answers response_type=token in the fragment, and oob on the page", async () => {
      const r = await signInThroughPage(
        authorizeUrl({ response_type: "token", state: "xyz" }),
        member.username,
        member.password,
      );
      const url = new URL(r.location as string);
      expect(url.search).toBe("");
      const fragment = new URLSearchParams(url.hash.slice(1));
      expect(fragment.get("state")).toBe("xyz");
      expect(fragment.get("username")).toBe(member.username);
      expect(Number(fragment.get("expires_in"))).toBeGreaterThan(0);
      const user = await getUser({
        authentication: new ArcGISIdentityManager({
          token: fragment.get("access_token") as string,
          portal: portal.api,
          username: member.username,
        }),
      });
      expect(user.username).toBe(member.username);

      const oob = await signInThroughPage(
        authorizeUrl({ redirect_uri: "urn:ietf:wg:oauth:2.0:oob" }),
        member.username,
        member.password,
      );
      expect(oob.location).toBeUndefined();
      expect(oob.html).toMatch(/<code id="code">[A-Za-z0-9_-]{43}<\/code>/);
    });
  });

  describe("token", () => {
    it("ArcGISIdentityManager.authorize redirects to the sign-in page; exchangeAuthorizationCode gives a session that refreshes", async () => {
      // A server-side app: rest-js's authorize answers a redirect to the portal's page.
      const server = http.createServer((_req, res) =>
        ArcGISIdentityManager.authorize(
          { clientId: app.client_id, portal: portal.api, redirectUri: REDIRECT, state: "server-state" },
          res,
        ),
      );
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const appUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const redirect = await fetch(appUrl, { redirect: "manual" });
      server.close();
      const location = redirect.headers.get("location") as string;
      expect(location.startsWith(`${portal.api}/oauth2/authorize?`)).toBe(true);

      const signedIn = await signInThroughPage(location, member.username, member.password);
      expect(signedIn.res.status).toBe(302);
      const back = new URL(signedIn.location as string);
      expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
      expect(back.searchParams.get("state")).toBe("server-state");
      expect(back.search).not.toMatch(/access_token|token=/);
      const session = await ArcGISIdentityManager.exchangeAuthorizationCode(
        { clientId: app.client_id, portal: portal.api, redirectUri: REDIRECT },
        back.searchParams.get("code") as string,
      );
      expect(session.username).toBe(member.username);
      expect(session.refreshToken).toBeTypeOf("string");
      expect(session.refreshTokenExpires.getTime()).toBeGreaterThan(Date.now() + 86_400_000);
      expect((await session.getUser()).username).toBe(member.username);

      // refresh_token: a new access token, the refresh token kept.
      const before = session.token;
      await session.refreshCredentials();
      expect(session.token).not.toBe(before);
      expect((await getUser({ username: member.username, authentication: session })).username).toBe(
        member.username,
      );

      // exchange_refresh_token (rest-js asks for it within a day of the refresh token's end).
      const nearEnd = new ArcGISIdentityManager({
        clientId: app.client_id,
        portal: portal.api,
        redirectUri: REDIRECT,
        username: member.username,
        refreshToken: session.refreshToken,
        refreshTokenExpires: new Date(Date.now() + 3_600_000),
      });
      await nearEnd.refreshCredentials();
      expect(nearEnd.refreshToken).not.toBe(session.refreshToken);
      expect((await nearEnd.getUser()).username).toBe(member.username);
      // The refresh token exchanged is spent.
      await expect(session.refreshCredentials()).rejects.toThrow();
    });

    it("a code, or a refresh token exchanged, serves once even when sent many times at once", async () => {
      const post = (params: Record<string, string>) =>
        fetch(`${portal.api}/oauth2/token`, {
          method: "POST",
          body: new URLSearchParams({ f: "json", client_id: app.client_id, ...params }),
        }).then((r) => r.json() as Promise<any>);
      const signedIn = await signInThroughPage(authorizeUrl({}), member.username, member.password);
      const code = codeOf(signedIn.location);
      const exchanges = await Promise.all(
        Array.from({ length: 8 }, () =>
          post({ grant_type: "authorization_code", redirect_uri: REDIRECT, code }),
        ),
      );
      const granted = exchanges.filter((r) => r.access_token);
      expect(granted).toHaveLength(1);
      const refreshes = await Promise.all(
        Array.from({ length: 8 }, () =>
          post({
            grant_type: "exchange_refresh_token",
            redirect_uri: REDIRECT,
            refresh_token: granted[0].refresh_token,
          }),
        ),
      );
      expect(refreshes.filter((r) => r.refresh_token)).toHaveLength(1);
      expect(refreshes.filter((r) => r.error?.details?.[0] === "invalid_grant")).toHaveLength(7);
    });

    it("fetchToken exchanges a PKCE code once, and only with its verifier and redirect URI", async () => {
      const tokenUrl = `${portal.api}/oauth2/token`;
      const codeFor = async () => {
        const pkce = pkcePair();
        const r = await signInThroughPage(
          authorizeUrl({ code_challenge: pkce.challenge, code_challenge_method: "S256" }),
          member.username,
          member.password,
        );
        return { code: codeOf(r.location), ...pkce };
      };
      const params = (code: string, verifier: string) => ({
        params: {
          grant_type: "authorization_code",
          client_id: app.client_id,
          redirect_uri: REDIRECT,
          code,
          code_verifier: verifier,
        },
      });

      const good = await codeFor();
      const answer = await fetchToken(tokenUrl, params(good.code, good.verifier));
      expect(answer.username).toBe(member.username);
      expect(answer.token).toBeTypeOf("string");
      expect(answer.refreshToken).toBeTypeOf("string");
      expect(answer.expires.getTime()).toBeGreaterThan(Date.now());
      // The raw answer has the documented fields.
      const raw = await portal.post("/oauth2/token", {
        grant_type: "refresh_token",
        client_id: app.client_id,
        refresh_token: answer.refreshToken,
      });
      expect(Object.keys(raw).sort()).toEqual(["access_token", "expires_in", "ssl", "username"]);
      // Reused.
      await expect(fetchToken(tokenUrl, params(good.code, good.verifier))).rejects.toThrow(
        /authorization code/,
      );

      // A wrong verifier fails, and spends the code.
      const stolen = await codeFor();
      await expect(fetchToken(tokenUrl, params(stolen.code, pkcePair().verifier))).rejects.toThrow(
        /code_verifier/,
      );
      await expect(fetchToken(tokenUrl, params(stolen.code, stolen.verifier))).rejects.toThrow(
        /authorization code/,
      );

      // No verifier for a code made with a challenge.
      const noVerifier = await codeFor();
      const missing = await portal.post("/oauth2/token", {
        grant_type: "authorization_code",
        client_id: app.client_id,
        redirect_uri: REDIRECT,
        code: noVerifier.code,
      });
      expect(missing.error.message).toMatch(/code_verifier/);

      // Another redirect URI than the code's.
      const moved = await codeFor();
      const wrongUri = await portal.post("/oauth2/token", {
        grant_type: "authorization_code",
        client_id: app.client_id,
        redirect_uri: "urn:ietf:wg:oauth:2.0:oob",
        code: moved.code,
        code_verifier: moved.verifier,
      });
      expect(wrongUri.error.message).toMatch(/redirect_uri/);

      // Another app's client id.
      const otherApp = await registerTestApp(portal, member.token, member.username, [REDIRECT]);
      const elsewhere = await codeFor();
      const wrongClient = await portal.post("/oauth2/token", {
        grant_type: "authorization_code",
        client_id: otherApp.client_id,
        redirect_uri: REDIRECT,
        code: elsewhere.code,
        code_verifier: elsewhere.verifier,
      });
      expect(wrongClient.error.message).toMatch(/authorization code/);
      const unknown = await portal.post("/oauth2/token", {
        grant_type: "client_credentials",
        client_id: "nosuch",
        client_secret: "x",
      });
      expect(unknown.error.details).toContain("invalid_client");
    });

    it("revoking a refresh token or an access token ends it; disabling the user ends its grants", async () => {
      const pkce = pkcePair();
      const r = await signInThroughPage(
        authorizeUrl({ code_challenge: pkce.challenge, code_challenge_method: "S256" }),
        member.username,
        member.password,
      );
      const grant = await portal.post("/oauth2/token", {
        grant_type: "authorization_code",
        client_id: app.client_id,
        redirect_uri: REDIRECT,
        code: codeOf(r.location),
        code_verifier: pkce.verifier,
      });
      expect((await portal.post("/oauth2/revokeToken", { auth_token: grant.refresh_token })).success).toBe(
        true,
      );
      const refreshed = await portal.post("/oauth2/token", {
        grant_type: "refresh_token",
        client_id: app.client_id,
        refresh_token: grant.refresh_token,
      });
      expect(refreshed.error.details).toContain("invalid_grant");
      expect((await portal.post("/oauth2/revokeToken", { auth_token: grant.access_token })).success).toBe(
        true,
      );
      expect((await portal.get("/community/self", {}, grant.access_token)).error.code).toBe(498);

      const doomed = await portal.addUser("oauth_doomed");
      const pkce2 = pkcePair();
      const r2 = await signInThroughPage(
        authorizeUrl({ code_challenge: pkce2.challenge, code_challenge_method: "S256" }),
        doomed.username,
        doomed.password,
      );
      const grant2 = await portal.post("/oauth2/token", {
        grant_type: "authorization_code",
        client_id: app.client_id,
        redirect_uri: REDIRECT,
        code: codeOf(r2.location),
        code_verifier: pkce2.verifier,
      });
      await portal.post(`/community/users/${doomed.username}/disable`, {}, portal.adminToken);
      expect((await portal.get("/community/self", {}, grant2.access_token)).error.code).toBe(498);
      const after = await portal.post("/oauth2/token", {
        grant_type: "refresh_token",
        client_id: app.client_id,
        refresh_token: grant2.refresh_token,
      });
      expect(after.error.details).toContain("invalid_grant");
    });

    it("ApplicationCredentialsManager gets an app token that acts for no user and is never an administrator", async () => {
      const manager = ApplicationCredentialsManager.fromCredentials({
        clientId: app.client_id,
        clientSecret: app.client_secret,
        portal: portal.api,
      });
      const token = await manager.getToken(portal.api);
      expect(token).toBeTypeOf("string");
      expect(manager.expires.getTime()).toBeGreaterThan(Date.now());
      const raw = await portal.post("/oauth2/token", {
        grant_type: "client_credentials",
        client_id: app.client_id,
        client_secret: app.client_secret,
        expiration: 60,
      });
      expect(Object.keys(raw).sort()).toEqual(["access_token", "expires_in"]);
      expect(raw.expires_in).toBe(3600);
      // Anonymous reads work; the portal sees no user.
      const self = await portal.get("/portals/self", {}, token);
      expect(self.user).toBeUndefined();
      // Nothing that needs a user, let alone an administrator.
      expect((await portal.get("/community/self", {}, token)).error.code).toBe(403);
      expect((await portal.post(`/community/users/${member.username}/disable`, {}, token)).error.code).toBe(
        403,
      );
      expect((await portal.post("/portals/self/update", { name: "taken" }, token)).error.code).toBe(403);
      // Revoked like any token.
      expect((await portal.post("/oauth2/revokeToken", { auth_token: token })).success).toBe(true);
      expect((await portal.get("/portals/self", {}, token)).error.code).toBe(498);
    });

    it("wrong client secrets from anyone never lock the app out of its right one", async () => {
      const target = await registerTestApp(portal, member.token, member.username, [REDIRECT], "server");
      const attempt = (secret: string) =>
        portal.post("/oauth2/token", {
          grant_type: "client_credentials",
          client_id: target.client_id,
          client_secret: secret,
        });
      // More wrong secrets than the lockout policy allows wrong passwords (5 by default).
      for (let i = 0; i < 8; i++)
        expect((await attempt(`guess-${i}`)).error.message).toMatch(/Invalid client_secret/);
      expect((await attempt(target.client_secret)).access_token).toBeTypeOf("string");
      const manager = ApplicationCredentialsManager.fromCredentials({
        clientId: target.client_id,
        clientSecret: target.client_secret,
        portal: portal.api,
      });
      expect(await manager.getToken(portal.api)).toBeTypeOf("string");
      // Nothing is counted against the client id.
      const counted = await portal.portico.db.kysely
        .selectFrom("sign_in_failures")
        .select("username_key")
        .where("username_key", "like", `%${target.client_id.toLowerCase()}%`)
        .execute();
      expect(counted).toEqual([]);
    });
    it("refusals name RFC 6749's error beside ArcGIS's fields, and rest-js still reads them", async () => {
      const token = (params: Record<string, string>) => portal.post("/oauth2/token", params);
      const unknown = await token({
        grant_type: "client_credentials",
        client_id: "nosuch",
        client_secret: "x",
      });
      expect(unknown.error).toEqual({
        code: 400,
        error: "invalid_client",
        error_description: unknown.error.message,
        messageCode: "OAUTH_0001",
        message: expect.stringMatching(/client_id/),
        details: ["invalid_client"],
      });
      const grant = await token({ grant_type: "password", client_id: app.client_id });
      expect(grant.error.error).toBe("unsupported_grant_type");
      const badSecret = await token({
        grant_type: "client_credentials",
        client_id: app.client_id,
        client_secret: "wrong",
      });
      expect(badSecret.error.error).toBe("invalid_client");
      const badRefresh = await token({
        grant_type: "refresh_token",
        client_id: app.client_id,
        refresh_token: "nosuch",
      });
      expect(badRefresh.error).toMatchObject({
        error: "invalid_grant",
        error_description: "Invalid refresh_token.",
      });
      // Parameter errors, found by the route's checks or by the grant, are invalid_request.
      const noClient = await token({ grant_type: "refresh_token" });
      expect(noClient.error).toMatchObject({ error: "invalid_request", messageCode: "PARAM_0001" });
      expect(noClient.error.error_description).toBe(noClient.error.message);
      const noCode = await token({
        grant_type: "authorization_code",
        client_id: app.client_id,
        redirect_uri: REDIRECT,
      });
      expect(noCode.error).toMatchObject({ error: "invalid_request", messageCode: "PARAM_0001" });
      const noHeader = await portal.post("/oauth2/platformSelf", {});
      expect(noHeader.error.error).toBe("invalid_request");
      const noToken = await portal.post("/oauth2/exchangeToken", { client_id: app.client_id });
      expect(noToken.error.error).toBe("invalid_request");
      // Other operations' errors are ArcGIS's envelope alone.
      expect((await portal.get("/content/items/nosuchitem", {})).error.error).toBeUndefined();
      // rest-js reads code, messageCode and message as before.
      const refused = await fetchToken(`${portal.api}/oauth2/token`, {
        params: { grant_type: "refresh_token", client_id: app.client_id, refresh_token: "nosuch" },
      }).catch((e: unknown) => e as any);
      expect(refused.name).toBe("ArcGISRequestError");
      expect(refused.code).toBe("OAUTH_0001");
      expect(refused.message).toBe("OAUTH_0001: Invalid refresh_token.");
      expect(refused.response.error.error).toBe("invalid_grant");
    });
  });

  describe("exchangeToken, validateAppAccess, platformSelf", () => {
    it("exchangeToken gives a token of the same user for the app", async () => {
      const token = await exchangeToken(member.token, app.client_id, portal.api);
      expect(token).not.toBe(member.token);
      const session = new ArcGISIdentityManager({ token, portal: portal.api, username: member.username });
      expect((await session.getUser()).username).toBe(member.username);
      await expect(exchangeToken("not-a-token", app.client_id, portal.api)).rejects.toThrow(
        /498|Invalid token/,
      );
      await expect(exchangeToken(member.token, "nosuchclient", portal.api)).rejects.toThrow(/client_id/);
    });

    it("exchangeToken and validateAppAccess take a referer-bound token only from its referer", async () => {
      const bound = await portal.post("/generateToken", {
        username: member.username,
        password: member.password,
        client: "referer",
        referer: "https://only.example.com",
      });
      expect(bound.token).toBeTypeOf("string");
      const call = (op: string, referer?: string) =>
        fetch(`${portal.api}/oauth2/${op}`, {
          method: "POST",
          body: new URLSearchParams({ f: "json", token: bound.token, client_id: app.client_id }),
          headers: referer ? { referer } : {},
        }).then((r) => r.json() as Promise<any>);
      // A stolen bound token does not become one usable from anywhere.
      expect((await call("exchangeToken")).error.code).toBe(498);
      expect((await call("exchangeToken", "https://evil.example.com/")).error.code).toBe(498);
      expect((await call("validateAppAccess")).error.code).toBe(498);
      const exchanged = await call("exchangeToken", "https://only.example.com/page");
      expect((await portal.get("/community/self", {}, exchanged.token)).username).toBe(member.username);
      expect((await call("validateAppAccess", "https://only.example.com/")).valid).toBe(true);
    });

    it("validateAppAccess answers valid and viewOnlyUserTypeApp", async () => {
      expect(await validateAppAccess(member.token, app.client_id, portal.api)).toEqual({
        valid: true,
        viewOnlyUserTypeApp: false,
      });
      const session = new ArcGISIdentityManager({
        token: member.token,
        portal: portal.api,
        username: member.username,
      });
      await expect(validateAppAccess("not-a-token", app.client_id, portal.api)).rejects.toThrow(
        /Invalid token/,
      );
      expect(session.username).toBe(member.username);
    });

    it("platformSelf answers a token only with the portal's sign-in cookie made through that app", async () => {
      await expect(platformSelf(app.client_id, REDIRECT, portal.api)).rejects.toThrow(/Not signed in/);
      const r = await signInThroughPage(authorizeUrl({}), member.username, member.password);
      const cookie = r.setCookies.find((c) => c.startsWith("portico_auth=")) as string;
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Lax/);
      expect(cookie).toMatch(/Path=\/sharing\/rest\/oauth2/);
      const call = (headers: Record<string, string>) =>
        fetch(`${portal.api}/oauth2/platformSelf?f=json`, {
          method: "POST",
          headers: { cookie: cookie.split(";")[0] as string, ...headers },
          body: new URLSearchParams({ f: "json" }),
        }).then((res) => res.json() as Promise<any>);
      const answer = await call({
        "X-Esri-Auth-Client-Id": app.client_id,
        "X-Esri-Auth-Redirect-Uri": REDIRECT,
      });
      expect(Object.keys(answer).sort()).toEqual(["expires_in", "token", "username"]);
      expect(answer.username).toBe(member.username);
      expect((await portal.get("/community/self", {}, answer.token)).username).toBe(member.username);
      // Another origin than the redirect URI's, another redirect URI, another app: nothing.
      const fromElsewhere = await call({
        "X-Esri-Auth-Client-Id": app.client_id,
        "X-Esri-Auth-Redirect-Uri": REDIRECT,
        origin: "https://evil.example.com",
      });
      expect(fromElsewhere.error).toBeDefined();
      const otherUri = await call({
        "X-Esri-Auth-Client-Id": app.client_id,
        "X-Esri-Auth-Redirect-Uri": "https://evil.example.com/",
      });
      expect(otherUri.error).toBeDefined();
      const otherApp = await registerTestApp(portal, member.token, member.username, [REDIRECT]);
      const wrongApp = await call({
        "X-Esri-Auth-Client-Id": otherApp.client_id,
        "X-Esri-Auth-Redirect-Uri": REDIRECT,
      });
      expect(wrongApp.error.message).toMatch(/Not signed in/);
      // The cookie is no bearer token.
      const asToken = decodeURIComponent((cookie.split(";")[0] as string).split("=")[1] as string);
      expect((await portal.get("/community/self", {}, asToken)).error.code).toBe(498);
      expect(ADMIN.username).not.toBe(member.username);
    });
  });

  describe("caching", () => {
    it("answers that carry a token or a secret say no-store and no-cache, errors too (RFC 6749 §5.1)", async () => {
      const raw = (path: string, params: Record<string, string>, headers: Record<string, string> = {}) =>
        fetch(`${portal.api}${path}`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
          body: new URLSearchParams({ f: "json", ...params }),
        });
      const expectNoStore = async (res: Response, field: string) => {
        const body = (await res.json()) as Record<string, unknown>;
        expect(body[field]).toBeDefined();
        expect(res.headers.get("cache-control")).toBe("no-store");
        expect(res.headers.get("pragma")).toBe("no-cache");
      };
      await expectNoStore(
        await raw("/oauth2/token", {
          grant_type: "client_credentials",
          client_id: app.client_id,
          client_secret: app.client_secret,
        }),
        "access_token",
      );
      await expectNoStore(
        await raw("/oauth2/token", {
          grant_type: "client_credentials",
          client_id: "nosuch",
          client_secret: "x",
        }),
        "error",
      );
      await expectNoStore(
        await raw("/oauth2/exchangeToken", { token: member.token, client_id: app.client_id }),
        "token",
      );
      await expectNoStore(
        await raw("/generateToken", {
          username: member.username,
          password: member.password,
          client: "requestip",
        }),
        "token",
      );
      const r = await signInThroughPage(authorizeUrl({}), member.username, member.password);
      const cookie = r.setCookies.find((c) => c.startsWith("portico_auth=")) as string;
      await expectNoStore(
        await raw(
          "/oauth2/platformSelf",
          {},
          {
            cookie: cookie.split(";")[0] as string,
            "X-Esri-Auth-Client-Id": app.client_id,
            "X-Esri-Auth-Redirect-Uri": REDIRECT,
          },
        ),
        "token",
      );
      // Answers without credentials are left to the usual rules.
      const info = await raw("/oauth2/validateAppAccess", { token: member.token, client_id: app.client_id });
      expect(((await info.json()) as { valid: boolean }).valid).toBe(true);
      expect(info.headers.get("pragma")).toBeNull();
    });
  });
});
