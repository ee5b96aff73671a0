import {
  addFeatures,
  applyEdits,
  deleteFeatures,
  getAllLayersAndTables,
  getFeature,
  getLayer,
  getService,
  type IQueryFeaturesResponse,
  queryAllFeatures,
  queryFeatures,
  updateFeatures,
} from "@esri/arcgis-rest-feature-service";
import { ArcGISIdentityManager, ArcGISRequestError, type IGeometry } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";
import {
  createSampleService,
  POINT_FIELDS,
  pointFeature,
  type SamplePoint,
  type SampleZone,
  samplePoints,
  sampleZones,
  ZONE_FIELDS,
} from "../helpers/sample-layers.js";

/**
 * Esri's @esri/arcgis-rest-feature-service 4.10.2 against hosted feature layers of an in-process
 * portico: queries in every form it sends them (JSON, GeoJSON, PBF decoded by its own parsers),
 * paging through everything, the layer and service resources, and edits. Expected values come from
 * the generated input (helpers/sample-layers.ts), never from portico's answers.
 */

const POINTS = samplePoints(1234);
const ZONES = sampleZones(90);
const PAGE = 500;

type Box = { xmin: number; ymin: number; xmax: number; ymax: number };
const inBox = (b: Box, p: SamplePoint) => p.x >= b.xmin && p.x <= b.xmax && p.y >= b.ymin && p.y <= b.ymax;
const R = 6378137;
const mercatorX = (lon: number) => (R * lon * Math.PI) / 180;
const mercatorY = (lat: number) => R * Math.log(Math.tan(Math.PI / 4 + (lat * Math.PI) / 360));

const attributesOf = (p: SamplePoint) => ({
  OBJECTID: p.objectId,
  name: p.name,
  n: p.n,
  score: p.score,
  seen: p.seen,
  kind: p.kind,
});

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

/**
 * Decoded polygon coordinates back on the input's whole degrees, each checked to lie within
 * `tolerance` of it (quantization moves vertices by at most half a grid step).
 */
function onWholeDegrees(polygons: number[][][][], tolerance: number): number[][][][] {
  return polygons.map((rings) =>
    rings.map((ring) =>
      ring.map((p) =>
        p.slice(0, 2).map((v) => {
          expect(Math.abs(v - Math.round(v))).toBeLessThanOrEqual(tolerance);
          return Math.round(v);
        }),
      ),
    ),
  );
}

