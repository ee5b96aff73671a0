import type { CompiledQuery } from "kysely";
import type { Queryable } from "../db/database.js";
import { withCachedPlan } from "../db/pg-driver.js";
import type { QueryNode } from "./query.js";
import {
  type CountField,
  countItems,
  countItemValues,
  findItems,
  type ItemCriteria,
  type ItemSortColumn,
  type SearchContext,
  type SearchPage,
  type SearchSort,
  type SearchViewer,
} from "./search.repository.js";

/** Shapes kept; past this many (a client sending ever new trees of terms) the cache starts over. */
const SHAPE_LIMIT = 500;

/**
 * Marks a value as a slot while a shape is compiled. NUL is in no search value (parameters and
 * path segments refuse it), so a marked value cannot be mistaken for a real one.
 */
const MARK = "\u0000";
/** A slot's marked value as compiled (`Slot3A`, or `slot3a` lower-cased), between marks. */
const SLOT = /^(S|s)lot(\d+)[ABab]$/;

function slotIn(parameter: unknown): RegExpExecArray | null {
  if (typeof parameter !== "string" || !parameter.startsWith(MARK) || !parameter.endsWith(MARK)) return null;
  return SLOT.exec(parameter.slice(MARK.length, -MARK.length));
}

/** Where a parameter of a cached statement comes from: a constant of the shape, or a slot's value. */
type Source = { constant: unknown } | { slot: number; lower: boolean };

interface Template {
  compiled: CompiledQuery;
  sources: readonly Source[];
}

/**
 * The search reduced to its shape: everything that decides the SQL text (fields and combinators
 * of the terms, which visibility rule, sort, paging literals), with the values that only become
 * parameters taken out as numbered slots. `build` makes the search again with any slot values.
 */
interface Shape {
  key: string;
  values: unknown[];
  build(slot: (i: number) => unknown): { criteria: ItemCriteria; viewer: SearchViewer; ctx: SearchContext };
}

/**
 * Item search statements, compiled once per shape. Kysely builds and compiles a statement's tree
 * on every call, a sixth of a search's CPU time on SQLite; a search of a shape seen before takes
 * the SQL text of its first compilation and only binds its own values. Which parameter comes from
 * which value is learned by compiling the shape twice, each time with other marked values in its
 * slots: a parameter that is a slot's marked value (or its lower case) is that slot; one equal in
 * both is a constant; anything else (a value the SQL text depends on, a parameter derived from a
 * value otherwise) leaves the shape uncached, compiled anew each time as before. What the two
 * compilations cannot see is a branch on a value that both marked values take alike (`orgid:`
 * compares its value with the organization's id): terms whose SQL depends on their value (words,
 * `orgid:`) and boxes (across the antimeridian or not) therefore never make a shape.
 */
export class ItemStatements {
  private readonly templates = new Map<string, Template | null>();
  /**
   * Shapes seen once: learning costs two compilations, so a shape is learned when it comes again.
   * A client paging through ever new offsets, or sending ever new trees, then costs one
   * compilation per search as without the cache, and does not push out the shapes in use.
   */
  private readonly seenOnce = new Set<string>();

  constructor(private readonly q: Queryable) {}

  /** How many shapes have a cached statement (for tests). */
  get cachedShapes(): number {
    let n = 0;
    for (const template of this.templates.values()) if (template !== null) n++;
    return n;
  }

  count(criteria: ItemCriteria, orgId: string, viewer: SearchViewer, ctx: SearchContext): CompiledQuery {
    return this.statement("count", criteria, viewer, ctx, (s) =>
      countItems(this.q, s.criteria, orgId, s.viewer, s.ctx),
    );
  }

  page(
    criteria: ItemCriteria,
    orgId: string,
    viewer: SearchViewer,
    sort: SearchSort<ItemSortColumn>,
    page: SearchPage,
    ctx: SearchContext,
  ): CompiledQuery {
    return this.statement(
      `page|${sort.column}|${sort.direction}|${page.limit}|${page.offset}`,
      criteria,
      viewer,
      ctx,
      (s) => findItems(this.q, s.criteria, orgId, s.viewer, sort, page, s.ctx),
    );
  }

  countValues(
    criteria: ItemCriteria,
    orgId: string,
    viewer: SearchViewer,
    field: CountField,
    size: number,
    ctx: SearchContext,
  ): CompiledQuery {
    return this.statement(`values|${field}|${size}`, criteria, viewer, ctx, (s) =>
      countItemValues(this.q, s.criteria, orgId, s.viewer, field, size, s.ctx),
    );
  }

