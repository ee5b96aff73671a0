/**
 * The features case of `npm run bench` (`--cases features`): a hosted point layer of N features
 * (1,000,000 by default, `--points`), each with a name, an integer population, a double value and
 * a date, loaded through `applyEdits` in batches of 2,000 (form POST, `adds`, rollbackOnFailure),
 * then queried at the run's connections:
 * - (a) envelopes of about 1,000 features, `f=json` and `f=pbf`, rotating over distinct random
 *   envelopes of that size within the data's extent;
 * - (b) an attribute `where` paged with resultOffset/resultRecordCount;
 * - (c) returnCountOnly over every feature;
 * - (d) the ArcGIS Maps SDK's feature-tile query (`resultType=tile`, quantized, `f=pbf`) of
 *   Web Mercator tiles over the data, the layer itself being in WGS 84 as GeoJSON sources are.
 * Beside it, in the same run: the physical limit (direct-server.ts: the same rows of the same
 * database by the same SQL, as JSON, no portico code) for the envelopes, and Koop
 * (bench/koop/server.cjs, installed on demand) serving the same points for every query.
 *
 * The points come from a fixed seed, so every run and engine loads the same layer; the expected
 * feature counts of the envelopes are computed from the points themselves, and every server's
 * answers are checked against them before the load starts.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { onCleanup } from "./cleanup.js";
import type { LoadCase, LoadResult, LoadSettings } from "./load.js";
import { ADMIN, PortalApi } from "./portal-api.js";
import { cleanEnv, freePort, type ServerProcess, startServer } from "./processes.js";
import { mb, ms, rate, ratio, table, verdict } from "./report.js";
import { createStore, type Engine, type Store } from "./stores.js";

export const FEATURES = {
  defaultPoints: 1_000_000,
  /** Features per applyEdits request. */
  batch: 2_000,
  /**
   * applyEdits requests in flight while loading: a loader that sends its next batch while the
   * last one commits. Edits of one layer still commit one after the other.
   */
  loadersInFlight: 2,
  /** Where the points lie (WGS 84): about Europe, 40 x 25 degrees. */
  extent: { xmin: -10, ymin: 35, xmax: 30, ymax: 60 },
  /** Features an envelope of case (a) and a tile of case (d) hold, on average. */
  featuresPerQuery: 1_000,
  /** Distinct requests each query case rotates over. */
  distinctRequests: 64,
  /** Envelopes whose answers are checked against the points and weighed (JSON vs PBF). */
  checkedEnvelopes: 16,
  /** Population is uniform in [0, popRange); the where case selects a tenth of it. */
  popRange: 1_000_000,
  whereSpan: 100_000,
  pageSize: 1_000,
  /** Pages 0 .. pages-1 of each where. */
  pages: 5,
  /** The layer's maxRecordCount (portico's default), which Koop is given too. */
  maxRecordCount: 2_000,
} as const;

/** Goals reported against, never asserted. */
export const FEATURE_GOALS = {
  envelopeP99Ms: 50,
  /** Envelope req/s as a multiple of Koop's. */
  overKoop: 3,
  /** Envelope req/s as a fraction of the direct server's. */
  overDirect: 0.5,
  /** PBF bytes of an envelope answer as a fraction of its JSON bytes. */
  pbfShare: 1 / 3,
  /** applyEdits loading on SQLite. */
  loadPerSecond: 20_000,
} as const;

const SERVICE = "bench_points";
const LAYER_PATH = `/rest/services/${SERVICE}/FeatureServer/0`;
const KOOP_LAYER_PATH = "/bench/rest/services/points/FeatureServer/0";
const DIRECT_SERVER = fileURLToPath(new URL("./direct-server.js", import.meta.url));
/** bench/koop in the source tree (this file runs from dist/bench). */
const KOOP_DIR = fileURLToPath(new URL("../../bench/koop/", import.meta.url));

const FIELDS = [
  { name: "name", type: "esriFieldTypeString", alias: "Name", length: 64 },
  { name: "pop", type: "esriFieldTypeInteger", alias: "Population" },
  { name: "value", type: "esriFieldTypeDouble", alias: "Value" },
  { name: "date", type: "esriFieldTypeDate", alias: "Date" },
];

const WORDS = [
  "North",
  "South",
  "East",
  "West",
  "Old",
  "New",
  "Upper",
  "Lower",
  "Harbor",
  "Mill",
  "Bridge",
  "Market",
  "Castle",
  "Forest",
  "River",
  "Lake",
  "Hill",
  "Field",
  "Stone",
  "Green",
  "Church",
  "Station",
  "Valley",
  "Park",
] as const;

/** A deterministic generator, so every run loads the same points and asks the same queries. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Box = { xmin: number; ymin: number; xmax: number; ymax: number };

/** The points, column by column (a million objects would cost the bench more than the servers). */
export class Points {
  readonly x: Float64Array;
  readonly y: Float64Array;
  readonly pop: Int32Array;
  readonly value: Float64Array;
  readonly date: Float64Array;
  private readonly words: Uint8Array;
  /** The object id each point got from the last load (0 until loaded). */
  readonly objectIds: Float64Array;

