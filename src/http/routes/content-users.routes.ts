import { boxSpec, categoryRefusal, MAX_CATEGORY_LENGTH, MAX_ITEM_CATEGORIES } from "../../content/extent.js";
import type { ItemFields, ItemFile } from "../../content/item.service.js";
import { MAX_INFO_FILE_BYTES } from "../../content/item-info.js";
import { MAX_RESOURCE_BYTES, resourcePath } from "../../content/item-resources.js";
import { itemSpecs } from "../../content/item-specs.js";
import { relationshipTypesOf } from "../../content/relationship.service.js";
import type { ResourceUpload } from "../../content/resource.service.js";
import { MAX_PART_BYTES, MAX_PART_NUMBER } from "../../content/upload.service.js";
import { errors } from "../../errors.js";
import { readExportFormat, readExportParameters } from "../../features/export/export-parameters.js";
import { FEATURE_SERVICE_TYPE } from "../../features/feature-services.service.js";
import {
  type CreateParameters,
  checkCreateParameters,
  createParametersSchema,
} from "../../features/service-definition.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { NUL_REASON, p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute, type UploadedFile } from "../pipeline.js";
import { servicesBase } from "../urls.js";
import { DEFINITION_BODY_LIMIT } from "./shared.js";

/** The item's editable fields, shared by addItem and update; `text` is the data as a form value. */
const itemParams = {
  ...itemSpecs,
  text: p.string({ maxLength: 10 * 1024 * 1024 }),
  extent: boxSpec(false),
  categories: p.list({
    maxItems: MAX_ITEM_CATEGORIES,
    item: { maxLength: MAX_CATEGORY_LENGTH, check: categoryRefusal },
  }),
};

type ItemParamValues = {
  [K in keyof typeof itemParams]?: (typeof itemParams)[K] extends { parse: (raw: string) => infer R }
    ? R extends { ok: true; value: infer V }
      ? V
      : never
    : never;
};

const MB = 1024 * 1024;

/**
 * What addItem and update take: `text` of up to 10 million characters, percent-encoded, besides
 * the other fields; an item's data file of up to 100 MB and a thumbnail of up to 10 MB.
 */
const itemLimits = {
  bodyLimit: 32 * MB,
  files: { file: { maxBytes: 100 * MB }, thumbnail: { maxBytes: 10 * MB } },
} as const;

/** An uploaded file, stored from its temporary file a chunk at a time. */
function itemFile(file: UploadedFile | undefined): ItemFile | undefined {
  if (!file) return undefined;
  return { filename: file.filename, contentType: file.contentType, path: file.path };
}

/** The item's data comes from an uploaded `file` or from `text`; the thumbnail from an upload. */
function itemFields(params: ItemParamValues, files: Record<string, UploadedFile>): ItemFields {
  // File names are stored with the files; like every parameter, they may not hold NUL.
  for (const field of ["file", "thumbnail"] as const) {
    if (files[field]?.filename.includes("\u0000")) {
      throw errors.invalidParameter(field, `has a file name that ${NUL_REASON}`);
    }
  }
  return {
    title: params.title,
    type: params.type,
    typeKeywords: params.typeKeywords,
    description: params.description,
    snippet: params.snippet,
    tags: params.tags,
    url: params.url,
    properties: params.properties,
    extent: params.extent,
    categories: params.categories,
    data: itemFile(files.file),
    text: params.text,
    thumbnail: itemFile(files.thumbnail),
  };
}

/** Item operations answer at `content/users/<u>/items/<id>/<op>`, with or without a folder. */
const itemOp = <const Op extends string>(op: Op) =>
  [
    `/content/users/:username/items/:itemId/${op}`,
    `/content/users/:username/:folderId/items/:itemId/${op}`,
  ] as const;

const itemId = p.string({
  required: true,
  maxLength: 64,
  pattern: /^[A-Za-z0-9]{1,64}$/,
  patternReason: "is not an item id",
});

/**
 * A relationship, as addRelationship and deleteRelationship take it. Esri's client sends the type
 * as `relationshipType`; the REST reference's examples send `relationshipTypes`: both are read.
 */
