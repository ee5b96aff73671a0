import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db, Queryable } from "../db/database.js";
import type { WorkspaceTable } from "../db/schema.js";
import { errors } from "../errors.js";
import { findGroup } from "../groups/group.repository.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import { startPrint } from "./cluster-sync.repository.js";
import { listGuests } from "./collaboration.repository.js";
import {
  mustFindCollaboration,
  mustFindParticipant,
  mustFindWorkspace,
  requireRole,
} from "./collaboration-checks.js";
import {
  COLLABORATION_PRIVILEGE,
  DEFAULT_WORKSPACE_CONFIG,
  type GroupLinkUpdate,
  type NewWorkspace,
  type Notifier,
  type WorkspaceConfig,
} from "./collaboration-types.js";
import { dropWorkspaces } from "./drop-cascade.js";
import { offerFingerprint, releaseCopies } from "./replication.js";
import { deleteSchedule } from "./sync.repository.js";
import {
  deleteLink,
  findLink,
  groupLinkedElsewhere,
  insertModes,
  insertWorkspace,
  listWorkspaces,
  saveLink,
  updateWorkspace,
  workspaceConfig,
  workspaceNameTaken,
  workspaceParticipants,
} from "./workspace.repository.js";

/**
 * The workspaces of a collaboration and this portal's group link in each (`wire.md` §8). The
 * host adds, changes and deletes workspaces; each participant links one of its own groups to a
 * workspace, and what is shared to that group is what it replicates.
 */
export class WorkspaceService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    /** Tells the guests when the host deletes a workspace. */
    private readonly notifier: Notifier,
  ) {}

  private async selfId(): Promise<string> {
    return (await this.portal.get()).id;
  }

  /** Host: adds a workspace; answers it. */
  async addWorkspace(caller: Caller | null, collaborationId: string, workspace: NewWorkspace) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Only the collaboration host adds workspaces.");
    const now = Date.now();
    const id = await this.db.transaction((trx) =>
      insertNewWorkspace(trx, collaborationId, collab.host_portal_id, workspace, now),
    );
    return this.workspace(caller, collaborationId, id);
  }

  async workspaces(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await mustFindCollaboration(this.db.kysely, collaborationId);
    const rows = await listWorkspaces(this.db.kysely, collaborationId);
    const out = [];
    for (const row of rows) out.push(await this.workspaceJson(row));
    return { workspaces: out };
  }

  async workspace(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    return this.workspaceJson(await mustFindWorkspace(this.db.kysely, collaborationId, workspaceId));
  }

  private async workspaceJson(row: WorkspaceTable) {
    const selfId = await this.selfId();
    const modes = await workspaceParticipants(this.db.kysely, row);
    const link = await findLink(this.db.kysely, row.id);
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      collaborationId: row.collaboration_id,
      config: workspaceConfig(row),
      created: row.created,
      modified: row.modified,
      lastSyncSuccess: row.last_sync_success,
      participantGroupLinks: modes.map((m) => ({
        portalId: m.portal_id,
        portalName: m.portal_name,
        role: m.role,
        accessMode: m.access_mode,
        ...(m.portal_id === selfId
          ? link
            ? {
                portalGroupId: link.group_id,
                enableRealtimeSync: link.realtime === 1,
                copyFeatureServiceData: link.copy_feature_data === 1,
                copyByRefIfCopyFail: link.copy_by_ref_if_copy_fail === 1,
              }
            : { portalGroupId: null }
          : {}),
      })),
    };
  }

  async updateWorkspaceInfo(
    caller: Caller | null,
    collaborationId: string,
    workspaceId: string,
    input: {
      name?: string | undefined;
      description?: string | undefined;
      config?: Partial<WorkspaceConfig> | undefined;
    },
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const collab = await mustFindCollaboration(trx, collaborationId);
      requireRole(collab, "host", "Only the collaboration host changes a workspace.");
      const row = await mustFindWorkspace(trx, collaborationId, workspaceId);
      await updateWorkspace(
        trx,
        workspaceId,
        {
          name: input.name,
          description: input.description,
          config: input.config !== undefined ? { ...workspaceConfig(row), ...input.config } : undefined,
        },
        Date.now(),
      );
    });
  }

  async updateGroupLink(
    caller: Caller | null,
    collaborationId: string,
    workspaceId: string,
    input: GroupLinkUpdate,
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.db.transaction(async (trx) => {
      await mustFindWorkspace(trx, collaborationId, workspaceId);
      await writeLink(trx, workspaceId, input, Date.now(), "portalGroupId");
    });
  }

  /** Ends replication through this portal's link (`interface.md` §3); the copies follow this portal's delete policy. */
  async removeGroupLink(caller: Caller | null, collaborationId: string, workspaceId: string): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      await mustFindWorkspace(trx, collaborationId, workspaceId);
      if (!(await findLink(trx, workspaceId)))
        throw errors.conflict("The workspace has no group linked on this portal.");
      const self = await mustFindParticipant(trx, collaborationId, selfId);
      await releaseCopies(trx, [workspaceId], () => self.delete_received === 1);
      await deleteSchedule(trx, workspaceId);
      await deleteLink(trx, workspaceId);
    });
  }

  /** Host: deletes a workspace; replication through it stops at once, on every participant. */
  async deleteWorkspace(caller: Caller | null, collaborationId: string, workspaceId: string): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Only the collaboration host deletes workspaces.");
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      await mustFindWorkspace(trx, collaborationId, workspaceId);
      await dropWorkspaces(trx, selfId, collaborationId, [workspaceId]);
      for (const g of await listGuests(trx, collaborationId))
        await this.notifier.tell(trx, g, collaborationId, "ended", { workspaceId });
    });
  }
}

