import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engine, form, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Hosted feature layers against a hostile caller: values at the edges of what each parameter
 * takes get a 400 naming the parameter (never a 500), and work stays bounded. Expected answers
 * are worked out by hand from the small layers below.
 */

type User = { username: string; password: string; token: string };

/** Ten points, object ids 1..10: `pop` is the object id times 10, at (id, id) in WGS 84. */
const POINTS = Array.from({ length: 10 }, (_, i) => ({
  attributes: { name: `p${i + 1}`, pop: (i + 1) * 10 },
  geometry: { x: i + 1, y: i + 1 },
}));

describe("hosted feature layers: hostile input", () => {
  let portal: TestPortal;
  let owner: User;
  let layer: string;
  let table: string;

  /** A POST whose answer is returned whatever its status, with the status. */
  const post = async (url: string, params: Record<string, unknown>, token?: string) => {
    const res = await fetch(url, {
      method: "POST",
      body: form({ f: "json", ...params, ...(token ? { token } : {}) }),
    });
    const text = await res.text();
    return {
      status: res.status,
      type: res.headers.get("content-type") ?? "",
      text,
      json: () => JSON.parse(text),
    };
  };

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("hx_owner", "org_publisher");
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: { name: "Hostile", capabilities: "Create,Delete,Query,Update,Editing" },
        outputType: "featureService",
      },
      owner.token,
    );
    expect(created.success).toBe(true);
    const added = await portal.post(
      `${server}/admin/services/Hostile/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            {
              name: "Points",
              geometryType: "esriGeometryPoint",
              spatialReference: { wkid: 4326 },
              fields: [
                { name: "name", type: "esriFieldTypeString", length: 20 },
                { name: "pop", type: "esriFieldTypeInteger" },
              ],
            },
          ],
          tables: [{ name: "Rows", fields: [{ name: "v", type: "esriFieldTypeInteger" }] }],
        },
      },
      owner.token,
    );
    expect(added, JSON.stringify(added)).toMatchObject({ success: true });
    layer = `${server}/services/Hostile/FeatureServer/0`;
    table = `${server}/services/Hostile/FeatureServer/1`;
    const edits = await portal.post(`${layer}/addFeatures`, { features: POINTS }, owner.token);
    expect(edits.addResults.every((r: { success: boolean }) => r.success)).toBe(true);
    const rows = await portal.post(
      `${table}/addFeatures`,
      { features: [{ attributes: { v: 1 } }] },
      owner.token,
    );
    expect(rows.addResults[0].success).toBe(true);
  });

  afterAll(async () => {
    await portal?.stop();
  });

  it("answers a where of thousands of ORs (SQLite nests a flat chain as deep as it is long)", async () => {
    // pop = 1 OR pop = 2 … OR pop = 3000: pop is 10..100, so the ten points match.
    const where = Array.from({ length: 3000 }, (_, i) => `pop = ${i + 1}`).join(" OR ");
    const answer = await post(`${layer}/query`, { where, returnCountOnly: true }, owner.token);
    expect(answer.json()).toEqual({ count: 10 });
    const and = Array.from({ length: 3000 }, () => "pop > 0").join(" AND ");
    expect((await post(`${layer}/query`, { where: and, returnCountOnly: true }, owner.token)).json()).toEqual(
      {
        count: 10,
      },
    );
  });

  it("takes object id lists longer than either engine binds in one statement", async () => {
    // 40,000 and 70,000 ids (over SQLite's 32,766 and PostgreSQL's 65,535 parameters), of which
    // 3, 5 and 7 exist.
    for (const n of [40_000, 70_000]) {
      const objectIds = [3, 5, 7, ...Array.from({ length: n - 3 }, (_, i) => 1000 + i)].join(",");
      const answer = await post(`${layer}/query`, { objectIds, returnIdsOnly: true }, owner.token);
      expect(answer.json()).toEqual({ objectIdFieldName: "OBJECTID", objectIds: [3, 5, 7] });
      const counted = await post(
        `${layer}/query`,
        { objectIds, where: "pop > 40", returnCountOnly: true },
        owner.token,
      );
      expect(counted.json()).toEqual({ count: 2 });
    }
    // deleteFeatures by where and object ids reads the same list: nothing matches, nothing goes.
    const objectIds = Array.from({ length: 40_000 }, (_, i) => 1000 + i).join(",");
    const none = await post(`${layer}/deleteFeatures`, { where: "1=1", objectIds }, owner.token);
    expect(none.json()).toEqual({ deleteResults: [] });
  });

  it("refuses an envelope whose spans overflow a double, naming geometry, with or without a distance", async () => {
    const huge = { xmin: -1e308, ymin: -1e308, xmax: 1e308, ymax: 1e308 };
    for (const [params, named] of [
      [{ geometry: JSON.stringify({ ...huge, spatialReference: { wkid: 3857 } }) }, "geometry"],
      [{ geometry: JSON.stringify(huge), inSR: "32633" }, "geometry"],
      // Buffering is what fails: the parameter named is the distance, as for any buffer that cannot be made.
      [{ geometry: JSON.stringify(huge), distance: 1000, units: "esriSRUnit_Meter" }, "distance"],
    ] as const) {
      const answer = (await post(`${layer}/query`, { ...params, returnCountOnly: true }, owner.token)).json();
      expect(answer.error, JSON.stringify(answer)).toMatchObject({ code: 400 });
      expect(answer.error.message).toContain(`'${named}'`);
    }
    const deleted = (
      await post(
        `${layer}/deleteFeatures`,
        { geometry: JSON.stringify({ ...huge, spatialReference: { wkid: 3857 } }) },
        owner.token,
      )
    ).json();
    expect(deleted.error).toMatchObject({ code: 400 });
    expect(
      (await post(`${layer}/query`, { where: "1=1", returnCountOnly: true }, owner.token)).json(),
    ).toEqual({
      count: 10,
    });
  });

  it("refuses a quantization tolerance too fine for the coordinates, naming quantizationParameters", async () => {
    // Point (1, 1) is 1e300 steps of 1e-300 from the origin (0, 0): no integer holds that.
    const quantizationParameters = JSON.stringify({
      mode: "view",
      tolerance: 1e-300,
      originPosition: "upperLeft",
      extent: { xmin: 0, ymin: 0, xmax: 1, ymax: 1 },
    });
    for (const f of ["pbf", "json"]) {
      const answer = await post(
        `${layer}/query`,
        { where: "1=1", outFields: "*", quantizationParameters, f },
        owner.token,
      );
      expect(answer.type).toContain("json");
      expect(answer.json().error, answer.text).toMatchObject({ code: 400 });
      expect(answer.json().error.message).toContain("'quantizationParameters'");
    }
    // A tolerance of 1 puts point (3, 3) at column 3, row 1 - 3 = -2 (rows grow downwards).
    const coarse = JSON.stringify({
      mode: "edit",
      tolerance: 1,
      originPosition: "upperLeft",
      extent: { xmin: 0, ymin: 0, xmax: 1, ymax: 1 },
    });
    const answer = await post(
      `${layer}/query`,
      { objectIds: "3", quantizationParameters: coarse, f: "json" },
      owner.token,
    );
    expect(answer.json().features).toEqual([{ attributes: { OBJECTID: 3 }, geometry: { x: 3, y: -2 } }]);
  });

  it("answers returnCentroid on a table without a shape to take it from", async () => {
    for (const f of ["json", "pbf"]) {
      const answer = await post(`${table}/query`, { where: "1=1", returnCentroid: true, f }, owner.token);
      expect(answer.status).toBe(200);
      if (f === "json") expect(answer.json().features).toEqual([{ attributes: { OBJECTID: 1 } }]);
      else expect(answer.type).toContain("protobuf");
    }
  });

  it("answers a where whose arithmetic overflows without an internal error", async () => {
    for (const where of ["pop * 99999999999 * 99999999999 > 1", "pop * 1.5e308 * 10 > 1"]) {
      const answer = (await post(`${layer}/query`, { where, returnCountOnly: true }, owner.token)).json();
      if (engine === "postgres") {
        // PostgreSQL refuses overflowing arithmetic.
        expect(answer.error, JSON.stringify(answer)).toMatchObject({ code: 400 });
        expect(answer.error.message).toContain("'where'");
      } else {
        // SQLite turns to floating point (and to infinity past the largest double): every pop is positive.
        expect(answer).toEqual({ count: 10 });
      }
    }
  });

  it("refuses to buffer a geometry with more vertices than a request may cost, naming geometry", async () => {
    // 100 vertices zigzagging across 340 degrees: each edge is densified into 1,000 points, and
    // the buffer took seconds of CPU and hundreds of MB.
    const zigzag = {
      paths: [Array.from({ length: 100 }, (_, i) => [i % 2 ? 170 : -170, -80 + (160 * i) / 100])],
      spatialReference: { wkid: 4326 },
    };
    const many = {
      paths: [Array.from({ length: 10_001 }, (_, i) => [i / 10_001, 0])],
      spatialReference: { wkid: 4326 },
    };
    for (const geometry of [zigzag, many]) {
      const answer = (
        await post(
          `${layer}/query`,
          {
            geometry: JSON.stringify(geometry),
            geometryType: "esriGeometryPolyline",
            distance: 1,
            units: "esriSRUnit_Meter",
            returnCountOnly: true,
          },
          owner.token,
        )
      ).json();
      expect(answer.error, JSON.stringify(answer)).toMatchObject({ code: 400 });
      expect(answer.error.message).toContain("'geometry'");
    }
    // A point buffered by 200 km reaches (2, 2) and (4, 4), about 157 km from (3, 3), not (1, 1) at 314 km.
    const near = await post(
      `${layer}/query`,
      { geometry: "3,3", inSR: "4326", distance: 200, units: "esriSRUnit_Kilometer", returnIdsOnly: true },
      owner.token,
    );
    expect(near.json()).toEqual({ objectIdFieldName: "OBJECTID", objectIds: [2, 3, 4] });
  });

  it("keeps the layer's edit dates when an edit has nothing to do, whoever sends it", async () => {
    // A member may only query this service: empty edits need no capability, and must change nothing.
    const member = await portal.addUser("hx_member", "org_user");
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name: "ReadOnly", capabilities: "Query" }, outputType: "featureService" },
      owner.token,
    );
    await portal.post(
      `${server}/admin/services/ReadOnly/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ name: "Pts", geometryType: "esriGeometryPoint" }] } },
      owner.token,
    );
    await portal.post(
      `/content/users/${owner.username}/shareItems`,
      { items: created.itemId, org: true },
      owner.token,
    );
    const readOnly = `${server}/services/ReadOnly/FeatureServer`;
    const dates = async () => (await portal.get(`${readOnly}/0`, {}, owner.token)).editingInfo;
    const before = await dates();
    expect((await post(`${readOnly}/0/applyEdits`, { adds: "[]" }, member.token)).json()).toEqual({
      addResults: [],
      updateResults: [],
      deleteResults: [],
    });
    const edits = JSON.stringify(Array.from({ length: 20 }, () => ({ id: 0 })));
    const answer = (await post(`${readOnly}/applyEdits`, { edits }, member.token)).json();
    expect(answer).toHaveLength(20);
    expect(
      (await post(`${readOnly}/0/addFeatures`, { features: "[{}]" }, member.token)).json().error,
    ).toMatchObject({
      code: 403,
    });
    expect(await dates()).toEqual(before);
  });

  it("refuses layerDefs that name a layer twice, which would multiply one query's work", async () => {
    const service = layer.replace(/\/0$/, "");
    const repeated = JSON.stringify(Array.from({ length: 100 }, () => ({ layerId: 0, where: "1=1" })));
    const answer = (
      await post(`${service}/query`, { layerDefs: repeated, returnIdsOnly: true }, owner.token)
    ).json();
    expect(answer.error, JSON.stringify(answer).slice(0, 200)).toMatchObject({ code: 400 });
    expect(answer.error.message).toContain("'layerDefs'");
    const once = await post(
      `${service}/query`,
      { layerDefs: JSON.stringify({ "0": "pop > 80", "1": "v = 1" }), returnCountOnly: true },
      owner.token,
    );
    expect(once.json()).toEqual({
      layers: [
        { id: 0, count: 2 },
        { id: 1, count: 1 },
      ],
    });
  });
});