const relationshipParams = {
  originItemId: itemId,
  destinationItemId: itemId,
  relationshipType: p.string({ maxLength: 64 }),
  relationshipTypes: p.string({ maxLength: 64 }),
};

function relationshipKey(params: {
  originItemId: string;
  destinationItemId: string;
  relationshipType?: string | undefined;
  relationshipTypes?: string | undefined;
}) {
  const [name, parameter] =
    params.relationshipType !== undefined
      ? [params.relationshipType, "relationshipType"]
      : [params.relationshipTypes, "relationshipTypes"];
  if (name === undefined) throw errors.missingParameter("relationshipType");
  const [type] = relationshipTypesOf(parameter, [name]);
  return { originId: params.originItemId, destinationId: params.destinationItemId, type: type as string };
}

/**
 * What addResources and updateResources take: a `file` of up to 50 MB, or `text` (up to 10 million
 * characters, percent-encoded, and 50 MB once stored) named by `fileName`, in the folder
 * `resourcesPrefix`; `access` is `inherit` (whoever sees the item) or `private`.
 */
const resourceParams = {
  fileName: p.string({ maxLength: 255 }),
  resourcesPrefix: p.string({ maxLength: 255 }),
  text: p.string({ maxLength: 10 * 1024 * 1024 }),
  access: p.string({ enum: ["inherit", "private"], caseInsensitive: true }),
};
const resourceLimits = { bodyLimit: 32 * MB, files: { file: { maxBytes: MAX_RESOURCE_BYTES } } } as const;

/** The resource a request names, with its bytes when it sends some (a `file` wins over `text`). */
function resourceUpload(
  params: {
    fileName?: string | undefined;
    resourcesPrefix?: string | undefined;
    text?: string | undefined;
    access?: string | undefined;
  },
  file: UploadedFile | undefined,
): ResourceUpload {
  const name = params.fileName || file?.filename;
  if (!name) throw errors.missingParameter("fileName", "'fileName' names the resource sent as 'text'.");
  const path = resourcePath(params.fileName ? "fileName" : "file", params.resourcesPrefix || undefined, name);
  const access = params.access?.toLowerCase() as ResourceUpload["access"];
  if (file) return { path, source: { path: file.path }, access };
  if (params.text === undefined) return { path, access };
  const data = Buffer.from(params.text, "utf8");
  if (data.length > MAX_RESOURCE_BYTES) {
    throw errors.invalidParameter("text", `is larger than ${MAX_RESOURCE_BYTES / MB} MB once stored`);
  }
  return { path, source: { data }, access };
}

/**
 * Operations ArcGIS answers below `content/users/<u>`: a path naming one is an operation, never a
 * folder of that name. Those portico implements are routes of their own for their method, which
 * the router prefers to the folder's; asked for with another method (or not implemented:
 * `publish`; `items` alone, without an item's id), they are "Invalid URL".
 */
const UNANSWERED_USER_OPERATIONS: ReadonlySet<string> = new Set(
  ["publish", "deleteItems", "moveItems", "items", "addRelationship", "deleteRelationship", "export"].map(
    (op) => op.toLowerCase(),
  ),
);

const groupList = p.list({
  maxItems: 100,
  item: { pattern: /^[A-Za-z0-9]{1,64}$/, patternReason: "is not a group id" },
});
const itemList = p.list({
  maxItems: 100,
  item: { pattern: /^[A-Za-z0-9]{1,64}$/, patternReason: "is not an item id" },
});

/**
 * A user's content, `/content/users/<u>[/<folder>]`: listing, adding, the operations on an owned
 * item (`items/<id>/<op>`), sharing, folders and createService.
 */
