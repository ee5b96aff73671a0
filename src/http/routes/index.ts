import type { RouteDef } from "../pipeline.js";
import { authRoutes } from "./auth.routes.js";
import { collaborationRoutes } from "./collaboration.routes.js";
import { contentRoutes } from "./content.routes.js";
import { featureAttachmentRoutes } from "./feature-attachments.routes.js";
import { featureServerRoutes } from "./feature-server.routes.js";
import { groupRoutes } from "./group.routes.js";
import { portalRoutes } from "./portal.routes.js";
import { roleRoutes } from "./role.routes.js";
import { searchRoutes } from "./search.routes.js";
import { userRoutes } from "./user.routes.js";
import { webhookRoutes } from "./webhook.routes.js";

/** Every endpoint, grouped by area; the file name follows the first segment of the URL. */
export const allRoutes = [
  ...authRoutes,
  ...portalRoutes,
  ...roleRoutes,
  ...userRoutes,
  ...contentRoutes,
  ...searchRoutes,
  ...groupRoutes,
  ...featureServerRoutes,
  ...featureAttachmentRoutes,
  ...webhookRoutes,
  ...collaborationRoutes,
] satisfies readonly RouteDef[];
