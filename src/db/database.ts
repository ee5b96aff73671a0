import fs from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import {
  type CompiledQuery,
  Kysely,
  SqliteAdapter,
  type SqliteDatabase,
  SqliteDialect,
  sql,
  type Transaction,
} from "kysely";
import pg from "pg";
import type { PostgisSetting } from "../config.js";
import { Availability, type AvailabilityChange, ReachabilityCheck } from "./availability.js";
import { type Change, ChangeFeed, takeNotedChanges } from "./change-feed.js";
import { deferred, inOneMessage } from "./pg-driver.js";
import { type Postgis, preparePostgis } from "./postgis.js";
import type { Database } from "./schema.js";
import { schemaScopedPostgresDialect } from "./schema-introspector.js";

export type Engine = "sqlite" | "postgres";

/** Which engine a handle talks to, for the few statements that differ. */
export function engineOf(q: Queryable | Kysely<Database>): Engine {
  return q.getExecutor().adapter instanceof SqliteAdapter ? "sqlite" : "postgres";
}

/** A Kysely handle: the database itself or a transaction. Repositories accept either. */
export type Queryable = Kysely<Database> | Transaction<Database>;

export interface TransactionOptions<T> {
  /**
   * What the change makes stale in caches, announced to every node once it commits; a function
   * when it depends on what the work found (the id of the user it changed).
   */
  changes?: readonly Change[] | ((result: T) => readonly Change[]);
}

/**
 * Runs a write whose result nobody reads, inside a transaction: on PostgreSQL it is sent with the
 * transaction's next statement or its COMMIT rather than on its own (see pg-driver.ts), so a
 * failure surfaces there and fails the transaction. Use it for statements no caller catches the
 * failure of (an event recorded); on SQLite, or outside a transaction, it runs at once.
 */
export async function later(q: Queryable, query: CompiledQuery): Promise<void> {
  await q.executeQuery(q.isTransaction ? deferred(query) : query);
}

function changesOf<T>(options: TransactionOptions<T> | undefined, result: T): readonly Change[] {
  const changes = options?.changes ?? [];
  return typeof changes === "function" ? changes(result) : changes;
}

export interface Db {
  engine: Engine;
  /** The PostgreSQL schema portico's tables live in; undefined on SQLite. */
  schema: string | undefined;
  /** PostGIS, when portico uses it (PostgreSQL only; see postgis.ts). */
  postgis: Postgis | undefined;
  /** Whether PostGIS is used, and if not why, in a sentence for the log and `portico doctor`. */
  postgisNote: string;
  /**
   * For reads outside a transaction. Writes go through `transaction` (or `migrate`): on SQLite this
   * is a separate read connection, so reads never wait behind a committing write (WAL).
   */
  kysely: Kysely<Database>;
  /** The connection schema migrations run on. */
  writer: Kysely<Database>;
  /** Cache invalidation across transactions and nodes. */
  feed: ChangeFeed;
  /**
   * False while this node has lost its database: PostgreSQL restarting or failing over, or the
   * change feed's connection down. Always true on SQLite.
   */
  readonly connected: boolean;
  /**
   * Runs `work` in one transaction: a change and the events it causes commit together. `work`
   * must use only `trx` and do nothing slow (no hashing, no network): on SQLite the transaction
   * holds the single connection.
   */
  transaction<T>(
    work: (trx: Transaction<Database>) => Promise<T>,
    options?: TransactionOptions<T>,
  ): Promise<T>;
  /**
   * PostgreSQL only (undefined on SQLite, whose writes share group commits through `transaction`):
   * a change made whole by one statement, which PostgreSQL runs as a transaction of its own, sent
   * in one round trip without BEGIN and COMMIT, and committed as durably as any. `build` makes it
   * from this node's name in the change log: the statement must insert its change log row itself
   * (a data-modifying WITH), naming what `changes` answers for its rows, so that the row commits
   * with the change as `transaction`'s does; after the commit those changes are announced as
   * `transaction` announces its own. Answers the statement's rows.
   */
  changeInOneStatement:
    | (<R>(
        build: (node: string) => CompiledQuery,
        changes: (rows: readonly R[]) => readonly Change[],
      ) => Promise<R[]>)
    | undefined;
  /**
   * Reads outside any transaction, in as few round trips as the engine allows; the rows of each
   * statement, in order. On PostgreSQL they go in one message (see `inOneMessage`), after
   * `settings` made with `set_config(name, value, true)`, which hold for these statements only.
   * On SQLite they run one after the other on the read connection, and `settings` do not apply.
   */
  readTogether(
    statements: readonly CompiledQuery[],
    settings?: Readonly<Record<string, string>>,
  ): Promise<unknown[][]>;
  close(): Promise<void>;
}

