import {
  type AddToDefinition,
  addToDefinitionSchema,
  checkLayerUpdateDefinition,
  checkUpdateDefinition,
  type DeleteFromDefinition,
  deleteFromDefinitionSchema,
  type LayerAddToDefinition,
  type LayerDeleteFromDefinition,
  type LayerUpdateDefinition,
  layerAddToDefinitionSchema,
  layerDeleteFromDefinitionSchema,
  layerUpdateDefinitionSchema,
  type ServiceProperties,
  updateDefinitionSchema,
} from "../../features/service-definition.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { DEFINITION_BODY_LIMIT } from "./shared.js";

/**
 * The admin resource of hosted feature services, `/rest/admin/services/<name>/FeatureServer`, and
 * its operations: adding to, updating and deleting from the definition of the service or of one of its layers.
 */
export const restAdminServicesRoutes = [
  defineRoute({
    name: "featureServer.adminService",
    methods: ["GET", "POST"],
    path: "/admin/services/:name/FeatureServer",
    root: "server",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => services.featureServices.adminService(caller, path.name),
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
    // The layers and tables added, with `success` after them.
    handler: async ({ params, path, caller, services }) => ({
      ...(await services.featureServices.addToDefinition(caller, path.name, params.addToDefinition)),
      ...ok(),
    }),
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
    handler: async ({ params, path, caller, services }) => {
      await services.featureServices.updateDefinition(caller, path.name, params.updateDefinition);
      return ok();
    },
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
    handler: async ({ params, path, caller, services }) => {
      await services.featureServices.deleteFromDefinition(caller, path.name, params.deleteFromDefinition);
      return ok();
    },
  }),
  defineRoute({
    name: "featureServer.layerAddToDefinition",
    methods: ["POST"],
    path: "/admin/services/:name/FeatureServer/:layerId/addToDefinition",
    root: "server",
    auth: "required",
    bodyLimit: DEFINITION_BODY_LIMIT,
    params: {
      addToDefinition: p.json<LayerAddToDefinition, true>(layerAddToDefinitionSchema, { required: true }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.featureServices.addLayerFields(caller, path.name, path.layerId, params.addToDefinition);
      return ok();
    },
  }),
  defineRoute({
    name: "featureServer.layerUpdateDefinition",
    methods: ["POST"],
    path: "/admin/services/:name/FeatureServer/:layerId/updateDefinition",
    root: "server",
    auth: "required",
    bodyLimit: DEFINITION_BODY_LIMIT,
    params: {
      updateDefinition: p.json<LayerUpdateDefinition, true>(layerUpdateDefinitionSchema, {
        required: true,
        check: checkLayerUpdateDefinition,
      }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.featureServices.updateLayerDefinition(
        caller,
        path.name,
        path.layerId,
        params.updateDefinition,
      );
      return ok();
    },
  }),
  defineRoute({
    name: "featureServer.layerDeleteFromDefinition",
    methods: ["POST"],
    path: "/admin/services/:name/FeatureServer/:layerId/deleteFromDefinition",
    root: "server",
    auth: "required",
    params: {
      deleteFromDefinition: p.json<LayerDeleteFromDefinition, true>(layerDeleteFromDefinitionSchema, {
        required: true,
      }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.featureServices.deleteLayerFields(
        caller,
        path.name,
        path.layerId,
        params.deleteFromDefinition,
      );
      return ok();
    },
  }),
];
