import {
  type CompiledQuery,
  type Expression,
  type ExpressionBuilder,
  type Selectable,
  type SelectQueryBuilder,
  type SqlBool,
  sql,
} from "kysely";
import type { Box } from "../content/extent.js";
import type { ItemRow } from "../content/item.repository.js";
import { ftsQuery, tsqueryLiteral, wordQuery } from "../content/words.js";
import { DeadlineExceeded, type Engine, type Queryable } from "../db/database.js";
import type { Database, GroupTable } from "../db/schema.js";
import { EXACT_TITLE, type QueryNode } from "./query.js";

/**
 * Search as single SQL statements that SQLite and PostgreSQL both run unchanged: the `q` tree
 * becomes a WHERE condition, AND-ed with what the caller may see, so paging and totals are exact
 * and no row the caller may not see ever leaves the database.
 */

export type GroupRow = Selectable<GroupTable>;

type ItemsEb = ExpressionBuilder<Database, "items">;
type GroupsEb = ExpressionBuilder<Database, "groups">;

const TRUE = sql<SqlBool>`1 = 1`;
const FALSE = sql<SqlBool>`1 = 0`;

/** Who is searching, reduced to what the visibility conditions need. */
export interface SearchViewer {
  userId: string | null;
  /** Administrators who may view all items (or groups): no visibility condition. */
  seesAll: boolean;
  /** Whether anonymous callers may see public content. */
  orgIsPublic: boolean;
}

/**
 * Paging values are validated integers, written into the SQL as literals: with a bound LIMIT,
 * SQLite plans without knowing how few rows are wanted (measured about 30% slower per page).
 */
export interface SearchPage {
  offset: number;
  limit: number;
}

export type ItemSortColumn = "title_key" | "created" | "modified" | "type_key" | "owner_key";
export type GroupSortColumn = "title_key" | "created" | "modified" | "owner";

export interface SearchSort<C extends string> {
  column: C;
  direction: "asc" | "desc";
}

/**
 * How a search runs: the engine decides how words are looked up. On SQLite every statement also
 * carries `deadline` (epoch ms) as a `portico_deadline` condition, evaluated per row visited; on
 * PostgreSQL the caller's transaction has a `statement_timeout` instead.
 */
export interface SearchContext {
  engine: Engine;
  deadline: number | undefined;
  /**
   * SQLite: the documents (`item_search_docs.doc`) holding each word term of the query, a JSON
   * array by the term's FTS5 query, from `lookUpWords`.
   */
  words?: ReadonlyMap<string, string>;
}

/**
 * Put first in an AND: SQLite evaluates the terms in order and stops at the first false one, so
 * after a condition that rejects most rows the deadline would hardly ever be looked at.
 */
function withinDeadline(ctx: SearchContext): Expression<SqlBool> {
  return ctx.deadline === undefined ? TRUE : sql<SqlBool>`portico_deadline(${ctx.deadline})`;
}

/**
 * Items whose words (`content/words.ts`) contain the words of `value` as a phrase, the last word a
 * prefix when `value` ends with `*`: in `title` only, or in any of title, description, snippet
 * and tags. A lookup in the full-text index of migration 0009: on PostgreSQL within the
 * statement; on SQLite done before it by `lookUpWords`, the documents it found passed in as one
 * JSON array, whose reading checks the deadline every 1,024 documents.
 */
function itemWords(ctx: SearchContext, value: string, field: "title" | null): Expression<SqlBool> {
  const query = wordQuery(value);
  if (query.kind === "everything") return TRUE;
  if (query.kind === "nothing") return FALSE;
  if (ctx.engine === "sqlite") {
    const docs = ctx.words?.get(ftsQuery(query, field ?? undefined));
    if (docs === undefined) throw new Error(`search words '${value}' were not looked up`);
    if (docs === "[]") return FALSE;
    const deadline =
      ctx.deadline === undefined
        ? TRUE
        : sql<SqlBool>`((key & 1023) <> 0 or portico_deadline(${ctx.deadline}))`;
    return sql<SqlBool>`items.id in (select item_id from item_search_docs where doc in (select value from json_each(${docs}) where ${deadline}))`;
  }
  const tsquery = sql`${tsqueryLiteral(query)}::tsquery`;
  const matches =
    field === "title"
      ? sql`item_words.title @@ ${tsquery}`
      : sql`(item_words.title @@ ${tsquery} or item_words.description @@ ${tsquery} or item_words.snippet @@ ${tsquery} or item_words.tags @@ ${tsquery})`;
  return sql<SqlBool>`items.id in (select item_words.item_id from item_words where ${matches})`;
}

