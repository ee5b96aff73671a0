import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newStore, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * PostgreSQL with PostGIS and without it answer every spatial query alike. The rest of the suite
 * runs on PostgreSQL with PostGIS (`.ci/run` installs it, and `auto` uses it); this file keeps the
 * path without it tested: two portals, one with PORTICO_POSTGIS=on and one with off, hold the same
 * features, and every query is asked of both. The features are chosen for the cases where two
 * geometry engines could part: vertices and edges exactly on a query's boundary, points on
 * diagonal edges, and invalid polygons (a bow tie, twice the same hole, overlapping outer rings,
 * on which GEOS can throw). A few answers are also worked out by hand, so that both cannot agree on
 * a wrong one. Then a layer made without PostGIS gains its geometry column when PostGIS is turned
 * on, and loses it when turned off, answering the same throughout; and a database where PostGIS
 * cannot be created works without it on auto and stops the start on on. PostgreSQL only
 * (vitest.config.ts).
 */

type Ring = [number, number][];

/** Polygons by object id (1..): outer rings clockwise, holes counter-clockwise. */
const SHAPES: Ring[][] = [
  // 1: a square with a square hole.
  [
    [
      [0, 0],
      [0, 10],
      [10, 10],
      [10, 0],
      [0, 0],
    ],
    [
      [4, 4],
      [6, 4],
      [6, 6],
      [4, 6],
      [4, 4],
    ],
  ],
  // 2: a bow tie (its one ring crosses itself at (25, 5)).
  [
    [
      [20, 0],
      [30, 10],
      [30, 0],
      [20, 10],
      [20, 0],
    ],
  ],
  // 3: two outer rings that overlap (GEOS's relate throws on it).
  [
    [
      [40, 0],
      [40, 6],
      [46, 6],
      [46, 0],
      [40, 0],
    ],
    [
      [43, 3],
      [43, 9],
      [49, 9],
      [49, 3],
      [43, 3],
    ],
  ],
  // 4: the same hole twice.
  [
    [
      [60, 0],
      [60, 10],
      [70, 10],
      [70, 0],
      [60, 0],
    ],
    [
      [62, 2],
      [63, 2],
      [63, 3],
      [62, 2],
    ],
    [
      [62, 2],
      [63, 2],
      [63, 3],
      [62, 2],
    ],
  ],
  // 5: a counter-clockwise ring reaching out of the outer ring (not its hole, then).
  [
    [
      [80, 0],
      [80, 10],
      [90, 10],
      [90, 0],
      [80, 0],
    ],
    [
      [85, 5],
      [95, 5],
      [95, 6],
      [85, 6],
      [85, 5],
    ],
  ],
  // 6: a triangle whose long side runs along y = x - 100.
  [
    [
      [100, 0],
      [110, 10],
      [110, 0],
      [100, 0],
    ],
  ],
  // 7: a square touching shape 1 at its corner (10, 10).
  [
    [
      [10, 10],
      [10, 12],
      [12, 12],
      [12, 10],
      [10, 10],
    ],
  ],
  // 8: two squares apart.
  [
    [
      [120, 0],
      [120, 2],
      [122, 2],
      [122, 0],
      [120, 0],
    ],
    [
      [130, 0],
      [130, 2],
      [132, 2],
      [132, 0],
      [130, 0],
    ],
  ],
  // 9: a ring that touches itself at (145, 5).
  [
    [
      [140, 0],
      [140, 10],
      [145, 5],
      [150, 10],
      [150, 0],
      [145, 5],
      [140, 0],
    ],
  ],
  // 10: a hole touching its outer ring at (0, 20).
  [
    [
      [0, 20],
      [0, 30],
      [10, 30],
      [10, 20],
      [0, 20],
    ],
    [
      [0, 20],
      [5, 22],
      [5, 25],
      [0, 20],
    ],
  ],
  // 11: one counter-clockwise ring (an outer ring all the same).
  [
    [
      [20, 20],
      [30, 20],
      [30, 30],
      [20, 30],
      [20, 20],
    ],
  ],
];

/** Polylines by object id. */
const PATHS: Ring[][] = [
  [
    [
      [0, 0],
      [10, 10],
    ],
  ],
  [
    [
      [-5, 5],
      [0, 5],
    ],
  ],
  [
    [
      [15, -5],
      [15, 15],
    ],
  ],
  [
    [
      [20, 0],
      [30, 10],
      [30, 0],
      [20, 10],
    ],
  ],
  [
    [
      [40, 20],
      [45, 20],
    ],
    [
      [100, 20],
      [105, 25],
    ],
  ],
  [
    [
      [100, 0],
      [110, 10],
    ],
  ],
];

