import { SERVER_VERSION } from "../../features/service-definition.js";
import { defineRoute } from "../pipeline.js";
import { owningSystemUrl } from "../urls.js";

/**
 * The ArcGIS Server root, `/rest`: its `info`, which Esri's clients ask before exchanging a portal
 * token for a server token.
 */
export const restRoutes = [
  defineRoute({
    name: "server.info",
    methods: ["GET", "POST"],
    path: "/info",
    root: "server",
    auth: "none",
    params: {},
    handler: async ({ apiBase }) => ({
      currentVersion: SERVER_VERSION,
      owningSystemUrl: owningSystemUrl(apiBase),
      authInfo: { isTokenBasedSecurity: true, tokenServicesUrl: `${apiBase}/generateToken` },
    }),
  }),
];
