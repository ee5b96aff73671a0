import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ORG_SETTINGS, type SettingName } from "../../src/portal/org-settings.js";
import { ADMIN, form, json, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * `POST /portals/<id>/update` (`interface.md` §4.4, §8; `wire.md` §5): every parameter with valid
 * and invalid values, atomicity, `clearEmptyFields`, privileges, and the settings the server enforces.
 */

/** A value as sent in the form, and as the administrator's `portals/self` must report it. */
interface Valid {
  send: string;
  stored: unknown;
  /** Shown in the test name instead of `send` (long values). */
  label?: string;
  /** Other parameters the value needs in the same request (cross-field rules). */
  with?: Record<string, unknown>;
}

interface Invalid {
  send: string;
  label?: string;
}

interface SettingCases {
  valid: Valid[];
  invalid: (string | Invalid)[];
  /** Why a setting has no invalid value; every other setting must list at least one. */
  anyValueIsValid?: string;
}

const text = (value: string, label?: string): Valid => ({
  send: value,
  stored: value,
  ...(label ? { label } : {}),
});
const flag = (value: boolean): Valid => ({ send: String(value), stored: value });
const int = (value: number): Valid => ({ send: String(value), stored: value });
const jsonValue = (value: unknown, extra: Partial<Valid> = {}): Valid => ({
  send: JSON.stringify(value),
  stored: value,
  ...extra,
});
const chars = (n: number): Invalid => ({ send: "q".repeat(n), label: `${n} characters` });
const origins = (n: number) => Array.from({ length: n }, (_, i) => `https://app${i}.example.com`);

/** A boolean setting: the value opposite to its default is stored; anything but true/false is refused. */
const booleanCases = (defaultValue: boolean): SettingCases => ({
  valid: [flag(!defaultValue)],
  invalid: ["yes", "1"],
});

/** A group query string: any query up to 1024 characters. */
const groupQueryCases = (query: string): SettingCases => ({
  valid: [text(query)],
  invalid: [chars(1025)],
});

/** A utility service reference `{"url": ...}`. */
const serviceCases = (name: string): SettingCases => ({
  valid: [
    jsonValue({ url: `https://${name.toLowerCase()}.example.com/arcgis/rest/services/${name}/GPServer` }),
  ],
  invalid: [
    '{"url":"not a url"}',
    "{}",
    '"https://x.example.com/arcgis/rest/services"',
    '[{"url":"https://x.example.com"}]',
  ],
});

const TRUSTED_DOMAINS = ["https://trusted.example.com", "https://other.example.com"];

/** At least one valid and one invalid value for every update parameter. */
const CASES: Record<SettingName, SettingCases> = {
  name: {
    valid: [text("Contoso GIS"), text("N".repeat(250), "250 characters")],
    invalid: [chars(251)],
  },
  description: {
    valid: [text("<p>Maps & apps of <b>Contoso</b></p>"), text("d".repeat(100_000), "100000 characters")],
    invalid: [],
    anyValueIsValid: "any text is a description; interface.md §8 sets no length limit",
  },
  thumbnail: { valid: [text("thumbnail/logo.png"), text("banner.JPEG")], invalid: ["logo.bmp", "logo"] },
  culture: { valid: [text("pt-BR"), text("de")], invalid: ["english", "en_US"] },
  cultureFormat: { valid: [text("fr"), text("zh-Hans")], invalid: ["not a format", "f"] },
  region: { valid: [text("US")], invalid: ["United States", "U"] },
  units: { valid: [text("metric")], invalid: ["imperial", "METRIC-ish"] },
  featuredItemsGroupQuery: groupQueryCases('title:"Featured Maps" AND owner:admin_user'),
  homePageFeaturedContent: groupQueryCases("id:0123456789abcdef0123456789abcdef"),
  homePageFeaturedContentCount: { valid: [int(100), int(0)], invalid: ["101", "2.5", "-1", "many"] },
  featuredGroups: {
    valid: [
      jsonValue([
        { owner: "admin_user", title: "Featured" },
        { owner: "admin_user", title: "Basemaps", id: "abc123" },
      ]),
      jsonValue([]),
    ],
    invalid: ['[{"owner":"admin_user"}]', '{"owner":"admin_user","title":"Featured"}', '["Featured"]'],
  },
  basemapGalleryGroupQuery: groupQueryCases('title:"Basemaps" AND owner:esri'),
  templatesGroupQuery: groupQueryCases('title:"Templates"'),
  layerTemplatesGroupQuery: groupQueryCases('title:"Layer Templates"'),
  symbolSetsGroupQuery: groupQueryCases('title:"Symbol Sets"'),
  colorSetsGroupQuery: groupQueryCases('title:"Color Sets"'),
  analysisLayersGroupQuery: groupQueryCases('title:"Analysis Layers"'),
  stylesGroupQuery: groupQueryCases('title:"Styles"'),
  "2DStylesGroupQuery": groupQueryCases('title:"2D Styles"'),
  defaultBasemap: {
    valid: [
      jsonValue({
        title: "Topographic",
        baseMapLayers: [{ url: "https://tiles.example.com/arcgis/rest/services/Topo/MapServer" }],
      }),
    ],
    invalid: ['["Topographic"]', '{"title":5}', '{"baseMapLayers":"none"}'],
  },
  defaultExtent: {
    valid: [jsonValue({ xmin: -180, ymin: -90, xmax: 180, ymax: 90, spatialReference: { wkid: 4326 } })],
    invalid: ['{"xmin":0,"ymin":0}', '{"xmin":"west","ymin":0,"xmax":1,"ymax":1}', "[0,0,1,1]"],
  },
  rotatorPanels: {
    valid: [jsonValue([{ id: "banner-html", innerHTML: "<p>Welcome</p>" }])],
    invalid: ['{"id":"banner-html"}', '["banner"]'],
  },
  showHomePageDescription: booleanCases(false),
  backgroundImage: { valid: [text("https://img.example.com/background.jpg")], invalid: [chars(2049)] },
  helpBase: {
    valid: [text("https://docs.example.com/portal/help/")],
    invalid: ["ftp://docs.example.com/help/", "docs.example.com/help"],
  },
  metadataEditable: booleanCases(false),
  metadataFormats: { valid: [text("iso19139"), text("fgdc")], invalid: ["dublin-core", "ISO19139"] },
  useVectorBasemaps: booleanCases(false),
  vendorKey: { valid: [text("vendor-key-0123456789")], invalid: [chars(1025)] },
  defaultUserCreditAssignment: { valid: [int(500), int(-1)], invalid: ["-2", "1.5", "ten"] },
  creditAssignments: { valid: [text("enabled")], invalid: ["on", "true"] },
  geocodeService: {
    valid: [
      jsonValue([
        {
          url: "https://geocode.example.com/arcgis/rest/services/World/GeocodeServer",
          defaultTravelMode: "Driving",
        },
      ]),
    ],
    invalid: [
      '{"url":"https://geocode.example.com/arcgis/rest/services/World/GeocodeServer"}',
      '[{"name":"World"}]',
      '[{"url":"ftp://geocode.example.com"}]',
    ],
  },
  asyncGeocodeService: serviceCases("asyncGeocodeService"),
  routeServiceLayer: serviceCases("routeServiceLayer"),
  asyncRouteService: serviceCases("asyncRouteService"),
  routingUtilitiesService: serviceCases("routingUtilitiesService"),
  closestFacilityService: serviceCases("closestFacilityService"),
  asyncClosestFacilityService: serviceCases("asyncClosestFacilityService"),
  serviceAreaService: serviceCases("serviceAreaService"),
  asyncServiceAreaService: serviceCases("asyncServiceAreaService"),
  syncVRPService: serviceCases("syncVRPService"),
  asyncVRPService: serviceCases("asyncVRPService"),
  asyncFleetRouting: serviceCases("asyncFleetRouting"),
  odCostMatrixService: serviceCases("odCostMatrixService"),
  asyncODCostMatrixService: serviceCases("asyncODCostMatrixService"),
  asyncLocationAllocationService: serviceCases("asyncLocationAllocationService"),
  geometryService: serviceCases("geometryService"),
  elevation3DService: serviceCases("elevation3DService"),
  elevationService: serviceCases("elevationService"),
  elevationSyncService: serviceCases("elevationSyncService"),
  hydrologyService: serviceCases("hydrologyService"),
  printServiceTask: {
    valid: [
      jsonValue({
        url: "https://print.example.com/arcgis/rest/services/Utilities/PrintingTools/GPServer/Export%20Web%20Map%20Task",
        templates: [{ layout: "A4 Landscape", format: "PDF", label: "A4 landscape (PDF)" }],
      }),
    ],
    invalid: [
      '{"templates":[]}',
      '{"url":"https://print.example.com/x","templates":[{"label":"A4"}]}',
      '"https://print.example.com/x"',
    ],
  },
  analysisService: serviceCases("analysisService"),
  rasterAnalyticsService: serviceCases("rasterAnalyticsService"),
  rasterUtilitiesService: serviceCases("rasterUtilitiesService"),
  orthoMappingService: serviceCases("orthoMappingService"),
  orthomappingElevationService: serviceCases("orthomappingElevationService"),
  geoenrichmentService: serviceCases("geoenrichmentService"),
  geoanalyticsService: serviceCases("geoanalyticsService"),
  locationTrackingService: serviceCases("locationTrackingService"),
  trafficService: serviceCases("trafficService"),
  trafficDataService: serviceCases("trafficDataService"),
  packagingService: serviceCases("packagingService"),
  routingServicesSource: {
    valid: [
      jsonValue({ sourceName: "esri", vendorUsername: "routing_user", firstName: "Ann", lastName: "Lee" }),
    ],
    invalid: ['{"vendorUsername":"routing_user"}', '["esri"]', '{"sourceName":5}'],
  },
  urlKey: { valid: [text("contoso-gis")], invalid: ["contoso gis", "-contoso", chars(64)] },
  urlHostname: { valid: [text("gis.contoso.com")], invalid: ["https://gis.contoso.com", "gis_contoso.com"] },
  orgUrl: {
    valid: [text("https://www.contoso.com/about")],
    invalid: ["www.contoso.com", "mailto:gis@contoso.com"],
  },
  orgEmail: { valid: [text("gis@contoso.com")], invalid: ["gis.contoso.com", "gis @contoso.com"] },
  orgPhone: { valid: [text("+1 (555) 010-0100 x12")], invalid: ["call reception", "555#0100"] },
  canSearchPublic: booleanCases(true),
  canSharePublic: booleanCases(true),
  canShareVendorPublic: booleanCases(false),
  allowedOrigins: {
    valid: [
      jsonValue(["https://app.example.com", "http://localhost:8080"]),
      jsonValue(origins(100), { label: "100 origins" }),
    ],
    invalid: [
      { send: JSON.stringify(origins(101)), label: "101 origins" },
      '["https://app.example.com/path"]',
      '["app.example.com"]',
      '"https://app.example.com"',
    ],
  },
  allowedExternalLinks: {
    valid: [jsonValue(["https://docs.example.com", "https://blog.example.com"])],
    invalid: ['"https://docs.example.com"', "[1,2]"],
  },
  authorizedCrossOriginDomains: {
    valid: [jsonValue(TRUSTED_DOMAINS)],
    invalid: ['{"domain":"https://trusted.example.com"}', "[5]"],
  },
  authorizedCrossOriginNoCorsDomains: {
    valid: [
      jsonValue(["https://trusted.example.com"], { with: { authorizedCrossOriginDomains: TRUSTED_DOMAINS } }),
    ],
    invalid: ['"https://trusted.example.com"', "[true]"],
  },
  allowedRedirectUris: {
    valid: [jsonValue(["https://app.example.com/oauth-callback"])],
    invalid: ['["not a uri"]', '"https://app.example.com/oauth-callback"'],
  },
  access: { valid: [text("public"), text("private")], invalid: ["everyone", "org"] },
  allSSL: booleanCases(false),
  useStandardizedQuery: booleanCases(true),
  canSigninVendor: booleanCases(true),
  canSigninIDP: booleanCases(false),
  canSigninSocial: booleanCases(false),
  canSigninOIDC: booleanCases(false),
  commentsEnabled: booleanCases(true),
  maxTokenExpirationMinutes: {
    valid: [int(525_600), int(120)],
    invalid: ["0", "-2", "525601", "1.5"],
  },
  updateUserProfileDisabled: booleanCases(false),
  notificationsEnabled: booleanCases(false),
  contacts: {
    valid: [jsonValue([ADMIN.username])],
    invalid: ['"admin_user"', '["not a user name"]', '["nobody_here"]'],
  },
  platformSSO: booleanCases(false),
  portalProperties: {
    valid: [
      jsonValue({
        links: { contactUs: { url: "mailto:gis@contoso.com", visible: true } },
        sharedTheme: { header: { background: "#003366" } },
      }),
    ],
    invalid: ["[]", '"theme"', "42"],
  },
};

const SETTING_NAMES = Object.keys(ORG_SETTINGS) as SettingName[];
const JSON_SETTINGS = SETTING_NAMES.filter((name) => ORG_SETTINGS[name].spec.kind === "json");

function labelOf(value: { send: string; label?: string }): string {
  if (value.label) return value.label;
  return value.send.length > 60 ? `${value.send.slice(0, 57)}...` : JSON.stringify(value.send);
}

function settingsOf(view: Record<string, unknown>, names: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(names.map((name) => [name, view[name]]));
}

/** The error envelope of `wire.md` §2 for a refused parameter. */
function expectRefused(answer: any, parameter: string): void {
  expect(answer).toEqual({
    error: {
      code: 400,
      messageCode: expect.any(String),
      message: expect.stringContaining(`'${parameter}'`),
      details: expect.arrayContaining([expect.stringContaining(parameter)]),
    },
  });
  for (const detail of answer.error.details) expect(typeof detail).toBe("string");
}

/** The JavaScript type a stored value must have, by the kind of parameter it was sent as. */
function expectTyped(name: SettingName, value: unknown): void {
  switch (ORG_SETTINGS[name].spec.kind) {
    case "boolean":
      expect(typeof value).toBe("boolean");
      break;
    case "integer":
      expect(Number.isInteger(value)).toBe(true);
      break;
    case "json":
      expect(value !== null && typeof value === "object").toBe(true);
      break;
    default:
      expect(typeof value).toBe("string");
  }
}

describe("update parameters", () => {
  let portal: TestPortal;
  const self = () => portal.get("/portals/self", {}, portal.adminToken);
  const update = (params: Record<string, unknown>) =>
    portal.post("/portals/self/update", params, portal.adminToken);

  beforeAll(async () => {
    // Behind a trusted TLS proxy, so that storing allSSL=true does not lock the helpers out.
    portal = await startTestPortal({
      env: { PORTICO_TRUST_PROXY: "127.0.0.1" },
      headers: { "X-Forwarded-Proto": "https" },
    });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("has valid and invalid test values for every setting of ORG_SETTINGS", () => {
    expect(Object.keys(CASES).sort()).toEqual([...SETTING_NAMES].sort());
    for (const [name, cases] of Object.entries(CASES)) {
      expect(cases.valid.length, `valid values of ${name}`).toBeGreaterThan(0);
      if (cases.anyValueIsValid === undefined) {
        expect(cases.invalid.length, `invalid values of ${name}`).toBeGreaterThan(0);
      }
    }
  });

  for (const name of SETTING_NAMES) {
    const cases = CASES[name] ?? { valid: [], invalid: [] };
    for (const value of cases.valid) {
      it(`stores ${name}=${labelOf(value)} and reports it typed in portals/self`, async () => {
        const before = await self();
        const answer = await update({ [name]: value.send, ...value.with });
        expect(answer).toEqual({ success: true, orgId: before.id });
        const after = await self();
        expect(after[name]).toStrictEqual(value.stored);
        expectTyped(name, after[name]);
        expect(after.modified).toBeGreaterThan(before.modified);
        const others = SETTING_NAMES.filter(
          (other) => other !== name && !(value.with && other in value.with),
        );
        expect(settingsOf(after, others)).toStrictEqual(settingsOf(before, others));
      });
    }
    for (const raw of cases.invalid) {
      const value = typeof raw === "string" ? { send: raw } : raw;
      it(`refuses ${name}=${labelOf(value)} naming the parameter and writes nothing`, async () => {
        const before = await self();
        expectRefused(await update({ [name]: value.send }), name);
        expect(await self()).toStrictEqual(before);
      });
    }
  }

  for (const name of JSON_SETTINGS) {
    it(`refuses malformed JSON text for ${name} naming the parameter`, async () => {
      const before = await self();
      const answer = await update({ [name]: '{"url": "https://x.example.com", ' });
      expectRefused(answer, name);
      expect(answer.error.message).toMatch(/JSON/);
      expect(await self()).toStrictEqual(before);
    });
  }
});

describe("a rejected update", () => {
  let portal: TestPortal;
  const self = () => portal.get("/portals/self", {}, portal.adminToken);
  const update = (params: Record<string, unknown>) =>
    portal.post("/portals/self/update", params, portal.adminToken);

  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("leaves every setting unchanged when one of several parameters is invalid", async () => {
    const before = await self();
    const answer = await update({
      name: "Renamed",
      description: "New description",
      canSharePublic: false,
      maxTokenExpirationMinutes: 30,
      portalProperties: { theme: "dark" },
      homePageFeaturedContentCount: 101,
      units: "metric",
    });
    expectRefused(answer, "homePageFeaturedContentCount");
    expect(await self()).toStrictEqual(before);
  });

  it("leaves every setting unchanged when a cross-field rule fails", async () => {
    const before = await self();
    const answer = await update({
      name: "Renamed",
      allSSL: false,
      authorizedCrossOriginDomains: ["https://a.example.com"],
      authorizedCrossOriginNoCorsDomains: ["https://a.example.com", "https://b.example.com"],
    });
    expectRefused(answer, "authorizedCrossOriginNoCorsDomains");
    expect(answer.error.details.join(" ")).toContain("https://b.example.com");
    expect(await self()).toStrictEqual(before);
  });

  it("refuses authorizedCrossOriginNoCorsDomains entries missing from the stored authorizedCrossOriginDomains", async () => {
    expect(await update({ authorizedCrossOriginDomains: ["https://a.example.com"] })).toMatchObject({
      success: true,
    });
    const before = await self();
    expectRefused(
      await update({
        authorizedCrossOriginNoCorsDomains: ["https://a.example.com", "https://c.example.com"],
      }),
      "authorizedCrossOriginNoCorsDomains",
    );
    expect(await self()).toStrictEqual(before);
    expect(await update({ authorizedCrossOriginNoCorsDomains: ["https://a.example.com"] })).toMatchObject({
      success: true,
    });
    expect((await self()).authorizedCrossOriginNoCorsDomains).toEqual(["https://a.example.com"]);
  });

  it("refuses to drop a domain from authorizedCrossOriginDomains that authorizedCrossOriginNoCorsDomains lists", async () => {
    await update({
      authorizedCrossOriginDomains: ["https://a.example.com", "https://d.example.com"],
      authorizedCrossOriginNoCorsDomains: ["https://a.example.com"],
    });
    const before = await self();
    expectRefused(
      await update({ authorizedCrossOriginDomains: ["https://d.example.com"] }),
      "authorizedCrossOriginNoCorsDomains",
    );
    expect(await self()).toStrictEqual(before);
  });

  it("refuses contacts that are not administrators of the organization", async () => {
    const member = await portal.addUser("contact_member");
    const before = await self();
    expectRefused(await update({ contacts: [ADMIN.username, member.username] }), "contacts");
    expect(await self()).toStrictEqual(before);
  });
});

describe("clearEmptyFields", () => {
  let portal: TestPortal;
  let initial: Record<string, unknown>;
  const self = () => portal.get("/portals/self", {}, portal.adminToken);
  const update = (params: Record<string, unknown>) =>
    portal.post("/portals/self/update", params, portal.adminToken);
  const custom = {
    name: "Custom Name",
    units: "metric",
    canSharePublic: false,
    homePageFeaturedContentCount: 5,
    portalProperties: { theme: "dark" },
    allowedOrigins: ["https://app.example.com"],
    geometryService: { url: "https://x.example.com/arcgis/rest/services/Utilities/Geometry/GeometryServer" },
  };
  const names = Object.keys(custom);
  const allEmpty = Object.fromEntries(names.map((name) => [name, ""]));

  beforeAll(async () => {
    portal = await startTestPortal();
    initial = await self();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("leaves fields passed empty unchanged without clearEmptyFields", async () => {
    expect(await update(custom)).toMatchObject({ success: true });
    expect(await update(allEmpty)).toMatchObject({ success: true });
    expect(settingsOf(await self(), names)).toStrictEqual(custom);
  });

  it("leaves fields passed empty unchanged with clearEmptyFields=false", async () => {
    expect(await update(custom)).toMatchObject({ success: true });
    expect(await update({ ...allEmpty, clearEmptyFields: false })).toMatchObject({ success: true });
    expect(settingsOf(await self(), names)).toStrictEqual(custom);
  });

  it("resets fields passed empty to the value of a new organization with clearEmptyFields=true", async () => {
    expect(await update({ ...custom, description: "kept" })).toMatchObject({ success: true });
    expect(await update({ ...allEmpty, clearEmptyFields: true })).toMatchObject({ success: true });
    const after = await self();
    expect(settingsOf(after, names)).toStrictEqual(settingsOf(initial, names));
    expect(after.description).toBe("kept");
    expect(after.helperServices.geometry).toBeUndefined();
  });

  it("clears only the empty fields and sets the others in the same request", async () => {
    expect(await update(custom)).toMatchObject({ success: true });
    expect(await update({ name: "", units: "english", clearEmptyFields: true })).toMatchObject({
      success: true,
    });
    const after = await self();
    expect(after.name).toBe(initial.name);
    expect(after.units).toBe("english");
    expect(after.canSharePublic).toBe(false);
    expect(after.portalProperties).toEqual({ theme: "dark" });
  });

  it("refuses a clearEmptyFields value that is not a boolean", async () => {
    const before = await self();
    expectRefused(await update({ name: "", clearEmptyFields: "yes" }), "clearEmptyFields");
    expect(await self()).toStrictEqual(before);
  });
});

describe("who may update the organization", () => {
  let portal: TestPortal;
  let member: { username: string; token: string };
  let websiteAdmin: { username: string; token: string };
  const self = () => portal.get("/portals/self", {}, portal.adminToken);

  beforeAll(async () => {
    portal = await startTestPortal();
    member = await portal.addUser("plain_member");
    websiteAdmin = await portal.addUser("website_admin");
    const role = await portal.post(
      "/portals/self/createRole",
      { name: "Website editors" },
      portal.adminToken,
    );
    expect(role).toMatchObject({ success: true, id: expect.any(String) });
    const privileges = { privileges: ["portal:admin:manageWebsite"] };
    const set = await portal.post(
      `/portals/self/roles/${role.id}/setPrivileges`,
      { privileges },
      portal.adminToken,
    );
    expect(set).toEqual({ success: true });
    const assigned = await portal.post(
      "/portals/self/updateUserRole",
      { user: websiteAdmin.username, role: role.id },
      portal.adminToken,
    );
    expect(assigned).toEqual({ success: true });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("answers an anonymous caller with 499 and writes nothing", async () => {
    const before = await self();
    const answer = await portal.post("/portals/self/update", { name: "Anonymous rename" });
    expect(answer.error).toMatchObject({ code: 499, message: "Token Required." });
    expect(await self()).toStrictEqual(before);
  });

  it("answers a member with 403 and writes nothing", async () => {
    const before = await self();
    const answer = await portal.post("/portals/self/update", { name: "Member rename" }, member.token);
    expect(answer.error).toMatchObject({ code: 403 });
    expect(await self()).toStrictEqual(before);
  });

  it("answers a member with 403, not a validation error, when a value is also invalid", async () => {
    // The pipeline checks the privilege before it validates parameters: a caller who may not
    // update learns nothing about which values would be accepted.
    const before = await self();
    const answer = await portal.post(
      "/portals/self/update",
      { name: "Member rename", homePageFeaturedContentCount: 101 },
      member.token,
    );
    expect(answer.error).toMatchObject({ code: 403 });
    expect(await self()).toStrictEqual(before);
  });

  it("lets the administrator update and answers success with the organization id", async () => {
    const before = await self();
    const answer = await portal.post("/portals/self/update", { name: "Admin rename" }, portal.adminToken);
    expect(answer).toEqual({ success: true, orgId: before.id });
    expect((await self()).name).toBe("Admin rename");
  });

  it("accepts the organization id in place of self", async () => {
    const { id } = await self();
    const answer = await portal.post(`/portals/${id}/update`, { name: "Renamed by id" }, portal.adminToken);
    expect(answer).toEqual({ success: true, orgId: id });
    expect((await self()).name).toBe("Renamed by id");
  });

  it("answers an unknown portal id with a 400 error and writes nothing", async () => {
    const before = await self();
    const answer = await portal.post(
      "/portals/0123456789abcdef/update",
      { name: "Elsewhere" },
      portal.adminToken,
    );
    expect(answer.error).toMatchObject({ code: 400, message: expect.stringContaining("0123456789abcdef") });
    expect(await self()).toStrictEqual(before);
  });

  it("lets a custom role with portal:admin:manageWebsite change name", async () => {
    const before = await self();
    const answer = await portal.post("/portals/self/update", { name: "Website team" }, websiteAdmin.token);
    expect(answer).toEqual({ success: true, orgId: before.id });
    expect((await self()).name).toBe("Website team");
  });

  it("answers a custom role with only portal:admin:manageWebsite with 403 for allSSL", async () => {
    const before = await self();
    const answer = await portal.post("/portals/self/update", { allSSL: true }, websiteAdmin.token);
    expect(answer.error).toMatchObject({ code: 403 });
    expect(await self()).toStrictEqual(before);
  });

  it("writes nothing when a website administrator mixes name with a security setting", async () => {
    const before = await self();
    const answer = await portal.post(
      "/portals/self/update",
      { name: "Sneaky", canSharePublic: false },
      websiteAdmin.token,
    );
    expect(answer.error).toMatchObject({ code: 403 });
    expect(await self()).toStrictEqual(before);
  });

  it("answers a website administrator with 403 for a utility service", async () => {
    const before = await self();
    const answer = await portal.post(
      "/portals/self/update",
      {
        geometryService: {
          url: "https://x.example.com/arcgis/rest/services/Utilities/Geometry/GeometryServer",
        },
      },
      websiteAdmin.token,
    );
    expect(answer.error).toMatchObject({ code: 403 });
    expect(await self()).toStrictEqual(before);
  });

  it("answers a website administrator with 403 for clearing a security setting with clearEmptyFields", async () => {
    await portal.post("/portals/self/update", { maxTokenExpirationMinutes: 90 }, portal.adminToken);
    const before = await self();
    const answer = await portal.post(
      "/portals/self/update",
      { maxTokenExpirationMinutes: "", clearEmptyFields: true },
      websiteAdmin.token,
    );
    expect(answer.error).toMatchObject({ code: 403 });
    expect(await self()).toStrictEqual(before);
    expect(before.maxTokenExpirationMinutes).toBe(90);
  });
});

describe("allowedOrigins drives CORS", () => {
  let portal: TestPortal;
  const update = (params: Record<string, unknown>) =>
    portal.post("/portals/self/update", params, portal.adminToken);
  const get = (origin: string) => fetch(`${portal.api}/portals/self?f=json`, { headers: { Origin: origin } });
  const preflight = (origin: string) =>
    fetch(`${portal.api}/portals/self/update`, {
      method: "OPTIONS",
      headers: { Origin: origin, "Access-Control-Request-Method": "POST" },
    });

  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("grants any origin and answers its preflight with 204 when allowedOrigins is empty", async () => {
    expect((await portal.get("/portals/self", {}, portal.adminToken)).allowedOrigins).toEqual([]);
    const origin = "https://anywhere.example.org";
    const res = await get(origin);
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    const pre = await preflight(origin);
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe(origin);
    expect(pre.headers.get("access-control-allow-methods")).toContain("POST");
  });

  it("grants only the listed origins once allowedOrigins is set, and refuses other preflights with 403", async () => {
    expect(await update({ allowedOrigins: ["https://good.example.com"] })).toMatchObject({ success: true });

    const good = await get("https://good.example.com");
    expect(good.headers.get("access-control-allow-origin")).toBe("https://good.example.com");
    const goodPre = await preflight("https://good.example.com");
    expect(goodPre.status).toBe(204);
    expect(goodPre.headers.get("access-control-allow-origin")).toBe("https://good.example.com");

    const other = await get("https://evil.example.com");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const otherPre = await preflight("https://evil.example.com");
    expect(otherPre.status).toBe(403);
    expect(otherPre.headers.get("access-control-allow-origin")).toBeNull();

    // Emptying the list opens CORS to every origin again.
    expect(await update({ allowedOrigins: [] })).toMatchObject({ success: true });
    expect((await get("https://evil.example.com")).headers.get("access-control-allow-origin")).toBe(
      "https://evil.example.com",
    );
  });
});

describe("maxTokenExpirationMinutes caps tokens", () => {
  let portal: TestPortal;

  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("issues a token expiring within 5 minutes when 600 are asked and the maximum is 5", async () => {
    const signIn = () =>
      portal.post("/generateToken", {
        ...ADMIN,
        client: "referer",
        referer: "https://app.example.com",
        expiration: 600,
      });
    const uncapped = await signIn();
    expect(uncapped.expires).toBeGreaterThan(Date.now() + 5 * 60_000);

    expect(
      await portal.post("/portals/self/update", { maxTokenExpirationMinutes: 5 }, portal.adminToken),
    ).toMatchObject({ success: true });
    const before = Date.now();
    const capped = await signIn();
    expect(typeof capped.token).toBe("string");
    expect(capped.expires).toBeGreaterThanOrEqual(before + 5 * 60_000);
    expect(capped.expires).toBeLessThanOrEqual(Date.now() + 5 * 60_000);
  });
});

describe("allSSL behind a trusted proxy", () => {
  let portal: TestPortal;
  const selfOver = (headers: Record<string, string> = {}) =>
    fetch(`${portal.api}/portals/self?f=json`, { headers }).then(json);

  beforeAll(async () => {
    portal = await startTestPortal({ env: { PORTICO_TRUST_PROXY: "127.0.0.1" } });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("serves plain HTTP while allSSL is false", async () => {
    const answer = await selfOver();
    expect(answer.error).toBeUndefined();
    expect(answer.allSSL).toBe(false);
  });

  it("refuses to turn allSSL on over plain HTTP, which would lock the caller out", async () => {
    const answer = await portal.post("/portals/self/update", { allSSL: true }, portal.adminToken);
    expect(answer.error).toMatchObject({ code: 400 });
    expect(answer.error.message).toContain("'allSSL'");
    expect((await selfOver()).allSSL).toBe(false);
  });

  it("refuses plain HTTP with 403 SSL Required once allSSL is true, and serves X-Forwarded-Proto: https", async () => {
    const enable = await fetch(`${portal.api}/portals/self/update`, {
      method: "POST",
      headers: { "X-Forwarded-Proto": "https" },
      body: form({ f: "json", token: portal.adminToken, allSSL: true }),
    }).then(json);
    expect(enable).toMatchObject({ success: true });

    const res = await fetch(`${portal.api}/portals/self?f=json`);
    expect(res.status).toBe(200);
    expect((await json(res)).error).toMatchObject({ code: 403, message: "SSL Required" });
    const plainUpdate = await fetch(`${portal.api}/portals/self/update`, {
      method: "POST",
      body: form({ f: "json", token: portal.adminToken, allSSL: false }),
    }).then(json);
    expect(plainUpdate.error).toMatchObject({ code: 403, message: "SSL Required" });

    const https = await selfOver({ "X-Forwarded-Proto": "https" });
    expect(https.error).toBeUndefined();
    expect(https.allSSL).toBe(true);
    const token = await fetch(`${portal.api}/generateToken`, {
      method: "POST",
      headers: { "X-Forwarded-Proto": "https" },
      body: form({ f: "json", ...ADMIN, client: "requestip" }),
    }).then(json);
    expect(token).toMatchObject({ token: expect.any(String), ssl: true });
  });
});

describe("allSSL without a trusted proxy", () => {
  let portal: TestPortal;

  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("ignores X-Forwarded-Proto from a peer that is not a trusted proxy", async () => {
    // The header claims HTTPS, but the peer is not a trusted proxy: the request counts as plain
    // HTTP, so turning allSSL on is refused and nothing changes.
    const answer = await fetch(`${portal.api}/portals/self/update`, {
      method: "POST",
      headers: { "X-Forwarded-Proto": "https" },
      body: form({ f: "json", token: portal.adminToken, allSSL: true }),
    }).then(json);
    expect(answer.error.message).toContain("'allSSL'");
    expect((await portal.get("/portals/self", {}, portal.adminToken)).allSSL).toBe(false);
  });
});

describe("access decides what anonymous callers read", () => {
  let portal: TestPortal;
  const update = (params: Record<string, unknown>) =>
    portal.post("/portals/self/update", params, portal.adminToken);
  const anonymous = () => portal.get("/portals/self");
  const geometry = { url: "https://x.example.com/arcgis/rest/services/Utilities/Geometry/GeometryServer" };
  const privateSettings = [
    "portalProperties",
    "vendorKey",
    "orgEmail",
    "orgPhone",
    "allowedOrigins",
    "authorizedCrossOriginDomains",
    "allowedRedirectUris",
    "contacts",
    "maxTokenExpirationMinutes",
  ];

  beforeAll(async () => {
    portal = await startTestPortal();
    const answer = await update({
      portalProperties: { links: { contactUs: { url: "mailto:gis@contoso.com" } } },
      geometryService: geometry,
      vendorKey: "vendor-secret-key",
      orgEmail: "gis@contoso.com",
      orgPhone: "+1 555 0100",
      allowedOrigins: ["https://app.example.com"],
      authorizedCrossOriginDomains: ["https://trusted.example.com"],
      allowedRedirectUris: ["https://app.example.com/callback"],
      contacts: [ADMIN.username],
      maxTokenExpirationMinutes: 600,
    });
    expect(answer).toMatchObject({ success: true });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("shows anonymous callers only the public subset of a private organization", async () => {
    expect(await update({ access: "private" })).toMatchObject({ success: true });
    const admin = await portal.get("/portals/self", {}, portal.adminToken);
    for (const name of privateSettings) expect(admin, name).toHaveProperty(name);
    expect(admin.helperServices.geometry).toEqual(geometry);

    const view = await anonymous();
    expect(view).toMatchObject({ id: admin.id, name: admin.name, access: "private" });
    for (const name of privateSettings) expect(view, name).not.toHaveProperty(name);
    expect(view.helperServices ?? {}).toEqual({});
    expect(view.user).toBeUndefined();
  });

  it("shows anonymous callers portalProperties and helper services of a public organization", async () => {
    expect(await update({ access: "public" })).toMatchObject({ success: true });
    const view = await anonymous();
    expect(view.access).toBe("public");
    expect(view.portalProperties).toEqual({ links: { contactUs: { url: "mailto:gis@contoso.com" } } });
    expect(view.helperServices.geometry).toEqual(geometry);
  });

  it("hides vendorKey from anonymous callers unless canShareVendorPublic is true", async () => {
    expect(await update({ access: "public", canShareVendorPublic: false })).toMatchObject({ success: true });
    expect(await anonymous()).not.toHaveProperty("vendorKey");
    expect((await portal.get("/portals/self", {}, portal.adminToken)).vendorKey).toBe("vendor-secret-key");

    expect(await update({ canShareVendorPublic: true })).toMatchObject({ success: true });
    expect((await anonymous()).vendorKey).toBe("vendor-secret-key");
  });
});

describe("updateUserProfileDisabled", () => {
  let portal: TestPortal;
  let member: { username: string; token: string };
  const description = (username: string, value: string, token: string) =>
    portal.post(`/community/users/${username}/update`, { description: value }, token);
  const descriptionOf = async (username: string) =>
    (await portal.get(`/community/users/${username}`, {}, portal.adminToken)).description;

  beforeAll(async () => {
    portal = await startTestPortal();
    member = await portal.addUser("profile_member");
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("lets a member edit their own description while it is false", async () => {
    expect(await description(member.username, "Field crew", member.token)).toMatchObject({ success: true });
    expect(await descriptionOf(member.username)).toBe("Field crew");
  });

  it("refuses a member's own description with 403 when true, and still lets an administrator edit it", async () => {
    expect(
      await portal.post("/portals/self/update", { updateUserProfileDisabled: true }, portal.adminToken),
    ).toMatchObject({ success: true });
    const before = await descriptionOf(member.username);

    const refused = await description(member.username, "Changed by me", member.token);
    expect(refused.error).toMatchObject({ code: 403 });
    expect(await descriptionOf(member.username)).toBe(before);

    expect(await description(member.username, "Set by the administrator", portal.adminToken)).toMatchObject({
      success: true,
    });
    expect(await descriptionOf(member.username)).toBe("Set by the administrator");
    expect(await description(ADMIN.username, "Administrator", portal.adminToken)).toMatchObject({
      success: true,
    });
    expect(await descriptionOf(ADMIN.username)).toBe("Administrator");
  });
});

describe("helperServices", () => {
  let portal: TestPortal;
  const self = () => portal.get("/portals/self", {}, portal.adminToken);

  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("reports geometryService as helperServices.geometry and printServiceTask as helperServices.printTask", async () => {
    const geometryUrl = "https://x.example.com/arcgis/rest/services/Utilities/Geometry/GeometryServer";
    const printTask = {
      url: "https://x.example.com/arcgis/rest/services/Utilities/PrintingTools/GPServer/Export%20Web%20Map%20Task",
      templates: [{ layout: "Letter ANSI A Portrait", format: "PDF", label: "Letter" }],
    };
    expect((await self()).helperServices.geometry).toBeUndefined();
    const answer = await portal.post(
      "/portals/self/update",
      { geometryService: { url: geometryUrl }, printServiceTask: printTask },
      portal.adminToken,
    );
    expect(answer).toMatchObject({ success: true });
    const { helperServices } = await self();
    expect(helperServices.geometry.url).toBe(geometryUrl);
    expect(helperServices.printTask).toEqual(printTask);
  });
});

describe("response formats of update", () => {
  let portal: TestPortal;

  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  for (const f of ["pjson", "pjsonm"]) {
    it(`answers f=${f} with pretty JSON`, async () => {
      const { id } = await portal.get("/portals/self", {}, portal.adminToken);
      const res = await fetch(`${portal.api}/portals/self/update`, {
        method: "POST",
        body: form({ f, token: portal.adminToken, name: `Pretty ${f}` }),
      });
      expect(res.headers.get("content-type")).toContain("application/json");
      const body = await res.text();
      expect(body).toContain('\n  "success": true');
      expect(JSON.parse(body)).toEqual({ success: true, orgId: id });
      expect((await portal.get("/portals/self", {}, portal.adminToken)).name).toBe(`Pretty ${f}`);
    });
  }
});