/**
 * SQLite: looks up the documents of every distinct word term of `node` in the FTS5 index, one
 * statement per term, and returns `ctx` with them for `countItems` and `findItems`. An FTS5
 * phrase lookup cannot be stopped once started, and reads every position of its words in the
 * whole index whatever else the statement says (a rowid range included): 16 common words over
 * 3,000 long items took 33 ms. In one statement, 64 such lookups held the event loop for seconds.
 * Here the deadline is checked, and other requests are served, between lookups; one lookup is the
 * longest the event loop is held.
 */
export async function lookUpWords(q: Queryable, node: QueryNode, ctx: SearchContext): Promise<SearchContext> {
  if (ctx.engine !== "sqlite") return ctx;
  const queries = new Set<string>();
  collectWordQueries(node, queries);
  const words = new Map<string, string>();
  for (const match of queries) {
    if (words.size > 0) await new Promise((resolve) => setImmediate(resolve));
    if (ctx.deadline !== undefined && Date.now() > ctx.deadline) throw new DeadlineExceeded();
    const { rows } = await sql<{
      doc: number;
    }>`select rowid as doc from item_words where item_words match ${match}`.execute(q);
    words.set(match, JSON.stringify(rows.map((r) => r.doc)));
  }
  return { ...ctx, words };
}

/** The FTS5 queries of the word terms of `node`, each once. */
function collectWordQueries(node: QueryNode, out: Set<string>): void {
  switch (node.kind) {
    case "all":
      return;
    case "and":
    case "or":
      for (const child of node.children) collectWordQueries(child, out);
      return;
    case "not":
      collectWordQueries(node.child, out);
      return;
    case "term": {
      if (node.field !== null && node.field !== "title") return;
      const query = wordQuery(node.value);
      if (query.kind === "words") out.add(ftsQuery(query, node.field ?? undefined));
    }
  }
}

/**
 * Groups keep substring matching: they are few beside items, and the statement deadline bounds
 * what a hostile query can cost. A substring pattern for LIKE with the ESCAPE clause below: `%` and `_` typed by the user are
 * literal characters, not wildcards.
 */
function containsPattern(value: string): string {
  // A trailing `*` (`title:park*`) asks for a prefix, which a substring match already includes.
  const text = value.replace(/\*+$/, "").toLowerCase();
  return `%${escapeLike(text)}%`;
}

/**
 * Case-insensitive substring match. Both sides are lower-cased because PostgreSQL's LIKE is
 * case-sensitive where SQLite's is not; the explicit ESCAPE is needed because SQLite has no
 * default escape character.
 */
function contains(column: Expression<string>, value: string): Expression<SqlBool> {
  return sql<SqlBool>`lower(${column}) like ${containsPattern(value)} escape '\\'`;
}

/** `orgid:` names the organization; there is only one, so it matches everything or nothing. */
function orgCondition(value: string, orgId: string): Expression<SqlBool> {
  return value === orgId ? TRUE : FALSE;
}

/** The tree as SQL; combinators are written out so one function serves items and groups. */
function compile<EB>(
  eb: EB,
  node: QueryNode,
  term: (eb: EB, field: string | null, value: string) => Expression<SqlBool>,
): Expression<SqlBool> {
  switch (node.kind) {
    case "all":
      return TRUE;
    case "and":
      return sql<SqlBool>`(${sql.join(
        node.children.map((c) => compile(eb, c, term)),
        sql` and `,
      )})`;
    case "or":
      return sql<SqlBool>`(${sql.join(
        node.children.map((c) => compile(eb, c, term)),
        sql` or `,
      )})`;
    case "not":
      return sql<SqlBool>`not (${compile(eb, node.child, term)})`;
    case "term":
      return term(eb, node.field, node.value);
  }
}

