import { servedType } from "../../content/file-types.js";
import type { ItemFileDownload } from "../../content/item.service.js";
import { ITEM_INFO_XML } from "../../content/item-info.js";
import { checkResourcePath, MAX_RESOURCES_PER_ITEM } from "../../content/item-resources.js";
import { relationshipTypesOf } from "../../content/relationship.service.js";
import { errors } from "../../errors.js";
import { pageOf, pagingParams } from "../../validation/paging.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { RawBody } from "../render.js";

/** A stored file answered as file-types.ts says: inline only when no browser would run it. */
function fileAnswer(file: ItemFileDownload): RawBody {
  const served = servedType(file.contentType);
  return new RawBody(served.contentType, file, file.filename, served.disposition);
}

const relationshipTypeList = p.list({ maxItems: 26, item: { maxLength: 64 } });

const groupList = p.list({
  maxItems: 100,
  item: { pattern: /^[A-Za-z0-9]{1,64}$/, patternReason: "is not a group id" },
});

/**
 * An item by its id, `/content/items/<id>`: its description, data, thumbnail and comments, and
 * sharing by group managers who do not own it. What an owner does to an item goes through the
 * owner's content, in content-users.routes.ts.
 */
export const contentItemsRoutes = [
  defineRoute({
    name: "items.shareAsGroupManager",
    methods: ["POST"],
    path: "/content/items/:itemId/share",
    auth: "required",
    // `confirmItemControl` (shared update groups) is accepted and ignored: portico has none.
    params: { groups: { ...groupList, required: true as const }, confirmItemControl: p.boolean() },
    handler: async ({ params, path, caller, services }) =>
      services.sharing.shareAsGroupManager(caller, path.itemId, params.groups),
  }),
  defineRoute({
    name: "items.unshareAsGroupManager",
    methods: ["POST"],
    path: "/content/items/:itemId/unshare",
    auth: "required",
    params: { groups: { ...groupList, required: true as const } },
    handler: async ({ params, path, caller, services }) =>
      services.sharing.unshareAsGroupManager(caller, path.itemId, params.groups),
  }),
  defineRoute({
    name: "items.get",
    methods: ["GET", "POST"],
    path: "/content/items/:itemId",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.items.get(caller, path.itemId),
  }),
  defineRoute({
    name: "items.data",
    methods: ["GET", "POST"],
    path: "/content/items/:itemId/data",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => {
      const file = await services.items.data(caller, path.itemId);
      // ArcGIS answers an item without data with an empty body; Esri's client (getItemData) reads
      // that as "no data" and resolves with nothing.
      if (!file) return new RawBody("text/plain; charset=utf-8", Buffer.alloc(0));
      // Shown inline only when no browser would run it (file-types.ts); streamed from its chunks.
      return fileAnswer(file);
    },
  }),
  defineRoute({
    name: "items.thumbnail",
    methods: ["GET"],
    path: "/content/items/:itemId/info/thumbnail/:name",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => {
      const file = await services.items.thumbnail(caller, path.itemId);
      return new RawBody(file.contentType, file, file.filename);
    },
  }),
  defineRoute({
    name: "items.info",
    methods: ["GET"],
    path: ["/content/items/:itemId/info/:fileName", "/content/items/:itemId/info/:folderName/:fileName"],
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => {
      if (path.folderName === undefined && path.fileName.toLowerCase() === ITEM_INFO_XML) {
        // Made by the portal from the item, every value escaped; still answered as every XML file
        // is (file-types.ts), never as a document a browser would render.
        const xml = await services.items.itemInfo(caller, path.itemId);
        const served = servedType("application/xml");
        return new RawBody(served.contentType, Buffer.from(xml, "utf8"), ITEM_INFO_XML, served.disposition);
      }
      return fileAnswer(await services.items.infoFile(caller, path.itemId, path.folderName, path.fileName));
    },
  }),
  defineRoute({
    name: "items.metadata",
    methods: ["GET"],
    path: "/content/items/:itemId/info/metadata/metadata.xml",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) =>
      fileAnswer(await services.items.infoFile(caller, path.itemId, "metadata", "metadata.xml")),
  }),
  defineRoute({
    name: "items.groups",
    methods: ["GET", "POST"],
    path: "/content/items/:itemId/groups",
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => services.groups.ofItem(caller, path.itemId),
  }),
  defineRoute({
    name: "items.relatedItems",
    methods: ["GET", "POST"],
    path: "/content/items/:itemId/relatedItems",
    auth: "optional",
    params: {
      ...pagingParams,
      // Esri's client sends one type as `relationshipType`, several as `relationshipTypes`.
      relationshipType: relationshipTypeList,
      relationshipTypes: relationshipTypeList,
      direction: p.string({ enum: ["forward", "reverse"], caseInsensitive: true }),
      sortField: p.string({ enum: ["created"], caseInsensitive: true }),
      sortOrder: p.string({ enum: ["asc", "desc"], caseInsensitive: true }),
    },
    handler: async ({ params, path, caller, services }) => {
      const [names, parameter] =
        params.relationshipTypes !== undefined
          ? [params.relationshipTypes, "relationshipTypes"]
          : [params.relationshipType, "relationshipType"];
      if (!names || names.length === 0) throw errors.missingParameter("relationshipTypes");
      const types = relationshipTypesOf(parameter, names);
      return services.relationships.related(
        caller,
        path.itemId,
        types,
        params.direction === "reverse" ? "reverse" : "forward",
        params.sortOrder === "desc" ? "desc" : "asc",
        pageOf(params),
      );
    },
  }),
  defineRoute({
    name: "items.resources",
    methods: ["GET", "POST"],
    path: "/content/items/:itemId/resources",
    auth: "optional",
    params: {
      start: p.integer({ min: 1 }),
      // Esri's client asks for 1,000 (getItemResources): every resource an item may hold.
      num: p.integer({ min: 1, max: MAX_RESOURCES_PER_ITEM }),
      sortField: p.string({ enum: ["resource", "size", "created"], caseInsensitive: true }),
      sortOrder: p.string({ enum: ["asc", "desc"], caseInsensitive: true }),
    },
    handler: async ({ params, path, caller, services }) =>
      services.resources.list(
        caller,
        path.itemId,
        (params.sortField?.toLowerCase() ?? "resource") as "resource" | "size" | "created",
        params.sortOrder?.toLowerCase() === "desc",
        pageOf(params),
      ),
  }),
  defineRoute({
    name: "items.resource",
    // Esri's client (getItemResource) asks with POST unless told otherwise.
    methods: ["GET", "POST"],
    // A resource in up to four folders: one template per depth keeps every segment a parameter.
    path: [
      "/content/items/:itemId/resources/:s1",
      "/content/items/:itemId/resources/:s1/:s2",
      "/content/items/:itemId/resources/:s1/:s2/:s3",
      "/content/items/:itemId/resources/:s1/:s2/:s3/:s4",
      "/content/items/:itemId/resources/:s1/:s2/:s3/:s4/:s5",
    ],
    auth: "optional",
    params: {},
    handler: async ({ path, caller, services }) => {
      const resource = [path.s1, path.s2, path.s3, path.s4, path.s5].filter((s) => s !== undefined).join("/");
      // Segments arrive decoded: an encoded '/' or '..' is checked as the whole path.
      checkResourcePath("resource", resource);
      return fileAnswer(await services.resources.file(caller, path.itemId, resource));
    },
  }),
  defineRoute({
    name: "comments.add",
    methods: ["POST"],
    path: "/content/items/:itemId/addComment",
    auth: "required",
    params: { comment: p.string({ required: true, maxLength: 2048 }) },
    handler: async ({ params, path, caller, services }) =>
      ok({ commentId: await services.comments.add(caller, path.itemId, params.comment) }),
  }),
  defineRoute({
    name: "comments.list",
    methods: ["GET", "POST"],
    path: "/content/items/:itemId/comments",
    auth: "optional",
    params: { ...pagingParams },
    handler: async ({ params, path, caller, services }) =>
      services.comments.list(caller, path.itemId, pageOf(params)),
  }),
  defineRoute({
    name: "comments.update",
    methods: ["POST"],
    path: "/content/items/:itemId/comments/:commentId/update",
    auth: "required",
    params: { comment: p.string({ required: true, maxLength: 2048 }) },
    handler: async ({ params, path, caller, services }) => {
      await services.comments.update(caller, path.itemId, path.commentId, params.comment);
      return ok({ commentId: path.commentId });
    },
  }),
  defineRoute({
    name: "comments.delete",
    methods: ["POST"],
    path: "/content/items/:itemId/comments/:commentId/delete",
    auth: "required",
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.comments.delete(caller, path.itemId, path.commentId);
      return ok({ commentId: path.commentId });
    },
  }),
];
