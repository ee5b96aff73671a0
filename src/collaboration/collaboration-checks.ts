import type { Queryable } from "../db/database.js";
import type {
  AccessMode,
  CollaborationTable,
  InvitationTable,
  ParticipantTable,
  WorkspaceTable,
} from "../db/schema.js";
import { errors } from "../errors.js";
import { findCollaboration, findInvitation, findParticipant } from "./collaboration.repository.js";
import { ACCESS_MODES } from "./collaboration-types.js";
import { findWorkspace, workspaceIdsOf } from "./workspace.repository.js";

/**
 * The lookups and checks every collaboration operation starts with: what it names must exist
 * (each with its own not-found error), and this portal must play the role the operation is for.
 */

export async function mustFindCollaboration(q: Queryable, id: string): Promise<CollaborationTable> {
  const row = await findCollaboration(q, id);
  if (!row) throw errors.collaborationNotFound(id);
  return row;
}

export async function mustFindWorkspace(
  q: Queryable,
  collaborationId: string,
  workspaceId: string,
): Promise<WorkspaceTable> {
  const row = await findWorkspace(q, collaborationId, workspaceId);
  if (!row) throw errors.workspaceNotFound(workspaceId);
  return row;
}

/** A participant of an existing collaboration (an unknown collaboration is named as such). */
export async function mustFindParticipant(
  q: Queryable,
  collaborationId: string,
  portalId: string,
): Promise<ParticipantTable> {
  await mustFindCollaboration(q, collaborationId);
  const row = await findParticipant(q, collaborationId, portalId);
  if (!row) throw errors.notFound(`Participant '${portalId}'`);
  return row;
}

export async function mustFindInvitation(
  q: Queryable,
  collaborationId: string,
  invitationId: string,
): Promise<InvitationTable> {
  const row = await findInvitation(q, collaborationId, invitationId);
  if (!row) throw errors.notFound(`Invitation '${invitationId}'`);
  return row;
}

/** Refuses an operation meant for the other side of the collaboration. */
export function requireRole(collab: CollaborationTable, role: "host" | "guest", message: string) {
  if (collab.role !== role) throw errors.collaborationWrongSide(message, collab.role);
}

/** Checks workspace id -> access mode pairs: at least one, each a workspace of the collaboration. */
export async function checkWorkspaceModes(
  q: Queryable,
  collaborationId: string,
  modes: Record<string, AccessMode>,
  param: string,
) {
  const ids = Object.keys(modes);
  if (ids.length === 0) throw errors.invalidParameter(param, "must name at least one workspace");
  const found = new Set(await workspaceIdsOf(q, collaborationId, ids));
  const missing = ids.filter((id) => !found.has(id));
  if (missing.length > 0)
    throw errors.invalidParameter(
      param,
      `names workspaces that are not in this collaboration: ${missing.join(", ")}`,
    );
  for (const [id, mode] of Object.entries(modes)) {
    if (!ACCESS_MODES.includes(mode))
      throw errors.invalidParameter(
        param,
        `gives workspace ${id} the access mode '${String(mode)}'; use send, receive or sendAndReceive`,
      );
  }
}
