import { parseArgs } from "node:util";
import { ATTACK_IDS } from "./abuse.js";

/** The parts of a run, in the order they run; `--cases` picks some. */
export const CASES = [
  "startup",
  "load",
  "search",
  "reads",
  "writes",
  "delivery",
  "sync",
  "layercopy",
  "nodes",
  "abuse",
  "features",
  "postgis",
] as const;
/**
 * Cases that run only when asked for: they need PostgreSQL and several servers, stress the
 * machine, or take minutes (loading a million features, installing Koop).
 */
const ON_REQUEST: readonly CaseName[] = [
  "reads",
  "writes",
  "delivery",
  "nodes",
  "abuse",
  "features",
  "postgis",
];
export type CaseName = (typeof CASES)[number];

export interface BenchOptions {
  cases: ReadonlySet<CaseName>;
  /** Seconds of measured load per case. */
  durationS: number;
  /** Seconds of unmeasured load before each case, so both servers are measured with a warm JIT. */
  warmupS: number;
  connections: number;
  /** Size of the user pool the write case rotates over. */
  users: number;
  /** How many times each start-up kind (first, second) is timed; the median is judged. */
  starts: number;
  /** PostgreSQL server to run the portico cases against as well, or undefined for SQLite only. */
  databaseUrl: string | undefined;
  /** Nodes of the multi-node case (PostgreSQL). */
  nodes: number;
  /** Pin the multi-node case's nodes to half the cores, the rest to the others (`bench/pinning.ts`). */
  pin: boolean;
  /** The attacks of the abuse case to run (all by default). */
  attacks: ReadonlySet<string>;
  /** Points of the features case's layer. */
  points: number;
  /** Sizes of the search case's portal, in items, each measured on a portal of its own. */
  searchItems: readonly number[];
  /**
   * Where `portico serve` of the features and reads cases writes its CPU profile
   * (`node --cpu-prof`), if anywhere.
   */
  cpuProfileDir: string | undefined;
}

/** The search case's portals: the goal's size, then ten times it (its own goal). */
const DEFAULT_SEARCH_ITEMS = [100_000, 1_000_000];

/** Used by `--pg` alone; any database of the server works, it only hosts CREATE/DROP DATABASE. */
const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";

