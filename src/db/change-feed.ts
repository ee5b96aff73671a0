import { randomBytes } from "node:crypto";
import { CompiledQuery } from "kysely";
import pg from "pg";
import type { Availability } from "./availability.js";
import type { Queryable } from "./database.js";
import { deferred, prepared } from "./pg-driver.js";

/**
 * What in-memory caches may be holding that a change makes stale:
 * - `org`: the organization and its settings;
 * - `auth`: token holders, their privileges and their own user resource;
 * - `events`: the outbox received events, so content, groups or users changed (search totals go
 *   stale) and the webhook dispatcher has work. `recordEvent` notes it; nobody declares it by hand;
 * - `content`: who may see an item: its row (owner, access), its sharing, its hosted service's
 *   definition. The subject is the item id; none when many items changed at once. The
 *   repositories that write those rows note it, so no caller can forget it;
 * - `members`: group memberships. The subject is the user id; none when a whole group went.
 *   Noted by the repositories too.
 */
export type Topic = "org" | "auth" | "events" | "content" | "members";
const TOPICS: readonly Topic[] = ["org", "auth", "events", "content", "members"];

/**
 * A change: a whole topic (`auth`), or one subject within it (`auth:<userId>`), so caches can
 * drop only what concerns that subject.
 */
export type Change = Topic | `${Topic}:${string}`;

function parseChange(text: string): { topic: Topic; subject: string | undefined } | undefined {
  const i = text.indexOf(":");
  const topic = (i < 0 ? text : text.slice(0, i)) as Topic;
  if (!TOPICS.includes(topic)) return undefined;
  return { topic, subject: i < 0 ? undefined : text.slice(i + 1) };
}
const CHANNEL = "portico_changes";

/** Changes noted from inside a transaction, by the transaction object they were noted on. */
const noted = new WeakMap<Queryable, Set<Change>>();

/**
 * Notes, from inside a transaction, a change it makes, for code that does not own the transaction
 * (`recordEvent`); `Db.transaction` announces it with the changes its caller declared.
 */
export function noteChange(trx: Queryable, change: Change): void {
  // Outside a transaction nobody would ever take the note: the change would reach no cache.
  if (!trx.isTransaction) throw new Error(`noteChange(${change}) outside a transaction`);
  let set = noted.get(trx);
  if (!set) {
    set = new Set();
    noted.set(trx, set);
  }
  set.add(change);
}

/** The changes noted on `trx` since the last call, which forgets them. */
export function takeNotedChanges(trx: Queryable): Change[] {
  const set = noted.get(trx);
  if (!set) return [];
  noted.delete(trx);
  return [...set];
}

/**
 * Tells caches that data changed. Within one process a change is announced right after its
 * transaction commits. With PostgreSQL, several nodes share the data: each transaction that
 * changes something writes its changes into `change_log` (migration 0020), in the transaction, so
 * the row commits, or rolls back, with the change. After the commit the node wakes the others with
 * a NOTIFY sent outside any transaction (coalesced: one in flight at a time), and each reads the
 * rows that committed since its last read. A NOTIFY inside the transaction would do it in one step,
 * but PostgreSQL then holds a database-wide lock from the NOTIFY's commit until the commit is
 * flushed, so concurrent commits would not share their flushes.
 *
 * Rows are read by commit, not by id: each carries its transaction id, and a read takes the rows
 * visible now that were not visible in the snapshot of the previous read (`pg_visible_in_snapshot`),
 * so a transaction that began earlier but committed later is not skipped. A node also reads every
 * `POLL_MS`, so a NOTIFY lost to a crash between commit and NOTIFY only delays the news.
 *
 * While the listening connection is down a node cannot know what changed elsewhere, so `reliable`
 * turns false and caches must read through until it is back.
 */
export class ChangeFeed {
  private readonly listeners = new Map<Topic, Set<(subject: string | undefined) => void>>();
  private client: pg.Client | undefined;
  private connected: boolean;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** This process, in the log's rows and the NOTIFY payload: it hears its own changes at commit. */
  private readonly node = randomBytes(8).toString("hex");
  /** The snapshot of the last read of the log (`pg_snapshot` text). */
  private snapshot = "";
  private lastRead = 0;
  private lastPrune = 0;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private waking = false;
  private wakeAgain = false;

  private constructor(
    private readonly connection: pg.ClientConfig | undefined,
    private readonly schema: string | undefined,
    private readonly availability: Pick<Availability, "lost" | "restored"> | undefined,
    private readonly notify: ((text: string, values: unknown[]) => Promise<unknown>) | undefined,
  ) {
    // With one embedded database there are no other writers to hear from.
    this.connected = connection === undefined;
  }

