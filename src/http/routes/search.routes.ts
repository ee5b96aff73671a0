import { MAX_QUERY_LENGTH } from "../../search/query.js";
import { GROUP_SORT_FIELDS, ITEM_SORT_FIELDS, type SearchRequest } from "../../search/search.service.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

const sortOrder = p.string({ enum: ["asc", "desc"], caseInsensitive: true });

function searchParams(sortFields: Readonly<Record<string, unknown>>) {
  return {
    ...pagingParams,
    q: p.string({ maxLength: MAX_QUERY_LENGTH }),
    sortField: p.string({ enum: Object.keys(sortFields), caseInsensitive: true }),
    sortOrder,
  };
}

function searchRequest(params: {
  q?: string | undefined;
  sortField?: string | undefined;
  sortOrder?: "asc" | "desc" | undefined;
  start?: number | undefined;
  num?: number | undefined;
}): SearchRequest {
  return {
    q: params.q,
    sortField: params.sortField,
    sortOrder: params.sortOrder,
    page: pageOf(params),
  };
}

/** Searches answer anonymous callers too: what they see is narrowed, not refused. */
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
  defineRoute({
    name: "search.groups",
    methods: ["GET", "POST"],
    path: "/community/groups",
    auth: "optional",
    params: searchParams(GROUP_SORT_FIELDS),
    handler: async ({ params, caller, services }) =>
      services.search.searchGroups(caller, searchRequest(params)),
  }),
];