const SPOT_XS = [
  0, 1.5, 2.5, 4, 5, 6, 10, 12, 15, 20, 25, 30, 40, 43, 45, 46, 49, 62.5, 65, 85, 92, 105, 110, 145,
];
const SPOT_YS = [0, 0.5, 2.5, 4, 5, 5.5, 6, 10, 22, 25];
/** Points by object id: every x with every y, row by row. */
const SPOTS: [number, number][] = SPOT_YS.flatMap((y) => SPOT_XS.map((x): [number, number] => [x, y]));
/** Multipoints by object id: neighbouring spots in pairs. */
const CLUSTERS: [number, number][][] = SPOTS.filter((_, i) => i % 2 === 0).map((p, i) => [
  p,
  SPOTS[2 * i + 1] as [number, number],
]);

const WGS84 = { wkid: 4326 };
const polygon = (...rings: Ring[]) => JSON.stringify({ rings, spatialReference: WGS84 });

/** Query geometries: [geometry, geometryType, extra parameters]. */
const QUERIES: [string, string, Record<string, unknown>?][] = [
  ["0,0,10,10", "esriGeometryEnvelope"],
  ["4.5,4.5,5.5,5.5", "esriGeometryEnvelope"],
  ["10,0,20,10", "esriGeometryEnvelope"],
  [
    polygon([
      [0, 0],
      [0, 10],
      [10, 10],
      [0, 0],
    ]),
    "esriGeometryPolygon",
  ],
  [
    polygon(
      [
        [-10, -10],
        [-10, 40],
        [160, 40],
        [160, -10],
        [-10, -10],
      ],
      [
        [0, 0],
        [10, 0],
        [10, 10],
        [0, 10],
        [0, 0],
      ],
    ),
    "esriGeometryPolygon",
  ],
  [
    polygon([
      [18, -2],
      [50, 12],
      [50, -2],
      [18, 12],
      [18, -2],
    ]),
    "esriGeometryPolygon",
  ],
  ["5,5", "esriGeometryPoint"],
  ["45,5", "esriGeometryPoint"],
  ["105,5", "esriGeometryPoint"],
  [
    JSON.stringify({
      paths: [
        [
          [-5, 5],
          [160, 5],
        ],
      ],
      spatialReference: WGS84,
    }),
    "esriGeometryPolyline",
  ],
  [
    JSON.stringify({
      points: [
        [5, 5],
        [25, 5],
        [105, 5],
      ],
      spatialReference: WGS84,
    }),
    "esriGeometryMultipoint",
  ],
  ["65,5", "esriGeometryPoint", { distance: 300, units: "esriSRUnit_Kilometer" }],
  [
    JSON.stringify({ xmin: 170, ymin: -10, xmax: -170, ymax: 10, spatialReference: WGS84 }),
    "esriGeometryEnvelope",
  ],
  [
    polygon([
      [100, 0],
      [100, 10],
      [110, 10],
      [100, 0],
    ]),
    "esriGeometryPolygon",
  ],
  ["0,5,150,5.000000001", "esriGeometryEnvelope"],
  [
    JSON.stringify({
      xmin: 0,
      ymin: 0,
      xmax: 3_339_584.7,
      ymax: 1_118_889.97,
      spatialReference: { wkid: 3857 },
    }),
    "esriGeometryEnvelope",
  ],
  [
    polygon(
      [
        [0, 0],
        [0, 3],
        [3, 3],
        [3, 0],
        [0, 0],
      ],
      [
        [40, 0],
        [40, 3],
        [43, 3],
        [43, 0],
        [40, 0],
      ],
    ),
    "esriGeometryPolygon",
  ],
  [
    polygon([
      [61, 1],
      [61, 5],
      [65, 1],
      [61, 1],
    ]),
    "esriGeometryPolygon",
  ],
  // Where the outer rings of shape 3 overlap: GEOS's relate throws on shape 3 when it is the first
  // geometry a statement relates (PostGIS prepares the query geometry from the second on).
  [
    polygon([
      [44, 4],
      [44.5, 5.5],
      [45.5, 4],
      [44, 4],
    ]),
    "esriGeometryPolygon",
  ],
];