function itemTerm(orgId: string, ctx: SearchContext) {
  return (eb: ItemsEb, field: string | null, value: string): Expression<SqlBool> => {
    const key = value.toLowerCase();
    switch (field) {
      case null:
      case "title":
        return itemWords(ctx, value, field);
      case "owner":
        return eb("items.owner_key", "=", key);
      case "type":
        return eb("items.type_key", "=", key);
      // IN rather than a correlated EXISTS: both engines can then drive the query from the tag
      // (or share) index instead of probing it once per item.
      case "tags":
        return eb(
          "items.id",
          "in",
          eb.selectFrom("item_tags").select("item_tags.item_id").where("item_tags.tag_key", "=", key),
        );
      case "group":
        return eb(
          "items.id",
          "in",
          eb
            .selectFrom("item_shares")
            .select("item_shares.item_id")
            .where("item_shares.group_id", "=", value),
        );
      case EXACT_TITLE:
        return eb("items.title_key", "=", key);
      case "id":
        return eb("items.id", "=", value);
      case "access":
        return eb("items.access", "=", key);
      case "orgid":
        return orgCondition(value, orgId);
      default:
        // The parser admits only the fields above.
        throw new Error(`unexpected item search field ${field}`);
    }
  };
}

/**
 * What an item search asks for: the `q` and `filter` terms AND-ed in one tree, a box the item's
 * extent must intersect, and category groups (each a list of lower-case paths of which the item
 * must have one; every group must be met).
 */
export interface ItemCriteria {
  node: QueryNode;
  bbox?: Box | undefined;
  categories?: readonly (readonly string[])[] | undefined;
}

/**
 * Items whose extent intersects `box`. A box across the antimeridian (`xmin` > `xmax`) is the two
 * boxes either side of it. Items without an extent never match.
 */
function intersects(box: Box): Expression<SqlBool> {
  const y = sql<SqlBool>`items.extent_ymin <= ${box.ymax} and items.extent_ymax >= ${box.ymin}`;
  const x =
    box.xmin <= box.xmax
      ? sql<SqlBool>`items.extent_xmin <= ${box.xmax} and items.extent_xmax >= ${box.xmin}`
      : sql<SqlBool>`(items.extent_xmax >= ${box.xmin} or items.extent_xmin <= ${box.xmax})`;
  return sql<SqlBool>`(${x} and ${y})`;
}

function inCategories(eb: ItemsEb, keys: readonly string[]): Expression<SqlBool> {
  return eb(
    "items.id",
    "in",
    eb
      .selectFrom("item_categories")
      .select("item_categories.item_id")
      .where("item_categories.category_key", "in", [...keys]),
  );
}

function criteriaCondition(eb: ItemsEb, criteria: ItemCriteria, orgId: string, ctx: SearchContext) {
  const parts = [compile(eb, criteria.node, itemTerm(orgId, ctx))];
  if (criteria.bbox) parts.push(intersects(criteria.bbox));
  for (const group of criteria.categories ?? []) parts.push(inCategories(eb, group));
  return parts;
}

/** The columns the visibility rule reads: the item's own, or their copies in `item_tags`. */
interface VisibilityColumns {
  id: Expression<string>;
  access: Expression<string>;
  ownerId: Expression<string>;
}

/**
 * What a visibility condition is part of: a page, which stops after `num` visible rows, or a
 * count (and aggregations), which visits every match. On PostgreSQL each gets its own form:
 * - a page probes each row's shares through a scalar subquery (the item's shares by primary key,
 *   each checked against the caller's memberships by primary key). Written as `exists`, the
 *   planner may instead hash every item shared with the caller's groups, once per statement
 *   (about 1,000 rows at 100,000 items, ten times as many at a million: 0.3 and 3 ms per page),
 *   because it prices the filter for all matching rows, not for the page's few;
 * - a count keeps `exists`, whose hash the planner picks by cost, and is written as a CASE: an OR
 *   of conditions on the index's columns makes it combine three bitmap scans of the index and
 *   then read the table's rows (at a million items, 1,800 heap pages for one tag, 52 ms, and
 *   21,000 for one type), where the CASE leaves it one index-only scan (4.6 ms for the tag).
 * SQLite runs `exists` per row and reads the index in order either way.
 */
