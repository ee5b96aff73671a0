import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  type TransactionSettings,
} from "kysely";
import type pg from "pg";
import { isConnectionLoss } from "./availability.js";

/** node-postgres's own mapping of a value to its wire text, as every `client.query` applies it. */
const { prepareValue } = createRequire(import.meta.url)("pg/lib/utils") as {
  prepareValue: (value: unknown) => string | Buffer | null;
};

/**
 * Kysely's PostgreSQL driver, sending fewer messages. node-postgres waits for each statement's
 * answer before it sends the next, so a transaction of a few statements costs a round trip per
 * statement plus BEGIN and COMMIT, and each round trip is a system call on both sides. This
 * driver saves two kinds of them, changing nothing of what the transaction does:
 *
 * - BEGIN is not sent on its own: it goes in front of the transaction's first statement, in one
 *   simple-protocol message (`BEGIN; <statement>`; PostgreSQL keeps the block open past the
 *   message). A transaction that sends nothing sends neither BEGIN nor COMMIT.
 * - Statements marked `deferred` (writes whose answer nobody reads: an event recorded, the change
 *   log's row) are not sent when executed but in front of the next statement, or of COMMIT, in the
 *   same message. They still run in order, in the transaction; if one fails, the statements after
 *   it in the message do not run and the error is the transaction's (it rolls back, as any failed
 *   statement makes it do).
 *
 * Joining statements needs the simple protocol, which has no parameters: the values are written
 * into the text as quoted literals, which PostgreSQL types from their context exactly as it types
 * an untyped parameter. Only values are written so, never identifiers (those are Kysely's, from
 * code). Strings are `E'...'` literals with backslashes and quotes doubled, whatever the server's
 * `standard_conforming_strings`; only strings (without NUL), finite numbers, bigints, booleans and
 * nulls are written so, in SQL whose every `$n` stands outside quotes and comments; any other
 * statement is sent on its own, as Kysely's driver would, after what is pending.
 *
 * Statements marked `prepared` (texts that never change, with values: the hot writes' lock, update
 * and inserts) take the extended protocol instead: each connection parses and plans such a text
 * once, as a named statement, and then only binds values to it. A message that holds one goes as
 * one pipeline (Bind/Execute per statement, BEGIN and COMMIT included, one Sync at the end): the
 * same single round trip, and after an error the server skips the rest up to the Sync, as it skips
 * the rest of a simple-protocol message.
 */
export class BatchingPostgresDriver implements Driver {
  private readonly connections = new WeakMap<pg.PoolClient, BatchingConnection>();

  constructor(private readonly pool: { connect(): Promise<pg.PoolClient>; end(): Promise<void> }) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const client = await this.pool.connect();
    let connection = this.connections.get(client);
    if (!connection) {
      connection = new BatchingConnection(client);
      this.connections.set(client, connection);
    }
    return connection;
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const c = connection as BatchingConnection;
    let begin = "BEGIN";
    if (settings.isolationLevel) begin += ` ISOLATION LEVEL ${settings.isolationLevel.toUpperCase()}`;
    if (settings.accessMode) begin += ` ${settings.accessMode.toUpperCase()}`;
    c.begin(begin);
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as BatchingConnection).end("COMMIT");
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as BatchingConnection).end("ROLLBACK");
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await (connection as BatchingConnection).run(`SAVEPOINT ${identifier(name)}`);
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await (connection as BatchingConnection).run(`ROLLBACK TO SAVEPOINT ${identifier(name)}`);
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await (connection as BatchingConnection).run(`RELEASE SAVEPOINT ${identifier(name)}`);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as BatchingConnection).release();
  }

  async destroy(): Promise<void> {
    await this.pool.end();
  }
}

/** Statements a caller marked as deferrable (see `deferred`). */
const deferrable = new WeakSet<CompiledQuery>();

/**
 * Marks `query` so that, executed inside a transaction on PostgreSQL, it travels with the next
 * statement or the COMMIT instead of costing a round trip of its own. Its result is empty; a
 * failure surfaces from the next statement or the commit. Other drivers run it at once.
 */
export function deferred(query: CompiledQuery): CompiledQuery {
  deferrable.add(query);
  return query;
}

/** Statements a caller marked as preparable (see `prepared`). */
const preparable = new WeakSet<CompiledQuery>();