describe("Esri arcgis-rest-feature-service 4.10.2 against hosted feature layers", () => {
  let portal: TestPortal;
  let session: ArcGISIdentityManager;
  let service: string;
  let points: string;
  let zones: string;

  beforeAll(async () => {
    portal = await startTestPortal();
    const owner = await portal.addUser("rest_js_owner", "org_publisher");
    const created = await createSampleService(
      portal,
      owner,
      "RestJsSites",
      { points: POINTS, zones: ZONES },
      { maxRecordCount: PAGE, capabilities: "Query,Create,Update,Delete,Editing" },
    );
    service = created.url;
    points = `${service}/0`;
    zones = `${service}/1`;
    session = await ArcGISIdentityManager.signIn({
      username: owner.username,
      password: owner.password,
      portal: portal.api,
    });
  }, 120_000);
  afterAll(async () => {
    await portal?.stop();
  });

  describe("service and layer resources", () => {
    it("reads the service with getService", async () => {
      const s = await getService({ url: service, authentication: session });
      expect(s.layers).toMatchObject([
        { id: 0, name: "Points" },
        { id: 1, name: "Zones" },
      ]);
      expect(s.maxRecordCount).toBe(PAGE);
      expect(s.capabilities).toBe("Query,Create,Update,Delete,Editing");
      expect(s.spatialReference).toMatchObject({ wkid: 4326 });
    });

    it("reads a layer with getLayer: fields, limits and the extent of what it holds", async () => {
      const layer = await getLayer({ url: points, authentication: session });
      expect(layer).toMatchObject({
        id: 0,
        name: "Points",
        type: "Feature Layer",
        geometryType: "esriGeometryPoint",
        objectIdField: "OBJECTID",
        maxRecordCount: PAGE,
        advancedQueryCapabilities: { supportsPagination: true, supportsOrderBy: true },
      });
      expect(layer.fields?.map((f) => [f.name, f.type])).toEqual([
        ["OBJECTID", "esriFieldTypeOID"],
        ...POINT_FIELDS.map((f) => [f.name, f.type]),
      ]);
      const xs = POINTS.map((p) => p.x);
      const ys = POINTS.map((p) => p.y);
      expect(layer.extent).toMatchObject({
        xmin: Math.min(...xs),
        ymin: Math.min(...ys),
        xmax: Math.max(...xs),
        ymax: Math.max(...ys),
        spatialReference: { wkid: 4326 },
      });
    });

    it("lists both layers with their fields with getAllLayersAndTables", async () => {
      // From a layer URL: the client finds the service's /layers itself.
      const all = await getAllLayersAndTables({ url: points, authentication: session });
      expect(all.tables).toEqual([]);
      expect(all.layers.map((l) => [l.id, l.name, l.geometryType])).toEqual([
        [0, "Points", "esriGeometryPoint"],
        [1, "Zones", "esriGeometryPolygon"],
      ]);
      expect((all.layers[1] as any).fields.map((f: any) => f.name)).toEqual([
        "OBJECTID",
        ...ZONE_FIELDS.map((f) => f.name),
      ]);
    });
  });

  describe("queryFeatures", () => {
    it("answers where, outFields and orderByFields", async () => {
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        where: "kind = 2 AND n < 0",
        outFields: ["name", "n"],
        orderByFields: "n DESC",
      })) as IQueryFeaturesResponse;
      const expected = POINTS.filter((p) => p.kind === 2 && p.n < 0).sort((a, b) => b.n - a.n);
      expect(r.features.map((f) => f.attributes)).toEqual(
        expected.map((p) => ({ OBJECTID: p.objectId, name: p.name, n: p.n })),
      );
      expect(r.features.map((f) => f.geometry)).toEqual(expected.map((p) => ({ x: p.x, y: p.y })));
      expect(r.fields?.map((f) => f.name)).toEqual(["OBJECTID", "name", "n"]);
      expect(r.exceededTransferLimit).toBeUndefined();
    });

    it("answers every attribute with outFields *, nulls and dates as given", async () => {
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        objectIds: [1, 12, 23],
        returnGeometry: false,
      })) as IQueryFeaturesResponse;
      expect(r.features).toEqual(
        [0, 11, 22].map((i) => ({ attributes: attributesOf(POINTS[i] as SamplePoint) })),
      );
    });

    it("pages with resultOffset and resultRecordCount, telling when more remain", async () => {
      const page = (resultOffset: number, resultRecordCount: number) =>
        queryFeatures({
          url: points,
          authentication: session,
          orderByFields: "OBJECTID",
          resultOffset,
          resultRecordCount,
          returnGeometry: false,
          outFields: ["OBJECTID"],
        }) as Promise<IQueryFeaturesResponse>;
      const middle = await page(100, 50);
      expect(middle.features.map((f) => f.attributes.OBJECTID)).toEqual(
        POINTS.slice(100, 150).map((p) => p.objectId),
      );
      expect(middle.exceededTransferLimit).toBe(true);
      const last = await page(POINTS.length - 30, 50);
      expect(last.features.map((f) => f.attributes.OBJECTID)).toEqual(
        POINTS.slice(-30).map((p) => p.objectId),
      );
      expect(last.exceededTransferLimit).toBeUndefined();
      // More than maxRecordCount asked: maxRecordCount given, and more remain.
      const capped = await page(0, 2000);
      expect(capped.features).toHaveLength(PAGE);
      expect(capped.exceededTransferLimit).toBe(true);
    });

    it("filters by an envelope in another spatial reference (inSR 3857)", async () => {
      const box = { xmin: -100.3, ymin: -20.005, xmax: -50.2, ymax: 10.005 };
      // Mercator maps longitude to x and latitude to y separately: the lon/lat box is exact.
      const geometry = {
        xmin: mercatorX(box.xmin),
        ymin: mercatorY(box.ymin),
        xmax: mercatorX(box.xmax),
        ymax: mercatorY(box.ymax),
      };
      const expected = POINTS.filter((p) => inBox(box, p)).map((p) => p.objectId);
      expect(expected.length).toBeGreaterThan(20);
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        // An envelope without its own spatial reference: inSR says which it is.
        geometry: geometry as IGeometry,
        geometryType: "esriGeometryEnvelope",
        inSR: "3857",
        spatialRel: "esriSpatialRelIntersects",
        outFields: ["OBJECTID"],
        orderByFields: "OBJECTID",
      })) as IQueryFeaturesResponse;
      expect(r.features.map((f) => f.attributes.OBJECTID)).toEqual(expected);

      const count = await queryFeatures({
        url: points,
        authentication: session,
        geometry: { ...geometry, spatialReference: { wkid: 102100 } },
        geometryType: "esriGeometryEnvelope",
        returnCountOnly: true,
      });
      expect(count).toEqual({ count: expected.length });
    });

    it("answers returnCountOnly, returnIdsOnly and returnExtentOnly", async () => {
      const where = "kind = 4 OR score IS NULL";
      const expected = POINTS.filter((p) => p.kind === 4 || p.score === null);
      expect(
        await queryFeatures({ url: points, authentication: session, where, returnCountOnly: true }),
      ).toEqual({
        count: expected.length,
      });
      const ids = (await queryFeatures({
        url: points,
        authentication: session,
        where,
        returnIdsOnly: true,
      })) as any;
      expect(ids.objectIdFieldName).toBe("OBJECTID");
      expect([...ids.objectIds].sort((a: number, b: number) => a - b)).toEqual(
        expected.map((p) => p.objectId),
      );
      const extent = (await queryFeatures({
        url: points,
        authentication: session,
        where,
        returnExtentOnly: true,
      })) as any;
      const bounds = {
        xmin: Math.min(...expected.map((p) => p.x)),
        ymin: Math.min(...expected.map((p) => p.y)),
        xmax: Math.max(...expected.map((p) => p.x)),
        ymax: Math.max(...expected.map((p) => p.y)),
      };
      expect(extent.extent).toEqual({ ...bounds, spatialReference: { wkid: 4326, latestWkid: 4326 } });
      // In GeoJSON the extent is the collection's bbox (what GDAL reads).
      const bbox = (await queryFeatures({
        url: points,
        authentication: session,
        where,
        returnExtentOnly: true,
        f: "geojson",
      })) as any;
      expect(bbox).toEqual({
        type: "FeatureCollection",
        features: [],
        bbox: [bounds.xmin, bounds.ymin, bounds.xmax, bounds.ymax],
      });
    });

    it("answers GeoJSON (f=geojson)", async () => {
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        where: "OBJECTID <= 3",
        f: "geojson",
      })) as any;
      expect(r.type).toBe("FeatureCollection");
      expect(r.features).toEqual(
        POINTS.slice(0, 3).map((p) => ({
          type: "Feature",
          id: p.objectId,
          geometry: { type: "Point", coordinates: [p.x, p.y] },
          properties: attributesOf(p),
        })),
      );
    });
  });

  describe("protocol buffers (f=pbf, decoded by rest-js)", () => {
    it("decodes points as ArcGIS JSON (pbf-as-arcgis): every attribute, coordinates on the default grid", async () => {
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        where: "OBJECTID <= 400",
        orderByFields: "OBJECTID",
        f: "pbf-as-arcgis",
      })) as IQueryFeaturesResponse;
      expect(r.geometryType).toBe("esriGeometryPoint");
      expect(r.features).toHaveLength(400);
      r.features.forEach((f, i) => {
        const p = POINTS[i] as SamplePoint;
        expect(f.attributes).toEqual(attributesOf(p));
        // The default grid of a geographic reference is 1e-9 degrees.
        expect(Math.abs((f.geometry as any).x - p.x)).toBeLessThanOrEqual(1e-9);
        expect(Math.abs((f.geometry as any).y - p.y)).toBeLessThanOrEqual(1e-9);
      });
    });

    it("decodes points as GeoJSON (pbf-as-geojson) in WGS 84", async () => {
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        where: "kind = 1",
        orderByFields: "OBJECTID",
        f: "pbf-as-geojson",
      })) as any;
      const expected = POINTS.filter((p) => p.kind === 1);
      expect(r.features.map((f: any) => f.id)).toEqual(expected.map((p) => p.objectId));
      r.features.forEach((f: any, i: number) => {
        const p = expected[i] as SamplePoint;
        expect(f.properties).toEqual(attributesOf(p));
        expect(f.geometry.type).toBe("Point");
        expect(Math.abs(f.geometry.coordinates[0] - p.x)).toBeLessThanOrEqual(1e-9);
        expect(Math.abs(f.geometry.coordinates[1] - p.y)).toBeLessThanOrEqual(1e-9);
      });
    });

    it("decodes points quantized as the Maps SDK asks (quantizationParameters), within half a step", async () => {
      const tolerance = 0.001;
      const r = (await queryFeatures({
        url: points,
        authentication: session,
        where: "OBJECTID <= 200",
        orderByFields: "OBJECTID",
        quantizationParameters: {
          mode: "view",
          originPosition: "upperLeft",
          tolerance,
          extent: { xmin: -180, ymin: -90, xmax: 180, ymax: 90, spatialReference: { wkid: 4326 } },
        },
        f: "pbf-as-arcgis",
      } as any)) as IQueryFeaturesResponse;
      expect(r.features).toHaveLength(200);
      let largest = 0;
      r.features.forEach((f, i) => {
        const p = POINTS[i] as SamplePoint;
        expect(f.attributes.OBJECTID).toBe(p.objectId);
        const dx = Math.abs((f.geometry as any).x - p.x);
        const dy = Math.abs((f.geometry as any).y - p.y);
        expect(dx).toBeLessThanOrEqual(tolerance / 2 + 1e-9);
        expect(dy).toBeLessThanOrEqual(tolerance / 2 + 1e-9);
        largest = Math.max(largest, dx, dy);
      });
      // On the coarser grid indeed: longitudes such as -179.376543211 are not on it.
      expect(largest).toBeGreaterThan(1e-5);
    });

    it("decodes polygons with holes and several parts (pbf-as-geojson)", async () => {
      const r = (await queryFeatures({
        url: zones,
        authentication: session,
        orderByFields: "OBJECTID",
        f: "pbf-as-geojson",
      })) as any;
      expect(r.features.map((f: any) => f.id)).toEqual(ZONES.map((z) => z.objectId));
      r.features.forEach((f: any, i: number) => {
        const z = ZONES[i] as SampleZone;
        expect(f.properties.label).toBe(z.label);
        // rest-js's decoder makes a MultiPolygon of any geometry with more than one ring.
        const polygons = f.geometry.type === "Polygon" ? [f.geometry.coordinates] : f.geometry.coordinates;
        expect(canonicalPolygons(onWholeDegrees(polygons, 1e-9))).toEqual(canonicalPolygons(z.polygons));
      });
    });
  });

  describe("queryAllFeatures", () => {
    it("pages through every feature (JSON), maxRecordCount at a time", async () => {
      const r = await queryAllFeatures({ url: points, authentication: session });
      expect(r.features.map((f) => f.attributes)).toEqual(POINTS.map(attributesOf));
      expect(r.features.map((f) => f.geometry)).toEqual(POINTS.map((p) => ({ x: p.x, y: p.y })));
    });

    it("pages through a where clause with a page size of its own", async () => {
      const expected = POINTS.filter((p) => p.name.startsWith("Café") || p.kind === 3);
      const r = await queryAllFeatures({
        url: points,
        authentication: session,
        where: "name LIKE 'Café%' OR kind = 3",
        outFields: ["name", "kind"],
        resultRecordCount: 77,
      });
      expect(r.features.map((f) => f.attributes)).toEqual(
        expected.map((p) => ({ OBJECTID: p.objectId, name: p.name, kind: p.kind })),
      );
    });

    it("pages through everything as GeoJSON and as protocol buffers", async () => {
      const geojson = (await queryAllFeatures({ url: points, authentication: session, f: "geojson" })) as any;
      expect(geojson.features.map((f: any) => f.id)).toEqual(POINTS.map((p) => p.objectId));
      const pbf = await queryAllFeatures({ url: points, authentication: session, f: "pbf-as-arcgis" });
      expect(pbf.features.map((f) => f.attributes)).toEqual(POINTS.map(attributesOf));
      pbf.features.forEach((f, i) => {
        const p = POINTS[i] as SamplePoint;
        expect(Math.abs((f.geometry as any).x - p.x)).toBeLessThanOrEqual(1e-9);
        expect(Math.abs((f.geometry as any).y - p.y)).toBeLessThanOrEqual(1e-9);
      });
    });
  });
});

