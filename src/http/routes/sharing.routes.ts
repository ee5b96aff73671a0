import { errors } from "../../errors.js";
import { REST_VERSION } from "../../portal/portal.service.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";
import { owningSystemUrl } from "../urls.js";

/** The API root itself and its single-segment resources: `/`, `/info`, `/generateToken`. */
export const sharingRoutes = [
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
      owningSystemUrl: owningSystemUrl(apiBase),
      currentVersion: REST_VERSION,
      authInfo: { tokenServicesUrl: `${apiBase}/generateToken`, isTokenBasedSecurity: true },
    }),
  }),
  defineRoute({
    name: "generateToken",
    noStore: true,
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
        return services.auth.serverToken({
          serverUrl: params.serverUrl,
          token: params.token,
          owningSystemUrl: owningSystemUrl(apiBase),
          presenter: { referer, ip: requestIp },
          ssl: org.settings.allSSL === true,
        });
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
];
