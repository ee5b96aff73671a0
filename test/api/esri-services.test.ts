import {
  decodeValues,
  getLayer,
  getService,
  getServiceAdminInfo,
  type IQueryFeaturesResponse,
  queryFeatures,
  queryPbfAsGeoJSONOrArcGIS,
  queryRelated,
  updateServiceDefinition,
} from "@esri/arcgis-rest-feature-service";
import {
  ArcGISAuthError,
  ArcGISIdentityManager,
  ArcGISRequestError,
  request,
  revokeToken,
} from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Esri's client 4.10.2 on a hosted service's definition and admin resource, coded-value domains,
 * PBF queries, related records and token revocation, against an in-process portico. Expected
 * values come from the definition and features the test writes.
 */

const KINDS = [
  { code: 1, name: "Oak" },
  { code: 2, name: "Pine" },
  { code: 3, name: "Birch" },
];
const TREES = Array.from({ length: 12 }, (_, i) => ({
  label: `tree ${i}`,
  kind: (i % 3) + 1,
  x: -3 + i * 0.5,
  y: 50 + i * 0.25,
}));
const NAME = "EsriServicesTrees";

describe("Esri's client on hosted service definitions, domains, PBF and related records", () => {
  let portal: TestPortal;
  let owner: { username: string; password: string; token: string };
  let session: ArcGISIdentityManager;
  let service: string;
  let layer: string;

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("services_owner", "org_publisher");
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: {
          name: NAME,
          spatialReference: { wkid: 4326 },
          capabilities: "Query,Create,Update,Delete,Editing",
        },
        outputType: "featureService",
      },
      owner.token,
    );
    if (!created.success) throw new Error(`createService: ${JSON.stringify(created)}`);
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    service = `${server}/services/${NAME}/FeatureServer`;
    layer = `${service}/0`;
    const added = await portal.post(
      `${server}/admin/services/${NAME}/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            {
              name: "Trees",
              geometryType: "esriGeometryPoint",
              spatialReference: { wkid: 4326 },
              fields: [
                { name: "label", type: "esriFieldTypeString", length: 64 },
                {
                  name: "kind",
                  type: "esriFieldTypeInteger",
                  domain: { type: "codedValue", name: "TreeKinds", codedValues: KINDS },
                },
              ],
            },
          ],
        },
      },
      owner.token,
    );
    if (!added.success) throw new Error(`addToDefinition: ${JSON.stringify(added)}`);
    const edits = await portal.post(
      `${layer}/applyEdits`,
      {
        adds: TREES.map((t) => ({
          attributes: { label: t.label, kind: t.kind },
          geometry: { x: t.x, y: t.y },
        })),
      },
      owner.token,
    );
    if (edits.addResults?.length !== TREES.length) throw new Error(`applyEdits: ${JSON.stringify(edits)}`);
    session = await ArcGISIdentityManager.signIn({
      username: owner.username,
      password: owner.password,
      portal: portal.api,
    });
  }, 120_000);
  afterAll(async () => {
    await portal?.stop();
  });

  it("lists on the service and layer resources what a hosted service without sync or tracking lists", async () => {
    const s = (await getService({ url: service, authentication: session })) as unknown as Record<
      string,
      unknown
    >;
    expect(s).toMatchObject({
      supportsDisconnectedEditing: false,
      syncEnabled: false,
      supportsRelationshipsResource: false,
      isLocationTrackingService: false,
      isLocationTrackingView: false,
      editorTrackingInfo: { enableEditorTracking: false, enableOwnershipAccessControl: false },
    });
    // Only services that can extract changes list how.
    expect(s).not.toHaveProperty("extractChangesCapabilities");
    const l = (await getLayer({ url: layer, authentication: session })) as Record<string, unknown>;
    expect(l).toMatchObject({ relationships: [], isDataVersioned: false, syncCanReturnChanges: false });
    expect(l).not.toHaveProperty("editFieldsInfo");
  });

  it("decodes coded-value domain codes into their names with decodeValues", async () => {
    const queryResponse = (await queryFeatures({
      url: layer,
      authentication: session,
      outFields: ["label", "kind"],
      orderByFields: "OBJECTID",
      returnGeometry: false,
    })) as IQueryFeaturesResponse;
    expect(queryResponse.features.map((f) => f.attributes.kind)).toEqual(TREES.map((t) => t.kind));
    const { fields } = await getLayer({ url: layer, authentication: session });
    const decoded = await decodeValues({ url: layer, queryResponse, fields });
    expect(decoded.features.map((f) => [f.attributes.label, f.attributes.kind])).toEqual(
      TREES.map((t) => [t.label, KINDS[t.kind - 1]?.name]),
    );
    // The response given is left as it was.
    expect(queryResponse.features[0]?.attributes.kind).toBe(TREES[0]?.kind);
  });

  it("reads the admin resource with getServiceAdminInfo", async () => {
    const info = await getServiceAdminInfo(service, session);
    expect(info.adminServiceInfo).toMatchObject({ name: NAME, type: "FeatureServer", status: "Started" });
    expect(info.layers).toMatchObject([{ id: 0, name: "Trees" }]);
    expect(info.capabilities).toBe("Query,Create,Update,Delete,Editing");
  });

  it("changes a service property with updateServiceDefinition, read back by getService", async () => {
    const r = await updateServiceDefinition(service, {
      authentication: session,
      updateDefinition: { description: "Trees of the park", maxRecordCount: 777 },
    });
    expect(r.success).toBe(true);
    const s = await getService({ url: service, authentication: session });
    expect(s.description).toBe("Trees of the park");
    expect(s.maxRecordCount).toBe(777);
    expect((await getServiceAdminInfo(service, session)).description).toBe("Trees of the park");
  });

  it("gets the same features as the JSON query with queryPbfAsGeoJSONOrArcGIS", async () => {
    const params = { where: "kind <> 2", outFields: "OBJECTID,label,kind", orderByFields: "OBJECTID" };
    const json = (await queryFeatures({
      url: layer,
      authentication: session,
      where: params.where,
      orderByFields: params.orderByFields,
      outFields: ["OBJECTID", "label", "kind"],
    })) as IQueryFeaturesResponse;
    const expected = TREES.filter((t) => t.kind !== 2);
    expect(json.features.map((f) => f.attributes.label)).toEqual(expected.map((t) => t.label));
    const arcgis = (await queryPbfAsGeoJSONOrArcGIS(layer, {
      authentication: session,
      params: { ...params, f: "pbf-as-arcgis" },
    })) as IQueryFeaturesResponse;
    expect(arcgis.features.map((f) => f.attributes)).toEqual(json.features.map((f) => f.attributes));
    arcgis.features.forEach((f, i) => {
      const g = f.geometry as { x: number; y: number };
      expect(g.x).toBeCloseTo(expected[i]?.x as number, 6);
      expect(g.y).toBeCloseTo(expected[i]?.y as number, 6);
    });
    const geojson = (await queryPbfAsGeoJSONOrArcGIS(layer, {
      authentication: session,
      params: { ...params, f: "pbf-as-geojson" },
    })) as any;
    expect(geojson.type).toBe("FeatureCollection");
    expect(geojson.features.map((f: any) => f.properties.label)).toEqual(expected.map((t) => t.label));
    expect(geojson.features.map((f: any) => f.properties.kind)).toEqual(expected.map((t) => t.kind));
  });

  it("refuses queryRelated naming relationshipId: hosted layers take part in no relationship", async () => {
    const layerResource = await getLayer({ url: layer, authentication: session });
    expect(layerResource.relationships).toEqual([]);
    const err = await queryRelated({
      url: layer,
      authentication: session,
      objectIds: [1],
      relationshipId: 0,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArcGISRequestError);
    expect((err as ArcGISRequestError).response.error.code).toBe(400);
    expect((err as ArcGISRequestError).message).toContain("relationshipId");
    // A layer that does not exist answers as for a query.
    const missing = await queryRelated({
      url: `${service}/9`,
      authentication: session,
      relationshipId: 0,
    }).catch((e: unknown) => e);
    expect((missing as ArcGISRequestError).message).not.toContain("relationshipId");
  });

  it("ends a token with revokeToken: calls with it answer 498 afterwards", async () => {
    const other = await ArcGISIdentityManager.signIn({
      username: owner.username,
      password: owner.password,
      portal: portal.api,
    });
    const token = other.token;
    // Through the client, as its requests carry the referer the token is bound to.
    const read = () => request(service, { params: { token } }).catch((e: unknown) => e as ArcGISRequestError);
    expect((await read()).layers).toHaveLength(1);
    const r = await revokeToken({ token, clientId: "portico-tests", portal: portal.api });
    expect(r.success).toBe(true);
    const after = await read();
    expect(after).toBeInstanceOf(ArcGISAuthError);
    expect((after as ArcGISAuthError).response.error.code).toBe(498);
    // Other tokens of the same user still work.
    expect((await getService({ url: service, authentication: session })).layers).toHaveLength(1);
  });
});
