import {
  ACCESS_MODES,
  COLLABORATION_PRIVILEGE,
  type WorkspaceConfig,
} from "../../collaboration/collaboration-types.js";
import { type JsonSchema, p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute } from "../pipeline.js";

/**
 * A collaboration's workspaces (`wire.md` §8): adding them, their group links, syncs and sync
 * schedules. Administrators only (`portal:admin:manageCollaborations`); which side may call each
 * operation the service checks.
 */

const base = "/portals/:portalId/collaborations/:collaborationId";
const ws = `${base}/workspaces/:workspaceId`;

const CONFIG_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    maxItemSizeInMB: { type: "number", exclusiveMinimum: 0, maximum: 1024 },
    maxReplicationPackageSizeInMB: { type: "number", exclusiveMinimum: 0, maximum: 102400 },
    bidirectionalSyncCapable: { type: "boolean" },
  },
  additionalProperties: false,
};

/** A workspace's `config`, taken by `createCollaboration` (its first workspace) and here. */
export const workspaceConfigParam = p.json<Partial<WorkspaceConfig>>(CONFIG_SCHEMA);

const workspaceFields = {
  collaborationWorkspaceName: p.string({ maxLength: 100, minLength: 1 }),
  collaborationWorkspaceDescription: p.string({ maxLength: 250 }),
  config: workspaceConfigParam,
};

export const portalsCollaborationsWorkspacesRoutes = [
  defineRoute({
    name: "collaborations.addWorkspace",
    methods: ["POST"],
    path: `${base}/addWorkspace`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {
      ...workspaceFields,
      collaborationWorkspaceName: p.string({ required: true, minLength: 1, maxLength: 100 }),
      portalGroupId: p.string({ maxLength: 64 }),
      accessMode: p.string({ enum: ACCESS_MODES }),
    },
    handler: async ({ params, path, caller, services }) => {
      const workspace = await services.workspaces.addWorkspace(caller, path.collaborationId, {
        name: params.collaborationWorkspaceName,
        description: params.collaborationWorkspaceDescription ?? "",
        portalGroupId: params.portalGroupId,
        accessMode: params.accessMode,
        config: params.config,
      });
      return ok({ workspace });
    },
  }),
  defineRoute({
    name: "collaborations.workspaces",
    methods: ["GET", "POST"],
    path: `${base}/workspaces`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.workspaces.workspaces(caller, path.collaborationId),
  }),
  defineRoute({
    name: "collaborations.workspace",
    methods: ["GET", "POST"],
    path: ws,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.workspaces.workspace(caller, path.collaborationId, path.workspaceId),
  }),
  defineRoute({
    name: "collaborations.workspace.updateInfo",
    methods: ["POST"],
    path: `${ws}/updateInfo`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: workspaceFields,
    handler: async ({ params, path, caller, services }) => {
      await services.workspaces.updateWorkspaceInfo(caller, path.collaborationId, path.workspaceId, {
        name: params.collaborationWorkspaceName,
        description: params.collaborationWorkspaceDescription,
        config: params.config,
      });
      return ok({ collaborationId: path.collaborationId, collaborationWorkspaceId: path.workspaceId });
    },
  }),
  defineRoute({
    name: "collaborations.workspace.updatePortalGroupLink",
    methods: ["POST"],
    path: `${ws}/updatePortalGroupLink`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {
      portalGroupId: p.string({ maxLength: 64 }),
      enableRealtimeSync: p.boolean(),
      copyFeatureServiceData: p.boolean(),
      copyByRefIfCopyFail: p.boolean(),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.workspaces.updateGroupLink(caller, path.collaborationId, path.workspaceId, params);
      return ok({ collaborationId: path.collaborationId, collaborationWorkspaceId: path.workspaceId });
    },
  }),
  defineRoute({
    name: "collaborations.workspace.removePortalGroupLink",
    methods: ["POST"],
    path: `${ws}/removePortalGroupLink`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    // This answer has `success` last.
    handler: async ({ path, caller, services }) => {
      await services.workspaces.removeGroupLink(caller, path.collaborationId, path.workspaceId);
      return { collaborationId: path.collaborationId, collaborationWorkspaceId: path.workspaceId, ...ok() };
    },
  }),
  defineRoute({
    name: "collaborations.workspace.delete",
    methods: ["POST"],
    path: `${ws}/delete`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.workspaces.deleteWorkspace(caller, path.collaborationId, path.workspaceId);
      return ok();
    },
  }),
  defineRoute({
    name: "collaborations.workspace.sync",
    methods: ["POST"],
    path: `${ws}/sync`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: { async: p.boolean() },
    handler: async ({ params, path, caller, services }) => {
      const { jobId, finished } = await services.sync.requestSync(
        caller,
        path.collaborationId,
        path.workspaceId,
        params.async !== true,
      );
      // The job is named twice (`jobId`, `key`). A sync the call waited for answers how it ended:
      // there `success` is that outcome, not an acknowledgement.
      if (finished) return { jobId, key: jobId, success: finished.status !== "failed", ...finished };
      return { jobId, key: jobId, ...ok() };
    },
  }),
  defineRoute({
    name: "collaborations.workspace.syncStatus",
    methods: ["GET", "POST"],
    path: `${ws}/syncStatus`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.sync.status(caller, path.collaborationId, path.workspaceId),
  }),
  defineRoute({
    name: "collaborations.workspace.syncStatus.one",
    methods: ["GET", "POST"],
    path: `${ws}/syncStatus/:syncId`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.sync.statusOf(caller, path.collaborationId, path.workspaceId, path.syncId),
  }),
  defineRoute({
    name: "collaborations.workspace.schedule",
    methods: ["GET", "POST"],
    path: `${ws}/schedule`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.sync.schedule(caller, path.collaborationId, path.workspaceId),
  }),
  defineRoute({
    name: "collaborations.workspace.schedule.update",
    methods: ["POST"],
    path: `${ws}/schedule/update`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {
      startTime: p.integer({ min: 0 }),
      // Hours; fractions are accepted (0.5 is every 30 minutes), down to one second.
      interval: p.number({ min: 1 / 3600, max: 24 * 365 }),
      repeatCount: p.integer({ min: 0, max: 1_000_000, also: [-1] }),
    },
    handler: async ({ params, path, caller, services }) => {
      await services.sync.updateSchedule(caller, path.collaborationId, path.workspaceId, params);
      return ok();
    },
  }),
  ...(["delete", "pause", "resume"] as const).map((op) =>
    defineRoute({
      name: `collaborations.workspace.schedule.${op}`,
      methods: ["POST"],
      path: `${ws}/schedule/${op}`,
      auth: "required",
      privilege: COLLABORATION_PRIVILEGE,
      params: {},
      handler: async ({ path, caller, services }) => {
        const cid = path.collaborationId;
        const wid = path.workspaceId;
        if (op === "delete") await services.sync.deleteSchedule(caller, cid, wid);
        else await services.sync.setScheduleState(caller, cid, wid, op === "pause" ? "paused" : "active");
        return ok();
      },
    }),
  ),
];
