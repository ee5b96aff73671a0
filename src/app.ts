import type https from "node:https";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import {
  generatePassword,
  hashPassword,
  SCRYPT_COST,
  type ScryptCost,
  TEST_SCRYPT_COST,
} from "./auth/password.js";
import { PortalKeys } from "./collaboration/peer.js";
import type { Config } from "./config.js";
import { type AvailabilityChange, isConnectionLoss } from "./db/availability.js";
import { type Db, openDatabase } from "./db/database.js";
import { applyMigrations, MIGRATION_NAMES, pendingMigrations } from "./db/migrate.js";
import { syncSpatialStorage } from "./features/layer-store.js";
import { addHttpsListener, buildServer } from "./http/server.js";
import { certificateNames, loadOrCreateSelfSigned, type SelfSigned } from "./http/tls.js";
import { createJobs } from "./jobs/create-jobs.js";
import { createSyncJobs } from "./jobs/sync-jobs.js";
import { WakeUp } from "./jobs/wake-up.js";
import { Metrics } from "./observability/metrics.js";
import { OutboundGuard } from "./outbound/guard.js";
import { createServices, type Services } from "./services.js";
import { PORTICO_VERSION } from "./version.js";

export interface Portico {
  app: FastifyInstance;
  services: Services;
  db: Db;
  /** The address the server listens on, e.g. `http://127.0.0.1:7080`. */
  address: string;
  /** The address of the HTTPS listener, e.g. `https://127.0.0.1:7443`; undefined when it is off. */
  httpsAddress: string | undefined;
  /** The external base URL (`PORTICO_PUBLIC_URL`, or the HTTPS address, or the HTTP address). */
  publicUrl: string;
  close(): Promise<void>;
}

export interface StartOptions {
  config: Config;
  /** PostgreSQL schema to use (tests isolate each run in its own). */
  schema?: string;
  /** Logger settings for Fastify; `false` silences it (tests). */
  logger?: boolean | object;
  /**
   * Where to print the generated first-administrator password and the generated certificate's
   * fingerprint; defaults to stdout.
   */
  announce?: (text: string) => void;
  /**
   * Tests only: hash passwords at `TEST_SCRYPT_COST` (1 MiB) instead of `SCRYPT_COST` (64 MiB), for
   * test portals whose tests do not test hashing. Deliberately no setting of `Config`: an operator
   * cannot weaken the hashes of a real portal, and `portico serve` never sets it.
   */
  testPasswordHashing?: boolean;
}

/** How often expired tokens are purged. */
const TOKEN_PURGE_INTERVAL_MS = 60 * 60 * 1000;

/**
 * Starts portico: opens the database, applies migrations, creates the organization and the first
 * administrator when missing, and listens.
 */