export const contentUsersRoutes = [
  defineRoute({
    name: "content.user",
    methods: ["GET", "POST"],
    path: ["/content/users/:username", "/content/users/:username/:folderId"],
    auth: "required",
    params: { ...pagingParams },
    handler: async ({ params, path, caller, services, apiBase }) => {
      // addRelationship and the like asked for with another method than theirs land here too.
      if (path.folderId !== undefined && UNANSWERED_USER_OPERATIONS.has(path.folderId.toLowerCase())) {
        throw errors.invalidUrl(
          `No resource or operation at ${new URL(apiBase).pathname}/content/users/${path.username}/${path.folderId} for this method.`,
        );
      }
      return services.items.listUserContent(caller, path.username, path.folderId, pageOf(params));
    },
  }),
  defineRoute({
    name: "items.add",
    methods: ["POST"],
    path: ["/content/users/:username/addItem", "/content/users/:username/:folderId/addItem"],
    auth: "required",
    privilege: "portal:user:createItem",
    params: {
      ...itemParams,
      title: { ...itemParams.title, required: true as const },
      type: { ...itemParams.type, required: true as const },
      // The data comes later, in parts (addPart, commit), named `filename`.
      multipart: p.boolean(),
      filename: p.string({ maxLength: 255 }),
    },
    ...itemLimits,
    handler: async ({ params, files, path, caller, services }) => {
      const fields = itemFields(params, files);
      if (params.multipart) {
        if (!params.filename) {
          throw errors.missingParameter("filename", "'filename' is required with multipart=true.");
        }
        if (fields.data || fields.text !== undefined) {
          throw errors.invalidParameter(
            "multipart",
            "cannot be true with a 'file' or 'text': the data comes in parts",
          );
        }
        // The name the data will have, checked as a resource's name is (no folders).
        if (params.filename.includes("/")) throw errors.invalidParameter("filename", "must not contain '/'");
        resourcePath("filename", undefined, params.filename);
        fields.multipartFilename = params.filename;
      }
      return ok(await services.items.add(caller, path.username, path.folderId, fields));
    },
  }),
  defineRoute({
    name: "items.update",
    methods: ["POST"],
    path: itemOp("update"),
    auth: "required",
    params: { ...itemParams, clearEmptyFields: p.boolean() },
    ...itemLimits,
    handler: async ({ params, empty, files, path, caller, services }) => {
      await services.items.update(
        caller,
        path.username,
        path.itemId,
        itemFields(params, files),
        params.clearEmptyFields ? [...empty] : [],
      );
      return ok({ id: path.itemId });
    },
  }),
  defineRoute({
    name: "items.userItem",
    // GET only, as ArcGIS documents it: the router prefers this path's static `items` to a folder
    // parameter, so with POST a folder titled "items" (folders are named by title too) would lose
    // its addItem, delete, export and createService to this route.
    methods: ["GET"],
    path: ["/content/users/:username/items/:itemId", "/content/users/:username/:folderId/items/:itemId"],
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) =>
      services.items.userItem(caller, path.username, path.itemId),
  }),
  defineRoute({
    name: "items.delete",
    methods: ["POST"],
    path: itemOp("delete"),
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.items.delete(caller, path.username, path.itemId);
      return ok({ itemId: path.itemId });
    },
  }),
  defineRoute({
    name: "items.registeredAppInfo",
    methods: ["GET", "POST"],
    path: itemOp("registeredAppInfo"),
    auth: "required",
    params: {},
    // The registration of an Application item (`oauth2/registerApp`), for its owner and the
    // administrators who view items.
    handler: async ({ path, caller, services }) => services.apps.ofItem(caller, path.username, path.itemId),
  }),
  defineRoute({
    name: "items.protect",
    methods: ["POST"],
    path: itemOp("protect"),
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.items.setProtected(caller, path.username, path.itemId, true);
      return ok();
    },
  }),
  defineRoute({
    name: "items.unprotect",
    methods: ["POST"],
    path: itemOp("unprotect"),
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.items.setProtected(caller, path.username, path.itemId, false);
      return ok();
    },
  }),
  defineRoute({
    name: "items.move",
    methods: ["POST"],
    path: itemOp("move"),
    auth: "required",
    params: { folder: p.string({ required: true, maxLength: 64 }) },
    handler: async ({ params, path, caller, services }) =>
      ok({
        itemId: path.itemId,
        ...(await services.items.move(caller, path.username, path.itemId, params.folder)),
      }),
  }),
  defineRoute({
    name: "items.reassign",
    methods: ["POST"],
    path: itemOp("reassign"),
    auth: "required",
    privilege: "portal:admin:reassignItems",
    params: {
      targetUsername: p.string({ required: true, maxLength: 128 }),
      targetFolderName: p.string({ maxLength: 64 }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.items.reassign(
        caller,
        path.username,
        path.itemId,
        params.targetUsername,
        params.targetFolderName,
      );
      return ok({ itemId: path.itemId });
    },
  }),
  defineRoute({
    name: "items.share",
    methods: ["POST"],
    path: itemOp("share"),
    auth: "required",
    params: { groups: groupList, everyone: p.boolean(), org: p.boolean() },
    handler: async ({ params, path, caller, services }) =>
      services.sharing.share(caller, path.username, path.itemId, {
        groups: params.groups ?? [],
        everyone: params.everyone,
        org: params.org,
      }),
  }),
  defineRoute({
    name: "items.unshare",
    methods: ["POST"],
    path: itemOp("unshare"),
    auth: "required",
    params: { groups: { ...groupList, required: true as const } },
    handler: async ({ params, path, caller, services }) =>
      services.sharing.unshare(caller, path.username, path.itemId, params.groups),
  }),
  defineRoute({
    name: "content.shareItems",
    methods: ["POST"],
    path: "/content/users/:username/shareItems",
    auth: "required",
    params: {
      items: { ...itemList, required: true as const },
      groups: groupList,
      everyone: p.boolean(),
      org: p.boolean(),
    },
    handler: async ({ params, path, caller, services }) =>
      services.sharing.shareItems(caller, path.username, params.items, {
        groups: params.groups ?? [],
        everyone: params.everyone,
        org: params.org,
      }),
  }),
  defineRoute({
    name: "content.unshareItems",
    methods: ["POST"],
    path: "/content/users/:username/unshareItems",
    auth: "required",
    params: {
      items: { ...itemList, required: true as const },
      groups: { ...groupList, required: true as const },
    },
    handler: async ({ params, path, caller, services }) =>
      services.sharing.unshareItems(caller, path.username, params.items, params.groups),
  }),
  defineRoute({
    name: "content.deleteItems",
    methods: ["POST"],
    path: "/content/users/:username/deleteItems",
    auth: "required",
    // `permanentDelete` (ArcGIS Online's recycle bin) is accepted and changes nothing: portico
    // has no recycle bin, every delete is permanent.
    params: { items: { ...itemList, required: true as const }, permanentDelete: p.boolean() },
    handler: async ({ params, path, caller, services }) =>
      services.items.deleteItems(caller, path.username, params.items),
  }),
  defineRoute({
    name: "content.moveItems",
    methods: ["POST"],
    path: "/content/users/:username/moveItems",
    auth: "required",
    params: {
      items: { ...itemList, required: true as const },
      folder: p.string({ required: true, maxLength: 64 }),
    },
    handler: async ({ params, path, caller, services }) =>
      services.items.moveItems(caller, path.username, params.items, params.folder),
  }),
  defineRoute({
    name: "folders.create",
    methods: ["POST"],
    path: "/content/users/:username/createFolder",
    auth: "required",
    params: {
      title: p.string({
        required: true,
        maxLength: 128,
        pattern: /^[^/\\"<>]+$/,
        patternReason: 'must not contain / \\ " < or >',
      }),
    },
    handler: async ({ params, path, caller, services }) =>
      ok({ folder: await services.items.createFolder(caller, path.username, params.title) }),
  }),
  defineRoute({
    name: "folders.delete",
    methods: ["POST"],
    path: "/content/users/:username/:folderId/delete",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) =>
      ok({ folder: await services.items.deleteFolder(caller, path.username, path.folderId) }),
  }),
  defineRoute({
    name: "items.updateInfo",
    methods: ["POST"],
    // Esri's client writes `updateinfo`, the REST reference `updateInfo`; paths match in any case.
    path: itemOp("updateinfo"),
    auth: "required",
    params: { folderName: p.string({ maxLength: 64 }) },
    files: { file: { maxBytes: MAX_INFO_FILE_BYTES } },
    handler: async ({ params, files, path, caller, services }) => {
      const file = files.file;
      if (!file) throw errors.missingParameter("file", "'file' is required, uploaded as a multipart file.");
      if (file.filename.includes("\u0000"))
        throw errors.invalidParameter("file", `has a file name that ${NUL_REASON}`);
      const stored = await services.items.updateInfo(
        caller,
        path.username,
        path.itemId,
        itemFile(file) as ItemFile,
        params.folderName || undefined,
      );
      return ok({ itemId: path.itemId, owner: stored.owner, folder: stored.folder });
    },
  }),
  defineRoute({
    name: "items.addResources",
    methods: ["POST"],
    path: itemOp("addResources"),
    auth: "required",
    params: resourceParams,
    ...resourceLimits,
    handler: async ({ params, files, path, caller, services }) => {
      const changed = await services.resources.add(
        caller,
        path.username,
        path.itemId,
        resourceUpload(params, files.file),
      );
      return ok({ itemId: path.itemId, owner: changed.owner, folder: changed.folder });
    },
  }),
  defineRoute({
    name: "items.updateResources",
    methods: ["POST"],
    path: itemOp("updateResources"),
    auth: "required",
    params: resourceParams,
    ...resourceLimits,
    handler: async ({ params, files, path, caller, services }) => {
      const changed = await services.resources.update(
        caller,
        path.username,
        path.itemId,
        resourceUpload(params, files.file),
      );
      return ok({ itemId: path.itemId, owner: changed.owner, folder: changed.folder });
    },
  }),
  defineRoute({
    name: "items.removeResources",
    methods: ["POST"],
    path: itemOp("removeResources"),
    auth: "required",
    params: { resource: p.string({ maxLength: 512 }), deleteAll: p.boolean() },
    handler: async ({ params, path, caller, services }) => {
      if (params.deleteAll) {
        await services.resources.remove(caller, path.username, path.itemId, { all: true });
      } else {
        if (!params.resource)
          throw errors.missingParameter("resource", "Name a 'resource', or send deleteAll=true.");
        // The path as listed: the folder and the name, checked as an added one is.
        const resource = resourcePath("resource", undefined, params.resource.replace(/^\/+/, ""));
        await services.resources.remove(caller, path.username, path.itemId, { path: resource });
      }
      return ok();
    },
  }),
  defineRoute({
    name: "items.addPart",
    methods: ["POST"],
    path: itemOp("addPart"),
    auth: "required",
    // Esri's client sends partNum in the query string, the file in the body.
    params: { partNum: p.integer({ required: true, min: 1, max: MAX_PART_NUMBER }) },
    files: { file: { maxBytes: MAX_PART_BYTES } },
    handler: async ({ params, files, path, caller, services }) => {
      const file = files.file;
      if (!file) throw errors.missingParameter("file", "'file' is required, uploaded as a multipart file.");
      await services.uploads.addPart(caller, path.username, path.itemId, params.partNum, {
        path: file.path,
        size: file.size,
      });
      return ok({ id: path.itemId });
    },
  }),
  defineRoute({
    name: "items.parts",
    methods: ["GET", "POST"],
    path: itemOp("parts"),
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => ({
      parts: await services.uploads.parts(caller, path.username, path.itemId),
    }),
  }),
  defineRoute({
    name: "items.commit",
    methods: ["POST"],
    path: itemOp("commit"),
    auth: "required",
    // The item's details may come with the commit (Esri's client sends its `item`).
    params: { ...itemSpecs },
    handler: async ({ params, path, caller, services }) => {
      await services.uploads.commit(caller, path.username, path.itemId, {
        title: params.title,
        typeKeywords: params.typeKeywords,
        description: params.description,
        snippet: params.snippet,
        tags: params.tags,
        url: params.url,
        properties: params.properties,
      });
      return ok({ id: path.itemId });
    },
  }),
  defineRoute({
    name: "items.cancel",
    methods: ["POST"],
    path: itemOp("cancel"),
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.uploads.cancel(caller, path.username, path.itemId);
      return ok({ id: path.itemId });
    },
  }),
  defineRoute({
    name: "items.status",
    methods: ["GET", "POST"],
    path: itemOp("status"),
    auth: "required",
    // An export's item reports its job; other items have no job running (a publish or
    // createService finished before it answered), only perhaps an upload in parts.
    params: {
      jobType: p.string({
        enum: ["publish", "generateFeatures", "export", "createService"],
        caseInsensitive: true,
      }),
      jobId: p.string({ maxLength: 64 }),
    },
    handler: async ({ params, path, caller, services }) =>
      (await services.exports.status(caller, path.username, path.itemId, params.jobId)) ??
      services.uploads.status(caller, path.username, path.itemId),
  }),
  defineRoute({
    name: "content.export",
    methods: ["POST"],
    path: ["/content/users/:username/export", "/content/users/:username/:folderId/export"],
    auth: "required",
    privilege: "portal:user:createItem",
    params: {
      itemId: { ...itemId },
      exportFormat: p.string({ required: true, maxLength: 64 }),
      exportParameters: p.json<unknown>(
        {},
        {
          check: (value) => {
            const read = readExportParameters(value);
            return read.ok ? undefined : read.reason;
          },
        },
      ),
      title: itemSpecs.title,
      tags: itemSpecs.tags,
      snippet: itemSpecs.snippet,
      description: itemSpecs.description,
    },
    handler: async ({ params, path, caller, services }) => {
      const format = readExportFormat(params.exportFormat);
      if (!format.ok) throw errors.invalidParameter("exportFormat", format.reason);
      const parameters = readExportParameters(params.exportParameters);
      if (!parameters.ok) throw errors.invalidParameter("exportParameters", parameters.reason);
      const started = await services.exports.start(caller, path.username, path.folderId, {
        itemId: params.itemId,
        format: format.value,
        parameters: parameters.value,
        title: params.title,
        tags: params.tags,
        snippet: params.snippet,
        description: params.description,
      });
      // The export answer: its size is not known until the job has written the file.
      return { ...started, size: -1 };
    },
  }),
  defineRoute({
    name: "items.deleteThumbnail",
    methods: ["POST"],
    path: itemOp("deleteThumbnail"),
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.items.deleteThumbnail(caller, path.username, path.itemId);
      return ok();
    },
  }),
  defineRoute({
    name: "relationships.add",
    methods: ["POST"],
    path: "/content/users/:username/addRelationship",
    auth: "required",
    privilege: "portal:user:createItem",
    params: relationshipParams,
    handler: async ({ params, path, caller, services }) => {
      await services.relationships.add(caller, path.username, relationshipKey(params));
      return ok();
    },
  }),
  defineRoute({
    name: "relationships.delete",
    methods: ["POST"],
    path: "/content/users/:username/deleteRelationship",
    auth: "required",
    privilege: "portal:user:createItem",
    params: relationshipParams,
    handler: async ({ params, path, caller, services }) => {
      await services.relationships.delete(caller, path.username, relationshipKey(params));
      return ok();
    },
  }),
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
    check(params) {
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
    },
    handler: async ({ params, path, caller, services, apiBase }) => {
      const created = await services.featureServices.create(caller, path.username, path.folderId, {
        createParameters: params.createParameters,
        description: params.description,
        tags: params.tags,
        snippet: params.snippet,
        servicesBase: servicesBase(apiBase),
      });
      // The createService answer (`interface.md` §2.1): the item is the service's, named twice.
      return {
        encodedServiceURL: encodeURI(created.serviceurl),
        isView: false,
        itemId: created.itemId,
        name: created.name,
        serviceItemId: created.itemId,
        serviceurl: created.serviceurl,
        size: -1,
        ...ok(),
        type: FEATURE_SERVICE_TYPE,
        description: created.description,
        tags: created.tags.join(","),
        snippet: created.snippet,
      };
    },
  }),
];
