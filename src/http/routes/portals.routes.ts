import { requirePrivilege } from "../../auth/caller.js";
import {
  LOCKOUT_RULE_RANGES,
  LOCKOUT_RULES,
  type LockoutPolicy,
  PASSWORD_RULE_RANGES,
  PASSWORD_RULES,
  type PasswordPolicy,
  policyChanges,
  securityPolicyJson,
} from "../../auth/security-policy.js";
import { COLLABORATION_PRIVILEGE } from "../../collaboration/collaboration-types.js";
import { errors } from "../../errors.js";
import {
  isSettingName,
  ORG_SETTINGS,
  privilegesFor,
  SETTING_NAMES,
  type SettingName,
} from "../../portal/org-settings.js";
import { cachedPortalView, portalSettingsView } from "../../portal/portal.service.js";
import { MAX_QUERY_LENGTH } from "../../search/query.js";
import { USER_SEARCH_SORT_FIELDS } from "../../search/search.service.js";
import { MAX_NOTIFICATION_RECIPIENTS } from "../../users/notification.service.js";
import { USER_SORT_FIELDS } from "../../users/user.repository.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { type ParamSpec, p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { portalHostname } from "../urls.js";
import { notificationParams, searchParams, searchRequest } from "./shared.js";

const settingSpecs = Object.fromEntries(
  SETTING_NAMES.map((name) => [name, ORG_SETTINGS[name].spec]),
) as Record<SettingName, ParamSpec<unknown, false>>;

/** `securityPolicy/update`: ArcGIS's password rules and portico's lockout rules, each an integer in range. */
const securityPolicySpecs = Object.fromEntries([
  ...PASSWORD_RULES.map((rule) => [rule, p.integer(PASSWORD_RULE_RANGES[rule])]),
  ...LOCKOUT_RULES.map((rule) => [rule, p.integer(LOCKOUT_RULE_RANGES[rule])]),
]) as Record<keyof PasswordPolicy | keyof LockoutPolicy, ParamSpec<number, false>>;

/** The collaboration key operations take a flag or a fingerprint. */
const KEY_BODY_LIMIT = 16 * 1024;

