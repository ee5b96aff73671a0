import {
  addToServiceDefinition,
  createFeatureService,
  type ILayerDefinition,
} from "@esri/arcgis-rest-feature-service";
import { ArcGISIdentityManager, request } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { serviceAccessScenario } from "../helpers/service-access.js";

type User = { username: string; password: string; token: string };

const createPath = (username: string) => `/content/users/${username}/createService`;

describe("createService and hosted feature services", () => {
  let portal: TestPortal;
  let publisher: User;
  let other: User;
  let member: User;
  /** `http://127.0.0.1:<port>/rest`: the root of the hosted services. */
  let server: string;
  let services: string;

  const create = (name: string, extra: Record<string, unknown> = {}, as: User = publisher) =>
    portal.post(
      createPath(as.username),
      { createParameters: { name }, outputType: "featureService", ...extra },
      as.token,
    );
  const admin = (name: string, op: string, params: Record<string, unknown>, token = publisher.token) =>
    portal.post(`${server}/admin/services/${name}/FeatureServer/${op}`, params, token);

  beforeAll(async () => {
    portal = await startTestPortal();
    publisher = await portal.addUser("fs_publisher", "org_publisher");
    other = await portal.addUser("fs_other", "org_publisher");
    member = await portal.addUser("fs_member", "org_user");
    server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    services = `${server}/services`;
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("answers createService with every field of the creation result", async () => {
    const r = await create("Parcels", {
      description: "All parcels",
      tags: "land,parcels",
      snippet: "Parcels",
    });
    const url = `${services}/Parcels/FeatureServer`;
    expect(r).toEqual({
      encodedServiceURL: url,
      isView: false,
      itemId: expect.stringMatching(/^[0-9a-f]{32}$/),
      name: "Parcels",
      serviceItemId: r.itemId,
      serviceurl: url,
      size: -1,
      success: true,
      type: "Feature Service",
      description: "All parcels",
      tags: "land,parcels",
      snippet: "Parcels",
    });
  });

  it("creates a Feature Service item pointing at the service, with the given tags and snippet", async () => {
    const r = await create("Roads", {
      description: "Road network",
      tags: "roads, network",
      snippet: "Roads",
    });
    const item = await portal.get(`/content/items/${r.itemId}`, {}, publisher.token);
    expect(item).toMatchObject({
      id: r.itemId,
      owner: publisher.username,
      title: "Roads",
      type: "Feature Service",
      url: r.serviceurl,
      description: "Road network",
      tags: ["roads", "network"],
      snippet: "Roads",
      access: "private",
    });
    expect(item.typeKeywords).toEqual(
      expect.arrayContaining(["Feature Service", "Feature Access", "Hosted Service", "Service", "Data"]),
    );
  });

  it("creates the service in a folder of the user", async () => {
    const folder = await portal.post(
      `/content/users/${publisher.username}/createFolder`,
      { title: "Services" },
      publisher.token,
    );
    const r = await portal.post(
      `/content/users/${publisher.username}/${folder.folder.id}/createService`,
      { createParameters: { name: "InFolder" }, outputType: "featureService" },
      publisher.token,
    );
    expect(r.success).toBe(true);
    const item = await portal.get(`/content/items/${r.itemId}`, {}, publisher.token);
    expect(item.ownerFolder).toBe(folder.folder.id);
  });

  it("serves the definition built from createParameters at the service URL", async () => {
    const createParameters = {
      name: "Hydrants",
      serviceDescription: "Fire hydrants",
      hasStaticData: true,
      maxRecordCount: 500,
      supportedQueryFormats: "JSON,pbf",
      capabilities: "query,Create,Update,Delete,Editing",
      description: "Hydrants of the city",
      copyrightText: "City",
      spatialReference: { wkid: 4326 },
      initialExtent: { xmin: -10, ymin: -5, xmax: 10, ymax: 5, spatialReference: { wkid: 4326 } },
      allowGeometryUpdates: false,
      units: "esriDecimalDegrees",
      xssPreventionInfo: {
        xssPreventionEnabled: true,
        xssPreventionRule: "input",
        xssInputRule: "rejectInvalid",
      },
    };
    const r = await portal.post(
      createPath(publisher.username),
      { createParameters, outputType: "featureService" },
      publisher.token,
    );
    const definition = await portal.get(r.serviceurl, {}, publisher.token);
    expect(definition).toEqual({
      currentVersion: expect.any(Number),
      serviceDescription: "Fire hydrants",
      hasVersionedData: false,
      hasStaticData: true,
      maxRecordCount: 500,
      supportedQueryFormats: "JSON,PBF",
      capabilities: "Query,Create,Update,Delete,Editing",
      description: "Hydrants of the city",
      copyrightText: "City",
      spatialReference: { wkid: 4326 },
      initialExtent: createParameters.initialExtent,
      fullExtent: createParameters.initialExtent,
      allowGeometryUpdates: false,
      units: "esriDecimalDegrees",
      xssPreventionInfo: createParameters.xssPreventionInfo,
      // Neither editor tracking, sync, relationships nor location tracking: the service says so.
      editorTrackingInfo: {
        enableEditorTracking: false,
        enableOwnershipAccessControl: false,
        allowOthersToQuery: true,
        allowOthersToUpdate: true,
        allowOthersToDelete: true,
        allowAnonymousToQuery: true,
        allowAnonymousToUpdate: true,
        allowAnonymousToDelete: true,
      },
      supportsDisconnectedEditing: false,
      syncEnabled: false,
      supportsRelationshipsResource: false,
      hasSharedDomains: false,
      supportsQueryDomains: false,
      supportsQueryContingentValues: false,
      supportsTrueCurve: false,
      allowTrueCurvesUpdates: false,
      onlyAllowTrueCurveUpdatesByTrueCurveClients: false,
      enableZDefaults: false,
      isLocationTrackingService: false,
      isLocationTrackingView: false,
      isIndoorsService: false,
      serviceItemId: r.itemId,
      layers: [],
      tables: [],
    });
  });

  it("fills in defaults for properties createParameters leaves out", async () => {
    const r = await create("Defaults");
    const definition = await portal.get(r.serviceurl, {}, publisher.token);
    expect(definition).toMatchObject({
      serviceDescription: "",
      hasStaticData: false,
      maxRecordCount: expect.any(Number),
      supportedQueryFormats: "JSON, geoJSON, PBF",
      capabilities: "Query",
      spatialReference: { wkid: 102100, latestWkid: 3857 },
      allowGeometryUpdates: true,
      xssPreventionInfo: { xssPreventionEnabled: true },
      serviceItemId: r.itemId,
      layers: [],
      tables: [],
    });
    expect(definition.initialExtent).toMatchObject({ spatialReference: { wkid: 102100 } });
    expect(definition.fullExtent).toEqual(definition.initialExtent);
  });

  it("refuses a duplicate service name regardless of case, naming the existing service, and writes nothing", async () => {
    await create("Wells");
    const before = (await outbox(portal)).length;
    const r = await create("WELLS");
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'Wells'");
    expect((await outbox(portal)).length).toBe(before);
    const another = await create("wells", {}, other);
    expect(another.error.message).toContain("'Wells'");
  });

  it("removes the service with its item, which frees the name", async () => {
    const r = await create("Temporary");
    const deleted = await portal.post(
      `/content/users/${publisher.username}/items/${r.itemId}/delete`,
      {},
      publisher.token,
    );
    expect(deleted.success).toBe(true);
    expect((await portal.get(r.serviceurl, {}, publisher.token)).error.code).toBe(400);
    expect((await create("Temporary")).success).toBe(true);
  });

  it.each([
    ["a space", "my service"],
    ["a hyphen", "my-service"],
    ["a slash", "a/b"],
    ["non-ASCII letters", "Straßen"],
    ["129 characters", "x".repeat(129)],
  ])("refuses a service name with %s", async (_what, name) => {
    const r = await create(name);
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'createParameters'");
  });

  it("refuses createParameters without a name", async () => {
    const r = await portal.post(
      createPath(publisher.username),
      { createParameters: { maxRecordCount: 10 }, outputType: "featureService" },
      publisher.token,
    );
    expect(r.error.message).toContain("'createParameters'");
    expect(r.error.details.join(" ")).toContain("'name'");
  });

  it("refuses an outputType other than featureService, naming the allowed value", async () => {
    const r = await create("Tiles", { outputType: "tiledService" });
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'outputType'");
    expect(r.error.message).toContain("featureService");
    const missing = await portal.post(
      createPath(publisher.username),
      { createParameters: { name: "NoOutputType" } },
      publisher.token,
    );
    expect(missing.error.message).toContain("'outputType'");
  });

  it("refuses malformed createParameters JSON, naming the parameter", async () => {
    const r = await portal.post(
      createPath(publisher.username),
      { createParameters: '{"name": "Broken"', outputType: "featureService" },
      publisher.token,
    );
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'createParameters'");
    expect(r.error.message).toContain("not valid JSON");
  });

  it.each([
    ["maxRecordCount is not an integer", { maxRecordCount: "many" }, "maxRecordCount"],
    ["maxRecordCount is below 1", { maxRecordCount: 0 }, "maxRecordCount"],
    ["hasStaticData is not a boolean", { hasStaticData: "yes" }, "hasStaticData"],
    ["capabilities has an unknown entry", { capabilities: "Query,Fly" }, "Fly"],
    ["spatialReference has no wkid", { spatialReference: {} }, "wkid"],
    ["initialExtent is missing a corner", { initialExtent: { xmin: 0, ymin: 0, xmax: 1 } }, "ymax"],
    ["xssPreventionEnabled is not a boolean", { xssPreventionInfo: { xssPreventionEnabled: 1 } }, "xss"],
  ])("refuses createParameters where %s", async (_what, extra, named) => {
    const r = await portal.post(
      createPath(publisher.username),
      { createParameters: { name: "Typed", ...extra }, outputType: "featureService" },
      publisher.token,
    );
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'createParameters'");
    expect(r.error.message).toContain(named);
  });

  it("refuses isView=true (no location-tracking service exists) and overwrite=true", async () => {
    const view = await create("TrackView", { isView: true });
    expect(view.error.message).toContain("'isView'");
    expect(view.error.message).toContain("location-tracking");
    const overwrite = await create("Overwritten", { overwrite: true });
    expect(overwrite.error.message).toContain("'overwrite'");
    expect((await create("TrackView", { isView: false })).success).toBe(true);
  });

  it("refuses a member without publisher privileges with 403, and anonymous callers with 499", async () => {
    const r = await create("MemberService", {}, member);
    expect(r.error.code).toBe(403);
    const anonymous = await portal.post(createPath(member.username), {
      createParameters: { name: "Anon" },
      outputType: "featureService",
    });
    expect(anonymous.error.code).toBe(499);
  });

  it("refuses to create a service in another user's account", async () => {
    const r = await portal.post(
      createPath(other.username),
      { createParameters: { name: "NotMine" }, outputType: "featureService" },
      publisher.token,
    );
    expect(r.error.code).toBe(403);
  });

  it("keeps a private service from other users and anonymous callers, and shows it to administrators", async () => {
    const r = await create("Private");
    const unknown = await portal.get(`${services}/NoSuchService/FeatureServer`, {}, other.token);
    expect(unknown.error.code).toBe(400);
    // Someone else's private service and a missing one give the same answer.
    const hidden = await portal.get(r.serviceurl, {}, other.token);
    expect(hidden.error).toMatchObject({ code: 400, message: unknown.error.message });
    expect(hidden.error.details.join(" ")).toContain("Private");
    expect((await portal.get(r.serviceurl)).error.code).toBe(499);
    expect((await portal.get(`${r.serviceurl}/0`, {}, other.token)).error.code).toBe(400);
    expect((await portal.get(r.serviceurl, {}, portal.adminToken)).serviceItemId).toBe(r.itemId);
  });

  it("follows the item's sharing: shared with the organization, members read the service", async () => {
    const r = await create("Shared");
    const share = await portal.post(
      `/content/users/${publisher.username}/items/${r.itemId}/share`,
      { org: true },
      publisher.token,
    );
    expect(share.notSharedWith).toEqual([]);
    expect((await portal.get(r.serviceurl, {}, member.token)).serviceItemId).toBe(r.itemId);
    // Reading is not changing: only the owner and administrators change the definition.
    const change = await admin(
      "Shared",
      "addToDefinition",
      { addToDefinition: { layers: [{ name: "x", geometryType: "esriGeometryPoint" }] } },
      other.token,
    );
    expect(change.error.code).toBe(403);
  });

  it("applies every change of who may query a layer (sharing, definition, membership, role, deletion) to the very next query", async () => {
    // One node: the change is committed before its answer, so no waiting is allowed.
    await serviceAccessScenario(portal, portal, "acc", async () => {});
  });

  it("adds layers and tables with addToDefinition, assigning ids after the highest in use, and serves each layer", async () => {
    const r = await create("Assets");
    const added = await admin("Assets", "addToDefinition", {
      addToDefinition: {
        layers: [
          { name: "Points", geometryType: "esriGeometryPoint", spatialReference: { wkid: 4326 } },
          { name: "Lines", id: 5, geometryType: "esriGeometryPolyline" },
        ],
        tables: [{ name: "Inspections" }],
      },
    });
    expect(added).toEqual({
      layers: [
        { name: "Points", id: 6 },
        { name: "Lines", id: 5 },
      ],
      tables: [{ name: "Inspections", id: 7 }],
      success: true,
    });
    const more = await admin("Assets", "addToDefinition", {
      addToDefinition: { layers: [{ name: "Areas", geometryType: "esriGeometryPoint" }] },
    });
    expect(more.layers).toEqual([{ name: "Areas", id: 8 }]);

    const definition = await portal.get(r.serviceurl, {}, publisher.token);
    expect(definition.layers.map((l: { id: number; name: string }) => [l.id, l.name])).toEqual([
      [6, "Points"],
      [5, "Lines"],
      [8, "Areas"],
    ]);
    expect(definition.tables).toEqual([{ id: 7, name: "Inspections" }]);
    // The first layer that names a spatial reference sets the service's.
    expect(definition.spatialReference).toEqual({ wkid: 4326 });

    const layer = await portal.get(`${r.serviceurl}/5`, {}, publisher.token);
    expect(layer).toMatchObject({
      id: 5,
      name: "Lines",
      type: "Feature Layer",
      geometryType: "esriGeometryPolyline",
    });
    expect(await portal.get(`${r.serviceurl}/7`, {}, publisher.token)).toMatchObject({ type: "Table" });
    const missing = await portal.get(`${r.serviceurl}/42`, {}, publisher.token);
    expect(missing.error.code).toBe(400);
    expect(missing.error.message).toContain("'42'");
  });

  it("refuses addToDefinition with a taken id or name, a nameless layer, or another spatial reference", async () => {
    await create("Checked");
    await admin("Checked", "addToDefinition", {
      addToDefinition: {
        layers: [{ name: "One", id: 1, geometryType: "esriGeometryPoint", spatialReference: { wkid: 3857 } }],
      },
    });
    const takenId = await admin("Checked", "addToDefinition", {
      addToDefinition: { tables: [{ name: "T", id: 1 }] },
    });
    expect(takenId.error.message).toContain("id 1");
    const takenName = await admin("Checked", "addToDefinition", {
      addToDefinition: { layers: [{ name: "ONE", geometryType: "esriGeometryPoint" }] },
    });
    expect(takenName.error.message).toContain("'ONE'");
    const nameless = await admin("Checked", "addToDefinition", { addToDefinition: { layers: [{ id: 9 }] } });
    expect(nameless.error.message).toContain("'addToDefinition'");
    // A layer holds one kind of geometry: one without a geometryType cannot be stored.
    const shapeless = await admin("Checked", "addToDefinition", {
      addToDefinition: { layers: [{ name: "Shapeless" }] },
    });
    expect(shapeless.error.code).toBe(400);
    expect(shapeless.error.message).toContain("without a geometryType");
    const badField = await admin("Checked", "addToDefinition", {
      addToDefinition: {
        layers: [
          {
            name: "Fielded",
            geometryType: "esriGeometryPoint",
            fields: [{ name: "bad name", type: "esriFieldTypeString" }],
          },
        ],
      },
    });
    expect(badField.error.message).toContain('"bad name"');
    expect(nameless.error.message).toContain("'name'");
    const otherSr = await admin("Checked", "addToDefinition", {
      addToDefinition: {
        layers: [{ name: "Two", geometryType: "esriGeometryPoint", spatialReference: { wkid: 4326 } }],
      },
    });
    expect(otherSr.error.message).toContain("4326");
    // Web Mercator's old wkid names the same spatial reference.
    const sameSr = await admin("Checked", "addToDefinition", {
      addToDefinition: {
        layers: [{ name: "Three", geometryType: "esriGeometryPoint", spatialReference: { wkid: 102100 } }],
      },
    });
    expect(sameSr.success).toBe(true);
  });

  it("changes service properties with updateDefinition, validated like createParameters", async () => {
    const r = await create("Updatable");
    const ok = await admin("Updatable", "updateDefinition", {
      updateDefinition: { maxRecordCount: 25, capabilities: "Query,Update", description: "Changed" },
    });
    expect(ok).toEqual({ success: true });
    const definition = await portal.get(r.serviceurl, {}, publisher.token);
    expect(definition).toMatchObject({
      maxRecordCount: 25,
      capabilities: "Query,Update",
      description: "Changed",
    });

    const bad = await admin("Updatable", "updateDefinition", { updateDefinition: { maxRecordCount: -3 } });
    expect(bad.error.message).toContain("'updateDefinition'");
    const rename = await admin("Updatable", "updateDefinition", { updateDefinition: { name: "Renamed" } });
    expect(rename.error.message).toContain("name");
  });

  it("removes layers with deleteFromDefinition and names an id that does not exist", async () => {
    const r = await create("Prunable");
    await admin("Prunable", "addToDefinition", {
      addToDefinition: {
        layers: [
          { name: "A", geometryType: "esriGeometryPoint" },
          { name: "B", geometryType: "esriGeometryPoint" },
        ],
      },
    });
    const ok = await admin("Prunable", "deleteFromDefinition", {
      deleteFromDefinition: { layers: [{ id: 0 }] },
    });
    expect(ok).toEqual({ success: true });
    const definition = await portal.get(r.serviceurl, {}, publisher.token);
    expect(definition.layers.map((l: { name: string }) => l.name)).toEqual(["B"]);
    const missing = await admin("Prunable", "deleteFromDefinition", {
      deleteFromDefinition: { layers: [{ id: 0 }] },
    });
    expect(missing.error.message).toContain("id 0");
  });

  it("lets only the owner and administrators change a definition", async () => {
    await create("Guarded");
    const byOther = await admin(
      "Guarded",
      "addToDefinition",
      { addToDefinition: { layers: [{ name: "L", geometryType: "esriGeometryPoint" }] } },
      other.token,
    );
    // The other publisher cannot see the private service at all.
    expect(byOther.error.code).toBe(400);
    const anonymous = await portal.post(`${server}/admin/services/Guarded/FeatureServer/addToDefinition`, {
      addToDefinition: { layers: [{ name: "L", geometryType: "esriGeometryPoint" }] },
    });
    expect(anonymous.error.code).toBe(499);
    const byAdmin = await admin(
      "Guarded",
      "addToDefinition",
      { addToDefinition: { layers: [{ name: "L", geometryType: "esriGeometryPoint" }] } },
      portal.adminToken,
    );
    expect(byAdmin.success).toBe(true);
  });

  it("records the item add and publish events on createService, and an update event per definition change", async () => {
    const r = await create("Evented");
    let events = (await outbox(portal)).filter((e) => e.object_id === r.itemId);
    expect(events.map((e) => [e.operation, e.uri])).toEqual([
      ["add", "/items/add"],
      ["publish", `/items/${r.itemId}/publish`],
    ]);
    expect(events.every((e) => e.source === "item" && e.actor_username === publisher.username)).toBe(true);

    await admin("Evented", "addToDefinition", {
      addToDefinition: { layers: [{ name: "L", geometryType: "esriGeometryPoint" }] },
    });
    await admin("Evented", "updateDefinition", { updateDefinition: { maxRecordCount: 10 } });
    await admin("Evented", "deleteFromDefinition", { deleteFromDefinition: { layers: [{ id: 0 }] } });
    await admin("Evented", "deleteFromDefinition", { deleteFromDefinition: { layers: [{ id: 0 }] } });
    events = (await outbox(portal)).filter((e) => e.object_id === r.itemId);
    expect(events.map((e) => e.operation)).toEqual(["add", "publish", "update", "update", "update"]);
  });

  it("answers /rest/info with the owning portal and its token service", async () => {
    const info = await portal.get(`${server}/info`);
    const owning = portal.api.replace(/\/sharing\/rest$/, "");
    expect(info).toEqual({
      currentVersion: expect.any(Number),
      owningSystemUrl: owning,
      authInfo: { isTokenBasedSecurity: true, tokenServicesUrl: `${portal.api}/generateToken` },
    });
  });

  it("exchanges a portal token for a server token with generateToken serverUrl and token", async () => {
    const serverUrl = portal.api.replace(/\/sharing\/rest$/, "");
    const r = await portal.post("/generateToken", { serverUrl, token: publisher.token, expiration: 60 });
    expect(r).toEqual({ token: expect.any(String), expires: expect.any(Number), ssl: false });
    expect(r.expires).toBeGreaterThan(Date.now());
    const self = await portal.get("/community/self", {}, r.token);
    expect(self.username).toBe(publisher.username);

    const foreign = await portal.post("/generateToken", {
      serverUrl: "https://elsewhere.example.com/server",
      token: publisher.token,
    });
    expect(foreign.error.message).toContain("'serverUrl'");
    const invalid = await portal.post("/generateToken", { serverUrl, token: "not-a-token" });
    expect(invalid.error.code).toBe(498);
    // Without serverUrl, a token alone is no credential.
    const tokenOnly = await portal.post("/generateToken", { token: publisher.token });
    expect(tokenOnly.error.message).toContain("'username'");
  });
});

/**
 * Esri's clients (@esri/arcgis-rest-feature-service and -request 4.10.2): createFeatureService and
 * addToServiceDefinition, and a request to the service with a portal session, which makes the
 * session ask `<server>/rest/info` and exchange its token through generateToken with serverUrl.
 */
describe.each([
  ["at the root", ""],
  ["under a context path", "/portal"],
])("Esri arcgis-rest-js with hosted feature services %s", (_where, contextPath) => {
  let portal: TestPortal;
  let session: ArcGISIdentityManager;
  beforeAll(async () => {
    portal = await startTestPortal(contextPath ? { env: { PORTICO_CONTEXT_PATH: contextPath } } : {});
    const user = await portal.addUser("esri_publisher", "org_publisher");
    session = await ArcGISIdentityManager.signIn({
      username: user.username,
      password: user.password,
      portal: portal.api,
    });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("creates a service, adds a layer and reads the service with a portal session", async () => {
    const created = await createFeatureService({
      authentication: session,
      item: {
        name: "EsriClientService",
        capabilities: "Query,Create,Update,Delete,Editing",
        spatialReference: { wkid: 102100 },
        editorTrackingInfo: { enableEditorTracking: false },
      },
      params: { tags: "esri,client" },
    });
    expect(created).toMatchObject({ success: true, isView: false, type: "Feature Service", size: -1 });
    expect(created.serviceurl).toBe(
      `${portal.api.replace(/\/sharing\/rest$/, "")}/rest/services/EsriClientService/FeatureServer`,
    );

    const added = await addToServiceDefinition(created.serviceurl, {
      authentication: session,
      layers: [
        { name: "Sites", type: "Feature Layer", geometryType: "esriGeometryPoint" } as ILayerDefinition,
      ],
    });
    expect(added).toEqual({ layers: [{ name: "Sites", id: 0 }], tables: [], success: true });

    const service = await request(created.serviceurl, { authentication: session, httpMethod: "GET" });
    expect(service.serviceItemId).toBe(created.itemId);
    expect(service.layers).toMatchObject([{ id: 0, name: "Sites" }]);
    expect(service.capabilities).toBe("Query,Create,Update,Delete,Editing");
    const layer = await request(`${created.serviceurl}/0`, { authentication: session });
    expect(layer).toMatchObject({ id: 0, name: "Sites", geometryType: "esriGeometryPoint" });
  });
});
