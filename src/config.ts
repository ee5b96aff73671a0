import { createPrivateKey, X509Certificate } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import ipaddr from "ipaddr.js";
import { USERNAME_PATTERN } from "./auth/username.js";

/**
 * Operator settings. This module is the only place that reads `process.env`; everything else
 * receives a validated `Config`. A bad value throws `ConfigError` naming the setting, and the CLI
 * turns that into a one-line message and a non-zero exit.
 */
export interface Config {
  port: number;
  host: string;
  /**
   * Port of the HTTPS listener, which serves the same application as the HTTP one; undefined when
   * HTTPS is off. ArcGIS clients (the Maps SDK) rewrite a portal's `http:` URL to `https:` and
   * port 7080 to 7443, so a developer's portal answers on both by default.
   */
  httpsPort: number | undefined;
  httpsHost: string;
  /**
   * The operator's certificate (PEM, chain allowed) and its unencrypted private key, read and
   * checked at start-up; undefined means a self-signed certificate kept in `<dataDir>/tls`.
   */
  tls: { certFile: string; keyFile: string; cert: string; key: string } | undefined;
  /**
   * External base URL, without trailing slash, used in every URL the server hands out. Undefined
   * means the listening socket's address (known only once listening, for port 0): HTTPS's when it
   * is on, `http://HOST:PORT` otherwise.
   */
  publicUrl: string | undefined;
  /** Prefix before `/sharing/rest`, either "" or "/something" without trailing slash. */
  contextPath: string;
  dataDir: string;
  /** A postgres:// URL switches the data layer to PostgreSQL; undefined means embedded SQLite. */
  databaseUrl: string | undefined;
  /**
   * PostgreSQL: how long a query may wait for any answer before its connection is taken for dead
   * (a server gone without closing it) and closed; 0 for no limit. Migrations are exempt.
   */
  databaseQueryTimeoutSeconds: number;
  /**
   * PostgreSQL: connections of the node's pool for requests and jobs (a node also holds one for
   * LISTEN and one for migrations). Nodes times this must stay under the server's max_connections.
   */
  databasePoolSize: number;
  /**
   * PostgreSQL: whether hosted feature layers keep a PostGIS geometry column, indexed, which lets
   * the database decide most of a spatial query instead of the process. `auto` uses PostGIS when
   * the database has the extension or it can be created there; `on` requires it (the start fails
   * otherwise); `off` never uses it. SQLite needs and uses no extension.
   */
  postgis: PostgisSetting;
  adminUsername: string | undefined;
  adminPassword: string | undefined;
  /** CIDRs that outbound calls may reach although private or loopback. */
  outboundAllow: string[];
  /**
   * Which peers may set X-Forwarded-* headers (Fastify `trustProxy`): false, or a list of
   * addresses/CIDRs. Needed so that `allSSL` can trust a TLS-terminating proxy.
   */
  trustProxy: false | string[];
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /**
   * How long a running sync may go without a heartbeat before it counts as dead (its process
   * stopped) and is marked failed, freeing the workspace for the next sync.
   */
  syncStaleSeconds: number;
  /** CIDRs whose clients may read `/metrics` (loopback by default). */
  metricsAllow: string[];
  /**
   * How long a SIGTERM waits for requests, webhook attempts and syncs in flight before it cuts
   * them off (handing the attempts back) and exits.
   */
  shutdownGraceSeconds: number;
  /**
   * How long one search (`/search`, `/community/groups`) may run before it is stopped and
   * answered with an error: PostgreSQL's `statement_timeout`, SQLite's per-row deadline.
   */
  searchTimeoutMs: number;
  /**
   * Password hashes (scrypt, 64 MiB each) computed at once, and how many more may wait; a sign-in
   * or password change beyond that is refused at once with "try again".
   */
  passwordHashConcurrency: number;
  passwordHashQueue: number;
  /**
   * How long a client may take to send a whole request, body included; the connection is cut
   * after it. Also how long a connection may stay idle while a request is open.
   */
  requestTimeoutSeconds: number;
  /** How long a client may take to send a request's headers (at most `requestTimeoutSeconds`). */
  headersTimeoutSeconds: number;
  /**
   * Bytes of request bodies that callers not yet authenticated (no token in a header or the query
   * string) may have in flight together, in MB; one sender may hold a quarter of it.
   */
  preAuthBodyBudgetMB: number;
  /**
   * Bytes of uploaded files that callers not yet authenticated may have on disk together, in MB;
   * one sender may hold a quarter of it.
   */
  preAuthUploadBudgetMB: number;
}

