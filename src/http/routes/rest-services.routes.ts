import { errors } from "../../errors.js";
import type { LayerEditResults } from "../../features/edits/apply-edits.js";
import { p } from "../../validation/params.js";
import { defineRoute } from "../pipeline.js";

/**
 * Hosted feature services, `/rest/services/<name>/FeatureServer`: the service, its layers and
 * features, queries and edits. Their attachments are in rest-services-attachments.routes.ts, their
 * admin operations in rest-admin-services.routes.ts, createService with the owner's content.
 */

/** A query's geometry can be a detailed polygon (250,000 vertices is about 8 MB of JSON). */
const QUERY_BODY_LIMIT = 10 * 1024 * 1024;
/** Edits in batches of thousands of features with their geometries. */
const EDITS_BODY_LIMIT = 32 * 1024 * 1024;

/** The parameters of a layer query (Query (Feature Service/Layer)); structured ones are read by the service. */
const queryParams = {
  where: p.string({ maxLength: 64 * 1024 }),
  objectIds: p.string({ maxLength: 4 * 1024 * 1024 }),
  geometry: p.string({ maxLength: QUERY_BODY_LIMIT }),
  geometryType: p.string({ maxLength: 64 }),
  inSR: p.string({ maxLength: 16 * 1024 }),
  spatialRel: p.string({ maxLength: 64 }),
  distance: p.number({ min: 0 }),
  units: p.string({ maxLength: 64 }),
  outFields: p.string({ maxLength: 256 * 1024 }),
  returnGeometry: p.boolean(),
  outSR: p.string({ maxLength: 16 * 1024 }),
  geometryPrecision: p.integer({ min: 0, max: 17 }),
  maxAllowableOffset: p.number({ min: 0 }),
  quantizationParameters: p.string({ maxLength: 4096 }),
  returnZ: p.boolean(),
  returnM: p.boolean(),
  returnCentroid: p.boolean(),
  orderByFields: p.string({ maxLength: 64 * 1024 }),
  resultOffset: p.integer({ min: 0 }),
  resultRecordCount: p.integer({ min: 0 }),
  resultType: p.string({ maxLength: 32 }),
  returnExceededLimitFeatures: p.boolean(),
  returnCountOnly: p.boolean(),
  returnIdsOnly: p.boolean(),
  returnExtentOnly: p.boolean(),
  returnDistinctValues: p.boolean(),
  outStatistics: p.string({ maxLength: 256 * 1024 }),
  groupByFieldsForStatistics: p.string({ maxLength: 64 * 1024 }),
  havingClause: p.string({ maxLength: 64 * 1024 }),
};

const editFlags = {
  rollbackOnFailure: p.boolean(),
  useGlobalIds: p.boolean(),
  returnEditMoment: p.boolean(),
  gdbVersion: p.string({ maxLength: 256 }),
};

/**
 * The answer of `addFeatures`, `updateFeatures` or `deleteFeatures`: their part of the layer's
 * applyEdits results, with the edit moment when asked for.
 */
function onePart(
  results: LayerEditResults & { editMoment?: number },
  part: "addResults" | "updateResults" | "deleteResults",
) {
  return {
    [part]: results[part],
    ...(results.editMoment !== undefined ? { editMoment: results.editMoment } : {}),
  };
}

const layerPath = <const Op extends string>(op: Op) =>
  `/services/:name/FeatureServer/:layerId/${op}` as const;