describe("Esri arcgis-rest-feature-service 4.10.2 edits against a hosted feature layer", () => {
  let portal: TestPortal;
  let session: ArcGISIdentityManager;
  let url: string;
  /** What the layer should hold, by object id: the test's own model of the edits. */
  const model = new Map<number, SamplePoint>();
  const start = samplePoints(30);

  const extra = (objectId: number, i: number): SamplePoint => ({
    objectId,
    name: `added ${i}`,
    n: 5000 + i,
    score: i % 2 === 0 ? null : i * 0.5,
    seen: Date.UTC(2024, 1, 29, 12, 30, 15, 250) + i,
    kind: 4 - (i % 5),
    x: 12.5 + i / 4,
    y: 55.25 - i / 8,
  });

  async function expectLayerHoldsModel() {
    const all = await queryAllFeatures({ url, authentication: session, orderByFields: "OBJECTID" } as any);
    const expected = [...model.values()].sort((a, b) => a.objectId - b.objectId);
    expect(all.features.map((f) => f.attributes)).toEqual(expected.map(attributesOf));
    expect(all.features.map((f) => f.geometry)).toEqual(expected.map((p) => ({ x: p.x, y: p.y })));
  }

  beforeAll(async () => {
    portal = await startTestPortal();
    const owner = await portal.addUser("rest_js_editor", "org_publisher");
    const created = await createSampleService(
      portal,
      owner,
      "RestJsEdits",
      { points: start, zones: [] },
      { maxRecordCount: 1000, capabilities: "Query,Create,Update,Delete,Editing" },
    );
    url = `${created.url}/0`;
    for (const p of start) model.set(p.objectId, p);
    session = await ArcGISIdentityManager.signIn({
      username: owner.username,
      password: owner.password,
      portal: portal.api,
    });
  }, 60_000);
  afterAll(async () => {
    await portal?.stop();
  });

  it("adds features with addFeatures and reads one back with getFeature", async () => {
    const added = [extra(31, 0), extra(32, 1), extra(33, 2)];
    const r = await addFeatures({ url, authentication: session, features: added.map(pointFeature) });
    expect(r.addResults.map((a) => [a.objectId, a.success])).toEqual([
      [31, true],
      [32, true],
      [33, true],
    ]);
    for (const p of added) model.set(p.objectId, p);
    const feature = await getFeature({ url, id: 32, authentication: session });
    expect(feature).toEqual({
      attributes: attributesOf(added[1] as SamplePoint),
      geometry: { x: added[1]?.x, y: added[1]?.y },
    });
    await expectLayerHoldsModel();
  });

  it("updates attributes and geometries with updateFeatures, reporting a missing feature", async () => {
    const moved = { ...(model.get(5) as SamplePoint), x: -3.75, y: 40.4 };
    const renamed = {
      ...(model.get(31) as SamplePoint),
      name: "renamed",
      score: 99.5,
      seen: Date.UTC(1999, 11, 31),
    };
    const r = await updateFeatures({
      url,
      authentication: session,
      features: [
        { attributes: { OBJECTID: 5 }, geometry: { x: moved.x, y: moved.y } } as any,
        { attributes: { OBJECTID: 31, name: renamed.name, score: renamed.score, seen: renamed.seen } },
        { attributes: { OBJECTID: 999, name: "nobody" } },
      ],
      rollbackOnFailure: false,
    });
    expect(r.updateResults.map((u) => [u.objectId, u.success])).toEqual([
      [5, true],
      [31, true],
      [999, false],
    ]);
    expect(r.updateResults[2]?.error).toMatchObject({ code: expect.any(Number) });
    model.set(5, moved);
    model.set(31, renamed);
    expect(await getFeature({ url, id: 5, authentication: session })).toMatchObject({
      attributes: attributesOf(moved),
      geometry: { x: moved.x, y: moved.y },
    });
    await expectLayerHoldsModel();
  });

  it("adds, updates and deletes in one applyEdits", async () => {
    const added = extra(34, 3);
    const r = await applyEdits({
      url,
      authentication: session,
      adds: [pointFeature(added)],
      updates: [{ attributes: { OBJECTID: 2, kind: 0 } }],
      deletes: [3, 4],
    });
    expect(r.addResults.map((a) => [a.objectId, a.success])).toEqual([[34, true]]);
    expect(r.updateResults.map((u) => [u.objectId, u.success])).toEqual([[2, true]]);
    expect(r.deleteResults.map((d) => [d.objectId, d.success])).toEqual([
      [3, true],
      [4, true],
    ]);
    model.set(34, added);
    model.set(2, { ...(model.get(2) as SamplePoint), kind: 0 });
    model.delete(3);
    model.delete(4);
    await expectLayerHoldsModel();
  });

  it("rolls a failing applyEdits back whole", async () => {
    const r = await applyEdits({
      url,
      authentication: session,
      adds: [pointFeature(extra(0, 9))],
      updates: [{ attributes: { OBJECTID: 6, n: "not a number" } }],
      rollbackOnFailure: true,
    });
    expect(r.addResults.every((a) => !a.success)).toBe(true);
    expect(r.updateResults[0]?.success).toBe(false);
    await expectLayerHoldsModel();
  });

  it("deletes by object ids and by where with deleteFeatures", async () => {
    const byIds = await deleteFeatures({ url, authentication: session, objectIds: [1, 7] });
    expect(byIds.deleteResults.map((d) => [d.objectId, d.success])).toEqual([
      [1, true],
      [7, true],
    ]);
    model.delete(1);
    model.delete(7);
    const doomed = [...model.values()].filter((p) => p.kind === 3).map((p) => p.objectId);
    expect(doomed.length).toBeGreaterThan(2);
    const byWhere = await deleteFeatures({
      url,
      authentication: session,
      where: "kind = 3",
      // The options type wants object ids; rest-js sends an empty list as an empty parameter.
      objectIds: [],
    });
    expect(byWhere.deleteResults.map((d) => d.objectId).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(doomed);
    expect(byWhere.deleteResults.every((d) => d.success)).toBe(true);
    for (const id of doomed) model.delete(id);
    await expectLayerHoldsModel();
    await expect(getFeature({ url, id: 1, authentication: session })).rejects.toBeInstanceOf(
      ArcGISRequestError,
    );
  });
});
