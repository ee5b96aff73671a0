import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { type Portico, startPortico } from "../../src/app.js";
import { type Config, loadConfig } from "../../src/config.js";

export const ADMIN = { username: "admin_user", password: "admin-password-1" } as const;

export const engine = process.env.PORTICO_TEST_ENGINE === "postgres" ? "postgres" : "sqlite";
const databaseUrl = engine === "postgres" ? process.env.PORTICO_TEST_DATABASE_URL : undefined;

/** Where a test portal keeps its data: a temporary directory, or a PostgreSQL schema. */
export interface TestStore {
  dataDir: string;
  schema: string | undefined;
  /** Removes the directory and drops the schema. */
  destroy(): Promise<void>;
}

export function newStore(): TestStore {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-test-"));
  const schema = databaseUrl ? `t_${randomBytes(6).toString("hex")}` : undefined;
  return {
    dataDir,
    schema,
    async destroy() {
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (schema && databaseUrl) {
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          // One DROP SCHEMA ... CASCADE takes a lock on every object of the schema in one
          // transaction; a schema with hundreds of layer tables (collaboration-sync) can then
          // exhaust PostgreSQL's shared lock table ("out of shared memory") while other test
          // files hold locks of their own. Tables go first, a few per transaction.
          for (;;) {
            const { rows } = await client.query<{ name: string }>(
              "SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 LIMIT 50",
              [schema],
            );
            if (rows.length === 0) break;
            const names = rows.map((r) => `${schema}."${r.name.replaceAll('"', '""')}"`).join(", ");
            await client.query(`DROP TABLE IF EXISTS ${names} CASCADE`);
          }
          await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        } finally {
          await client.end();
        }
      }
    },
  };
}

export interface TestPortal {
  portico: Portico;
  store: TestStore;
  /** `http://127.0.0.1:<port>/sharing/rest` */
  api: string;
  adminToken: string;
  /** POSTs form parameters and returns the parsed JSON answer. */
  post(path: string, params?: Record<string, unknown>, token?: string): Promise<any>;
  /** GETs with query parameters and returns the parsed JSON answer. */
  get(path: string, params?: Record<string, unknown>, token?: string): Promise<any>;
  signIn(username: string, password: string, extra?: Record<string, unknown>): Promise<string>;
  /** Creates a user through the API (as the administrator) and returns a token for it. */
  addUser(username: string, role?: string): Promise<{ username: string; password: string; token: string }>;
  stop(): Promise<void>;
}

export interface TestPortalOptions {
  store?: TestStore;
  /** Extra operator settings as environment variables (PORTICO_CONTEXT_PATH, ...). */
  env?: Record<string, string>;
  /** Keep the store when stopping (to restart on the same data). */
  keepStore?: boolean;
  /** Headers sent with every request of the helpers (e.g. `X-Forwarded-Proto` behind a trusted proxy). */
  headers?: Record<string, string>;
  /** Fastify logger options (e.g. `{ stream }` to read what the portal logs); none by default. */
  logger?: object;
  /**
   * Hash passwords at the production cost (scrypt at 64 MiB, some 300 ms of a core each), for tests
   * of hashing itself: its concurrency cap and queue. Other test portals hash at 1 MiB
   * (`TEST_SCRYPT_COST`): their tests create accounts and sign in to set up what they test, and
   * the production cost made hashing most of the suite's time.
   */
  fullPasswordHashing?: boolean;
}

