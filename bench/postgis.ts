/**
 * The PostGIS case of `npm run bench` (`--cases postgis`, PostgreSQL only): what PostGIS buys the
 * hosted feature layers. Two portals, each with its own database on the same PostgreSQL server,
 * one with PORTICO_POSTGIS=off (a GiST index on the bounds, every exact relation in the process)
 * and one with on (a PostGIS geometry column and its GiST index, Intersects decided in the
 * database but near the query's boundary), load the same layers through `applyEdits`:
 * - the features case's points (`--points`, generated from the same seed);
 * - 20,000 octagons in a grid over the same extent.
 * Then, at the run's connections, each case rotating over 64 distinct requests:
 * - (p1) a 32-sided polygon holding about 1,000 points, `f=json`;
 * - (p2) a 32-sided polygon holding about 10,000 points, `returnCountOnly`;
 * - (p3) an envelope over about 200 octagons, `f=json` (a map's view of a polygon layer);
 * - (p4) an envelope over about 1,000 points, `f=json`, which the bounds decide with or without
 *   PostGIS (the same work but for the index).
 * Before the load, the answers of both portals to the first requests of each case are compared,
 * and the polygons' counts checked against the points.
 */
import { performance } from "node:perf_hooks";
import pg from "pg";
import { FEATURES, type Points } from "./features.js";
import type { LoadCase, LoadResult, LoadSettings } from "./load.js";
import { ADMIN, PortalApi } from "./portal-api.js";
import type { ServerProcess } from "./processes.js";
import { rate, ratio, table } from "./report.js";
import { createStore, type Engine, type Store } from "./stores.js";

export const POSTGIS_BENCH = {
  zonesAcross: 200,
  zonesDown: 100,
  /** Sides of the query polygons (circles). */
  sides: 32,
  smallCircle: 1_000,
  bigCircle: 10_000,
  zonesPerEnvelope: 200,
  pointsPerEnvelope: 1_000,
  distinctRequests: 64,
  /** Requests of each case whose answers are compared between the portals. */
  compared: 8,
  /** Octagons per addFeatures request. */
  zoneBatch: 1_000,
} as const;

const SERVICE = "bench_postgis";
/** With PostGIS first: the second load runs beside the first's autovacuum, which costs it. */
const MODES = ["on", "off"] as const;
type Mode = (typeof MODES)[number];
type Params = Record<string, string>;
type Ring = [number, number][];

export interface PostgisFigures {
  mode: Mode;
  loadPerSecond: number;
  queries: Record<string, LoadResult>;
}

export interface PostgisDeps {
  start(store: Store): Promise<ServerProcess>;
  measure(c: LoadCase, settings: LoadSettings): Promise<LoadResult>;
  say(line: string): void;
}

/** A deterministic generator (the features case's), so both portals get the same requests. */
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

/** A regular polygon, clockwise (an Esri outer ring), closed. */
function circle(cx: number, cy: number, r: number, sides: number): Ring {
  const ring: Ring = [];
  for (let i = 0; i <= sides; i++) {
    const a = (-2 * Math.PI * (i % sides)) / sides;
    ring.push([cx + r * Math.cos(a), cy + r * Math.sin(a)]);
  }
  return ring;
}

/** Points inside a ring by the crossing rule (random points fall on no edge). */
function countInside(points: Points, ring: Ring): number {
  let n = 0;
  for (let i = 0; i < points.count; i++) {
    const x = points.x[i] as number;
    const y = points.y[i] as number;
    let inside = false;
    for (let k = 0; k + 1 < ring.length; k++) {
      const [ax, ay] = ring[k] as [number, number];
      const [bx, by] = ring[k + 1] as [number, number];
      if (ay > y !== by > y && x < ax + ((y - ay) * (bx - ax)) / (by - ay)) inside = !inside;
    }
    if (inside) n++;
  }
  return n;
}

interface Plan {
  small: Ring[];
  big: Ring[];
  zoneEnvelopes: string[];
  pointEnvelopes: string[];
  /** Points in the first `compared` polygons of each size, counted here. */
  expectedSmall: number[];
  expectedBig: number[];
}

