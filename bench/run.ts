/**
 * `npm run bench`: how portico compares with a bare Node HTTP server on this machine, how fast it
 * searches a portal of 100,000 items, how long a collaboration sync of 1,000 items takes between
 * two portals, plus its start-up time and idle memory. Absolute figures
 * depend on the machine and its neighbours, so throughput goals are ratios against a baseline
 * measured in the same run; see USAGE for flags. Goals that are missed are reported, not failed:
 * the exit code is non-zero only when the harness could not measure something.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { ABUSE, type AttackFigures, abuseTable, measureAbuse } from "./abuse.js";
import { cleanupAll, onCleanup } from "./cleanup.js";
import { CONTENT, createServiceCase, itemsLabel, searchCases, seedContent } from "./content.js";
import { type DeliveryFigures, measureDelivery } from "./delivery.js";
import {
  FEATURES,
  type FeaturesFigures,
  featuresSummary,
  type KoopFigures,
  measureFeatures,
  measureKoop,
  Points,
  planQueries,
} from "./features.js";
import { LAYER_COPY, type LayerCopyFigures, type LayerCopyRun, measureLayerCopy } from "./layer-copy.js";
import { type LoadCase, type LoadResult, type LoadSettings, runLoad } from "./load.js";
import { measureNodes, type NodesFigures } from "./nodes.js";
import { type BenchOptions, parseOptions, USAGE } from "./options.js";
import { measurePgbench, type PgbenchFigures } from "./pgbench.js";
import { ADMIN, ADMIN_ENV, PortalApi } from "./portal-api.js";
import { isSignedInPortal, READ_PATH, readCase, writeCase } from "./portal-cases.js";
import { measurePostgis, POSTGIS_BENCH, type PostgisFigures, postgisSummary } from "./postgis.js";
import { cleanEnv, freePort, type ServerProcess, startServer } from "./processes.js";
import { mb, median, ms, rate, ratio, seconds, table, verdict } from "./report.js";
import { createStore, databasePids, type Engine, type Store } from "./stores.js";
import { measureSync, SYNC, type SyncFigures, syncCpu } from "./sync.js";

const PORTICO_MAIN = fileURLToPath(new URL("../src/cli/main.js", import.meta.url));
const BARE_SERVER = fileURLToPath(new URL("./bare-server.js", import.meta.url));

const GOALS = {
  /** Authenticated reads, as a fraction of the bare server's requests per second. */
  readRatio: 0.5,
  /** Durable writes (each commits and fsyncs a transaction), same measure. */
  writeRatio: 0.1,
  /** PostgreSQL writes, as a fraction of pgbench's rate for transactions of the same shape. */
  pgbenchRatio: 0.5,
  /** Spawn to first answer, judged on the median of the timed starts. */
  startMs: 1500,
  idleRssBytes: 150 * 1024 * 1024,
  /** Item searches over 100,000 seeded items, judged on latency: what a user waits for. */
  searchP99Ms: 20,
  /** The same over 1,000,000 items. */
  searchP99MsAtMillion: 50,
  /** Webhook deliveries per second, sustained, to a loopback receiver. */
  deliveriesPerSecond: 1000,
  /** Event -> delivery p99 at 200 changes per second. */
  deliveryP99Ms: 500,
  /** A guest's first sync of 1,000 items of a few KB each (SQLite). */
  firstSyncMs: 20_000,
  /** The sync after 10 of those items changed on the host (SQLite). */
  changedSyncMs: 1_000,
};

/** Load before the idle-memory reading, so it includes what serving requests allocates. */
const MEMORY_WARMUP_S = 1;
/** Pause after that load, so sockets close and the collector can run before RSS is read. */
const IDLE_SETTLE_MS = 1500;
/** Queries in flight while a search case's rotation is sent once before it is measured. */
const PRIME_PARALLEL = 8;
/** Parallel createUser calls while seeding; each hashes a password on the libuv pool (4 threads). */
const SEED_CONCURRENCY = 4;

interface StartupFigures {
  engine: Engine;
  /** Milliseconds to first answer on an empty store (migrations, first administrator). */
  first: number[];
  /** The same on the store the first start left behind. */
  second: number[];
}

interface EngineFigures {
  engine: Engine;
  reads: LoadResult;
  /** The read case on a portal started as `npm start` starts it: default settings, access log at info. */
  startReads: LoadResult;
  writes: LoadResult;
  /** Searches by owner, tag and type over the seeded items (when the search case runs). */
  searches: LoadResult[];
  createService: LoadResult;
  deliveries: DeliveryFigures[];
  idleMemory: { rss: number; peak: number } | undefined;
  afterLoadMemory: { rss: number; peak: number } | undefined;
}

/** The search case on a portal of its own, `items` items. */
interface SearchFigures {
  engine: Engine;
  items: number;
  searches: LoadResult[];
}

/** The read case alone, on a portal as the load cases start it and on one as `npm start` does. */
interface ReadFigures {
  engine: Engine;
  reads: LoadResult;
  startReads: LoadResult;
}

/** PostgreSQL's write case beside pgbench committing transactions of the same shape, same run. */
interface AnchorFigures {
  writes: LoadResult;
  pgbench: PgbenchFigures;
}

/** A portal started on a fresh store, signed in, with its user pool created. */
interface Session {
  server: ServerProcess;
  store: Store;
  token: string;
  users: string[];
  /** The answer of the read case, which the baseline serves byte for byte. */
  selfBody: string;
  idleMemory: { rss: number; peak: number } | undefined;
  close(): Promise<void>;
}