export interface DbOptions {
  /** postgres:// URL; when absent the embedded SQLite file `<dataDir>/portico.sqlite` is used. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** PostgreSQL schema to work in (tests give each run its own); created when missing. */
  schema?: string | undefined;
  /**
   * PostgreSQL: how long a query may go without an answer before its connection is taken for
   * dead and closed (0: no limit). Migrations are exempt.
   */
  queryTimeoutMs?: number;
  /**
   * Told when the node loses its database (PostgreSQL: a restart, a failover, a connection the
   * server closed) and when it is back: once each per outage.
   */
  onAvailability?: (change: AvailabilityChange) => void;
  /**
   * PostgreSQL: whether to use PostGIS (`PORTICO_POSTGIS`); `auto` when not given, as `serve`
   * decides by default, so that a tool opening the database and migrating it does not drop the
   * geometry columns a server keeps (see `syncSpatialStorage`).
   */
  postgis?: PostgisSetting;
  /** PostgreSQL: connections of the pool for requests and jobs (`PORTICO_DATABASE_POOL_SIZE`); 20 if not given. */
  poolSize?: number;
  /**
   * Work on the opened database before it is handed out: a start's migrations. On PostgreSQL it
   * runs beside PostGIS's preparation (`db.postgis` is undefined meanwhile), which on a new
   * database creates the extension, about as long as the migrations (~0.3 s each, measured), so a
   * first start waits for one of them, not both. If it fails, the database is closed.
   */
  beforeReady?: (db: Db) => Promise<void>;
}