  constructor(readonly count: number) {
    const random = mulberry32(20_240_613);
    const { xmin, ymin, xmax, ymax } = FEATURES.extent;
    const from = Date.UTC(2000, 0, 1);
    const span = Date.UTC(2024, 0, 1) - from;
    this.x = new Float64Array(count);
    this.y = new Float64Array(count);
    this.pop = new Int32Array(count);
    this.value = new Float64Array(count);
    this.date = new Float64Array(count);
    this.words = new Uint8Array(count * 2);
    this.objectIds = new Float64Array(count);
    for (let i = 0; i < count; i++) {
      // Six decimals, as GPS-grade data is usually stored.
      this.x[i] = Math.round((xmin + random() * (xmax - xmin)) * 1e6) / 1e6;
      this.y[i] = Math.round((ymin + random() * (ymax - ymin)) * 1e6) / 1e6;
      this.pop[i] = Math.floor(random() * FEATURES.popRange);
      this.value[i] = Math.round(random() * 1e7) / 1e4;
      this.date[i] = from + Math.floor((random() * span) / 1000) * 1000;
      this.words[2 * i] = Math.floor(random() * WORDS.length);
      this.words[2 * i + 1] = Math.floor(random() * WORDS.length);
    }
  }

  name(i: number): string {
    return `${WORDS[this.words[2 * i] as number]} ${WORDS[this.words[2 * i + 1] as number]} ${i % 1000}`;
  }

  /** Esri JSON of point i as applyEdits takes it (in the layer's reference, so no spatialReference). */
  feature(i: number) {
    return {
      attributes: { name: this.name(i), pop: this.pop[i], value: this.value[i], date: this.date[i] },
      geometry: { x: this.x[i], y: this.y[i] },
    };
  }

  /** Points inside a box, edges included: what an envelope intersecting points answers. */
  countIn(b: Box): number {
    let n = 0;
    for (let i = 0; i < this.count; i++) {
      const x = this.x[i] as number;
      const y = this.y[i] as number;
      if (x >= b.xmin && x <= b.xmax && y >= b.ymin && y <= b.ymax) n++;
    }
    return n;
  }
}

// ----------------------------------------------------------------------------------- the queries

const R = 6378137;
const HALF_WORLD = Math.PI * R;
const lonOf = (x: number) => (x / R) * (180 / Math.PI);
const latOf = (y: number) => Math.atan(Math.sinh(y / R)) * (180 / Math.PI);

interface Tile {
  /** Web Mercator bounds. */
  mercator: Box;
  /** The same in WGS 84. */
  degrees: Box;
}

/** The distinct requests of each case, the same for every server. */
export interface QueryPlan {
  envelopes: Box[];
  /** [lowest population, page] */
  wheres: [number, number][];
  zoom: number;
  tiles: Tile[];
  /** Features in each of the first `checkedEnvelopes` envelopes, counted from the points. */
  expected: number[];
}

export function planQueries(points: Points): QueryPlan {
  const random = mulberry32(7_031_991);
  const { xmin, ymin, xmax, ymax } = FEATURES.extent;
  const area = (xmax - xmin) * (ymax - ymin);
  const density = points.count / area;
  const side = Math.min(Math.sqrt(FEATURES.featuresPerQuery / density), xmax - xmin, ymax - ymin);
  const envelopes: Box[] = [];
  for (let i = 0; i < FEATURES.distinctRequests; i++) {
    const x = xmin + random() * (xmax - xmin - side);
    const y = ymin + random() * (ymax - ymin - side);
    envelopes.push({ xmin: x, ymin: y, xmax: x + side, ymax: y + side });
  }
  const wheres: [number, number][] = [];
  for (let i = 0; i < FEATURES.distinctRequests; i++) {
    wheres.push([
      Math.floor(random() * (FEATURES.popRange - FEATURES.whereSpan)),
      Math.floor(random() * FEATURES.pages),
    ]);
  }
  const { zoom, tiles } = tilesOver(points.count, random);
  const expected = envelopes
    .slice(0, FEATURES.checkedEnvelopes)
    .map((e) => Math.min(points.countIn(e), FEATURES.maxRecordCount));
  return { envelopes, wheres, zoom, tiles, expected };
}

/**
 * Web Mercator tiles (256 px at their zoom, as the SDK's 512 px tiles at the next) wholly inside
 * the data, at the deepest zoom whose tiles still hold about `featuresPerQuery` points.
 */
