import type { Queryable } from "../db/database.js";
import type { ParticipantTable } from "../db/schema.js";
import { deleteCollaboration, deleteParticipant, listParticipants } from "./collaboration.repository.js";
import { mustFindParticipant } from "./collaboration-checks.js";
import { releaseCopies } from "./replication.js";
import { deleteModesOf, deleteWorkspaces, workspaceIdsOf } from "./workspace.repository.js";

/**
 * What ending replication does on this portal (`selfId`), whichever side ends it: an
 * administrator here, a notice from the other portal, or a sync that learns it from the host.
 * Received copies are released per the delete policies before the rows that replicated them go.
 * Each function runs inside its caller's transaction.
 */

/** Releases copies per the delete policies, then removes the workspaces. */
export async function dropWorkspaces(
  trx: Queryable,
  selfId: string,
  collaborationId: string,
  workspaceIds: readonly string[],
) {
  const participants = await listParticipants(trx, collaborationId);
  const deleteReceived = participants.find((p) => p.portal_id === selfId)?.delete_received === 1;
  const contributed = new Map(participants.map((p) => [p.portal_id, p.delete_contributed === 1]));
  await releaseCopies(trx, workspaceIds, (origin) => deleteReceived || (contributed.get(origin) ?? false));
  await deleteWorkspaces(trx, workspaceIds);
}

export async function dropCollaboration(trx: Queryable, selfId: string, collaborationId: string) {
  await dropWorkspaces(trx, selfId, collaborationId, await workspaceIdsOf(trx, collaborationId));
  await deleteCollaboration(trx, collaborationId);
}

/** Host side of a guest leaving or being removed: the copies of its items follow its policy. */
export async function dropGuest(
  trx: Queryable,
  selfId: string,
  collaborationId: string,
  guest: ParticipantTable,
) {
  const self = await mustFindParticipant(trx, collaborationId, selfId);
  const ids = await workspaceIdsOf(trx, collaborationId);
  await releaseCopies(
    trx,
    ids,
    () => guest.delete_contributed === 1 || self.delete_received === 1,
    guest.portal_id,
    true,
  );
  await deleteModesOf(trx, ids, guest.portal_id);
  await deleteParticipant(trx, collaborationId, guest.portal_id);
}
