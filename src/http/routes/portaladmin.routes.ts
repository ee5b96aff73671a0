import { USERNAME_PATTERN } from "../../auth/username.js";
import { errors } from "../../errors.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { email, password, personName } from "./shared.js";

const username = (required: true) =>
  p.string({
    required,
    pattern: USERNAME_PATTERN,
    patternReason: "must be 6 to 128 letters, digits or . _ - @, starting with a letter or digit",
  });

/** The Portal Administrator API (`/portaladmin`): what of it portico implements. */
export const portaladminRoutes = [
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
      return { status: "success", ...ok({ username: user.username, id: user.id }) };
    },
  }),
];