function tilesOver(count: number, random: () => number): { zoom: number; tiles: Tile[] } {
  const { xmin, ymin, xmax, ymax } = FEATURES.extent;
  const density = count / ((xmax - xmin) * (ymax - ymin));
  const tileY = (lat: number, n: number) => {
    const r = (lat * Math.PI) / 180;
    return ((1 - Math.log(Math.tan(r) + 1 / Math.cos(r)) / Math.PI) / 2) * n;
  };
  let best: { zoom: number; columns: [number, number]; rows: [number, number] } | undefined;
  for (let zoom = 1; zoom <= 20; zoom++) {
    const n = 2 ** zoom;
    const columns: [number, number] = [
      Math.ceil(((xmin + 180) / 360) * n),
      Math.floor(((xmax + 180) / 360) * n) - 1,
    ];
    const rows: [number, number] = [Math.ceil(tileY(ymax, n)), Math.floor(tileY(ymin, n)) - 1];
    if (columns[1] < columns[0] || rows[1] < rows[0]) continue;
    const middle = tileBox(
      zoom,
      Math.floor((columns[0] + columns[1]) / 2),
      Math.floor((rows[0] + rows[1]) / 2),
    );
    const held =
      density * (middle.degrees.xmax - middle.degrees.xmin) * (middle.degrees.ymax - middle.degrees.ymin);
    if (best && held < FEATURES.featuresPerQuery) break;
    best = { zoom, columns, rows };
  }
  if (!best) throw new Error("no Web Mercator tile fits inside the data's extent");
  const { zoom, columns, rows } = best;
  const tiles: Tile[] = [];
  for (let i = 0; i < FEATURES.distinctRequests; i++) {
    const col = columns[0] + Math.floor(random() * (columns[1] - columns[0] + 1));
    const row = rows[0] + Math.floor(random() * (rows[1] - rows[0] + 1));
    tiles.push(tileBox(zoom, col, row));
  }
  return { zoom, tiles };
}

function tileBox(zoom: number, col: number, row: number): Tile {
  const width = (2 * HALF_WORLD) / 2 ** zoom;
  const mercator = {
    xmin: -HALF_WORLD + col * width,
    xmax: -HALF_WORLD + (col + 1) * width,
    ymax: HALF_WORLD - row * width,
    ymin: HALF_WORLD - (row + 1) * width,
  };
  return {
    mercator,
    degrees: {
      xmin: lonOf(mercator.xmin),
      xmax: lonOf(mercator.xmax),
      ymin: latOf(mercator.ymin),
      ymax: latOf(mercator.ymax),
    },
  };
}

type Params = Record<string, string>;

function envelopeParams(e: Box, f: "json" | "pbf"): Params {
  return {
    where: "1=1",
    geometry: JSON.stringify(e),
    geometryType: "esriGeometryEnvelope",
    inSR: "4326",
    spatialRel: "esriSpatialRelIntersects",
    outFields: "*",
    returnGeometry: "true",
    f,
  };
}

function whereParams([low, page]: [number, number]): Params {
  return {
    where: `pop >= ${low} AND pop < ${low + FEATURES.whereSpan}`,
    outFields: "*",
    orderByFields: "OBJECTID ASC",
    resultOffset: String(page * FEATURES.pageSize),
    resultRecordCount: String(FEATURES.pageSize),
    f: "json",
  };
}

const COUNT_PARAMS: Params = { where: "1=1", returnCountOnly: "true", f: "json" };

/** What the Maps SDK sends for one feature tile of a layer drawn on a Web Mercator map. */
function tileParams(tile: Tile): Params {
  const e = tile.mercator;
  const sr = { wkid: 102100, latestWkid: 3857 };
  return {
    f: "pbf",
    geometry: JSON.stringify({ ...e, spatialReference: sr }),
    geometryType: "esriGeometryEnvelope",
    inSR: "102100",
    maxRecordCountFactor: "4",
    orderByFields: "OBJECTID ASC",
    outFields: "OBJECTID",
    outSR: "102100",
    quantizationParameters: JSON.stringify({
      extent: { ...e, spatialReference: sr },
      mode: "view",
      originPosition: "upperLeft",
      tolerance: (e.xmax - e.xmin) / 512,
    }),
    resultType: "tile",
    returnExceededLimitFeatures: "false",
    spatialRel: "esriSpatialRelIntersects",
    where: "1=1",
  };
}

const query = (params: Params) => `?${new URLSearchParams(params)}`;

/** Longest wait for a server to finish what the load generator abandoned. */
const SETTLE_TIMEOUT_MS = 300_000;

/**
 * Resolves once the server answers a cheap GET on a fresh connection: by then it has worked
 * through the requests abandoned by the load generator before it.
 */
async function settled(url: string): Promise<void> {
  const deadline = performance.now() + SETTLE_TIMEOUT_MS;
  for (;;) {
    try {
      await getBytes(url, SETTLE_TIMEOUT_MS);
      return;
    } catch (err) {
      if (performance.now() > deadline) throw new Error(`${url} did not answer after the load: ${err}`);
      await sleep(100);
    }
  }
}

/** A GET case rotating over `paths`, one per request, connections taking turns. */
function rotating(
  name: string,
  origin: string,
  paths: string[],
  verify: (body: string) => boolean,
  settlePath: string,
): LoadCase {
  let sent = 0;
  return {
    name,
    url: `${origin}${paths[0]}`,
    requests: [
      {
        method: "GET",
        setupRequest: (request) => ({ ...request, path: paths[sent++ % paths.length] as string }),
      },
    ],
    verify,
    settle: () => settled(`${origin}${settlePath}`),
  };
}

