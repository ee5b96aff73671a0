import type { Db, Queryable } from "../db/database.js";
import {
  acceptPoliciesFromHost,
  findCollaboration,
  listParticipants,
  updateCollaboration,
} from "./collaboration.repository.js";
import { mustFindCollaboration } from "./collaboration-checks.js";
import type { HostState } from "./collaboration-types.js";
import { dropWorkspaces } from "./drop-cascade.js";
import {
  insertWorkspace,
  listWorkspaces,
  modesOf,
  replaceModes,
  updateWorkspace,
  workspaceConfig,
  workspaceIdsOf,
} from "./workspace.repository.js";

/**
 * The peer call `state`, both ends: the host tells a guest what the collaboration is now
 * (workspaces, access modes, delete policies), and the guest's sync makes that its own before
 * moving anything. The host's view wins; a workspace the host no longer lists ends here.
 */

/** The host's answer to a guest's `state` call: the collaboration as that guest may see it. */
export async function hostState(q: Queryable, collaborationId: string, guestId: string): Promise<HostState> {
  const collab = await mustFindCollaboration(q, collaborationId);
  const workspaces = await listWorkspaces(q, collaborationId);
  const modes = await modesOf(
    q,
    workspaces.map((w) => w.id),
  );
  const participants = await listParticipants(q, collaborationId);
  return {
    collaboration: { id: collab.id, name: collab.name, description: collab.description },
    // A guest sees the workspaces it was given an access mode in.
    workspaces: workspaces
      .filter((w) => modes.get(w.id)?.has(guestId))
      .map((w) => ({
        id: w.id,
        name: w.name,
        description: w.description,
        config: workspaceConfig(w),
        modes: Object.fromEntries(modes.get(w.id) ?? []),
      })),
    participants: participants
      .filter((p) => p.role === "host" || p.portal_id === guestId)
      .map((p) => ({
        portalId: p.portal_id,
        role: p.role,
        portalUrl: p.portal_url,
        portalName: p.portal_name,
        deleteContributed: p.delete_contributed === 1,
        deleteReceived: p.delete_received === 1,
      })),
  };
}

/** Applies the host's view on the guest; false when the collaboration ended here. */
export async function applyHostState(
  db: Db,
  selfId: string,
  collaborationId: string,
  state: HostState,
): Promise<boolean> {
  const now = Date.now();
  return db.transaction(async (trx) => {
    if (!(await findCollaboration(trx, collaborationId))) return false;
    await updateCollaboration(trx, collaborationId, state.collaboration, now);
    for (const p of state.participants) await acceptPoliciesFromHost(trx, collaborationId, p.portalId, p);
    const local = await workspaceIdsOf(trx, collaborationId);
    const listed = new Set(state.workspaces.map((w) => w.id));
    const gone = local.filter((id) => !listed.has(id));
    if (gone.length > 0) await dropWorkspaces(trx, selfId, collaborationId, gone);
    const known = new Set(local);
    for (const w of state.workspaces) {
      const values = { name: w.name, description: w.description, config: w.config };
      if (known.has(w.id)) await updateWorkspace(trx, w.id, values, now);
      else await insertWorkspace(trx, { id: w.id, collaborationId, ...values }, now);
      // A guest knows two participants, itself and the host: it keeps their modes only.
      const modes = Object.entries(w.modes).filter(
        ([portalId]) =>
          portalId === selfId || state.participants.some((p) => p.portalId === portalId && p.role === "host"),
      );
      await replaceModes(
        trx,
        w.id,
        modes.map(([portalId, mode]) => ({ workspaceId: w.id, portalId, mode })),
      );
    }
    return true;
  });
}
