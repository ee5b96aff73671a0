import { sql } from "kysely";
import { Counter, collectDefaultMetrics, Gauge, type Metric, Registry } from "prom-client";
import type { Db } from "../db/database.js";

/**
 * Prometheus metrics of one node, served at `/metrics` in the text exposition format.
 *
 * Two kinds live here. Counters and histograms count what this node did (requests it answered,
 * webhook attempts it made); a Prometheus server sums them over the nodes. Gauges read from the
 * database at scrape time describe the shared work of the whole cluster (events not yet
 * dispatched, notifications waiting, sync jobs by state), so every node reports the same value
 * for them; alert on `max`, not `sum`. Each of those reads uses a partial index or a small table,
 * so a scrape costs a few index lookups.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new RequestTally();
  private readonly deliveries: Counter<"outcome">;

  constructor(db: Db, node: { engine: string; version: string }) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: "portico_info",
      help: "Constant 1, labelled with this node's version and database engine.",
      labelNames: ["version", "engine"],
      registers,
    }).set({ version: node.version, engine: node.engine }, 1);
    new Gauge({
      name: "portico_database_connected",
      help: "1 while this node reaches its database and hears the change feed; 0 from the loss of either until both are back (requests needing the database fail meanwhile).",
      registers,
      collect() {
        this.set(db.connected ? 1 : 0);
      },
    });
    for (const metric of this.requests.metrics()) this.registry.registerMetric(metric);
    this.deliveries = new Counter({
      name: "portico_webhook_deliveries_total",
      help: "Webhook notification attempts made by this node, by outcome: delivered, retrying (failed, will retry), failed (no retry left, or 410), handed_back (cut off by a shutdown, or claimed and held until its lease no longer covered an attempt; released unattempted, any node resends).",
      labelNames: ["outcome"],
      registers,
    });
    new Gauge({
      name: "portico_outbox_depth",
      help: "Committed change events not yet dispatched to webhooks (cluster-wide).",
      registers,
      async collect() {
        this.set(await count(db, "events", sql`dispatched = 0`));
      },
    });
    new Gauge({
      name: "portico_webhook_pending_notifications",
      help: "Webhook notifications waiting for a first attempt or a retry (cluster-wide).",
      registers,
      async collect() {
        this.set(await count(db, "notifications", sql`status = 'pending'`));
      },
    });
    new Gauge({
      name: "portico_sync_jobs",
      help: "Collaboration sync jobs by state (cluster-wide).",
      labelNames: ["state"],
      registers,
      async collect() {
        const rows = await db.kysely
          .selectFrom("sync_jobs")
          .select(["status", (eb) => eb.fn.countAll<number | string>().as("n")])
          .groupBy("status")
          .execute()
          .catch(() => undefined);
        for (const state of SYNC_STATES) {
          this.set({ state }, rows ? Number(rows.find((r) => r.status === state)?.n ?? 0) : Number.NaN);
        }
      },
    });
  }

  /** Counts one answered request. `code` is the error envelope's code, or undefined for a success. */
  request(route: string, method: string, code: number | undefined, seconds: number): void {
    this.requests.record(route, method, code, seconds);
  }

  delivery(outcome: DeliveryOutcome, count = 1): void {
    if (count > 0) this.deliveries.inc({ outcome }, count);
  }

  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** Upper bounds of the request latency histogram's buckets, in seconds. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Requests of one route, method and outcome. */
interface RequestSeries {
  labels: { route: string; method: string; outcome: "success" | "error"; code: string };
  count: number;
}

/** Latencies of one route and method: answers per bucket (not cumulative), their sum and count. */
interface LatencySeries {
  labels: { route: string; method: string };
  buckets: number[];
  sum: number;
  count: number;
}