const RELS = [
  "esriSpatialRelIntersects",
  "esriSpatialRelEnvelopeIntersects",
  "esriSpatialRelIndexIntersects",
  "esriSpatialRelContains",
  "esriSpatialRelWithin",
  "esriSpatialRelCrosses",
  "esriSpatialRelOverlaps",
  "esriSpatialRelTouches",
];

const LAYERS = [
  {
    name: "Shapes",
    geometryType: "esriGeometryPolygon",
    features: SHAPES.map((rings) => ({ geometry: { rings } })),
  },
  {
    name: "Paths",
    geometryType: "esriGeometryPolyline",
    features: PATHS.map((paths) => ({ geometry: { paths } })),
  },
  {
    name: "Spots",
    geometryType: "esriGeometryPoint",
    features: SPOTS.map(([x, y]) => ({ geometry: { x, y } })),
  },
  {
    name: "Clusters",
    geometryType: "esriGeometryMultipoint",
    features: CLUSTERS.map((points) => ({ geometry: { points } })),
  },
];

const serviceUrl = (portal: TestPortal) =>
  `${portal.api.replace(/\/sharing\/rest$/, "/rest")}/services/Geometry/FeatureServer`;

/** Creates the service "Geometry" with the four layers and their features; answers its URL. */
async function load(portal: TestPortal, layers = LAYERS): Promise<string> {
  const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
  const created = await portal.post(
    "/content/users/admin_user/createService",
    {
      createParameters: { name: "Geometry", capabilities: "Query,Editing,Create" },
      outputType: "featureService",
    },
    portal.adminToken,
  );
  expect(created.success, JSON.stringify(created)).toBe(true);
  const added = await portal.post(
    `${server}/admin/services/Geometry/FeatureServer/addToDefinition`,
    {
      addToDefinition: {
        layers: layers.map((l) => ({
          name: l.name,
          geometryType: l.geometryType,
          spatialReference: WGS84,
          fields: [{ name: "label", type: "esriFieldTypeString" }],
        })),
      },
    },
    portal.adminToken,
  );
  expect(added.success, JSON.stringify(added)).toBe(true);
  const url = serviceUrl(portal);
  for (const [i, layer] of layers.entries()) {
    const features = layer.features.map((f, n) => ({
      attributes: { label: `${layer.name} ${n + 1}` },
      ...f,
    }));
    const result = await portal.post(`${url}/${i}/addFeatures`, { features }, portal.adminToken);
    expect(
      result.addResults?.every((r: { success: boolean }) => r.success),
      JSON.stringify(result),
    ).toBe(true);
  }
  return url;
}

/**
 * Every query of `QUERIES` for layer `layer`: its object ids in every relation, and for Intersects
 * (the relation PostGIS decides) its count, features, extent, a page and a statistic as well.
 */
function requests(layer: number): { path: string; params: Record<string, unknown> }[] {
  const out: { path: string; params: Record<string, unknown> }[] = [];
  for (const [geometry, geometryType, extra] of QUERIES) {
    const base = { geometry, geometryType, inSR: 4326, ...extra };
    for (const spatialRel of RELS) {
      out.push({ path: `${layer}/query`, params: { ...base, spatialRel, returnIdsOnly: true } });
    }
    out.push({ path: `${layer}/query`, params: { ...base, returnCountOnly: true } });
    out.push({ path: `${layer}/query`, params: { ...base, outFields: "*" } });
    out.push({ path: `${layer}/query`, params: { ...base, returnExtentOnly: true } });
    out.push({
      path: `${layer}/query`,
      params: { ...base, resultOffset: 2, resultRecordCount: 3, orderByFields: "label DESC" },
    });
    out.push({
      path: `${layer}/query`,
      params: {
        ...base,
        outStatistics: JSON.stringify([
          { statisticType: "count", onStatisticField: "OBJECTID", outStatisticFieldName: "n" },
        ]),
      },
    });
  }
  return out;
}

/** Asks both portals everything, a few requests at a time, and expects the same answers. */
async function expectSameAnswers(
  a: { portal: TestPortal; url: string },
  b: { portal: TestPortal; url: string },
) {
  for (const layer of LAYERS.keys()) {
    const all = requests(layer);
    for (let start = 0; start < all.length; start += 8) {
      await Promise.all(
        all.slice(start, start + 8).map(async ({ path, params }) => {
          const [first, second] = await Promise.all([
            a.portal.get(`${a.url}/${path}`, params, a.portal.adminToken),
            b.portal.get(`${b.url}/${path}`, params, b.portal.adminToken),
          ]);
          expect(first, `${path} ${JSON.stringify(params)}`).toEqual(second);
        }),
      );
    }
  }
}

