import { ITEM_SORT_FIELDS } from "../../search/search.service.js";
import { defineRoute } from "../pipeline.js";
import { searchParams, searchRequest } from "./shared.js";

/**
 * Searches answer anonymous callers too: what they see is narrowed, not refused. The group search
 * (`/community/groups`) lives with the groups, in community-groups.routes.ts.
 */
export const searchRoutes = [
  defineRoute({
    name: "search.items",
    methods: ["GET", "POST"],
    path: "/search",
    auth: "optional",
    params: searchParams(ITEM_SORT_FIELDS),
    handler: async ({ params, caller, services }) =>
      services.search.searchItems(caller, searchRequest(params)),
  }),
];