/**
 * The request counter (`portico_http_requests_total`) and latency histogram
 * (`portico_http_request_duration_seconds`), tallied in plain maps and formatted by prom-client
 * at scrape time as its own counter and histogram would be. Every answer is counted: prom-client's
 * labelled `inc` and `observe` check the labels and hash them, sorted, on every call, which cost
 * ~6 µs of CPU of a ~60 µs signed-in read (alternated runs of the read case with and without
 * them); a map lookup by a string key costs next to nothing. The registry takes any object with
 * prom-client's metric interface (`name`, `get`, `reset`).
 */
class RequestTally {
  readonly #requests = new Map<string, RequestSeries>();
  readonly #latency = new Map<string, LatencySeries>();

  record(route: string, method: string, code: number | undefined, seconds: number): void {
    // Newlines are in no route name, method or code.
    const series = `${route}\n${method}`;
    const key = code === undefined ? series : `${series}\n${code}`;
    let requests = this.#requests.get(key);
    if (!requests) {
      requests = {
        labels: {
          route,
          method,
          outcome: code === undefined ? "success" : "error",
          code: code === undefined ? "" : String(code),
        },
        count: 0,
      };
      this.#requests.set(key, requests);
    }
    requests.count++;
    let latency = this.#latency.get(series);
    if (!latency) {
      latency = { labels: { route, method }, buckets: LATENCY_BUCKETS.map(() => 0), sum: 0, count: 0 };
      this.#latency.set(series, latency);
    }
    // Beyond the last bound only +Inf (the count) holds it, as in prom-client.
    const bucket = LATENCY_BUCKETS.findIndex((bound) => seconds <= bound);
    if (bucket >= 0) latency.buckets[bucket] = (latency.buckets[bucket] ?? 0) + 1;
    latency.sum += seconds;
    latency.count++;
  }

  /** The two metrics, for `Registry.registerMetric`. */
  metrics(): Metric[] {
    const requests = this.#requests;
    const latency = this.#latency;
    const counter = {
      name: "portico_http_requests_total",
      help: "Requests answered, by route name, method and outcome (success, or error with the envelope's code).",
      type: "counter",
      aggregator: "sum",
      get: async () => ({
        ...counter,
        values: [...requests.values()].map((s) => ({ labels: s.labels, value: s.count })),
      }),
      reset: () => requests.clear(),
    };
    const name = "portico_http_request_duration_seconds";
    const histogram = {
      name,
      help: "Time from receiving a request to sending the answer, by route name and method.",
      type: "histogram",
      aggregator: "sum",
      get: async () => ({
        ...histogram,
        values: [...latency.values()].flatMap((s) => {
          let cumulative = 0;
          return [
            ...LATENCY_BUCKETS.map((le, i) => {
              cumulative += s.buckets[i] ?? 0;
              return { metricName: `${name}_bucket`, labels: { le, ...s.labels }, value: cumulative };
            }),
            { metricName: `${name}_bucket`, labels: { le: "+Inf", ...s.labels }, value: s.count },
            { metricName: `${name}_sum`, labels: s.labels, value: s.sum },
            { metricName: `${name}_count`, labels: s.labels, value: s.count },
          ];
        }),
      }),
      reset: () => latency.clear(),
    };
    // Not prom-client's own classes, but what its registry calls on a metric (see above).
    return [counter, histogram] as unknown as Metric[];
  }
}

export type DeliveryOutcome = "delivered" | "retrying" | "failed" | "handed_back";

const SYNC_STATES = ["submitted", "started", "in_progress", "completed", "completed_with_failures", "failed"];

/** A count, or NaN while the database cannot answer: the node's own metrics are still served. */
async function count(db: Db, table: "events" | "notifications", where: ReturnType<typeof sql>) {
  try {
    const { rows } = await sql<{
      n: number | string;
    }>`SELECT COUNT(*) AS n FROM ${sql.table(table)} WHERE ${where}`.execute(db.kysely);
    return Number(rows[0]?.n ?? 0);
  } catch {
    return Number.NaN;
  }
}