export function testConfig(store: TestStore, env: Record<string, string> = {}): Config {
  return loadConfig([], {
    PORTICO_PORT: "0",
    PORTICO_HOST: "127.0.0.1",
    // Off unless a test turns it on: see run() in process.ts.
    PORTICO_HTTPS_PORT: "off",
    PORTICO_DATA_DIR: store.dataDir,
    PORTICO_ADMIN_USERNAME: ADMIN.username,
    PORTICO_ADMIN_PASSWORD: ADMIN.password,
    PORTICO_LOG_LEVEL: "silent",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    // Three test files run at once, some with three portals, against one PostgreSQL server whose
    // max_connections is 100 (the default): a test portal's requests never need twenty at a time.
    PORTICO_DATABASE_POOL_SIZE: "10",
    // PostgreSQL runs use PostGIS where the database has it (auto); PORTICO_TEST_POSTGIS=off runs
    // them on the bounds index alone, as on a server without PostGIS.
    ...(databaseUrl && process.env.PORTICO_TEST_POSTGIS
      ? { PORTICO_POSTGIS: process.env.PORTICO_TEST_POSTGIS }
      : {}),
    ...env,
  });
}

/** Form-encodes parameters the way ArcGIS clients do: objects and arrays as JSON text. */
export function form(params: Record<string, unknown>): URLSearchParams {
  const body = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined) continue;
    body.append(
      key,
      typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value),
    );
  }
  return body;
}

export async function startTestPortal(options: TestPortalOptions = {}): Promise<TestPortal> {
  const store = options.store ?? newStore();
  const config = testConfig(store, options.env);
  let portico: Portico;
  try {
    portico = await startPortico({
      config,
      schema: store.schema,
      logger: options.logger ?? false,
      announce: () => {},
      testPasswordHashing: !options.fullPasswordHashing,
    });
  } catch (err) {
    // A half-migrated schema left behind would confuse later start-ups on the same database.
    if (!options.store) await store.destroy();
    throw err;
  }
  const api = `${portico.address}${config.contextPath}/sharing/rest`;

  const call = async (
    method: "GET" | "POST",
    p: string,
    params: Record<string, unknown> = {},
    token?: string,
  ) => {
    const all = { f: "json", ...params, ...(token ? { token } : {}) };
    const url = p.startsWith("http") ? p : `${api}${p}`;
    const res =
      method === "GET"
        ? await fetch(`${url}?${form(all)}`, { headers: options.headers })
        : await fetch(url, { method: "POST", body: form(all), headers: options.headers });
    if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${method} ${p}: ${await res.text()}`);
    return (await res.json()) as any;
  };
  const signIn = async (username: string, password: string, extra: Record<string, unknown> = {}) => {
    const r = await call("POST", "/generateToken", { username, password, client: "requestip", ...extra });
    if (!r.token) throw new Error(`sign-in failed for ${username}: ${JSON.stringify(r)}`);
    return r.token as string;
  };
  const adminToken = await signIn(ADMIN.username, ADMIN.password);
  return {
    portico,
    store,
    api,
    adminToken,
    post: (p, params, token) => call("POST", p, params, token),
    get: (p, params, token) => call("GET", p, params, token),
    signIn,
    async addUser(username, role = "org_user") {
      const password = `pw-${username}-secret`;
      const r = await call(
        "POST",
        `${portico.address}${config.contextPath}/portaladmin/security/users/createUser`,
        { username, password, firstname: "Test", lastname: username, email: `${username}@example.com`, role },
        adminToken,
      );
      if (!r.success) throw new Error(`createUser failed: ${JSON.stringify(r)}`);
      return { username, password, token: await signIn(username, password) };
    },
    async stop() {
      await portico.close();
      if (!options.keepStore) await store.destroy();
    },
  };
}

/** Rows of the event outbox, oldest first. */
/**
 * The events recorded, oldest first. Without `dispatched`: the delivery engine sets it in the
 * background, so it is no part of what a change recorded.
 */
export async function outbox(portal: TestPortal) {
  return portal.portico.db.kysely
    .selectFrom("events")
    .select([
      "seq",
      "id",
      "occurred",
      "source",
      "operation",
      "object_id",
      "actor_id",
      "actor_username",
      "properties",
      "uri",
    ])
    .orderBy("seq")
    .execute();
}

/** The parsed JSON body of a fetch response. */
export async function json(res: Response): Promise<any> {
  return res.json();
}
