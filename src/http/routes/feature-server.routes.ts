import { errors } from "../../errors.js";
import {
  type AddToDefinition,
  addToDefinitionSchema,
  type CreateParameters,
  checkCreateParameters,
  checkUpdateDefinition,
  createParametersSchema,
  type DeleteFromDefinition,
  deleteFromDefinitionSchema,
  SERVER_VERSION,
  type ServiceProperties,
  updateDefinitionSchema,
} from "../../features/service-definition.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

/** The portal's public base without `/sharing/rest`: what ArcGIS calls the owning system. */
export const owningSystemUrl = (apiBase: string) => apiBase.replace(/\/sharing\/rest$/, "");
/** Where the hosted services live: the `server` root, beside `/sharing/rest`. */
const servicesBase = (apiBase: string) => `${owningSystemUrl(apiBase)}/rest/services`;

/**
 * createService on the portal, and the hosted feature services it creates: the service and layer
 * resources, their admin operations, and the server's `/rest/info` that Esri's clients ask before
 * exchanging a portal token for a server token.
 */
/**
 * Service definitions (layers with their fields, renderers and symbols, whose pictures travel
 * base64-encoded) run to megabytes; the operations that take one accept this much.
 */
const DEFINITION_BODY_LIMIT = 16 * 1024 * 1024;

export const featureServerRoutes = [
  defineRoute({
    name: "content.createService",
    methods: ["POST"],
    path: ["/content/users/:username/createService", "/content/users/:username/:folderId/createService"],
    auth: "required",
    privilege: "portal:publisher:publishFeatures",
    bodyLimit: DEFINITION_BODY_LIMIT,
    params: {
      createParameters: p.json<CreateParameters, true>(createParametersSchema, {
        required: true,
        check: checkCreateParameters,
      }),
      outputType: p.string({ required: true, enum: ["featureService"], caseInsensitive: true }),
      isView: p.boolean(),
      overwrite: p.boolean(),
      description: p.string({ maxLength: 32000 }),
      tags: p.list({ maxItems: 128, item: { maxLength: 256 } }),
      snippet: p.string({ maxLength: 2048 }),
    },
    handler: async ({ params, path, caller, services, apiBase }) => {
      if (params.isView) {
        throw errors.invalidParameter(
          "isView",
          "cannot be true: a location-tracking view needs a location-tracking service, and none exists",
        );
      }
      if (params.overwrite) {
        throw errors.invalidParameter(
          "overwrite",
          "is not supported: delete the existing service, then create it again",
        );
      }
      return services.featureServices.create(caller, path.username as string, path.folderId, {
        createParameters: params.createParameters,
        description: params.description,
        tags: params.tags,
        snippet: params.snippet,
        servicesBase: servicesBase(apiBase),
      });
    },
  }),
  defineRoute({
    name: "server.info",
    methods: ["GET", "POST"],
    path: "/info",
    root: "server",
    auth: "none",
    params: {},
    handler: async ({ apiBase }) => ({
      currentVersion: SERVER_VERSION,
      owningSystemUrl: owningSystemUrl(apiBase),
      authInfo: { isTokenBasedSecurity: true, tokenServicesUrl: `${apiBase}/generateToken` },
    }),
  }),
  defineRoute({
    name: "featureServer.service",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) =>
      services.featureServices.service(caller, path.name as string),
  }),
  defineRoute({
    name: "featureServer.layer",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer/:layerId",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) =>
      services.featureServices.layer(caller, path.name as string, path.layerId as string),
  }),
  defineRoute({
    name: "featureServer.addToDefinition",
    methods: ["POST"],
    path: "/admin/services/:name/FeatureServer/addToDefinition",
    root: "server",
    auth: "required",
    bodyLimit: DEFINITION_BODY_LIMIT,
    params: {
      addToDefinition: p.json<AddToDefinition, true>(addToDefinitionSchema, { required: true }),
    },
    handler: async ({ params, path, caller, services }) =>
      services.featureServices.addToDefinition(caller, path.name as string, params.addToDefinition),
  }),
  defineRoute({
    name: "featureServer.updateDefinition",
    methods: ["POST"],
    path: "/admin/services/:name/FeatureServer/updateDefinition",
    root: "server",
    auth: "required",
    bodyLimit: DEFINITION_BODY_LIMIT,
    params: {
      updateDefinition: p.json<ServiceProperties, true>(updateDefinitionSchema, {
        required: true,
        check: checkUpdateDefinition,
      }),
    },
    handler: async ({ params, path, caller, services }) =>
      services.featureServices.updateDefinition(caller, path.name as string, params.updateDefinition),
  }),
  defineRoute({
    name: "featureServer.deleteFromDefinition",
    methods: ["POST"],
    path: "/admin/services/:name/FeatureServer/deleteFromDefinition",
    root: "server",
    auth: "required",
    params: {
      deleteFromDefinition: p.json<DeleteFromDefinition, true>(deleteFromDefinitionSchema, {
        required: true,
      }),
    },
    handler: async ({ params, path, caller, services }) =>
      services.featureServices.deleteFromDefinition(caller, path.name as string, params.deleteFromDefinition),
  }),
];
