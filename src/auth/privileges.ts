/**
 * The privilege strings of the ArcGIS role model (`wire.md` §4). Built-in roles carry fixed sets;
 * custom roles carry any subset of `ALL_PRIVILEGES`. Operations name the privilege they need.
 */
export const ADMIN_PRIVILEGES = [
  "portal:admin:viewUsers",
  "portal:admin:updateUsers",
  "portal:admin:deleteUsers",
  "portal:admin:inviteUsers",
  "portal:admin:disableUsers",
  "portal:admin:changeUserRoles",
  "portal:admin:manageLicenses",
  "portal:admin:reassignUsers",
  "portal:admin:viewGroups",
  "portal:admin:updateGroups",
  "portal:admin:deleteGroups",
  "portal:admin:reassignGroups",
  "portal:admin:assignToGroups",
  "portal:admin:manageEnterpriseGroups",
  "portal:admin:createUpdateCapableGroup",
  "portal:admin:viewItems",
  "portal:admin:updateItems",
  "portal:admin:deleteItems",
  "portal:admin:reassignItems",
  "portal:admin:shareToGroup",
  "portal:admin:shareToOrg",
  "portal:admin:shareToPublic",
  "portal:admin:categorizeItems",
  "portal:admin:manageSecurity",
  "portal:admin:manageWebsite",
  "portal:admin:manageUtilityServices",
  "portal:admin:manageServers",
  "portal:admin:manageRoles",
  "portal:admin:manageCollaborations",
  "portal:admin:manageWebhooks",
  "portal:admin:createGPWebhook",
  "portal:admin:updateItemCategorySchema",
  "portal:admin:updateMemberCategorySchema",
  "portal:admin:updateItemClassificationSchema",
  "portal:admin:createLeavingDisallowedGroup",
  "portal:admin:createReports",
  "portal:admin:manageCredits",
] as const;

export const PUBLISHER_PRIVILEGES = [
  "portal:publisher:publishFeatures",
  "portal:publisher:publishTiles",
  "portal:publisher:publishScenes",
  "portal:publisher:publishVectorTiles",
  "portal:publisher:publishServerServices",
  "portal:publisher:publishServerGPServices",
  "portal:publisher:publishDynamicImagery",
  "portal:publisher:publishTiledImagery",
  "portal:publisher:publishKnowledgeGraph",
  "portal:publisher:registerDataStores",
  "portal:publisher:bulkPublishFromDataStores",
  "premium:publisher:geoanalytics",
  "premium:publisher:rasteranalysis",
] as const;

export const USER_PRIVILEGES = [
  "portal:user:createGroup",
  "portal:user:joinGroup",
  "portal:user:joinNonOrgGroup",
  "portal:user:viewOrgGroups",
  "portal:user:viewOrgItems",
  "portal:user:viewOrgUsers",
  "portal:user:createItem",
  "portal:user:shareToGroup",
  "portal:user:shareToOrg",
  "portal:user:shareToPublic",
  "portal:user:shareGroupToOrg",
  "portal:user:shareGroupToPublic",
  "portal:user:viewHostedFeatureServices",
  "portal:user:viewHostedTileServices",
  "portal:user:viewTracks",
  "portal:user:addExternalMembersToGroup",
  "portal:user:categorizeItems",
  "portal:user:receiveNotifications",
  "portal:user:reassignItems",
  "portal:user:receiveItems",
  "features:user:edit",
  "features:user:fullEdit",
  "premium:user:geocode",
  "premium:user:networkanalysis",
  "premium:user:spatialanalysis",
  "premium:user:demographics",
  "premium:user:elevation",
  "premium:user:geoenrichment",
  "premium:user:featurereport",
] as const;

export type Privilege =
  | (typeof ADMIN_PRIVILEGES)[number]
  | (typeof PUBLISHER_PRIVILEGES)[number]
  | (typeof USER_PRIVILEGES)[number];

export const ALL_PRIVILEGES: readonly Privilege[] = [
  ...USER_PRIVILEGES,
  ...PUBLISHER_PRIVILEGES,
  ...ADMIN_PRIVILEGES,
];
const KNOWN = new Set<string>(ALL_PRIVILEGES);

export function isPrivilege(value: string): value is Privilege {
  return KNOWN.has(value);
}

export const BUILT_IN_ROLES = ["org_admin", "org_publisher", "org_user"] as const;
export type BuiltInRole = (typeof BUILT_IN_ROLES)[number];

export function isBuiltInRole(value: string): value is BuiltInRole {
  return (BUILT_IN_ROLES as readonly string[]).includes(value);
}

/** The User role: everything of a member but full editing, analysis, and receiving reassigned items. */
const USER_DEFAULT: readonly Privilege[] = USER_PRIVILEGES.filter(
  (p) =>
    p !== "features:user:fullEdit" &&
    p !== "premium:user:spatialanalysis" &&
    p !== "premium:user:featurereport" &&
    p !== "premium:user:geoenrichment",
);

export const BUILT_IN_PRIVILEGES: Record<BuiltInRole, readonly Privilege[]> = {
  org_user: USER_DEFAULT,
  org_publisher: [...USER_PRIVILEGES, ...PUBLISHER_PRIVILEGES],
  org_admin: ALL_PRIVILEGES,
};

/**
 * The built-in role a custom role reports as `role` (ArcGIS semantics): administrative privileges
 * make it derive from org_admin, publishing privileges from org_publisher, anything else org_user.
 */
export function baseRoleOf(privileges: readonly string[]): BuiltInRole {
  if (privileges.some((p) => p.startsWith("portal:admin:"))) return "org_admin";
  if (privileges.some((p) => p.startsWith("portal:publisher:") || p.startsWith("premium:publisher:"))) {
    return "org_publisher";
  }
  return "org_user";
}
