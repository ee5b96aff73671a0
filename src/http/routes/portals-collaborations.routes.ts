import fs from "node:fs";
import {
  ACCESS_MODES,
  COLLABORATION_PRIVILEGE,
  type Contact,
} from "../../collaboration/collaboration-types.js";
import type { AccessMode } from "../../db/schema.js";
import { errors } from "../../errors.js";
import { httpUrlProblem } from "../../outbound/guard.js";
import { type JsonSchema, p } from "../../validation/params.js";
import { ok } from "../answers.js";
import { defineRoute, type UploadedFile } from "../pipeline.js";
import { RawBody } from "../render.js";
import { workspaceConfigParam } from "./portals-collaborations-workspaces.routes.js";

/**
 * Distributed collaboration, `wire.md` §8. Every operation needs
 * `portal:admin:manageCollaborations` (administrators); which side may call it (host or guest)
 * the service checks. Portals call each other at `/portico/peer/<op>` (portico.routes.ts).
 * A collaboration's workspaces, their group links, syncs and schedules are in
 * portals-collaborations-workspaces.routes.ts.
 */

const base = "/portals/:portalId/collaborations/:collaborationId";
/** Signed files are small; this bounds what is parsed. */
const MAX_FILE_CHARS = 1024 * 1024;
/**
 * The invitation and response operations take the file's text as a parameter (percent-encoded,
 * up to three bytes a character) or the file itself.
 */
const fileLimits = (fileParam: string) => ({
  bodyLimit: 4 * MAX_FILE_CHARS,
  files: { [fileParam]: { maxBytes: MAX_FILE_CHARS } },
});

/**
 * Workspace id -> access mode. Bounded like the array form: the ids are looked up in one query,
 * and tens of thousands of them exceed what a statement may bind (SQLite 32,766, PostgreSQL 65,535).
 */
const MODE_MAP: JsonSchema = {
  type: "object",
  maxProperties: 100,
  additionalProperties: { enum: [...ACCESS_MODES] },
};
/** `[{"<wid>":"send"}]` as the public API sends it, or one object. */
const modesParam = (required: boolean) =>
  p.json<Record<string, AccessMode> | Record<string, AccessMode>[], boolean>(
    { anyOf: [MODE_MAP, { type: "array", maxItems: 100, items: MODE_MAP }] },
    { required },
  );

function modeMap(
  value: Record<string, AccessMode> | Record<string, AccessMode>[],
): Record<string, AccessMode> {
  return Array.isArray(value) ? Object.assign({}, ...value) : value;
}

const contactParams = (prefix: "host" | "guest") => ({
  [`${prefix}ContactFirstname`]: p.string({ maxLength: 128 }),
  [`${prefix}ContactLastname`]: p.string({ maxLength: 128 }),
  [`${prefix}ContactEmailAddress`]: p.string({ maxLength: 256 }),
});

function contactOf(params: Record<string, unknown>, prefix: "host" | "guest"): Contact {
  return {
    firstName: String(params[`${prefix}ContactFirstname`] ?? ""),
    lastName: String(params[`${prefix}ContactLastname`] ?? ""),
    email: String(params[`${prefix}ContactEmailAddress`] ?? ""),
  };
}

/** A signed file, sent as text in `textParam` or uploaded as `fileParam`. */
async function fileText(
  text: string | undefined,
  files: Record<string, UploadedFile>,
  textParam: string,
  fileParam: string,
): Promise<{ text: string; param: string }> {
  const file = files[fileParam];
  if (file) {
    if (file.size > MAX_FILE_CHARS)
      throw errors.invalidParameter(fileParam, "is larger than 1 MB; it is not a collaboration file");
    return { text: await fs.promises.readFile(file.path, "utf8"), param: fileParam };
  }
  if (text !== undefined) return { text, param: textParam };
  throw errors.missingParameter(
    textParam,
    `Send the file's text as '${textParam}' or upload the file as '${fileParam}'.`,
  );
}

const fileName = (kind: string, id: string) => `${kind}-${id}.json`;
const json = (text: string, filename: string) =>
  new RawBody("application/json; charset=utf-8", Buffer.from(text), filename, "attachment");