export async function openDatabase(options: DbOptions): Promise<Db> {
  if (options.databaseUrl) {
    return openPostgres(
      options.databaseUrl,
      options.schema,
      options.queryTimeoutMs ?? 0,
      options.onAvailability,
      options.postgis ?? "auto",
      options.poolSize ?? 20,
      options.beforeReady,
    );
  }
  const db = await openSqlite(options.dataDir);
  try {
    await options.beforeReady?.(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

/** How much of an SQLite database file its connections map into memory (see `connectSqlite`). */
const MMAP_BYTES = 256 * 1024 * 1024;

/** Prepared statements kept per SQL text; past this many distinct texts the cache starts over. */
const STATEMENT_CACHE_LIMIT = 500;

async function openSqlite(dataDir: string): Promise<Db> {
  fs.mkdirSync(dataDir, { recursive: true });
  const lock = lockDataDir(dataDir);
  const file = path.join(dataDir, "portico.sqlite");
  // Two connections: the writer runs every transaction; the reader serves reads outside them, so
  // a request's authentication never queues behind another request's commit. A schema change on
  // either changes what the other's statements read (see `rowStatement`).
  const schema: SchemaChanges = { count: 0, uncommitted: false };
  const writer = new Kysely<Database>({
    dialect: new TransactionalDdlSqliteDialect({ database: connectSqlite(file, schema) }),
  });
  const readConnection = connectSqlite(file, schema);
  const reader = new Kysely<Database>({ dialect: new SqliteDialect({ database: readConnection }) });
  const feed = await ChangeFeed.start({ connection: undefined, schema: undefined });
  const groupCommit = new GroupCommit(writer, feed);
  return {
    engine: "sqlite",
    schema: undefined,
    postgis: undefined,
    postgisNote: "PostGIS not used (SQLite: its R*Tree serves)",
    kysely: reader,
    writer,
    feed,
    connected: true,
    transaction: (work, options) => groupCommit.run(work, options),
    changeInOneStatement: undefined,
    // Straight on the reader's connection, as Kysely's driver would run them, all at once: the
    // reader holds no transaction, and statements that run without a pause between them cannot
    // interleave with any other use of it (nor see a commit between them).
    async readTogether(statements) {
      return statements.map((statement) => readConnection.rowsOf(statement.sql, statement.parameters));
    },
    async close() {
      await reader.destroy();
      await writer.destroy();
      lock.close();
    },
  };
}

/**
 * SQLite runs schema changes in transactions, but Kysely's SQLite adapter says it does not
 * (`supportsTransactionalDdl`), so its migrator would commit every statement of every migration on
 * its own. The writer's dialect says it does: the pending migrations then apply in one
 * transaction, as on PostgreSQL. A start that dies midway leaves the database as it was, not with
 * half a migration applied and unrecorded (which the next start would fail on, re-running it), and
 * a new database is made with one commit (one fsync) instead of one per statement.
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class TransactionalDdlSqliteDialect extends SqliteDialect {
  override createAdapter(): SqliteAdapter {
    return new TransactionalDdlSqliteAdapter();
  }
}

/**
 * One process per embedded database: caches in memory are kept coherent within a process, not
 * between processes, so a second `portico serve` on the same data directory must not start. An
 * exclusive SQLite lock on a side file does it portably, and the operating system releases it
 * when the process dies, however it dies.
 */
function lockDataDir(dataDir: string): SQLite.Database {
  const lock = new SQLite(path.join(dataDir, "portico.lock"));
  try {
    lock.pragma("busy_timeout = 0");
    lock.pragma("locking_mode = EXCLUSIVE");
    lock.exec("BEGIN EXCLUSIVE; COMMIT");
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === "SQLITE_BUSY") {
      throw new Error(
        `another portico process is using ${dataDir}; run one process per data directory, or use PostgreSQL for several nodes`,
      );
    }
    throw err;
  }
  return lock;
}

/** Whether a portico process holds the data directory's lock (for `portico doctor`). */
export function dataDirInUse(dataDir: string): boolean {
  try {
    lockDataDir(dataDir).close();
    return false;
  } catch {
    return true;
  }
}

/** An SQLite connection for Kysely, that also reads rows itself (`rowsOf`). */
interface SqliteConnection extends SqliteDatabase {
  /** The rows of a read statement, as Kysely's driver returns them (see `rowStatement`). */
  rowsOf(text: string, parameters: readonly unknown[]): unknown[];
}

function connectSqlite(file: string, schema: SchemaChanges): SqliteConnection {
  const sqlite = new SQLite(file);
  // WAL lets readers proceed during a write; synchronous=FULL makes each commit durable, which is
  // what "a change and its events commit together" promises after a power cut, not only a crash.
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = FULL");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("busy_timeout = 5000");
  // Reads through a memory map: a page the operating system holds is read in place, with neither
  // a system call nor a copy into SQLite's own (2 MB) page cache. A feature query reads a thousand
  // rows scattered over its table; measured on the bench's 200,000-point layer, this takes a
  // quarter off the database's time for such a query. Beyond the first MMAP_BYTES of the file,
  // SQLite reads as usual.
  sqlite.pragma(`mmap_size = ${MMAP_BYTES}`);
  // better-sqlite3 cannot interrupt a running statement, and it runs on the event loop. A search
  // puts `portico_deadline(<epoch ms>)` in its WHERE clause, where it is evaluated for every row
  // visited, so the statement fails soon after its deadline instead of running to the end.
  sqlite.function("portico_deadline", { deterministic: false }, (deadline) => {
    if (Date.now() > Number(deadline)) throw new DeadlineExceeded();
    return 1;
  });
  // Kysely prepares every statement anew; preparing costs more than running a point query, and
  // the set of distinct statements is small, so keep them.
  const statements = new Map<string, RowStatement>();
  const prepare = (text: string) => {
    let statement = statements.get(text);
    if (!statement) {
      if (statements.size >= STATEMENT_CACHE_LIMIT) statements.clear();
      statement = rowStatement(sqlite.prepare(text), text, schema);
      statements.set(text, statement);
    }
    return statement;
  };
  return {
    close: () => sqlite.close(),
    prepare,
    rowsOf: (text, parameters) => prepare(text).all(parameters),
  };
}

/** A prepared statement as Kysely's SQLite driver uses it. */
type RowStatement = ReturnType<SqliteDatabase["prepare"]>;

/** Schema changes run through the connections of one database file, counted (see `rowStatement`). */
interface SchemaChanges {
  count: number;
  /** A schema change ran since the writer's last COMMIT or ROLLBACK: its transaction may end either way. */
  uncommitted: boolean;
}

/**
 * A statement that changes the schema (a layer's field added or dropped, a migration). Every one
 * portico sends starts with its verb; one that did not (a leading comment, ATTACH) would leave
 * statements naming their values by the columns they had.
 */
const DDL = /^\s*(create|alter|drop)\b/i;

/** The end of a transaction (COMMIT, ROLLBACK), or of a savepoint (RELEASE, ROLLBACK TO). */
const TRANSACTION_END = /^\s*(commit|end|rollback|release)\b/i;
const SAVEPOINT_END = /^\s*(release|rollback\s+(transaction\s+)?to)\b/i;

/**
 * A statement whose rows are read as arrays and made objects by a function compiled for its
 * columns. better-sqlite3 builds each row object column by column through V8's API; an object
 * literal in JavaScript gets its shape from a boilerplate at once. A search page of 10 rows of 26
 * columns (the bench's 100,000 items, one statement run 5,000 times): objects from better-sqlite3
 * 68-75 µs, arrays made objects by a loop 45-56 µs, by the compiled literal 33-34 µs (arrays alone:
 * 32 µs).
 *
 * The columns of a statement can change under it: SQLite prepares it again after a schema change,
 * and `SELECT *` of a layer's table then reads the field added or dropped since. Every schema
 * change runs through these connections (the layers' fields, migrations; the data directory's lock
 * keeps other processes out), so each counts itself, and a statement learns its columns again
 * (`columns()`, ~35 µs) at its first run after one.
 */
function rowStatement(statement: SQLite.Statement, text: string, schema: SchemaChanges): RowStatement {
  if (!statement.reader) {
    const ddl = DDL.test(text);
    if (!ddl && !TRANSACTION_END.test(text)) return statement;
    return {
      reader: false,
      all: () => [],
      run: (parameters) => {
        try {
          return statement.run(parameters);
        } finally {
          // Counted when it runs (the writer's next statements see the new columns) and again when
          // its transaction ends: a statement that learned its columns meanwhile learned what its
          // connection saw then, the schema before the change (the reader, until the commit) or
          // after it (the writer, until a rollback). Also when it failed: learning again is harmless.
          if (ddl) {
            schema.count++;
            schema.uncommitted = true;
          } else if (schema.uncommitted) {
            schema.count++;
            if (!SAVEPOINT_END.test(text)) schema.uncommitted = false;
          }
        }
      },
      iterate: () => [][Symbol.iterator](),
    };
  }
  statement.raw(true);
  let learned = -1;
  let row: (values: unknown[]) => Record<string, unknown> = () => ({});
  const rowOf = () => {
    if (learned !== schema.count) {
      row = rowFactory(statement.columns().map((c) => c.name));
      learned = schema.count;
    }
    return row;
  };
  // Asked after the statement has run: SQLite prepares it again at its first step after a
  // schema change, and until then it names the columns it had.
  return {
    reader: true,
    all: (parameters) => (statement.all(parameters) as unknown[][]).map(rowOf()),
    run: (parameters) => statement.run(parameters),
    *iterate(parameters) {
      for (const values of statement.iterate(parameters) as IterableIterator<unknown[]>)
        yield rowOf()(values);
    },
  };
}

/**
 * `values => ({ "<name 0>": values[0], ... })` for these column names. The names are the
 * statement's own (columns of portico's tables, aliases in its SQL), written as JSON strings, so
 * no name can be anything but a property name in the compiled text. A `__proto__` column would set
 * the object's prototype in a literal: such statements take a loop instead.
 */
function rowFactory(names: readonly string[]): (values: unknown[]) => Record<string, unknown> {
  if (names.includes("__proto__")) {
    return (values) => {
      const row: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++)
        Object.defineProperty(row, names[i] as string, {
          value: values[i],
          enumerable: true,
          writable: true,
          configurable: true,
        });
      return row;
    };
  }
  const fields = names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(", ");
  return new Function("values", `return { ${fields} };`) as (values: unknown[]) => Record<string, unknown>;
}

/**
 * How long a request may wait for a PostgreSQL connection: to open one (a server that went away
 * without refusing, as after a failover, would otherwise hold it for the operating system's
 * connect timeout, minutes) or for one of the pool's to be free.
 */
const PG_CONNECT_TIMEOUT_MS = 10_000;

/**
 * Settings of every connection to PostgreSQL. `application_name` tells operators (and
 * `pg_stat_activity`) whose connections these are; an `application_name` in the URL wins.
 * Keepalives find a connection whose server vanished without closing it.
 */
function pgConnection(url: string, schema: string | undefined): pg.ClientConfig {
  return {
    connectionString: url,
    fallback_application_name: "portico",
    connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
  };
}

/**
 * A pg client whose queries give up after `timeoutMs` without an answer by closing the connection.
 * A server that vanished without closing it (a failover that took its address along, a frozen
 * host) would otherwise hold the query, and the pool's connection, until the kernel gives up on
 * the socket, a quarter of an hour. pg's own `query_timeout` is not used: it fails the query but
 * leaves the connection waiting for that answer, and the pool hands it out again
 * (brianc/node-postgres#3399). Closing it fails the query with a lost connection and the pool
 * drops it. Only promise queries (all Kysely sends) are watched.
 */
function watchedClient(timeoutMs: number): typeof pg.Client {
  return class WatchedClient extends pg.Client {
    // biome-ignore lint/suspicious/noExplicitAny: forwards every overload of pg's query unchanged
    override query(...args: any[]): any {
      const result = (super.query as (...a: unknown[]) => unknown)(...args);
      // A promise, or a Submittable that says when it is answered (the batching driver's pipeline).
      const answered =
        result instanceof Promise ? result : (result as { answered?: unknown } | undefined)?.answered;
      if (answered instanceof Promise) {
        const timer = setTimeout(() => {
          this.connection.stream.destroy(
            new Error(`Connection terminated: no answer from the database in ${timeoutMs / 1000} s`),
          );
        }, timeoutMs);
        const done = () => clearTimeout(timer);
        answered.then(done, done);
      }
      return result;
    }
  };
}

async function openPostgres(
  url: string,
  schema: string | undefined,
  queryTimeoutMs: number,
  onAvailability: ((change: AvailabilityChange) => void) | undefined,
  postgisSetting: PostgisSetting,
  poolSize: number,
  beforeReady: ((db: Db) => Promise<void>) | undefined,
): Promise<Db> {
  if (schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw new Error(`invalid PostgreSQL schema name: ${schema}`);
  }
  if (schema) {
    const admin = new pg.Client(pgConnection(url, undefined));
    // Its failures reach the awaited calls below; the event pg emits as well must not go unheard.
    admin.on("error", () => {});
    await admin.connect();
    try {
      await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    } finally {
      await admin.end();
    }
  }
  const connection = pgConnection(url, schema);
  const poolConfig: pg.PoolConfig = {
    ...connection,
    // bigint (int8) columns hold epoch milliseconds and counts, all far below 2^53. pg asks for
    // each column's parser with every result: one function, not a new one each time.
    types: {
      getTypeParser: (oid: number, format?: "text" | "binary") =>
        oid === 20 ? Number : pg.types.getTypeParser(oid, format as "text"),
    },
  };
  const pool = new pg.Pool({
    ...poolConfig,
    max: poolSize,
    ...(queryTimeoutMs > 0 ? { Client: watchedClient(queryTimeoutMs) } : {}),
  });
  // Migrations build indexes and rewrite tables: minutes without an answer are normal there. They
  // get a pool of their own without the watch; pg opens its connection only when one runs.
  const migrationPool = new pg.Pool({ ...poolConfig, max: 1 });
  const availability = new Availability(onAvailability ?? (() => {}));
  const reachability = new ReachabilityCheck(async () => {
    // Watched too: a server that accepts connections but does not answer must not hold the check.
    const probe = new (watchedClient(PG_CONNECT_TIMEOUT_MS))(connection);
    // A probe that fails after connecting must not throw from an event without a listener.
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.query("SELECT 1");
    } finally {
      await probe.end().catch(() => {});
    }
  }, availability);
  // The server ends connections when it restarts or fails over, or when asked to
  // (pg_terminate_backend, idle_session_timeout). pg then emits 'error': from the pool for an
  // idle connection, from the connection itself while a request holds it. Unheard, either is an
  // uncaught exception that ends the process. The pool drops the connection; the query it ran,
  // if any, fails, and the request answers "database unavailable".
  for (const p of [pool, migrationPool]) {
    p.on("error", (err) => reachability.suspect(err));
    p.on("connect", (client) => client.on("error", (err) => reachability.suspect(err)));
  }
  let current: string;
  let feed: ChangeFeed;
  let preparing: Promise<Awaited<ReturnType<typeof preparePostgis>>> | undefined;
  try {
    const { rows } = await pool.query<{ schema: string | null }>("SELECT current_schema() AS schema");
    current = rows[0]?.schema ?? "public";
    const schemaName = current;
    // Awaited below, beside `beforeReady` (see DbOptions).
    preparing = (async () => {
      const client = await pool.connect();
      try {
        return await preparePostgis(client, postgisSetting, schemaName);
      } finally {
        client.release();
      }
    })();
    // Marked as handled here; its failure is taken where it is awaited.
    preparing.catch(() => {});
    feed = await ChangeFeed.start({
      connection: pgConnection(url, undefined),
      schema: current,
      availability,
      notify: (text, values) => pool.query(text, values),
    });
  } catch (err) {
    await preparing?.catch(() => {});
    await pool.end();
    await migrationPool.end();
    throw err;
  }
  const kyselyOver = (p: pg.Pool, batching: boolean) =>
    new Kysely<Database>({
      // The migrator looks for its tables through the dialect's introspection: in our schema only
      // (see SchemaIntrospector for what listing every schema risks).
      dialect: schemaScopedPostgresDialect(
        {
          pool: {
            // A connection that cannot be had says the server may be gone: find out.
            connect: () =>
              p.connect().catch((err: unknown) => {
                reachability.suspect(err);
                throw err;
              }),
            end: () => p.end(),
          },
        },
        current,
        { batching },
      ),
    });
  // Requests' transactions go through the batching driver (see pg-driver.ts); migrations, which
  // gain nothing from it, through Kysely's own.
  const kysely = kyselyOver(pool, true);
  const writer = kyselyOver(migrationPool, false);
  const db: Db = {
    engine: "postgres",
    schema: current,
    // Set once PostGIS is prepared, before the database is handed out (see DbOptions.beforeReady).
    postgis: undefined,
    postgisNote: "",
    kysely,
    writer,
    feed,
    get connected() {
      return availability.up;
    },
    async transaction(work, options) {
      let changes: readonly Change[] = [];
      const result = await kysely.transaction().execute(async (trx) => {
        const value = await work(trx);
        changes = [...changesOf(options, value), ...takeNotedChanges(trx)];
        if (changes.length > 0) await feed.record(trx, changes);
        return value;
      });
      feed.publish(changes);
      if (changes.length > 0) feed.wake();
      return result;
    },
    async changeInOneStatement<R>(
      build: (node: string) => CompiledQuery,
      changesOf: (rows: readonly R[]) => readonly Change[],
    ): Promise<R[]> {
      const { rows } = await kysely.executeQuery<R>(build(feed.logNode as string));
      const changes = changesOf(rows);
      feed.publish(changes);
      if (changes.length > 0) feed.wake();
      return rows;
    },
    async readTogether(statements, settings) {
      return (await kysely.executeQuery<unknown[]>(inOneMessage(statements, settings))).rows;
    },
    async close() {
      reachability.close();
      await feed.close();
      await kysely.destroy();
      await writer.destroy();
    },
  };
  const [spatial, ready] = await Promise.allSettled([
    preparing ?? Promise.reject(new Error("PostGIS was not prepared")),
    beforeReady?.(db),
  ]);
  if (spatial.status === "rejected" || ready.status === "rejected") {
    await db.close();
    throw spatial.status === "rejected" ? spatial.reason : (ready as PromiseRejectedResult).reason;
  }
  db.postgis = spatial.value.postgis;
  db.postgisNote = spatial.value.note;
  return db;
}

