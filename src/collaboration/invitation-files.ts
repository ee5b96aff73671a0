import type { AccessMode } from "../db/schema.js";
import { errors } from "../errors.js";
import type { Contact, WorkspaceConfig } from "./collaboration-types.js";

/**
 * The files administrators carry between portals: the host's signed invitation and the guest's
 * signed response. Their contents are checked by `invitation.service.ts`.
 */

export const INVITATION_TYPE = "portico.collaborationInvitation";
export const RESPONSE_TYPE = "portico.collaborationInvitationResponse";

export interface InvitationDoc {
  id: string;
  collaborationId: string;
  collaborationName: string;
  collaborationDescription: string;
  hostPortalId: string;
  hostPortalUrl: string;
  hostPortalName: string;
  hostPublicKey: string;
  hostContact: Contact;
  guestPortalUrl: string;
  workspaces: {
    id: string;
    name: string;
    description: string;
    config: WorkspaceConfig;
    accessMode: AccessMode;
    hostAccessMode: AccessMode;
  }[];
  issued: number;
  expires: number;
}

export interface ResponseDoc {
  invitationId: string;
  collaborationId: string;
  invitationDigest: string;
  guestPortalId: string;
  guestPortalUrl: string;
  guestPortalName: string;
  guestPublicKey: string;
  guestContact: Contact;
  issued: number;
}

/** A signed file: `{type, version, <name>: {...}, signature}`. */
export function parseSignedFile(text: string, param: string, type: string, name: "invitation" | "response") {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw errors.invalidParameter(param, "is not JSON (send the file's text unchanged)");
  }
  if (typeof doc !== "object" || doc === null || doc.type !== type) {
    throw errors.invalidParameter(
      param,
      `is not a ${name === "invitation" ? "collaboration invitation" : "collaboration invitation response"} file`,
    );
  }
  const body = doc[name];
  if (typeof body !== "object" || body === null || typeof doc.signature !== "string") {
    throw errors.collaborationFileRefused(param, `the file has no signed ${name}`);
  }
  return { body: body as Record<string, unknown>, signature: doc.signature };
}
