import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";
import {
  createSampleService,
  type Ring,
  type SamplePoint,
  type SampleZone,
  samplePoints,
  sampleZones,
} from "../helpers/sample-layers.js";

/**
 * GDAL (`ogrinfo`, `ogr2ogr`, its ESRIJSON driver) reading portico's hosted feature layers over
 * HTTP, as scripts and QGIS's OGR provider do: the first page, then `resultOffset` pages while
 * `exceededTransferLimit` says there are more, the feature count (`returnCountOnly`) and the extent
 * (`returnExtentOnly`, `f=geojson`). Every expected value comes from the generated input
 * (helpers/sample-layers.ts). GDAL must be installed (Debian `gdal-bin`; .ci/run installs it).
 */

const run = promisify(execFile);

const POINTS = samplePoints(2345);
const ZONES = sampleZones(600);
const PAGE = 500;

type Box = { xmin: number; ymin: number; xmax: number; ymax: number };

async function gdal(
  tool: "ogrinfo" | "ogr2ogr",
  args: string[],
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(tool, args, {
      maxBuffer: 256 * 1024 * 1024,
      // Loopback only, whatever proxy the environment names.
      env: { ...process.env, NO_PROXY: "127.0.0.1", no_proxy: "127.0.0.1", GDAL_HTTP_TIMEOUT: "60", ...env },
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string; stdout?: string };
    if (e.code === "ENOENT") {
      throw new Error(
        `GDAL's ${tool} is not installed: install Debian's gdal-bin (apt-get install -y gdal-bin), as .ci/run does`,
      );
    }
    throw new Error(`${tool} ${args.join(" ")} failed: ${e.message}\n${e.stderr ?? ""}${e.stdout ?? ""}`);
  }
}

/** `ogr2ogr -f GeoJSON` of a source, parsed. */
async function toGeoJson(source: string, ...options: string[]): Promise<any> {
  const { stdout } = await gdal("ogr2ogr", ["-f", "GeoJSON", ...options, "/vsistdout/", source]);
  return JSON.parse(stdout);
}

/** `ogrinfo -so` of the only layer: geometry type, count, extent, fields as `name: Type (w.p)`. */
function summary(stdout: string) {
  const extent = /^Extent: \((\S+), (\S+)\) - \((\S+), (\S+)\)$/m.exec(stdout);
  const fieldsAt = stdout.search(/^Data axis to CRS axis mapping.*$/m);
  const fields = stdout
    .slice(fieldsAt)
    .split("\n")
    .slice(1)
    .filter((l) => /^\w+: /.test(l) && !l.startsWith("FID Column"));
  return {
    geometry: /^Geometry: (.+)$/m.exec(stdout)?.[1],
    count: Number(/^Feature Count: (\d+)$/m.exec(stdout)?.[1]),
    extent: extent ? extent.slice(1, 5).map(Number) : undefined,
    epsg4326: /ID\["EPSG",4326\]\]\s*$/m.test(stdout.slice(0, fieldsAt)),
    fields,
  };
}

/** Milliseconds of a date GDAL wrote: GDAL 3.6 reads Esri dates as text (the epoch milliseconds), later ones as dates. */
function dateValue(v: unknown): number {
  if (typeof v === "number") return v;
  if (typeof v === "string" && /^-?\d+$/.test(v)) return Number(v);
  return Date.parse(
    String(v)
      .replace(/^(\d{4})\/(\d\d)\/(\d\d) /, "$1-$2-$3T")
      .replace(/\+00$/, "Z"),
  );
}

const inBox = (b: Box, x: number, y: number) => x >= b.xmin && x <= b.xmax && y >= b.ymin && y <= b.ymax;
const boxesMeet = (a: Box, b: Box) =>
  a.xmin <= b.xmax && a.xmax >= b.xmin && a.ymin <= b.ymax && a.ymax >= b.ymin;
/** Whether a box meets a zone: the parts are rectangles, so it meets one unless it lies inside its hole. */
const meetsZone = (b: Box, z: SampleZone) =>
  z.boxes.some((part) => boxesMeet(b, part)) &&
  !(z.hole && b.xmin > z.hole.xmin && b.xmax < z.hole.xmax && b.ymin > z.hole.ymin && b.ymax < z.hole.ymax);

