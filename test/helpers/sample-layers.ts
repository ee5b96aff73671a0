import type { TestPortal } from "./portico.js";

/**
 * Hand-made layers for the client tests (GDAL, arcgis-rest-js): every value comes from the formulas
 * below, so what a client reads back is checked against these, never against portico's answers.
 */

export const DAY = 86_400_000;

export interface SamplePoint {
  /** The object id portico gives it: features are added in this order to an empty layer. */
  objectId: number;
  name: string;
  n: number;
  score: number | null;
  seen: number;
  kind: number;
  x: number;
  y: number;
}

/**
 * `count` points over most of the globe: longitudes in 72 columns 5° apart (offsets of 0, 0.123456789
 * and 0.246913578 so that they are not round), latitudes from -60° in rows 3.5° apart (plus 0.00 to
 * 0.09). Every eleventh score is null; some names carry quotes and non-ASCII letters.
 */
export function samplePoints(count: number): SamplePoint[] {
  const out: SamplePoint[] = [];
  for (let i = 0; i < count; i++) {
    out.push({
      objectId: i + 1,
      name: i % 7 === 0 ? `Café "${i}" à l'ouest` : `site ${i}`,
      n: i * 3 - 1000,
      score: i % 11 === 0 ? null : i / 16,
      seen: Date.UTC(2001, 0, 1) + i * DAY + (i % 24) * 3_600_000,
      kind: i % 5,
      x: -179.5 + (i % 72) * 5 + (i % 3) * 0.123456789,
      y: -60 + Math.floor(i / 72) * 3.5 + ((i * 7) % 10) / 100,
    });
  }
  return out;
}

export const POINT_FIELDS = [
  { name: "name", type: "esriFieldTypeString", alias: "Name", length: 40 },
  { name: "n", type: "esriFieldTypeInteger", alias: "N" },
  { name: "score", type: "esriFieldTypeDouble", alias: "Score" },
  { name: "seen", type: "esriFieldTypeDate", alias: "Seen" },
  { name: "kind", type: "esriFieldTypeSmallInteger", alias: "Kind" },
];

export const pointFeature = (p: SamplePoint) => ({
  attributes: { name: p.name, n: p.n, score: p.score, seen: p.seen, kind: p.kind },
  geometry: { x: p.x, y: p.y },
});

export type Ring = [number, number][];

export interface SampleZone {
  objectId: number;
  label: string;
  /** Outer rings clockwise, holes counter-clockwise (Esri JSON), each outer ring before its holes. */
  polygons: Ring[][];
  /** The bounding box of each part: rectangles, so the parts are their boxes (less any hole). */
  boxes: { xmin: number; ymin: number; xmax: number; ymax: number }[];
  hole?: { xmin: number; ymin: number; xmax: number; ymax: number };
}

/** Clockwise rectangle, closed. */
const rectangle = (xmin: number, ymin: number, xmax: number, ymax: number): Ring => [
  [xmin, ymin],
  [xmin, ymax],
  [xmax, ymax],
  [xmax, ymin],
  [xmin, ymin],
];

/**
 * `count` rectangles 6° by 5° in a grid of 30 columns 10° apart and rows 7° apart, from (-150, -70).
 * Every third has a 2° by 2° hole; every fifth a second part, a 2° square to its right.
 */
export function sampleZones(count: number): SampleZone[] {
  const out: SampleZone[] = [];
  for (let k = 0; k < count; k++) {
    const x0 = -150 + (k % 30) * 10;
    const y0 = -70 + Math.floor(k / 30) * 7;
    const outer = rectangle(x0, y0, x0 + 6, y0 + 5);
    const polygons: Ring[][] = [];
    const boxes = [{ xmin: x0, ymin: y0, xmax: x0 + 6, ymax: y0 + 5 }];
    let hole: SampleZone["hole"];
    if (k % 3 === 0) {
      hole = { xmin: x0 + 2, ymin: y0 + 1, xmax: x0 + 4, ymax: y0 + 3 };
      polygons.push([outer, rectangle(hole.xmin, hole.ymin, hole.xmax, hole.ymax).reverse() as Ring]);
    } else polygons.push([outer]);
    if (k % 5 === 0) {
      polygons.push([rectangle(x0 + 7, y0, x0 + 9, y0 + 2)]);
      boxes.push({ xmin: x0 + 7, ymin: y0, xmax: x0 + 9, ymax: y0 + 2 });
    }
    out.push({ objectId: k + 1, label: `zone ${k}`, polygons, boxes, ...(hole ? { hole } : {}) });
  }
  return out;
}

export const zoneFeature = (z: SampleZone) => ({
  attributes: {
    label: z.label,
    area: z.boxes.reduce((a, b) => a + (b.xmax - b.xmin) * (b.ymax - b.ymin), 0),
  },
  geometry: { rings: z.polygons.flat() },
});

export const ZONE_FIELDS = [
  { name: "label", type: "esriFieldTypeString", alias: "Label", length: 30 },
  { name: "area", type: "esriFieldTypeDouble", alias: "Area" },
];

/**
 * Creates service `name` (in WGS 84, `maxRecordCount` per answer) owned by `token`'s user, with
 * layer 0 `Points` and layer 1 `Zones`, and adds the features in batches.
 */
export async function createSampleService(
  portal: TestPortal,
  owner: { username: string; token: string },
  name: string,
  data: { points: SamplePoint[]; zones: SampleZone[] },
  options: { maxRecordCount: number; capabilities?: string; supportedQueryFormats?: string },
): Promise<{ itemId: string; url: string }> {
  const created = await portal.post(
    `/content/users/${owner.username}/createService`,
    {
      createParameters: {
        name,
        maxRecordCount: options.maxRecordCount,
        spatialReference: { wkid: 4326 },
        capabilities: options.capabilities ?? "Query",
        ...(options.supportedQueryFormats ? { supportedQueryFormats: options.supportedQueryFormats } : {}),
      },
      outputType: "featureService",
    },
    owner.token,
  );
  if (!created.success) throw new Error(`createService: ${JSON.stringify(created)}`);
  const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
  const added = await portal.post(
    `${server}/admin/services/${name}/FeatureServer/addToDefinition`,
    {
      addToDefinition: {
        layers: [
          {
            name: "Points",
            geometryType: "esriGeometryPoint",
            spatialReference: { wkid: 4326 },
            fields: POINT_FIELDS,
          },
          {
            name: "Zones",
            geometryType: "esriGeometryPolygon",
            spatialReference: { wkid: 4326 },
            fields: ZONE_FIELDS,
          },
        ],
      },
    },
    owner.token,
  );
  if (!added.success) throw new Error(`addToDefinition: ${JSON.stringify(added)}`);
  const url = `${server}/services/${name}/FeatureServer`;
  const load = async (layer: number, features: unknown[]) => {
    for (let start = 0; start < features.length; start += 1000) {
      const batch = features.slice(start, start + 1000);
      const r = await portal.post(`${url}/${layer}/applyEdits`, { adds: batch }, owner.token);
      const ok = (r.addResults ?? []).filter((a: { success: boolean }) => a.success).length;
      if (ok !== batch.length)
        throw new Error(`applyEdits on layer ${layer}: ${JSON.stringify(r).slice(0, 500)}`);
    }
  };
  await load(0, data.points.map(pointFeature));
  await load(1, data.zones.map(zoneFeature));
  return { itemId: created.itemId, url };
}
