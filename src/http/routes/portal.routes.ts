import { requirePrivilege } from "../../auth/caller.js";
import {
  isSettingName,
  ORG_SETTINGS,
  privilegesFor,
  SETTING_NAMES,
  type SettingName,
} from "../../portal/org-settings.js";
import { type Organization, portalView } from "../../portal/portal.service.js";
import { USER_SORT_FIELDS } from "../../users/user.repository.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { type ParamSpec, p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

const settingSpecs = Object.fromEntries(
  SETTING_NAMES.map((name) => [name, ORG_SETTINGS[name].spec]),
) as Record<SettingName, ParamSpec<unknown, false>>;

/**
 * `portals/self` is read by every client on every page load. The view depends only on the
 * (frozen, cached) organization and signed-in user, so it is built once per pair and frozen, and
 * the renderer serializes it once; a change to either makes new objects, and these entries are
 * collected with the old ones.
 */
const views = new WeakMap<Organization, { anonymous?: object; byUser: WeakMap<object, object> }>();

function portalViewFor(
  org: Organization,
  self: Record<string, unknown> | undefined,
  apiBase: string,
): object {
  let entry = views.get(org);
  if (!entry) {
    entry = { byUser: new WeakMap() };
    views.set(org, entry);
  }
  const cached = self ? entry.byUser.get(self) : entry.anonymous;
  if (cached) return cached;
  const base = new URL(apiBase);
  const view = Object.freeze(
    portalView(org, {
      signedIn: self !== undefined,
      portalHostname: `${base.host}${base.pathname.replace(/\/sharing\/rest$/, "")}`,
      ...(self ? { user: self } : {}),
    }),
  );
  if (self) entry.byUser.set(self, view);
  else entry.anonymous = view;
  return view;
}

export const portalRoutes = [
  defineRoute({
    name: "portals.get",
    methods: ["GET", "POST"],
    path: "/portals/:portalId",
    auth: "optional",
    params: {},
    handler: async ({ caller, services, org, apiBase }) =>
      portalViewFor(org, caller ? await services.users.self(caller) : undefined, apiBase),
  }),
  defineRoute({
    name: "portals.update",
    methods: ["POST"],
    path: "/portals/:portalId/update",
    auth: "required",
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
      return { success: true, orgId };
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
      return { success: true };
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
        sortOrder: (params.sortOrder ?? "asc") as "asc" | "desc",
      });
    },
  }),
];