export const portalsRoutes = [
  defineRoute({
    name: "portals.get",
    methods: ["GET", "POST"],
    path: "/portals/:portalId",
    auth: "optional",
    params: {},
    handler: async ({ caller, services, org, apiBase }) =>
      cachedPortalView(org, caller ? await services.users.self(caller) : undefined, portalHostname(apiBase)),
  }),
  defineRoute({
    name: "portals.update",
    methods: ["POST"],
    path: "/portals/:portalId/update",
    auth: "required",
    // Lists of up to 1,000 URLs each (allowedExternalLinks, authorizedCrossOriginDomains, ...) and
    // portalProperties, the home page's configuration.
    bodyLimit: 8 * 1024 * 1024,
    params: { ...settingSpecs, clearEmptyFields: p.boolean() },
    authorize: (caller, raw) => {
      const clearing = raw.clearEmptyFields?.toLowerCase() === "true";
      const touched = Object.keys(raw).filter(
        (name): name is SettingName => isSettingName(name) && (raw[name] !== "" || clearing),
      );
      for (const privilege of privilegesFor(touched)) requirePrivilege(caller, privilege);
    },
    handler: async ({ params, empty, caller, services, secure }) => {
      const changes: Record<string, unknown> = {};
      for (const name of SETTING_NAMES) if (params[name] !== undefined) changes[name] = params[name];
      const { orgId } = await services.portal.update(caller, {
        changes,
        empty: SETTING_NAMES.filter((name) => empty.has(name)),
        clearEmptyFields: params.clearEmptyFields === true,
        secure,
      });
      return ok({ orgId });
    },
  }),
  defineRoute({
    name: "portals.updateUserRole",
    methods: ["POST"],
    path: "/portals/:portalId/updateUserRole",
    auth: "required",
    privilege: "portal:admin:changeUserRoles",
    params: {
      user: p.string({ required: true, maxLength: 128 }),
      role: p.string({ required: true, maxLength: 128 }),
    },
    handler: async ({ params, caller, services }) => {
      await services.users.updateRole(caller, params.user, params.role);
      return ok();
    },
  }),
  defineRoute({
    name: "portals.users",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/users",
    auth: "required",
    privilege: "portal:admin:viewUsers",
    params: {
      ...pagingParams,
      sortField: p.string({ enum: Object.keys(USER_SORT_FIELDS), caseInsensitive: true }),
      sortOrder: p.string({ enum: ["asc", "desc"], caseInsensitive: true }),
    },
    handler: async ({ params, caller, services }) => {
      return services.users.list(caller, {
        ...pageOf(params),
        sortField: (params.sortField ?? "username") as keyof typeof USER_SORT_FIELDS,
        sortOrder: params.sortOrder ?? "asc",
      });
    },
  }),
  defineRoute({
    name: "portals.securityPolicy",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/securityPolicy",
    // Members read it too: they need the rules to choose a password they are allowed to set.
    auth: "required",
    params: {},
    handler: async ({ org }) => securityPolicyJson(org.securityPolicy),
  }),
  defineRoute({
    name: "portals.securityPolicy.update",
    methods: ["POST"],
    path: "/portals/:portalId/securityPolicy/update",
    auth: "required",
    privilege: "portal:admin:manageSecurity",
    params: securityPolicySpecs,
    handler: async ({ params, empty, caller, services }) => {
      await services.portal.updateSecurityPolicy(caller, policyChanges(params, empty));
      return ok();
    },
  }),
  defineRoute({
    name: "portals.securityPolicy.reset",
    methods: ["POST"],
    path: "/portals/:portalId/securityPolicy/reset",
    auth: "required",
    privilege: "portal:admin:manageSecurity",
    params: {},
    handler: async ({ caller, services }) => {
      await services.portal.resetSecurityPolicy(caller);
      return ok();
    },
  }),
  defineRoute({
    name: "portals.users.search",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/users/search",
    auth: "required",
    privilege: "portal:admin:viewUsers",
    params: { ...searchParams(USER_SEARCH_SORT_FIELDS), filter: p.string({ maxLength: MAX_QUERY_LENGTH }) },
    handler: async ({ params, caller, services }) =>
      services.search.searchUsers(caller, { ...searchRequest(params), filter: params.filter }, "org"),
  }),
  defineRoute({
    name: "portals.settings",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/settings",
    // What a sign-in page needs is read before signing in, as `portals/self` is.
    auth: "optional",
    params: {},
    handler: async ({ caller, org }) => portalSettingsView(org, caller !== null),
  }),
  defineRoute({
    name: "portals.isServiceNameAvailable",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/isServiceNameAvailable",
    auth: "required",
    privilege: "portal:publisher:publishFeatures",
    params: {
      name: p.string({ required: true, maxLength: 256 }),
      type: p.string({ required: true, enum: ["Feature Service", "Map Service"], caseInsensitive: true }),
    },
    handler: async ({ params, caller, services }) => ({
      available: await services.featureServices.nameAvailable(caller, params.name, params.type),
    }),
  }),
  defineRoute({
    name: "portals.createNotification",
    methods: ["POST"],
    path: "/portals/:portalId/createNotification",
    auth: "required",
    privilege: "portal:admin:viewUsers",
    params: notificationParams(MAX_NOTIFICATION_RECIPIENTS),
    handler: async ({ params, caller, services }) => {
      if (!params.users || params.users.length === 0) throw errors.missingParameter("users");
      await services.notifications.notifyMembers(caller, params.users, {
        type: "org_notification",
        subject: params.subject ?? "",
        message: params.message,
        data: { fromUser: caller.username },
      });
      return ok();
    },
  }),
  // This portal's signing key (`collaboration/key.service.ts`); portico's own, ArcGIS has no such
  // operation. Small bodies: a flag, a fingerprint.
  defineRoute({
    name: "collaborations.key",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/collaborationKey",
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    bodyLimit: KEY_BODY_LIMIT,
    params: {},
    handler: async ({ caller, services }) => ok(await services.collaborationKeys.show(caller)),
  }),
  defineRoute({
    name: "collaborations.key.rotate",
    methods: ["POST"],
    path: "/portals/:portalId/collaborationKey/rotate",
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    bodyLimit: KEY_BODY_LIMIT,
    params: { revokePrevious: p.boolean() },
    handler: async ({ params, caller, services }) =>
      ok(await services.collaborationKeys.rotate(caller, params.revokePrevious ?? false)),
  }),
  defineRoute({
    name: "collaborations.key.revoke",
    methods: ["POST"],
    path: "/portals/:portalId/collaborationKey/revoke",
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    bodyLimit: KEY_BODY_LIMIT,
    params: {
      keyFingerprint: p.string({ required: true, pattern: /^[0-9a-f]{2}(:[0-9a-f]{2}){15}$/ }),
    },
    handler: async ({ params, caller, services }) =>
      ok(await services.collaborationKeys.revoke(caller, params.keyFingerprint)),
  }),
];
