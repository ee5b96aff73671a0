import { boxSpec, categoryRefusal } from "../../content/extent.js";
import { MAX_QUERY_LENGTH } from "../../search/query.js";
import type { CountField } from "../../search/search.repository.js";
import type { ItemSearchRequest, SearchRequest } from "../../search/search.service.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { type ParamSpec, p } from "../../validation/params.js";

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

/** Category groups of one search, and paths in one group, as the ArcGIS search reference allows. */
export const MAX_CATEGORY_FILTERS = 8;
/** Most `countFields` of one search, and largest `countSize` (the ArcGIS limits). */
export const MAX_COUNT_FIELDS = 3;
export const MAX_COUNT_SIZE = 200;

/**
 * `categories` of a search: a comma-separated list or a JSON array of paths (an item matches one
 * of them), or a JSON array of such arrays (it must match one path of every array).
 */
export const categoriesSpec: ParamSpec<string[][], false> = {
  kind: "string",
  required: false,
  parse(raw) {
    const fail = (reason: string) => ({ ok: false as const, reason });
    if (raw.length > 2 * MAX_CATEGORY_FILTERS * MAX_CATEGORY_FILTERS * 300) return fail("is too long");
    let groups: unknown[][];
    if (raw.trim().startsWith("[")) {
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        return fail("must be a JSON array of category paths, or of arrays of them");
      }
      if (!Array.isArray(value)) return fail("must be a JSON array of category paths, or of arrays of them");
      groups = value.every((v) => Array.isArray(v)) ? (value as unknown[][]) : [value];
    } else {
      groups = [
        raw
          .split(",")
          .map((s) => s.trim())
          .filter((s) => s !== ""),
      ];
    }
    if (groups.length > MAX_CATEGORY_FILTERS) return fail(`must have at most ${MAX_CATEGORY_FILTERS} groups`);
    for (const group of groups) {
      if (group.length === 0 || group.length > MAX_CATEGORY_FILTERS) {
        return fail(`must have from 1 to ${MAX_CATEGORY_FILTERS} paths in each group`);
      }
      for (const path of group) {
        if (typeof path !== "string") return fail("must hold category paths as strings");
        const reason = categoryRefusal(path);
        if (reason) return fail(`has '${path.slice(0, 64)}', which ${reason}`);
      }
    }
    return { ok: true as const, value: groups as string[][] };
  },
};

const COUNT_FIELDS = ["type", "access", "tags", "categories"] as const satisfies readonly CountField[];

/** What `/search` and a group's content search take: `q` and the item-only parameters. */
export function itemSearchParams(sortFields: Readonly<Record<string, unknown>>) {
  return {
    ...searchParams(sortFields),
    filter: p.string({ maxLength: MAX_QUERY_LENGTH }),
    bbox: boxSpec(true),
    categories: categoriesSpec,
    countFields: p.list({
      maxItems: MAX_COUNT_FIELDS,
      item: {
        check: (field) =>
          (COUNT_FIELDS as readonly string[]).includes(field.toLowerCase())
            ? undefined
            : `is not a field that can be counted (${COUNT_FIELDS.join(", ")})`,
      },
    }),
    countSize: p.integer({ min: 1, max: MAX_COUNT_SIZE }),
  };
}

export function itemSearchRequest(
  params: Parameters<typeof searchRequest>[0] & {
    filter?: string | undefined;
    bbox?: ItemSearchRequest["bbox"];
    categories?: string[][] | undefined;
    countFields?: string[] | undefined;
    countSize?: number | undefined;
  },
): ItemSearchRequest {
  return {
    ...searchRequest(params),
    filter: params.filter,
    bbox: params.bbox,
    categories: params.categories,
    countFields: params.countFields
      ? [...new Set(params.countFields.map((f) => f.toLowerCase() as CountField))]
      : undefined,
    countSize: params.countSize,
  };
}

/** Longest notification subject and message (a push message arrives as JSON text). */
export const MAX_NOTIFICATION_SUBJECT = 256;
export const MAX_NOTIFICATION_MESSAGE = 10_000;

/**
 * What both createNotification operations take. `email` is accepted and stored like `builtin`:
 * portico sends no e-mail. `push` needs registered devices, which portico has none of.
 */
export function notificationParams(maxUsers: number) {
  return {
    subject: p.string({ maxLength: MAX_NOTIFICATION_SUBJECT }),
    message: p.string({ required: true, maxLength: MAX_NOTIFICATION_MESSAGE }),
    users: p.list({ maxItems: maxUsers, item: { maxLength: 128 } }),
    notificationChannelType: p.string({ enum: ["email", "builtin"], caseInsensitive: true }),
    // Push notifications only; accepted so that Esri's client may send them, and unused.
    clientId: p.string({ maxLength: 256 }),
    silentNotification: p.boolean(),
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
