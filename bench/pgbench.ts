/**
 * The anchor of the PostgreSQL write case: `pgbench` committing transactions of the same shape as
 * `updateUserRole` (lock a user row, update it, insert an event) on a scratch database of the same
 * server, at the same connections and for the same time. What portico reaches against it says how
 * much of the server's commit rate its own round trips and bookkeeping cost.
 */
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import pg from "pg";
import { cpuSeconds, type LoadSettings } from "./load.js";
import { createStore, type Engine } from "./stores.js";

const run = promisify(execFile);

/** Rows of the scratch user table; transactions pick one at random, so they rarely wait on each other. */
const ROWS = 10_000;

/** Tables of the same widths as portico's `users` (the columns updateUserRole touches) and `events`. */
const SETUP = `
CREATE TABLE users (id text PRIMARY KEY, username_key text NOT NULL UNIQUE, role text NOT NULL,
  role_id text, disabled integer NOT NULL DEFAULT 0, modified bigint NOT NULL);
INSERT INTO users SELECT 'u' || i, 'user_' || i, 'org_user', NULL, 0, 0 FROM generate_series(1, ${ROWS}) i;
CREATE TABLE events (seq bigserial PRIMARY KEY, id text NOT NULL, occurred bigint NOT NULL,
  source text NOT NULL, operation text NOT NULL, object_id text NOT NULL, actor_id text NOT NULL,
  actor_username text NOT NULL, properties text NOT NULL, uri text NOT NULL,
  dispatched integer NOT NULL DEFAULT 0);
CREATE INDEX events_undispatched ON events (dispatched, seq);
VACUUM ANALYZE;
`;

/** One transaction: what updateUserRole sends (SELECT ... FOR UPDATE, UPDATE, INSERT). */
const SCRIPT = `\\set n random(1, ${ROWS})
BEGIN;
SELECT id, role, role_id, disabled FROM users WHERE username_key = 'user_' || :n FOR UPDATE;
UPDATE users SET role = CASE role WHEN 'org_user' THEN 'org_publisher' ELSE 'org_user' END, modified = :n WHERE id = 'u' || :n;
INSERT INTO events (id, occurred, source, operation, object_id, actor_id, actor_username, properties, uri)
  VALUES (md5(random()::text), :n, 'user', 'updateUserRole', 'user_' || :n, 'admin', 'admin',
  '{"userRoleUpdatedTo":["org_publisher"]}', '/users/user_' || :n || '/updateUserRole');
END;
`;

export interface PgbenchFigures {
  /** Committed transactions per second (pgbench's figure without the time to connect). */
  tps: number;
  /** Mean latency of a transaction, ms. */
  latencyMs: number;
  clients: number;
  command: string;
  /**
   * Microseconds of CPU time (user and system) of pgbench's server processes per transaction,
   * read from /proc while they run; undefined when they could not be seen (a server elsewhere).
   */
  dbCpuUsPerTx: number | undefined;
}

/**
 * Samples the CPU time of the server processes connected to `url`'s database (pgbench's sessions,
 * which end with it, so they are read while they run) every `POLL_MS`, from /proc. `stop` gives the
 * CPU seconds they used per second between the first and the last sample.
 */
async function sampleBackends(url: string): Promise<{ stop(): Promise<number | undefined> }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const first = new Map<number, { cpu: number; at: number }>();
  const last = new Map<number, { cpu: number; at: number }>();
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await client.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      const at = performance.now();
      for (const { pid } of rows) {
        const cpu = cpuSeconds(pid);
        if (cpu === undefined) continue;
        if (!first.has(pid)) first.set(pid, { cpu, at });
        last.set(pid, { cpu, at });
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop.catch(() => {});
      await client.end().catch(() => {});
      let cpu = 0;
      let from = Number.POSITIVE_INFINITY;
      let to = 0;
      for (const [pid, a] of first) {
        const b = last.get(pid) as { cpu: number; at: number };
        cpu += b.cpu - a.cpu;
        from = Math.min(from, a.at);
        to = Math.max(to, b.at);
      }
      return to > from ? cpu / ((to - from) / 1000) : undefined;
    },
  };
}

const POLL_MS = 100;

/** The `pgbench` binary: on PATH, else the newest under /usr/lib/postgresql (Debian layout). */
export function pgbenchBinary(): string {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const candidate = path.join(dir, "pgbench");
    if (dir && fs.existsSync(candidate)) return candidate;
  }
  const root = "/usr/lib/postgresql";
  const versions = fs.existsSync(root) ? fs.readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const candidate = path.join(root, v, "bin", "pgbench");
    if (fs.existsSync(candidate)) return candidate;
  }
  throw new Error("pgbench not found (PATH, /usr/lib/postgresql/*/bin)");
}

/** Runs the anchor: a warm-up, then the measured run, on a scratch database dropped afterwards. */
export async function measurePgbench(engine: Engine, settings: LoadSettings): Promise<PgbenchFigures> {
  const binary = pgbenchBinary();
  const store = await createStore(engine);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-pgbench-"));
  try {
    const url = store.env.DATABASE_URL;
    if (!url) throw new Error("the pgbench anchor needs PostgreSQL");
    const scriptFile = path.join(dir, "update-user-role.sql");
    fs.writeFileSync(scriptFile, SCRIPT);
    const setupFile = path.join(dir, "setup.sql");
    fs.writeFileSync(setupFile, SETUP);
    await run("psql", ["-q", "-v", "ON_ERROR_STOP=1", "-f", setupFile, url]);
    const clients = settings.connections;
    const threads = Math.min(2, clients);
    const args = (seconds: number) => [
      "-n",
      "-c",
      String(clients),
      "-j",
      String(threads),
      "-T",
      String(Math.max(1, Math.round(seconds))),
      "-f",
      scriptFile,
      url,
    ];
    if (settings.warmupS > 0) await run(binary, args(settings.warmupS));
    const sampler = await sampleBackends(url);
    const { stdout } = await run(binary, args(settings.durationS));
    const cpuPerSecond = await sampler.stop();
    const tps = /tps = ([\d.]+)/.exec(stdout)?.[1];
    const latency = /latency average = ([\d.]+) ms/.exec(stdout)?.[1];
    if (!tps) throw new Error(`pgbench printed no tps: ${stdout.slice(0, 500)}`);
    return {
      tps: Number(tps),
      latencyMs: Number(latency ?? Number.NaN),
      clients,
      dbCpuUsPerTx: cpuPerSecond === undefined ? undefined : (cpuPerSecond * 1e6) / Number(tps),
      command: `pgbench -n -c ${clients} -j ${threads} -T ${settings.durationS} -f <select-for-update/update/insert>`,
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await store.destroy();
  }
}
