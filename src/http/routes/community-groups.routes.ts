import { errors } from "../../errors.js";
import { checkCategorySchema } from "../../groups/category-schema.js";
import type { GroupFields } from "../../groups/group.service.js";
import { parseJoinedRange } from "../../groups/joined-range.js";
import { GROUP_SORT_FIELDS } from "../../search/search.service.js";
import { MAX_NOTIFICATION_RECIPIENTS } from "../../users/notification.service.js";
import { pagingParams } from "../../validation/paging.js";
import { type ParamValues, p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { notificationParams, searchParams, searchRequest } from "./shared.js";

const groupBase = "/community/groups/:groupId";

/** ArcGIS clients (arcgis-rest-js) send membership changes in batches of 25 users. */
const userList = () => p.list({ maxItems: 25, item: { maxLength: 128 } });

/** The group's editable fields, shared by createGroup and update. */
const groupParams = {
  title: p.string({ maxLength: 250 }),
  access: p.string({ enum: ["private", "org", "public"], caseInsensitive: true }),
  description: p.string({ maxLength: 64_000 }),
  snippet: p.string({ maxLength: 250 }),
  tags: p.list({ maxItems: 128, item: { maxLength: 256 } }),
  isInvitationOnly: p.boolean(),
  isViewOnly: p.boolean(),
  autoJoin: p.boolean(),
  sortField: p.string({
    enum: ["title", "owner", "avgrating", "numviews", "created", "modified"],
    caseInsensitive: true,
  }),
  sortOrder: p.string({ enum: ["asc", "desc"], caseInsensitive: true }),
};

function groupFields(params: ParamValues<typeof groupParams>): GroupFields {
  return {
    title: params.title,
    access: params.access,
    description: params.description,
    snippet: params.snippet,
    tags: params.tags,
    isInvitationOnly: params.isInvitationOnly,
    isViewOnly: params.isViewOnly,
    autoJoin: params.autoJoin,
    sortField: params.sortField,
    sortOrder: params.sortOrder,
  };
}

/** Groups, `/community/groups/<id>` and `/community/createGroup`; `/community/groups` searches them. */
export const communityGroupsRoutes = [
  // Searches answer anonymous callers too: what they see is narrowed, not refused.
  defineRoute({
    name: "search.groups",
    methods: ["GET", "POST"],
    path: "/community/groups",
    auth: "optional",
    params: searchParams(GROUP_SORT_FIELDS),
    handler: async ({ params, caller, services }) =>
      services.search.searchGroups(caller, searchRequest(params)),
  }),
  defineRoute({
    name: "groups.create",
    methods: ["POST"],
    path: "/community/createGroup",
    auth: "required",
    privilege: "portal:user:createGroup",
    params: { ...groupParams, title: p.string({ required: true, maxLength: 250 }) },
    handler: async ({ params, caller, services }) =>
      ok({ group: await services.groups.create(caller, { ...groupFields(params), title: params.title }) }),
  }),
  defineRoute({
    name: "groups.get",
    methods: ["GET", "POST"],
    path: groupBase,
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.groups.get(caller, path.groupId),
  }),
  defineRoute({
    name: "groups.update",
    methods: ["POST"],
    path: `${groupBase}/update`,
    auth: "required",
    params: groupParams,
    handler: async ({ params, empty, path, caller, services }) => {
      await services.groups.update(caller, path.groupId, groupFields(params), [...empty]);
      return ok({ groupId: path.groupId });
    },
  }),
  defineRoute({
    name: "groups.delete",
    methods: ["POST"],
    path: `${groupBase}/delete`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.groups.delete(caller, path.groupId);
      return ok({ groupId: path.groupId });
    },
  }),
  defineRoute({
    name: "groups.protect",
    methods: ["POST"],
    path: `${groupBase}/protect`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.groups.setProtected(caller, path.groupId, true);
      return ok();
    },
  }),
  defineRoute({
    name: "groups.unprotect",
    methods: ["POST"],
    path: `${groupBase}/unprotect`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.groups.setProtected(caller, path.groupId, false);
      return ok();
    },
  }),
  defineRoute({
    name: "groups.invite",
    methods: ["POST"],
    path: `${groupBase}/invite`,
    auth: "required",
    params: {
      users: { ...userList(), required: true as const },
      // Invitations store no role (see GroupService.invite), so an invitation cannot promise one.
      role: p.string({
        enum: ["group_member", "group_admin"],
        check: (v) =>
          v === "group_admin"
            ? "cannot be group_admin: invitations make members; promote them with updateUsers once they join"
            : undefined,
      }),
    },
    handler: async ({ params, path, caller, services }) =>
      ok(await services.groups.invite(caller, path.groupId, params.users)),
  }),
  defineRoute({
    name: "groups.addUsers",
    methods: ["POST"],
    path: `${groupBase}/addUsers`,
    auth: "required",
    params: { users: userList(), admins: userList() },
    handler: async ({ params, path, caller, services }) =>
      services.groups.addUsers(caller, path.groupId, {
        users: params.users ?? [],
        admins: params.admins ?? [],
      }),
  }),
  defineRoute({
    name: "groups.removeUsers",
    methods: ["POST"],
    path: `${groupBase}/removeUsers`,
    auth: "required",
    params: { users: { ...userList(), required: true as const } },
    handler: async ({ params, path, caller, services }) =>
      services.groups.removeUsers(caller, path.groupId, params.users),
  }),
  defineRoute({
    name: "groups.updateUsers",
    methods: ["POST"],
    path: `${groupBase}/updateUsers`,
    auth: "required",
    params: { users: userList(), admins: userList() },
    handler: async ({ params, path, caller, services }) =>
      services.groups.updateUsers(caller, path.groupId, {
        users: params.users ?? [],
        admins: params.admins ?? [],
      }),
  }),
  defineRoute({
    name: "groups.users",
    methods: ["GET", "POST"],
    path: `${groupBase}/users`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.groups.members(caller, path.groupId),
  }),
  defineRoute({
    name: "groups.createNotification",
    methods: ["POST"],
    path: `${groupBase}/createNotification`,
    auth: "required",
    params: { ...notificationParams(MAX_NOTIFICATION_RECIPIENTS), notifyAll: p.boolean() },
    handler: async ({ params, path, caller, services }) => {
      await services.groupNotifications.notify(caller, path.groupId, {
        subject: params.subject ?? "",
        message: params.message,
        users: params.users ?? [],
        notifyAll: params.notifyAll === true,
      });
      return ok();
    },
  }),
  defineRoute({
    name: "groups.categorySchema",
    methods: ["GET", "POST"],
    path: `${groupBase}/categorySchema`,
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.categorySchemas.get(caller, path.groupId),
  }),
  defineRoute({
    name: "groups.assignCategorySchema",
    methods: ["POST"],
    path: `${groupBase}/assignCategorySchema`,
    auth: "required",
    params: {
      categorySchema: p.json<unknown, true>({}, { required: true }),
    },
    handler: async ({ params, path, caller, services }) => {
      const schema = checkCategorySchema(params.categorySchema);
      if (typeof schema === "string") throw errors.invalidParameter("categorySchema", schema);
      await services.categorySchemas.assign(caller, path.groupId, schema);
      return ok();
    },
  }),
  defineRoute({
    name: "groups.deleteCategorySchema",
    methods: ["POST"],
    path: `${groupBase}/deleteCategorySchema`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.categorySchemas.delete(caller, path.groupId);
      return ok();
    },
  }),
  defineRoute({
    name: "groups.userList",
    methods: ["GET", "POST"],
    path: `${groupBase}/userList`,
    auth: "required",
    params: {
      ...pagingParams,
      name: p.string({ maxLength: 256 }),
      sortField: p.string({ enum: ["username", "membertype", "joined"], caseInsensitive: true }),
      sortOrder: p.string({ enum: ["asc", "desc"], caseInsensitive: true }),
      memberType: p.string({ enum: ["admin", "member"], caseInsensitive: true }),
      joined: p.string({
        maxLength: 64,
        check: (v) => {
          const range = parseJoinedRange(v);
          return typeof range === "string" ? range : undefined;
        },
      }),
    },
    handler: async ({ params, path, caller, services }) => {
      const joined = params.joined === undefined ? {} : parseJoinedRange(params.joined);
      // Checked by the parameter's `check`; a string here would be a reason already reported.
      if (typeof joined === "string") throw errors.invalidParameter("joined", joined);
      return services.groups.userList(
        caller,
        path.groupId,
        { name: params.name, memberType: params.memberType, joinedFrom: joined.from, joinedTo: joined.to },
        { sortField: params.sortField ?? "username", sortOrder: params.sortOrder ?? "asc" },
        // ArcGIS lists 25 members a page unless told otherwise.
        { start: params.start ?? 1, num: params.num ?? 25 },
      );
    },
  }),
  defineRoute({
    name: "groups.join",
    methods: ["POST"],
    path: `${groupBase}/join`,
    auth: "required",
    privilege: "portal:user:joinGroup",
    params: {},
    handler: async ({ path, caller, services }) => {
      const { groupId } = await services.groups.join(caller, path.groupId);
      return ok({ groupId });
    },
  }),
  defineRoute({
    name: "groups.leave",
    methods: ["POST"],
    path: `${groupBase}/leave`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => ok(await services.groups.leave(caller, path.groupId)),
  }),
  defineRoute({
    name: "groups.applications",
    methods: ["GET", "POST"],
    path: `${groupBase}/applications`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.groups.applications(caller, path.groupId),
  }),
  defineRoute({
    name: "groups.applications.accept",
    methods: ["POST"],
    path: `${groupBase}/applications/:applicant/accept`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) =>
      ok(await services.groups.acceptApplication(caller, path.groupId, path.applicant)),
  }),
  defineRoute({
    name: "groups.applications.decline",
    methods: ["POST"],
    path: `${groupBase}/applications/:applicant/decline`,
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) =>
      ok(await services.groups.declineApplication(caller, path.groupId, path.applicant)),
  }),
];
