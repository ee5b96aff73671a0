import { newSecret } from "../../auth/auth.service.js";
import type { AuthorizeRequest } from "../../auth/oauth.service.js";
import {
  APP_TYPES,
  MAX_REDIRECT_URI_LENGTH,
  MAX_REDIRECT_URIS,
  OOB_REDIRECT,
  redirectUriRefusal,
  withAnswer,
} from "../../auth/oauth-rules.js";
import { errors, PorticoError } from "../../errors.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import {
  type AuthorizeFields,
  codePage,
  cookiesOf,
  errorPage,
  FORM_COOKIE,
  formBinding,
  formBindingMatches,
  pageCsp,
  redirectSource,
  SESSION_COOKIE,
  setCookie,
  signInPage,
} from "../oauth-pages.js";
import { defineRoute } from "../pipeline.js";
import { WebAnswer } from "../render.js";

/** Bodies of the OAuth 2.0 operations: a few short parameters. */
const SMALL_BODY = 16 * 1024;
/** `registerApp` and `update`: up to 100 redirect URIs and 100 referrers of 2 KB each. */
const APP_BODY = 1024 * 1024;

const authorizeParams = {
  client_id: p.string({ maxLength: 128 }),
  response_type: p.string({ maxLength: 32 }),
  redirect_uri: p.string({ maxLength: MAX_REDIRECT_URI_LENGTH }),
  state: p.string({ maxLength: 4096 }),
  expiration: p.string({ maxLength: 16 }),
  code_challenge: p.string({ maxLength: 256 }),
  code_challenge_method: p.string({ maxLength: 16 }),
  // Sent by Esri's clients; the page has one language and one style.
  locale: p.string({ maxLength: 32 }),
  style: p.string({ maxLength: 32 }),
};

/** The authorize request of a page's parameters, or the reason it is not one. */
function authorizeRequestOf(fields: AuthorizeFields): AuthorizeRequest {
  if (!fields.client_id) throw errors.missingParameter("client_id");
  if (!fields.redirect_uri) throw errors.missingParameter("redirect_uri");
  const responseType = fields.response_type ?? "code";
  if (responseType !== "code" && responseType !== "token") {
    throw errors.oauth("unsupported_response_type", "response_type must be code or token.");
  }
  let expiration: number | undefined;
  if (fields.expiration !== undefined && fields.expiration !== "") {
    expiration = Number(fields.expiration);
    if (!Number.isInteger(expiration) || expiration < 1) {
      throw errors.invalidParameter("expiration", "must be a positive whole number of minutes");
    }
  }
  if (fields.code_challenge_method !== undefined && fields.code_challenge === undefined) {
    throw errors.missingParameter("code_challenge");
  }
  return {
    clientId: fields.client_id,
    responseType,
    redirectUri: fields.redirect_uri,
    expiration,
    codeChallenge:
      fields.code_challenge === undefined
        ? undefined
        : {
            challenge: fields.code_challenge,
            // RFC 7636 §4.3: plain when the method is not said.
            method: (fields.code_challenge_method ?? "plain") as "S256" | "plain",
          },
  };
}

/** The organization's name as the page says it. */
const portalNameOf = (name: unknown) => (typeof name === "string" && name !== "" ? name : "portico");

/** The message of a refusal, for a page. */
function messageOf(err: PorticoError): string {
  const details = err.details.filter((d) => !/^[a-z_]+$/.test(d));
  return [err.message, ...details].join(" ");
}

/** Where the cookies of the sign-in live: the oauth2 operations only. */
const cookiePath = (apiBase: string) => `${new URL(apiBase).pathname}/oauth2`;