const isFeatureSet = (body: string) => body.includes('"features":[');
/** Protocol buffers: not a JSON error envelope, and something in it. */
const isPbf = (body: string) => body.length > 0 && !body.startsWith("{");

interface Target {
  /** Label in case names: `portico sqlite`, `koop`. */
  label: string;
  origin: string;
  layerPath: string;
  /** A cheap path that answers 200, to tell when the server is idle again. */
  idlePath: string;
  /** Extra parameters on every request (portico's token). */
  extra: Params;
}

interface QueryCases {
  envelopeJson: LoadCase;
  envelopePbf: LoadCase;
  where: LoadCase;
  count: LoadCase;
  tile: LoadCase;
}

function queryCases(target: Target, plan: QueryPlan, total: number): QueryCases {
  const paths = (list: Params[]) =>
    list.map((params) => `${target.layerPath}/query${query({ ...params, ...target.extra })}`);
  const countBody = `{"count":${total}}`;
  return {
    envelopeJson: rotating(
      `(a) envelope json [${target.label}]`,
      target.origin,
      paths(plan.envelopes.map((e) => envelopeParams(e, "json"))),
      isFeatureSet,
      target.idlePath,
    ),
    envelopePbf: rotating(
      `(a) envelope pbf [${target.label}]`,
      target.origin,
      paths(plan.envelopes.map((e) => envelopeParams(e, "pbf"))),
      isPbf,
      target.idlePath,
    ),
    where: rotating(
      `(b) where, paged [${target.label}]`,
      target.origin,
      paths(plan.wheres.map(whereParams)),
      isFeatureSet,
      target.idlePath,
    ),
    count: rotating(
      `(c) count all [${target.label}]`,
      target.origin,
      paths([COUNT_PARAMS]),
      (body) => body.replace(/\s/g, "").startsWith(countBody),
      target.idlePath,
    ),
    tile: rotating(
      `(d) tile pbf z${plan.zoom} [${target.label}]`,
      target.origin,
      paths(plan.tiles.map(tileParams)),
      isPbf,
      target.idlePath,
    ),
  };
}

// ------------------------------------------------------------------------------------- figures

export type QueryCaseName = keyof QueryCases;
export const QUERY_CASES: readonly QueryCaseName[] = [
  "envelopeJson",
  "envelopePbf",
  "where",
  "count",
  "tile",
];

export interface FeaturesFigures {
  engine: Engine;
  points: number;
  load: { ms: number; perSecond: number };
  queries: Partial<Record<QueryCaseName, LoadResult>>;
  /** The direct server's envelopes, before and after portico's cases. */
  direct: LoadResult[];
  /** Envelopes as JSON at one connection, portico and the direct server. */
  alone: { portico: LoadResult; direct: LoadResult };
  /** Mean answer bytes of the checked envelopes, and their features. */
  bytes: { json: number; pbf: number; features: number };
  /** Mean answer bytes of as many tiles. */
  tileBytes: { json: number; pbf: number };
  /** Envelopes whose portico or direct answer did not hold the features counted from the points. */
  wrongAnswers: string[];
  memory: { rss: number; peak: number } | undefined;
}

export interface KoopFigures {
  queries: Partial<Record<QueryCaseName, LoadResult>>;
  bytes: { json: number; pbf: number };
  tileBytes: { json: number; pbf: number };
  wrongAnswers: string[];
  memory: { rss: number; peak: number } | undefined;
}

export interface FeaturesDeps {
  start(store: Store, nodeArgs: string[]): Promise<ServerProcess>;
  measure(c: LoadCase, settings: LoadSettings): Promise<LoadResult>;
  say(line: string): void;
}

// ------------------------------------------------------------------------------------- helpers

/** The bytes of a GET, as sent (no Accept-Encoding, so nothing is compressed). */
function getBytes(url: string, timeoutMs = 120_000): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        res.statusCode === 200
          ? resolve(Buffer.concat(chunks))
          : reject(new Error(`GET ${url.slice(0, 120)}: HTTP ${res.statusCode}`)),
      );
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url.slice(0, 120)}: no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
  });
}

async function postForm(url: string, params: Params): Promise<any> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ f: "json", ...params }).toString(),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`POST ${url}: HTTP ${res.status}: ${text.slice(0, 200)}`);
  const answer = JSON.parse(text);
  if (answer.error) throw new Error(`POST ${url}: ${JSON.stringify(answer.error).slice(0, 300)}`);
  return answer;
}

const mean = (values: number[]) => values.reduce((s, v) => s + v, 0) / Math.max(1, values.length);

// --------------------------------------------------------------------------------- the portico side