/** Adds a workspace on the host, with the host's access mode and, when named, its group link. */
export async function insertNewWorkspace(
  trx: Queryable,
  collaborationId: string,
  hostId: string,
  input: NewWorkspace,
  now: number,
) {
  const id = newId();
  if (await workspaceNameTaken(trx, collaborationId, input.name)) {
    throw errors.invalidParameter(
      "collaborationWorkspaceName",
      `'${input.name}' is already a workspace of this collaboration`,
    );
  }
  await insertWorkspace(
    trx,
    {
      id,
      collaborationId,
      name: input.name,
      description: input.description,
      config: { ...DEFAULT_WORKSPACE_CONFIG, ...input.config },
    },
    now,
  );
  await insertModes(trx, [{ workspaceId: id, portalId: hostId, mode: input.accessMode ?? "sendAndReceive" }]);
  if (input.portalGroupId)
    await writeLink(trx, id, { portalGroupId: input.portalGroupId }, now, "portalGroupId");
  return id;
}

/** Writes this portal's link of a workspace: to the group named, or the linked one with new options. */
async function writeLink(
  trx: Queryable,
  workspaceId: string,
  input: GroupLinkUpdate,
  now: number,
  param: string,
) {
  const current = await findLink(trx, workspaceId);
  const groupId = input.portalGroupId ?? current?.group_id;
  if (!groupId) throw errors.missingParameter(param);
  if (!(await findGroup(trx, groupId)))
    throw errors.invalidParameter(param, `'${groupId}' is not a group of this portal`);
  if (await groupLinkedElsewhere(trx, groupId, workspaceId))
    throw errors.invalidParameter(param, `group '${groupId}' is already linked to another workspace`);
  if (current && current.group_id !== groupId) {
    // Copies received into the old group stay there as this portal's items; replication starts
    // over with the new group.
    await releaseCopies(trx, [workspaceId], () => false);
  }
  const realtime = input.enableRealtimeSync ?? current?.realtime === 1;
  if (realtime && current?.realtime !== 1) {
    // Realtime reacts to changes made from now on: what the group offers as it is turned on is
    // the fingerprint a change is told from, recorded with the link so that no check can come
    // between. Left to the first check, a change made before that check would be in its
    // fingerprint already and go unseen (or, acted on, a check before the change costs a sync).
    await startPrint(trx, workspaceId, await offerFingerprint(trx, groupId), now);
  }
  await saveLink(
    trx,
    {
      workspaceId,
      groupId,
      realtime,
      copyFeatureData: input.copyFeatureServiceData ?? current?.copy_feature_data === 1,
      copyByRefIfCopyFail: input.copyByRefIfCopyFail ?? current?.copy_by_ref_if_copy_fail === 1,
    },
    current !== undefined,
    now,
  );
}
