import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db, Queryable } from "../db/database.js";
import type { AccessMode, CollaborationTable, ParticipantTable } from "../db/schema.js";
import { errors } from "../errors.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import {
  collaborationNameTaken,
  findHost,
  insertCollaboration,
  insertParticipants,
  listCollaborations,
  listGuests,
  listParticipants,
  participantContact,
  setDeletePolicy,
  updateCollaboration,
} from "./collaboration.repository.js";
import {
  checkWorkspaceModes,
  mustFindCollaboration,
  mustFindParticipant,
  requireRole,
} from "./collaboration-checks.js";
import {
  COLLABORATION_PRIVILEGE,
  type Contact,
  type NewWorkspace,
  type Notifier,
} from "./collaboration-types.js";
import { dropCollaboration, dropGuest } from "./drop-cascade.js";
import type { PortalKeys } from "./peer.js";
import { fingerprint } from "./signing.js";
import { participantModes, setMode, workspaceIdsOf } from "./workspace.repository.js";
import { insertNewWorkspace } from "./workspace.service.js";

/**
 * Distributed collaboration (`wire.md` §8): collaborations and their participants. Invitations
 * and the exchange of keys are `invitation.service.ts`, workspaces and group links
 * `workspace.service.ts`, syncs `sync.service.ts`, and what another portal calls
 * `peer-endpoint.ts`.
 *
 * Topology [decided]: the host is the hub. Each guest exchanges content with the host, in the
 * directions the two access modes allow; a copy is never sent on, so what a guest contributes
 * reaches the host, and the host's own items reach every guest that receives.
 */