export const portalsCollaborationsRoutes = [
  defineRoute({
    name: "collaborations.create",
    methods: ["POST"],
    path: "/portals/:portalId/createCollaboration",
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {
      name: p.string({ required: true, minLength: 1, maxLength: 100 }),
      description: p.string({ maxLength: 250 }),
      workspaceName: p.string({ required: true, minLength: 1, maxLength: 100 }),
      workspaceDescription: p.string({ maxLength: 250 }),
      portalGroupId: p.string({ maxLength: 64 }),
      accessMode: p.string({ enum: ACCESS_MODES }),
      config: workspaceConfigParam,
      ...contactParams("host"),
    },
    handler: async ({ params, caller, services }) => {
      const collaboration = await services.collaborations.create(caller, {
        name: params.name,
        description: params.description ?? "",
        workspace: {
          name: params.workspaceName,
          description: params.workspaceDescription ?? "",
          portalGroupId: params.portalGroupId,
          accessMode: params.accessMode,
          config: params.config,
        },
        contact: contactOf(params, "host"),
      });
      return ok({ collaboration });
    },
  }),
  defineRoute({
    name: "collaborations.list",
    methods: ["GET", "POST"],
    path: "/portals/:portalId/collaborations",
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ caller, services }) => services.collaborations.list(caller),
  }),
  ...(["validateCollaborationInvitation", "acceptCollaborationInvitation"] as const).map((op) =>
    defineRoute({
      name: `collaborations.${op}`,
      methods: ["POST"],
      path: `/portals/:portalId/${op}`,
      auth: "required",
      privilege: COLLABORATION_PRIVILEGE,
      params: { invitationJSON: p.string({ maxLength: MAX_FILE_CHARS }), ...contactParams("guest") },
      ...fileLimits("invitationFile"),
      handler: async ({ params, files, caller, services }) => {
        const { text, param } = await fileText(
          params.invitationJSON,
          files,
          "invitationJSON",
          "invitationFile",
        );
        // A file that does not pass is refused with an error, so a validation answers `valid: true`.
        return op === "validateCollaborationInvitation"
          ? ok({
              valid: true,
              ...(await services.collaborationInvitations.validateInvitation(caller, text, param)),
            })
          : ok(
              await services.collaborationInvitations.acceptInvitation(
                caller,
                text,
                param,
                contactOf(params, "guest"),
              ),
            );
      },
    }),
  ),
  defineRoute({
    name: "collaborations.get",
    methods: ["GET", "POST"],
    path: base,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => services.collaborations.get(caller, path.collaborationId),
  }),
  defineRoute({
    name: "collaborations.updateInfo",
    methods: ["POST"],
    path: `${base}/updateInfo`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: { name: p.string({ minLength: 1, maxLength: 100 }), description: p.string({ maxLength: 250 }) },
    handler: async ({ params, path, caller, services }) => {
      await services.collaborations.updateInfo(caller, path.collaborationId, params);
      return ok({ collaborationId: path.collaborationId });
    },
  }),
  defineRoute({
    name: "collaborations.delete",
    methods: ["POST"],
    path: `${base}/delete`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.collaborations.delete(caller, path.collaborationId);
      return ok();
    },
  }),
  defineRoute({
    name: "collaborations.removeParticipation",
    // `interface.md` §4.0 lists GET; requests are shown as POST. Both are accepted.
    methods: ["GET", "POST"],
    changesState: true,
    path: `${base}/removeParticipation`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.collaborations.removeParticipation(caller, path.collaborationId);
      return ok();
    },
  }),
  defineRoute({
    name: "collaborations.inviteParticipant",
    methods: ["POST"],
    path: `${base}/inviteParticipant`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {
      guestPortalUrl: p.string({ required: true, maxLength: 2048, check: httpUrlProblem }),
      collaborationWorkspacesParticipantConfigJSON: modesParam(true),
      expiration: p.integer({ min: 1, max: 8760 }),
    },
    handler: async ({ params, path, caller, services }) => {
      const cid = path.collaborationId;
      const { id, text } = await services.collaborationInvitations.invite(caller, cid, {
        guestPortalUrl: params.guestPortalUrl,
        workspaces: modeMap(
          params.collaborationWorkspacesParticipantConfigJSON as Record<string, AccessMode>,
        ),
        expirationHours: params.expiration ?? 72,
      });
      return json(text, fileName("collaboration-invitation", id));
    },
  }),
  defineRoute({
    name: "collaborations.invitations",
    methods: ["GET", "POST"],
    path: `${base}/invitations`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.collaborationInvitations.invitations(caller, path.collaborationId),
  }),
  defineRoute({
    name: "collaborations.invitations.invalidate",
    methods: ["POST"],
    path: `${base}/invitations/:invitationId/invalidate`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.collaborationInvitations.invalidateInvitation(
        caller,
        path.collaborationId,
        path.invitationId,
      );
      return ok();
    },
  }),
  defineRoute({
    name: "collaborations.invitations.refresh",
    methods: ["POST"],
    path: `${base}/invitations/:invitationId/refresh`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: { expiration: p.integer({ min: 1, max: 8760 }) },
    handler: async ({ params, path, caller, services }) => {
      const { id, text } = await services.collaborationInvitations.refreshInvitation(
        caller,
        path.collaborationId,
        path.invitationId,
        params.expiration ?? 72,
      );
      return json(text, fileName("collaboration-invitation", id));
    },
  }),
  defineRoute({
    name: "collaborations.exportInvitationResponse",
    methods: ["GET", "POST"],
    path: `${base}/exportInvitationResponse`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      const cid = path.collaborationId;
      return json(
        await services.collaborationInvitations.exportResponse(caller, cid),
        fileName("collaboration-response", cid),
      );
    },
  }),
  ...(["validateInvitationResponse", "importInvitationResponse"] as const).map((op) =>
    defineRoute({
      name: `collaborations.${op}`,
      methods: ["POST"],
      path: `${base}/${op}`,
      auth: "required",
      privilege: COLLABORATION_PRIVILEGE,
      params: { invitationResponseJSON: p.string({ maxLength: MAX_FILE_CHARS }) },
      ...fileLimits("invitationResponseFile"),
      handler: async ({ params, files, path, caller, services }) => {
        const { text, param } = await fileText(
          params.invitationResponseJSON,
          files,
          "invitationResponseJSON",
          "invitationResponseFile",
        );
        const cid = path.collaborationId;
        // A file that does not pass is refused with an error, so a validation answers `valid: true`.
        return op === "validateInvitationResponse"
          ? ok({
              valid: true,
              ...(await services.collaborationInvitations.validateResponse(caller, cid, text, param)),
            })
          : ok({
              collaborationId: cid,
              participantId: await services.collaborationInvitations.importResponse(caller, cid, text, param),
            });
      },
    }),
  ),
  defineRoute({
    name: "collaborations.participants",
    methods: ["GET", "POST"],
    path: `${base}/participants`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.collaborations.participants(caller, path.collaborationId),
  }),
  defineRoute({
    name: "collaborations.participant",
    methods: ["GET", "POST"],
    path: `${base}/participants/:participantId`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) =>
      services.collaborations.participant(caller, path.collaborationId, path.participantId),
  }),
  defineRoute({
    name: "collaborations.participant.updateAccessModes",
    methods: ["POST"],
    path: `${base}/participants/:participantId/updateParticipantAccessModes`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: { collaborationWorkspacesParticipantConfigJSON: modesParam(true) },
    handler: async ({ params, path, caller, services }) => {
      await services.collaborations.updateAccessModes(
        caller,
        path.collaborationId,
        path.participantId,
        modeMap(params.collaborationWorkspacesParticipantConfigJSON as Record<string, AccessMode>),
      );
      return ok();
    },
  }),
  defineRoute({
    name: "collaborations.participant.updateItemDeletePolicy",
    methods: ["POST"],
    path: `${base}/participants/:participantId/updateItemDeletePolicy`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: { deleteContributedItems: p.boolean(), deleteReceivedItems: p.boolean() },
    check(params) {
      if (params.deleteContributedItems === undefined && params.deleteReceivedItems === undefined) {
        throw errors.missingParameter("deleteContributedItems");
      }
    },
    handler: async ({ params, path, caller, services }) => {
      await services.collaborations.updateDeletePolicy(
        caller,
        path.collaborationId,
        path.participantId,
        params,
      );
      return ok();
    },
  }),
  defineRoute({
    name: "collaborations.participant.remove",
    methods: ["POST"],
    path: `${base}/participants/:participantId/remove`,
    auth: "required",
    privilege: COLLABORATION_PRIVILEGE,
    params: {},
    handler: async ({ path, caller, services }) => {
      await services.collaborations.removeParticipant(caller, path.collaborationId, path.participantId);
      return ok();
    },
  }),
];
