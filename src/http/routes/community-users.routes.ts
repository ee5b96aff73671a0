import { MAX_QUERY_LENGTH } from "../../search/query.js";
import { USER_SEARCH_SORT_FIELDS } from "../../search/search.service.js";
import { MAX_USER_PROPERTIES_CHARS } from "../../users/user.service.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { email, password, personName, searchParams, searchRequest } from "./shared.js";

/** Users (`/community/users/<u>`, `/community/self`) and the group invitations they answer. */
export const communityUsersRoutes = [
  defineRoute({
    name: "users.search",
    methods: ["GET", "POST"],
    path: "/community/users",
    // The ArcGIS reference: "only available to authenticated users".
    auth: "required",
    privilege: "portal:user:viewOrgUsers",
    params: { ...searchParams(USER_SEARCH_SORT_FIELDS), filter: p.string({ maxLength: MAX_QUERY_LENGTH }) },
    handler: async ({ params, caller, services }) =>
      services.search.searchUsers(caller, { ...searchRequest(params), filter: params.filter }, "community"),
  }),
  defineRoute({
    name: "users.notifications",
    methods: ["GET", "POST"],
    path: "/community/users/:username/notifications",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.notifications.list(caller, path.username),
  }),
  defineRoute({
    name: "users.notifications.delete",
    methods: ["POST"],
    path: "/community/users/:username/notifications/:notificationId/delete",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.notifications.remove(caller, path.username, path.notificationId);
      return ok({ notificationId: path.notificationId });
    },
  }),
  defineRoute({
    name: "community.self",
    methods: ["GET", "POST"],
    path: "/community/self",
    auth: "required",
    params: {},
    handler: async ({ caller, services }) => services.users.self(caller),
  }),
  defineRoute({
    name: "users.get",
    methods: ["GET", "POST"],
    path: "/community/users/:username",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.users.get(caller, path.username),
  }),
  defineRoute({
    name: "users.update",
    methods: ["POST"],
    path: "/community/users/:username/update",
    auth: "required",
    params: {
      firstName: personName(),
      lastName: personName(),
      fullname: p.string({ maxLength: 256 }),
      // The REST docs spell it `fullname`; user objects passed through arcgis-rest-js say `fullName`.
      fullName: p.string({ maxLength: 256 }),
      description: p.string({ maxLength: 32000 }),
      email: email(),
      access: p.string({ enum: ["private", "org", "public"] }),
      tags: p.list({ maxItems: 128, item: { maxLength: 256 } }),
      culture: p.string({
        pattern: /^[a-z]{2,3}(-[A-Za-z]{2,4})?$/,
        patternReason: "must be a language code such as en",
      }),
      region: p.string({ pattern: /^[A-Za-z]{2,3}$/, patternReason: "must be a region code such as US" }),
      units: p.string({ enum: ["english", "metric"] }),
      password: password(),
      oldPassword: p.string({ maxLength: 1024 }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.users.update(caller, path.username, {
        firstName: params.firstName,
        lastName: params.lastName,
        fullName: params.fullname ?? params.fullName,
        description: params.description,
        email: params.email,
        access: params.access,
        tags: params.tags,
        culture: params.culture,
        region: params.region,
        units: params.units,
        password: params.password,
        oldPassword: params.oldPassword,
      });
      return ok({ username: path.username });
    },
  }),
  defineRoute({
    name: "users.delete",
    methods: ["POST"],
    path: "/community/users/:username/delete",
    auth: "required",
    privilege: "portal:admin:deleteUsers",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.users.delete(caller, path.username);
      return ok({ username: path.username });
    },
  }),
  defineRoute({
    name: "users.disable",
    methods: ["POST"],
    path: "/community/users/:username/disable",
    auth: "required",
    privilege: "portal:admin:disableUsers",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.users.setDisabled(caller, path.username, true);
      return ok();
    },
  }),
  defineRoute({
    name: "users.enable",
    methods: ["POST"],
    path: "/community/users/:username/enable",
    auth: "required",
    privilege: "portal:admin:disableUsers",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.users.setDisabled(caller, path.username, false);
      return ok();
    },
  }),
  defineRoute({
    name: "users.invitations",
    methods: ["GET", "POST"],
    path: "/community/users/:username/invitations",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.groups.invitations(caller, path.username),
  }),
  defineRoute({
    name: "users.invitation",
    methods: ["GET", "POST"],
    path: "/community/users/:username/invitations/:invitationId",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) =>
      services.groups.invitation(caller, path.username, path.invitationId),
  }),
  defineRoute({
    name: "users.invitations.accept",
    methods: ["POST"],
    path: "/community/users/:username/invitations/:invitationId/accept",
    auth: "required",
    privilege: "portal:user:joinGroup",
    params: {},
    handler: async ({ path, caller, services }) =>
      ok(await services.groups.acceptInvitation(caller, path.username, path.invitationId)),
  }),
  defineRoute({
    name: "users.invitations.decline",
    methods: ["POST"],
    path: "/community/users/:username/invitations/:invitationId/decline",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) =>
      ok(await services.groups.declineInvitation(caller, path.username, path.invitationId)),
  }),
  defineRoute({
    name: "users.tags",
    methods: ["GET", "POST"],
    path: "/community/users/:username/tags",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.items.userTags(caller, path.username),
  }),
  defineRoute({
    name: "users.properties",
    methods: ["GET", "POST"],
    path: "/community/users/:username/properties",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => ({
      properties: await services.users.properties(caller, path.username),
    }),
  }),
  defineRoute({
    name: "users.setProperties",
    methods: ["POST"],
    path: "/community/users/:username/setProperties",
    auth: "required",
    params: {
      properties: p.json<Record<string, unknown>, true>(
        { type: "object" },
        {
          required: true,
          check: (v) =>
            JSON.stringify(v).length > MAX_USER_PROPERTIES_CHARS
              ? `must be at most ${MAX_USER_PROPERTIES_CHARS} characters as JSON`
              : undefined,
        },
      ),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.users.setProperties(caller, path.username, params.properties);
      return ok();
    },
  }),
];
