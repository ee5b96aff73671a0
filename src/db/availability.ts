/**
 * Whether a PostgreSQL node can reach its database, and the errors that say it cannot.
 *
 * A restart, a failover or `idle_session_timeout` closes connections under a running node. The
 * node must survive that, answer "database unavailable" while the server is away, and say so in
 * its log once per outage (not once per request or per background pass), then once more when it
 * is back.
 */

/** SQLSTATEs that mean the connection, or the server behind it, went away. */
const LOST_STATES = new Set([
  "57P01", // admin_shutdown: pg_terminate_backend, or a fast/smart shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now: starting up, shutting down, in recovery
  "57P05", // idle_session_timeout
  "53300", // too_many_connections
]);

/** Errors of the socket under a connection. */
const LOST_SYSCALLS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * What `pg` and `pg-pool` say, without a code, when a connection ends or cannot be opened in time
 * (a new connection that times out is "Connection terminated due to connection timeout").
 */
const LOST_MESSAGES = [
  "Connection terminated",
  "Client has encountered a connection error and is not queryable",
  "Client was closed and is not queryable",
];

/**
 * pg-pool's answer when every connection of the pool stayed busy for `connectionTimeoutMillis`:
 * the node is saturated, the database is not lost (no probe, not "database unavailable").
 */
const POOL_WAIT_TIMEOUT = "timeout exceeded when trying to connect";

/** True when `err` says no connection of the pool became free in time (see `POOL_WAIT_TIMEOUT`). */
export function isPoolWaitTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === POOL_WAIT_TIMEOUT;
}

/**
 * True when PostgreSQL undid a transaction because it met another at the same moment: a deadlock
 * it broke (40P01; creating a webhook holds back the events of writes under way, see
 * `lockOutboxForNewWebhook`), or a serialization failure (40001). Nothing of it was written, and
 * sending it again may succeed.
 */
export function isTransientConflict(err: unknown): boolean {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  return code === "40P01" || code === "40001";
}

/**
 * True when `err` says the database could not be reached or the connection was lost, rather than
 * that a statement was wrong: retrying later may succeed.
 */
export function isConnectionLoss(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === "string") {
    if (code.startsWith("08") && code.length === 5) return true;
    if (LOST_STATES.has(code) || LOST_SYSCALLS.has(code)) return true;
  }
  // AggregateError: a host name with several addresses, each refused.
  const inner = (err as { errors?: unknown }).errors;
  if (Array.isArray(inner) && inner.length > 0 && inner.every(isConnectionLoss)) return true;
  return typeof message === "string" && LOST_MESSAGES.some((m) => message.startsWith(m));
}

/** The connections a node holds: the pool that runs queries, and the change feed's LISTEN. */
export type Link = "queries" | "changeFeed";

export type AvailabilityChange =
  | { state: "lost"; link: Link; error: unknown }
  | { state: "restored"; downMs: number };

/**
 * Reports the node's database as lost when the first of its links goes down and as restored when
 * the last comes back: one line each per outage, however many connections failed in it.
 */
export class Availability {
  private readonly down = new Map<Link, unknown>();
  private since = 0;

  constructor(
    private readonly report: (change: AvailabilityChange) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** True while every link works. */
  get up(): boolean {
    return this.down.size === 0;
  }

  lost(link: Link, error: unknown): void {
    if (this.down.has(link)) return;
    const wasUp = this.up;
    this.down.set(link, error);
    if (!wasUp) return;
    this.since = this.now();
    this.report({ state: "lost", link, error });
  }

  restored(link: Link): void {
    if (!this.down.delete(link) || !this.up) return;
    this.report({ state: "restored", downMs: this.now() - this.since });
  }
}

/** First and largest pause between two checks of an unreachable database. */
const CHECK_FIRST_MS = 250;
const CHECK_MAX_MS = 5000;

/**
 * Decides whether the query pool's database is reachable. A failed connection alone does not
 * say so: `idle_session_timeout` or `pg_terminate_backend` closes one connection of a healthy
 * server. So each failure asks `probe` (a fresh connection, not one of the pool's, which may all
 * be busy), and only a failed probe marks the link lost; the probe then repeats, with backoff,
 * until the server answers.
 */
export class ReachabilityCheck {
  private checking = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly probe: () => Promise<void>,
    private readonly availability: Availability,
  ) {}

  /** Something failed with `err`; checks the database unless a check is already under way. */
  suspect(err: unknown): void {
    if (this.checking || this.closed || !isConnectionLoss(err)) return;
    this.checking = true;
    void this.check(CHECK_FIRST_MS);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private async check(delayMs: number): Promise<void> {
    try {
      await this.probe();
    } catch (probeError) {
      if (this.closed) return;
      this.availability.lost("queries", probeError);
      this.timer = setTimeout(() => void this.check(Math.min(delayMs * 2, CHECK_MAX_MS)), delayMs);
      this.timer.unref();
      return;
    }
    this.checking = false;
    this.availability.restored("queries");
  }
}
