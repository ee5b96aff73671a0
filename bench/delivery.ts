/**
 * The webhook delivery case of `npm run bench`: a receiver on loopback in this process, webhooks
 * pointing at it, and events:
 * - 10,000 events to one webhook, and 1,000 events fanned out to 20 webhooks, written straight into
 *   the outbox in one transaction (as a burst of changes would leave it): deliveries per second
 *   from the first delivery to the last;
 * - changes made through the API at a steady 200 per second: event -> delivery latency, from the
 *   event's `when` to its arrival at the receiver (one machine, one clock).
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { performance } from "node:perf_hooks";
import SQLite from "better-sqlite3";
import pg from "pg";
import { postgresCpuMs } from "./load.js";
import type { EngineName, Store } from "./stores.js";

export interface DeliveryFigures {
  name: string;
  events: number;
  deliveries: number;
  /** Deliveries per second from the first arrival to the last. */
  perSecond: number;
  /** Event -> delivery latency percentiles, milliseconds. */
  p50: number;
  p99: number;
  /** Seconds from the events' commit to the last arrival. */
  totalS: number;
  /**
   * The server's CPU time (user + system) from the events' commit to the last arrival, per
   * delivery, in microseconds; undefined without /proc.
   */
  cpuUsPerDelivery: number | undefined;
  /**
   * The portal's PostgreSQL backends' CPU time over the same span, per delivery, in microseconds;
   * undefined on SQLite or without /proc.
   */
  dbCpuUsPerDelivery: number | undefined;
}

export const DELIVERY = {
  burstEvents: 10_000,
  fanOutEvents: 1_000,
  fanOutWebhooks: 20,
  paced: { perSecond: 200, seconds: 5 },
  /** A case that has not finished by then is reported as failed. */
  timeoutMs: 120_000,
} as const;

interface Arrival {
  webhookId: string;
  eventId: string;
  when: number;
  at: number;
}