export const POSTGIS_SETTINGS = ["auto", "on", "off"] as const;
export type PostgisSetting = (typeof POSTGIS_SETTINGS)[number];

export class ConfigError extends Error {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
    this.name = "ConfigError";
  }
}

/** One entry per setting: its environment variable and its `portico serve` flag. */
const SETTINGS = {
  port: { env: "PORTICO_PORT", flag: "port" },
  host: { env: "PORTICO_HOST", flag: "host" },
  httpsPort: { env: "PORTICO_HTTPS_PORT", flag: "https-port" },
  httpsHost: { env: "PORTICO_HTTPS_HOST", flag: "https-host" },
  tlsCert: { env: "PORTICO_TLS_CERT", flag: "tls-cert" },
  tlsKey: { env: "PORTICO_TLS_KEY", flag: "tls-key" },
  publicUrl: { env: "PORTICO_PUBLIC_URL", flag: "public-url" },
  contextPath: { env: "PORTICO_CONTEXT_PATH", flag: "context-path" },
  dataDir: { env: "PORTICO_DATA_DIR", flag: "data-dir" },
  databaseUrl: { env: "DATABASE_URL", flag: "database-url" },
  databaseQueryTimeoutSeconds: {
    env: "PORTICO_DATABASE_QUERY_TIMEOUT_SECONDS",
    flag: "database-query-timeout-seconds",
  },
  databasePoolSize: { env: "PORTICO_DATABASE_POOL_SIZE", flag: "database-pool-size" },
  postgis: { env: "PORTICO_POSTGIS", flag: "postgis" },
  adminUsername: { env: "PORTICO_ADMIN_USERNAME", flag: "admin-username" },
  adminPassword: { env: "PORTICO_ADMIN_PASSWORD", flag: "admin-password" },
  outboundAllow: { env: "PORTICO_OUTBOUND_ALLOW", flag: "outbound-allow" },
  trustProxy: { env: "PORTICO_TRUST_PROXY", flag: "trust-proxy" },
  logLevel: { env: "PORTICO_LOG_LEVEL", flag: "log-level" },
  syncStaleSeconds: { env: "PORTICO_SYNC_STALE_SECONDS", flag: "sync-stale-seconds" },
  metricsAllow: { env: "PORTICO_METRICS_ALLOW", flag: "metrics-allow" },
  shutdownGraceSeconds: { env: "PORTICO_SHUTDOWN_GRACE_SECONDS", flag: "shutdown-grace-seconds" },
  searchTimeoutMs: { env: "PORTICO_SEARCH_TIMEOUT_MS", flag: "search-timeout-ms" },
  passwordHashConcurrency: { env: "PORTICO_PASSWORD_HASH_CONCURRENCY", flag: "password-hash-concurrency" },
  passwordHashQueue: { env: "PORTICO_PASSWORD_HASH_QUEUE", flag: "password-hash-queue" },
  requestTimeoutSeconds: { env: "PORTICO_REQUEST_TIMEOUT_SECONDS", flag: "request-timeout-seconds" },
  headersTimeoutSeconds: { env: "PORTICO_HEADERS_TIMEOUT_SECONDS", flag: "headers-timeout-seconds" },
  preAuthBodyBudgetMB: { env: "PORTICO_PREAUTH_BODY_BUDGET_MB", flag: "preauth-body-budget-mb" },
  preAuthUploadBudgetMB: { env: "PORTICO_PREAUTH_UPLOAD_BUDGET_MB", flag: "preauth-upload-budget-mb" },
} as const;