export class CollaborationService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly keys: PortalKeys,
    /** This portal's URL as peers reach it (public URL and context path). */
    private readonly portalUrl: () => string,
    /** Tells the other portals when this one ends replication. */
    private readonly notifier: Notifier,
  ) {}

  private async selfId(): Promise<string> {
    return (await this.portal.get()).id;
  }

  /** Creates a collaboration hosted here, with its first workspace; answers the collaboration. */
  async create(
    caller: Caller | null,
    input: {
      name: string;
      description: string;
      workspace: NewWorkspace;
      contact: Contact;
    },
  ) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const org = await this.portal.get();
    const { publicKey } = await this.keys.get();
    const now = Date.now();
    const id = newId();
    await this.db.transaction(async (trx) => {
      await this.assertUniqueName(trx, input.name);
      await insertCollaboration(
        trx,
        { id, name: input.name, description: input.description, role: "host", host_portal_id: org.id },
        now,
      );
      await insertParticipants(
        trx,
        [
          {
            collaborationId: id,
            portalId: org.id,
            role: "host",
            portalUrl: this.portalUrl(),
            portalName: String(org.settings.name ?? ""),
            publicKey,
            contact: input.contact,
            status: "active",
          },
        ],
        now,
      );
      await insertNewWorkspace(trx, id, org.id, input.workspace, now);
    });
    return this.get(caller, id);
  }

  async list(caller: Caller | null) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const rows = await listCollaborations(this.db.kysely);
    const out = [];
    for (const row of rows) out.push(await this.collaborationJson(row));
    return { collaborations: out };
  }

  async get(caller: Caller | null, id: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    return this.collaborationJson(await mustFindCollaboration(this.db.kysely, id));
  }

  private async collaborationJson(row: CollaborationTable) {
    const selfId = await this.selfId();
    const workspaceIds = await workspaceIdsOf(this.db.kysely, row.id);
    const participants = await listParticipants(this.db.kysely, row.id);
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      collaborationHostPortalId: row.host_portal_id,
      isHost: row.role === "host",
      portalId: selfId,
      status: participants.find((p) => p.portal_id === selfId)?.status ?? "active",
      workspaceIds,
      participantCount: participants.length,
      created: row.created,
      modified: row.modified,
    };
  }

  async updateInfo(
    caller: Caller | null,
    id: string,
    input: { name?: string | undefined; description?: string | undefined },
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const collab = await mustFindCollaboration(trx, id);
      requireRole(collab, "host", "Only the collaboration host changes its name and description.");
      if (input.name !== undefined && input.name !== collab.name)
        await this.assertUniqueName(trx, input.name);
      await updateCollaboration(trx, id, input, Date.now());
    });
  }

  /** Host: deletes the whole collaboration, for every participant. */
  async delete(caller: Caller | null, collaborationId: string): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(
      collab,
      "host",
      "Only the collaboration host deletes the collaboration; a guest leaves with removeParticipation.",
    );
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      const guests = await listGuests(trx, collaborationId);
      await dropCollaboration(trx, selfId, collaborationId);
      for (const g of guests) await this.notifier.tell(trx, g, collaborationId, "ended", {});
    });
  }

  /** Guest: leaves the collaboration; replication stops at once. */
  async removeParticipation(caller: Caller | null, collaborationId: string): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "guest", "The host cannot leave its own collaboration; delete it instead.");
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      const host = await findHost(trx, collaborationId);
      await dropCollaboration(trx, selfId, collaborationId);
      await this.notifier.tell(trx, host, collaborationId, "left", {});
    });
  }

  async participants(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await mustFindCollaboration(this.db.kysely, collaborationId);
    const rows = await listParticipants(this.db.kysely, collaborationId);
    const out = [];
    for (const row of rows) out.push(await this.participantJson(row));
    return { participants: out };
  }

  async participant(caller: Caller | null, collaborationId: string, portalId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    return this.participantJson(await mustFindParticipant(this.db.kysely, collaborationId, portalId));
  }

  private async participantJson(row: ParticipantTable) {
    const contact = participantContact(row);
    return {
      participantId: row.portal_id,
      portalId: row.portal_id,
      portalName: row.portal_name,
      portalUrl: row.portal_url,
      role: row.role,
      status: row.status,
      firstName: contact.firstName,
      lastName: contact.lastName,
      email: contact.email,
      keyFingerprint: fingerprint(row.public_key),
      deleteContributedItems: row.delete_contributed === 1,
      deleteReceivedItems: row.delete_received === 1,
      workspaceAccessModes: await participantModes(this.db.kysely, row.collaboration_id, row.portal_id),
      created: row.created,
      modified: row.modified,
    };
  }

  async updateAccessModes(
    caller: Caller | null,
    collaborationId: string,
    portalId: string,
    modes: Record<string, AccessMode>,
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Only the collaboration host changes access modes.");
    await mustFindParticipant(this.db.kysely, collaborationId, portalId);
    await checkWorkspaceModes(
      this.db.kysely,
      collaborationId,
      modes,
      "collaborationWorkspacesParticipantConfigJSON",
    );
    await this.db.transaction(async (trx) => {
      for (const [workspaceId, mode] of Object.entries(modes))
        await setMode(trx, { workspaceId, portalId, mode });
    });
  }

  async updateDeletePolicy(
    caller: Caller | null,
    collaborationId: string,
    portalId: string,
    policy: { deleteContributedItems?: boolean | undefined; deleteReceivedItems?: boolean | undefined },
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Only the collaboration host changes item delete policies.");
    await this.db.transaction(async (trx) => {
      await mustFindParticipant(trx, collaborationId, portalId);
      await setDeletePolicy(
        trx,
        collaborationId,
        portalId,
        { deleteContributed: policy.deleteContributedItems, deleteReceived: policy.deleteReceivedItems },
        Date.now(),
      );
    });
  }

  /** Host: removes a guest. Its calls are refused from now on; copies follow the delete policies. */
  async removeParticipant(caller: Caller | null, collaborationId: string, portalId: string): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Only the collaboration host removes participants.");
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      const guest = await mustFindParticipant(trx, collaborationId, portalId);
      if (guest.role === "host")
        throw errors.invalidParameter("participantId", "is the host; delete the collaboration instead");
      await dropGuest(trx, selfId, collaborationId, guest);
      await this.notifier.tell(trx, guest, collaborationId, "ended", {});
    });
  }

  private async assertUniqueName(q: Queryable, name: string) {
    if (await collaborationNameTaken(q, name))
      throw errors.invalidParameter(
        "name",
        `'${name}' is already the name of a collaboration on this portal`,
      );
  }
}
