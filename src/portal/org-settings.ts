import { USERNAME_PATTERN } from "../auth/username.js";
import { type JsonSchema, type ParamSpec, p } from "../validation/params.js";

/**
 * Every setting of the organization update operation (`interface.md` §4.4), as data: how the value
 * is sent and checked, which administrative privilege may change it, and its default. The update
 * route, the service and `portals/self` all read this one table.
 */
type SettingGroup = "website" | "security" | "utilityServices";

interface SettingDef {
  spec: ParamSpec<unknown, false>;
  group: SettingGroup;
  /** The value a fresh organization has and the one `clearEmptyFields` restores. */
  default: unknown;
  /** Where the service reference appears in `portals/self.helperServices`, if it is one. */
  helperKey?: string;
}

const HTTP_URL = /^https?:\/\/[^\s]+$/i;
const urlString = { type: "string", maxLength: 2048, pattern: "^https?://\\S+$" } as const;

/** A reference to a utility service: `{"url": "..."}` plus service-specific properties. */
const serviceRef: JsonSchema = {
  type: "object",
  properties: { url: urlString, defaultTravelMode: { type: "string" } },
  required: ["url"],
};

const stringArray = (
  maxItems: number,
  item: JsonSchema = { type: "string", maxLength: 2048 },
): JsonSchema => ({
  type: "array",
  maxItems,
  items: item,
});

const spatialReference: JsonSchema = {
  type: "object",
  properties: { wkid: { type: "integer" }, latestWkid: { type: "integer" }, wkt: { type: "string" } },
};

const extent: JsonSchema = {
  type: "object",
  properties: {
    xmin: { type: "number" },
    ymin: { type: "number" },
    xmax: { type: "number" },
    ymax: { type: "number" },
    spatialReference,
  },
  required: ["xmin", "ymin", "xmax", "ymax"],
};

const groupQuery = (): SettingDef => ({ spec: p.string({ maxLength: 1024 }), group: "website", default: "" });
const flag = (group: SettingGroup, value: boolean): SettingDef => ({
  spec: p.boolean(),
  group,
  default: value,
});
const service = (helperKey: string): SettingDef => ({
  spec: p.json(serviceRef),
  group: "utilityServices",
  default: null,
  helperKey,
});

/** Origins are scheme://host[:port], nothing after: that is what a browser sends in `Origin`. */
function checkOrigins(value: unknown): string | undefined {
  for (const entry of value as string[]) {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      return `entry '${entry}' is not an origin such as https://app.example.com`;
    }
    if ((url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== entry.replace(/\/$/, "")) {
      return `entry '${entry}' is not an origin such as https://app.example.com`;
    }
  }
  return undefined;
}

