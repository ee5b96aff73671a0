import { sql } from "kysely";
import { type Caller, requirePrivilege } from "../auth/caller.js";
import { type Box, categoryKey } from "../content/extent.js";
import { itemResource, itemResourceJson } from "../content/item.service.js";
import { FeedCache } from "../db/cache.js";
import { type Db, isStatementTimeout, type Queryable } from "../db/database.js";
import { errors } from "../errors.js";
import { type GroupService, groupJson } from "../groups/group.service.js";
import { JsonAnswer } from "../json-answer.js";
import type { PortalService } from "../portal/portal.service.js";
import { userJson } from "../users/user.service.js";
import { type Page, pageInfo } from "../validation/paging.js";
import { ItemStatements } from "./item-statements.js";
import { GROUP_FIELDS, ITEM_FIELDS, parseFilter, parseQuery, type QueryNode, USER_FIELDS } from "./query.js";
import {
  type CountField,
  countFrom,
  countGroups,
  countUsers,
  findGroups,
  findUsers,
  type GroupSortColumn,
  type ItemCriteria,
  type ItemSortColumn,
  lookUpWords,
  pageOf,
  type SearchContext,
  type SearchViewer,
  type UserSortColumn,
  valueCounts,
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

/** `sortField` values of the user searches, and the column each sorts by. */
export const USER_SEARCH_SORT_FIELDS: Readonly<Record<string, UserSortColumn>> = {
  username: "username_key",
  fullname: "full_name",
  created: "created",
  lastlogin: "last_login",
  role: "role",
};

/** User fields only callers with `portal:admin:viewUsers` may search or sort by. */
const ADMIN_ONLY_USER_FIELDS: ReadonlySet<string> = new Set(["email", "role"]);
const ADMIN_ONLY_USER_SORTS: ReadonlySet<string> = new Set(["lastlogin", "role"]);

export interface SearchRequest {
  q: string | undefined;
  sortField: string | undefined;
  sortOrder: "asc" | "desc" | undefined;
  page: Page;
}

/** What an item search takes besides `q`: see `searchItems`. */
export interface ItemSearchRequest extends SearchRequest {
  filter?: string | undefined;
  bbox?: Box | undefined;
  /** Groups of category paths: an item must have one path of every group. */
  categories?: readonly (readonly string[])[] | undefined;
  countFields?: readonly CountField[] | undefined;
  countSize?: number | undefined;
}

/** `countSize` when none is given, as ArcGIS counts. */
export const DEFAULT_COUNT_SIZE = 10;

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
  /** The statements of item searches, compiled once per shape. */
  private readonly itemStatements: ItemStatements;

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    /** Whose visibility rules a group's content search applies first. */
    private readonly groups: GroupService,
    /** See `Config.searchTimeoutMs`. */
    private readonly timeoutMs: number,
  ) {
    this.totals = new FeedCache(db.feed, ["events", "org"]);
    this.itemStatements = new ItemStatements(db.kysely);
  }

  /**
   * `/search`: `q` and `filter` AND-ed, then `bbox` (the item's extent must intersect it) and
   * `categories`; `countFields` adds `aggregations` counted over every match, not only the page.
   * `within` narrows the search to the items shared with one group (`content/groups/<id>/search`).
   */
  async searchItems(caller: Caller | null, request: ItemSearchRequest, within?: string) {
    // A group the caller may not see answers as a missing one, before anything is searched.
    if (within !== undefined) await this.groups.seen(caller, within);
    const terms = [parseQuery(request.q ?? "", ITEM_FIELDS)];
    if (request.filter) terms.push(parseFilter(request.filter, ITEM_FIELDS));
    if (within !== undefined) terms.push({ kind: "term", field: "group", value: within });
    const node = allOf(terms);
    const criteria: ItemCriteria = {
      node,
      bbox: request.bbox,
      categories: request.categories?.map((group) => group.map(categoryKey)),
    };
    const org = await this.portal.get();
    const viewer = this.viewer(caller, "portal:admin:viewItems", org.settings.access === "public");
    const sort = {
      column: request.sortField ? (ITEM_SORT_FIELDS[request.sortField] ?? "modified") : "modified",
      direction: request.sortOrder ?? (request.sortField ? "asc" : "desc"),
    } as const;
    const countFields = request.countFields ?? [];
    const countSize = request.countSize ?? DEFAULT_COUNT_SIZE;
    const page = { offset: request.page.start - 1, limit: request.page.num };
    const totalKey = this.totalKey("items", criteria, viewer);
    const cachedTotal = this.totals.peek(totalKey);
    const since = this.totals.mark();
    const { total, rows, counts } = await this.boundedReads(async (ctx) => {
      const words = await lookUpWords(this.db.kysely, node, ctx);
      const statements = this.itemStatements;
      // One search's statements go together: on PostgreSQL one message, one round trip.
      const answers = await this.db.readTogether(
        [
          ...(cachedTotal === undefined ? [statements.count(criteria, org.id, viewer, words)] : []),
          statements.page(criteria, org.id, viewer, sort, page, words),
          ...countFields.map((field) =>
            statements.countValues(criteria, org.id, viewer, field, countSize, words),
          ),
        ],
        this.settings(hasWords(node)),
      );
      const total = cachedTotal ?? countFrom(answers.shift() ?? []);
      const rows = pageOf(answers.shift() ?? []);
      const counts = countFields.map((fieldName) => ({
        fieldName,
        fieldValues: valueCounts(answers.shift() ?? []),
      }));
      return { total, rows, counts };
    });
    if (cachedTotal === undefined) this.totals.keep(totalKey, total, since);
    const head = { query: request.q ?? "", ...pageInfo(request.page, total, rows.length) };
    const aggregations = countFields.length > 0 ? { counts } : undefined;
    // The page's compact JSON written directly (`itemResourceJson`), in the keys' order of the
    // object below; JSON.stringify of the parsed objects was a tenth of a search's CPU.
    const results = rows.map((row) => itemResourceJson(row, row.shared_group_ids, org.id)).join(",");
    const json = `${JSON.stringify(head).slice(0, -1)},"results":[${results}]${
      aggregations ? `,"aggregations":${JSON.stringify(aggregations)}` : ""
    }}`;
    return new JsonAnswer(json, () => ({
      ...head,
      results: rows.map((row) => itemResource(row, row.shared_group_ids, org.id)),
      ...(aggregations ? { aggregations } : {}),
    }));
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
   * User searches: `portals/self/users/search` (the organization's, for callers who view users:
   * every member, with the full resource) and `community/users` (any signed-in caller: themselves
   * and members whose profile is not private, as `community/users/<u>` shows them). `q` words
   * match username and full name; `filter` matches whole field values. Only callers who view
   * users may search by `email` or `role` or sort by `lastlogin` or `role`. Ordered by username unless
   * `sortField` says otherwise.
   */
  async searchUsers(
    caller: Caller | null,
    request: SearchRequest & { filter?: string | undefined },
    scope: "org" | "community",
  ) {
    if (scope === "org") requirePrivilege(caller, "portal:admin:viewUsers");
    else if (caller === null) throw errors.tokenRequired();
    if (scope === "community") requirePrivilege(caller, "portal:user:viewOrgUsers");
    const viewsUsers = caller.privileges.has("portal:admin:viewUsers");
    // A member's view of another user shows neither address, role nor last sign-in: searching or
    // sorting by them would tell what the view hides (who the administrators are, who signed in
    // when).
    const fields = viewsUsers ? USER_FIELDS : USER_FIELDS.filter((f) => !ADMIN_ONLY_USER_FIELDS.has(f));
    if (!viewsUsers && request.sortField !== undefined && ADMIN_ONLY_USER_SORTS.has(request.sortField)) {
      throw errors.invalidParameter(
        "sortField",
        `cannot be ${request.sortField}: only administrators who view users sort by it`,
      );
    }
    const node = parseQuery(request.q ?? "", fields);
    const filter = request.filter ? parseFilter(request.filter, fields) : ({ kind: "all" } as const);
    const org = await this.portal.get();
    const viewer: SearchViewer = { userId: caller.userId, seesAll: viewsUsers, orgIsPublic: false };
    const sort = {
      column: request.sortField
        ? (USER_SEARCH_SORT_FIELDS[request.sortField] ?? "username_key")
        : "username_key",
      direction: request.sortOrder ?? "asc",
    } as const;
    const { total, rows } = await this.bounded(false, async (q, ctx) => {
      const total = await countUsers(q, node, filter, org.id, viewer, ctx);
      const page = { offset: request.page.start - 1, limit: request.page.num };
      return { total, rows: await findUsers(q, node, filter, org.id, viewer, sort, page, ctx) };
    });
    const customs = await this.customPrivileges(rows);
    return {
      query: request.q ?? "",
      ...pageInfo(request.page, total, rows.length),
      results: rows.map((r) =>
        userJson(r, org.id, viewsUsers || r.id === caller.userId ? "full" : "member", customs),
      ),
    };
  }

  /** The privileges of the custom roles among `rows`, which their full resources list. */
  private async customPrivileges(rows: readonly { role_id: string | null }[]) {
    const ids = [...new Set(rows.flatMap((r) => (r.role_id === null ? [] : [r.role_id])))];
    const roles =
      ids.length === 0
        ? []
        : await this.db.kysely
            .selectFrom("roles")
            .select(["id", "privileges"])
            .where("id", "in", ids)
            .execute();
    return new Map(roles.map((r) => [r.id, JSON.parse(r.privileges) as string[]]));
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

  /**
   * Like `bounded`, for searches whose statements go together through `Db.readTogether`: on
   * PostgreSQL the timeout is one of `settings`, so no transaction is opened (BEGIN and COMMIT
   * would be two more round trips); on SQLite the context carries the deadline.
   */
  private async boundedReads<T>(work: (ctx: SearchContext) => Promise<T>): Promise<T> {
    try {
      return await work(
        this.db.engine === "postgres"
          ? { engine: "postgres", deadline: undefined }
          : { engine: "sqlite", deadline: Date.now() + this.timeoutMs },
      );
    } catch (err) {
      if (isStatementTimeout(err)) throw errors.searchTimedOut(this.timeoutMs);
      throw err;
    }
  }

  /** PostgreSQL settings of a search's statements: see `bounded`, which sets the same. */
  private settings(usesWordIndex: boolean): Record<string, string> {
    return {
      statement_timeout: String(this.timeoutMs),
      ...(usesWordIndex ? { enable_seqscan: "off" } : {}),
    };
  }

  private totalKey(kind: "items" | "groups", node: QueryNode | ItemCriteria, viewer: SearchViewer): string {
    return `${kind}|${viewer.userId}|${viewer.seesAll}|${viewer.orgIsPublic}|${JSON.stringify(node)}`;
  }

  private async total(
    kind: "items" | "groups",
    node: QueryNode | ItemCriteria,
    viewer: SearchViewer,
    count: () => Promise<number>,
  ): Promise<number> {
    return (await this.totals.get(this.totalKey(kind, node, viewer), count)) as number;
  }

  private viewer(caller: Caller | null, adminPrivilege: string, orgIsPublic: boolean): SearchViewer {
    return {
      userId: caller?.userId ?? null,
      seesAll: caller?.privileges.has(adminPrivilege) === true,
      orgIsPublic,
    };
  }
}

/** The terms AND-ed; terms that match everything drop out. */
function allOf(terms: QueryNode[]): QueryNode {
  const children = terms.filter((t) => t.kind !== "all");
  if (children.length === 0) return { kind: "all" };
  return children.length === 1 ? (children[0] as QueryNode) : { kind: "and", children };
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
