import { errors } from "../../errors.js";
import { REST_VERSION } from "../../portal/portal.service.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

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
      username: p.string({ required: true, maxLength: 128 }),
      password: p.string({ required: true, maxLength: 1024 }),
      client: p.string({ enum: ["referer", "ip", "requestip"] }),
      referer: p.string({ maxLength: 2048 }),
      ip: p.string({ maxLength: 64 }),
      expiration: p.integer({ min: 1 }),
    },
    handler: async ({ params, services, requestIp }) => {
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