export const ORG_SETTINGS = {
  name: { spec: p.string({ maxLength: 250 }), group: "website", default: "portico" },
  description: { spec: p.string(), group: "website", default: "" },
  thumbnail: {
    spec: p.string({
      maxLength: 2048,
      pattern: /\.(png|gif|jpe?g)$/i,
      patternReason: "must name a PNG, GIF or JPEG image",
    }),
    group: "website",
    default: "",
  },
  culture: {
    spec: p.string({
      pattern: /^[a-z]{2,3}(-[A-Za-z]{2,4})?$/,
      patternReason: "must be a language code and an optional country code, such as en or pt-BR",
    }),
    group: "website",
    default: "en",
  },
  cultureFormat: {
    spec: p.string({
      pattern: /^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?$/,
      patternReason: "must be a CLDR format code",
    }),
    group: "website",
    default: "us",
  },
  region: {
    spec: p.string({ pattern: /^[A-Za-z]{2,3}$/, patternReason: "must be a region code such as US or WO" }),
    group: "website",
    default: "WO",
  },
  units: { spec: p.string({ enum: ["english", "metric"] }), group: "website", default: "english" },
  featuredItemsGroupQuery: groupQuery(),
  homePageFeaturedContent: groupQuery(),
  homePageFeaturedContentCount: { spec: p.integer({ min: 0, max: 100 }), group: "website", default: 12 },
  featuredGroups: {
    spec: p.json({
      type: "array",
      maxItems: 100,
      items: {
        type: "object",
        properties: { owner: { type: "string" }, title: { type: "string" }, id: { type: "string" } },
        required: ["owner", "title"],
      },
    }),
    group: "website",
    default: [],
  },
  basemapGalleryGroupQuery: groupQuery(),
  templatesGroupQuery: groupQuery(),
  layerTemplatesGroupQuery: groupQuery(),
  symbolSetsGroupQuery: groupQuery(),
  colorSetsGroupQuery: groupQuery(),
  analysisLayersGroupQuery: groupQuery(),
  stylesGroupQuery: groupQuery(),
  "2DStylesGroupQuery": groupQuery(),
  defaultBasemap: {
    spec: p.json({
      type: "object",
      properties: { title: { type: "string" }, baseMapLayers: { type: "array", items: { type: "object" } } },
    }),
    group: "website",
    default: null,
  },
  defaultExtent: { spec: p.json(extent), group: "website", default: null },
  rotatorPanels: {
    spec: p.json({ type: "array", maxItems: 100, items: { type: "object" } }),
    group: "website",
    default: [],
  },
  showHomePageDescription: flag("website", false),
  backgroundImage: { spec: p.string({ maxLength: 2048 }), group: "website", default: "" },
  helpBase: {
    spec: p.string({ maxLength: 2048, pattern: HTTP_URL, patternReason: "must be an http or https URL" }),
    group: "website",
    default: "",
  },
  metadataEditable: flag("website", false),
  metadataFormats: {
    spec: p.string({ enum: ["arcgis", "fgdc", "inspire", "iso19139", "iso19139-3.2", "iso19115"] }),
    group: "website",
    default: "",
  },
  useVectorBasemaps: flag("website", false),
  vendorKey: { spec: p.string({ maxLength: 1024 }), group: "website", default: "" },
  defaultUserCreditAssignment: { spec: p.integer({ min: 0, also: [-1] }), group: "website", default: -1 },
  creditAssignments: {
    spec: p.string({ enum: ["enabled", "disabled"] }),
    group: "website",
    default: "disabled",
  },

  geocodeService: {
    spec: p.json({ type: "array", maxItems: 20, items: serviceRef }),
    group: "utilityServices",
    default: [],
    helperKey: "geocode",
  },
  asyncGeocodeService: service("asyncGeocode"),
  routeServiceLayer: service("route"),
  asyncRouteService: service("asyncRoute"),
  routingUtilitiesService: service("routingUtilities"),
  closestFacilityService: service("closestFacility"),
  asyncClosestFacilityService: service("asyncClosestFacility"),
  serviceAreaService: service("serviceArea"),
  asyncServiceAreaService: service("asyncServiceArea"),
  syncVRPService: service("syncVRP"),
  asyncVRPService: service("asyncVRP"),
  asyncFleetRouting: service("asyncFleetRouting"),
  odCostMatrixService: service("odCostMatrix"),
  asyncODCostMatrixService: service("asyncODCostMatrix"),
  asyncLocationAllocationService: service("asyncLocationAllocation"),
  geometryService: service("geometry"),
  elevation3DService: service("elevation3D"),
  elevationService: service("elevation"),
  elevationSyncService: service("elevationSync"),
  hydrologyService: service("hydrology"),
  printServiceTask: {
    spec: p.json({
      type: "object",
      properties: {
        url: urlString,
        templates: {
          type: "array",
          items: {
            type: "object",
            properties: { layout: { type: "string" }, format: { type: "string" }, label: { type: "string" } },
            required: ["layout", "format"],
          },
        },
      },
      required: ["url"],
    }),
    group: "utilityServices",
    default: null,
    helperKey: "printTask",
  },
  analysisService: service("analysis"),
  rasterAnalyticsService: service("rasterAnalytics"),
  rasterUtilitiesService: service("rasterUtilities"),
  orthoMappingService: service("orthoMapping"),
  orthomappingElevationService: service("orthomappingElevation"),
  geoenrichmentService: service("geoenrichment"),
  geoanalyticsService: service("geoanalytics"),
  locationTrackingService: service("locationTracking"),
  trafficService: service("traffic"),
  trafficDataService: service("trafficData"),
  packagingService: service("packaging"),
  routingServicesSource: {
    spec: p.json({
      type: "object",
      properties: {
        sourceName: { type: "string" },
        vendorUsername: { type: "string" },
        firstName: { type: "string" },
        lastName: { type: "string" },
      },
      required: ["sourceName"],
    }),
    group: "utilityServices",
    default: null,
  },

  urlKey: {
    spec: p.string({
      pattern: /^[a-z0-9][a-z0-9-]{0,62}$/i,
      patternReason: "must be letters, digits and hyphens, at most 63 characters",
    }),
    group: "website",
    default: "",
  },
  urlHostname: {
    spec: p.string({
      pattern: /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i,
      patternReason: "must be a host name such as gis.example.com",
    }),
    group: "website",
    default: "",
  },
  orgUrl: {
    spec: p.string({ maxLength: 2048, pattern: HTTP_URL, patternReason: "must be an http or https URL" }),
    group: "website",
    default: "",
  },
  orgEmail: {
    spec: p.string({
      maxLength: 254,
      pattern: /^[^\s@]+@[^\s@]+$/,
      patternReason: "must be an e-mail address",
    }),
    group: "website",
    default: "",
  },
  orgPhone: {
    spec: p.string({ maxLength: 40, pattern: /^[0-9+()./ x-]+$/i, patternReason: "must be a phone number" }),
    group: "website",
    default: "",
  },
  canSearchPublic: flag("security", true),
  canSharePublic: flag("security", true),
  canShareVendorPublic: flag("security", false),
  allowedOrigins: {
    spec: p.json(stringArray(100), { check: checkOrigins }),
    group: "security",
    default: [],
  },
  allowedExternalLinks: { spec: p.json(stringArray(1000)), group: "security", default: [] },
  authorizedCrossOriginDomains: { spec: p.json(stringArray(1000)), group: "security", default: [] },
  authorizedCrossOriginNoCorsDomains: { spec: p.json(stringArray(1000)), group: "security", default: [] },
  allowedRedirectUris: {
    spec: p.json(stringArray(1000, urlString)),
    group: "security",
    default: [],
  },
  access: { spec: p.string({ enum: ["public", "private"] }), group: "security", default: "private" },
  allSSL: flag("security", false),
  useStandardizedQuery: flag("security", true),
  canSigninVendor: flag("security", true),
  canSigninIDP: flag("security", false),
  canSigninSocial: flag("security", false),
  canSigninOIDC: flag("security", false),
  commentsEnabled: flag("website", true),
  maxTokenExpirationMinutes: {
    spec: p.integer({ min: 1, max: 525600, also: [-1] }),
    group: "security",
    default: -1,
  },
  updateUserProfileDisabled: flag("security", false),
  notificationsEnabled: flag("website", false),
  contacts: {
    spec: p.json(stringArray(100, { type: "string", pattern: USERNAME_PATTERN.source })),
    group: "website",
    default: [],
  },
  platformSSO: flag("security", false),
  portalProperties: { spec: p.json({ type: "object" }), group: "website", default: {} },
} satisfies Record<string, SettingDef>;