  private statement(
    kind: string,
    criteria: ItemCriteria,
    viewer: SearchViewer,
    ctx: SearchContext,
    compile: (search: ReturnType<Shape["build"]>) => CompiledQuery,
  ): CompiledQuery {
    const shape = shapeOf(criteria, viewer, ctx);
    if (shape === undefined) return compile({ criteria, viewer, ctx });
    const key = `${kind}|${shape.key}`;
    let template = this.templates.get(key);
    if (template === undefined) {
      if (!this.seenOnce.has(key)) {
        if (this.seenOnce.size >= SHAPE_LIMIT) this.seenOnce.clear();
        this.seenOnce.add(key);
        return compile({ criteria, viewer, ctx });
      }
      this.seenOnce.delete(key);
      template = learn(shape, compile);
      if (this.templates.size >= SHAPE_LIMIT) this.templates.clear();
      this.templates.set(key, template);
    }
    if (template === null) return compile({ criteria, viewer, ctx });
    const { values } = shape;
    const parameters = template.sources.map((source) => {
      if ("constant" in source) return source.constant;
      const value = values[source.slot];
      return source.lower ? (value as string).toLowerCase() : value;
    });
    // The tree (`query`) stays the marked compilation's: drivers send `sql` and `parameters` only.
    // Its text repeats by construction: on PostgreSQL it is prepared once per connection.
    return withCachedPlan({ ...template.compiled, parameters });
  }
}

/** The template of `shape`, or null when its parameters cannot all be traced to slots. */
function learn(
  shape: Shape,
  compile: (search: ReturnType<Shape["build"]>) => CompiledQuery,
): Template | null {
  const a = compile(shape.build((i) => `${MARK}Slot${i}A${MARK}`));
  const b = compile(shape.build((i) => `${MARK}Slot${i}B${MARK}`));
  if (a.sql !== b.sql || a.sql.includes(MARK) || a.parameters.length !== b.parameters.length) return null;
  const sources: Source[] = [];
  for (let i = 0; i < a.parameters.length; i++) {
    const pa = a.parameters[i];
    const pb = b.parameters[i];
    const ma = slotIn(pa);
    const mb = slotIn(pb);
    if (ma && mb && ma[1] === mb[1] && ma[2] === mb[2] && pa !== pb) {
      sources.push({ slot: Number(ma[2]), lower: ma[1] === "s" });
    } else if (ma || mb || pa !== pb || (typeof pa === "string" && pa.includes(MARK))) {
      return null;
    } else {
      sources.push({ constant: pa });
    }
  }
  return { compiled: a, sources };
}

/** The shape of a search, or undefined when its SQL depends on its values beyond parameters. */
function shapeOf(criteria: ItemCriteria, viewer: SearchViewer, ctx: SearchContext): Shape | undefined {
  if (criteria.bbox !== undefined) return undefined;
  const values: unknown[] = [];
  const parts: string[] = [];
  const node = nodeShape(criteria.node, values, parts);
  if (node === undefined) return undefined;
  const categories = (criteria.categories ?? []).map((group) =>
    group.map((key) => {
      values.push(key);
      return values.length - 1;
    }),
  );
  parts.push(`c${categories.map((g) => g.length).join(",")}`);
  const user = viewer.userId === null ? undefined : values.push(viewer.userId) - 1;
  const deadline = ctx.deadline === undefined ? undefined : values.push(ctx.deadline) - 1;
  parts.push(
    `v${viewer.seesAll ? 1 : 0}${viewer.orgIsPublic ? 1 : 0}${user === undefined ? 0 : 1}`,
    `e${ctx.engine}${deadline === undefined ? 0 : 1}`,
  );
  return {
    key: parts.join("|"),
    values,
    build: (slot) => ({
      criteria: {
        node: node(slot),
        categories:
          criteria.categories === undefined
            ? undefined
            : categories.map((g) => g.map((i) => slot(i) as string)),
      },
      viewer: { ...viewer, userId: user === undefined ? null : (slot(user) as string) },
      ctx: { engine: ctx.engine, deadline: deadline === undefined ? undefined : (slot(deadline) as number) },
    }),
  };
}

/**
 * Writes the shape of `node` into `parts` and its values into `values`; returns how to build the
 * node again from slots, or undefined for a term whose SQL depends on its value.
 */
function nodeShape(
  node: QueryNode,
  values: unknown[],
  parts: string[],
): ((slot: (i: number) => unknown) => QueryNode) | undefined {
  switch (node.kind) {
    case "all":
      parts.push("*");
      return () => node;
    case "and":
    case "or": {
      parts.push(`${node.kind}(${node.children.length}`);
      const children: ((slot: (i: number) => unknown) => QueryNode)[] = [];
      for (const child of node.children) {
        const built = nodeShape(child, values, parts);
        if (built === undefined) return undefined;
        children.push(built);
      }
      parts.push(")");
      const kind = node.kind;
      return (slot) => ({ kind, children: children.map((c) => c(slot)) });
    }
    case "not": {
      parts.push("not");
      const child = nodeShape(node.child, values, parts);
      return child === undefined ? undefined : (slot) => ({ kind: "not", child: child(slot) });
    }
    case "term": {
      const { field } = node;
      // Words are looked up before the statement and written into it; `orgid:` is true or false.
      if (field === null || field === "title" || field === "orgid") return undefined;
      parts.push(`t:${field}`);
      const i = values.push(node.value) - 1;
      return (slot) => ({ kind: "term", field, value: slot(i) as string });
    }
  }
}