function plan(points: Points): Plan {
  const random = mulberry32(4_326);
  const { xmin, ymin, xmax, ymax } = FEATURES.extent;
  const width = xmax - xmin;
  const height = ymax - ymin;
  const density = points.count / (width * height);
  const radius = (n: number) => Math.sqrt(n / density / Math.PI);
  const circles = (n: number) =>
    Array.from({ length: POSTGIS_BENCH.distinctRequests }, () => {
      const r = radius(n);
      return circle(
        xmin + r + random() * (width - 2 * r),
        ymin + r + random() * (height - 2 * r),
        r,
        POSTGIS_BENCH.sides,
      );
    });
  const envelopes = (side: number) =>
    Array.from({ length: POSTGIS_BENCH.distinctRequests }, () => {
      const x = xmin + random() * (width - side);
      const y = ymin + random() * (height - side);
      return `${x},${y},${x + side},${y + side}`;
    });
  const zoneDensity = (POSTGIS_BENCH.zonesAcross * POSTGIS_BENCH.zonesDown) / (width * height);
  const small = circles(POSTGIS_BENCH.smallCircle);
  const big = circles(POSTGIS_BENCH.bigCircle);
  return {
    small,
    big,
    zoneEnvelopes: envelopes(Math.sqrt(POSTGIS_BENCH.zonesPerEnvelope / zoneDensity)),
    pointEnvelopes: envelopes(Math.sqrt(POSTGIS_BENCH.pointsPerEnvelope / density)),
    expectedSmall: small.slice(0, POSTGIS_BENCH.compared).map((ring) => countInside(points, ring)),
    expectedBig: big.slice(0, POSTGIS_BENCH.compared).map((ring) => countInside(points, ring)),
  };
}

/** The octagons: a grid over the extent, each within its cell. */
function zones(): { geometry: { rings: Ring[] }; attributes: { name: string } }[] {
  const { xmin, ymin, xmax, ymax } = FEATURES.extent;
  const w = (xmax - xmin) / POSTGIS_BENCH.zonesAcross;
  const h = (ymax - ymin) / POSTGIS_BENCH.zonesDown;
  const out = [];
  for (let j = 0; j < POSTGIS_BENCH.zonesDown; j++) {
    for (let i = 0; i < POSTGIS_BENCH.zonesAcross; i++) {
      const ring = circle(xmin + (i + 0.5) * w, ymin + (j + 0.5) * h, Math.min(w, h) * 0.45, 8);
      out.push({ geometry: { rings: [ring] }, attributes: { name: `zone ${i},${j}` } });
    }
  }
  return out;
}

async function postForm(url: string, params: Params): Promise<any> {
  const res = await fetch(url, { method: "POST", body: new URLSearchParams({ f: "json", ...params }) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`POST ${url}: HTTP ${res.status}: ${text.slice(0, 200)}`);
  const answer = JSON.parse(text);
  if (answer.error) throw new Error(`POST ${url}: ${JSON.stringify(answer.error).slice(0, 300)}`);
  return answer;
}

async function getJson(url: string): Promise<any> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${url}: HTTP ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text);
}

/** The service with its two layers; answers the layers' table names. */
async function createLayers(origin: string, token: string): Promise<string[]> {
  const created = await postForm(
    `${origin}/sharing/rest/content/users/${encodeURIComponent(ADMIN.username)}/createService`,
    {
      createParameters: JSON.stringify({ name: SERVICE, capabilities: "Query,Create,Editing" }),
      outputType: "featureService",
      token,
    },
  );
  const itemId = created.serviceItemId ?? created.itemId;
  const layer = (name: string, geometryType: string, fields: unknown[]) => ({
    name,
    geometryType,
    spatialReference: { wkid: 4326 },
    fields,
  });
  await postForm(`${origin}/rest/admin/services/${SERVICE}/FeatureServer/addToDefinition`, {
    addToDefinition: JSON.stringify({
      layers: [
        layer("Points", "esriGeometryPoint", [
          { name: "name", type: "esriFieldTypeString", length: 64 },
          { name: "pop", type: "esriFieldTypeInteger" },
          { name: "value", type: "esriFieldTypeDouble" },
          { name: "date", type: "esriFieldTypeDate" },
        ]),
        layer("Zones", "esriGeometryPolygon", [{ name: "name", type: "esriFieldTypeString", length: 32 }]),
      ],
    }),
    token,
  });
  return [`fl_${itemId}_0`, `fl_${itemId}_1`];
}

