import { ITEM_SORT_FIELDS } from "../../search/search.service.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { defineRoute } from "../pipeline.js";
import { itemSearchParams, itemSearchRequest } from "./shared.js";

/**
 * A group's content, `/content/groups/<id>`: the items shared with it that the caller may see, as
 * a listing and as a search (`search`, with every parameter of `/search`).
 */
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
  defineRoute({
    name: "groups.content.search",
    methods: ["GET", "POST"],
    path: "/content/groups/:groupId/search",
    auth: "optional",
    params: itemSearchParams(ITEM_SORT_FIELDS),
    handler: async ({ params, path, caller, services }) =>
      services.search.searchItems(caller, itemSearchRequest(params), path.groupId),
  }),
];