export type VisibilityUse = "page" | "count";

/**
 * `wire.md` §6 read rules for items, as one condition (see `canViewItem`). Only `shared` items
 * can be reached through a group: sharing derives `access` (shared while any group holds a
 * private item, private otherwise), so the share lookup is skipped for the private majority.
 * Other shapes measured worse on one engine: a join of shares and memberships probes every caller
 * group per item on SQLite, and an uncorrelated `id IN (all items shared with the caller)` makes
 * PostgreSQL's planner give up index plans for `tags:` searches. See `VisibilityUse` for the forms.
 */
function itemVisibility<DB extends Database, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  viewer: SearchViewer,
  columns: VisibilityColumns,
  ctx: SearchContext,
  use: VisibilityUse,
): Expression<SqlBool> {
  if (viewer.seesAll) return TRUE;
  const { id, access, ownerId } = columns;
  if (viewer.userId === null) return viewer.orgIsPublic ? sql<SqlBool>`${access} = 'public'` : FALSE;
  const userId = viewer.userId;
  const db = eb as unknown as ExpressionBuilder<Database, never>;
  if (ctx.engine === "postgres" && use === "page") {
    const probe = sql`(select 1 from item_shares inner join group_members on group_members.group_id = item_shares.group_id and group_members.user_id = ${userId} where item_shares.item_id = ${id} limit 1)`;
    return sql<SqlBool>`(${ownerId} = ${userId} or ${access} in ('public', 'org') or (${access} = 'shared' and ${probe} is not null))`;
  }
  const sharedWithViewer = db.exists(
    db
      .selectFrom("item_shares")
      .select(sql`1`.as("one"))
      .where("item_shares.item_id", "=", id)
      .where(
        "item_shares.group_id",
        "in",
        db
          .selectFrom("group_members")
          .select("group_members.group_id")
          .where("group_members.user_id", "=", userId),
      ),
  );
  if (ctx.engine === "postgres") {
    return sql<SqlBool>`(case when ${ownerId} = ${userId} or ${access} in ('public', 'org') then true when ${access} = 'shared' then ${sharedWithViewer} else false end)`;
  }
  return sql<SqlBool>`(${ownerId} = ${userId} or ${access} in ('public', 'org') or (${access} = 'shared' and ${sharedWithViewer}))`;
}

const ITEM_COLUMNS: VisibilityColumns = {
  id: sql.ref("items.id"),
  access: sql.ref("items.access"),
  ownerId: sql.ref("items.owner_id"),
};
const TAG_COLUMNS: VisibilityColumns = {
  id: sql.ref("item_tags.item_id"),
  access: sql.ref("item_tags.access"),
  ownerId: sql.ref("item_tags.owner_id"),
};

/**
 * The tag of a query that is exactly one `tags:` term, the common form that the `item_tags`
 * search index (migration 0004) answers alone: counted and paged newest first from one range scan.
 */
function singleTag({ node, bbox, categories }: ItemCriteria): string | undefined {
  if (bbox || (categories && categories.length > 0)) return undefined;
  return node.kind === "term" && node.field === "tags" ? node.value.toLowerCase() : undefined;
}

function taggedVisible(
  q: Queryable,
  tag: string,
  viewer: SearchViewer,
  ctx: SearchContext,
  use: VisibilityUse,
) {
  return q
    .selectFrom("item_tags")
    .where("item_tags.tag_key", "=", tag)
    .where((eb) => eb.and([withinDeadline(ctx), itemVisibility(eb, viewer, TAG_COLUMNS, ctx, use)]));
}

/** The statement counting the rows `query` selects; `countFrom` reads its answer. */
function countStatement<TB extends keyof Database>(
  query: SelectQueryBuilder<Database, TB, object>,
): CompiledQuery {
  return query.select((eb) => eb.fn.countAll<number>().as("n")).compile();
}

