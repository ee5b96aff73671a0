import { type CompiledQuery, createQueryId } from "kysely";
import type { Queryable } from "./database.js";
import { prepared } from "./pg-driver.js";

/**
 * Marks a value while a statement is compiled. NUL is in no value these statements carry (it is
 * refused in parameters and path segments, and ids and times never hold it), so a marked value
 * cannot be mistaken for a real one.
 */
const MARK = "\u0000";

interface Template {
  compiled: CompiledQuery;
  /** For each parameter: the index of the value it is, or a constant of the statement. */
  sources: readonly ({ value: number } | { constant: unknown })[];
}

/**
 * A statement whose SQL text never depends on its values (a lock of one user by key, an event's
 * insert), compiled by Kysely once per dialect and then only given its values. Kysely builds and
 * compiles a statement's tree on every call, which on a hot write path costs more than the rest of
 * the statement's way to the database.
 *
 * `build` must make the same text whatever the values (no branch on a value, no value made into a
 * literal) and must pass each value on unchanged: a value it transforms (lower-cases, joins) is
 * refused at the first compilation, loudly, since its parameter would not be the value. Callers
 * transform values before they are given.
 */
export function fixedStatement<V extends readonly unknown[]>(
  build: (q: Queryable, ...values: V) => { compile(): CompiledQuery },
): (q: Queryable, ...values: V) => CompiledQuery {
  // By adapter: the SQL text is the dialect's; Kysely and its transactions share one adapter.
  const templates = new WeakMap<object, Template>();
  return (q, ...values) => {
    const adapter = q.getExecutor().adapter;
    let template = templates.get(adapter);
    if (template === undefined) {
      template = compileTemplate(q, build, values.length);
      templates.set(adapter, template);
    }
    const parameters = template.sources.map((s) => ("value" in s ? values[s.value] : s.constant));
    // A query id of its own, as Kysely gives each compilation (plugins key results by it). Its
    // text is fixed, so PostgreSQL can keep it parsed and planned per connection.
    return prepared({
      query: template.compiled.query,
      queryId: createQueryId(),
      sql: template.compiled.sql,
      parameters,
    });
  };
}

function compileTemplate<V extends readonly unknown[]>(
  q: Queryable,
  build: (q: Queryable, ...values: V) => { compile(): CompiledQuery },
  count: number,
): Template {
  const marks = Array.from({ length: count }, (_, i) => `${MARK}Value${i}${MARK}`);
  const compiled = build(q, ...(marks as unknown as V)).compile();
  const sources = compiled.parameters.map((parameter) => {
    const index = marks.indexOf(parameter as string);
    if (index >= 0) return { value: index };
    if (typeof parameter === "string" && parameter.includes(MARK)) {
      throw new Error(`fixed statement passes a value on transformed: ${compiled.sql}`);
    }
    return { constant: parameter };
  });
  for (let i = 0; i < count; i++) {
    if (!sources.some((s) => "value" in s && s.value === i)) {
      throw new Error(`fixed statement does not use value ${i} as a parameter: ${compiled.sql}`);
    }
  }
  return { compiled, sources };
}