/**
 * Marks `query`, whose text serves many values and is one of a fixed few (a statement of code, not
 * one built per request), to be parsed once per connection on PostgreSQL and then only given its
 * values (a named prepared statement). Other drivers run it as usual.
 */
export function prepared(query: CompiledQuery): CompiledQuery {
  preparable.add(query);
  return query;
}

/**
 * The name each prepared text has on every connection: stable for the process, one per text. The
 * texts are code's, so few; past `PREPARED_NAMES_LIMIT` (a run of tests, each with a schema of its
 * own, could make more) further texts are sent unprepared.
 */
const preparedNames = new Map<string, string>();
const PREPARED_NAMES_LIMIT = 1000;

function preparedName(sql: string): string | undefined {
  let name = preparedNames.get(sql);
  if (name === undefined && preparedNames.size < PREPARED_NAMES_LIMIT) {
    name = `portico_${preparedNames.size + 1}`;
    preparedNames.set(sql, name);
  }
  return name;
}

/** Statements a caller marked as repeating (see `withCachedPlan`). */
const planned = new WeakSet<CompiledQuery>();

/**
 * Marks `query` as one whose text repeats with other values (a search of a known shape): sent in
 * a group of `inOneMessage`, it then runs as a named statement its connection parsed once (in the
 * group's own pipeline, the first time), so that PostgreSQL parses and analyses the text once per
 * connection rather than per search, and may keep a generic plan (its `plan_cache_mode`: after
 * five custom plans, the generic one when it costs no more). At most `PLANS_PER_CONNECTION` are
 * kept per connection, the least recently used closed first. Other drivers and other paths run
 * it as any statement.
 */
export function withCachedPlan(query: CompiledQuery): CompiledQuery {
  planned.add(query);
  return query;
}

/** What each query made by `inOneMessage` stands for. */
const groups = new WeakMap<CompiledQuery, { statements: readonly CompiledQuery[]; settings: number }>();

/**
 * One query standing for `statements`, reads to run outside a transaction: this driver sends them
 * in one extended-protocol pipeline (Bind/Execute per statement, one Sync), which PostgreSQL runs
 * as one implicit transaction, led by `set_config(name, value, true)` of each of `settings`, which
 * then hold for these statements only and end with them. The result's `rows` are one array of rows
 * per statement. A statement PostgreSQL cannot parse with untyped parameters (42P18: a parameter
 * whose type only its literal decides) is remembered, and a group that holds one is sent in one
 * simple-protocol message with its values written in (see `inline`), or in an explicit
 * transaction, a round trip each, when a value cannot be written so. Its own text calls a
 * function that does not exist, so that a driver that does not know it fails loudly rather than
 * running something else.
 *
 * The pipeline is what makes a search cheap: the settings are a named statement bound anew rather
 * than a text parsed and planned per search, statements marked `withCachedPlan` are named
 * statements bound to their values (no literals written, no `EXECUTE` text parsed), and the rows
 * of a named statement whose row description the connection knows come without one (no Describe):
 * they are made by a function compiled for its columns (see `RowShape`). Measured alone, one
 * connection, a search's page at 100,000 items: PostgreSQL's CPU per search 140-180 -> 80-140 µs,
 * node's 100-135 -> 55-65 µs against `EXECUTE` in a simple-protocol message.
 */
export function inOneMessage(
  statements: readonly CompiledQuery[],
  settings: Readonly<Record<string, string>> = {},
): CompiledQuery {
  const set = Object.entries(settings).map(([name, value]) =>
    prepared(CompiledQuery.raw("SELECT set_config($1, $2, true)", [name, value])),
  );
  const query = CompiledQuery.raw("SELECT portico_statements_sent_in_one_message()", []);
  groups.set(query, { statements: [...set, ...statements], settings: set.length });
  return query;
}

function identifier(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`invalid savepoint name: ${name}`);
  return name;
}

/** One statement of a message: its text and values. */
interface Step {
  sql: string;
  parameters: readonly unknown[];
  /** Its prepared statement's name, if it is one. */
  name: string | undefined;
}

/**
 * Statements of `withCachedPlan` kept per connection, at most. Each holds its parsed text and
 * plans in the backend; past this many, the least recently used is closed in the pipeline that
 * parses the next, so a client sending ever new shapes costs a Parse per shape, as a first
 * sighting does, and no memory.
 */
