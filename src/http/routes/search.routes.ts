import { ITEM_SORT_FIELDS } from "../../search/search.service.js";
import { defineRoute } from "../pipeline.js";
import { itemSearchParams, itemSearchRequest } from "./shared.js";

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
    params: itemSearchParams(ITEM_SORT_FIELDS),
    handler: async ({ params, caller, services }) =>
      services.search.searchItems(caller, itemSearchRequest(params)),
  }),
];