export type SettingName = keyof typeof ORG_SETTINGS;
export type OrgSettings = Record<SettingName, unknown>;

export const SETTING_NAMES = Object.keys(ORG_SETTINGS) as SettingName[];

/** The privilege that may change each group of settings; the default administrator holds all. */
export const GROUP_PRIVILEGE = {
  website: "portal:admin:manageWebsite",
  security: "portal:admin:manageSecurity",
  utilityServices: "portal:admin:manageUtilityServices",
} as const satisfies Record<SettingGroup, string>;

/**
 * The privileges an update of these settings needs: that of every group touched. An update that
 * touches nothing still needs the website privilege, so it cannot be used to probe for free.
 */
export function privilegesFor(names: readonly SettingName[]): (typeof GROUP_PRIVILEGE)[SettingGroup][] {
  if (names.length === 0) return [GROUP_PRIVILEGE.website];
  return [...new Set(names.map((name) => GROUP_PRIVILEGE[(ORG_SETTINGS[name] as SettingDef).group]))];
}

export function isSettingName(name: string): name is SettingName {
  return Object.hasOwn(ORG_SETTINGS, name);
}

export function defaultSettings(): OrgSettings {
  return Object.fromEntries(
    SETTING_NAMES.map((name) => [name, structuredClone((ORG_SETTINGS[name] as SettingDef).default)]),
  ) as OrgSettings;
}

/** Maximum token lifetime when the organization leaves `maxTokenExpirationMinutes` at -1: two weeks. */
export const DEFAULT_MAX_TOKEN_MINUTES = 20160;

/** `helperServices` of `portals/self`, built from the utility-service settings. */
export function helperServices(settings: OrgSettings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of SETTING_NAMES) {
    const def = ORG_SETTINGS[name] as SettingDef;
    const value = settings[name];
    if (!def.helperKey || value === null || (Array.isArray(value) && value.length === 0)) continue;
    out[def.helperKey] = value;
  }
  return out;
}

/** Settings an anonymous caller may read when the organization is private. */
export const PUBLIC_SETTING_NAMES: readonly SettingName[] = [
  "name",
  "description",
  "thumbnail",
  "culture",
  "cultureFormat",
  "region",
  "units",
  "urlKey",
  "access",
  "allSSL",
  "canSigninVendor",
  "canSigninIDP",
  "canSigninSocial",
  "canSigninOIDC",
  "helpBase",
  "backgroundImage",
];
