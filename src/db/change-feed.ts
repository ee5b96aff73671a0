import { sql } from "kysely";
import pg from "pg";
import type { Availability } from "./availability.js";
import type { Queryable } from "./database.js";
import { deferred } from "./pg-driver.js";

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
 * transaction commits. With PostgreSQL, several nodes share the data, so the change is also sent
 * with NOTIFY inside the transaction (PostgreSQL delivers it at commit, and never for a rollback)
 * and every node listens. While the listening connection is down a node cannot know what changed
 * elsewhere, so `reliable` turns false and caches must read through until it is back.
 */
export class ChangeFeed {
  private readonly listeners = new Map<Topic, Set<(subject: string | undefined) => void>>();
  private client: pg.Client | undefined;
  private connected: boolean;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  private constructor(
    private readonly connection: pg.ClientConfig | undefined,
    private readonly schema: string | undefined,
    private readonly availability: Pick<Availability, "lost" | "restored"> | undefined,
  ) {
    // With one embedded database there are no other writers to hear from.
    this.connected = connection === undefined;
  }

  /**
   * `connection` is how to reach PostgreSQL (undefined on SQLite); `availability` hears when the
   * listening connection is lost and when it is back.
   */
  static async start(options: {
    connection: pg.ClientConfig | undefined;
    schema: string | undefined;
    availability?: Pick<Availability, "lost" | "restored">;
  }): Promise<ChangeFeed> {
    const feed = new ChangeFeed(options.connection, options.schema, options.availability);
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

  /** Inside the transaction making a change: tells the other nodes when (if) it commits. */
  async announce(trx: Queryable, changes: readonly Change[]): Promise<void> {
    if (!this.connection) return;
    const payload = `${this.schema ?? ""}/${changes.join(",")}`;
    // Sent with the COMMIT (see pg-driver.ts).
    await trx.executeQuery(deferred(sql`SELECT pg_notify(${CHANNEL}, ${payload})`.compile(trx)));
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
    await client?.end().catch(() => {});
  }

  private async listen(): Promise<void> {
    const client = new pg.Client(this.connection);
    client.on("notification", (message) => {
      const payload = message.payload ?? "";
      const slash = payload.indexOf("/");
      // Several portals (tests, or tenants) may share one database in separate schemas.
      if (slash < 0 || payload.slice(0, slash) !== (this.schema ?? "")) return;
      this.publish(payload.slice(slash + 1).split(",") as Change[]);
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
      await client.query(`LISTEN ${CHANNEL}`);
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
    // A listening session is idle as far as the server knows: with idle_session_timeout set, it
    // would be ended every time the limit passes, and every cache of the node emptied with it.
    // A query now and then keeps it alive: LISTEN again, a no-op that leaves pg_stat_activity
    // showing what the connection is for. If it fails, the connection's 'error' or 'end' event
    // has already reported why.
    if (idleLimitMs > 0) {
      this.heartbeat = setInterval(
        () => void client.query(`LISTEN ${CHANNEL}`).catch(() => {}),
        Math.max(100, Math.floor(idleLimitMs / 3)),
      );
      this.heartbeat.unref();
    }
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

/** First and largest pause between two attempts to reconnect the listening connection. */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10_000;
