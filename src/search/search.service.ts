import type { Caller } from "../auth/caller.js";
import type { ItemService } from "../content/item.service.js";
import type { Db } from "../db/database.js";
import { groupJson } from "../groups/group.service.js";
import type { PortalService } from "../portal/portal.service.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { GROUP_FIELDS, ITEM_FIELDS, parseQuery } from "./query.js";
import {
  type GroupSortColumn,
  type ItemSortColumn,
  type SearchViewer,
  searchGroups,
  searchItems,
} from "./search.repository.js";

/** `sortField` values accepted for items, and the column each sorts by. */
export const ITEM_SORT_FIELDS: Readonly<Record<string, ItemSortColumn>> = {
  title: "title_key",
  created: "created",
  uploaded: "created",
  modified: "modified",
  type: "type_key",
  owner: "owner_key",
  // Views, ratings and comments are not counted; recency is the closest useful order.
  numviews: "modified",
  avgrating: "modified",
  numratings: "modified",
  numcomments: "modified",
};

export const GROUP_SORT_FIELDS: Readonly<Record<string, GroupSortColumn>> = {
  title: "title_key",
  owner: "owner",
  created: "created",
  modified: "modified",
};

export interface SearchRequest {
  q: string | undefined;
  sortField: string | undefined;
  sortOrder: "asc" | "desc" | undefined;
  page: Page;
}

/**
 * `/search` (items) and `/community/groups` (groups). ArcGIS orders by relevance when no
 * `sortField` is given; there is no relevance score here, so items come newest first and groups
 * by title. An explicit `sortField` sorts ascending unless `sortOrder` says otherwise, as ArcGIS does.
 */
export class SearchService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly items: ItemService,
  ) {}

  async searchItems(caller: Caller | null, request: SearchRequest) {
    const node = parseQuery(request.q ?? "", ITEM_FIELDS);
    const org = await this.portal.get();
    const viewer = this.viewer(caller, "portal:admin:viewItems", org.settings.access === "public");
    const sort = {
      column: request.sortField ? (ITEM_SORT_FIELDS[request.sortField] ?? "modified") : "modified",
      direction: request.sortOrder ?? (request.sortField ? "asc" : "desc"),
    } as const;
    const { total, rows } = await searchItems(this.db.kysely, node, org.id, viewer, sort, {
      offset: request.page.start - 1,
      limit: request.page.num,
    });
    const results = await this.items.itemsJson(rows);
    return { query: request.q ?? "", ...pageInfo(request.page, total, rows.length), results };
  }

  async searchGroups(caller: Caller | null, request: SearchRequest) {
    const node = parseQuery(request.q ?? "", GROUP_FIELDS);
    const org = await this.portal.get();
    const viewer = this.viewer(caller, "portal:admin:viewGroups", org.settings.access === "public");
    const sort = {
      column: request.sortField ? (GROUP_SORT_FIELDS[request.sortField] ?? "title_key") : "title_key",
      direction: request.sortOrder ?? "asc",
    } as const;
    const { total, rows } = await searchGroups(this.db.kysely, node, org.id, viewer, sort, {
      offset: request.page.start - 1,
      limit: request.page.num,
    });
    return {
      query: request.q ?? "",
      ...pageInfo(request.page, total, rows.length),
      results: rows.map((row) => groupJson(row, org.id, null)),
    };
  }

  private viewer(caller: Caller | null, adminPrivilege: string, orgIsPublic: boolean): SearchViewer {
    return {
      userId: caller?.userId ?? null,
      seesAll: caller?.privileges.has(adminPrivilege) === true,
      orgIsPublic,
    };
  }
}
