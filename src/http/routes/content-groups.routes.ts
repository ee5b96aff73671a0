import { pageOf, pagingParams } from "../../validation/paging.js";
import { defineRoute } from "../pipeline.js";

/** A group's content, `/content/groups/<id>`: the items shared with it that the caller may see. */
export const contentGroupsRoutes = [
  defineRoute({
    name: "groups.content",
    methods: ["GET", "POST"],
    path: "/content/groups/:groupId",
    auth: "optional",
    params: pagingParams,
    handler: async ({ params, path, caller, services }) =>
      services.groups.content(caller, path.groupId, pageOf(params)),
  }),
];