const PLANS_PER_CONNECTION = 64;

/**
 * Texts PostgreSQL could not parse with untyped parameters (42P18): groups holding one are sent
 * inlined (see `inOneMessage`).
 */
const unpreparable = new Set<string>();

/** The prepared statement's name of each text (a digest, so that any connection agrees). */
const planNames = new Map<string, string>();

function planName(sql: string): string {
  let name = planNames.get(sql);
  if (name === undefined) {
    name = `portico_plan_${createHash("sha256").update(sql).digest("hex").slice(0, 32)}`;
    if (planNames.size >= INLINE_CACHE_LIMIT) planNames.clear();
    planNames.set(sql, name);
  }
  return name;
}

class BatchingConnection implements DatabaseConnection {
  /** Names of this connection's statements of `withCachedPlan`, least recently used first. */
  private readonly plans = new Set<string>();
  /** BEGIN not yet sent, if the transaction has sent nothing yet. */
  private pendingBegin: string | undefined;
  private inTransaction = false;
  /** Deferred statements not yet sent (each inlinable, or prepared). */
  private pending: CompiledQuery[] = [];
  /**
   * The prepared statements this connection's server session holds: `ready`, or `unsure` when a
   * message that parsed or ran it failed there (it may exist or not: closed before it is parsed
   * again, which is no error if it does not exist).
   */
  private readonly statements = new Map<string, "ready" | "unsure">();
  /** The rows of the prepared statements `ready` here whose row description was read. */
  private readonly shapes = new Map<string, RowShape>();
  /** node-postgres's parsers of this connection (the pool's `types`). */
  private readonly types: TypeParsers;
  /** The error that ended this connection's session, if one did (see `release`). */
  private lost: Error | undefined;

  constructor(private readonly client: pg.PoolClient) {
    this.types = { getTypeParser: (oid, format) => client.getTypeParser(oid, format) };
  }

  begin(statement: string): void {
    this.pendingBegin = statement;
    this.inTransaction = true;
    this.pending = [];
  }

  /** COMMIT or ROLLBACK, with what is pending in front of a COMMIT. */
  async end(statement: "COMMIT" | "ROLLBACK"): Promise<void> {
    return this.ending(statement).catch((err: unknown) => this.failed(err));
  }

  private async ending(statement: "COMMIT" | "ROLLBACK"): Promise<void> {
    const begun = this.pendingBegin === undefined;
    const pending = statement === "COMMIT" ? this.pending : [];
    this.pendingBegin = statement === "COMMIT" ? this.pendingBegin : undefined;
    this.pending = [];
    this.inTransaction = false;
    // Nothing was ever sent: there is no transaction on the server to end.
    if (!begun && pending.length === 0) {
      this.pendingBegin = undefined;
      return;
    }
    const head = this.pendingBegin ? [this.pendingBegin] : [];
    this.pendingBegin = undefined;
    if (pending.some((q) => preparable.has(q))) {
      await this.pipeline([...head.map(textStep), ...pending.map(step), textStep(statement)]);
      return;
    }
    await this.client.query([...head, ...pending.map(inlined), statement].join("; "));
  }

  release(): void {
    this.pendingBegin = undefined;
    this.pending = [];
    this.inTransaction = false;
    // Given the error, the pool ends the client instead of keeping it: the server may end the
    // session (pg_terminate_backend, a shutdown) before the socket closes, and the next request
    // handed the client would fail on it ("Connection terminated unexpectedly").
    this.client.release(this.lost);
  }

  /** Rethrows `err`, noting first whether it ended the session (see `release`). */
  private failed(err: unknown): never {
    if (this.lost === undefined && isConnectionLoss(err)) {
      this.lost = err instanceof Error ? err : new Error(String(err));
    }
    throw err;
  }

  /** A statement without parameters, after what is pending. */
  async run(text: string): Promise<void> {
    await this.send(text, []).catch((err: unknown) => this.failed(err));
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    return this.execute<R>(compiled).catch((err: unknown) => this.failed(err));
  }