/** A ring without its closing vertex, from its least vertex, in whichever direction reads first. */
function canonicalRing(ring: number[][]): string {
  const open = ring.slice(0, -1).map((p) => `${p[0]},${p[1]}`);
  const rotations = (r: string[]) => r.map((_, i) => [...r.slice(i), ...r.slice(0, i)].join(" "));
  return [...rotations(open), ...rotations([...open].reverse())].sort()[0] as string;
}
const canonicalPolygons = (polygons: number[][][][]) =>
  polygons
    .map((rings) => [canonicalRing(rings[0] as number[][]), ...rings.slice(1).map(canonicalRing).sort()])
    .sort((a, b) => (a[0] as string).localeCompare(b[0] as string));

function expectPoint(feature: any, p: SamplePoint) {
  expect(feature.properties).toMatchObject({ OBJECTID: p.objectId, name: p.name, n: p.n, kind: p.kind });
  // A null attribute is an unset field in GDAL, which its GeoJSON writer leaves out.
  if (p.score === null) expect(feature.properties.score ?? null).toBeNull();
  else expect(feature.properties.score).toBe(p.score);
  expect(dateValue(feature.properties.seen)).toBe(p.seen);
  expect(feature.geometry.type).toBe("Point");
  expect(feature.geometry.coordinates[0]).toBeCloseTo(p.x, 9);
  expect(feature.geometry.coordinates[1]).toBeCloseTo(p.y, 9);
}

function expectZone(feature: any, z: SampleZone) {
  expect(feature.properties).toMatchObject({ OBJECTID: z.objectId, label: z.label });
  const g = feature.geometry;
  expect(g.type).toBe(z.polygons.length === 1 ? "Polygon" : "MultiPolygon");
  const polygons: number[][][][] = g.type === "Polygon" ? [g.coordinates] : g.coordinates;
  expect(canonicalPolygons(polygons)).toEqual(canonicalPolygons(z.polygons as Ring[][]));
}

/** Object ids of a GeoJSON answer, in order. */
const oids = (fc: any): number[] => fc.features.map((f: any) => f.properties.OBJECTID);