/** Sends features through applyEdits, two requests in flight; answers features per second. */
async function load(
  url: string,
  token: string,
  count: number,
  feature: (i: number) => unknown,
  batch: number,
) {
  let next = 0;
  const started = performance.now();
  const loader = async () => {
    while (next < count) {
      const first = next;
      next = Math.min(count, next + batch);
      const adds = [];
      for (let i = first; i < next; i++) adds.push(feature(i));
      const answer = await postForm(`${url}/applyEdits`, { adds: JSON.stringify(adds), token });
      if (!answer.addResults?.every((r: { success: boolean }) => r.success)) {
        throw new Error(`applyEdits failed: ${JSON.stringify(answer).slice(0, 300)}`);
      }
    }
  };
  await Promise.all([loader(), loader()]);
  return (count * 1000) / (performance.now() - started);
}

async function analyze(store: Store, tables: string[]) {
  const client = new pg.Client({ connectionString: store.env.DATABASE_URL });
  await client.connect();
  try {
    for (const t of tables) await client.query(`VACUUM ANALYZE "${t}"`);
  } finally {
    await client.end();
  }
}

const polygonParams = (ring: Ring): Params => ({
  geometry: JSON.stringify({ rings: [ring] }),
  geometryType: "esriGeometryPolygon",
  inSR: "4326",
});

/** The requests of each case, as paths with their query strings. */
function paths(p: Plan, token: string): Record<string, string[]> {
  const at = (layer: number, params: Params) =>
    `/rest/services/${SERVICE}/FeatureServer/${layer}/query?${new URLSearchParams({ f: "json", token, ...params })}`;
  const fields = { outFields: "name,pop", returnGeometry: "true" };
  const envelope = (e: string): Params => ({
    geometry: e,
    geometryType: "esriGeometryEnvelope",
    inSR: "4326",
  });
  return {
    "(p1) polygon, ~1,000 points, json": p.small.map((r) => at(0, { ...polygonParams(r), ...fields })),
    "(p2) polygon, ~10,000 points, count": p.big.map((r) =>
      at(0, { ...polygonParams(r), returnCountOnly: "true" }),
    ),
    "(p3) envelope, ~200 octagons, json": p.zoneEnvelopes.map((e) =>
      at(1, { ...envelope(e), outFields: "name" }),
    ),
    "(p4) envelope, ~1,000 points, json": p.pointEnvelopes.map((e) => at(0, { ...envelope(e), ...fields })),
  };
}

/**
 * An answer without its object ids, features in a fixed order: the two portals load in batches two
 * requests at a time, so the same point may get another object id in each.
 */
function normalized(answer: { features?: { attributes: Record<string, unknown> }[] }): string {
  const features = (answer.features ?? [])
    .map((f) => JSON.stringify({ ...f, attributes: { ...f.attributes, OBJECTID: undefined } }))
    .sort();
  return JSON.stringify({ ...answer, features });
}

/**
 * A case rotating over `list`. After it, the requests the load generator abandoned still wait for
 * the server's database connections (both portals share the PostgreSQL server): the case is over
 * when a query that needs one answers, so they do not weigh on the next case.
 */
function rotating(name: string, origin: string, list: string[], idle: string): LoadCase {
  let sent = 0;
  return {
    name,
    url: `${origin}${list[0]}`,
    requests: [
      { method: "GET", setupRequest: (r) => ({ ...r, path: list[sent++ % list.length] as string }) },
    ],
    verify: (body) => body.includes('"features":[') || body.includes('"count":'),
    settle: async () => {
      await getJson(`${origin}${idle}`);
    },
  };
}