/** The count a statement of `countStatement` answered. */
export function countFrom(rows: readonly unknown[]): number {
  return Number((rows[0] as { n: number | string | bigint }).n);
}

/** The number of rows `query` selects, counted now. */
async function countOf<TB extends keyof Database>(
  query: SelectQueryBuilder<Database, TB, object>,
): Promise<number> {
  const row = await query.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow();
  return Number(row.n);
}

function itemsMatching(
  q: Queryable,
  criteria: ItemCriteria,
  orgId: string,
  viewer: SearchViewer,
  ctx: SearchContext,
  use: VisibilityUse,
) {
  return q
    .selectFrom("items")
    .where((eb) =>
      eb.and([
        withinDeadline(ctx),
        ...criteriaCondition(eb, criteria, orgId, ctx),
        itemVisibility(eb, viewer, ITEM_COLUMNS, ctx, use),
      ]),
    );
}

/**
 * The statement counting the items that match `criteria` and that `viewer` may see (`countFrom`
 * reads its answer). Statements of this module are compiled, not run: the search service sends
 * those of one search together (`Db.readTogether`).
 */
export function countItems(
  q: Queryable,
  criteria: ItemCriteria,
  orgId: string,
  viewer: SearchViewer,
  ctx: SearchContext,
): CompiledQuery {
  const tag = singleTag(criteria);
  return tag === undefined
    ? countStatement(itemsMatching(q, criteria, orgId, viewer, ctx, "count"))
    : countStatement(taggedVisible(q, tag, viewer, ctx, "count"));
}

/**
 * Ties of counts in code-point order on both engines: PostgreSQL's default collation follows the
 * locale (spaces and punctuation weigh little), which would cut a `countSize` list elsewhere.
 */
function byCodePoint(ctx: SearchContext) {
  return ctx.engine === "postgres" ? sql`value collate "C" asc` : sql`value asc`;
}

/** Fields `countFields` may name, and what each counts. */
export type CountField = "type" | "access" | "tags" | "categories";

/**
 * The `countSize` most frequent values of `field` among the items `countItems` counts, most
 * frequent first (ties by value): one grouped statement over the matching items, under the
 * search's deadline like the rest. Values are the lower-case keys search compares (`type_key`,
 * tags and categories without case), so spellings that search treats as one are counted as one.
 */
export function countItemValues(
  q: Queryable,
  criteria: ItemCriteria,
  orgId: string,
  viewer: SearchViewer,
  field: CountField,
  size: number,
  ctx: SearchContext,
): CompiledQuery {
  const matching = itemsMatching(q, criteria, orgId, viewer, ctx, "count");
  const values =
    field === "type" || field === "access"
      ? matching.select(sql.ref(field === "type" ? "items.type_key" : "items.access").as("value"))
      : field === "tags"
        ? sql`select tag_key as value from item_tags where item_id in (${matching.select("items.id")})`
        : sql`select category_key as value from item_categories where item_id in (${matching.select("items.id")})`;
  return sql`
    select value, count(*) as count from (${values}) counted
    group by value order by count(*) desc, ${byCodePoint(ctx)} limit ${sql.lit(size)}`.compile(q);
}

/** The counts of a statement of `countItemValues`. */
export function valueCounts(rows: readonly unknown[]): { value: string; count: number }[] {
  return (rows as { value: string; count: number | string }[]).map((r) => ({
    value: String(r.value),
    count: Number(r.count),
  }));
}

/** An item of a search page, with the groups it is shared with (by id, in id order). */
export type SearchedItem = ItemRow & { shared_group_ids: string[] };

/**
 * The ids of the groups an item is shared with, read with the page so that the page is one
 * statement: an array on PostgreSQL, JSON text on SQLite (`pageOf` reads both). Ordered as
 * `sharedGroupIdsOf` orders them.
 */
