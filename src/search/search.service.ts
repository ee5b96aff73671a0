import { sql } from "kysely";
import type { Caller } from "../auth/caller.js";
import type { ItemService } from "../content/item.service.js";
import { FeedCache } from "../db/cache.js";
import { type Db, isStatementTimeout, type Queryable } from "../db/database.js";
import { errors } from "../errors.js";
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
  lookUpWords,
  type SearchContext,
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
    /** See `Config.searchTimeoutMs`. */
    private readonly timeoutMs: number,
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
    const { total, rows } = await this.bounded(hasWords(node), async (q, bare) => {
      const ctx = await lookUpWords(q, node, bare);
      const total = await this.total("items", node, viewer, () => countItems(q, node, org.id, viewer, ctx));
      const page = { offset: request.page.start - 1, limit: request.page.num };
      return { total, rows: await findItems(q, node, org.id, viewer, sort, page, ctx) };
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
    const { total, rows } = await this.bounded(false, async (q, ctx) => {
      const total = await this.total("groups", node, viewer, () => countGroups(q, node, org.id, viewer, ctx));
      const page = { offset: request.page.start - 1, limit: request.page.num };
      return { total, rows: await findGroups(q, node, org.id, viewer, sort, page, ctx) };
    });
    return {
      query: request.q ?? "",
      ...pageInfo(request.page, total, rows.length),
      results: rows.map((row) => groupJson(row, org.id, null)),
    };
  }

  /**
   * Runs a search's statements within `timeoutMs`, answering `searchTimedOut` past it. On
   * PostgreSQL a read transaction with a local `statement_timeout` (the server cancels the
   * statement); on SQLite each statement carries a deadline it checks per row visited, because
   * better-sqlite3 runs statements on the event loop and cannot interrupt them from outside.
   */
  private async bounded<T>(
    usesWordIndex: boolean,
    work: (q: Queryable, ctx: SearchContext) => Promise<T>,
  ): Promise<T> {
    try {
      if (this.db.engine === "postgres") {
        return await this.db.kysely.transaction().execute(async (trx) => {
          await sql`SELECT set_config('statement_timeout', ${String(this.timeoutMs)}, true)`.execute(trx);
          // The planner prices a sequential scan of `item_words` by its small heap, not by the
          // out-of-line tsvectors every row then reads: 64 words took 2 s that way, 25 ms from
          // the GIN index. Steered only for searches that look words up.
          if (usesWordIndex) await sql`SELECT set_config('enable_seqscan', 'off', true)`.execute(trx);
          return work(trx, { engine: "postgres", deadline: undefined });
        });
      }
      return await work(this.db.kysely, { engine: "sqlite", deadline: Date.now() + this.timeoutMs });
    } catch (err) {
      if (isStatementTimeout(err)) throw errors.searchTimedOut(this.timeoutMs);
      throw err;
    }
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

/** Whether `node` has a term answered from the word index (a bare word or `title:`). */
function hasWords(node: QueryNode): boolean {
  switch (node.kind) {
    case "all":
      return false;
    case "and":
    case "or":
      return node.children.some(hasWords);
    case "not":
      return hasWords(node.child);
    case "term":
      return node.field === null || node.field === "title";
  }
}