export const restServicesRoutes = [
  defineRoute({
    name: "featureServer.service",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.featureServices.service(caller, path.name),
  }),
  defineRoute({
    name: "featureServer.layer",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer/:layerId",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) =>
      services.featureData.layerResource(caller, path.name, path.layerId),
  }),
  defineRoute({
    name: "featureServer.layers",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer/layers",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.featureServices.allLayers(caller, path.name),
  }),
  defineRoute({
    name: "featureServer.sources",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer/sources",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.featureServices.sources(caller, path.name),
  }),
  defineRoute({
    name: "featureServer.query",
    methods: ["GET", "POST"],
    path: layerPath("query"),
    root: "server",
    auth: "optional",
    bodyLimit: QUERY_BODY_LIMIT,
    formats: ["geojson", "pbf"],
    params: queryParams,
    handler: async ({ params, path, caller, services, format }) =>
      services.featureData.query(caller, path.name, path.layerId, params, format),
  }),
  defineRoute({
    name: "featureServer.queryRelatedRecords",
    methods: ["GET", "POST"],
    path: layerPath("queryRelatedRecords"),
    root: "server",
    auth: "optional",
    // The parameters of Query Related Records; hosted layers here take part in no relationship,
    // so only `relationshipId` is read.
    params: {
      relationshipId: p.integer({ required: true, min: 0 }),
      objectIds: p.string({ maxLength: 4 * 1024 * 1024 }),
      outFields: p.string({ maxLength: 256 * 1024 }),
      definitionExpression: p.string({ maxLength: 64 * 1024 }),
      returnGeometry: p.boolean(),
      outSR: p.string({ maxLength: 16 * 1024 }),
      returnCountOnly: p.boolean(),
      orderByFields: p.string({ maxLength: 64 * 1024 }),
    },
    handler: async ({ params, path, caller, services }) =>
      services.featureServices.queryRelatedRecords(caller, path.name, path.layerId, params.relationshipId),
  }),
  defineRoute({
    name: "featureServer.applyEdits",
    methods: ["POST"],
    path: layerPath("applyEdits"),
    root: "server",
    auth: "optional",
    bodyLimit: EDITS_BODY_LIMIT,
    params: {
      adds: p.string({ maxLength: EDITS_BODY_LIMIT }),
      updates: p.string({ maxLength: EDITS_BODY_LIMIT }),
      deletes: p.string({ maxLength: EDITS_BODY_LIMIT }),
      ...editFlags,
    },
    handler: async ({ params, path, caller, services }) => {
      // The layer's answer names no layer (the service-level answer does, per layer).
      const { id: _id, ...results } = await services.featureData.applyEdits(
        caller,
        path.name,
        path.layerId,
        params,
      );
      return results;
    },
  }),
  defineRoute({
    name: "featureServer.addFeatures",
    methods: ["POST"],
    path: layerPath("addFeatures"),
    root: "server",
    auth: "optional",
    bodyLimit: EDITS_BODY_LIMIT,
    params: { features: p.string({ maxLength: EDITS_BODY_LIMIT }), ...editFlags },
    handler: async ({ params, path, caller, services }) => {
      const r = await services.featureData.applyEdits(caller, path.name, path.layerId, {
        ...params,
        adds: params.features,
        addsParameter: "features",
      });
      return onePart(r, "addResults");
    },
  }),
  defineRoute({
    name: "featureServer.updateFeatures",
    methods: ["POST"],
    path: layerPath("updateFeatures"),
    root: "server",
    auth: "optional",
    bodyLimit: EDITS_BODY_LIMIT,
    params: { features: p.string({ maxLength: EDITS_BODY_LIMIT }), ...editFlags },
    handler: async ({ params, path, caller, services }) => {
      const r = await services.featureData.applyEdits(caller, path.name, path.layerId, {
        ...params,
        updates: params.features,
        updatesParameter: "features",
      });
      return onePart(r, "updateResults");
    },
  }),
  defineRoute({
    name: "featureServer.deleteFeatures",
    methods: ["POST"],
    path: layerPath("deleteFeatures"),
    root: "server",
    auth: "optional",
    bodyLimit: QUERY_BODY_LIMIT,
    params: {
      objectIds: p.string({ maxLength: 4 * 1024 * 1024 }),
      where: queryParams.where,
      geometry: queryParams.geometry,
      geometryType: queryParams.geometryType,
      inSR: queryParams.inSR,
      spatialRel: queryParams.spatialRel,
      ...editFlags,
    },
    check(params) {
      if (!params.where?.trim() && !params.geometry?.trim() && !params.objectIds?.trim()) {
        throw errors.invalidParameter("objectIds", "or where or geometry must say which features to delete");
      }
    },
    handler: async ({ params, path, caller, services }) => {
      const byQuery = Boolean(params.where?.trim() || params.geometry?.trim());
      const r = await services.featureData.applyEdits(caller, path.name, path.layerId, {
        ...params,
        ...(byQuery
          ? {
              deleteQuery: {
                where: params.where,
                objectIds: params.objectIds,
                geometry: params.geometry,
                geometryType: params.geometryType,
                inSR: params.inSR,
                spatialRel: params.spatialRel,
              },
            }
          : { deletes: params.objectIds, deletesParameter: "objectIds" as const }),
      });
      return onePart(r, "deleteResults");
    },
  }),
  defineRoute({
    name: "featureServer.serviceQuery",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer/query",
    root: "server",
    auth: "optional",
    bodyLimit: QUERY_BODY_LIMIT,
    params: { ...queryParams, layerDefs: p.string({ maxLength: 1024 * 1024 }) },
    handler: async ({ params, path, caller, services }) =>
      services.featureData.serviceQuery(caller, path.name, params),
  }),
  defineRoute({
    name: "featureServer.serviceApplyEdits",
    methods: ["POST"],
    path: "/services/:name/FeatureServer/applyEdits",
    root: "server",
    auth: "optional",
    bodyLimit: EDITS_BODY_LIMIT,
    params: { edits: p.string({ required: true, maxLength: EDITS_BODY_LIMIT }), ...editFlags },
    handler: async ({ params, path, caller, services }) =>
      services.featureData.applyServiceEdits(caller, path.name, params),
  }),
  defineRoute({
    name: "featureServer.feature",
    methods: ["GET", "POST"],
    path: "/services/:name/FeatureServer/:layerId/:objectId",
    root: "server",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) =>
      services.featureData.feature(caller, path.name, path.layerId, path.objectId),
  }),
];
