import { servedType } from "../../content/file-types.js";
import { p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";
import { RawBody } from "../render.js";

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
      // ArcGIS answers an empty JSON object for an item without data.
      if (!file) return {};
      // Shown inline only when no browser would run it (file-types.ts); streamed from its chunks.
      const served = servedType(file.contentType);
      return new RawBody(served.contentType, file, file.filename, served.disposition);
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
    params: {},
    handler: async ({ path, caller, services }) => services.comments.list(caller, path.itemId),
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