/** Creates the service and its point layer as the administrator; answers the layer's table name. */
async function createLayer(origin: string, token: string): Promise<string> {
  const created = await postForm(
    `${origin}/sharing/rest/content/users/${encodeURIComponent(ADMIN.username)}/createService`,
    {
      createParameters: JSON.stringify({
        name: SERVICE,
        capabilities: "Query,Create,Update,Delete,Editing",
        maxRecordCount: FEATURES.maxRecordCount,
      }),
      outputType: "featureService",
      token,
    },
  );
  const itemId = created.serviceItemId ?? created.itemId;
  if (typeof itemId !== "string") throw new Error(`createService: ${JSON.stringify(created)}`);
  await postForm(`${origin}/rest/admin/services/${SERVICE}/FeatureServer/addToDefinition`, {
    addToDefinition: JSON.stringify({
      layers: [
        {
          name: "Points",
          geometryType: "esriGeometryPoint",
          spatialReference: { wkid: 4326 },
          fields: FIELDS,
        },
      ],
    }),
    token,
  });
  return `fl_${itemId}_0`;
}

/** Loads every point through applyEdits; records the object id each got. */
async function loadPoints(origin: string, token: string, points: Points, say: (line: string) => void) {
  const url = `${origin}${LAYER_PATH}/applyEdits`;
  const batches = Math.ceil(points.count / FEATURES.batch);
  let next = 0;
  let loaded = 0;
  let reported = 0;
  const started = performance.now();
  const loader = async () => {
    while (next < batches) {
      const b = next++;
      const first = b * FEATURES.batch;
      const last = Math.min(points.count, first + FEATURES.batch);
      const adds = [];
      for (let i = first; i < last; i++) adds.push(points.feature(i));
      const answer = await postForm(url, {
        adds: JSON.stringify(adds),
        rollbackOnFailure: "true",
        token,
      });
      const results = answer.addResults as { objectId: number; success: boolean; error?: unknown }[];
      if (!Array.isArray(results) || results.length !== last - first || results.some((r) => !r.success)) {
        const failure = Array.isArray(results) ? results.find((r) => !r.success) : answer;
        throw new Error(`applyEdits batch ${b} failed: ${JSON.stringify(failure).slice(0, 300)}`);
      }
      results.forEach((r, k) => {
        points.objectIds[first + k] = r.objectId;
      });
      loaded += results.length;
      if (loaded - reported >= 250_000) {
        reported = loaded;
        const s = (performance.now() - started) / 1000;
        say(`    ${rate(loaded)} features loaded in ${s.toFixed(1)} s`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FEATURES.loadersInFlight, batches) }, loader));
  const elapsed = performance.now() - started;
  return { ms: elapsed, perSecond: (points.count * 1000) / elapsed };
}