/** The sign-in form for a request, with a new CSRF secret and its cookie. */
function formAnswer(
  fields: AuthorizeFields,
  ctx: { apiBase: string; secure: boolean; appTitle: string; portalName: string },
  extra: { username?: string | undefined; error?: string | undefined } = {},
): WebAnswer {
  const secret = newSecret();
  return new WebAnswer({
    page: signInPage({
      appTitle: ctx.appTitle,
      portalName: ctx.portalName,
      fields,
      csrfToken: secret,
      ...extra,
    }),
    csp: pageCsp(fields.redirect_uri ? redirectSource(fields.redirect_uri) : undefined),
    cookies: [
      setCookie(FORM_COOKIE, formBinding(secret, fields), {
        path: cookiePath(ctx.apiBase),
        maxAgeSeconds: 3600,
        secure: ctx.secure,
        // Sent only with the portal's own form: a post from another site carries no cookie.
        sameSite: "Strict",
      }),
    ],
  });
}

const fieldsOf = (params: Record<string, unknown>): AuthorizeFields => ({
  client_id: params.client_id as string | undefined,
  response_type: params.response_type as string | undefined,
  redirect_uri: params.redirect_uri as string | undefined,
  state: params.state as string | undefined,
  expiration: params.expiration as string | undefined,
  code_challenge: params.code_challenge as string | undefined,
  code_challenge_method: params.code_challenge_method as string | undefined,
});

const stringList = (maxItems: number, maxLength: number) =>
  p.json<string[]>({ type: "array", maxItems, items: { type: "string", maxLength } });

const redirectUris = stringList(MAX_REDIRECT_URIS, MAX_REDIRECT_URI_LENGTH);
function checkRedirectUris(uris: readonly string[] | undefined): void {
  for (const uri of uris ?? []) {
    const refusal = redirectUriRefusal(uri);
    if (refusal) throw errors.invalidParameter("redirect_uris", refusal);
  }
}

const appParams = {
  appType: p.string({ enum: APP_TYPES }),
  redirect_uris: redirectUris,
  httpReferrers: stringList(MAX_REDIRECT_URIS, MAX_REDIRECT_URI_LENGTH),
  privileges: stringList(100, 256),
};