export async function startPortico(options: StartOptions): Promise<Portico> {
  const { config } = options;
  // Background failures of the data layer are logged once the server's logger exists.
  const reportError = (err: unknown) => {
    process.stderr.write(`portico: ${String(err)}\n`);
  };
  let reportAvailability = (change: AvailabilityChange) =>
    reportError(change.state === "lost" ? change.error : new Error("database connection restored"));
  let firstAdmin: FirstAdministrator | undefined;
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    schema: options.schema,
    queryTimeoutMs: config.databaseQueryTimeoutSeconds * 1000,
    postgis: config.postgis,
    poolSize: config.databasePoolSize,
    onAvailability: (change) => reportAvailability(change),
    // The migrations, beside PostGIS's preparation. A new database gets its first administrator
    // below: the password's hash (scrypt: 64 MiB and a few hundred ms of a core) is then computed
    // on the thread pool while the migrations run, not after them.
    beforeReady: async (db) => {
      if ((await pendingMigrations(db)).length === MIGRATION_NAMES.length) {
        firstAdmin = firstAdministrator(config, options.testPasswordHashing ? TEST_SCRYPT_COST : SCRYPT_COST);
      }
      await applyMigrations(db);
    },
  });
  try {
    // What PostGIS's use (or not) asks of the layer tables, which can change between starts.
    await syncSpatialStorage(db);
    let address = "";
    let httpsAddress: string | undefined;
    // Known once listening (port 0 picks it then); read when asked. HTTPS first: clients that are
    // handed an http URL may rewrite it to https and the HTTPS port anyway (the ArcGIS Maps SDK).
    const publicUrl = () => config.publicUrl ?? httpsAddress ?? address;
    const portalUrl = () => `${publicUrl()}${config.contextPath}`;
    const guard = new OutboundGuard(config.outboundAllow);
    let logError = (err: unknown, what: string) => reportError(new Error(`${what}: ${String(err)}`));
    // The webhook service wakes the delivery job through it; both are given it when built.
    const webhookWakeUp = new WakeUp();
    // Likewise the export service and the export runner; jobs write their files beside the data.
    const exportWakeUp = new WakeUp();
    const exportDir = path.join(config.dataDir, "exports");
    // Collaboration's jobs are built before the services: the services hand them syncs to run and
    // notices to send, and a manual sync waits for its outcome. createJobs starts and stops them.
    const keys = new PortalKeys(db);
    const syncJobs = createSyncJobs({
      db,
      guard,
      keys,
      staleMs: config.syncStaleSeconds * 1000,
      onError: (err, what) => logError(err, what),
    });
    const services = createServices(db, {
      guard,
      portalUrl,
      keys,
      syncJobs,
      searchTimeoutMs: config.searchTimeoutMs,
      hashing: { concurrency: config.passwordHashConcurrency, maxQueued: config.passwordHashQueue },
      ...(options.testPasswordHashing ? { hashCost: TEST_SCRYPT_COST } : {}),
      webhookDelivery: webhookWakeUp,
      exports: { workDir: exportDir, wakeUp: exportWakeUp },
      onError: (err, what) => logError(err, what),
    });
    await services.portal.ensureOrganization();
    const announce = options.announce ?? ((t: string) => process.stdout.write(t));
    await ensureFirstAdministrator(services, firstAdmin ?? firstAdministrator(config), announce);
    const tls = await tlsMaterial(config, announce);

    const metrics = new Metrics(db, { engine: db.engine, version: PORTICO_VERSION });
    const app = await buildServer({
      config,
      services,
      metrics,
      logger: options.logger ?? true,
      publicUrl,
    });
    const secure = tls ? addHttpsListener(app, tls, config) : undefined;
    if (db.engine === "postgres") app.log.info({ postgis: db.postgis?.version ?? null }, db.postgisNote);
    if (tls && "notAfter" in tls && tls.notAfter.getTime() < Date.now() + 30 * 86_400_000) {
      app.log.warn(
        { certificate: tls.certFile, notAfter: tls.notAfter.toISOString() },
        "the self-signed HTTPS certificate expires within 30 days (or has expired): remove its directory to have a new one made at the next start, and trust that one instead",
      );
    }
    reportAvailability = (change) => {
      if (change.state === "lost") {
        app.log.error(
          { err: change.error, connection: change.link },
          "lost the database connection: requests that need the database fail with 'database unavailable', /ready answers 503 and caches are bypassed until it is back",
        );
      } else {
        app.log.info({ downSeconds: Math.round(change.downMs / 1000) }, "database connection restored");
      }
    };
    // While the database is away every background pass fails the same way; the outage is logged
    // once above, not once per pass.
    logError = (err, what) => {
      if (isConnectionLoss(err)) app.log.debug({ err }, what);
      else app.log.error({ err }, what);
    };
    const jobs = createJobs({
      db,
      guard,
      webhooks: services.webhooks,
      webhookWakeUp,
      sync: syncJobs,
      exports: { service: services.exports, wakeUp: exportWakeUp, workDir: exportDir },
      portalUrl,
      shutdownGraceMs: config.shutdownGraceSeconds * 1000,
      onError: (err, what) => logError(err, what),
      onDeliveryOutcome: (outcome, count) => metrics.delivery(outcome, count),
    });
    // HTTPS first: once plain HTTP answers, every URL handed out is already the HTTPS one.
    await app.ready();
    if (secure && config.httpsPort !== undefined) {
      httpsAddress = await listenHttps(app, secure, config.httpsPort, config.httpsHost);
    }
    try {
      await app.listen({ port: config.port, host: config.host });
    } catch (err) {
      await app.close();
      throw err;
    }
    const addr = app.server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.port;
    const host = config.host.includes(":") ? `[${config.host}]` : config.host;
    address = `http://${host}:${port}`;

    const purge = setInterval(() => {
      services.auth
        .purgeExpired()
        .catch((err: unknown) => app.log.warn({ err }, "purging expired tokens failed"));
    }, TOKEN_PURGE_INTERVAL_MS);
    purge.unref();
    await jobs.start();

    return {
      app,
      services,
      db,
      address,
      httpsAddress,
      publicUrl: publicUrl(),
      async close() {
        clearInterval(purge);
        // Stop accepting (requests in flight finish; new ones get 503), and at the same time stop
        // taking background work: syncs stop at their next batch, webhook attempts get the grace
        // period and are then handed back. What is left in the outbox other nodes dispatch, or
        // this one after a restart.
        await Promise.all([app.close(), jobs.stop()]);
        await guard.close();
        await db.close();
      },
    };
  } catch (err) {
    await db.close();
    throw err;
  }
}

