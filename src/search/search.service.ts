import type { Caller } from "../auth/caller.js";
import type { ItemService } from "../content/item.service.js";
import { FeedCache } from "../db/cache.js";
import type { Db } from "../db/database.js";
import { groupJson } from "../groups/group.service.js";
import type { PortalService } from "../portal/portal.service.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { GROUP_FIELDS, ITEM_FIELDS, parseQuery, type QueryNode } from "./query.js";
import {
  countGroups,
  countItems,
  findGroups,
  findItems,
  type GroupSortColumn,
  type ItemSortColumn,
  type SearchViewer,
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
  /**
   * Totals by query and viewer. Counting every match the viewer may see is most of a search's
   * cost (thousands of rows for a common type), while pages stop after `num` rows. Every change
   * that can alter a total (items, sharing, group membership, users) records an event, and the
   * `events` change empties this cache on every node; a role change alters `seesAll`, which is
   * part of the key. Pages are always read fresh.
   */
  private readonly totals: FeedCache<string, number>;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly items: ItemService,
  ) {
    this.totals = new FeedCache(db.feed, ["events", "org"]);
  }

  async searchItems(caller: Caller | null, request: SearchRequest) {
    const node = parseQuery(request.q ?? "", ITEM_FIELDS);
    const org = await this.portal.get();
    const viewer = this.viewer(caller, "portal:admin:viewItems", org.settings.access === "public");
    const sort = {
      column: request.sortField ? (ITEM_SORT_FIELDS[request.sortField] ?? "modified") : "modified",
      direction: request.sortOrder ?? (request.sortField ? "asc" : "desc"),
    } as const;
    const [total, rows] = await Promise.all([
      this.total("items", node, viewer, () => countItems(this.db.kysely, node, org.id, viewer)),
      findItems(this.db.kysely, node, org.id, viewer, sort, {
        offset: request.page.start - 1,
        limit: request.page.num,
      }),
    ]);
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
    const [total, rows] = await Promise.all([
      this.total("groups", node, viewer, () => countGroups(this.db.kysely, node, org.id, viewer)),
      findGroups(this.db.kysely, node, org.id, viewer, sort, {
        offset: request.page.start - 1,
        limit: request.page.num,
      }),
    ]);
    return {
      query: request.q ?? "",
      ...pageInfo(request.page, total, rows.length),
      results: rows.map((row) => groupJson(row, org.id, null)),
    };
  }

  private async total(
    kind: "items" | "groups",
    node: QueryNode,
    viewer: SearchViewer,
    count: () => Promise<number>,
  ): Promise<number> {
    const key = `${kind}|${viewer.userId}|${viewer.seesAll}|${viewer.orgIsPublic}|${JSON.stringify(node)}`;
    return (await this.totals.get(key, count)) as number;
  }

  private viewer(caller: Caller | null, adminPrivilege: string, orgIsPublic: boolean): SearchViewer {
    return {
      userId: caller?.userId ?? null,
      seesAll: caller?.privileges.has(adminPrivilege) === true,
      orgIsPublic,
    };
  }
}