/** Collects deliveries; answers 200 at once, as a healthy receiver does. */
class BenchReceiver {
  readonly arrivals: Arrival[] = [];
  private waiter: (() => void) | undefined;
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<BenchReceiver> {
    let self: BenchReceiver | undefined;
    const server = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = Date.now();
        res.writeHead(200).end();
        const payload = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        for (const e of payload.events ?? []) {
          self?.arrivals.push({ webhookId: payload.info.webhookId, eventId: e.id, when: e.when, at });
        }
        self?.waiter?.();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    self = new BenchReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`);
    return self;
  }

  async waitForCount(count: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.arrivals.length < count) {
      if (Date.now() > deadline) {
        throw new Error(`only ${this.arrivals.length} of ${count} deliveries arrived in ${timeoutMs} ms`);
      }
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        setTimeout(resolve, 100);
      });
    }
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Just the webhook calls the case needs. */
class HookApi {
  constructor(
    private readonly origin: string,
    private readonly token: string,
  ) {}

  async create(name: string, url: string): Promise<string> {
    const r = await this.post("/sharing/rest/portals/self/webhooks/createWebhook", {
      name,
      url,
      changes: "allChanges",
      // The bench receiver never fails; no policy should get in the way of a figure.
      config: JSON.stringify({ deactivationPolicy: { numberOfFailures: 1000, daysInPast: 1 } }),
    });
    if (!r.success) throw new Error(`createWebhook: ${JSON.stringify(r)}`);
    return r.webhook.id as string;
  }

  async delete(id: string): Promise<void> {
    await this.post(`/sharing/rest/portals/self/webhooks/${id}/delete`, {});
  }

  async addItem(title: string): Promise<void> {
    const r = await this.post("/sharing/rest/content/users/bench_admin/addItem", { title, type: "Web Map" });
    if (!r.success) throw new Error(`addItem: ${JSON.stringify(r)}`);
  }

  private async post(p: string, params: Record<string, string>): Promise<any> {
    const res = await fetch(`${this.origin}${p}`, {
      method: "POST",
      body: new URLSearchParams({ f: "json", token: this.token, ...params }),
    });
    return res.json();
  }
}

/** Writes `count` item-update events into the outbox in one transaction, as the API would. */
async function insertEvents(engine: EngineName, store: Store, count: number): Promise<void> {
  const now = Date.now();
  const rows = Array.from({ length: count }, () => {
    const id = randomBytes(16).toString("hex");
    return [
      randomBytes(16).toString("hex"),
      now,
      "item",
      "update",
      id,
      "bench",
      "bench_admin",
      "{}",
      `/items/${id}/update`,
    ];
  });
  const columns = "id, occurred, source, operation, object_id, actor_id, actor_username, properties, uri";
  if (engine === "sqlite") {
    const db = new SQLite(path.join(store.env.PORTICO_DATA_DIR as string, "portico.sqlite"));
    db.pragma("busy_timeout = 10000");
    const insert = db.prepare(`INSERT INTO events (${columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    db.transaction(() => {
      for (const row of rows) insert.run(...row);
    })();
    db.close();
    return;
  }
  const client = new pg.Client({ connectionString: store.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query("BEGIN");
    for (let i = 0; i < rows.length; i += 1000) {
      const batch = rows.slice(i, i + 1000);
      let n = 0;
      const tuples = batch.map((r) => `(${r.map(() => `$${++n}`).join(", ")})`);
      await client.query(`INSERT INTO events (${columns}) VALUES ${tuples.join(", ")}`, batch.flat());
    }
    // What recordEvent announces, so every node's dispatcher wakes (the portal is in `public`).
    await client.query("SELECT pg_notify('portico_changes', 'public/events')");
    await client.query("COMMIT");
  } finally {
    await client.end();
  }
}

function figuresOf(
  name: string,
  events: number,
  arrivals: Arrival[],
  committed: number,
  cpuMs: number | undefined,
  dbCpuMs: number | undefined,
): DeliveryFigures {
  const ats = arrivals.map((a) => a.at);
  const first = Math.min(...ats);
  const last = Math.max(...ats);
  const latencies = arrivals.map((a) => a.at - a.when).sort((a, b) => a - b);
  const pct = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    name,
    events,
    deliveries: arrivals.length,
    perSecond: arrivals.length > 1 ? ((arrivals.length - 1) * 1000) / Math.max(1, last - first) : NaN,
    p50: pct(0.5),
    p99: pct(0.99),
    totalS: (last - committed) / 1000,
    cpuUsPerDelivery: cpuMs === undefined ? undefined : (cpuMs * 1000) / Math.max(1, arrivals.length),
    dbCpuUsPerDelivery: dbCpuMs === undefined ? undefined : (dbCpuMs * 1000) / Math.max(1, arrivals.length),
  };
}

/**
 * Runs the case against a portal at `origin` on `store`; `serverCpuMs` reads the portal's CPU
 * time so far (undefined without /proc).
 */
export async function measureDelivery(
  engine: EngineName,
  store: Store,
  origin: string,
  token: string,
  serverCpuMs: () => number | undefined = () => undefined,
): Promise<DeliveryFigures[]> {
  const cpuSince = (before: number | undefined) => {
    const now = serverCpuMs();
    return before === undefined || now === undefined ? undefined : now - before;
  };
  // The portal's backends, by their database's name; the bench's own connection that writes the
  // events is gone by the end of a case, so it is left out.
  const database = engine === "postgres" ? new URL(store.env.DATABASE_URL as string).pathname.slice(1) : "";
  const dbCpu = () => (database === "" ? undefined : postgresCpuMs([database]));
  const dbCpuSince = (before: Map<number, number> | undefined) => {
    const after = dbCpu();
    if (before === undefined || after === undefined) return undefined;
    let used = 0;
    for (const [pid, ms] of after) used += ms - (before.get(pid) ?? 0);
    return used;
  };
  const receiver = await BenchReceiver.start();
  const api = new HookApi(origin, token);
  const results: DeliveryFigures[] = [];
  try {
    // 1. A burst to one webhook.
    const one = await api.create("bench one", receiver.url);
    receiver.arrivals.length = 0;
    let cpu = serverCpuMs();
    let db = dbCpu();
    let committed = Date.now();
    await insertEvents(engine, store, DELIVERY.burstEvents);
    await receiver.waitForCount(DELIVERY.burstEvents, DELIVERY.timeoutMs);
    results.push(
      figuresOf(
        `${DELIVERY.burstEvents} events -> 1 webhook`,
        DELIVERY.burstEvents,
        receiver.arrivals,
        committed,
        cpuSince(cpu),
        dbCpuSince(db),
      ),
    );
    await api.delete(one);

    // 2. Fan-out.
    const many: string[] = [];
    for (let i = 0; i < DELIVERY.fanOutWebhooks; i++)
      many.push(await api.create(`bench fan ${i}`, receiver.url));
    receiver.arrivals.length = 0;
    cpu = serverCpuMs();
    db = dbCpu();
    committed = Date.now();
    await insertEvents(engine, store, DELIVERY.fanOutEvents);
    const fanOut = DELIVERY.fanOutEvents * DELIVERY.fanOutWebhooks;
    await receiver.waitForCount(fanOut, DELIVERY.timeoutMs);
    results.push(
      figuresOf(
        `${DELIVERY.fanOutEvents} events -> ${DELIVERY.fanOutWebhooks} webhooks`,
        DELIVERY.fanOutEvents,
        receiver.arrivals,
        committed,
        cpuSince(cpu),
        dbCpuSince(db),
      ),
    );
    for (const id of many) await api.delete(id);

    // 3. Latency at a steady rate of real changes through the API.
    const paced = await api.create("bench paced", receiver.url);
    receiver.arrivals.length = 0;
    const { perSecond, seconds } = DELIVERY.paced;
    const total = perSecond * seconds;
    // Includes serving the addItem calls: the figure says what a change costs end to end.
    cpu = serverCpuMs();
    db = dbCpu();
    committed = Date.now();
    const start = performance.now();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < total; i++) {
      const due = start + (i * 1000) / perSecond;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      sends.push(api.addItem(`paced ${i}`));
    }
    await Promise.all(sends);
    await receiver.waitForCount(total, DELIVERY.timeoutMs);
    results.push(
      figuresOf(
        `${perSecond} changes/s via the API`,
        total,
        receiver.arrivals,
        committed,
        cpuSince(cpu),
        dbCpuSince(db),
      ),
    );
    await api.delete(paced);
  } finally {
    await receiver.close();
  }
  return results;
}
