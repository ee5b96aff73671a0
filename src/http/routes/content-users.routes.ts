import type { ItemFields, ItemFile } from "../../content/item.service.js";
import { itemSpecs } from "../../content/item-specs.js";
import { errors } from "../../errors.js";
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
    handler: async ({ params, path, caller, services }) =>
      services.items.listUserContent(caller, path.username, path.folderId, pageOf(params)),
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
    },
    ...itemLimits,
    handler: async ({ params, files, path, caller, services }) =>
      ok(await services.items.add(caller, path.username, path.folderId, itemFields(params, files))),
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
    handler: async ({ path, caller, services }) => {
      await services.items.deleteFolder(caller, path.username, path.folderId);
      return ok({ folder: { username: path.username, id: path.folderId } });
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
