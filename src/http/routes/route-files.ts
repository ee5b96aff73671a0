import type { RouteDef } from "../pipeline.js";

/** The API root a route answers below (`RouteDef.root`, absent for `/sharing/rest`). */
export type ApiRoot = NonNullable<RouteDef["root"]>;

/**
 * Which file of `src/http/routes/` holds an endpoint, as a table of URL prefixes: the longest
 * prefix that matches the path below the API root names the file. A prefix is whole segments;
 * a `:name` segment in it stands for any one segment (an id in a URL, a parameter in a template).
 * The empty prefix of each root catches what no longer one does (`/sharing/rest/info`).
 *
 * ArcGIS names some operations that create or accept a thing beside its collection
 * (`/community/createGroup`, `/portals/<id>/createRole`); they have their prefix here and live
 * with the collection.
 */
export const ROUTE_FILE_PREFIXES: readonly { root: ApiRoot; prefix: string; file: string }[] = [
  { root: "sharing", prefix: "", file: "sharing.routes.ts" },
  { root: "sharing", prefix: "/oauth2", file: "oauth2.routes.ts" },
  { root: "sharing", prefix: "/login", file: "directory.routes.ts" },
  { root: "sharing", prefix: "/logout", file: "directory.routes.ts" },
  { root: "sharing", prefix: "/search", file: "search.routes.ts" },
  { root: "sharing", prefix: "/community/groups", file: "community-groups.routes.ts" },
  { root: "sharing", prefix: "/community/createGroup", file: "community-groups.routes.ts" },
  { root: "sharing", prefix: "/community/users", file: "community-users.routes.ts" },
  { root: "sharing", prefix: "/community/self", file: "community-users.routes.ts" },
  { root: "sharing", prefix: "/content/items", file: "content-items.routes.ts" },
  { root: "sharing", prefix: "/content/users", file: "content-users.routes.ts" },
  { root: "sharing", prefix: "/content/groups", file: "content-groups.routes.ts" },
  { root: "sharing", prefix: "/portals", file: "portals.routes.ts" },
  { root: "sharing", prefix: "/portals/:portalId/roles", file: "portals-roles.routes.ts" },
  { root: "sharing", prefix: "/portals/:portalId/createRole", file: "portals-roles.routes.ts" },
  { root: "sharing", prefix: "/portals/:portalId/webhooks", file: "portals-webhooks.routes.ts" },
  { root: "sharing", prefix: "/portals/:portalId/collaborations", file: "portals-collaborations.routes.ts" },
  {
    root: "sharing",
    prefix: "/portals/:portalId/collaborations/:collaborationId/workspaces",
    file: "portals-collaborations-workspaces.routes.ts",
  },
  {
    root: "sharing",
    prefix: "/portals/:portalId/collaborations/:collaborationId/addWorkspace",
    file: "portals-collaborations-workspaces.routes.ts",
  },
  {
    root: "sharing",
    prefix: "/portals/:portalId/createCollaboration",
    file: "portals-collaborations.routes.ts",
  },
  {
    root: "sharing",
    prefix: "/portals/:portalId/validateCollaborationInvitation",
    file: "portals-collaborations.routes.ts",
  },
  {
    root: "sharing",
    prefix: "/portals/:portalId/acceptCollaborationInvitation",
    file: "portals-collaborations.routes.ts",
  },
  { root: "sharing", prefix: "/portico", file: "portico.routes.ts" },
  { root: "server", prefix: "", file: "rest.routes.ts" },
  { root: "server", prefix: "/services", file: "rest-services.routes.ts" },
  {
    root: "server",
    prefix: "/services/:name/FeatureServer/:layerId/:objectId/attachments",
    file: "rest-services-attachments.routes.ts",
  },
  {
    root: "server",
    prefix: "/services/:name/FeatureServer/:layerId/:objectId/addAttachment",
    file: "rest-services-attachments.routes.ts",
  },
  {
    root: "server",
    prefix: "/services/:name/FeatureServer/:layerId/:objectId/updateAttachment",
    file: "rest-services-attachments.routes.ts",
  },
  {
    root: "server",
    prefix: "/services/:name/FeatureServer/:layerId/:objectId/deleteAttachments",
    file: "rest-services-attachments.routes.ts",
  },
  { root: "server", prefix: "/admin/services", file: "rest-admin-services.routes.ts" },
  { root: "portaladmin", prefix: "", file: "portaladmin.routes.ts" },
];

/**
 * The segments of a path. Empty ones are dropped and case is folded, as the server routes
 * (`ignoreTrailingSlash`, `ignoreDuplicateSlashes`, `caseSensitive: false`).
 */
const segments = (path: string) =>
  path
    .split("/")
    .filter((s) => s !== "")
    .map((s) => s.toLowerCase());

const PREFIXES = ROUTE_FILE_PREFIXES.map((rule) => ({ ...rule, segments: segments(rule.prefix) }));

/**
 * The file of `src/http/routes/` that holds the endpoint at `path` below `root`. `path` is a
 * route's template (`/community/groups/:groupId/invite`) or a URL's path below the API root
 * (`/community/groups/3f1a.../invite`).
 */
export function routeFileOf(root: ApiRoot, path: string): string {
  const parts = segments(path);
  let best: { file: string; length: number } | undefined;
  for (const rule of PREFIXES) {
    if (rule.root !== root || rule.segments.length > parts.length) continue;
    const matches = rule.segments.every((s, i) => s.startsWith(":") || s === parts[i]);
    if (matches && (!best || rule.segments.length > best.length))
      best = { file: rule.file, length: rule.segments.length };
  }
  // Unreachable while every root has its empty prefix, which the unit test checks.
  if (!best) throw new Error(`no route file for ${root} ${path}`);
  return best.file;
}
