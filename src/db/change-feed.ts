import { sql } from "kysely";
import pg from "pg";
import type { Queryable } from "./database.js";

/**
 * What in-memory caches may be holding that a change makes stale:
 * - `org`: the organization and its settings;
 * - `auth`: token holders, their privileges and their own user resource;
 * - `events`: the outbox received events, so content, groups or users changed (search totals go
 *   stale) and the webhook dispatcher has work. `recordEvent` notes it; nobody declares it by hand.
 */
export type Topic = "org" | "auth" | "events";
const TOPICS: readonly Topic[] = ["org", "auth", "events"];

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

  private constructor(
    private readonly databaseUrl: string | undefined,
    private readonly schema: string | undefined,
    private readonly onError: (err: unknown) => void,
  ) {
    // With one embedded database there are no other writers to hear from.
    this.connected = databaseUrl === undefined;
  }

  static async start(options: {
    databaseUrl: string | undefined;
    schema: string | undefined;
    onError?: (err: unknown) => void;
  }): Promise<ChangeFeed> {
    const feed = new ChangeFeed(options.databaseUrl, options.schema, options.onError ?? (() => {}));
    if (options.databaseUrl) await feed.listen();
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
    if (!this.databaseUrl) return;
    const payload = `${this.schema ?? ""}/${changes.join(",")}`;
    await sql`SELECT pg_notify(${CHANNEL}, ${payload})`.execute(trx);
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
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on("notification", (message) => {
      const payload = message.payload ?? "";
      const slash = payload.indexOf("/");
      // Several portals (tests, or tenants) may share one database in separate schemas.
      if (slash < 0 || payload.slice(0, slash) !== (this.schema ?? "")) return;
      this.publish(payload.slice(slash + 1).split(",") as Change[]);
    });
    client.on("error", (err) => this.lost(err));
    client.on("end", () => this.lost(new Error("change-feed connection ended")));
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.client = client;
    this.connected = true;
    // Anything may have changed while we were not listening.
    this.publish(TOPICS);
  }

  private lost(err: unknown): void {
    if (this.closed || !this.connected) return;
    this.connected = false;
    this.client = undefined;
    this.publish(TOPICS);
    this.onError(err);
    this.retry(500);
  }

  private retry(delayMs: number): void {
    if (this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.listen().catch((err: unknown) => {
        this.onError(err);
        this.retry(Math.min(delayMs * 2, 10_000));
      });
    }, delayMs);
    this.retryTimer.unref();
  }
}
