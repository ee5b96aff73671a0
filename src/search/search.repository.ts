import { type Expression, type ExpressionBuilder, type Selectable, type SqlBool, sql } from "kysely";
import type { ItemRow } from "../content/item.repository.js";
import type { Queryable } from "../db/database.js";
import type { Database, GroupTable } from "../db/schema.js";
import type { QueryNode } from "./query.js";

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
 * A substring pattern for LIKE with the ESCAPE clause below: `%` and `_` typed by the user are
 * literal characters, not wildcards.
 */
function containsPattern(value: string): string {
  // A trailing `*` (`title:park*`) asks for a prefix, which a substring match already includes.
  const text = value.replace(/\*+$/, "").toLowerCase();
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
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

function itemTerm(orgId: string) {
  return (eb: ItemsEb, field: string | null, value: string): Expression<SqlBool> => {
    const key = value.toLowerCase();
    switch (field) {
      case null:
        // Items store tags as JSON text: a substring of that text is a substring of some tag.
        return eb.or([
          contains(eb.ref("items.title_key"), value),
          contains(eb.ref("items.description"), value),
          contains(eb.ref("items.snippet"), value),
          contains(eb.ref("items.tags"), value),
        ]);
      case "title":
        return contains(eb.ref("items.title_key"), value);
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
 * `wire.md` §6 read rules for items, as one condition (see `canViewItem`). Only `shared` items
 * can be reached through a group: sharing derives `access` (shared while any group holds a
 * private item, private otherwise), so the share lookup is skipped for the private majority. The
 * group branch looks up the item's shares and tests them against the caller's groups, a set both
 * engines build once per query. Other shapes measured worse on one engine: a join of shares and
 * memberships probes every caller group per item on SQLite, and an uncorrelated `id IN (all items
 * shared with the caller)` makes PostgreSQL's planner give up index plans for `tags:` searches.
 */
function itemVisibility(eb: ItemsEb, viewer: SearchViewer): Expression<SqlBool> {
  if (viewer.seesAll) return TRUE;
  if (viewer.userId === null) return viewer.orgIsPublic ? eb("items.access", "=", "public") : FALSE;
  return eb.or([
    eb("items.owner_id", "=", viewer.userId),
    eb("items.access", "in", ["public", "org"]),
    eb.and([
      eb("items.access", "=", "shared"),
      eb.exists(
        eb
          .selectFrom("item_shares")
          .select(sql`1`.as("one"))
          .whereRef("item_shares.item_id", "=", "items.id")
          .where(
            "item_shares.group_id",
            "in",
            eb
              .selectFrom("group_members")
              .select("group_members.group_id")
              .where("group_members.user_id", "=", viewer.userId),
          ),
      ),
    ]),
  ]);
}

export async function searchItems(
  q: Queryable,
  node: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  sort: SearchSort<ItemSortColumn>,
  page: SearchPage,
): Promise<{ total: number; rows: ItemRow[] }> {
  const term = itemTerm(orgId);
  const base = q
    .selectFrom("items")
    .where((eb) => eb.and([compile(eb, node, term), itemVisibility(eb, viewer)]));
  const [count, rows] = await Promise.all([
    base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    base
      .selectAll("items")
      .orderBy(`items.${sort.column}`, sort.direction)
      .orderBy("items.id", sort.direction)
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
  ]);
  return { total: Number(count.n), rows };
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

export async function searchGroups(
  q: Queryable,
  node: QueryNode,
  orgId: string,
  viewer: SearchViewer,
  sort: SearchSort<GroupSortColumn>,
  page: SearchPage,
): Promise<{ total: number; rows: GroupRow[] }> {
  const term = groupTerm(orgId);
  const base = q
    .selectFrom("groups")
    .where((eb) => eb.and([compile(eb, node, term), groupVisibility(eb, viewer)]));
  const [count, rows] = await Promise.all([
    base.select((eb) => eb.fn.countAll<number>().as("n")).executeTakeFirstOrThrow(),
    base
      .selectAll("groups")
      .orderBy(`groups.${sort.column}`, sort.direction)
      .orderBy("groups.id", sort.direction)
      .limit(page.limit)
      .offset(page.offset)
      .execute(),
  ]);
  return { total: Number(count.n), rows };
}
