import { MAX_QUERY_LENGTH } from "../../search/query.js";
import type { SearchRequest } from "../../search/search.service.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { p } from "../../validation/params.js";

/**
 * What several route files take alike: the parameters of a search (`/search` and
 * `/community/groups`), of a person (`/community/users/<u>/update` and the portaladmin's
 * `createUser`), and the body limit of a service definition (`createService` and the
 * `/rest/admin/services` operations). Declared once so that the same parameter cannot drift apart.
 */

const sortOrder = p.string({ enum: ["asc", "desc"], caseInsensitive: true });

export function searchParams(sortFields: Readonly<Record<string, unknown>>) {
  return {
    ...pagingParams,
    q: p.string({ maxLength: MAX_QUERY_LENGTH }),
    sortField: p.string({ enum: Object.keys(sortFields), caseInsensitive: true }),
    sortOrder,
  };
}

export function searchRequest(params: {
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

export const password = () => p.string({ minLength: 8, maxLength: 1024 });
export const email = () =>
  p.string({ maxLength: 254, pattern: /^[^\s@]+@[^\s@]+$/, patternReason: "must be an e-mail address" });
export const personName = () => p.string({ maxLength: 128 });

/**
 * Service definitions (layers with their fields, renderers and symbols, whose pictures travel
 * base64-encoded) run to megabytes; the operations that take one accept this much.
 */
export const DEFINITION_BODY_LIMIT = 16 * 1024 * 1024;
