import { pageOf, pagingParams } from "../../validation/paging.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";

const roleBase = "/portals/:portalId/roles/:roleId";

export const portalsRolesRoutes = [
  defineRoute({
    name: "roles.list",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/roles",
    auth: "required",
    privilege: "portal:admin:viewUsers",
    params: { ...pagingParams, returnPrivileges: p.boolean() },
    handler: async ({ params, caller, services }) =>
      services.roles.list(caller, pageOf(params), params.returnPrivileges ?? false),
  }),
  defineRoute({
    name: "roles.create",
    methods: ["POST"],
    path: "/portals/:portalId/createRole",
    auth: "required",
    privilege: "portal:admin:manageRoles",
    params: {
      name: p.string({ required: true, maxLength: 128 }),
      description: p.string({ maxLength: 250 }),
    },
    handler: async ({ params, caller, services }) => {
      const { id } = await services.roles.create(caller, {
        name: params.name,
        description: params.description ?? "",
      });
      return ok({ id });
    },
  }),
  defineRoute({
    name: "roles.get",
    methods: ["GET", "POST"],
    path: roleBase,
    auth: "required",
    privilege: "portal:admin:viewUsers",
    params: {},
    handler: async ({ path, caller, services }) => {
      return services.roles.get(caller, path.roleId);
    },
  }),
  defineRoute({
    name: "roles.update",
    methods: ["POST"],
    path: `${roleBase}/update`,
    auth: "required",
    privilege: "portal:admin:manageRoles",
    params: {
      name: p.string({ maxLength: 128 }),
      description: p.string({ maxLength: 250 }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.roles.update(caller, path.roleId, {
        ...(params.name !== undefined ? { name: params.name } : {}),
        ...(params.description !== undefined ? { description: params.description } : {}),
      });
      return ok();
    },
  }),
  defineRoute({
    name: "roles.delete",
    methods: ["POST"],
    path: `${roleBase}/delete`,
    auth: "required",
    privilege: "portal:admin:manageRoles",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.roles.delete(caller, path.roleId);
      return ok();
    },
  }),
  defineRoute({
    name: "roles.privileges",
    methods: ["GET", "POST"],
    path: `${roleBase}/privileges`,
    auth: "required",
    privilege: "portal:admin:viewUsers",
    params: {},
    handler: async ({ path, caller, services }) => {
      return services.roles.privileges(caller, path.roleId);
    },
  }),
  defineRoute({
    name: "roles.setPrivileges",
    methods: ["POST"],
    path: `${roleBase}/setPrivileges`,
    auth: "required",
    privilege: "portal:admin:manageRoles",
    params: {
      privileges: p.json<{ privileges: string[] }, true>(
        {
          type: "object",
          properties: {
            privileges: { type: "array", maxItems: 500, items: { type: "string", maxLength: 128 } },
          },
          required: ["privileges"],
        },
        { required: true },
      ),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.roles.setPrivileges(caller, path.roleId, params.privileges.privileges);
      return ok();
    },
  }),
];