  /**
   * `connection` is how to reach PostgreSQL (undefined on SQLite); `availability` hears when the
   * listening connection is lost and when it is back; `notify` runs a statement on a pooled
   * connection (the NOTIFY after a commit).
   */
  static async start(options: {
    connection: pg.ClientConfig | undefined;
    schema: string | undefined;
    availability?: Pick<Availability, "lost" | "restored">;
    notify?: (text: string, values: unknown[]) => Promise<unknown>;
  }): Promise<ChangeFeed> {
    const feed = new ChangeFeed(options.connection, options.schema, options.availability, options.notify);
    if (options.connection) await feed.listen();
    return feed;
  }

  /** False while changes made by other nodes could go unheard: caches must not answer then. */
  get reliable(): boolean {
    return this.connected;
  }

  /** `listener` gets the subject of the change, or undefined when the whole topic changed. */
  subscribe(topic: Topic, listener: (subject: string | undefined) => void): void {
    let set = this.listeners.get(topic);
    if (!set) {
      set = new Set();
      this.listeners.set(topic, set);
    }
    set.add(listener);
  }

  /**
   * Inside the transaction making a change: writes it into the change log, which commits (or not)
   * with the transaction. The row travels with the COMMIT (see pg-driver.ts).
   */
  async record(trx: Queryable, changes: readonly Change[]): Promise<void> {
    if (!this.connection) return;
    // PostgreSQL's text, written once: compiling it with Kysely on every write cost more than sending it.
    await trx.executeQuery(
      deferred(
        prepared(
          CompiledQuery.raw("INSERT INTO change_log (node, changes) VALUES ($1, $2)", [
            this.node,
            changes.join(","),
          ]),
        ),
      ),
    );
  }

  /**
   * What a statement that writes its own change log row (see `Db.changeInOneStatement`) puts in
   * its `node` column, as `record` does; undefined without a log (SQLite).
   */
  get logNode(): string | undefined {
    return this.connection ? this.node : undefined;
  }

  /**
   * After a commit that recorded changes: wakes the other nodes. Not awaited by the request;
   * commits during a NOTIFY in flight are covered by one more after it.
   */
  wake(): void {
    if (!this.notify) return;
    if (this.waking) {
      this.wakeAgain = true;
      return;
    }
    this.waking = true;
    this.wakeAgain = false;
    // A failure is covered by the other nodes' periodic reads.
    void this.notify("SELECT pg_notify($1, $2)", [CHANNEL, `${this.schema ?? ""}/${this.node}`])
      .catch(() => {})
      .finally(() => {
        this.waking = false;
        if (this.wakeAgain && !this.closed) this.wake();
      });
  }

  /** After a commit: drops what this process cached. */
  publish(changes: readonly Change[]): void {
    for (const change of changes) {
      const parsed = parseChange(change);
      if (!parsed) continue;
      for (const listener of this.listeners.get(parsed.topic) ?? []) listener(parsed.subject);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.heartbeat);
    const client = this.client;
    this.client = undefined;
    await this.reading?.catch(() => {});
    await client?.end().catch(() => {});
  }

  private get table(): string {
    return `${pg.escapeIdentifier(this.schema ?? "public")}.change_log`;
  }

  /**
   * Reads the log's rows committed since the last read and publishes them; one read at a time,
   * another after it when asked meanwhile. A failed read ends the connection (the feed is then
   * unreliable until it is back).
   */
  private read(): void {
    const client = this.client;
    if (!client || this.closed) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.readAgain = false;
    this.reading = this.readOnce(client)
      .catch((err: unknown) => {
        // The connection cannot be trusted to have heard everything: start over.
        this.lost(client, err);
        void client.end().catch(() => {});
      })
      .finally(() => {
        this.reading = undefined;
        if (this.readAgain) this.read();
      });
  }