/** Whether a layer table of the portal has a column, or an index, by name suffix. */
async function tableHas(portal: TestPortal, what: "geom column" | "geom index" | "box index") {
  const db = portal.portico.db.kysely;
  const found =
    what === "geom column"
      ? await sql`SELECT 1 FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          WHERE c.relnamespace = current_schema()::regnamespace AND c.relname LIKE 'fl\\_%'
          AND a.attname = 'geom' AND NOT a.attisdropped`.execute(db)
      : await sql`SELECT 1 FROM pg_indexes WHERE schemaname = current_schema()
          AND indexname LIKE ${what === "geom index" ? "fl\\_%\\_geom" : "fl\\_%\\_box"}`.execute(db);
  return found.rows.length > 0;
}

describe("PostgreSQL with and without PostGIS", () => {
  let withPostgis: { portal: TestPortal; url: string };
  let without: { portal: TestPortal; url: string };
  beforeAll(async () => {
    const [a, b] = await Promise.all([
      startTestPortal({ env: { PORTICO_POSTGIS: "on" } }),
      startTestPortal({ env: { PORTICO_POSTGIS: "off" } }),
    ]);
    withPostgis = { portal: a, url: await load(a) };
    without = { portal: b, url: await load(b) };
  }, 60_000);
  afterAll(async () => {
    await Promise.all([withPostgis?.portal.stop(), without?.portal.stop()]);
  });

  it("keeps a geometry column with its index only where PostGIS is used", async () => {
    expect(withPostgis.portal.portico.db.postgis).toBeDefined();
    expect(without.portal.portico.db.postgis).toBeUndefined();
    expect(await tableHas(withPostgis.portal, "geom column")).toBe(true);
    expect(await tableHas(withPostgis.portal, "geom index")).toBe(true);
    expect(await tableHas(withPostgis.portal, "box index")).toBe(false);
    expect(await tableHas(without.portal, "geom column")).toBe(false);
    expect(await tableHas(without.portal, "box index")).toBe(true);
  });

  it("answers the hand-worked cases on the boundary alike", async () => {
    for (const { portal, url } of [withPostgis, without]) {
      const ids = async (layer: number, params: Record<string, unknown>) =>
        (
          await portal.get(
            `${url}/${layer}/query`,
            { inSR: 4326, returnIdsOnly: true, ...params },
            portal.adminToken,
          )
        ).objectIds;
      // Shape 7 touches the envelope at its corner (10, 10); shape 1 is the envelope.
      expect(await ids(0, { geometry: "0,0,10,10" })).toEqual([1, 7]);
      // Inside the hole of shape 1: nothing.
      expect(await ids(0, { geometry: "4.5,4.5,5.5,5.5" })).toEqual([]);
      // The spots in the closed triangle (0,0) (0,10) (10,10): 0 <= x <= y <= 10, on its edges too.
      const triangle = polygon([
        [0, 0],
        [0, 10],
        [10, 10],
        [0, 0],
      ]);
      const inTriangle = SPOTS.flatMap(([x, y], i) => (x >= 0 && x <= y && y <= 10 ? [i + 1] : []));
      expect(inTriangle.length).toBeGreaterThan(10);
      expect(await ids(2, { geometry: triangle, geometryType: "esriGeometryPolygon" })).toEqual(inTriangle);
      // The spots on the long side of shape 6 (y = x - 100) or inside it.
      const inShape6 = SPOTS.flatMap(([x, y], i) =>
        x >= 100 && x <= 110 && y >= 0 && y <= x - 100 ? [i + 1] : [],
      );
      expect(inShape6).toContain(SPOTS.findIndex(([x, y]) => x === 105 && y === 5) + 1);
      expect(
        await ids(2, {
          geometry: polygon([
            [100, 0],
            [110, 10],
            [110, 0],
            [100, 0],
          ]),
          geometryType: "esriGeometryPolygon",
        }),
      ).toEqual(inShape6);
    }
  });

  it("answers every query in every relation the same with PostGIS as without", async () => {
    await expectSameAnswers(withPostgis, without);
  }, 120_000);
});