async function main(): Promise<number> {
  let options: BenchOptions | "help";
  try {
    options = parseOptions(process.argv.slice(2), process.env);
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (options === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  if (!fs.existsSync(PORTICO_MAIN)) {
    process.stderr.write(`bench: ${PORTICO_MAIN} is missing; run \`npm run build\` first\n`);
    return 2;
  }
  process.once("SIGINT", () => {
    process.stderr.write("\nbench: interrupted, cleaning up\n");
    cleanupAll().finally(() => process.exit(130));
  });

  const engines: Engine[] = [
    { name: "sqlite" },
    ...(options.databaseUrl ? [{ name: "postgres" as const, databaseUrl: options.databaseUrl }] : []),
  ];
  const settings: LoadSettings = {
    connections: options.connections,
    durationS: options.durationS,
    warmupS: options.warmupS,
  };
  printHeader(options, engines);
  const failures: string[] = [];

  const startups: StartupFigures[] = [];
  if (options.cases.has("startup"))
    section("Start-up: spawn of `portico serve` until the first answer of /sharing/rest/info");
  for (const engine of options.cases.has("startup") ? engines : []) {
    try {
      startups.push(await timeStartups(engine, options.starts));
    } catch (err) {
      failures.push(`${engine.name} start-up: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    }
  }

  if (options.cases.has("load")) {
    section(
      `Load: ${settings.connections} connections, ${settings.warmupS} s warm-up + ${settings.durationS} s each`,
    );
  }
  const baselines: LoadResult[] = [];
  const anchors: AnchorFigures[] = [];
  let bare: ServerProcess | undefined;
  // The baseline runs before the first portal case and again after the last; their mean is what
  // ratios use, so a neighbour's burst in one of them weighs less.
  const baselineBefore = async (selfBody: string) => {
    if (bare) return;
    bare = await startBare(selfBody);
    baselines.push(await measure(baselineCase(bare), settings));
  };
  const figures: EngineFigures[] = [];
  for (const engine of options.cases.has("load") ? engines : []) {
    let session: Session | undefined;
    try {
      say(`  ${engine.name}: starting a portal and creating ${options.users} users`);
      session = await openSession(engine, options, settings.connections);
      await baselineBefore(session.selfBody);
      const reads = await measure(
        { ...readCase(engine, session.server.url, session.token), serverPid: session.server.pid },
        settings,
      );
      const writes = await measure(
        writeCase(engine, session.server.url, session.token, session.users),
        settings,
      );
      if (engine.name === "postgres")
        anchors.push({ writes, pgbench: await measureAnchor(engine, settings) });
      // The content is seeded whether or not searches are measured: createService is measured on it.
      const searches = await measureSearches(
        engine,
        session,
        settings,
        CONTENT.items,
        options.cases.has("search") && options.searchItems.includes(CONTENT.items),
      );
      // After the searches, so that their figures are taken on exactly the seeded content.
      const createService = await measure(
        createServiceCase(engine.name, session.server.url, session.token, ADMIN.username),
        settings,
      );
      const deliveries = await measureDeliveries(engine, session);
      const { idleMemory } = session;
      const afterLoadMemory = session.server.memory();
      printServerOutput(session.server);
      await session.close();
      session = undefined;
      const startReads = await measureReadsAsStarted(engine, settings);
      figures.push({
        engine,
        reads,
        startReads,
        writes,
        searches,
        createService,
        deliveries,
        idleMemory,
        afterLoadMemory,
      });
    } catch (err) {
      failures.push(`${engine.name} load: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    } finally {
      await session?.close();
    }
  }

  const searchesAlone: SearchFigures[] = [];
  // With the load case, its portal already measured the default size.
  const searchSizes = options.cases.has("search")
    ? options.searchItems.filter((n) => !(options.cases.has("load") && n === CONTENT.items))
    : [];
  if (searchSizes.length > 0) {
    section(
      `Search: ${searchSizes.map((n) => n.toLocaleString("en-US")).join(" and ")} items, each on a portal of its own, ${settings.connections} connections, ${settings.warmupS} s warm-up + ${settings.durationS} s each`,
    );
  }
  for (const engine of engines) {
    for (const items of searchSizes) {
      let session: Session | undefined;
      try {
        const nodeArgs = options.cpuProfileDir
          ? [
              "--cpu-prof",
              `--cpu-prof-dir=${options.cpuProfileDir}`,
              `--cpu-prof-name=portico-search-${itemsLabel(items)}-${engine.name}.cpuprofile`,
            ]
          : [];
        // One user: the searcher. The pool of the write case is not needed here.
        session = await openSession(engine, { ...options, users: 1 }, settings.connections, nodeArgs);
        const searches = await measureSearches(engine, session, settings, items, true);
        printServerOutput(session.server);
        searchesAlone.push({ engine, items, searches });
      } catch (err) {
        failures.push(`${engine.name} search ${itemsLabel(items)}: ${(err as Error).message}`);
        say(`  ${engine.name}: FAILED: ${(err as Error).message} ${String((err as Error).cause ?? "")}`);
        if (session) printServerOutput(session.server);
      } finally {
        await session?.close();
      }
    }
  }

  const readsOnly: ReadFigures[] = [];
  if (options.cases.has("reads")) {
    section(
      `Reads: ${settings.connections} connections, ${settings.warmupS} s warm-up + ${settings.durationS} s each, on a portal as the load cases start it and on one as \`npm start\` does`,
    );
  }
  for (const engine of options.cases.has("reads") ? engines : []) {
    try {
      const figure: Partial<ReadFigures> = { engine };
      for (const how of ["bench", "npm start"] as const) {
        const nodeArgs = options.cpuProfileDir
          ? [
              "--cpu-prof",
              `--cpu-prof-dir=${options.cpuProfileDir}`,
              `--cpu-prof-name=portico-reads-${how.replace(" ", "-")}-${engine.name}.cpuprofile`,
            ]
          : [];
        const portal = await openReadPortal(engine, how, nodeArgs);
        try {
          await baselineBefore(portal.selfBody);
          const result = await measure(
            {
              ...readCase(engine, portal.server.url, portal.token, how === "bench" ? undefined : how),
              serverPid: portal.server.pid,
            },
            settings,
          );
          if (how === "bench") figure.reads = result;
          else figure.startReads = result;
          printServerOutput(portal.server);
        } finally {
          await portal.close();
        }
      }
      readsOnly.push(figure as ReadFigures);
    } catch (err) {
      failures.push(`${engine.name} reads: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    }
  }
  if (bare) {
    baselines.push(await measure(baselineCase(bare), settings));
    await bare.stop();
  }

  const pgEngine = engines.find((e) => e.name === "postgres");
  if (options.cases.has("writes") && pgEngine) {
    section(
      `Writes: updateUserRole on PostgreSQL beside pgbench, ${settings.connections} connections, ${settings.warmupS} s warm-up + ${settings.durationS} s each`,
    );
    let session: Session | undefined;
    try {
      const cpuProfile = options.cpuProfileDir;
      session = await openSession(
        pgEngine,
        options,
        settings.connections,
        cpuProfile ? ["--cpu-prof", `--cpu-prof-dir=${cpuProfile}`] : [],
      );
      const pids = databasePids(session.store);
      const write = {
        ...writeCase(pgEngine, session.server.url, session.token, session.users),
        serverPid: session.server.pid,
        ...(pids === undefined ? {} : { databasePids: pids }),
      };
      // The warm-up apart, so that the server's CPU time is read over the measured load alone.
      await runLoad(write, { ...settings, durationS: settings.warmupS, warmupS: 0 });
      const cpuBefore = session.server.cpuMs();
      const writes = await measure(write, { ...settings, warmupS: 0 });
      const cpuAfter = session.server.cpuMs();
      if (cpuBefore !== undefined && cpuAfter !== undefined && writes.answers > 0) {
        say(
          `  portico's CPU per request: ${((cpuAfter - cpuBefore) / writes.answers).toFixed(3)} ms (${Math.round(
            (100 * (cpuAfter - cpuBefore)) / (settings.durationS * 1000),
          )}% of a core)`,
        );
      }
      printServerOutput(session.server);
      await session.close();
      session = undefined;
      anchors.push({ writes, pgbench: await measureAnchor(pgEngine, settings) });
    } catch (err) {
      failures.push(`writes: ${(err as Error).message}`);
      say(`  writes: FAILED: ${(err as Error).message}`);
    } finally {
      await session?.close();
    }
  }

  // The webhook deliveries alone, on a fresh portal without the load cases' users and content.
  const deliveriesOnly: { engine: Engine; deliveries: DeliveryFigures[] }[] = [];
  if (options.cases.has("delivery"))
    section("Webhook delivery: a portal on a fresh store, a receiver on loopback");
  for (const engine of options.cases.has("delivery") ? engines : []) {
    const store = await createStore(engine);
    let server: ServerProcess | undefined;
    try {
      const profile = options.cpuProfileDir;
      server = await startPortico(
        engine,
        store,
        profile
          ? [
              "--cpu-prof",
              `--cpu-prof-dir=${profile}`,
              `--cpu-prof-name=portico-delivery-${engine.name}.cpuprofile`,
            ]
          : [],
      );
      const token = await new PortalApi(server.url).signIn(ADMIN.username, ADMIN.password);
      say(`  ${engine.name}:`);
      const session = { server, store, token } as Pick<Session, "server" | "store" | "token">;
      deliveriesOnly.push({ engine, deliveries: await measureDeliveries(engine, session) });
      printServerOutput(server);
    } catch (err) {
      failures.push(`${engine.name} delivery: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    } finally {
      await server?.stop();
      await store.destroy();
    }
  }

  const syncs: SyncFigures[] = [];
  if (options.cases.has("sync")) {
    section(
      `Sync: a guest portal receives ${SYNC.items.toLocaleString("en-US")} items from a host (synchronous syncs, timed)`,
    );
  }
  for (const engine of options.cases.has("sync") ? engines : []) {
    try {
      let started = 0;
      const profile = options.cpuProfileDir;
      const start = (store: Store) => {
        // The first portal is the host, the second the guest.
        const role = started++ === 0 ? "host" : "guest";
        const args = profile
          ? [
              "--cpu-prof",
              `--cpu-prof-dir=${profile}`,
              `--cpu-prof-name=portico-sync-${role}-${engine.name}.cpuprofile`,
            ]
          : [];
        return startPortico(engine, store, args);
      };
      syncs.push(await measureSync(engine, start, say));
    } catch (err) {
      failures.push(`${engine.name} sync: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    }
  }

  const layerCopies: LayerCopyFigures[] = [];
  if (options.cases.has("layercopy")) {
    section(
      `Layer copy: a guest copies a hosted layer of ${LAYER_COPY.features.toLocaleString("en-US")} points, then ${LAYER_COPY.edits.toLocaleString("en-US")} updates (synchronous syncs, timed)`,
    );
  }
  for (const engine of options.cases.has("layercopy") ? engines : []) {
    try {
      layerCopies.push(await measureLayerCopy(engine, (store) => startPortico(engine, store), say));
    } catch (err) {
      failures.push(`${engine.name} layer copy: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    }
  }

  const scaling: NodesFigures[] = [];
  if (options.cases.has("nodes") && pgEngine) {
    section(
      `Nodes: reads and writes on 1 node, then on ${options.nodes} nodes of one PostgreSQL database (${settings.connections} connections in all)`,
    );
    try {
      scaling.push(
        await measureNodes(pgEngine, options.nodes, options.users, settings, {
          // Each node's profile is named by its process id: the first node is the one measured alone.
          start: (store) =>
            startPortico(
              pgEngine,
              store,
              options.cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`] : [],
            ),
          seedUsers,
          measure,
          say,
          pin: options.pin,
        }),
      );
    } catch (err) {
      failures.push(`nodes: ${(err as Error).message}`);
      say(`  nodes: FAILED: ${(err as Error).message}`);
    }
  }

  const abuse: AttackFigures[] = [];
  if (options.cases.has("abuse")) {
    section(
      `Abuse: each attack against a fresh server, after ${ABUSE.quietMs / 1000} s without attack on the same server (cut off after ${ABUSE.attackTimeoutMs / 1000} s)`,
    );
  }
  for (const engine of options.cases.has("abuse") ? engines : []) {
    try {
      const results = await measureAbuse(
        engine,
        (store) => startPortico(engine, store),
        say,
        options.attacks,
      );
      abuse.push(...results);
      // A dead server is a figure, not a failure of the bench; what could not run is.
      for (const r of results) {
        if (r.outcome.startsWith("not measured"))
          failures.push(`${engine.name} abuse ${r.name}: ${r.outcome}`);
      }
    } catch (err) {
      failures.push(`${engine.name} abuse: ${(err as Error).message}`);
      say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
    }
  }

  const features: FeaturesFigures[] = [];
  let koop: KoopFigures | undefined;
  if (options.cases.has("features")) {
    section(
      `Features: ${options.points.toLocaleString("en-US")} points loaded through applyEdits, then queried at ${settings.connections} connections (${settings.warmupS} s warm-up + ${settings.durationS} s each), beside a direct reader and Koop`,
    );
    const points = new Points(options.points);
    const plan = planQueries(points);
    say(
      `  ${FEATURES.distinctRequests} distinct requests per case; envelopes of ${(plan.envelopes[0]!.xmax - plan.envelopes[0]!.xmin).toFixed(3)} degrees; tiles at zoom ${plan.zoom}`,
    );
    for (const engine of engines) {
      try {
        features.push(
          await measureFeatures(engine, points, plan, settings, options.cpuProfileDir, {
            start: (store, nodeArgs) => startPortico(engine, store, nodeArgs),
            measure,
            say,
          }),
        );
      } catch (err) {
        failures.push(`${engine.name} features: ${(err as Error).message}`);
        say(`  ${engine.name}: FAILED: ${(err as Error).message}`);
      }
    }
    try {
      koop = await measureKoop(points, plan, settings, { measure, say });
    } catch (err) {
      failures.push(`koop features: ${(err as Error).message}`);
      say(`  koop: FAILED: ${(err as Error).message}`);
    }
  }

  const postgis: PostgisFigures[] = [];
  if (options.cases.has("postgis") && pgEngine) {
    section(
      `PostGIS: ${options.points.toLocaleString("en-US")} points and ${(POSTGIS_BENCH.zonesAcross * POSTGIS_BENCH.zonesDown).toLocaleString("en-US")} octagons on PostgreSQL without and with PostGIS, queried at ${settings.connections} connections`,
    );
    try {
      postgis.push(
        ...(await measurePostgis(pgEngine, new Points(options.points), settings, {
          start: (store) => startPortico(pgEngine, store),
          measure,
          say,
        })),
      );
    } catch (err) {
      failures.push(`postgis: ${(err as Error).message}`);
      say(`  postgis: FAILED: ${(err as Error).message}`);
    }
  }

  printSummary(
    baselines,
    readsOnly,
    figures,
    searchesAlone,
    deliveriesOnly,
    startups,
    syncs,
    scaling,
    anchors,
  );
  if (layerCopies.length) {
    say("");
    say(layerCopySummary(layerCopies));
  }
  if (postgis.length) {
    say("");
    say(postgisSummary(postgis));
  }
  if (features.length || koop) {
    say("");
    say(featuresSummary(features, koop));
  }
  if (abuse.length) {
    say("");
    say(abuseTable(abuse));
    say(
      "RSS = the server's peak resident memory over the window; /health = the worst latency of a probe on a fresh connection every 20 ms; ratio = under attack / without",
    );
  }
  if (failures.length) {
    section("Not measured");
    for (const failure of failures) say(`  ${failure}`);
    return 1;
  }
  return 0;
}

function printHeader(options: BenchOptions, engines: Engine[]) {
  const cpus = os.cpus();
  say(`portico benchmark: node ${process.version}, ${cpus.length} x ${cpus[0]?.model ?? "unknown CPU"}`);
  say(
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} (other load skews every figure)`,
  );
  say(
    `engines: ${engines.map((e) => (e.databaseUrl ? `${e.name} (${redact(e.databaseUrl)})` : e.name)).join(", ")}; ` +
      `cases: ${[...options.cases].join(", ")}; ` +
      `${options.starts} timed start(s) of each kind; ${options.users} users in the write pool`,
  );
}

/** A database URL without its password, for printing. */
function redact(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = "***";
  return parsed.toString();
}

async function startPortico(engine: Engine, store: Store, nodeArgs: string[] = []): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({
    name: `portico (${engine.name})`,
    args: [...nodeArgs, PORTICO_MAIN, "serve"],
    env: cleanEnv({
      ...store.env,
      ...ADMIN_ENV,
      PORTICO_PORT: String(port),
      PORTICO_HOST: "127.0.0.1",
      PORTICO_HTTPS_PORT: "off",
      PORTICO_LOG_LEVEL: "warn",
      // The delivery case's receiver and the sync case's other portal listen on loopback, which the
      // address guard refuses by default.
      PORTICO_OUTBOUND_ALLOW: "127.0.0.1/32",
    }),
    port,
    readyPath: "/sharing/rest/info?f=json",
  });
}

/**
 * `portico serve` as a user's `npm start` runs it: default settings (access log at info, HTTPS on
 * beside HTTP) except what cannot be: the store, free ports (7080 and 7443 may be taken), and a
 * known first administrator to sign in as. Its stdout goes to a file in the data directory, as
 * `npm start > portico.log` would send it.
 */
async function startAsNpmStart(
  engine: Engine,
  store: Store,
  nodeArgs: string[] = [],
): Promise<ServerProcess> {
  const port = await freePort();
  const httpsPort = await freePort();
  const dataDir = store.env.PORTICO_DATA_DIR;
  if (!dataDir) throw new Error("a store without a data directory");
  return startServer({
    name: `portico as npm start (${engine.name})`,
    args: [...nodeArgs, PORTICO_MAIN, "serve"],
    env: cleanEnv({
      ...store.env,
      ...ADMIN_ENV,
      PORTICO_PORT: String(port),
      PORTICO_HTTPS_PORT: String(httpsPort),
    }),
    port,
    readyPath: "/sharing/rest/info?f=json",
    stdoutFile: path.join(dataDir, "portico.log"),
  });
}

/** A portal on a fresh store, signed in, for the read case alone. */
async function openReadPortal(engine: Engine, how: "bench" | "npm start", nodeArgs: string[]) {
  const store = await createStore(engine);
  let server: ServerProcess | undefined;
  const close = async () => {
    await server?.stop();
    await store.destroy();
  };
  try {
    server =
      how === "bench"
        ? await startPortico(engine, store, nodeArgs)
        : await startAsNpmStart(engine, store, nodeArgs);
    const api = new PortalApi(server.url);
    const token = await api.signIn(ADMIN.username, ADMIN.password);
    const selfBody = await api.getText(READ_PATH, { token });
    if (!isSignedInPortal(selfBody)) {
      throw new Error(`portals/self is not the signed-in view: ${selfBody.slice(0, 200)}`);
    }
    return { server, token, selfBody, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** The read case on a portal started as `npm start` starts it, on a store of its own. */
async function measureReadsAsStarted(engine: Engine, settings: LoadSettings): Promise<LoadResult> {
  const portal = await openReadPortal(engine, "npm start", []);
  try {
    return await measure(
      { ...readCase(engine, portal.server.url, portal.token, "npm start"), serverPid: portal.server.pid },
      settings,
    );
  } finally {
    await portal.close();
  }
}

async function timeStartups(engine: Engine, starts: number): Promise<StartupFigures> {
  const figures: StartupFigures = { engine, first: [], second: [] };
  for (let i = 0; i < starts; i++) {
    const store = await createStore(engine);
    try {
      for (const kind of ["first", "second"] as const) {
        // One at a time: the second start must find the first one's data, committed and closed.
        const server = await startPortico(engine, store);
        figures[kind].push(server.readyMs);
        await server.stop();
        printServerOutput(server);
      }
    } finally {
      await store.destroy();
    }
  }
  const describe = (values: number[]) =>
    `median ${ms(median(values))} (${values.map((v) => Math.round(v)).join(", ")})`;
  say(`  ${engine.name}: first start ${describe(figures.first)}; second start ${describe(figures.second)}`);
  return figures;
}

async function openSession(
  engine: Engine,
  options: BenchOptions,
  connections: number,
  nodeArgs: string[] = [],
): Promise<Session> {
  const store = await createStore(engine);
  let server: ServerProcess | undefined;
  const close = async () => {
    await server?.stop();
    await store.destroy();
  };
  try {
    server = await startPortico(engine, store, nodeArgs);
    const api = new PortalApi(server.url);
    const token = await api.signIn(ADMIN.username, ADMIN.password);
    const selfBody = await api.getText(READ_PATH, { token });
    if (!isSignedInPortal(selfBody)) {
      throw new Error(`portals/self is not the signed-in view: ${selfBody.slice(0, 200)}`);
    }

    // Idle memory is read before seeding: creating users hashes passwords with 64 MiB each, and
    // that is not what an idle server holds.
    await runLoad(readCase(engine, server.url, token), {
      connections,
      durationS: MEMORY_WARMUP_S,
      warmupS: 0,
    });
    await sleep(IDLE_SETTLE_MS);
    const idleMemory = server.memory();
    if (idleMemory) say(`  ${engine.name}: idle after warm-up: RSS ${mb(idleMemory.rss)}`);

    const seeding = performance.now();
    const users = await seedUsers(api, token, options.users);
    say(`  ${engine.name}: created ${users.length} users in ${ms(performance.now() - seeding)}`);
    return { server, store, token, users, selfBody, idleMemory, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** Creates the write pool as org_user, a few at a time. */
async function seedUsers(api: PortalApi, token: string, count: number): Promise<string[]> {
  const users = Array.from({ length: count }, (_, i) => `bench_user_${String(i + 1).padStart(3, "0")}`);
  let next = 0;
  const worker = async () => {
    while (next < users.length) {
      const username = users[next++]!;
      await api.createUser(token, username, "org_user");
    }
  };
  await Promise.all(Array.from({ length: Math.min(SEED_CONCURRENCY, count) }, worker));
  return users;
}

async function startBare(body: string): Promise<ServerProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-bare-"));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  const unregister = onCleanup(remove);
  try {
    const bodyFile = path.join(dir, "body.json");
    fs.writeFileSync(bodyFile, body);
    const port = await freePort();
    return await startServer({
      name: "bare node:http",
      args: [BARE_SERVER],
      env: cleanEnv({ BENCH_PORT: String(port), BENCH_BODY_FILE: bodyFile }),
      port,
      readyPath: "/",
    });
  } finally {
    // The server reads the body once at start, so the file is not needed while it runs.
    unregister();
    remove();
  }
}

function baselineCase(bare: ServerProcess): LoadCase {
  return {
    name: "bare node:http",
    url: `${bare.url}${READ_PATH}?f=json`,
    verify: isSignedInPortal,
    serverPid: bare.pid,
  };
}

/**
 * Seeds the content (not measured), then, if `search`, searches as a member of the organization:
 * the visibility rule (own, public and org items, and items shared with the member's groups) is
 * part of every query, as it is for most real callers.
 */
async function measureSearches(
  engine: Engine,
  session: Session,
  settings: LoadSettings,
  items: number,
  search: boolean,
) {
  const searcher = session.users[0];
  if (!searcher) throw new Error("the search case needs a user from the pool");
  const seeding = performance.now();
  await seedContent(engine.name, session.store, searcher, items);
  say(
    `  ${engine.name}: seeded ${items.toLocaleString("en-US")} items (${CONTENT.owners} owners, ` +
      `${CONTENT.tags} tags, 20 types) in ${ms(performance.now() - seeding)}`,
  );
  const results: LoadResult[] = [];
  if (!search) return results;
  // The password PortalApi.createUser gives pool users. Tried twice: the keep-alive connection
  // left from seeding the users has idled through the seed (the server's event loop may have
  // waited on SQLite's write lock meanwhile), and the server can close it as the request goes out
  // ("fetch failed", seen once in three runs at 100,000 items).
  const signIn = () => new PortalApi(session.server.url).signIn(searcher, `pw-${searcher}-secret`);
  const token = await signIn().catch(async (err: unknown) => {
    if (!(err instanceof TypeError)) throw err;
    await sleep(1000);
    return signIn();
  });
  const pids = databasePids(session.store);
  for (const c of searchCases(engine.name, session.server.url, token, items)) {
    const primeMs = await c.prime(PRIME_PARALLEL);
    say(`  ${c.name}: every query of the rotation once (totals counted) in ${ms(primeMs)}`);
    results.push(
      await measure(
        { ...c, serverPid: session.server.pid, ...(pids === undefined ? {} : { databasePids: pids }) },
        settings,
      ),
    );
  }
  return results;
}

async function measureDeliveries(
  engine: Engine,
  session: Pick<Session, "server" | "store" | "token">,
): Promise<DeliveryFigures[]> {
  const results = await measureDelivery(engine.name, session.store, session.server.url, session.token, () =>
    session.server.cpuMs(),
  );
  for (const r of results) {
    say(
      `  webhooks: ${r.name.padEnd(30)} ${rate(r.perSecond).padStart(7)} deliveries/s  ` +
        `p50 ${ms(r.p50).padStart(7)}  p99 ${ms(r.p99).padStart(7)}  (${r.deliveries} in ${r.totalS.toFixed(1)} s)` +
        (r.cpuUsPerDelivery === undefined
          ? ""
          : `  server CPU ${Math.round(r.cpuUsPerDelivery)} µs/delivery`) +
        (r.dbCpuUsPerDelivery === undefined
          ? ""
          : `  PostgreSQL CPU ${Math.round(r.dbCpuUsPerDelivery)} µs/delivery`),
    );
  }
  return results;
}

/** pgbench's transactions of updateUserRole's shape, on a scratch database of the same server. */
async function measureAnchor(engine: Engine, settings: LoadSettings): Promise<PgbenchFigures> {
  const figures = await measurePgbench(engine, settings);
  say(
    `  ${"pgbench, same shape".padEnd(34)} ${rate(figures.tps).padStart(7)} tx/s   mean ${ms(figures.latencyMs).padStart(7)}  (${figures.command})` +
      (figures.dbCpuUsPerTx === undefined
        ? ""
        : `  PostgreSQL CPU ${Math.round(figures.dbCpuUsPerTx)} µs/tx`),
  );
  return figures;
}

async function measure(c: LoadCase, settings: LoadSettings): Promise<LoadResult> {
  const r = await runLoad(c, settings);
  say(
    `  ${r.name.padEnd(34)} ${rate(r.rps).padStart(7)} req/s  p50 ${ms(r.p50).padStart(7)}  ` +
      `p99 ${ms(r.p99).padStart(7)}  errors ${r.errors}  non-2xx ${r.non2xx}  rejected ${r.rejected}` +
      (r.cpuUsPerAnswer === undefined ? "" : `  server CPU ${Math.round(r.cpuUsPerAnswer)} µs/answer`) +
      (r.dbCpuUsPerAnswer === undefined
        ? ""
        : `  PostgreSQL CPU ${Math.round(r.dbCpuUsPerAnswer)} µs/answer`),
  );
  for (const sample of r.samples) say(`    rejected answer: ${sample}`);
  return r;
}

/** Warnings and errors the server logged (it runs at level warn): worth seeing next to figures. */
function printServerOutput(server: ServerProcess) {
  const lines = server.output();
  if (lines.length === 0) return;
  say(`  ${server.name} logged (last lines):`);
  for (const line of lines.slice(-5)) say(`    ${line.slice(0, 300)}`);
}

/** The layer-copy case's rows: first copy and delta sync per engine, with both portals' CPU. */
function layerCopySummary(copies: LayerCopyFigures[]): string {
  const cpu = (r: LayerCopyRun) =>
    r.guestCpuMs === undefined || r.hostCpuMs === undefined
      ? ""
      : `guest ${(r.guestCpuMs / 1000).toFixed(1)} s, host ${(r.hostCpuMs / 1000).toFixed(1)} s`;
  const rows = copies.flatMap((c) => [
    [
      `layer copy: first, ${LAYER_COPY.features.toLocaleString("en-US")} features`,
      c.engine.name,
      `${seconds(c.first.ms)} (${rate((c.first.added * 1000) / c.first.ms)} features/s)`,
      cpu(c.first),
    ],
    [
      `layer copy: ${LAYER_COPY.edits.toLocaleString("en-US")} updates`,
      c.engine.name,
      seconds(c.delta.ms),
      cpu(c.delta),
    ],
  ]);
  return table(["measure", "engine", "time", "CPU"], rows, 2);
}

function printSummary(
  baselines: LoadResult[],
  readsOnly: ReadFigures[],
  figures: EngineFigures[],
  searchesAlone: SearchFigures[],
  deliveriesOnly: { engine: Engine; deliveries: DeliveryFigures[] }[],
  startups: StartupFigures[],
  syncs: SyncFigures[],
  scaling: NodesFigures[],
  anchors: AnchorFigures[],
) {
  section("Summary");
  const baseRps = baselines.length ? baselines.reduce((sum, b) => sum + b.rps, 0) / baselines.length : NaN;
  const loadRow = (r: LoadResult, engine: string, goal: number | undefined): string[] => {
    const q = r.rps / baseRps;
    const failed = r.errors + r.non2xx + r.rejected > 0;
    return [
      r.name,
      engine,
      rate(r.rps),
      ms(r.p50),
      ms(r.p99),
      String(r.errors),
      String(r.non2xx),
      String(r.rejected),
      // No baseline ran (a search or sync case alone): there is nothing to divide by.
      Number.isFinite(q) ? ratio(q) : "",
      goal === undefined ? "" : `>= ${ratio(goal)}`,
      // Throughput built on failing answers does not count as meeting the goal.
      goal === undefined ? "" : verdict(q >= goal && !failed),
      r.cpuUsPerAnswer === undefined ? "" : `${Math.round(r.cpuUsPerAnswer)} µs`,
    ];
  };
  const latencyRow = (r: LoadResult, engine: string, items: number = CONTENT.items): string[] => {
    const row = loadRow(r, engine, undefined);
    const failed = r.errors + r.non2xx + r.rejected > 0;
    const goal = items > CONTENT.items ? GOALS.searchP99MsAtMillion : GOALS.searchP99Ms;
    row[9] = `p99 < ${ms(goal)}`;
    row[10] = verdict(r.p99 < goal && !failed);
    if (r.dbCpuUsPerAnswer !== undefined) row[11] += ` + ${Math.round(r.dbCpuUsPerAnswer)} µs pg`;
    return row;
  };
  const loadRows = [
    ...baselines.map((b, i) =>
      loadRow({ ...b, name: `${b.name} (${i === 0 ? "before" : "after"})` }, "-", undefined),
    ),
    ...readsOnly.flatMap((f) => [
      loadRow(f.reads, f.engine.name, GOALS.readRatio),
      loadRow(f.startReads, f.engine.name, GOALS.readRatio),
    ]),
    ...figures.flatMap((f) => [
      loadRow(f.reads, f.engine.name, GOALS.readRatio),
      loadRow(f.startReads, f.engine.name, GOALS.readRatio),
      loadRow(f.writes, f.engine.name, GOALS.writeRatio),
      ...f.searches.map((s) => latencyRow(s, f.engine.name)),
      loadRow(f.createService, f.engine.name, undefined),
    ]),
    ...searchesAlone.flatMap((f) => f.searches.map((s) => latencyRow(s, f.engine.name, f.items))),
  ];
  if (loadRows.length) {
    say(
      table(
        [
          "case",
          "engine",
          "req/s",
          "p50",
          "p99",
          "errors",
          "non-2xx",
          "rejected",
          "ratio",
          "goal",
          "verdict",
          "CPU/answer",
        ],
        loadRows,
        2,
      ),
    );
  }
  if (baselines.length) {
    say(
      `ratio = req/s / mean baseline req/s (${rate(baseRps)}); rejected = answers that were not the expected body; CPU/answer = the server's user + system CPU time over the measurement per answer (where known; "pg" = PostgreSQL's processes serving the portal)`,
    );
  }

  const rows: string[][] = [];
  for (const s of startups) {
    for (const kind of ["first", "second"] as const) {
      const values = s[kind];
      const m = median(values);
      rows.push([
        `${kind} start (${kind === "first" ? "empty store" : "existing data"})`,
        s.engine.name,
        `${ms(m)} median, ${ms(Math.max(...values))} max`,
        `< ${ms(GOALS.startMs)}`,
        verdict(m < GOALS.startMs),
      ]);
    }
  }
  for (const f of figures) {
    rows.push(
      f.idleMemory
        ? [
            "idle RSS after warm-up",
            f.engine.name,
            mb(f.idleMemory.rss),
            `< ${mb(GOALS.idleRssBytes)}`,
            verdict(f.idleMemory.rss < GOALS.idleRssBytes),
          ]
        : ["idle RSS after warm-up", f.engine.name, "unavailable (no /proc)", "", ""],
    );
    if (f.afterLoadMemory) {
      rows.push([
        "RSS after the load cases",
        f.engine.name,
        // The peak includes seeding, where each createUser hashes a password with 64 MiB.
        `${mb(f.afterLoadMemory.rss)} (peak ${mb(f.afterLoadMemory.peak)} incl. seeding)`,
        "",
        "",
      ]);
    }
  }
  for (const f of [...figures, ...deliveriesOnly]) {
    for (const d of f.deliveries) {
      const paced = d.name.includes("/s via");
      const cpu =
        d.cpuUsPerDelivery === undefined ? "" : `, CPU ${Math.round(d.cpuUsPerDelivery)} µs/delivery`;
      rows.push([
        `webhooks: ${d.name}`,
        f.engine.name,
        `${rate(d.perSecond)} deliveries/s, p50 ${ms(d.p50)}, p99 ${ms(d.p99)}${cpu}`,
        paced ? `p99 < ${ms(GOALS.deliveryP99Ms)}` : `>= ${GOALS.deliveriesPerSecond}/s`,
        verdict(paced ? d.p99 < GOALS.deliveryP99Ms : d.perSecond >= GOALS.deliveriesPerSecond),
      ]);
    }
  }
  for (const s of syncs) {
    // The goals are set for SQLite; PostgreSQL's figures are shown beside them.
    const judged = s.engine.name === "sqlite";
    const goal = (limit: number) => (judged ? `<= ${limit / 1000} s` : "");
    rows.push(
      [
        `sync: first, ${SYNC.items.toLocaleString("en-US")} items`,
        s.engine.name,
        `${seconds(s.first.ms)} (${rate((s.first.succeeded * 1000) / s.first.ms)} items/s; ${syncCpu(s.first)})`,
        goal(GOALS.firstSyncMs),
        judged ? verdict(s.first.ms <= GOALS.firstSyncMs) : "",
      ],
      [
        `sync: ${SYNC.changed} items changed`,
        s.engine.name,
        `${seconds(s.changed.ms)} (${syncCpu(s.changed)})`,
        goal(GOALS.changedSyncMs),
        judged ? verdict(s.changed.ms <= GOALS.changedSyncMs) : "",
      ],
      [
        "sync: nothing changed",
        s.engine.name,
        `${seconds(s.unchanged.ms)} (${syncCpu(s.unchanged)})`,
        "",
        "",
      ],
    );
  }
  for (const a of anchors) {
    const q = a.writes.rps / a.pgbench.tps;
    const failed = a.writes.errors + a.writes.non2xx + a.writes.rejected > 0;
    rows.push([
      "updateUserRole / pgbench of the same shape",
      "postgres",
      `${ratio(q)} (${rate(a.writes.rps)} req/s, p99 ${ms(a.writes.p99)} vs ${rate(a.pgbench.tps)} tx/s)${failed ? "; FAILED ANSWERS" : ""}`,
      `>= ${ratio(GOALS.pgbenchRatio)}`,
      verdict(q >= GOALS.pgbenchRatio && !failed),
    ]);
  }
  for (const n of scaling) {
    for (const kind of ["reads", "writes"] as const) {
      const one = n.single[kind];
      const many = n.spread[kind];
      const failed = [one, many].some((r) => r.errors + r.non2xx + r.rejected > 0);
      const cpu = (r: LoadResult) =>
        r.cpuUsPerAnswer === undefined ? "" : `, ${Math.round(r.cpuUsPerAnswer)} µs CPU/answer`;
      rows.push([
        `${kind}: ${n.nodes} nodes / 1 node${n.pinned ? ` (nodes pinned to core ${n.pinned.nodeCores})` : ""}`,
        "postgres",
        `${ratio(many.rps / one.rps)} (${rate(many.rps)}${cpu(many)} vs ${rate(one.rps)} req/s${cpu(one)}${failed ? "; FAILED ANSWERS" : ""})`,
        "",
        "",
      ]);
    }
  }
  if (rows.length) {
    say("");
    say(table(["measure", "engine", "value", "goal", "verdict"], rows, 2));
  }
}

function section(title: string) {
  say(`\n== ${title}`);
}

function say(line: string) {
  process.stdout.write(`${line}\n`);
}

main()
  .then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`bench: ${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    },
  )
  .finally(() => cleanupAll());
