import type { RouteDef } from "../../../src/http/pipeline.js";
import { communityGroupsRoutes } from "../../../src/http/routes/community-groups.routes.js";
import { communityUsersRoutes } from "../../../src/http/routes/community-users.routes.js";
import { contentGroupsRoutes } from "../../../src/http/routes/content-groups.routes.js";
import { contentItemsRoutes } from "../../../src/http/routes/content-items.routes.js";
import { contentUsersRoutes } from "../../../src/http/routes/content-users.routes.js";
import { directoryRoutes } from "../../../src/http/routes/directory.routes.js";
import { oauth2Routes } from "../../../src/http/routes/oauth2.routes.js";
import { portaladminRoutes } from "../../../src/http/routes/portaladmin.routes.js";
import { portalsRoutes } from "../../../src/http/routes/portals.routes.js";
import { portalsCollaborationsRoutes } from "../../../src/http/routes/portals-collaborations.routes.js";
import { portalsCollaborationsWorkspacesRoutes } from "../../../src/http/routes/portals-collaborations-workspaces.routes.js";
import { portalsRolesRoutes } from "../../../src/http/routes/portals-roles.routes.js";
import { portalsWebhooksRoutes } from "../../../src/http/routes/portals-webhooks.routes.js";
import { porticoRoutes } from "../../../src/http/routes/portico.routes.js";
import { restRoutes } from "../../../src/http/routes/rest.routes.js";
import { restAdminServicesRoutes } from "../../../src/http/routes/rest-admin-services.routes.js";
import { restServicesRoutes } from "../../../src/http/routes/rest-services.routes.js";
import { restServicesAttachmentsRoutes } from "../../../src/http/routes/rest-services-attachments.routes.js";
import { searchRoutes } from "../../../src/http/routes/search.routes.js";
import { sharingRoutes } from "../../../src/http/routes/sharing.routes.js";

export type FuzzArea = "content" | "community" | "portal" | "collaborations" | "services";

/**
 * The route files (`src/http/routes/`) each test file of this folder fuzzes, so that the areas run
 * side by side. A route joins its area with its file; a new route file must be given an area, or
 * `areas.test.ts` fails naming its routes.
 *
 * Each area is fuzzed on a portal of its own, so its requests meet the writes of its own routes
 * and the fixtures, not those of other areas: routes that act on the same things share an area
 * (the peer endpoint, `portico.routes.ts`, goes with the collaborations it serves; sign-in,
 * `sharing.routes.ts` and `oauth2.routes.ts`, with the organization whose policy it follows). The
 * areas are also about as long to fuzz.
 */
export const FUZZ_AREAS: Readonly<Record<FuzzArea, readonly (readonly RouteDef[])[]>> = {
  content: [contentItemsRoutes, contentUsersRoutes, contentGroupsRoutes, searchRoutes],
  community: [communityGroupsRoutes, communityUsersRoutes],
  portal: [
    sharingRoutes,
    directoryRoutes,
    oauth2Routes,
    portalsRoutes,
    portalsRolesRoutes,
    portalsWebhooksRoutes,
    portaladminRoutes,
    restRoutes,
  ],
  collaborations: [portalsCollaborationsRoutes, portalsCollaborationsWorkspacesRoutes, porticoRoutes],
  services: [restServicesRoutes, restServicesAttachmentsRoutes, restAdminServicesRoutes],
};

/** The routes of an area, in the order of their files. */
export const areaRoutes = (area: FuzzArea): readonly RouteDef[] => FUZZ_AREAS[area].flat();
