import { AuthService } from "./auth/auth.service.js";
import { CommentService } from "./content/comment.service.js";
import { ItemService } from "./content/item.service.js";
import { SharingService } from "./content/sharing.service.js";
import type { Db } from "./db/database.js";
import { FeatureServiceService } from "./features/feature-service.service.js";
import { GroupService } from "./groups/group.service.js";
import { PortalService } from "./portal/portal.service.js";
import { RoleService } from "./roles/role.service.js";
import { SearchService } from "./search/search.service.js";
import { UserService } from "./users/user.service.js";
import { WebhookService } from "./webhooks/webhook.service.js";

/** The domain services of one process. Built once at start-up; no container, no globals. */
export interface Services {
  db: Db;
  portal: PortalService;
  auth: AuthService;
  users: UserService;
  roles: RoleService;
  items: ItemService;
  sharing: SharingService;
  comments: CommentService;
  search: SearchService;
  groups: GroupService;
  featureServices: FeatureServiceService;
  webhooks: WebhookService;
}

export function createServices(db: Db): Services {
  const portal = new PortalService(db);
  const items = new ItemService(db, portal);
  return {
    db,
    portal,
    auth: new AuthService(db, portal),
    users: new UserService(db, portal),
    roles: new RoleService(db),
    items,
    sharing: new SharingService(db, portal, items),
    comments: new CommentService(db, portal, items),
    search: new SearchService(db, portal, items),
    groups: new GroupService(db, portal, items),
    featureServices: new FeatureServiceService(db, items),
    webhooks: new WebhookService(db, portal),
  };
}
