import type { Bounds } from "./geometry/esri-json.js";
import type { LayerSchema } from "./layer-schema.js";
import { type LayerDefinition, SERVER_VERSION, type StoredService } from "./service-definition.js";

/**
 * The layer or table resource (`<service>/FeatureServer/<id>`): the stored definition, completed
 * with what the server does for it. Clients decide what to ask from this (the Maps SDK asks for
 * PBF when `supportedQueryFormats` lists it, pages when `supportsPagination` says so), so every
 * claim here is one the query and edit code keeps.
 */

export interface LayerResourceInput {
  service: StoredService;
  definition: LayerDefinition;
  schema: LayerSchema;
  serviceItemId: string;
  limits: { maxRecordCount: number; standardMaxRecordCount: number; tileMaxRecordCount: number };
  lastEditDate: number;
  dataLastEditDate: number;
  /** The bounds of the stored features, in the layer's reference; null when it holds none. */
  extent: Bounds | null;
}

const COLORS = { fill: [0, 121, 193, 128], line: [0, 92, 148, 255] };

/** A simple renderer for the geometry type, as ArcGIS gives a layer published without one. */
export function defaultDrawingInfo(geometryType: string | undefined): Record<string, unknown> | undefined {
  let symbol: Record<string, unknown>;
  switch (geometryType) {
    case "esriGeometryPoint":
    case "esriGeometryMultipoint":
      symbol = {
        type: "esriSMS",
        style: "esriSMSCircle",
        color: COLORS.fill,
        size: 6,
        angle: 0,
        xoffset: 0,
        yoffset: 0,
        outline: { color: COLORS.line, width: 0.75 },
      };
      break;
    case "esriGeometryPolyline":
      symbol = { type: "esriSLS", style: "esriSLSSolid", color: COLORS.line, width: 1.5 };
      break;
    case "esriGeometryPolygon":
      symbol = {
        type: "esriSFS",
        style: "esriSFSSolid",
        color: COLORS.fill,
        outline: { type: "esriSLS", style: "esriSLSSolid", color: COLORS.line, width: 0.75 },
      };
      break;
    default:
      return undefined;
  }
  return { renderer: { type: "simple", symbol }, transparency: 0, labelingInfo: null };
}

export function layerResource(input: LayerResourceInput): Record<string, unknown> {
  const { service, definition, schema } = input;
  const d = service.definition;
  const spatialReference = schema.spatialReference ??
    d.spatialReference ?? { wkid: 102100, latestWkid: 3857 };
  const isLayer = schema.kind === "layer";
  const extent = input.extent
    ? { ...input.extent, spatialReference }
    : ((definition.extent as Record<string, unknown> | undefined) ?? null);
  const capabilities = (definition.capabilities as string | undefined) ?? d.capabilities ?? "Query";
  return {
    currentVersion: SERVER_VERSION,
    ...definition,
    id: schema.id,
    type: definition.type ?? (isLayer ? "Feature Layer" : "Table"),
    serviceItemId: input.serviceItemId,
    // Hosted layers here take part in no relationship (queryRelatedRecords refuses every id), and
    // their data is neither versioned, archived nor tracked for replicas.
    relationships: [],
    isDataVersioned: false,
    isDataArchived: false,
    isDataBranchVersioned: false,
    isDataReplicaTracked: false,
    syncCanReturnChanges: false,
    ...(isLayer
      ? {
          geometryType: schema.geometryType,
          hasZ: schema.hasZ,
          hasM: schema.hasM,
          extent,
          sourceSpatialReference: spatialReference,
          drawingInfo: definition.drawingInfo ?? defaultDrawingInfo(schema.geometryType),
        }
      : {}),
    objectIdField: schema.objectIdField.name,
    uniqueIdField: { name: schema.objectIdField.name, isSystemMaintained: true },
    globalIdField: schema.globalIdField?.name ?? "",
    displayField:
      definition.displayField ??
      schema.fields.find((f) => f.type === "esriFieldTypeString")?.name ??
      schema.objectIdField.name,
    capabilities,
    supportedQueryFormats: d.supportedQueryFormats ?? "JSON",
    maxRecordCount: input.limits.maxRecordCount,
    standardMaxRecordCount: input.limits.standardMaxRecordCount,
    tileMaxRecordCount: input.limits.tileMaxRecordCount,
    maxRecordCountFactor: 1,
    allowGeometryUpdates:
      (definition.allowGeometryUpdates as boolean | undefined) ?? d.allowGeometryUpdates ?? true,
    hasAttachments: definition.hasAttachments === true,
    // Attachments are sent as files (`addAttachment`, `updateAttachment`), never by upload id;
    // `queryAttachments` is not answered (supportsQueryAttachments below), so clients ask per feature.
    ...(definition.hasAttachments === true ? { supportsAttachmentsByUploadId: false } : {}),
    supportsRollbackOnFailureParameter: true,
    supportsApplyEditsWithGlobalIds: schema.globalIdField !== undefined,
    supportsStatistics: true,
    supportsAdvancedQueries: true,
    supportsCoordinatesQuantization: true,
    supportsExceedsLimitStatistics: false,
    supportsValidateSql: false,
    supportsCalculate: false,
    supportsTruncate: false,
    useStandardizedQueries: true,
    advancedQueryCapabilities: {
      useStandardizedQueries: true,
      supportsStatistics: true,
      supportsHavingClause: true,
      supportsOrderBy: true,
      supportsDistinct: true,
      supportsCountDistinct: false,
      supportsPagination: true,
      supportsPaginationOnAggregatedQueries: false,
      supportsTrueCurve: false,
      supportsReturningQueryExtent: true,
      supportsQueryWithDistance: true,
      supportsQueryWithResultType: true,
      supportsSqlExpression: false,
      supportsReturningGeometryCentroid: schema.geometryType === "esriGeometryPolygon",
      supportsPercentileStatistics: true,
      supportsQueryWithDatumTransformation: false,
      supportsTopFeaturesQuery: false,
      supportsLod: false,
      supportsQueryAttachments: false,
    },
    supportsExtent: true,
    ...(schema.editFields ? { editFieldsInfo: { ...schema.editFields } } : {}),
    editingInfo: { lastEditDate: input.lastEditDate, dataLastEditDate: input.dataLastEditDate },
    fields: (definition.fields as unknown[] | undefined) ?? [],
  };
}
