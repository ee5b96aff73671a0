import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engine, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Hosted feature layers that hold data, through the REST API as clients call it. Every expected
 * answer is worked out by hand from the small layers below (or, for projections, from the
 * spherical Mercator formulas), not from the implementation.
 */

type User = { username: string; password: string; token: string };

const R = 6378137;
/** Web Mercator of a longitude/latitude, from the formulas (not from a projection library). */
const mercator = (lon: number, lat: number) => [
  (R * lon * Math.PI) / 180,
  R * Math.log(Math.tan(Math.PI / 4 + (lat * Math.PI) / 360)),
];

const CITY_FIELDS = [
  { name: "name", type: "esriFieldTypeString", alias: "Name", length: 20 },
  { name: "pop", type: "esriFieldTypeInteger", alias: "Population" },
  { name: "area", type: "esriFieldTypeDouble", alias: "Area" },
  {
    name: "kind",
    type: "esriFieldTypeString",
    alias: "Kind",
    length: 10,
    domain: {
      type: "codedValue",
      name: "kinds",
      codedValues: [
        { name: "Capital", code: "capital" },
        { name: "City", code: "city" },
      ],
    },
  },
  { name: "founded", type: "esriFieldTypeDate", alias: "Founded" },
];

/** [name, pop, area, kind, lon, lat]; object ids 1..5 in this order. */
const CITIES: [string, number, number, string, number, number][] = [
  ["Oslo", 700, 454.0, "capital", 10.75, 59.91],
  ["Bergen", 285, 465.3, "city", 5.32, 60.39],
  ["Suva", 93, 2048.0, "capital", 178.44, -18.14],
  ["Apia", 37, 60.0, "capital", -171.76, -13.83],
  ["Quito", 2800, 372.4, "capital", -78.47, -0.18],
];

const cityFeature = ([name, pop, area, kind, x, y]: (typeof CITIES)[number]) => ({
  attributes: { name, pop, area, kind, founded: Date.UTC(1000 + pop, 0, 1) },
  geometry: { x, y },
});