describe("GDAL's ESRIJSON driver against hosted feature layers", () => {
  let portal: TestPortal;
  let token: string;
  let owner: { username: string; token: string };
  let itemId: string;
  let service: string;

  /**
   * A layer query URL as GDAL's documentation writes them (`outfields` in lower case: ArcGIS reads
   * parameter names whatever their case), with the token, and any further parameters.
   */
  const query = (layer: number, params: Record<string, string> = {}) =>
    `${service}/${layer}/query?${new URLSearchParams({
      where: "1=1",
      outfields: "*",
      f: "json",
      token,
      ...params,
    })}`;

  beforeAll(async () => {
    // Fails every test with the reason when GDAL is missing: nothing here is skipped.
    await gdal("ogrinfo", ["--version"]);
    portal = await startTestPortal();
    owner = await portal.addUser("gdal_owner", "org_publisher");
    token = owner.token;
    const created = await createSampleService(
      portal,
      owner,
      "GdalSites",
      { points: POINTS, zones: ZONES },
      { maxRecordCount: PAGE },
    );
    service = created.url;
    itemId = created.itemId;
  }, 120_000);
  afterAll(async () => {
    await portal?.stop();
  });

  it("summarizes the point layer with ogrinfo -so: count, extent and fields from the server", async () => {
    const { stdout, stderr } = await gdal("ogrinfo", ["-ro", "-al", "-so", query(0)], { CPL_DEBUG: "ON" });
    const s = summary(stdout);
    expect(s.geometry).toBe("Point");
    expect(s.count).toBe(POINTS.length);
    expect(s.epsg4326).toBe(true);
    const xs = POINTS.map((p) => p.x);
    const ys = POINTS.map((p) => p.y);
    const expected = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
    s.extent?.forEach((v, i) => {
      expect(v).toBeCloseTo(expected[i] as number, 6);
    });
    expect(s.extent).toHaveLength(4);
    expect(s.fields[0]).toBe("OBJECTID: Integer (0.0)");
    expect(s.fields[1]).toBe("name: String (40.0)");
    expect(s.fields[2]).toBe("n: Integer (0.0)");
    expect(s.fields[3]).toBe("score: Real (0.0)");
    // GDAL 3.6 reads Esri dates as text; later versions as dates.
    expect(s.fields[4]).toMatch(/^seen: (String|DateTime) \(0\.0\)$/);
    expect(s.fields[5]).toMatch(/^kind: Integer(\(Int16\))? \(0\.0\)$/);
    expect(s.fields).toHaveLength(6);
    // The count and the extent came from the server (returnCountOnly; returnExtentOnly with
    // f=geojson, whose `bbox` GDAL reads), not from reading every page: GDAL falls back to that
    // when an answer is not what it expects.
    const fetches = stderr.split("\n").filter((l) => l.startsWith("HTTP: Fetch("));
    expect(fetches.some((l) => l.includes("returnCountOnly=true"))).toBe(true);
    expect(fetches.some((l) => l.includes("returnExtentOnly=true") && l.includes("f=geojson"))).toBe(true);
    expect(fetches.filter((l) => l.includes("resultOffset="))).toEqual([]);
  });

  it("copies every point with ogr2ogr through pages of maxRecordCount, attributes and coordinates intact", async () => {
    const { stdout, stderr } = await gdal("ogr2ogr", ["-f", "GeoJSON", "/vsistdout/", query(0)], {
      CPL_DEBUG: "ON",
    });
    const fc = JSON.parse(stdout);
    expect(fc.features).toHaveLength(POINTS.length);
    expect(oids(fc)).toEqual(POINTS.map((p) => p.objectId));
    fc.features.forEach((f: any, i: number) => {
      expectPoint(f, POINTS[i] as SamplePoint);
    });
    // It paged: every later page asked by offset, PAGE at a time.
    const offsets = stderr
      .split("\n")
      .filter((l) => l.startsWith("HTTP: Fetch("))
      .flatMap((l) => {
        const m = /[?&]resultOffset=(\d+)/.exec(l);
        return m ? [Number(m[1])] : [];
      });
    for (let offset = PAGE; offset < POINTS.length; offset += PAGE) expect(offsets).toContain(offset);
    expect(stderr).toMatch(new RegExp(`resultRecordCount=${PAGE}\\b`));
  });

  it("pages through a where clause in the URL and keeps only what it matches", async () => {
    const where = "kind <> 0 AND name LIKE 'site%' AND n >= -500";
    const expected = POINTS.filter((p) => p.kind !== 0 && p.name.startsWith("site") && p.n >= -500);
    expect(expected.length).toBeGreaterThan(PAGE * 2);
    // GDAL's documentation advises ordering by object id for stable pages.
    const fc = await toGeoJson(query(0, { where, orderByFields: "OBJECTID ASC" }));
    expect(oids(fc)).toEqual(expected.map((p) => p.objectId));
    for (const [i, f] of fc.features.entries()) expectPoint(f, expected[i] as SamplePoint);
    const { stdout } = await gdal("ogrinfo", ["-ro", "-al", "-so", query(0, { where })]);
    expect(summary(stdout).count).toBe(expected.length);
  });

  it("filters by an envelope in the URL (geometry, inSR, spatialRel) and by ogr2ogr -spat", async () => {
    const box = { xmin: -100.3, ymin: -20.005, xmax: -50.2, ymax: 10.005 };
    const expected = POINTS.filter((p) => inBox(box, p.x, p.y)).map((p) => p.objectId);
    expect(expected.length).toBeGreaterThan(20);
    const server = await toGeoJson(
      query(0, {
        geometry: `${box.xmin},${box.ymin},${box.xmax},${box.ymax}`,
        geometryType: "esriGeometryEnvelope",
        inSR: "4326",
        spatialRel: "esriSpatialRelIntersects",
      }),
    );
    expect(oids(server)).toEqual(expected);
    const client = await toGeoJson(
      query(0),
      "-spat",
      String(box.xmin),
      String(box.ymin),
      String(box.xmax),
      String(box.ymax),
    );
    expect(oids(client)).toEqual(expected);
  });

  it("filters by ogrinfo/ogr2ogr -where on the features it read", async () => {
    const fc = await toGeoJson(query(0), "-where", "kind = 3 AND n > 0");
    expect(oids(fc)).toEqual(POINTS.filter((p) => p.kind === 3 && p.n > 0).map((p) => p.objectId));
  });

  it("summarizes and copies the polygon layer: holes and multipart polygons as GDAL builds them", async () => {
    const { stdout } = await gdal("ogrinfo", ["-ro", "-al", "-so", query(1)]);
    const s = summary(stdout);
    expect(s.count).toBe(ZONES.length);
    expect(s.geometry).toMatch(/Polygon/);
    const parts = ZONES.flatMap((z) => z.boxes);
    const expected = [
      Math.min(...parts.map((b) => b.xmin)),
      Math.min(...parts.map((b) => b.ymin)),
      Math.max(...parts.map((b) => b.xmax)),
      Math.max(...parts.map((b) => b.ymax)),
    ];
    expect(s.extent).toEqual(expected);
    expect(s.fields).toEqual(["OBJECTID: Integer (0.0)", "label: String (30.0)", "area: Real (0.0)"]);

    const fc = await toGeoJson(query(1));
    expect(oids(fc)).toEqual(ZONES.map((z) => z.objectId));
    fc.features.forEach((f: any, i: number) => {
      expectZone(f, ZONES[i] as SampleZone);
    });
  });

  it("filters polygons by envelope on the server, exactly: a box inside a hole meets nothing", async () => {
    const envelope = (b: Box) => ({
      geometry: JSON.stringify({ ...b, spatialReference: { wkid: 4326 } }),
      geometryType: "esriGeometryEnvelope",
      spatialRel: "esriSpatialRelIntersects",
    });
    const wide = { xmin: -127.5, ymin: -57.5, xmax: -94.5, ymax: -40.5 };
    const expected = ZONES.filter((z) => meetsZone(wide, z));
    expect(expected.length).toBeGreaterThan(10);
    const fc = await toGeoJson(query(1, envelope(wide)));
    expect(oids(fc)).toEqual(expected.map((z) => z.objectId));
    for (const [i, f] of fc.features.entries()) expectZone(f, expected[i] as SampleZone);

    const zone = ZONES[0] as SampleZone;
    const hole = zone.hole as Box;
    const insideHole = {
      xmin: hole.xmin + 0.5,
      ymin: hole.ymin + 0.5,
      xmax: hole.xmax - 0.5,
      ymax: hole.ymax - 0.5,
    };
    expect(ZONES.filter((z) => meetsZone(insideHole, z))).toEqual([]);
    const none = await toGeoJson(query(1, envelope(insideHole)));
    expect(none.features).toEqual([]);
  });

  it("reads polygons projected to Web Mercator with outSR=3857", async () => {
    // Back to degrees by the spherical Mercator formulas: the input's vertices are whole degrees.
    const R = 6378137;
    const degrees = ([x, y]: number[]) => [
      (((x as number) / R) * 180) / Math.PI,
      ((2 * Math.atan(Math.exp((y as number) / R)) - Math.PI / 2) * 180) / Math.PI,
    ];
    const chosen = ZONES.slice(0, 40);
    const fc = await toGeoJson(query(1, { where: "OBJECTID <= 40", outSR: "3857" }));
    expect(JSON.stringify(fc.crs)).toMatch(/3857/);
    expect(oids(fc)).toEqual(chosen.map((z) => z.objectId));
    for (const [i, f] of fc.features.entries()) {
      const polygons: number[][][][] =
        f.geometry.type === "Polygon" ? [f.geometry.coordinates] : f.geometry.coordinates;
      const back = polygons.map((rings) =>
        rings.map((ring) =>
          ring.map((p) =>
            degrees(p).map((v) => {
              expect(Math.abs(v - Math.round(v))).toBeLessThan(1e-9);
              return Math.round(v);
            }),
          ),
        ),
      );
      expect(canonicalPolygons(back)).toEqual(canonicalPolygons((chosen[i] as SampleZone).polygons));
    }
  });

  it("reads a layer shared with everyone on a public portal without a token, and none before", async () => {
    const anonymous = `${service}/1/query?${new URLSearchParams({ where: "label = 'zone 7'", outfields: "*", f: "json" })}`;
    // GDAL does not tell the error it read; the answer it got says it.
    await expect(gdal("ogr2ogr", ["-f", "GeoJSON", "/vsistdout/", anonymous])).rejects.toThrow(
      /Failed to read ESRIJSON/,
    );
    expect(((await (await fetch(anonymous)).json()) as any).error.code).toBe(499);
    await portal.post("/portals/self/update", { access: "public" }, portal.adminToken);
    const shared = await portal.post(
      `/content/users/${owner.username}/items/${itemId}/share`,
      { everyone: true },
      owner.token,
    );
    expect(shared.notSharedWith).toEqual([]);
    const fc = await toGeoJson(anonymous);
    expect(oids(fc)).toEqual([8]);
    expectZone(fc.features[0], ZONES[7] as SampleZone);
  });
});
