import type { RouteDef } from "../pipeline.js";
import { communityGroupsRoutes } from "./community-groups.routes.js";
import { communityUsersRoutes } from "./community-users.routes.js";
import { contentGroupsRoutes } from "./content-groups.routes.js";
import { contentItemsRoutes } from "./content-items.routes.js";
import { contentUsersRoutes } from "./content-users.routes.js";
import { directoryRoutes } from "./directory.routes.js";
import { oauth2Routes } from "./oauth2.routes.js";
import { portaladminRoutes } from "./portaladmin.routes.js";
import { portalsRoutes } from "./portals.routes.js";
import { portalsCollaborationsRoutes } from "./portals-collaborations.routes.js";
import { portalsCollaborationsWorkspacesRoutes } from "./portals-collaborations-workspaces.routes.js";
import { portalsRolesRoutes } from "./portals-roles.routes.js";
import { portalsWebhooksRoutes } from "./portals-webhooks.routes.js";
import { porticoRoutes } from "./portico.routes.js";
import { restRoutes } from "./rest.routes.js";
import { restAdminServicesRoutes } from "./rest-admin-services.routes.js";
import { restServicesRoutes } from "./rest-services.routes.js";
import { restServicesAttachmentsRoutes } from "./rest-services-attachments.routes.js";
import { searchRoutes } from "./search.routes.js";
import { sharingRoutes } from "./sharing.routes.js";

/**
 * Every endpoint, one file per area of the URL: `routeFileOf` (route-files.ts) names the file of
 * any URL, and docs/routes.md lists every route with its file. Fastify routes by the URL alone
 * (static segments before parameters), so the order here changes nothing.
 */
export const allRoutes = [
  ...sharingRoutes,
  ...directoryRoutes,
  ...oauth2Routes,
  ...searchRoutes,
  ...communityGroupsRoutes,
  ...communityUsersRoutes,
  ...contentItemsRoutes,
  ...contentUsersRoutes,
  ...contentGroupsRoutes,
  ...portalsRoutes,
  ...portalsRolesRoutes,
  ...portalsWebhooksRoutes,
  ...portalsCollaborationsRoutes,
  ...portalsCollaborationsWorkspacesRoutes,
  ...porticoRoutes,
  ...restRoutes,
  ...restServicesRoutes,
  ...restServicesAttachmentsRoutes,
  ...restAdminServicesRoutes,
  ...portaladminRoutes,
] satisfies readonly RouteDef[];
