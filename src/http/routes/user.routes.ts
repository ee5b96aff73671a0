import { USERNAME_PATTERN } from "../../auth/username.js";
import { errors } from "../../errors.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

const username = (required: true) =>
  p.string({
    required,
    pattern: USERNAME_PATTERN,
    patternReason: "must be 6 to 128 letters, digits or . _ - @, starting with a letter or digit",
  });
const password = () => p.string({ minLength: 8, maxLength: 1024 });
const email = () =>
  p.string({ maxLength: 254, pattern: /^[^\s@]+@[^\s@]+$/, patternReason: "must be an e-mail address" });
const personName = () => p.string({ maxLength: 128 });

export const userRoutes = [
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
      return { success: true, username: path.username };
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
      return { success: true, username: path.username };
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
      return { success: true };
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
      return { success: true };
    },
  }),
  defineRoute({
    name: "portaladmin.createUser",
    methods: ["POST"],
    path: "/security/users/createUser",
    root: "portaladmin",
    auth: "required",
    privilege: "portal:admin:inviteUsers",
    params: {
      username: username(true),
      password: { ...password(), required: true as const },
      firstname: { ...personName(), required: true as const },
      lastname: { ...personName(), required: true as const },
      fullname: p.string({ maxLength: 256 }),
      email: { ...email(), required: true as const },
      role: p.string({ maxLength: 128 }),
      description: p.string({ maxLength: 32000 }),
      userLicenseTypeId: p.string({ maxLength: 64 }),
      provider: p.string({ enum: ["arcgis", "enterprise"] }),
    },
    check(params) {
      if (params.provider === "enterprise") {
        throw errors.invalidParameter(
          "provider",
          "must be arcgis: enterprise identity providers are not configured",
        );
      }
    },
    handler: async ({ params, caller, services }) => {
      const user = await services.users.create(caller, {
        username: params.username,
        password: params.password,
        firstName: params.firstname,
        lastName: params.lastname,
        fullName: params.fullname,
        email: params.email,
        role: params.role,
        description: params.description,
        userLicenseTypeId: params.userLicenseTypeId,
      });
      return { status: "success", success: true, username: user.username, id: user.id };
    },
  }),
];