export async function measurePostgis(
  engine: Engine,
  points: Points,
  settings: LoadSettings,
  deps: PostgisDeps,
): Promise<PostgisFigures[]> {
  const { say } = deps;
  if (engine.name !== "postgres") throw new Error("the PostGIS case needs PostgreSQL");
  const p = plan(points);
  const octagons = zones();
  const servers: { mode: Mode; server: ServerProcess; token: string; store: Store; load: number }[] = [];
  const figures: PostgisFigures[] = [];
  try {
    for (const mode of MODES) {
      const base = await createStore(engine);
      const store = { ...base, env: { ...base.env, PORTICO_POSTGIS: mode } };
      const server = await deps.start(store);
      const token = await new PortalApi(server.url).signIn(ADMIN.username, ADMIN.password);
      servers.push({ mode, server, token, store, load: 0 });
      const tables = await createLayers(server.url, token);
      const layerUrl = `${server.url}/rest/services/${SERVICE}/FeatureServer`;
      const perSecond = await load(
        `${layerUrl}/0`,
        token,
        points.count,
        (i) => points.feature(i),
        FEATURES.batch,
      );
      await load(`${layerUrl}/1`, token, octagons.length, (i) => octagons[i], POSTGIS_BENCH.zoneBatch);
      (servers[servers.length - 1] as { load: number }).load = perSecond;
      await analyze(store, tables);
      say(`  PostGIS ${mode}: ${rate(points.count)} points loaded at ${rate(perSecond)} features/s`);
    }

    // The same answers from both, and the polygons' counts as the points say.
    const off = servers.find((s) => s.mode === "off");
    const on = servers.find((s) => s.mode === "on");
    if (!off || !on) throw new Error("a portal did not start");
    const offPaths = paths(p, off.token);
    const onPaths = paths(p, on.token);
    for (const name of Object.keys(offPaths)) {
      for (let i = 0; i < POSTGIS_BENCH.compared; i++) {
        const a = await getJson(`${off.server.url}${offPaths[name]?.[i]}`);
        const b = await getJson(`${on.server.url}${onPaths[name]?.[i]}`);
        if (normalized(a) !== normalized(b)) throw new Error(`${name} ${i}: the answers differ`);
        const expected = name.startsWith("(p1)")
          ? p.expectedSmall[i]
          : name.startsWith("(p2)")
            ? p.expectedBig[i]
            : undefined;
        const got = a.count ?? a.features?.length;
        if (expected !== undefined && got !== expected) {
          throw new Error(`${name} ${i}: ${got} features, expected ${expected} from the points`);
        }
      }
    }
    say(`  both portals answer the first ${POSTGIS_BENCH.compared} requests of every case alike`);

    for (const s of servers) {
      const queries: Record<string, LoadResult> = {};
      const idle = `/rest/services/${SERVICE}/FeatureServer/0/query?${new URLSearchParams({ f: "json", token: s.token, objectIds: "1", returnCountOnly: "true" })}`;
      for (const [name, list] of Object.entries(paths(p, s.token))) {
        queries[name] = await deps.measure(
          rotating(`${name} [PostGIS ${s.mode}]`, s.server.url, list, idle),
          settings,
        );
      }
      figures.push({ mode: s.mode, loadPerSecond: s.load, queries });
    }
    return figures;
  } finally {
    for (const s of servers) {
      await s.server.stop();
      await s.store.destroy();
    }
  }
}

/** One row per case: req/s and p50 without and with PostGIS, and their ratio. */
export function postgisSummary(figures: PostgisFigures[]): string {
  const off = figures.find((f) => f.mode === "off");
  const on = figures.find((f) => f.mode === "on");
  if (!off || !on) return "";
  const rows = Object.keys(off.queries).map((name) => {
    const a = off.queries[name] as LoadResult;
    const b = on.queries[name] as LoadResult;
    return [
      name,
      rate(a.rps),
      `${Math.round(a.p50)} ms`,
      rate(b.rps),
      `${Math.round(b.p50)} ms`,
      ratio(b.rps / a.rps),
    ];
  });
  rows.unshift([
    "loading points, features/s",
    rate(off.loadPerSecond),
    "",
    rate(on.loadPerSecond),
    "",
    ratio(on.loadPerSecond / off.loadPerSecond),
  ]);
  return table(["PostGIS (PostgreSQL)", "off req/s", "p50", "on req/s", "p50", "on / off"], rows);
}