/**
 * The HTTPS listener's certificate: the operator's, or the self-signed one in the data directory,
 * made (and its fingerprint shown, to compare with what a browser shows) at the first start.
 */
async function tlsMaterial(
  config: Config,
  announce: (text: string) => void,
): Promise<{ cert: string; key: string } | SelfSigned | undefined> {
  if (config.httpsPort === undefined) return undefined;
  if (config.tls) return config.tls;
  const made = await loadOrCreateSelfSigned(path.join(config.dataDir, "tls"), certificateNames(config));
  if (made.created) {
    announce(
      `\nportico: created a self-signed certificate for HTTPS.\n  certificate: ${made.certFile}\n` +
        `  SHA-256 fingerprint: ${made.fingerprint}\n` +
        "Trust this certificate in your browser or system to use HTTPS without warnings (see the README), or set PORTICO_TLS_CERT and PORTICO_TLS_KEY.\n\n",
    );
  }
  return made;
}

/** Listens for HTTPS and returns the address; on failure stops the application again. */
async function listenHttps(app: FastifyInstance, server: https.Server, port: number, host: string) {
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ port, host }, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    await app.close();
    throw new Error(
      `HTTPS cannot listen on ${host} port ${port} (PORTICO_HTTPS_PORT): ${(err as Error).message}`,
    );
  }
  const addr = server.address();
  const bound = typeof addr === "object" && addr ? addr.port : port;
  return `https://${host.includes(":") ? `[${host}]` : host}:${bound}`;
}

/**
 * With no administrator yet, creates one from PORTICO_ADMIN_USERNAME/PASSWORD, or generates a
 * password and prints it once. Concurrent first start-ups race on the unique username: the loser
 * sees "username taken" and prints nothing.
 */
interface FirstAdministrator {
  username: string;
  password: string;
  /** The operator gave no password: it is printed once the account exists. */
  generated: boolean;
  /** The password's hash, when computed ahead (`cost` given); otherwise the user service hashes it. */
  passwordHash?: Promise<string>;
}

/** The first administrator's credentials, from the configuration or generated. */
function firstAdministrator(config: Config, cost?: Readonly<ScryptCost>): FirstAdministrator {
  const password = config.adminPassword ?? generatePassword();
  const admin: FirstAdministrator = {
    username: config.adminUsername ?? "portaladmin",
    password,
    generated: config.adminPassword === undefined,
  };
  if (cost) {
    admin.passwordHash = hashPassword(password, cost);
    // Awaited only if the account is made; a failure then is that creation's failure.
    admin.passwordHash.catch(() => {});
  }
  return admin;
}

async function ensureFirstAdministrator(
  services: Services,
  admin: FirstAdministrator,
  announce: (text: string) => void,
) {
  if (await services.users.hasAdministrator()) return;
  const { username, password } = admin;
  try {
    await services.users.create(
      null,
      { username, password, firstName: "Portal", lastName: "Administrator", email: "", role: "org_admin" },
      { system: true, ...(admin.passwordHash ? { passwordHash: await admin.passwordHash } : {}) },
    );
  } catch (err) {
    if (await services.users.hasAdministrator()) return;
    throw err;
  }
  if (admin.generated) {
    announce(
      `\nportico: created the first administrator.\n  username: ${username}\n  password: ${password}\n` +
        "This password is shown only once; sign in and change it.\n\n",
    );
  }
}