/** OAuth 2.0 endpoints below `/sharing/rest/oauth2`. */
export const oauth2Routes = [
  defineRoute({
    name: "oauth2.revokeToken",
    oauth: true,
    methods: ["POST"],
    path: "/oauth2/revokeToken",
    auth: "none",
    params: { auth_token: p.string(), token: p.string() },
    // arcgis-rest-js sends the token to end as `auth_token`; plain scripts send `token`. A refresh
    // token or an app's token ends the same way.
    handler: async ({ params, services }) => {
      const token = params.auth_token ?? params.token;
      if (token === undefined) throw errors.missingParameter("auth_token");
      await services.auth.revoke(token);
      return ok();
    },
  }),
  defineRoute({
    name: "oauth2.authorize",
    methods: ["GET"],
    path: "/oauth2/authorize",
    auth: "none",
    params: authorizeParams,
    // The sign-in page. A request that names no registered app, or a redirect URI the app did not
    // register, is refused on the page: nothing is sent to a URI nobody vouched for.
    handler: async ({ params, services, apiBase, secure, org }) => {
      const fields = fieldsOf(params);
      try {
        const { title } = await services.oauth.checkAuthorize(authorizeRequestOf(fields));
        return formAnswer(fields, {
          apiBase,
          secure,
          appTitle: title,
          portalName: portalNameOf(org.settings.name),
        });
      } catch (err) {
        if (!(err instanceof PorticoError)) throw err;
        return new WebAnswer({ page: errorPage(messageOf(err)), csp: pageCsp() });
      }
    },
  }),
  defineRoute({
    name: "oauth2.authorize.signIn",
    methods: ["POST"],
    path: "/oauth2/authorize",
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: {
      ...authorizeParams,
      csrf_token: p.string({ maxLength: 128 }),
      username: p.string({ maxLength: 128 }),
      password: p.string({ maxLength: 1024 }),
    },
    // The form's post: the sign-in of `generateToken` (lockout, disabled accounts, the hashing
    // limiter), then a redirect with the code (or the token, in the fragment) to the app.
    handler: async ({ params, services, apiBase, secure, org, headers, requestIp }) => {
      const fields = fieldsOf(params);
      let request: AuthorizeRequest;
      let appTitle: string;
      try {
        request = authorizeRequestOf(fields);
        appTitle = (await services.oauth.checkAuthorize(request)).title;
      } catch (err) {
        if (!(err instanceof PorticoError)) throw err;
        return new WebAnswer({ page: errorPage(messageOf(err)), csp: pageCsp() });
      }
      const ctx = { apiBase, secure, appTitle, portalName: portalNameOf(org.settings.name) };
      if (!formBindingMatches(params.csrf_token ?? "", fields, cookiesOf(headers.cookie)[FORM_COOKIE])) {
        return formAnswer(fields, ctx, {
          error: "The sign-in form was not sent from this page, or it expired. Sign in again.",
        });
      }
      if (!params.username || !params.password) {
        return formAnswer(fields, ctx, {
          username: params.username,
          error: "Enter your username and password.",
        });
      }
      let granted: Awaited<ReturnType<typeof services.oauth.authorize>>;
      try {
        granted = await services.oauth.authorize(request, {
          username: params.username,
          password: params.password,
          requestIp,
        });
      } catch (err) {
        if (!(err instanceof PorticoError)) throw err;
        return formAnswer(fields, ctx, { username: params.username, error: messageOf(err) });
      }
      const path = cookiePath(apiBase);
      const cookies = [
        setCookie(FORM_COOKIE, "", { path, maxAgeSeconds: 0, secure, sameSite: "Strict" }),
        // Read by `platformSelf`, which apps call from their own origin: cross-site needs
        // SameSite=None, which browsers take only with Secure; over plain HTTP it stays Lax.
        setCookie(SESSION_COOKIE, granted.session.token, {
          path,
          maxAgeSeconds: granted.session.maxAgeSeconds,
          secure,
          sameSite: secure ? "None" : "Lax",
        }),
      ];
      const state: Record<string, string> = fields.state !== undefined ? { state: fields.state } : {};
      if ("code" in granted.answer) {
        if (request.redirectUri === OOB_REDIRECT) {
          return new WebAnswer({ page: codePage(granted.answer.code), csp: pageCsp(), cookies });
        }
        return new WebAnswer({
          location: withAnswer(request.redirectUri, { code: granted.answer.code, ...state }, "query"),
          cookies,
        });
      }
      const { access_token, expires_in, username, ssl } = granted.answer;
      return new WebAnswer({
        location: withAnswer(
          request.redirectUri,
          { access_token, expires_in: String(expires_in), username, ssl: String(ssl), ...state },
          "fragment",
        ),
        cookies,
      });
    },
  }),
  defineRoute({
    name: "oauth2.token",
    noStore: true,
    oauth: true,
    // POST only: the grants carry secrets (codes, refresh tokens, client secrets).
    methods: ["POST"],
    path: "/oauth2/token",
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: {
      grant_type: p.string({ required: true, maxLength: 64 }),
      client_id: p.string({ required: true, maxLength: 128 }),
      client_secret: p.string({ maxLength: 256 }),
      redirect_uri: p.string({ maxLength: MAX_REDIRECT_URI_LENGTH }),
      code: p.string({ maxLength: 256 }),
      code_verifier: p.string({ maxLength: 256 }),
      refresh_token: p.string({ maxLength: 256 }),
      expiration: p.integer({ min: 1 }),
    },
    handler: async ({ params, services }) =>
      services.oauth.token({
        grantType: params.grant_type,
        clientId: params.client_id,
        clientSecret: params.client_secret,
        redirectUri: params.redirect_uri,
        code: params.code,
        codeVerifier: params.code_verifier,
        refreshToken: params.refresh_token,
        expiration: params.expiration,
      }),
  }),
  defineRoute({
    name: "oauth2.exchangeToken",
    noStore: true,
    oauth: true,
    methods: ["POST"],
    path: "/oauth2/exchangeToken",
    // The token sent is what is exchanged, not the caller's credential.
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: {
      token: p.string({ required: true, maxLength: 1024 }),
      client_id: p.string({ required: true, maxLength: 128 }),
    },
    handler: async ({ params, services, headers, requestIp }) =>
      services.oauth.exchangeToken(params.token, params.client_id, {
        referer: headers.referer,
        ip: requestIp,
      }),
  }),
  defineRoute({
    name: "oauth2.validateAppAccess",
    oauth: true,
    methods: ["POST"],
    path: "/oauth2/validateAppAccess",
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: {
      token: p.string({ required: true, maxLength: 1024 }),
      client_id: p.string({ required: true, maxLength: 128 }),
    },
    handler: async ({ params, services, headers, requestIp }) =>
      services.oauth.validateAppAccess(params.token, params.client_id, {
        referer: headers.referer,
        ip: requestIp,
      }),
  }),
  defineRoute({
    name: "oauth2.platformSelf",
    noStore: true,
    oauth: true,
    methods: ["POST"],
    path: "/oauth2/platformSelf",
    // The credential is the portal's sign-in cookie, not a token.
    auth: "none",
    bodyLimit: SMALL_BODY,
    params: {},
    handler: async ({ services, headers }) => {
      const header = (name: string) => {
        const value = headers[name];
        return typeof value === "string" ? value : undefined;
      };
      const clientId = header("x-esri-auth-client-id");
      const redirectUri = header("x-esri-auth-redirect-uri");
      if (!clientId)
        throw errors.missingParameter(
          "X-Esri-Auth-Client-Id",
          "The header X-Esri-Auth-Client-Id is required.",
        );
      if (!redirectUri) {
        throw errors.missingParameter(
          "X-Esri-Auth-Redirect-Uri",
          "The header X-Esri-Auth-Redirect-Uri is required.",
        );
      }
      return services.oauth.platformSelf({
        sessionToken: cookiesOf(headers.cookie)[SESSION_COOKIE],
        clientId,
        redirectUri,
        origin: header("origin"),
      });
    },
  }),
  defineRoute({
    name: "oauth2.registerApp",
    noStore: true,
    methods: ["POST"],
    path: "/oauth2/registerApp",
    auth: "required",
    privilege: "portal:user:createItem",
    bodyLimit: APP_BODY,
    params: {
      itemId: p.string({ required: true, maxLength: 64 }),
      ...appParams,
      appType: p.string({ required: true, enum: APP_TYPES }),
      redirect_uris: { ...redirectUris, required: true as const },
    },
    check: (params) => checkRedirectUris(params.redirect_uris),
    handler: async ({ params, caller, services }) =>
      services.apps.register(caller, params.itemId, {
        appType: params.appType as (typeof APP_TYPES)[number],
        redirectUris: params.redirect_uris,
        httpReferrers: params.httpReferrers ?? [],
        privileges: params.privileges ?? [],
      }),
  }),
  defineRoute({
    name: "oauth2.apps.get",
    methods: ["GET", "POST"],
    path: "/oauth2/apps/:clientId",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.apps.get(caller, path.clientId),
  }),
  defineRoute({
    name: "oauth2.apps.update",
    methods: ["POST"],
    path: "/oauth2/apps/:clientId/update",
    auth: "required",
    bodyLimit: APP_BODY,
    params: appParams,
    check: (params) => checkRedirectUris(params.redirect_uris),
    handler: async ({ params, path, caller, services }) =>
      services.apps.update(caller, path.clientId, {
        ...(params.appType !== undefined ? { appType: params.appType as (typeof APP_TYPES)[number] } : {}),
        ...(params.redirect_uris !== undefined ? { redirectUris: params.redirect_uris } : {}),
        ...(params.httpReferrers !== undefined ? { httpReferrers: params.httpReferrers } : {}),
        ...(params.privileges !== undefined ? { privileges: params.privileges } : {}),
      }),
  }),
  defineRoute({
    name: "oauth2.apps.unregister",
    methods: ["POST"],
    path: "/oauth2/apps/:clientId/unregister",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => ok(await services.apps.unregister(caller, path.clientId)),
  }),
];