describe("turning PostGIS on and off for a database that holds layers", () => {
  it("adds the geometry column to existing layers, drops it when turned off, and answers the same", async () => {
    const store = newStore();
    const reference = await startTestPortal({ env: { PORTICO_POSTGIS: "off" } });
    try {
      const layers = [LAYERS[0], LAYERS[2]] as typeof LAYERS;
      const referenceUrl = await load(reference, layers);
      let portal = await startTestPortal({ store, keepStore: true, env: { PORTICO_POSTGIS: "off" } });
      await load(portal, layers);
      await portal.stop();

      portal = await startTestPortal({ store, keepStore: true, env: { PORTICO_POSTGIS: "on" } });
      expect(await tableHas(portal, "geom column")).toBe(true);
      expect(await tableHas(portal, "geom index")).toBe(true);
      expect(await tableHas(portal, "box index")).toBe(false);
      let url = serviceUrl(portal);
      const ask = (p: TestPortal, u: string) =>
        p.get(`${u}/0/query`, { geometry: "0,0,45,9", inSR: 4326, returnIdsOnly: true }, p.adminToken);
      expect(await ask(portal, url)).toEqual(await ask(reference, referenceUrl));
      expect((await ask(portal, url)).objectIds).toEqual([1, 2, 3]);
      // A feature added with PostGIS on, and one moved, are found by it and after it is turned off.
      const added = {
        attributes: { label: "late" },
        geometry: { rings: SHAPES[0]?.map((r) => r.map(([x, y]) => [x + 30, y])) },
      };
      for (const [p, u] of [
        [portal, url],
        [reference, referenceUrl],
      ] as const) {
        const edits = await p.post(
          `${u}/0/applyEdits`,
          { adds: [added], updates: [{ attributes: { OBJECTID: 11 }, geometry: { rings: SHAPES[5] } }] },
          p.adminToken,
        );
        expect(edits.addResults[0].success && edits.updateResults[0].success, JSON.stringify(edits)).toBe(
          true,
        );
      }
      expect((await ask(portal, url)).objectIds).toEqual([1, 2, 3, 12]);
      await portal.stop();

      portal = await startTestPortal({ store, env: { PORTICO_POSTGIS: "off" } });
      url = serviceUrl(portal);
      expect(await tableHas(portal, "geom column")).toBe(false);
      expect(await tableHas(portal, "box index")).toBe(true);
      expect(await ask(portal, url)).toEqual(await ask(reference, referenceUrl));
      const moved = (p: TestPortal, u: string) =>
        p.get(`${u}/0/query`, { geometry: "105,5", inSR: 4326, returnIdsOnly: true }, p.adminToken);
      expect((await moved(portal, url)).objectIds).toEqual([6, 11]);
      await portal.stop();
    } finally {
      await reference.stop();
      await store.destroy();
    }
  }, 90_000);
});

describe("a database where portico's user may not create PostGIS", () => {
  it("starts without it on auto, and refuses to start on on, saying why", async () => {
    const admin = process.env.PORTICO_TEST_DATABASE_URL as string;
    const name = `portico_plain_${randomBytes(4).toString("hex")}`;
    const run = async (statement: string) => {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      try {
        await client.query(statement);
      } finally {
        await client.end();
      }
    };
    // A database of its own, owned by a user who is no superuser: CREATE EXTENSION postgis is
    // refused there (PostGIS is not a trusted extension).
    await run(`CREATE ROLE ${name} LOGIN`);
    await run(`CREATE DATABASE ${name} OWNER ${name}`);
    try {
      const url = new URL(admin);
      url.username = name;
      url.pathname = `/${name}`;
      const env = { DATABASE_URL: url.toString() };
      const portal = await startTestPortal({ env: { ...env, PORTICO_POSTGIS: "auto" } });
      try {
        expect(portal.portico.db.postgis).toBeUndefined();
        expect(portal.portico.db.postgisNote).toMatch(/^PostGIS not used: CREATE EXTENSION postgis failed/);
        // Layers work all the same, on the index over their bounds.
        const url = await load(portal, [LAYERS[2]] as typeof LAYERS);
        const found = await portal.get(
          `${url}/0/query`,
          { geometry: "0,0,1.5,0.5", inSR: 4326, returnIdsOnly: true },
          portal.adminToken,
        );
        expect(found.objectIds).toEqual([1, 2, SPOT_XS.length + 1, SPOT_XS.length + 2]);
      } finally {
        await portal.stop();
      }
      await expect(startTestPortal({ env: { ...env, PORTICO_POSTGIS: "on" } })).rejects.toThrow(
        /PORTICO_POSTGIS is on, but CREATE EXTENSION postgis failed \(permission denied/,
      );
    } finally {
      await run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await run(`DROP ROLE IF EXISTS ${name}`);
    }
  }, 60_000);
});