function sharedGroupIds(ctx: SearchContext) {
  const ids =
    ctx.engine === "postgres"
      ? sql`array(select item_shares.group_id from item_shares where item_shares.item_id = items.id order by item_shares.group_id)`
      : sql`(select json_group_array(item_shares.group_id order by item_shares.group_id) from item_shares where item_shares.item_id = items.id)`;
  return ids.as("shared_group_ids");
}

/** The items of a statement of `findItems`. */
export function pageOf(rows: readonly unknown[]): SearchedItem[] {
  // The rows are the driver's fresh objects: read in place rather than copied (27 columns each).
  const page = rows as (ItemRow & { shared_group_ids: string | string[] })[];
  for (const row of page) {
    if (typeof row.shared_group_ids === "string")
      row.shared_group_ids = JSON.parse(row.shared_group_ids) as string[];
  }
  return page as SearchedItem[];
}

/**
 * The statement of one page of the items `countItems` counts, each with the groups it is shared
 * with (`pageOf` reads it).
 */
export function findItems(
  q: Queryable,
  criteria: ItemCriteria,
  orgId: string,
  viewer: SearchViewer,
  sort: SearchSort<ItemSortColumn>,
  page: SearchPage,
  ctx: SearchContext,
): CompiledQuery {
  const tag = singleTag(criteria);
  if (tag !== undefined && sort.column === "modified") {
    // The index's order is the page's order; only the page's rows are read from items.
    return taggedVisible(q, tag, viewer, ctx, "page")
      .innerJoin("items", "items.id", "item_tags.item_id")
      .selectAll("items")
      .select(sharedGroupIds(ctx))
      .orderBy("item_tags.modified", sort.direction)
      .orderBy("item_tags.item_id", sort.direction)
      .limit(sql.lit(page.limit))
      .offset(sql.lit(page.offset))
      .compile();
  }
  return itemsMatching(q, criteria, orgId, viewer, ctx, "page")
    .selectAll("items")
    .select(sharedGroupIds(ctx))
    .orderBy(`items.${sort.column}`, sort.direction)
    .orderBy("items.id", sort.direction)
    .limit(sql.lit(page.limit))
    .offset(sql.lit(page.offset))
    .compile();
}

function groupTerm(orgId: string) {
  return (eb: GroupsEb, field: string | null, value: string): Expression<SqlBool> => {
    switch (field) {
      case null:
        return eb.or([
          contains(eb.ref("groups.title_key"), value),
          contains(eb.ref("groups.description"), value),
          contains(eb.ref("groups.snippet"), value),
          contains(eb.ref("groups.tags"), value),
        ]);
      case "title":
        return contains(eb.ref("groups.title_key"), value);
      case "owner":
        return eb(eb.fn("lower", [eb.ref("groups.owner")]), "=", value.toLowerCase());
      case "tags":
        // Groups keep tags only as JSON text; the quoted JSON string of the tag is an exact match.
        return contains(eb.ref("groups.tags"), JSON.stringify(value.toLowerCase()));
      case "id":
        return eb("groups.id", "=", value);
      case "access":
        return eb("groups.access", "=", value.toLowerCase());
      case "orgid":
        return orgCondition(value, orgId);
      default:
        throw new Error(`unexpected group search field ${field}`);
    }
  };
}

/** The read rules for groups, as one condition (see `canViewGroup`). */
function groupVisibility(eb: GroupsEb, viewer: SearchViewer): Expression<SqlBool> {
  if (viewer.seesAll) return TRUE;
  if (viewer.userId === null) return viewer.orgIsPublic ? eb("groups.access", "=", "public") : FALSE;
  return eb.or([
    eb("groups.access", "in", ["public", "org"]),
    eb(
      "groups.id",
      "in",
      eb
        .selectFrom("group_members")
        .select("group_members.group_id")
        .where("group_members.user_id", "=", viewer.userId),
    ),
  ]);
}

function groupsMatching(
  q: Queryable,
  node: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  ctx: SearchContext,
) {
  const term = groupTerm(orgId);
  return q
    .selectFrom("groups")
    .where((eb) => eb.and([withinDeadline(ctx), compile(eb, node, term), groupVisibility(eb, viewer)]));
}