type SettingKey = keyof typeof SETTINGS;

export const SERVE_FLAGS = Object.fromEntries(
  Object.values(SETTINGS).map((s) => [s.flag, { type: "string" as const }]),
) as Record<(typeof SETTINGS)[SettingKey]["flag"], { type: "string" }>;

/** Describes every setting for `portico serve --help` and the README. */
export function describeSettings(): string {
  return Object.values(SETTINGS)
    .map((s) => `  --${s.flag.padEnd(24)} ${s.env}`)
    .join("\n");
}

/**
 * Builds the configuration from command-line flags (which win) and environment variables.
 * `cwd` resolves a relative data directory.
 */
export function loadConfig(
  argv: string[] = [],
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): Config {
  let flags: Record<string, string | undefined>;
  try {
    flags = parseArgs({ args: argv, options: SERVE_FLAGS, strict: true, allowPositionals: false })
      .values as Record<string, string | undefined>;
  } catch (err) {
    throw new ConfigError("arguments", (err as Error).message);
  }
  const raw = (key: SettingKey): { value: string | undefined; name: string } => {
    const s = SETTINGS[key];
    const flag = flags[s.flag];
    if (flag !== undefined) return { value: flag, name: `--${s.flag}` };
    const fromEnv = env[s.env];
    return { value: fromEnv === "" ? undefined : fromEnv, name: s.env };
  };

  const port = parsePort(raw("port"), 7080);
  const host = parseHost(raw("host"), "127.0.0.1");
  const httpsPortSetting = raw("httpsPort");
  const httpsPort = httpsPortSetting.value === "off" ? undefined : parsePort(httpsPortSetting, 7443);
  if (httpsPort !== undefined && httpsPort !== 0 && httpsPort === port) {
    throw new ConfigError(httpsPortSetting.name, `must differ from the HTTP port (${port}), or be off`);
  }
  const httpsHost = parseHost(raw("httpsHost"), host);
  const tls = readTls(raw("tlsCert"), raw("tlsKey"), httpsPort !== undefined, cwd);

  const contextPath = parseContextPath(raw("contextPath"));
  const publicUrl = parsePublicUrl(raw("publicUrl"));
  const dataDirSetting = raw("dataDir");
  const dataDir = path.resolve(cwd, dataDirSetting.value ?? "data");
  const databaseUrl = parseDatabaseUrl(raw("databaseUrl"));
  const postgisSetting = raw("postgis");
  const postgis = parsePostgis(postgisSetting);
  if (postgis === "on" && databaseUrl === undefined) {
    throw new ConfigError(
      postgisSetting.name,
      "is on, but PostGIS is an extension of PostgreSQL: set DATABASE_URL",
    );
  }

  const adminUsername = raw("adminUsername");
  const adminPassword = raw("adminPassword");
  if (adminUsername.value !== undefined && !USERNAME_PATTERN.test(adminUsername.value)) {
    throw new ConfigError(
      adminUsername.name,
      "must be 6 to 128 characters of letters, digits, '.', '_', '-' or '@', starting with a letter or digit",
    );
  }
  if ((adminUsername.value === undefined) !== (adminPassword.value === undefined)) {
    throw new ConfigError(
      adminUsername.value === undefined ? adminUsername.name : adminPassword.name,
      "set both PORTICO_ADMIN_USERNAME and PORTICO_ADMIN_PASSWORD, or neither",
    );
  }
  if (adminPassword.value !== undefined && adminPassword.value.length < 8) {
    throw new ConfigError(adminPassword.name, "must be at least 8 characters");
  }

  const requestTimeoutSeconds = parseWhole(raw("requestTimeoutSeconds"), 300, 1, 86_400, "seconds");
  const headersTimeout = raw("headersTimeoutSeconds");
  const headersTimeoutSeconds = parseWhole(headersTimeout, 30, 1, 3600, "seconds");
  if (headersTimeoutSeconds > requestTimeoutSeconds) {
    throw new ConfigError(
      headersTimeout.name,
      `must not be longer than the request timeout (${requestTimeoutSeconds} s), got ${headersTimeoutSeconds}`,
    );
  }

  return {
    port,
    host,
    httpsPort,
    httpsHost,
    tls,
    publicUrl,
    contextPath,
    dataDir,
    databaseUrl,
    databaseQueryTimeoutSeconds: parseWhole(raw("databaseQueryTimeoutSeconds"), 60, 0, 86_400, "seconds"),
    databasePoolSize: parseWhole(raw("databasePoolSize"), 20, 2, 1000, "connections"),
    postgis,
    adminUsername: adminUsername.value,
    adminPassword: adminPassword.value,
    outboundAllow: parseCidrList(raw("outboundAllow")),
    trustProxy: parseTrustProxy(raw("trustProxy")),
    logLevel: parseLogLevel(raw("logLevel")),
    syncStaleSeconds: parseWhole(raw("syncStaleSeconds"), 60, 2, 86_400, "seconds"),
    metricsAllow: normalizeCidrs(parseCidrList(raw("metricsAllow"), ["127.0.0.0/8", "::1/128"])),
    shutdownGraceSeconds: parseWhole(raw("shutdownGraceSeconds"), 10, 0, 3600, "seconds"),
    searchTimeoutMs: parseWhole(raw("searchTimeoutMs"), 2000, 1, 60_000, "milliseconds"),
    passwordHashConcurrency: parseWhole(raw("passwordHashConcurrency"), 2, 1, 64),
    passwordHashQueue: parseWhole(raw("passwordHashQueue"), 32, 0, 10_000),
    requestTimeoutSeconds,
    headersTimeoutSeconds,
    // 128 MB: one peer call of the largest size (110 MB) fits, one address may send a 32 MB
    // addItem, and anonymous bodies together cannot take more however many arrive. At least 4,
    // so that one address may always send a body of 1 MB (every operation without a large body).
    preAuthBodyBudgetMB: parseWhole(raw("preAuthBodyBudgetMB"), 128, 4, 65_536),
    // 1 GB: one address may upload two files of the largest size (100 MB) with the token last.
    preAuthUploadBudgetMB: parseWhole(raw("preAuthUploadBudgetMB"), 1024, 0, 1_048_576),
  };
}