interface PendingUnit {
  work: (trx: Transaction<Database>) => Promise<unknown>;
  options: TransactionOptions<unknown> | undefined;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Units of work committed together at most; keeps one slow batch from growing without bound. */
const MAX_GROUP = 64;

/**
 * Group commit for SQLite. Every commit waits for an fsync; transactions that arrive while one is
 * committing are run together in the next transaction, each inside its own savepoint, and share
 * one fsync. A unit that fails rolls back to its savepoint and fails alone; if the commit itself
 * fails, every unit of the group fails. No unit is answered before its commit is durable, so this
 * changes throughput, not guarantees.
 */
class GroupCommit {
  private queue: PendingUnit[] = [];
  private draining = false;

  constructor(
    private readonly kysely: Kysely<Database>,
    private readonly feed: ChangeFeed,
  ) {}

  run<T>(
    work: (trx: Transaction<Database>) => Promise<T>,
    options: TransactionOptions<T> | undefined,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        work,
        options: options as TransactionOptions<unknown> | undefined,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      if (!this.draining) void this.drain();
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        // better-sqlite3 runs synchronously, so without this the loop would never yield to I/O:
        // requests that arrived during the last commit could not join the next group.
        await new Promise((resolve) => setImmediate(resolve));
        const group = this.queue.splice(0, MAX_GROUP);
        const outcomes: ({ ok: true; value: unknown; noted: Change[] } | { ok: false; error: unknown })[] =
          [];
        try {
          await this.kysely.transaction().execute(async (trx) => {
            for (const unit of group) {
              await sql`SAVEPOINT unit`.execute(trx);
              try {
                const value = await unit.work(trx);
                await sql`RELEASE unit`.execute(trx);
                outcomes.push({ ok: true, value, noted: takeNotedChanges(trx) });
              } catch (error) {
                // What the unit noted was rolled back with it.
                takeNotedChanges(trx);
                await sql`ROLLBACK TO unit`.execute(trx);
                await sql`RELEASE unit`.execute(trx);
                outcomes.push({ ok: false, error });
              }
            }
          });
        } catch (commitError) {
          group.forEach((unit, i) => {
            const outcome = outcomes[i];
            unit.reject(outcome && !outcome.ok ? outcome.error : commitError);
          });
          continue;
        }
        const changed = new Set<Change>();
        group.forEach((unit, i) => {
          const outcome = outcomes[i] as (typeof outcomes)[number];
          if (outcome.ok) {
            for (const change of changesOf(unit.options, outcome.value)) changed.add(change);
            for (const change of outcome.noted) changed.add(change);
            unit.resolve(outcome.value);
          } else {
            unit.reject(outcome.error);
          }
        });
        this.feed.publish([...changed]);
      }
    } finally {
      this.draining = false;
    }
  }
}

/** A statement passed its `portico_deadline` (SQLite). */
export class DeadlineExceeded extends Error {
  constructor() {
    super("statement deadline exceeded");
    this.name = "DeadlineExceeded";
  }
}

/**
 * True when `err` says a statement was stopped for taking too long: its `portico_deadline` on
 * SQLite, `statement_timeout` on PostgreSQL (SQLSTATE 57014, query_canceled).
 */
export function isStatementTimeout(err: unknown): boolean {
  return err instanceof DeadlineExceeded || (err as { code?: string } | undefined)?.code === "57014";
}

/** True when `err` is a unique-constraint violation on either engine. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string };
  return (
    e?.code === "23505" ||
    e?.code === "SQLITE_CONSTRAINT_UNIQUE" ||
    e?.code === "SQLITE_CONSTRAINT_PRIMARYKEY"
  );
}