export const USAGE = `usage: npm run bench -- [flags]

  --cases LIST       comma-separated parts to run, of ${CASES.join(", ")} (default all but
                     reads, writes, delivery, nodes, abuse, features and postgis): startup times,
                     the load cases (reads, also on a portal started as \`npm start\` starts it,
                     writes, createService, webhooks, memory), item search by owner, tag and type
                     over 100,000 and 1,000,000 items (--items), the read case alone (quick: a
                     portal as the load cases start it and one as \`npm start\` does, beside the
                     baseline), only the write case on PostgreSQL beside its pgbench anchor
                     (implies --pg), only the webhook deliveries on a fresh portal (with the
                     server's CPU per delivery), the collaboration sync between two portals (with
                     both portals' CPU per item), a hosted layer of 100,000 points copied to a
                     guest and a delta sync of 1,000 updates, the read and write cases on one
                     node beside N nodes of
                     one PostgreSQL database, the attacks of issue 12 (peak RSS and worst /health
                     latency of the server under each attack, beside the same without attack), a
                     hosted point layer loaded through applyEdits and queried, beside a direct
                     database reader and Koop, and the same points with polygons queried on
                     PostgreSQL without and with PostGIS (implies --pg)
  --items N          items of the search case's portal (default: 100000, then 1000000 on a
                     portal of its own; alone unless --cases is given)
  --points N         points of the features and postgis cases' layer (default 1000000)
  --cpu-prof DIR     write a CPU profile of the features, reads, search (or writes), delivery,
                     sync and nodes cases' portico servers into DIR (a node's by its process id)
  --attacks LIST     the attacks of the abuse case to run, of ${ATTACK_IDS.join(", ")}
                     (default all; alone unless --cases is given)
  --nodes N          run the multi-node case with N nodes (default 2; alone unless --cases is
                     given; implies --pg)
  --pin              in the multi-node case, pin the nodes to the lower half of the cores and the
                     load generator and PostgreSQL's processes to the upper half (taskset; put
                     back afterwards), so 1 node and N nodes run on the same cores
  --duration N       seconds of measured load per case (default 5)
  --warmup N         seconds of unmeasured load before each case (default 1)
  --connections N    concurrent connections (default 32)
  --users N          users the write case rotates over (default 64)
  --starts N         timed start-ups of each kind (default 3)
  --pg               also run against PostgreSQL (BENCH_DATABASE_URL, PORTICO_TEST_DATABASE_URL,
                     or ${DEFAULT_DATABASE_URL})
  --database-url URL PostgreSQL server to use (implies --pg)

Setting BENCH_DATABASE_URL or PORTICO_TEST_DATABASE_URL also enables PostgreSQL.
`;

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): BenchOptions | "help" {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      cases: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      connections: { type: "string" },
      users: { type: "string" },
      starts: { type: "string" },
      pg: { type: "boolean" },
      "database-url": { type: "string" },
      nodes: { type: "string" },
      pin: { type: "boolean" },
      attacks: { type: "string" },
      points: { type: "string" },
      items: { type: "string" },
      "cpu-prof": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) return "help";

  const nodes = positive("nodes", values.nodes, 2, { integer: true });
  if (nodes < 2) throw new Error(`--nodes must be at least 2, got ${nodes}`);
  let cases = caseList(values.cases);
  if (values.nodes !== undefined && values.cases === undefined) cases = new Set<CaseName>(["nodes"]);
  if (values.attacks !== undefined && values.cases === undefined) cases = new Set<CaseName>(["abuse"]);
  if (values.points !== undefined && values.cases === undefined) cases = new Set<CaseName>(["features"]);
  if (values.items !== undefined && values.cases === undefined) cases = new Set<CaseName>(["search"]);
  const attacks = attackList(values.attacks);
  const fromEnv = env.BENCH_DATABASE_URL || env.PORTICO_TEST_DATABASE_URL || undefined;
  const wantsPg = values.pg || fromEnv || cases.has("nodes") || cases.has("postgis") || cases.has("writes");
  const databaseUrl = values["database-url"] ?? (wantsPg ? (fromEnv ?? DEFAULT_DATABASE_URL) : undefined);
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new Error(`--database-url must be a postgres:// URL, got ${databaseUrl}`);
  }

  return {
    cases,
    durationS: positive("duration", values.duration, 5),
    warmupS: positive("warmup", values.warmup, 1, { allowZero: true }),
    connections: positive("connections", values.connections, 32, { integer: true }),
    users: positive("users", values.users, 64, { integer: true }),
    starts: positive("starts", values.starts, 3, { integer: true }),
    databaseUrl,
    nodes,
    pin: values.pin ?? false,
    attacks,
    points: positive("points", values.points, 1_000_000, { integer: true }),
    searchItems:
      values.items === undefined
        ? DEFAULT_SEARCH_ITEMS
        : [positive("items", values.items, 100_000, { integer: true })],
    cpuProfileDir: values["cpu-prof"],
  };
}

function attackList(value: string | undefined): ReadonlySet<string> {
  if (value === undefined) return new Set(ATTACK_IDS);
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  const unknown = names.filter((name) => !ATTACK_IDS.includes(name));
  if (names.length === 0 || unknown.length > 0) {
    throw new Error(`--attacks takes a comma-separated list of ${ATTACK_IDS.join(", ")}, got ${value}`);
  }
  return new Set(names);
}

function positive(
  name: string,
  value: string | undefined,
  fallback: number,
  { integer = false, allowZero = false } = {},
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  const ok = Number.isFinite(n) && (allowZero ? n >= 0 : n > 0) && (!integer || Number.isInteger(n));
  if (!ok)
    throw new Error(
      `--${name} must be a ${integer ? "whole " : ""}number ${allowZero ? ">=" : ">"} 0, got ${value}`,
    );
  return n;
}

function caseList(value: string | undefined): ReadonlySet<CaseName> {
  if (value === undefined) return new Set(CASES.filter((c) => !ON_REQUEST.includes(c)));
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  const unknown = names.filter((name) => !(CASES as readonly string[]).includes(name));
  if (names.length === 0 || unknown.length > 0) {
    throw new Error(`--cases takes a comma-separated list of ${CASES.join(", ")}, got ${value}`);
  }
  return new Set(names as CaseName[]);
}
