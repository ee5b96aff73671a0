import { AuthService } from "./auth/auth.service.js";
import { ItemService } from "./content/item.service.js";
import type { Db } from "./db/database.js";
import { PortalService } from "./portal/portal.service.js";
import { RoleService } from "./roles/role.service.js";
import { UserService } from "./users/user.service.js";

/** The domain services of one process. Built once at start-up; no container, no globals. */
export interface Services {
  db: Db;
  portal: PortalService;
  auth: AuthService;
  users: UserService;
  roles: RoleService;
  items: ItemService;
}

export function createServices(db: Db): Services {
  const portal = new PortalService(db);
  return {
    db,
    portal,
    auth: new AuthService(db, portal),
    users: new UserService(db, portal),
    roles: new RoleService(db),
    items: new ItemService(db, portal),
  };
}