  private async execute<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const group = groups.get(compiled);
    if (group) {
      const { rows } = await this.sendGroup(group.statements);
      return { rows: rows.slice(group.settings) as R[] };
    }
    if (
      this.inTransaction &&
      deferrable.has(compiled) &&
      ((preparable.has(compiled) && preparedName(compiled.sql) !== undefined) ||
        inline(compiled.sql, compiled.parameters) !== undefined)
    ) {
      this.pending.push(compiled);
      return { rows: [] };
    }
    if (preparable.has(compiled) && preparedName(compiled.sql) !== undefined) {
      const head = [...(this.pendingBegin ? [textStep(this.pendingBegin)] : []), ...this.pending.map(step)];
      const results = await this.pipeline([...head, step(compiled)]);
      return results[results.length - 1] as QueryResult<R>;
    }
    return this.send(compiled.sql, compiled.parameters);
  }

  /** See `inOneMessage`. */
  private async sendGroup(
    statements: readonly CompiledQuery[],
    again = false,
  ): Promise<QueryResult<unknown[]>> {
    if (this.inTransaction) throw new Error("statements sent in one message must not be in a transaction");
    if (!statements.some((s) => unpreparable.has(s.sql))) {
      const steps = statements.map(
        (s): Step => ({
          sql: s.sql,
          parameters: s.parameters,
          name: planned.has(s) ? planName(s.sql) : preparable.has(s) ? preparedName(s.sql) : undefined,
        }),
      );
      // Throws before anything is sent for a value node-postgres cannot write, as its query would.
      const pipeline = new Pipeline(steps, this.statements, this.types, this.shapes);
      pipeline.close(this.usePlans(statements, steps));
      this.client.query(pipeline as unknown as pg.QueryConfig);
      try {
        return { rows: (await pipeline.answered).map((r) => r.rows) };
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        // A prepared statement gone from the connection behind the driver's back (26000:
        // DEALLOCATE ALL or DISCARD ALL sent by other code), or one whose columns a migration
        // changed since it was parsed (0A000, "cached plan must not change result type": `items.*`
        // after a column was added by another node): the pipeline marked them unsure, and the
        // reads run again once, parsing them anew.
        // Or one the server still has where the driver thinks it closed (42P05 at its Parse: a
        // Close lost with a cancelled pipeline); the pipeline marked it unsure too.
        if (!again && (code === "26000" || code === "0A000" || code === "42P05"))
          return this.sendGroup(statements, true);
        const failed = pipeline.failedStep;
        // Refused at its Parse before anything ran: sent inlined from now on, this time included.
        if (code !== "42P18" || failed === undefined) throw err;
        if (unpreparable.size >= INLINE_CACHE_LIMIT) unpreparable.clear();
        unpreparable.add(failed.sql);
      }
    }
    const texts = statements.map((s) => inline(s.sql, s.parameters));
    if (texts.every((t) => t !== undefined)) {
      const results = (await this.client.query(texts.join("; "))) as unknown as
        | pg.QueryResult
        | pg.QueryResult[];
      return { rows: (Array.isArray(results) ? results : [results]).map((r) => r.rows ?? []) };
    }
    await this.client.query("BEGIN");
    try {
      const rows: unknown[][] = [];
      for (const s of statements) rows.push((await this.client.query(s.sql, [...s.parameters])).rows);
      await this.client.query("COMMIT");
      return { rows };
    } catch (err) {
      // The statement's failure is what the caller needs; a connection too broken to roll back
      // is dropped by the pool (its error event), so that second failure is not lost either.
      await this.client.query("ROLLBACK").catch(() => {});
      throw err;
    }
  }

  /**
   * Marks the `withCachedPlan` statements of a group as used now (the last to be closed), and
   * answers those to close before it: the least recently used beyond `PLANS_PER_CONNECTION`, never
   * one of the group's own.
   */
  private usePlans(statements: readonly CompiledQuery[], steps: readonly Step[]): string[] {
    const used = new Set<string>();
    steps.forEach((step, i) => {
      if (step.name === undefined || !planned.has(statements[i] as CompiledQuery)) return;
      used.add(step.name);
      this.plans.delete(step.name);
      this.plans.add(step.name);
    });
    const closed: string[] = [];
    for (const name of this.plans) {
      if (this.plans.size - closed.length <= PLANS_PER_CONNECTION) break;
      if (used.has(name)) continue;
      closed.push(name);
    }
    for (const name of closed) this.plans.delete(name);
    return closed;
  }

  /** `steps` in one extended-protocol pipeline (see the class's comment); each one's result. */
  private async pipeline(steps: readonly Step[]): Promise<QueryResult<unknown>[]> {
    // Throws before anything is sent for a value node-postgres cannot write, as its query would:
    // BEGIN and the deferred statements are then still pending, as Kysely's own driver leaves a
    // transaction whose statement failed before it was sent.
    const pipeline = new Pipeline(steps, this.statements, this.types, this.shapes);
    // They travel in this pipeline (the steps given hold whatever was pending).
    this.pendingBegin = undefined;
    this.pending = [];
    this.client.query(pipeline as unknown as pg.QueryConfig);
    return pipeline.answered;
  }

  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    // As Kysely's driver does without a cursor configured.
    throw new Error("streaming is not configured for PostgreSQL");
  }

  private async send<R>(text: string, parameters: readonly unknown[]): Promise<QueryResult<R>> {
    if (this.pending.some((q) => preparable.has(q))) {
      // A prepared statement is pending: everything goes as one pipeline.
      const head = [...(this.pendingBegin ? [textStep(this.pendingBegin)] : []), ...this.pending.map(step)];
      const results = await this.pipeline([...head, { sql: text, parameters, name: undefined }]);
      return results[results.length - 1] as QueryResult<R>;
    }
    const head = [...(this.pendingBegin ? [this.pendingBegin] : []), ...this.pending.map(inlined)];
    this.pendingBegin = undefined;
    this.pending = [];
    if (head.length > 0) {
      const inlined = inline(text, parameters);
      if (inlined !== undefined) {
        const results = (await this.client.query([...head, inlined].join("; "))) as unknown as
          | pg.QueryResult
          | pg.QueryResult[];
        return toQueryResult(
          Array.isArray(results) ? (results[results.length - 1] as pg.QueryResult) : results,
        );
      }
      await this.client.query(head.join("; "));
    }
    return toQueryResult(await this.client.query(text, [...parameters]));
  }
}