function parsePort({ value, name }: { value: string | undefined; name: string }, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new ConfigError(name, `not a port number: ${value}`);
  const port = Number(value);
  if (port > 65535) throw new ConfigError(name, `must be between 0 and 65535, got ${value}`);
  return port;
}

function parseHost({ value, name }: { value: string | undefined; name: string }, fallback: string): string {
  const host = value ?? fallback;
  if (!/^[A-Za-z0-9.:[\]-]+$/.test(host)) throw new ConfigError(name, `not a host name: ${host}`);
  return host;
}

type Raw = { value: string | undefined; name: string };

/**
 * Reads the operator's certificate and key, so that a wrong path, a file that is not PEM, an
 * encrypted key or a key of another certificate stops the start naming the setting, instead of
 * failing later inside the TLS listener.
 */
function readTls(certSetting: Raw, keySetting: Raw, httpsOn: boolean, cwd: string): Config["tls"] {
  if (certSetting.value === undefined && keySetting.value === undefined) return undefined;
  if (certSetting.value === undefined || keySetting.value === undefined) {
    throw new ConfigError(
      certSetting.value === undefined ? certSetting.name : keySetting.name,
      "set both PORTICO_TLS_CERT and PORTICO_TLS_KEY, or neither (for a self-signed certificate)",
    );
  }
  if (!httpsOn) throw new ConfigError(certSetting.name, "is set but HTTPS is off (PORTICO_HTTPS_PORT=off)");
  const read = ({ value, name }: Raw): { file: string; text: string } => {
    const file = path.resolve(cwd, value as string);
    try {
      return { file, text: fs.readFileSync(file, "utf8") };
    } catch (err) {
      throw new ConfigError(name, `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
    }
  };
  const cert = read(certSetting);
  const key = read(keySetting);
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert.text);
  } catch {
    throw new ConfigError(certSetting.name, `${cert.file} is not a PEM certificate`);
  }
  let privateKey: ReturnType<typeof createPrivateKey>;
  try {
    privateKey = createPrivateKey(key.text);
  } catch {
    // The error would quote nothing of the key, but say what is accepted instead.
    throw new ConfigError(keySetting.name, `${key.file} is not an unencrypted PEM private key`);
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    throw new ConfigError(
      keySetting.name,
      `${key.file} is not the private key of the certificate in ${cert.file}`,
    );
  }
  return { certFile: cert.file, keyFile: key.file, cert: cert.text, key: key.text };
}

/**
 * A whole number within [min, max]; `unit` ("seconds", "milliseconds") is said in the error.
 */
function parseWhole(
  { value, name }: { value: string | undefined; name: string },
  fallback: number,
  min: number,
  max: number,
  unit?: string,
): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    const what = unit ? `a whole number of ${unit}` : "a whole number";
    throw new ConfigError(name, `must be ${what} from ${min} to ${max}, got ${value}`);
  }
  return Number(value);
}

function parseContextPath({ value, name }: { value: string | undefined; name: string }): string {
  if (value === undefined || value === "/") return "";
  const trimmed = value.replace(/\/+$/, "");
  const withSlash = trimmed.startsWith("/") ? trimmed : `/${trimmed}`;
  if (!/^(\/[A-Za-z0-9._~-]+)+$/.test(withSlash)) {
    throw new ConfigError(name, `must be a path such as /portal, got ${value}`);
  }
  return withSlash;
}

function parsePublicUrl({ value, name }: { value: string | undefined; name: string }): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(name, `not a URL: ${value}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(name, `must be an http or https URL, got ${value}`);
  }
  if (url.search || url.hash) throw new ConfigError(name, "must not have a query or fragment");
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

function parseDatabaseUrl({ value, name }: { value: string | undefined; name: string }): string | undefined {
  if (value === undefined) return undefined;
  if (!/^postgres(ql)?:\/\//.test(value)) {
    throw new ConfigError(name, "must be a postgres:// or postgresql:// URL");
  }
  try {
    new URL(value);
  } catch {
    throw new ConfigError(name, "is not a valid URL");
  }
  return value;
}

function parsePostgis({ value, name }: { value: string | undefined; name: string }): PostgisSetting {
  if (value === undefined) return "auto";
  if (!(POSTGIS_SETTINGS as readonly string[]).includes(value)) {
    throw new ConfigError(name, `must be one of ${POSTGIS_SETTINGS.join(", ")}, got ${value}`);
  }
  return value as PostgisSetting;
}

function parseCidrList(
  { value, name }: { value: string | undefined; name: string },
  fallback: string[] = [],
): string[] {
  if (value === undefined) return fallback;
  const entries = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const entry of entries) {
    try {
      ipaddr.parseCIDR(entry.includes("/") ? entry : `${entry}/${entry.includes(":") ? 128 : 32}`);
    } catch {
      throw new ConfigError(name, `not a CIDR: ${entry}`);
    }
  }
  return entries;
}

/** Single addresses as one-address CIDRs, so every entry reads the same way. */
function normalizeCidrs(entries: string[]): string[] {
  return entries.map((e) => (e.includes("/") ? e : `${e}/${e.includes(":") ? 128 : 32}`));
}

function parseTrustProxy({ value, name }: { value: string | undefined; name: string }): false | string[] {
  if (value === undefined || value === "false") return false;
  const list = parseCidrList({ value, name });
  if (list.length === 0) throw new ConfigError(name, "must list the proxy addresses or CIDRs");
  return list;
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

function parseLogLevel({ value, name }: { value: string | undefined; name: string }): Config["logLevel"] {
  if (value === undefined) return "info";
  if (!(LOG_LEVELS as readonly string[]).includes(value)) {
    throw new ConfigError(name, `must be one of ${LOG_LEVELS.join(", ")}`);
  }
  return value as Config["logLevel"];
}