export async function countGroups(
  q: Queryable,
  node: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  ctx: SearchContext,
): Promise<number> {
  return countOf(groupsMatching(q, node, orgId, viewer, ctx));
}

export function findGroups(
  q: Queryable,
  node: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  sort: SearchSort<GroupSortColumn>,
  page: SearchPage,
  ctx: SearchContext,
): Promise<GroupRow[]> {
  return groupsMatching(q, node, orgId, viewer, ctx)
    .selectAll("groups")
    .orderBy(`groups.${sort.column}`, sort.direction)
    .orderBy("groups.id", sort.direction)
    .limit(sql.lit(page.limit))
    .offset(sql.lit(page.offset))
    .execute();
}

type UsersEb = ExpressionBuilder<Database, "users">;
export type UserSortColumn = "username_key" | "full_name" | "created" | "last_login" | "role";

/**
 * Who may be found by a user search. `seesAll`: administrators who view users (and every caller of
 * the organization's search, which needs that privilege). Otherwise the caller and the members
 * whose profile is not private, as `community/users/<u>` shows them.
 */
function userVisibility(eb: UsersEb, viewer: SearchViewer): Expression<SqlBool> {
  if (viewer.seesAll) return TRUE;
  if (viewer.userId === null) return FALSE;
  return eb.or([eb("users.id", "=", viewer.userId), eb("users.access", "in", ["org", "public"])]);
}

/**
 * A user search term. In `q`, bare words and the name fields match substrings (users are few
 * beside items, and the deadline bounds the scan), `username:` matches the whole name or, with a
 * trailing `*`, its start; in `filter` (`exact`) every field matches its whole value, without case.
 */
function userTerm(orgId: string, exact: boolean) {
  return (eb: UsersEb, field: string | null, value: string): Expression<SqlBool> => {
    const key = value.toLowerCase();
    const nameMatch = (column: "users.full_name" | "users.first_name" | "users.last_name") =>
      exact ? eb(eb.fn("lower", [eb.ref(column)]), "=", key) : contains(eb.ref(column), value);
    switch (field) {
      case null:
        return eb.or([
          contains(eb.ref("users.username_key"), value),
          contains(eb.ref("users.full_name"), value),
        ]);
      case "username":
        if (!exact && key.endsWith("*")) {
          return sql<SqlBool>`users.username_key like ${`${escapeLike(key.replace(/\*+$/, ""))}%`} escape '\\'`;
        }
        return eb("users.username_key", "=", key);
      case "fullname":
        return nameMatch("users.full_name");
      case "firstname":
        return nameMatch("users.first_name");
      case "lastname":
        return nameMatch("users.last_name");
      case "email":
        return eb(eb.fn("lower", [eb.ref("users.email")]), "=", key);
      case "role":
        return eb.or([eb("users.role", "=", key), eb("users.role_id", "=", value)]);
      case "access":
        return eb("users.access", "=", key);
      case "orgid":
        return orgCondition(value, orgId);
      default:
        throw new Error(`unexpected user search field ${field}`);
    }
  };
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function usersMatching(
  q: Queryable,
  node: QueryNode,
  filter: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  ctx: SearchContext,
) {
  return q
    .selectFrom("users")
    .where((eb) =>
      eb.and([
        withinDeadline(ctx),
        compile(eb, node, userTerm(orgId, false)),
        compile(eb, filter, userTerm(orgId, true)),
        userVisibility(eb, viewer),
      ]),
    );
}

export async function countUsers(
  q: Queryable,
  node: QueryNode,
  filter: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  ctx: SearchContext,
): Promise<number> {
  return countOf(usersMatching(q, node, filter, orgId, viewer, ctx));
}

export function findUsers(
  q: Queryable,
  node: QueryNode,
  filter: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  sort: SearchSort<UserSortColumn>,
  page: SearchPage,
  ctx: SearchContext,
) {
  return usersMatching(q, node, filter, orgId, viewer, ctx)
    .selectAll("users")
    .orderBy(`users.${sort.column}`, sort.direction)
    .orderBy("users.id", sort.direction)
    .limit(sql.lit(page.limit))
    .offset(sql.lit(page.offset))
    .execute();
}
