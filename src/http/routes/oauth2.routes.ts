import { errors } from "../../errors.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";

/** OAuth 2.0 endpoints below `/sharing/rest/oauth2`. */
export const oauth2Routes = [
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
      return ok();
    },
  }),
];