/** Clockwise outer rings are outer boundaries, counter-clockwise ones holes (Esri JSON). */
const PARK_A = {
  rings: [
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
};
const PARK_B = {
  rings: [
    [
      [20, 0],
      [20, 10],
      [30, 10],
      [30, 0],
      [20, 0],
    ],
  ],
};

describe("hosted feature layers: storage, query and edits", () => {
  let portal: TestPortal;
  let owner: User;
  let member: User;
  let services: string;
  let admin: string;
  let cities: string;
  let parks: string;

  const ids = (answer: { features: { attributes: Record<string, unknown> }[] }) =>
    answer.features.map((f) => f.attributes.OBJECTID);

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("fl_owner", "org_publisher");
    member = await portal.addUser("fl_member", "org_user");
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    services = `${server}/services`;
    admin = `${server}/admin/services`;
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: { name: "Places", capabilities: "Query" },
        outputType: "featureService",
      },
      owner.token,
    );
    expect(created.success).toBe(true);
    const added = await portal.post(
      `${admin}/Places/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            {
              name: "Cities",
              geometryType: "esriGeometryPoint",
              spatialReference: { wkid: 4326 },
              fields: CITY_FIELDS,
            },
            {
              name: "Parks",
              geometryType: "esriGeometryPolygon",
              fields: [{ name: "label", type: "esriFieldTypeString" }],
            },
          ],
        },
      },
      owner.token,
    );
    expect(added, JSON.stringify(added)).toMatchObject({ success: true });
    cities = `${services}/Places/FeatureServer/0`;
    parks = `${services}/Places/FeatureServer/1`;
    const edits = await portal.post(
      `${cities}/applyEdits`,
      { adds: CITIES.map(cityFeature), rollbackOnFailure: true },
      owner.token,
    );
    expect(
      edits.addResults.map((r: { objectId: number; success: boolean }) => [r.objectId, r.success]),
    ).toEqual([
      [1, true],
      [2, true],
      [3, true],
      [4, true],
      [5, true],
    ]);
    const parkEdits = await portal.post(
      `${parks}/addFeatures`,
      {
        features: [
          { attributes: { label: "A" }, geometry: PARK_A },
          { attributes: { label: "B" }, geometry: PARK_B },
        ],
      },
      owner.token,
    );
    expect(parkEdits.addResults.map((r: { success: boolean }) => r.success)).toEqual([true, true]);
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("describes the layer: the object id field added, formats, capabilities, extent of its features", async () => {
    const layer = await portal.get(cities, {}, owner.token);
    expect(layer).toMatchObject({
      id: 0,
      name: "Cities",
      type: "Feature Layer",
      geometryType: "esriGeometryPoint",
      objectIdField: "OBJECTID",
      supportedQueryFormats: "JSON, geoJSON, PBF",
      advancedQueryCapabilities: {
        supportsPagination: true,
        supportsStatistics: true,
        supportsOrderBy: true,
      },
      extent: { xmin: -171.76, ymin: -18.14, xmax: 178.44, ymax: 60.39, spatialReference: { wkid: 4326 } },
    });
    expect(layer.fields.map((f: { name: string; type: string }) => [f.name, f.type])).toEqual([
      ["OBJECTID", "esriFieldTypeOID"],
      ["name", "esriFieldTypeString"],
      ["pop", "esriFieldTypeInteger"],
      ["area", "esriFieldTypeDouble"],
      ["kind", "esriFieldTypeString"],
      ["founded", "esriFieldTypeDate"],
    ]);
    expect(layer.editingInfo.lastEditDate).toEqual(expect.any(Number));
  });

  it("counts, filters with where, and returns geometry by default", async () => {
    expect(await portal.get(`${cities}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).toEqual(
      { count: 5 },
    );
    const big = await portal.get(`${cities}/query`, { where: "pop > 100", outFields: "*" }, owner.token);
    expect(ids(big)).toEqual([1, 2, 5]);
    expect(big.features[0]).toEqual({
      attributes: {
        OBJECTID: 1,
        name: "Oslo",
        pop: 700,
        area: 454,
        kind: "capital",
        founded: Date.UTC(1700, 0, 1),
      },
      geometry: { x: 10.75, y: 59.91 },
    });
    expect(big.geometryType).toBe("esriGeometryPoint");
    expect(big.spatialReference).toMatchObject({ wkid: 4326 });
    const named = await portal.get(
      `${cities}/query`,
      { where: "UPPER(name) LIKE 'B%'", outFields: "name" },
      owner.token,
    );
    expect(named.features).toEqual([
      { attributes: { OBJECTID: 2, name: "Bergen" }, geometry: { x: 5.32, y: 60.39 } },
    ]);
    const noGeometry = await portal.get(
      `${cities}/query`,
      { objectIds: "3,4", returnGeometry: false },
      owner.token,
    );
    expect(noGeometry.features).toEqual([{ attributes: { OBJECTID: 3 } }, { attributes: { OBJECTID: 4 } }]);
  });

  it("filters by envelope, also across the antimeridian, and by point in a polygon with a hole", async () => {
    const norway = await portal.get(
      `${cities}/query`,
      { geometry: "0,50,20,70", geometryType: "esriGeometryEnvelope", inSR: 4326, returnIdsOnly: true },
      owner.token,
    );
    expect(norway).toEqual({ objectIdFieldName: "OBJECTID", objectIds: [1, 2] });
    // Oslo lies at x 10.75: an envelope ending 1e-7 short of it misses it, on either engine
    // (PostgreSQL's own boxes would take it, comparing with a tolerance of 1e-6).
    const short = await portal.get(
      `${cities}/query`,
      {
        geometry: "0,50,10.7499999,70",
        geometryType: "esriGeometryEnvelope",
        inSR: 4326,
        returnIdsOnly: true,
      },
      owner.token,
    );
    expect(short.objectIds).toEqual([2]);
    const pacific = await portal.get(
      `${cities}/query`,
      {
        geometry: JSON.stringify({ xmin: 170, ymin: -30, xmax: -165, ymax: 0 }),
        geometryType: "esriGeometryEnvelope",
        inSR: 4326,
      },
      owner.token,
    );
    expect(ids(pacific)).toEqual([3, 4]);
    const inHole = await portal.get(
      `${parks}/query`,
      { geometry: "5,5", geometryType: "esriGeometryPoint", outFields: "label" },
      owner.token,
    );
    expect(inHole.features).toEqual([]);
    const inPark = await portal.get(
      `${parks}/query`,
      { geometry: "2,2", geometryType: "esriGeometryPoint", outFields: "label", returnGeometry: false },
      owner.token,
    );
    expect(inPark.features).toEqual([{ attributes: { OBJECTID: 1, label: "A" } }]);
    const both = await portal.get(
      `${parks}/query`,
      { geometry: "9,9,21,11", returnIdsOnly: true },
      owner.token,
    );
    expect(both.objectIds).toEqual([1, 2]);
    const between = await portal.get(
      `${parks}/query`,
      { geometry: "11,0,19,10", returnIdsOnly: true },
      owner.token,
    );
    expect(between.objectIds).toEqual([]);
  });

  it("projects to outSR (Web Mercator by its Esri and EPSG codes)", async () => {
    for (const outSR of ["102100", "3857", '{"wkid":102100}']) {
      const answer = await portal.get(`${cities}/query`, { objectIds: "1", outSR }, owner.token);
      const [x, y] = mercator(10.75, 59.91);
      expect(answer.features[0].geometry.x).toBeCloseTo(x as number, 3);
      expect(answer.features[0].geometry.y).toBeCloseTo(y as number, 3);
      expect(answer.spatialReference).toMatchObject({ latestWkid: 3857 });
    }
  });

  it("orders and pages, saying when the transfer limit was exceeded", async () => {
    const page = (offset: number) =>
      portal.get(
        `${cities}/query`,
        {
          where: "1=1",
          orderByFields: "pop DESC",
          resultOffset: offset,
          resultRecordCount: 2,
          returnGeometry: false,
        },
        owner.token,
      );
    const first = await page(0);
    expect(ids(first)).toEqual([5, 1]);
    expect(first.exceededTransferLimit).toBe(true);
    const second = await page(2);
    expect(ids(second)).toEqual([2, 3]);
    expect(second.exceededTransferLimit).toBe(true);
    const last = await page(4);
    expect(ids(last)).toEqual([4]);
    expect(last.exceededTransferLimit).toBeUndefined();
  });

  it("answers extents, distinct values and statistics", async () => {
    const extent = await portal.get(
      `${cities}/query`,
      { where: "1=1", returnExtentOnly: true, returnCountOnly: true },
      owner.token,
    );
    expect(extent).toEqual({
      count: 5,
      extent: {
        xmin: -171.76,
        ymin: -18.14,
        xmax: 178.44,
        ymax: 60.39,
        spatialReference: { wkid: 4326, latestWkid: 4326 },
      },
    });
    const distinct = await portal.get(
      `${cities}/query`,
      { where: "1=1", outFields: "kind", returnDistinctValues: true, returnGeometry: false },
      owner.token,
    );
    expect(distinct.features).toEqual([
      { attributes: { kind: "capital" } },
      { attributes: { kind: "city" } },
    ]);
    const stats = await portal.get(
      `${cities}/query`,
      {
        where: "1=1",
        groupByFieldsForStatistics: "kind",
        outStatistics: JSON.stringify([
          { statisticType: "sum", onStatisticField: "pop", outStatisticFieldName: "total" },
          { statisticType: "count", onStatisticField: "OBJECTID", outStatisticFieldName: "n" },
          { statisticType: "max", onStatisticField: "area", outStatisticFieldName: "largest" },
        ]),
      },
      owner.token,
    );
    expect(stats.features).toEqual([
      { attributes: { kind: "capital", total: 700 + 93 + 37 + 2800, n: 4, largest: 2048 } },
      { attributes: { kind: "city", total: 285, n: 1, largest: 465.3 } },
    ]);
  });

  it("answers GeoJSON in longitude/latitude", async () => {
    const res = await fetch(`${cities}/query?where=pop%3C100&outFields=name&f=geojson&token=${owner.token}`);
    expect(res.headers.get("content-type")).toContain("application/geo+json");
    const answer = await res.json();
    expect(answer).toEqual({
      type: "FeatureCollection",
      features: [
        {
          type: "Feature",
          id: 3,
          geometry: { type: "Point", coordinates: [178.44, -18.14] },
          properties: { OBJECTID: 3, name: "Suva" },
        },
        {
          type: "Feature",
          id: 4,
          geometry: { type: "Point", coordinates: [-171.76, -13.83] },
          properties: { OBJECTID: 4, name: "Apia" },
        },
      ],
    });
  });

  it("refuses bad where clauses, fields and geometries naming the parameter, and changes nothing", async () => {
    const unknown = await portal.get(`${cities}/query`, { where: "nope = 1" }, owner.token);
    expect(unknown.error).toMatchObject({ code: 400 });
    expect(JSON.stringify(unknown.error)).toContain("where");
    expect(JSON.stringify(unknown.error)).toContain("nope");
    const injection = await portal.get(
      `${cities}/query`,
      { where: "1=1; DELETE FROM items --" },
      owner.token,
    );
    expect(injection.error.code).toBe(400);
    const badField = await portal.get(
      `${cities}/query`,
      { where: "1=1", outFields: "name,height" },
      owner.token,
    );
    expect(JSON.stringify(badField.error)).toContain("outFields");
    const badGeometry = await portal.get(`${cities}/query`, { geometry: "{not json" }, owner.token);
    expect(JSON.stringify(badGeometry.error)).toContain("geometry");
    const badSr = await portal.get(`${cities}/query`, { where: "1=1", outSR: "999999" }, owner.token);
    expect(JSON.stringify(badSr.error)).toContain("outSR");
    expect(await portal.get(`${cities}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).toEqual(
      { count: 5 },
    );
  });

  it("rolls back a whole batch when one feature fails, and keeps the good ones without rollbackOnFailure", async () => {
    const batch = [
      { attributes: { name: "Lima", pop: 10000, kind: "capital" }, geometry: { x: -77.04, y: -12.05 } },
      { attributes: { name: "Nowhere", pop: "many", kind: "capital" }, geometry: { x: 0, y: 0 } },
      { attributes: { name: "Cusco", pop: 430, kind: "town" }, geometry: { x: -71.97, y: -13.53 } },
    ];
    const undone = await portal.post(
      `${cities}/applyEdits`,
      { adds: batch, rollbackOnFailure: true },
      owner.token,
    );
    expect(
      undone.addResults.map((r: { success: boolean; error?: { code: number } }) => [
        r.success,
        r.error?.code,
      ]),
    ).toEqual([
      [false, 1003],
      [false, 1016],
      [false, 1016],
    ]);
    expect(await portal.get(`${cities}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).toEqual(
      { count: 5 },
    );
    const partial = await portal.post(
      `${cities}/applyEdits`,
      { adds: batch, rollbackOnFailure: false },
      owner.token,
    );
    expect(
      partial.addResults.map((r: { success: boolean; objectId: number | null }) => [r.success, r.objectId]),
    ).toEqual([
      [true, 6],
      [false, null],
      [false, null],
    ]);
    const lima = await portal.get(
      `${cities}/query`,
      { where: "name = 'Lima'", outFields: "pop" },
      owner.token,
    );
    expect(lima.features).toEqual([
      { attributes: { OBJECTID: 6, pop: 10000 }, geometry: { x: -77.04, y: -12.05 } },
    ]);
    // Object ids are never reused: the rolled-back batch took none that a later add could not have.
    // A missing id is a failure like any other: with rollbackOnFailure (the default) nothing is deleted.
    const kept = await portal.post(`${cities}/deleteFeatures`, { objectIds: "6,99" }, owner.token);
    expect(
      kept.deleteResults.map((r: { success: boolean; error?: { code: number } }) => [
        r.success,
        r.error?.code,
      ]),
    ).toEqual([
      [false, 1003],
      [false, 1011],
    ]);
    expect(await portal.get(`${cities}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).toEqual(
      { count: 6 },
    );
    const deleted = await portal.post(
      `${cities}/deleteFeatures`,
      { objectIds: "6,99", rollbackOnFailure: false },
      owner.token,
    );
    expect(deleted.deleteResults).toEqual([
      { objectId: 6, uniqueId: 6, globalId: null, success: true },
      {
        objectId: 99,
        uniqueId: 99,
        globalId: null,
        success: false,
        error: { code: 1011, description: "Object is missing." },
      },
    ]);
  });

  it("refuses coordinates beyond any spatial reference, which no answer could quantize", async () => {
    const far = await portal.post(
      `${cities}/addFeatures`,
      { features: [{ attributes: { name: "Far" }, geometry: { x: 1e300, y: 1e300 } }] },
      owner.token,
    );
    expect(far.addResults[0]).toMatchObject({ success: false, error: { code: 1015 } });
    expect(
      await portal.get(`${cities}/query`, { where: "name = 'Far'", returnCountOnly: true }, owner.token),
    ).toEqual({
      count: 0,
    });
  });

  it("updates attributes and geometry, and moves the layer's lastEditDate", async () => {
    const before = (await portal.get(cities, {}, owner.token)).editingInfo.lastEditDate;
    const updated = await portal.post(
      `${cities}/updateFeatures`,
      { features: [{ attributes: { OBJECTID: 2, pop: 290 }, geometry: { x: 5.33, y: 60.4 } }] },
      owner.token,
    );
    expect(updated.updateResults).toEqual([{ objectId: 2, uniqueId: 2, globalId: null, success: true }]);
    const bergen = await portal.get(`${cities}/2`, {}, owner.token);
    expect(bergen.feature).toMatchObject({
      attributes: { OBJECTID: 2, name: "Bergen", pop: 290 },
      geometry: { x: 5.33, y: 60.4 },
    });
    const after = (await portal.get(cities, {}, owner.token)).editingInfo.lastEditDate;
    expect(after).toBeGreaterThan(before);
    // Put it back for the other tests.
    await portal.post(
      `${cities}/updateFeatures`,
      { features: [{ attributes: { OBJECTID: 2, pop: 285 }, geometry: { x: 5.32, y: 60.39 } }] },
      owner.token,
    );
  });

  it("applies service-level edits to several layers in one transaction", async () => {
    const edits = [
      {
        id: 0,
        adds: [{ attributes: { name: "Nuuk", pop: 19, kind: "capital" }, geometry: { x: -51.72, y: 64.18 } }],
      },
      { id: 1, adds: [{ attributes: { label: "broken" }, geometry: { x: 1, y: 1 } }] },
    ];
    const undone = await portal.post(`${services}/Places/FeatureServer/applyEdits`, { edits }, owner.token);
    expect(
      undone.map((l: { id: number; addResults: { success: boolean }[] }) => [l.id, l.addResults[0]?.success]),
    ).toEqual([
      [0, false],
      [1, false],
    ]);
    expect(
      await portal.get(`${cities}/query`, { where: "name = 'Nuuk'", returnCountOnly: true }, owner.token),
    ).toEqual({ count: 0 });
  });

  it("hides an unshared layer from others, and lets members query but not edit once shared", async () => {
    const anonymous = await portal.get(`${cities}/query`, { where: "1=1" });
    expect(anonymous.error.code).toBe(499);
    const anonymousEdit = await portal.post(`${cities}/applyEdits`, { deletes: "1" });
    expect(anonymousEdit.error.code).toBe(499);
    const unseen = await portal.get(`${cities}/query`, { where: "1=1" }, member.token);
    expect(unseen.error.code).toBe(400);
    const item = (await portal.get(`${services}/Places/FeatureServer`, {}, owner.token)).serviceItemId;
    const shared = await portal.post(
      `/content/users/${owner.username}/shareItems`,
      { items: item, org: true },
      owner.token,
    );
    expect(shared.results[0].success).toBe(true);
    expect(
      await portal.get(`${cities}/query`, { where: "1=1", returnCountOnly: true }, member.token),
    ).toEqual({ count: 5 });
    const refused = await portal.post(`${cities}/deleteFeatures`, { objectIds: "1" }, member.token);
    expect(refused.error.code).toBe(403);
    expect(
      await portal.get(`${cities}/query`, { where: "1=1", returnCountOnly: true }, member.token),
    ).toEqual({ count: 5 });
  });

  it("queries several layers at once with the service's query and layerDefs", async () => {
    const answer = await portal.get(
      `${services}/Places/FeatureServer/query`,
      { layerDefs: JSON.stringify({ "0": "pop < 100", "1": "label = 'B'" }), returnCountOnly: true },
      owner.token,
    );
    expect(answer).toEqual({
      layers: [
        { id: 0, count: 2 },
        { id: 1, count: 1 },
      ],
    });
    const bad = await portal.get(
      `${services}/Places/FeatureServer/query`,
      { layerDefs: "{oops" },
      owner.token,
    );
    expect(JSON.stringify(bad.error)).toContain("layerDefs");
  });

  it("tracks editors and, with ownership-based access control, lets others change only their own features", async () => {
    await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: {
          name: "Tracked",
          capabilities: "Create,Delete,Query,Update,Editing",
          editorTrackingInfo: {
            enableEditorTracking: true,
            enableOwnershipAccessControl: true,
            allowOthersToQuery: true,
            allowOthersToUpdate: false,
            allowOthersToDelete: false,
          },
        },
        outputType: "featureService",
      },
      owner.token,
    );
    const added = await portal.post(
      `${admin}/Tracked/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            {
              name: "Notes",
              geometryType: "esriGeometryPoint",
              fields: [{ name: "note", type: "esriFieldTypeString" }],
            },
          ],
        },
      },
      owner.token,
    );
    expect(added.success).toBe(true);
    const layer = `${services}/Tracked/FeatureServer/0`;
    const description = await portal.get(layer, {}, owner.token);
    expect(description.editFieldsInfo).toEqual({
      creationDateField: "CreationDate",
      creatorField: "Creator",
      editDateField: "EditDate",
      editorField: "Editor",
    });
    const item = (await portal.get(`${services}/Tracked/FeatureServer`, {}, owner.token)).serviceItemId;
    await portal.post(`/content/users/${owner.username}/shareItems`, { items: item, org: true }, owner.token);
    const mine = await portal.post(
      `${layer}/addFeatures`,
      { features: [{ attributes: { note: "owner's" }, geometry: { x: 1, y: 1 } }] },
      owner.token,
    );
    const theirs = await portal.post(
      `${layer}/addFeatures`,
      { features: [{ attributes: { note: "member's" }, geometry: { x: 2, y: 2 } }] },
      member.token,
    );
    expect(theirs.addResults[0].success).toBe(true);
    const rows = await portal.get(
      `${layer}/query`,
      { where: "1=1", outFields: "note,Creator,Editor", returnGeometry: false },
      owner.token,
    );
    expect(rows.features.map((f: { attributes: Record<string, unknown> }) => f.attributes)).toEqual([
      {
        OBJECTID: mine.addResults[0].objectId,
        note: "owner's",
        Creator: owner.username,
        Editor: owner.username,
      },
      {
        OBJECTID: theirs.addResults[0].objectId,
        note: "member's",
        Creator: member.username,
        Editor: member.username,
      },
    ]);
    // The member may change what it created, not the owner's feature (which it is told is missing).
    const other = await portal.post(
      `${layer}/updateFeatures`,
      {
        features: [{ attributes: { OBJECTID: mine.addResults[0].objectId, note: "taken" } }],
        rollbackOnFailure: false,
      },
      member.token,
    );
    expect(other.updateResults[0]).toMatchObject({ success: false, error: { code: 1011 } });
    const own = await portal.post(
      `${layer}/updateFeatures`,
      { features: [{ attributes: { OBJECTID: theirs.addResults[0].objectId, note: "edited" } }] },
      member.token,
    );
    expect(own.updateResults[0].success).toBe(true);
    const gone = await portal.post(
      `${layer}/deleteFeatures`,
      { objectIds: String(mine.addResults[0].objectId) },
      member.token,
    );
    expect(gone.deleteResults[0]).toMatchObject({ success: false });
    const after = await portal.get(
      `${layer}/query`,
      { where: "1=1", outFields: "note", returnGeometry: false },
      owner.token,
    );
    expect(after.features.map((f: { attributes: { note: string } }) => f.attributes.note)).toEqual([
      "owner's",
      "edited",
    ]);
  });

  it("adds the editor-tracking fields, with their columns, to layers that exist when tracking is turned on", async () => {
    await portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name: "LateTracking" }, outputType: "featureService" },
      owner.token,
    );
    await portal.post(
      `${admin}/LateTracking/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ name: "Pts", geometryType: "esriGeometryPoint" }] } },
      owner.token,
    );
    const layer = `${services}/LateTracking/FeatureServer/0`;
    await portal.post(
      `${layer}/addFeatures`,
      { features: [{ attributes: {}, geometry: { x: 1, y: 1 } }] },
      owner.token,
    );
    const updated = await portal.post(
      `${admin}/LateTracking/FeatureServer/updateDefinition`,
      { updateDefinition: { editorTrackingInfo: { enableEditorTracking: true } } },
      owner.token,
    );
    expect(updated.success).toBe(true);
    const description = await portal.get(layer, {}, owner.token);
    expect(description.fields.map((f: { name: string }) => f.name)).toEqual([
      "OBJECTID",
      "CreationDate",
      "Creator",
      "EditDate",
      "Editor",
    ]);
    await portal.post(
      `${layer}/addFeatures`,
      { features: [{ attributes: {}, geometry: { x: 2, y: 2 } }] },
      owner.token,
    );
    const rows = await portal.get(
      `${layer}/query`,
      { where: "1=1", outFields: "Creator", returnGeometry: false },
      owner.token,
    );
    expect(rows.features).toEqual([
      { attributes: { OBJECTID: 1, Creator: null } },
      { attributes: { OBJECTID: 2, Creator: owner.username } },
    ]);
  });

  it("refuses a deleteFeatures by where that matches more features than one request may delete, deleting nothing", async () => {
    await portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name: "Many" }, outputType: "featureService" },
      owner.token,
    );
    await portal.post(
      `${admin}/Many/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ name: "Pts", geometryType: "esriGeometryPoint" }] } },
      owner.token,
    );
    const layer = `${services}/Many/FeatureServer/0`;
    const points = (n: number, from: number) =>
      Array.from({ length: n }, (_, i) => ({ attributes: {}, geometry: { x: (from + i) % 180, y: 0 } }));
    for (const [n, from] of [
      [6000, 0],
      [4001, 6000],
    ] as const) {
      const added = await portal.post(`${layer}/addFeatures`, { features: points(n, from) }, owner.token);
      expect(added.addResults).toHaveLength(n);
    }
    const refused = await portal.post(`${layer}/deleteFeatures`, { where: "1=1" }, owner.token);
    expect(refused.error).toMatchObject({ code: 400 });
    expect(JSON.stringify(refused.error)).toContain("where");
    expect(JSON.stringify(refused.error)).toContain("10001");
    expect(await portal.get(`${layer}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).toEqual({
      count: 10001,
    });
    const some = await portal.post(`${layer}/deleteFeatures`, { where: "OBJECTID <= 10000" }, owner.token);
    expect(some.deleteResults).toHaveLength(10000);
    expect(await portal.get(`${layer}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).toEqual({
      count: 1,
    });
  });

  it("drops a layer's data with deleteFromDefinition and the service's with its item", async () => {
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name: "Scratch" }, outputType: "featureService" },
      owner.token,
    );
    await portal.post(
      `${admin}/Scratch/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ name: "Pts", geometryType: "esriGeometryPoint" }] } },
      owner.token,
    );
    const layer = `${services}/Scratch/FeatureServer/0`;
    await portal.post(
      `${layer}/addFeatures`,
      { features: [{ attributes: {}, geometry: { x: 1, y: 2 } }] },
      owner.token,
    );
    const db = portal.portico.services.db;
    const tables = async () =>
      (
        await db.kysely
          .selectFrom("feature_layers")
          .select(["table_name"])
          .where("item_id", "=", created.itemId)
          .execute()
      ).map((r) => r.table_name);
    expect(await tables()).toEqual([`fl_${created.itemId}_0`]);
    // The table itself, not only its entry, goes with the layer.
    const exists = async (table: string) =>
      engine === "postgres"
        ? (await sql<{ t: string | null }>`SELECT to_regclass(${table})::text AS t`.execute(db.kysely))
            .rows[0]?.t !== null
        : (
            await sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE name = ${table}`.execute(
              db.kysely,
            )
          ).rows[0]?.n === 1;
    expect(await exists(`fl_${created.itemId}_0`)).toBe(true);
    await portal.post(
      `${admin}/Scratch/FeatureServer/deleteFromDefinition`,
      { deleteFromDefinition: { layers: [{ id: 0 }] } },
      owner.token,
    );
    expect(await tables()).toEqual([]);
    expect(await exists(`fl_${created.itemId}_0`)).toBe(false);
    const readded = await portal.post(
      `${admin}/Scratch/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ name: "Again", geometryType: "esriGeometryPoint" }] } },
      owner.token,
    );
    // The freed id is given again, to a new, empty layer.
    expect(readded.layers).toEqual([{ name: "Again", id: 0 }]);
    const again = await portal.get(
      `${services}/Scratch/FeatureServer/0/query`,
      { where: "1=1", returnCountOnly: true },
      owner.token,
    );
    expect(again).toEqual({ count: 0 });
    const deleted = await portal.post(
      `/content/users/${owner.username}/items/${created.itemId}/delete`,
      {},
      owner.token,
    );
    expect(deleted.success).toBe(true);
    expect(await tables()).toEqual([]);
    expect(await exists(`fl_${created.itemId}_0`)).toBe(false);
  });
});
