import { servedType } from "../../content/file-types.js";
import { errors } from "../../errors.js";
import type { AttachmentFile } from "../../features/feature-attachments.service.js";
import { NUL_REASON, p } from "../../validation/params.js";
import { defineRoute, type UploadedFile } from "../pipeline.js";
import { RawBody } from "../render.js";

/**
 * Attachments of the features of hosted layers (`hasAttachments: true`), below the feature
 * resource `/rest/services/<name>/FeatureServer/<layer>/<objectId>`: `attachments` (the infos),
 * `attachments/<id>` (the file), `addAttachment`, `updateAttachment`, `deleteAttachments`.
 */

const MB = 1024 * 1024;

/**
 * The largest attachment taken: 100 MB, as an item's data file (README, Request limits). ArcGIS
 * lets a server's administrator choose; photos and documents of field work fit well below.
 */
export const ATTACHMENT_MAX_BYTES = 100 * MB;

const featurePath = <const Op extends string>(op: Op) =>
  `/services/:name/FeatureServer/:layerId/:objectId/${op}` as const;

/** The parameters of addAttachment and updateAttachment besides the file. */
const uploadParams = {
  /** ArcGIS's two-step uploads (Uploads / Register Item): not kept by this server. */
  uploadId: p.string({ maxLength: 256 }),
  keywords: p.string({ maxLength: 1024 }),
  returnEditMoment: p.boolean(),
  /** Hosted layers are not versioned: accepted and ignored, as by the other edits. */
  gdbVersion: p.string({ maxLength: 256 }),
};

/** Longest file name kept with an attachment. */
const MAX_FILE_NAME = 1024;

/** The uploaded `attachment`, checked; a file given by `uploadId` is refused with the reason. */
function attachmentOf(
  params: { uploadId?: string | undefined },
  files: Record<string, UploadedFile>,
): AttachmentFile {
  if (params.uploadId) {
    throw errors.invalidParameter(
      "uploadId",
      "is not supported: this server keeps no uploads; send the file itself in 'attachment' (multipart/form-data)",
    );
  }
  const file = files.attachment;
  if (!file) throw errors.missingParameter("attachment");
  // The name is stored with the attachment; like every parameter, it may not hold NUL.
  if (file.filename.includes("\u0000")) {
    throw errors.invalidParameter("attachment", `has a file name that ${NUL_REASON}`);
  }
  if (file.filename.length > MAX_FILE_NAME) {
    throw errors.invalidParameter("attachment", `has a file name longer than ${MAX_FILE_NAME} characters`);
  }
  return { filename: file.filename, contentType: file.contentType, path: file.path };
}

export const restServicesAttachmentsRoutes = [
  defineRoute({
    name: "featureServer.attachments",
    methods: ["GET", "POST"],
    path: featurePath("attachments"),
    root: "server",
    auth: "optional",
    params: { gdbVersion: uploadParams.gdbVersion },
    handler: async ({ path, caller, services }) =>
      services.featureAttachments.list(caller, path.name, path.layerId, path.objectId),
  }),
  defineRoute({
    name: "featureServer.attachment",
    methods: ["GET", "POST"],
    path: featurePath("attachments/:attachmentId"),
    root: "server",
    auth: "optional",
    params: { gdbVersion: uploadParams.gdbVersion },
    handler: async ({ path, caller, services }) => {
      const file = await services.featureAttachments.download(
        caller,
        path.name,
        path.layerId,
        path.objectId,
        path.attachmentId,
      );
      // Answered as item data is (file-types.ts): inline only what no browser would run, streamed.
      const served = servedType(file.contentType);
      return new RawBody(served.contentType, file, file.filename, served.disposition);
    },
  }),
  defineRoute({
    name: "featureServer.addAttachment",
    methods: ["POST"],
    path: featurePath("addAttachment"),
    root: "server",
    auth: "optional",
    files: { attachment: { maxBytes: ATTACHMENT_MAX_BYTES } },
    params: uploadParams,
    handler: async ({ params, files, path, caller, services }) => {
      const r = await services.featureAttachments.add(
        caller,
        path.name,
        path.layerId,
        path.objectId,
        attachmentOf(params, files),
        { keywords: params.keywords },
      );
      return {
        addAttachmentResult: r.result,
        ...(params.returnEditMoment ? { editMoment: r.editMoment } : {}),
      };
    },
  }),
  defineRoute({
    name: "featureServer.updateAttachment",
    methods: ["POST"],
    path: featurePath("updateAttachment"),
    root: "server",
    auth: "optional",
    files: { attachment: { maxBytes: ATTACHMENT_MAX_BYTES } },
    params: { attachmentId: p.integer({ required: true, min: 0 }), ...uploadParams },
    handler: async ({ params, files, path, caller, services }) => {
      const r = await services.featureAttachments.update(
        caller,
        path.name,
        path.layerId,
        path.objectId,
        params.attachmentId,
        attachmentOf(params, files),
        { keywords: params.keywords },
      );
      return {
        updateAttachmentResult: r.result,
        ...(params.returnEditMoment ? { editMoment: r.editMoment } : {}),
      };
    },
  }),
  defineRoute({
    name: "featureServer.deleteAttachments",
    methods: ["POST"],
    path: featurePath("deleteAttachments"),
    root: "server",
    auth: "optional",
    params: {
      attachmentIds: p.list({
        required: true,
        maxItems: 1000,
        item: { maxLength: 15, pattern: /^\d+$/, patternReason: "is not an attachment id" },
      }),
      rollbackOnFailure: p.boolean(),
      returnEditMoment: p.boolean(),
      gdbVersion: uploadParams.gdbVersion,
    },
    handler: async ({ params, path, caller, services }) => {
      const r = await services.featureAttachments.delete(
        caller,
        path.name,
        path.layerId,
        path.objectId,
        params.attachmentIds.map(Number),
        { rollbackOnFailure: params.rollbackOnFailure },
      );
      return {
        deleteAttachmentResults: r.results,
        ...(params.returnEditMoment ? { editMoment: r.editMoment } : {}),
      };
    },
  }),
];
