import type { FastifyInstance } from "fastify";
import { generatePassword } from "./auth/password.js";
import type { Config } from "./config.js";
import { type AvailabilityChange, isConnectionLoss } from "./db/availability.js";
import { type Db, openDatabase } from "./db/database.js";
import { migrateToLatest } from "./db/migrate.js";
import { buildServer } from "./http/server.js";
import { Metrics } from "./observability/metrics.js";
import { OutboundGuard } from "./outbound/guard.js";
import { createServices, type Services } from "./services.js";
import { PORTICO_VERSION } from "./version.js";
import { DeliveryEngine } from "./webhooks/delivery.js";

export interface Portico {
  app: FastifyInstance;
  services: Services;
  db: Db;
  /** The address the server listens on, e.g. `http://127.0.0.1:7080`. */
  address: string;
  /** The external base URL (`PORTICO_PUBLIC_URL`, or the listening address). */
  publicUrl: string;
  close(): Promise<void>;
}

export interface StartOptions {
  config: Config;
  /** PostgreSQL schema to use (tests isolate each run in its own). */
  schema?: string;
  /** Logger settings for Fastify; `false` silences it (tests). */
  logger?: boolean | object;
  /** Where to print the generated first-administrator password; defaults to stdout. */
  announce?: (text: string) => void;
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
  const db = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    schema: options.schema,
    queryTimeoutMs: config.databaseQueryTimeoutSeconds * 1000,
    onAvailability: (change) => reportAvailability(change),
  });
  try {
    await migrateToLatest(db);
    let address = "";
    // Known once listening (port 0 picks it then); read when asked.
    const publicUrl = () => config.publicUrl ?? address;
    const guard = new OutboundGuard(config.outboundAllow);
    let logError = (err: unknown, what: string) => reportError(new Error(`${what}: ${String(err)}`));
    const services = createServices(db, {
      guard,
      portalUrl: () => `${publicUrl()}${config.contextPath}`,
      syncStaleMs: config.syncStaleSeconds * 1000,
      searchTimeoutMs: config.searchTimeoutMs,
      hashing: { concurrency: config.passwordHashConcurrency, maxQueued: config.passwordHashQueue },
      onError: (err, what) => logError(err, what),
    });
    await services.portal.ensureOrganization();
    await ensureFirstAdministrator(services, config, options.announce ?? ((t) => process.stdout.write(t)));

    const metrics = new Metrics(db, { engine: db.engine, version: PORTICO_VERSION });
    const app = await buildServer({
      config,
      services,
      metrics,
      logger: options.logger ?? true,
      publicUrl,
    });
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
    const delivery = new DeliveryEngine({
      db,
      guard,
      webhooks: services.webhooks,
      portalUrl: () => `${publicUrl()}${config.contextPath}`,
      onError: (err, what) => logError(err, what),
      onOutcome: (outcome, count) => metrics.delivery(outcome, count),
    });
    await app.listen({ port: config.port, host: config.host });
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
    await delivery.start();
    await services.sync.start();

    return {
      app,
      services,
      db,
      address,
      publicUrl: publicUrl(),
      async close() {
        clearInterval(purge);
        // Stop accepting (requests in flight finish; new ones get 503), and at the same time stop
        // taking background work: syncs stop at their next batch, webhook attempts get the grace
        // period and are then handed back. What is left in the outbox other nodes dispatch, or
        // this one after a restart.
        await Promise.all([
          app.close(),
          services.sync.stop(),
          delivery.stop(config.shutdownGraceSeconds * 1000),
        ]);
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
 * With no administrator yet, creates one from PORTICO_ADMIN_USERNAME/PASSWORD, or generates a
 * password and prints it once. Concurrent first start-ups race on the unique username: the loser
 * sees "username taken" and prints nothing.
 */
async function ensureFirstAdministrator(
  services: Services,
  config: Config,
  announce: (text: string) => void,
) {
  if (await services.users.hasAdministrator()) return;
  const username = config.adminUsername ?? "portaladmin";
  const generated = config.adminPassword === undefined;
  const password = config.adminPassword ?? generatePassword();
  try {
    await services.users.create(
      null,
      { username, password, firstName: "Portal", lastName: "Administrator", email: "", role: "org_admin" },
      { system: true },
    );
  } catch (err) {
    if (await services.users.hasAdministrator()) return;
    throw err;
  }
  if (generated) {
    announce(
      `\nportico: created the first administrator.\n  username: ${username}\n  password: ${password}\n` +
        "This password is shown only once; sign in and change it.\n\n",
    );
  }
}