/** A deferred statement's text with its values written in (it was checked to have one). */
function inlined(query: CompiledQuery): string {
  return inline(query.sql, query.parameters) as string;
}

function textStep(sql: string): Step {
  return { sql, parameters: [], name: preparedName(sql) };
}

function step(query: CompiledQuery): Step {
  return {
    sql: query.sql,
    parameters: query.parameters,
    name: preparable.has(query) ? preparedName(query.sql) : undefined,
  };
}

/** The parts of node-postgres's connection a pipeline writes to (its Submittable interface). */
interface WireConnection {
  stream: { cork?(): void; uncork?(): void };
  parse(query: { text: string; name: string; types: number[] }): void;
  bind(config: { portal: string; statement: string; values: unknown[] }): void;
  describe(msg: { type: "P"; name: string }): void;
  execute(config: { portal: string; rows: number }): void;
  close(msg: { type: "S"; name: string }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

/** Parsers of values by type, as node-postgres's `types` setting gives them. */
interface TypeParsers {
  getTypeParser(oid: number, format: "text" | "binary"): (value: string) => unknown;
}

interface FieldDescription {
  name: string;
  dataTypeID: number;
  format: "text" | "binary";
}

/**
 * How the rows of a prepared statement are made, learned from its row description: the parser of
 * each column and a function compiled for its columns, `(values, parsers) => ({ "<name 0>":
 * values[0] === null ? null : parsers[0](values[0]), ... })`. An object literal gets its shape from
 * a boilerplate at once, where adding the columns one by one makes the object grow through each
 * (see `rowStatement` in database.ts for SQLite's). The names are the statement's own (columns of
 * portico's tables, aliases in its SQL), written as JSON strings, so no name can be anything but a
 * property name in the compiled text; a `__proto__` column is written as a computed name, which
 * makes a property where the plain name would set the object's prototype.
 *
 * A connection keeps the shape of each of its prepared statements, and a pipeline then leaves
 * out the Describe of such a statement: PostgreSQL sends its rows without a row description. The
 * row type of a prepared statement cannot change under it: a change of its tables that would
 * change it fails the statement (0A000, "cached plan must not change result type"), which then
 * is parsed, and described, again.
 */
interface RowShape {
  fields: readonly FieldDescription[];
  parsers: readonly ((value: string) => unknown)[];
  make: (values: readonly (string | null)[], parsers: readonly ((value: string) => unknown)[]) => unknown;
}

function rowShape(fields: readonly FieldDescription[], types: TypeParsers): RowShape {
  const parsers = fields.map((f) => types.getTypeParser(f.dataTypeID, f.format || "text"));
  const columns = fields
    .map((f, i) => {
      const name = f.name === "__proto__" ? `["__proto__"]` : JSON.stringify(f.name);
      return `${name}: v[${i}] === null ? null : p[${i}](v[${i}])`;
    })
    .join(", ");
  const make = new Function("v", "p", `return { ${columns} };`) as RowShape["make"];
  return { fields, parsers, make };
}

/**
 * Statements sent as one extended-protocol pipeline, given to `client.query` as a Submittable (the
 * interface node-postgres's own Query and pg-cursor implement): node-postgres sends it when the
 * connection is free and hands it every answer up to the ReadyForQuery after its Sync.
 */
class Pipeline {
  private readonly values: (string | Buffer | null)[][];
  private readonly results: QueryResult<unknown>[] = [];
  /** Statements parsed by this pipeline: name -> index of the step that parses it. */
  private readonly parsedAt = new Map<string, number>();
  /** Prepared statements to close before the first step (see `close`). */
  private closes: readonly string[] = [];
  /** The shape of the current step's rows, when it has one. */
  private shape: RowShape | undefined;
  private fields: FieldDescription[] = [];
  private parsers: ((value: string) => unknown)[] = [];
  private rows: unknown[] = [];
  private failed = false;
  /** What a value's parser threw, if one did (see `handleDataRow`). */
  private unparsed: unknown;
  /** The step the server failed, if it failed one. */
  failedStep: Step | undefined;
  /** Each statement's result once the server answered the Sync; the first error otherwise. */
  readonly answered: Promise<QueryResult<unknown>[]>;
  private resolve!: (results: QueryResult<unknown>[]) => void;
  private reject!: (err: unknown) => void;

  constructor(
    private readonly steps: readonly Step[],
    private readonly statements: Map<string, "ready" | "unsure">,
    private readonly types: TypeParsers,
    /** The connection's shapes of its prepared statements (see `RowShape`). */
    private readonly shapes: Map<string, RowShape>,
  ) {
    this.answered = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Before anything is written: a value that cannot be mapped must not leave half a pipeline.
    this.values = steps.map((s) => s.parameters.map((v) => prepareValue(v)));
  }

  /**
   * Closes `names` on the server before the first step: they are forgotten at once. Nothing before
   * them can fail, so the server always runs the Close (closing a statement that does not exist
   * is no error).
   */
  close(names: readonly string[]): void {
    this.closes = names;
    for (const name of names) {
      this.statements.delete(name);
      this.shapes.delete(name);
    }
  }

  submit(connection: WireConnection): null {
    connection.stream.cork?.();
    try {
      for (const name of this.closes) connection.close({ type: "S", name });
      this.steps.forEach((s, i) => {
        const name = s.name ?? "";
        if (s.name === undefined) {
          connection.parse({ text: s.sql, name, types: [] });
        } else if (this.statements.get(name) !== "ready") {
          if (this.statements.get(name) === "unsure") connection.close({ type: "S", name });
          connection.parse({ text: s.sql, name, types: [] });
          this.shapes.delete(name);
          // Taken as parsed for the steps after it; `handleError` corrects it.
          this.statements.set(name, "ready");
          this.parsedAt.set(name, i);
        }
        connection.bind({ portal: "", statement: name, values: this.values[i] as unknown[] });
        // A statement whose rows this connection knows how to make needs no row description.
        if (s.name === undefined || !this.shapes.has(name)) connection.describe({ type: "P", name: "" });
        connection.execute({ portal: "", rows: 0 });
      });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: FieldDescription[] }): void {
    const name = this.steps[this.results.length]?.name;
    if (name !== undefined) {
      // Kept for the next pipelines, which leave out this statement's Describe.
      this.shape = rowShape(msg.fields, this.types);
      this.shapes.set(name, this.shape);
      return;
    }
    this.fields = msg.fields;
    this.parsers = msg.fields.map((f) => this.types.getTypeParser(f.dataTypeID, f.format || "text"));
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    // A parser that throws must not throw out of the socket's handler (an uncaught exception, and
    // a query that never settles): the pipeline fails once the server is done with it, as pg's
    // own Query does.
    if (this.unparsed) return;
    try {
      if (this.shape === undefined && this.fields.length === 0) {
        // Sent without a row description: the connection knows how to make the statement's rows.
        const name = this.steps[this.results.length]?.name;
        this.shape = name === undefined ? undefined : this.shapes.get(name);
      }
      if (this.shape !== undefined) {
        this.rows.push(this.shape.make(msg.fields, this.shape.parsers));
        return;
      }
      const row: Record<string, unknown> = {};
      msg.fields.forEach((raw, i) => {
        const field = this.fields[i] as FieldDescription;
        row[field.name] = raw === null ? null : (this.parsers[i] as (value: string) => unknown)(raw);
      });
      this.rows.push(row);
    } catch (err) {
      this.unparsed = err;
    }
  }

  handleCommandComplete(msg: { text: string }): void {
    const [command, a, b] = msg.text.split(" ");
    const count = Number(b ?? a ?? 0);
    this.results.push(
      toQueryResult({ command, rowCount: count, rows: this.rows } as unknown as pg.QueryResult),
    );
    this.rows = [];
    this.fields = [];
    this.shape = undefined;
  }

  handleEmptyQuery(): void {
    this.results.push({ rows: [] });
  }

  /** The server's error (the steps after the failed one did not run), or the connection's. */
  handleError(err: unknown): void {
    if (this.failed) return;
    this.failed = true;
    const failedAt = this.results.length;
    this.failedStep = this.steps[failedAt];
    for (const [name, at] of this.parsedAt) {
      // Parsed at or past the failure: parsed or not (a skipped step also skipped the Close of a
      // statement that was unsure, which may still exist). Unsure, it is closed before it is
      // parsed again, and closing one that does not exist is no error.
      if (at >= failedAt) this.statements.set(name, "unsure");
    }
    // Gone from the session behind the driver's back (DEALLOCATE ALL, DISCARD ALL): every
    // statement this connection thought ready may be gone too.
    if ((err as { code?: unknown }).code === "26000")
      for (const name of this.statements.keys()) this.statements.set(name, "unsure");
    // A prepared statement that failed may have failed as prepared (a plan a table's change made
    // unusable, "cached plan must not change result type"): parsed again next time.
    const name = this.failedStep?.name;
    if (name !== undefined) this.statements.set(name, "unsure");
    // The change that made it unusable may have made the pipeline's later statements unusable too
    // (a column type both read): all of them are parsed again, so that one retry is enough.
    if ((err as { code?: unknown }).code === "0A000")
      for (const step of this.steps) if (step.name !== undefined) this.statements.set(step.name, "unsure");
    this.reject(err);
  }

  handleReadyForQuery(): void {
    if (this.failed) return;
    if (this.unparsed !== undefined) {
      this.failed = true;
      this.reject(this.unparsed);
      return;
    }
    if (this.results.length !== this.steps.length) {
      this.handleError(
        new Error(`pipeline of ${this.steps.length} statements answered ${this.results.length}`),
      );
      return;
    }
    this.resolve(this.results);
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: WireConnection): void {
    connection.sendCopyFail("No source stream defined");
  }

  handleCopyData(): void {}
}

function toQueryResult<R>(result: pg.QueryResult): QueryResult<R> {
  const { command, rowCount, rows } = result;
  return {
    numAffectedRows:
      command === "INSERT" || command === "UPDATE" || command === "DELETE" || command === "MERGE"
        ? BigInt(rowCount ?? 0)
        : undefined,
    rows: (rows ?? []) as R[],
  };
}

/**
 * A string as an escape-string literal, `E'...'`, with every backslash and quote doubled. Its
 * meaning does not depend on `standard_conforming_strings` (a plain `'...'` reads backslashes as
 * escapes when that setting is off, which would let a value end its own literal), nor on
 * node-postgres's `escapeLiteral`. The connection's client encoding is UTF8 (node-postgres sets
 * it), so no multi-byte character can hide a quote or a backslash.
 */
export function escapeStringLiteral(value: string): string {
  // Most values (ids, names, times) have neither: one scan instead of two replacements.
  if (!NEEDS_ESCAPE.test(value)) return `E'${value}'`;
  return `E'${value.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
}

const NEEDS_ESCAPE = /['\\]/;

/** A value as an SQL literal, or undefined when it is not one of the kinds written so. */
function literal(value: unknown): string | undefined {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "string") return value.includes("\0") ? undefined : escapeStringLiteral(value);
  // Finite numbers only, written by JavaScript itself (digits, `.`, `-`, `e`, `+`): never NaN or Infinity.
  if (typeof value === "number") return Number.isFinite(value) ? `'${value}'` : undefined;
  if (typeof value === "bigint") return `'${value}'`;
  if (typeof value === "boolean") return value ? "'true'" : "'false'";
  return undefined;
}

/**
 * `sql` with each `$n` replaced by the literal of `parameters[n - 1]`; undefined when a value has
 * no literal or the text has anything this scan does not follow (escape strings, dollar quoting,
 * comments), where a `$n` could stand inside quotes.
 */
export function inline(sql: string, parameters: readonly unknown[]): string | undefined {
  const template = inlineTemplate(sql);
  if (template === null) return undefined;
  const { texts, indexes } = template;
  let out = texts[0] as string;
  for (let i = 0; i < indexes.length; i++) {
    const index = indexes[i] as number;
    if (index >= parameters.length) return undefined;
    const text = literal(parameters[index]);
    if (text === undefined) return undefined;
    // A space on each side, so that `x=$1` cannot become `x='...'` glued to an operator.
    out += ` ${text} ${texts[i + 1] as string}`;
  }
  return out;
}

/**
 * A statement's text cut at its parameters: `texts` around them (one more than `indexes`), and
 * the parameter (from 0) each `$n` stands for; null when the text cannot be inlined.
 */
interface InlineTemplate {
  texts: readonly string[];
  indexes: readonly number[];
}

/**
 * Templates by text. The statements of one shape repeat (a search's page, an event's insert), and
 * scanning a text character by character cost more than writing its values in; past this many
 * texts, or for a text longer than `INLINE_CACHE_CHARS`, nothing is kept.
 */
const inlineTemplates = new Map<string, InlineTemplate | null>();
const INLINE_CACHE_LIMIT = 500;
const INLINE_CACHE_CHARS = 16_384;

function inlineTemplate(sql: string): InlineTemplate | null {
  let template = inlineTemplates.get(sql);
  if (template === undefined) {
    template = scanTemplate(sql);
    if (sql.length <= INLINE_CACHE_CHARS) {
      if (inlineTemplates.size >= INLINE_CACHE_LIMIT) inlineTemplates.clear();
      inlineTemplates.set(sql, template);
    }
  }
  return template;
}

function scanTemplate(sql: string): InlineTemplate | null {
  if (sql.includes("\0")) return null;
  const texts: string[] = [];
  const indexes: number[] = [];
  let out = "";
  let i = 0;
  while (i < sql.length) {
    const c = sql[i] as string;
    if (c === "'" || c === '"') {
      // An E'...' string may escape its quote with a backslash: not followed here.
      if (c === "'" && i > 0 && /[eE]/.test(sql[i - 1] as string) && !/[A-Za-z0-9_]/.test(sql[i - 2] ?? " "))
        return null;
      let j = i + 1;
      for (;;) {
        if (j >= sql.length) return null;
        if (sql[j] === c) {
          if (sql[j + 1] === c) {
            j += 2;
            continue;
          }
          break;
        }
        j++;
      }
      out += sql.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if ((c === "-" && sql[i + 1] === "-") || (c === "/" && sql[i + 1] === "*")) return null;
    if (c === "$") {
      // `a$1` is an identifier, not a parameter: refused rather than guessed.
      if (i > 0 && /[A-Za-z0-9_]/.test(sql[i - 1] as string)) return null;
      const match = /^\$(\d+)(?![A-Za-z0-9_$])/.exec(sql.slice(i, i + 12));
      if (!match) return null;
      const index = Number(match[1]) - 1;
      if (index < 0) return null;
      texts.push(out);
      indexes.push(index);
      out = "";
      i += match[0].length;
      continue;
    }
    out += c;
    i++;
  }
  texts.push(out);
  return { texts, indexes };
}
