import type { Presenter } from "../../auth/token-binding.js";
import { errors } from "../../errors.js";
import { REST_VERSION } from "../../portal/portal.service.js";
import type { Services } from "../../services.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";
import { owningSystemUrl } from "./feature-server.routes.js";

/**
 * A token for a server this portal owns (`/rest/services`), as Esri's clients ask for it: the portal
 * token and the server's URL. The hosted services share the portal's tokens, so the answer is the
 * same token with its own expiry; a server elsewhere gets nothing.
 */
async function serverToken(
  services: Services,
  apiBase: string,
  serverUrl: string,
  token: string,
  presenter: Presenter,
  ssl: boolean,
) {
  const owner = owningSystemUrl(apiBase).replace(/\/+$/, "").toLowerCase();
  const server = serverUrl.replace(/\/+$/, "").toLowerCase();
  if (server !== owner && !server.startsWith(`${owner}/`)) {
    throw errors.invalidParameter(
      "serverUrl",
      `must be a server of this portal (${owningSystemUrl(apiBase)})`,
    );
  }
  // The token must be one this request may present (its referer or address binding).
  const { expires } = await services.auth.presentedSession(token, presenter);
  return { token, expires, ssl };
}

export const authRoutes = [
  defineRoute({
    name: "root",
    methods: ["GET", "POST"],
    path: "/",
    auth: "none",
    params: {},
    handler: async () => ({ currentVersion: REST_VERSION }),
  }),
  defineRoute({
    name: "info",
    methods: ["GET", "POST"],
    path: "/info",
    auth: "none",
    params: {},
    handler: async ({ apiBase }) => ({
      owningSystemUrl: apiBase.replace(/\/sharing\/rest$/, ""),
      currentVersion: REST_VERSION,
      authInfo: { tokenServicesUrl: `${apiBase}/generateToken`, isTokenBasedSecurity: true },
    }),
  }),
  defineRoute({
    name: "generateToken",
    // POST only: a GET would put the password in URLs, proxies and access logs.
    methods: ["POST"],
    path: "/generateToken",
    auth: "none",
    params: {
      // Required unless a portal token is exchanged for a server token (`serverUrl` and `token`).
      username: p.string({ maxLength: 128 }),
      password: p.string({ maxLength: 1024 }),
      client: p.string({ enum: ["referer", "ip", "requestip"] }),
      referer: p.string({ maxLength: 2048 }),
      ip: p.string({ maxLength: 64 }),
      expiration: p.integer({ min: 1 }),
      serverUrl: p.string({ maxLength: 2048 }),
      token: p.string({ maxLength: 1024 }),
      // portico: sets a new password while signing in, the way to change an expired one.
      newPassword: p.string({ minLength: 8, maxLength: 1024 }),
    },
    handler: async ({ params, services, requestIp, referer, apiBase, org }) => {
      if (
        params.serverUrl !== undefined &&
        params.token !== undefined &&
        params.username === undefined &&
        params.password === undefined
      ) {
        return serverToken(
          services,
          apiBase,
          params.serverUrl,
          params.token,
          { referer, ip: requestIp },
          org.settings.allSSL === true,
        );
      }
      if (params.username === undefined) throw errors.missingParameter("username");
      if (params.password === undefined) throw errors.missingParameter("password");
      const client = (params.client ?? (params.referer ? "referer" : "requestip")) as
        | "referer"
        | "ip"
        | "requestip";
      return services.auth.generateToken({
        username: params.username,
        password: params.password,
        client,
        referer: params.referer,
        ip: params.ip,
        expiration: params.expiration,
        requestIp,
        newPassword: params.newPassword,
      });
    },
  }),
  defineRoute({
    name: "oauth2.revokeToken",
    methods: ["POST"],
    path: "/oauth2/revokeToken",
    auth: "none",
    params: { auth_token: p.string(), token: p.string() },
    // arcgis-rest-js sends the token to end as `auth_token`; plain scripts send `token`.
    handler: async ({ params, services }) => {
      const token = params.auth_token ?? params.token;
      if (token === undefined) throw errors.missingParameter("auth_token");
      await services.auth.revoke(token);
      return { success: true };
    },
  }),
];