/** What autovacuum does shortly after a bulk load, so the planner knows the table (see content.ts). */
async function analyze(store: Store, tableName: string) {
  const client = new pg.Client({ connectionString: store.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query(`VACUUM ANALYZE "${tableName}"`);
  } finally {
    await client.end();
  }
}

async function startDirect(engine: Engine, store: Store, tableName: string): Promise<ServerProcess> {
  const port = await freePort();
  const source: Record<string, string> =
    engine.name === "sqlite"
      ? { BENCH_SQLITE_FILE: path.join(store.env.PORTICO_DATA_DIR as string, "portico.sqlite") }
      : { BENCH_DATABASE_URL: store.env.DATABASE_URL as string };
  return startServer({
    name: `direct (${engine.name})`,
    args: [DIRECT_SERVER],
    env: cleanEnv({ BENCH_PORT: String(port), BENCH_TABLE: tableName, ...source }),
    port,
    readyPath: "/",
  });
}

const boxParam = (e: Box) => `/query?bbox=${e.xmin},${e.ymin},${e.xmax},${e.ymax}`;

function directCase(engine: Engine, direct: ServerProcess, plan: QueryPlan): LoadCase {
  return rotating(
    `(a) envelope json [direct ${engine.name}]`,
    direct.url,
    plan.envelopes.map(boxParam),
    (body) => body.startsWith('{"features":['),
    "/",
  );
}

/** Checks the first envelopes' answers against the points; answers mean bytes and any mismatch. */
async function checkEnvelopes(
  label: string,
  origin: string,
  layerPath: string,
  extra: Params,
  plan: QueryPlan,
): Promise<{ json: number; pbf: number; features: number; wrong: string[] }> {
  const json: number[] = [];
  const pbf: number[] = [];
  const features: number[] = [];
  const wrong: string[] = [];
  for (const [i, e] of plan.envelopes.slice(0, FEATURES.checkedEnvelopes).entries()) {
    const base = `${origin}${layerPath}/query`;
    const text = await getBytes(`${base}${query({ ...envelopeParams(e, "json"), ...extra })}`);
    const answer = JSON.parse(text.toString("utf8"));
    const n = Array.isArray(answer.features) ? answer.features.length : -1;
    if (n !== plan.expected[i])
      wrong.push(`${label} envelope ${i}: ${n} features, expected ${plan.expected[i]}`);
    json.push(text.length);
    features.push(n);
    pbf.push((await getBytes(`${base}${query({ ...envelopeParams(e, "pbf"), ...extra })}`)).length);
  }
  return { json: mean(json), pbf: mean(pbf), features: mean(features), wrong };
}

/** Mean answer bytes of the first tiles as JSON and as PBF (both quantized, as the SDK asks). */
async function weighTiles(origin: string, layerPath: string, extra: Params, plan: QueryPlan) {
  const json: number[] = [];
  const pbf: number[] = [];
  for (const tile of plan.tiles.slice(0, FEATURES.checkedEnvelopes)) {
    const base = `${origin}${layerPath}/query`;
    json.push((await getBytes(`${base}${query({ ...tileParams(tile), f: "json", ...extra })}`)).length);
    pbf.push((await getBytes(`${base}${query({ ...tileParams(tile), ...extra })}`)).length);
  }
  return { json: mean(json), pbf: mean(pbf) };
}

export async function measureFeatures(
  engine: Engine,
  points: Points,
  plan: QueryPlan,
  settings: LoadSettings,
  cpuProfileDir: string | undefined,
  deps: FeaturesDeps,
): Promise<FeaturesFigures> {
  const { say } = deps;
  const store = await createStore(engine);
  let server: ServerProcess | undefined;
  let direct: ServerProcess | undefined;
  try {
    const nodeArgs = cpuProfileDir ? ["--cpu-prof", `--cpu-prof-dir=${cpuProfileDir}`] : [];
    server = await deps.start(store, nodeArgs);
    const token = await new PortalApi(server.url).signIn(ADMIN.username, ADMIN.password);
    const tableName = await createLayer(server.url, token);
    say(
      `  ${engine.name}: loading ${rate(points.count)} points through applyEdits, ${FEATURES.batch} per request`,
    );
    const load = await loadPoints(server.url, token, points, say);
    say(`  ${engine.name}: loaded in ${(load.ms / 1000).toFixed(1)} s: ${rate(load.perSecond)} features/s`);
    if (engine.name === "postgres") await analyze(store, tableName);

    direct = await startDirect(engine, store, tableName);
    const checked = await checkEnvelopes(`portico ${engine.name}`, server.url, LAYER_PATH, { token }, plan);
    const wrongAnswers = [...checked.wrong];
    for (const [i, e] of plan.envelopes.slice(0, FEATURES.checkedEnvelopes).entries()) {
      const answer = JSON.parse((await getBytes(`${direct.url}${boxParam(e)}`)).toString("utf8"));
      if (answer.features.length !== plan.expected[i]) {
        wrongAnswers.push(
          `direct envelope ${i}: ${answer.features.length} features, expected ${plan.expected[i]}`,
        );
      }
    }
    for (const w of wrongAnswers) say(`    WRONG ANSWER: ${w}`);
    const tileBytes = await weighTiles(server.url, LAYER_PATH, { token }, plan);
    say(
      `  ${engine.name}: checked envelopes hold ${checked.features.toFixed(0)} features on average; ` +
        `answer ${rate(checked.json)} B as JSON, ${rate(checked.pbf)} B as PBF`,
    );

    const directFigures = [await deps.measure(directCase(engine, direct, plan), settings)];
    const cases = queryCases(
      {
        label: `portico ${engine.name}`,
        origin: server.url,
        layerPath: LAYER_PATH,
        idlePath: "/sharing/rest/info?f=json",
        extra: { token },
      },
      plan,
      points.count,
    );
    const queries: FeaturesFigures["queries"] = {};
    for (const name of QUERY_CASES) queries[name] = await deps.measure(cases[name], settings);
    directFigures.push(await deps.measure(directCase(engine, direct, plan), settings));
    // One connection: the time one envelope takes when nothing queues before it.
    const one = { ...settings, connections: 1 };
    const alone = {
      portico: await deps.measure(
        { ...cases.envelopeJson, name: `${cases.envelopeJson.name}, 1 connection` },
        one,
      ),
      direct: await deps.measure(
        {
          ...directCase(engine, direct, plan),
          name: `(a) envelope json [direct ${engine.name}], 1 connection`,
        },
        one,
      ),
    };
    const memory = server.memory();
    printOutput(server, say);
    return {
      engine,
      points: points.count,
      load,
      queries,
      direct: directFigures,
      alone,
      bytes: { json: checked.json, pbf: checked.pbf, features: checked.features },
      tileBytes,
      wrongAnswers,
      memory,
    };
  } finally {
    await direct?.stop();
    await server?.stop();
    await store.destroy();
  }
}

function printOutput(server: ServerProcess, say: (line: string) => void) {
  const lines = server.output();
  if (lines.length === 0) return;
  say(`  ${server.name} logged (last lines):`);
  for (const line of lines.slice(-5)) say(`    ${line.slice(0, 300)}`);
}

// ------------------------------------------------------------------------------------------ Koop

/** Installs bench/koop's packages when they are missing (`npm install --prefix bench/koop`). */
function ensureKoop(say: (line: string) => void) {
  if (fs.existsSync(path.join(KOOP_DIR, "node_modules", "@koopjs", "koop-core"))) return;
  say(`  koop: installing it into ${path.join(KOOP_DIR, "node_modules")} (npm install --prefix bench/koop)`);
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const result = spawnSync(npm, ["install", "--prefix", KOOP_DIR, "--no-audit", "--no-fund"], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (result.status !== 0) throw new Error(`npm install --prefix ${KOOP_DIR} failed (${result.status})`);
}

/**
 * Koop serving the same points (with the object ids the last portico load gave them), measured on
 * every query case with the same settings.
 */
export async function measureKoop(
  points: Points,
  plan: QueryPlan,
  settings: LoadSettings,
  deps: Pick<FeaturesDeps, "measure" | "say">,
): Promise<KoopFigures> {
  const { say } = deps;
  ensureKoop(say);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-bench-koop-"));
  const remove = () => fs.rmSync(dir, { recursive: true, force: true });
  const unregister = onCleanup(remove);
  let koop: ServerProcess | undefined;
  try {
    const file = path.join(dir, "points.json");
    const stream = fs.createWriteStream(file);
    stream.write("[");
    for (let i = 0; i < points.count; i++) {
      const row = [points.objectIds[i] || i + 1, points.name(i), points.pop[i], points.value[i]];
      const line = `${i > 0 ? "," : ""}${JSON.stringify([...row, points.date[i], points.x[i], points.y[i]])}`;
      if (!stream.write(line)) await new Promise<void>((resolve) => stream.once("drain", () => resolve()));
    }
    await new Promise<void>((resolve, reject) =>
      stream.end("]", (err?: Error | null) => (err ? reject(err) : resolve())),
    );
    const port = await freePort();
    say(`  koop: starting with ${rate(points.count)} points in memory`);
    koop = await startServer({
      name: "koop",
      // Its heap holds a million GeoJSON features; Node's default limit would be close.
      args: ["--max-old-space-size=8192", path.join(KOOP_DIR, "server.cjs")],
      env: cleanEnv({
        BENCH_PORT: String(port),
        BENCH_POINTS_FILE: file,
        SUPPRESS_NO_CONFIG_WARNING: "1",
      }),
      port,
      readyPath: "/status",
      readyTimeoutMs: 180_000,
    });
    remove();
    const checked = await checkEnvelopes("koop", koop.url, KOOP_LAYER_PATH, {}, plan);
    for (const w of checked.wrong) say(`    WRONG ANSWER: ${w}`);
    const tileBytes = await weighTiles(koop.url, KOOP_LAYER_PATH, {}, plan);
    say(`  koop: envelope answers ${rate(checked.json)} B as JSON, ${rate(checked.pbf)} B as PBF`);
    const cases = queryCases(
      { label: "koop", origin: koop.url, layerPath: KOOP_LAYER_PATH, idlePath: "/status", extra: {} },
      plan,
      points.count,
    );
    const queries: KoopFigures["queries"] = {};
    for (const name of QUERY_CASES) queries[name] = await deps.measure(cases[name], settings);
    const memory = koop.memory();
    printOutput(koop, say);
    return {
      queries,
      bytes: { json: checked.json, pbf: checked.pbf },
      tileBytes,
      wrongAnswers: checked.wrong,
      memory,
    };
  } finally {
    await koop?.stop();
    unregister();
    remove();
  }
}

// ------------------------------------------------------------------------------------- summary

const failedAnswers = (r: LoadResult) => r.errors + r.non2xx + r.rejected > 0;

/** The features part of the summary: one row per query case and server, then the goals. */
export function featuresSummary(figures: FeaturesFigures[], koop: KoopFigures | undefined): string {
  const out: string[] = [];
  const rows: string[][] = [];
  const row = (r: LoadResult, engine: string, vsDirect: string, vsKoop: string) => [
    r.name,
    engine,
    rate(r.rps),
    ms(r.p50),
    ms(r.p99),
    String(r.errors),
    String(r.non2xx),
    String(r.rejected),
    vsDirect,
    vsKoop,
  ];
  for (const f of figures) {
    const directRps = mean(f.direct.map((d) => d.rps));
    f.direct.forEach((d, i) => {
      rows.push(row({ ...d, name: `${d.name} (${i === 0 ? "before" : "after"})` }, f.engine.name, "", ""));
    });
    for (const name of QUERY_CASES) {
      const r = f.queries[name];
      if (!r) continue;
      const k = koop?.queries[name];
      rows.push(
        row(
          r,
          f.engine.name,
          name === "envelopeJson" || name === "envelopePbf" ? ratio(r.rps / directRps) : "",
          k ? (k.rps > 0 ? ratio(r.rps / k.rps) : "koop: 0 req/s") : "",
        ),
      );
    }
  }
  for (const f of figures) {
    const { portico, direct } = f.alone;
    rows.push(
      row(direct, f.engine.name, "", ""),
      row(portico, f.engine.name, ratio(portico.rps / direct.rps), ""),
    );
  }
  for (const name of QUERY_CASES) {
    const k = koop?.queries[name];
    if (k) rows.push(row(k, "-", "", ""));
  }
  out.push(
    table(
      ["case", "engine", "req/s", "p50", "p99", "errors", "non-2xx", "rejected", "/ direct", "/ koop"],
      rows,
      2,
    ),
    "/ direct = portico req/s / mean req/s of the direct server (same rows, same engine, no portico code); " +
      "/ koop = portico req/s / Koop's",
    "",
  );

  const goals: string[][] = [];
  for (const f of figures) {
    const e = f.engine.name;
    const judged = e === "sqlite";
    goals.push([
      `load ${rate(f.points)} points (applyEdits, ${FEATURES.batch}/request)`,
      e,
      `${rate(f.load.perSecond)} features/s (${(f.load.ms / 1000).toFixed(1)} s)`,
      judged ? `>= ${rate(FEATURE_GOALS.loadPerSecond)}/s` : "",
      judged ? verdict(f.load.perSecond >= FEATURE_GOALS.loadPerSecond) : "",
    ]);
    const directRps = mean(f.direct.map((d) => d.rps));
    for (const name of ["envelopeJson", "envelopePbf"] as const) {
      const r = f.queries[name];
      if (!r) continue;
      const bad = failedAnswers(r) ? "; FAILED ANSWERS" : "";
      goals.push([
        `${r.name}: p99`,
        e,
        `${ms(r.p99)}${bad}`,
        `< ${ms(FEATURE_GOALS.envelopeP99Ms)}`,
        verdict(r.p99 < FEATURE_GOALS.envelopeP99Ms && !bad),
      ]);
      const k = koop?.queries[name];
      if (k) {
        const q = k.rps > 0 ? r.rps / k.rps : Number.POSITIVE_INFINITY;
        goals.push([
          `${r.name}: / koop`,
          e,
          `${ratio(q)} (${rate(r.rps)} vs ${rate(k.rps)} req/s)`,
          `>= ${ratio(FEATURE_GOALS.overKoop)}`,
          verdict(q >= FEATURE_GOALS.overKoop && !bad),
        ]);
      }
      if (name === "envelopeJson") {
        const q = r.rps / directRps;
        goals.push([
          `${r.name}: / direct`,
          e,
          `${ratio(q)} (${rate(r.rps)} vs ${rate(directRps)} req/s)`,
          `>= ${ratio(FEATURE_GOALS.overDirect)}`,
          verdict(q >= FEATURE_GOALS.overDirect && !bad),
        ]);
      }
    }
    const share = f.bytes.pbf / f.bytes.json;
    goals.push([
      "(a) envelope answer bytes, pbf / json",
      e,
      `${share.toFixed(2)} (${rate(f.bytes.pbf)} vs ${rate(f.bytes.json)} B, ${f.bytes.features.toFixed(0)} features)`,
      "<= 0.33",
      verdict(share <= FEATURE_GOALS.pbfShare),
    ]);
    goals.push([
      "(d) tile answer bytes, pbf / json",
      e,
      `${(f.tileBytes.pbf / f.tileBytes.json).toFixed(2)} (${rate(f.tileBytes.pbf)} vs ${rate(f.tileBytes.json)} B)`,
      "",
      "",
    ]);
    if (f.memory)
      goals.push([
        "portico RSS after the features case",
        e,
        `${mb(f.memory.rss)} (peak ${mb(f.memory.peak)})`,
        "",
        "",
      ]);
    if (f.wrongAnswers.length > 0)
      goals.push(["answers checked against the points", e, `${f.wrongAnswers.length} WRONG`, "0", "MISS"]);
  }
  if (koop) {
    goals.push([
      "koop envelope bytes, pbf / json",
      "-",
      `${(koop.bytes.pbf / koop.bytes.json).toFixed(2)} (${rate(koop.bytes.pbf)} vs ${rate(koop.bytes.json)} B)`,
      "",
      "",
    ]);
    goals.push([
      "koop tile bytes, pbf / json",
      "-",
      `${(koop.tileBytes.pbf / koop.tileBytes.json).toFixed(2)} (${rate(koop.tileBytes.pbf)} vs ${rate(koop.tileBytes.json)} B)`,
      "",
      "",
    ]);
    if (koop.memory)
      goals.push(["koop RSS", "-", `${mb(koop.memory.rss)} (peak ${mb(koop.memory.peak)})`, "", ""]);
    if (koop.wrongAnswers.length > 0)
      goals.push([
        "koop answers checked against the points",
        "-",
        `${koop.wrongAnswers.length} WRONG`,
        "",
        "",
      ]);
  }
  out.push(table(["measure", "engine", "value", "goal", "verdict"], goals, 2));
  if (figures.length > 0) {
    out.push(
      `With every connection busy, latency is about connections / req/s (Little's law): a p99 under ${FEATURE_GOALS.envelopeP99Ms} ms ` +
        `at 32 connections needs about ${rate(32 / (FEATURE_GOALS.envelopeP99Ms / 1000))} req/s; the 1-connection rows show one request's own time.`,
    );
  }
  return out.join("\n");
}