  private async readOnce(client: pg.Client): Promise<void> {
    const since = pg.escapeLiteral(this.snapshot);
    // LISTEN again (a no-op) in front: pg_stat_activity then shows what the connection is for.
    let results: pg.QueryResult<{ snapshot: string; changes: string | null }>[];
    try {
      results = (await client.query(
        `LISTEN ${CHANNEL}; SELECT pg_current_snapshot()::text AS snapshot, (SELECT string_agg(changes, ',') FROM ${this.table} WHERE xid >= pg_snapshot_xmin(${since}::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, ${since}::pg_snapshot) AND node <> ${pg.escapeLiteral(this.node)}) AS changes`,
      )) as unknown as pg.QueryResult<{ snapshot: string; changes: string | null }>[];
    } catch (err) {
      // Before migration 0020 has run (the feed starts before migrations) there is no log, and no
      // node can have written to it.
      if ((err as { code?: string }).code === "42P01") return;
      throw err;
    }
    const row = results[results.length - 1]?.rows[0];
    if (!row) throw new Error("change log read returned no row");
    if (client !== this.client) return;
    const now = Date.now();
    // Rows are pruned after PRUNE_AFTER_MS: a node that has not read for a good part of that
    // may have missed some. Drop everything instead.
    const missed = now - this.lastRead > PRUNE_AFTER_MS / 4;
    this.snapshot = row.snapshot;
    this.lastRead = now;
    if (missed) this.publish(TOPICS);
    else if (row.changes) this.publish([...new Set(row.changes.split(","))] as Change[]);
    if (now - this.lastPrune > PRUNE_EVERY_MS) {
      this.lastPrune = now;
      await client.query(
        `LISTEN ${CHANNEL}; DELETE FROM ${this.table} WHERE at < clock_timestamp() - interval '${PRUNE_AFTER_MS} milliseconds' AND xid < pg_snapshot_xmin(pg_current_snapshot())`,
      );
    }
  }

  private async listen(): Promise<void> {
    const client = new pg.Client(this.connection);
    client.on("notification", (message) => {
      const payload = message.payload ?? "";
      const slash = payload.indexOf("/");
      // Several portals (tests, or tenants) may share one database in separate schemas.
      if (slash < 0 || payload.slice(0, slash) !== (this.schema ?? "")) return;
      // Its own commits this node published already.
      if (payload.slice(slash + 1) === this.node) return;
      this.read();
    });
    // pg emits 'error' when the server ends the connection (a restart, pg_terminate_backend);
    // without a listener that would be an uncaught exception.
    client.on("error", (err) => this.lost(client, err));
    client.on("end", () => this.lost(client, new Error("change-feed connection ended")));
    let idleLimitMs: number;
    try {
      await client.connect();
      // pg_settings has no row for it before PostgreSQL 14.
      const { rows } = await client.query<{ ms: number }>(
        "SELECT setting::int AS ms FROM pg_settings WHERE name = 'idle_session_timeout'",
      );
      idleLimitMs = rows[0]?.ms ?? 0;
      // From here on, every commit that is not in this snapshot is read from the log. One text
      // starting with LISTEN, as every later read: pg_stat_activity shows what the connection is
      // for from its first moment.
      const started = (await client.query(
        `LISTEN ${CHANNEL}; SELECT pg_current_snapshot()::text AS snapshot`,
      )) as unknown as pg.QueryResult<{ snapshot: string }>[];
      this.snapshot = started[started.length - 1]?.rows[0]?.snapshot ?? "";
      this.lastRead = Date.now();
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.connected = true;
    // Reads the log every POLL_MS, for a NOTIFY lost to a crash between a commit and its NOTIFY.
    // The same query keeps the listening session from being idle: with idle_session_timeout set,
    // the server would end it every time the limit passes, and every cache of the node emptied
    // with it.
    const pause = idleLimitMs > 0 ? Math.min(POLL_MS, Math.max(100, Math.floor(idleLimitMs / 3))) : POLL_MS;
    this.heartbeat = setInterval(() => this.read(), pause);
    this.heartbeat.unref();
    // Changes committed while nobody listened were never heard: drop everything cached.
    this.publish(TOPICS);
    this.availability?.restored("changeFeed");
  }

  private lost(client: pg.Client, err: unknown): void {
    // Only the live connection counts: a failed attempt is retried by `retry`.
    if (this.closed || client !== this.client) return;
    this.connected = false;
    this.client = undefined;
    clearInterval(this.heartbeat);
    this.publish(TOPICS);
    this.availability?.lost("changeFeed", err);
    this.retry(RETRY_FIRST_MS);
  }

  /** Reconnects after `delayMs`, doubling the pause after each failure up to `RETRY_MAX_MS`. */
  private retry(delayMs: number): void {
    if (this.closed) return;
    // Jitter, so that the nodes of a cluster do not all knock at the same moment after a restart.
    const pause = delayMs * (0.75 + Math.random() / 2);
    this.retryTimer = setTimeout(() => {
      this.listen().catch(() => this.retry(Math.min(delayMs * 2, RETRY_MAX_MS)));
    }, pause);
    this.retryTimer.unref();
  }
}

/** How often a node reads the change log without being woken. */
const POLL_MS = 1000;
/** Rows of the change log older than this are deleted, at most every PRUNE_EVERY_MS by each node. */
const PRUNE_AFTER_MS = 5 * 60_000;
const PRUNE_EVERY_MS = 60_000;

/** First and largest pause between two attempts to reconnect the listening connection. */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10_000;
