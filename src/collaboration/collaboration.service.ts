import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db, Queryable } from "../db/database.js";
import type { AccessMode, CollaborationTable, ParticipantTable, WorkspaceTable } from "../db/schema.js";
import { errors, PorticoError } from "../errors.js";
import { findGroup } from "../groups/group.repository.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import {
  collaborationNameTaken,
  deleteCollaboration,
  deleteParticipant,
  findAcceptedInvitation,
  findCollaboration,
  findHost,
  findInvitation,
  findParticipant,
  insertCollaboration,
  insertInvitation,
  insertParticipants,
  invitationModes,
  isParticipant,
  listCollaborations,
  listGuests,
  listInvitations,
  listParticipants,
  markInvitationAccepted,
  markInvitationInvalidated,
  participantContact,
  reissueInvitation,
  setDeletePolicy,
  updateCollaboration,
} from "./collaboration.repository.js";
import {
  ACCESS_MODES,
  type Contact,
  DEFAULT_WORKSPACE_CONFIG,
  type GroupLinkUpdate,
  type NewWorkspace,
  type Notify,
  PRIVILEGE,
  type WorkspaceConfig,
} from "./collaboration-types.js";
import { normalizePortalUrl, type PeerClient, type PortalKeys } from "./peer.js";
import { releaseCopies } from "./replication.js";
import { digestOf, fingerprint, signDocument, verifyDocument } from "./signing.js";
import { deleteSchedule } from "./sync.repository.js";
import {
  deleteLink,
  deleteModesOf,
  deleteWorkspaces,
  findLink,
  findWorkspace,
  findWorkspacesById,
  groupLinkedElsewhere,
  insertModes,
  insertWorkspace,
  listWorkspaces,
  modesOf,
  participantModes,
  saveLink,
  setMode,
  updateWorkspace,
  workspaceConfig,
  workspaceIdsOf,
  workspaceNameTaken,
  workspaceParticipants,
} from "./workspace.repository.js";

/**
 * Distributed collaboration (`wire.md` §8): trust between portals, collaborations, participants,
 * invitations, workspaces and their group links, and the operations that end replication.
 *
 * Topology [decided]: the host is the hub. Each guest exchanges content with the host, in the
 * directions the two access modes allow; a copy is never sent on, so what a guest contributes
 * reaches the host, and the host's own items reach every guest that receives.
 *
 * Trust: the host signs an invitation with its Ed25519 key; the guest checks it, keeps the host's
 * key and answers with a response signed by its own key; the host checks that and keeps the
 * guest's key. Every later call between the two is signed and checked against those keys.
 */

const INVITATION_TYPE = "portico.collaborationInvitation";
const RESPONSE_TYPE = "portico.collaborationInvitationResponse";

interface InvitationDoc {
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

interface ResponseDoc {
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

export class CollaborationService {
  /** Set by the sync engine: the calls to other portals that end replication are made through it. */
  notify: Notify = () => {};

  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    readonly keys: PortalKeys,
    readonly peers: PeerClient,
    /** This portal's URL as peers reach it (public URL and context path). */
    readonly portalUrl: () => string,
  ) {}

  async selfId(): Promise<string> {
    return (await this.portal.get()).id;
  }

  // ---------------------------------------------------------------- host: collaboration and trust

  async create(
    caller: Caller | null,
    input: {
      name: string;
      description: string;
      workspace: NewWorkspace;
      contact: Contact;
    },
  ) {
    requirePrivilege(caller, PRIVILEGE);
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
      await this.insertWorkspace(trx, id, org.id, input.workspace, now);
    });
    return { success: true, collaboration: await this.get(caller, id) };
  }

  async addWorkspace(caller: Caller | null, collaborationId: string, workspace: NewWorkspace) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host adds workspaces.");
    const now = Date.now();
    const id = await this.db.transaction((trx) =>
      this.insertWorkspace(trx, collaborationId, collab.host_portal_id, workspace, now),
    );
    return { success: true, workspace: await this.workspace(caller, collaborationId, id) };
  }

  private async insertWorkspace(
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
    await insertModes(trx, [
      { workspaceId: id, portalId: hostId, mode: input.accessMode ?? "sendAndReceive" },
    ]);
    if (input.portalGroupId)
      await this.writeLink(trx, id, { portalGroupId: input.portalGroupId }, now, "portalGroupId");
    return id;
  }

  async invite(
    caller: Caller | null,
    collaborationId: string,
    input: { guestPortalUrl: string; workspaces: Record<string, AccessMode>; expirationHours: number },
  ) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host invites participants.");
    const guestPortalUrl = normalizePortalUrl(input.guestPortalUrl);
    if (guestPortalUrl === normalizePortalUrl(this.portalUrl())) {
      throw errors.invalidParameter("guestPortalUrl", "is this portal; invite another portal");
    }
    await this.checkWorkspaceModes(
      collaborationId,
      input.workspaces,
      "collaborationWorkspacesParticipantConfigJSON",
    );
    const id = newId();
    const now = Date.now();
    const file = await this.invitationFile(
      collab,
      id,
      guestPortalUrl,
      input.workspaces,
      now,
      now + input.expirationHours * 3600_000,
    );
    await this.db.transaction((trx) =>
      insertInvitation(
        trx,
        {
          id,
          collaborationId,
          guestPortalUrl,
          workspaces: input.workspaces,
          expires: file.invitation.expires,
          status: "pending",
          digest: digestOf(file.invitation),
          file: JSON.stringify(file, null, 2),
          guestPortalId: null,
        },
        now,
      ),
    );
    return { id, text: JSON.stringify(file, null, 2) };
  }

  private async invitationFile(
    collab: CollaborationTable,
    id: string,
    guestPortalUrl: string,
    modes: Record<string, AccessMode>,
    issued: number,
    expires: number,
  ) {
    const { publicKey, privateKey } = await this.keys.get();
    const host = await findHost(this.db.kysely, collab.id);
    const workspaceRows = await findWorkspacesById(this.db.kysely, Object.keys(modes));
    const hostModes = await modesOf(this.db.kysely, Object.keys(modes));
    const invitation: InvitationDoc = {
      id,
      collaborationId: collab.id,
      collaborationName: collab.name,
      collaborationDescription: collab.description,
      hostPortalId: collab.host_portal_id,
      hostPortalUrl: this.portalUrl(),
      hostPortalName: host.portal_name,
      hostPublicKey: publicKey,
      hostContact: participantContact(host),
      guestPortalUrl,
      workspaces: workspaceRows.map((w) => ({
        id: w.id,
        name: w.name,
        description: w.description,
        config: workspaceConfig(w),
        accessMode: modes[w.id] as AccessMode,
        hostAccessMode: hostModes.get(w.id)?.get(collab.host_portal_id) ?? "sendAndReceive",
      })),
      issued,
      expires,
    };
    return { type: INVITATION_TYPE, version: 1, invitation, signature: signDocument(invitation, privateKey) };
  }

  async invitations(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Invitations are kept by the collaboration host.");
    const rows = await listInvitations(this.db.kysely, collaborationId);
    return {
      collaborationInvitations: rows.map((r) => ({
        id: r.id,
        guestPortalUrl: r.guest_portal_url,
        status: r.status === "pending" && r.expires < Date.now() ? "expired" : r.status,
        expiration: r.expires,
        workspaces: invitationModes(r),
        guestPortalId: r.guest_portal_id,
        created: r.created,
        modified: r.modified,
      })),
    };
  }

  async invalidateInvitation(caller: Caller | null, collaborationId: string, invitationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const row = await this.mustFindInvitation(trx, collaborationId, invitationId);
      if (row.status === "accepted")
        throw errors.conflict("The invitation was already accepted; remove the participant instead.");
      await markInvitationInvalidated(trx, invitationId, Date.now());
    });
    return { success: true };
  }

  /** Issues the invitation again with a new expiration; files issued before it no longer count. */
  async refreshInvitation(
    caller: Caller | null,
    collaborationId: string,
    invitationId: string,
    expirationHours: number,
  ) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    const row = await this.mustFindInvitation(this.db.kysely, collaborationId, invitationId);
    if (row.status !== "pending")
      throw errors.conflict(`The invitation is ${row.status}; it cannot be refreshed.`);
    const now = Date.now();
    const modes = invitationModes(row);
    const file = await this.invitationFile(
      collab,
      invitationId,
      row.guest_portal_url,
      modes,
      now,
      now + expirationHours * 3600_000,
    );
    const text = JSON.stringify(file, null, 2);
    await this.db.transaction((trx) =>
      reissueInvitation(
        trx,
        invitationId,
        { expires: file.invitation.expires, digest: digestOf(file.invitation), file: text },
        now,
      ),
    );
    return { id: invitationId, text };
  }

  /** Checks a response file on the host; answers what importing it would establish. */
  async validateResponse(caller: Caller | null, collaborationId: string, text: string, param: string) {
    requirePrivilege(caller, PRIVILEGE);
    const { response, invitation } = await this.checkResponse(this.db.kysely, collaborationId, text, param);
    return {
      success: true,
      valid: true,
      invitationId: invitation.id,
      guestPortalId: response.guestPortalId,
      guestPortalUrl: response.guestPortalUrl,
      guestPortalName: response.guestPortalName,
      guestKeyFingerprint: fingerprint(response.guestPublicKey),
    };
  }

  /** Imports a response file: the guest becomes a participant, and trust is established. */
  async importResponse(caller: Caller | null, collaborationId: string, text: string, param: string) {
    requirePrivilege(caller, PRIVILEGE);
    const now = Date.now();
    const response = await this.db.transaction(async (trx) => {
      const { response, invitation } = await this.checkResponse(trx, collaborationId, text, param);
      await insertParticipants(
        trx,
        [
          {
            collaborationId,
            portalId: response.guestPortalId,
            role: "guest",
            portalUrl: response.guestPortalUrl,
            portalName: response.guestPortalName,
            publicKey: response.guestPublicKey,
            contact: response.guestContact,
            status: "active",
          },
        ],
        now,
      );
      const modes = invitationModes(invitation);
      // Workspaces the host deleted since it issued the invitation are left out.
      const existing = await findWorkspacesById(trx, Object.keys(modes));
      await insertModes(
        trx,
        existing.map(({ id }) => ({
          workspaceId: id,
          portalId: response.guestPortalId,
          mode: modes[id] as AccessMode,
        })),
      );
      // Marked here, in the same transaction: a second import of this file finds it accepted.
      await markInvitationAccepted(trx, invitation.id, response.guestPortalId, now);
      return response;
    });
    return { success: true, collaborationId, participantId: response.guestPortalId };
  }

  private async checkResponse(q: Queryable, collaborationId: string, text: string, param: string) {
    const collab = await this.mustFind(q, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host imports invitation responses.");
    const doc = parseSignedFile(text, param, RESPONSE_TYPE, "response");
    const response = doc.body as unknown as ResponseDoc;
    for (const field of [
      "invitationId",
      "collaborationId",
      "invitationDigest",
      "guestPortalId",
      "guestPortalUrl",
      "guestPublicKey",
    ] as const) {
      if (typeof response[field] !== "string" || response[field] === "") {
        throw fileRefused(param, `the response has no '${field}'`);
      }
    }
    if (!verifyDocument(response, doc.signature, response.guestPublicKey)) {
      throw fileRefused(param, "its signature does not match its contents (the file was altered)");
    }
    if (response.collaborationId !== collaborationId) {
      throw fileRefused(param, "it answers an invitation to another collaboration");
    }
    const invitation = await findInvitation(q, collaborationId, response.invitationId);
    if (!invitation) throw fileRefused(param, "it answers an invitation this portal did not issue");
    if (invitation.status === "accepted")
      throw fileRefused(param, "the invitation was already accepted (a response is imported once)");
    if (invitation.status === "invalidated") throw fileRefused(param, "the invitation was invalidated");
    if (invitation.expires < Date.now())
      throw fileRefused(param, "the invitation has expired; refresh it and send the guest the new file");
    if (invitation.digest !== response.invitationDigest) {
      throw fileRefused(param, "it answers an earlier issue of the invitation, which was refreshed since");
    }
    if (normalizePortalUrl(response.guestPortalUrl) !== invitation.guest_portal_url) {
      throw fileRefused(
        param,
        `it comes from ${response.guestPortalUrl}, but the invitation is for ${invitation.guest_portal_url}`,
      );
    }
    if (await isParticipant(q, collaborationId, response.guestPortalId))
      throw fileRefused(param, "that portal already participates in this collaboration");
    return { response, invitation };
  }

  // ---------------------------------------------------------------- guest: joining

  async validateInvitation(caller: Caller | null, text: string, param: string) {
    requirePrivilege(caller, PRIVILEGE);
    const invitation = await this.checkInvitation(this.db.kysely, text, param);
    return {
      success: true,
      valid: true,
      collaboration: {
        id: invitation.collaborationId,
        name: invitation.collaborationName,
        description: invitation.collaborationDescription,
      },
      hostPortalId: invitation.hostPortalId,
      hostPortalUrl: invitation.hostPortalUrl,
      hostPortalName: invitation.hostPortalName,
      hostKeyFingerprint: fingerprint(invitation.hostPublicKey),
      workspaces: invitation.workspaces.map((w) => ({ id: w.id, name: w.name, accessMode: w.accessMode })),
      expiration: invitation.expires,
    };
  }

  async acceptInvitation(caller: Caller | null, text: string, param: string, contact: Contact) {
    requirePrivilege(caller, PRIVILEGE);
    const org = await this.portal.get();
    const { publicKey } = await this.keys.get();
    const now = Date.now();
    const invitation = await this.db.transaction(async (trx) => {
      const invitation = await this.checkInvitation(trx, text, param);
      const c = invitation;
      await insertCollaboration(
        trx,
        {
          id: c.collaborationId,
          name: c.collaborationName,
          description: c.collaborationDescription,
          role: "guest",
          host_portal_id: c.hostPortalId,
        },
        now,
      );
      await insertParticipants(
        trx,
        [
          {
            collaborationId: c.collaborationId,
            portalId: c.hostPortalId,
            role: "host",
            portalUrl: normalizePortalUrl(c.hostPortalUrl),
            portalName: c.hostPortalName,
            publicKey: c.hostPublicKey,
            contact: c.hostContact,
            status: "active",
          },
          {
            collaborationId: c.collaborationId,
            portalId: org.id,
            role: "guest",
            portalUrl: this.portalUrl(),
            portalName: String(org.settings.name ?? ""),
            publicKey,
            contact,
            status: "pending",
          },
        ],
        now,
      );
      for (const w of c.workspaces) {
        await insertWorkspace(
          trx,
          {
            id: w.id,
            collaborationId: c.collaborationId,
            name: w.name,
            description: w.description,
            config: w.config,
          },
          now,
        );
        await insertModes(trx, [
          { workspaceId: w.id, portalId: org.id, mode: w.accessMode },
          { workspaceId: w.id, portalId: c.hostPortalId, mode: w.hostAccessMode },
        ]);
      }
      await insertInvitation(
        trx,
        {
          id: c.id,
          collaborationId: c.collaborationId,
          guestPortalUrl: this.portalUrl(),
          workspaces: Object.fromEntries(c.workspaces.map((w) => [w.id, w.accessMode])),
          expires: c.expires,
          status: "accepted",
          digest: digestOf(c),
          file: text,
          guestPortalId: org.id,
        },
        now,
      );
      return invitation;
    });
    return {
      success: true,
      collaborationId: invitation.collaborationId,
      invitationResponse: JSON.parse(await this.responseText(invitation.collaborationId)) as unknown,
    };
  }

  /** The response file the guest sends back to the host (signed now; the content is fixed). */
  async exportResponse(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "guest", "Only a guest exports an invitation response.");
    return this.responseText(collaborationId);
  }

  private async responseText(collaborationId: string): Promise<string> {
    const org = await this.portal.get();
    const { publicKey, privateKey } = await this.keys.get();
    // The guest keeps the invitation it accepted; the response answers exactly that issue of it.
    const accepted = await findAcceptedInvitation(this.db.kysely, collaborationId);
    const self = await this.mustFindParticipant(this.db.kysely, collaborationId, org.id);
    const response: ResponseDoc = {
      invitationId: accepted.id,
      collaborationId,
      invitationDigest: accepted.digest,
      guestPortalId: org.id,
      guestPortalUrl: this.portalUrl(),
      guestPortalName: self.portal_name,
      guestPublicKey: publicKey,
      guestContact: participantContact(self),
      issued: Date.now(),
    };
    return JSON.stringify(
      { type: RESPONSE_TYPE, version: 1, response, signature: signDocument(response, privateKey) },
      null,
      2,
    );
  }

  private async checkInvitation(q: Queryable, text: string, param: string): Promise<InvitationDoc> {
    const org = await this.portal.get();
    const doc = parseSignedFile(text, param, INVITATION_TYPE, "invitation");
    const inv = doc.body as unknown as InvitationDoc;
    for (const field of [
      "id",
      "collaborationId",
      "hostPortalId",
      "hostPortalUrl",
      "hostPublicKey",
      "guestPortalUrl",
    ] as const) {
      if (typeof inv[field] !== "string" || inv[field] === "")
        throw fileRefused(param, `the invitation has no '${field}'`);
    }
    if (!Array.isArray(inv.workspaces) || typeof inv.expires !== "number") {
      throw fileRefused(param, "the invitation has no workspaces or no expiration");
    }
    if (!verifyDocument(inv, doc.signature, inv.hostPublicKey)) {
      throw fileRefused(param, "its signature does not match its contents (the file was altered)");
    }
    if (inv.expires < Date.now())
      throw fileRefused(param, "the invitation has expired; ask the host to refresh it");
    if (inv.hostPortalId === org.id) throw fileRefused(param, "it was issued by this portal");
    if (normalizePortalUrl(inv.guestPortalUrl) !== normalizePortalUrl(this.portalUrl())) {
      throw fileRefused(param, `it is for ${inv.guestPortalUrl}, and this portal is ${this.portalUrl()}`);
    }
    if (await findCollaboration(q, inv.collaborationId))
      throw fileRefused(
        param,
        "this portal already participates in that collaboration (an invitation is accepted once)",
      );
    return inv;
  }

  // ---------------------------------------------------------------- both: reading and updating

  async list(caller: Caller | null) {
    requirePrivilege(caller, PRIVILEGE);
    const rows = await listCollaborations(this.db.kysely);
    const out = [];
    for (const row of rows) out.push(await this.collaborationJson(row));
    return { collaborations: out };
  }

  async get(caller: Caller | null, id: string) {
    requirePrivilege(caller, PRIVILEGE);
    return this.collaborationJson(await this.mustFind(this.db.kysely, id));
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
  ) {
    requirePrivilege(caller, PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const collab = await this.mustFind(trx, id);
      this.requireRole(collab, "host", "Only the collaboration host changes its name and description.");
      if (input.name !== undefined && input.name !== collab.name)
        await this.assertUniqueName(trx, input.name);
      await updateCollaboration(trx, id, input, Date.now());
    });
    return { success: true, collaborationId: id };
  }

  async participants(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    await this.mustFind(this.db.kysely, collaborationId);
    const rows = await listParticipants(this.db.kysely, collaborationId);
    const out = [];
    for (const row of rows) out.push(await this.participantJson(row));
    return { participants: out };
  }

  async participant(caller: Caller | null, collaborationId: string, portalId: string) {
    requirePrivilege(caller, PRIVILEGE);
    return this.participantJson(await this.mustFindParticipant(this.db.kysely, collaborationId, portalId));
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
  ) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host changes access modes.");
    await this.mustFindParticipant(this.db.kysely, collaborationId, portalId);
    await this.checkWorkspaceModes(collaborationId, modes, "collaborationWorkspacesParticipantConfigJSON");
    await this.db.transaction(async (trx) => {
      for (const [workspaceId, mode] of Object.entries(modes))
        await setMode(trx, { workspaceId, portalId, mode });
    });
    return { success: true };
  }

  async updateDeletePolicy(
    caller: Caller | null,
    collaborationId: string,
    portalId: string,
    policy: { deleteContributedItems?: boolean | undefined; deleteReceivedItems?: boolean | undefined },
  ) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host changes item delete policies.");
    await this.db.transaction(async (trx) => {
      await this.mustFindParticipant(trx, collaborationId, portalId);
      await setDeletePolicy(
        trx,
        collaborationId,
        portalId,
        { deleteContributed: policy.deleteContributedItems, deleteReceived: policy.deleteReceivedItems },
        Date.now(),
      );
    });
    return { success: true };
  }

  // ---------------------------------------------------------------- workspaces

  async workspaces(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    await this.mustFind(this.db.kysely, collaborationId);
    const rows = await listWorkspaces(this.db.kysely, collaborationId);
    const out = [];
    for (const row of rows) out.push(await this.workspaceJson(row));
    return { workspaces: out };
  }

  async workspace(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, PRIVILEGE);
    return this.workspaceJson(await this.mustFindWorkspace(this.db.kysely, collaborationId, workspaceId));
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
  ) {
    requirePrivilege(caller, PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const collab = await this.mustFind(trx, collaborationId);
      this.requireRole(collab, "host", "Only the collaboration host changes a workspace.");
      const row = await this.mustFindWorkspace(trx, collaborationId, workspaceId);
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
    return { success: true, collaborationId, collaborationWorkspaceId: workspaceId };
  }

  async updateGroupLink(
    caller: Caller | null,
    collaborationId: string,
    workspaceId: string,
    input: GroupLinkUpdate,
  ) {
    requirePrivilege(caller, PRIVILEGE);
    await this.db.transaction(async (trx) => {
      await this.mustFindWorkspace(trx, collaborationId, workspaceId);
      await this.writeLink(trx, workspaceId, input, Date.now(), "portalGroupId");
    });
    return { success: true, collaborationId, collaborationWorkspaceId: workspaceId };
  }

  private async writeLink(
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
    await saveLink(
      trx,
      {
        workspaceId,
        groupId,
        realtime: input.enableRealtimeSync ?? current?.realtime === 1,
        copyFeatureData: input.copyFeatureServiceData ?? current?.copy_feature_data === 1,
        copyByRefIfCopyFail: input.copyByRefIfCopyFail ?? current?.copy_by_ref_if_copy_fail === 1,
      },
      current !== undefined,
      now,
    );
  }

  /** Ends replication through this portal's link (`interface.md` §3); the copies follow this portal's delete policy. */
  async removeGroupLink(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      await this.mustFindWorkspace(trx, collaborationId, workspaceId);
      if (!(await findLink(trx, workspaceId)))
        throw errors.conflict("The workspace has no group linked on this portal.");
      const self = await this.mustFindParticipant(trx, collaborationId, selfId);
      await releaseCopies(trx, [workspaceId], () => self.delete_received === 1);
      await deleteSchedule(trx, workspaceId);
      await deleteLink(trx, workspaceId);
    });
    return { collaborationId, collaborationWorkspaceId: workspaceId, success: true };
  }

  /** Host: deletes a workspace; replication through it stops at once, on every participant. */
  async deleteWorkspace(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host deletes workspaces.");
    const guests = await this.db.transaction(async (trx) => {
      await this.mustFindWorkspace(trx, collaborationId, workspaceId);
      await this.dropWorkspaces(trx, collaborationId, [workspaceId]);
      return this.guestsOf(trx, collaborationId);
    });
    for (const g of guests) this.notify(g.portal_url, collaborationId, g.portal_id, "ended", { workspaceId });
    return { success: true };
  }

  /** Host: deletes the whole collaboration, for every participant. */
  async delete(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(
      collab,
      "host",
      "Only the collaboration host deletes the collaboration; a guest leaves with removeParticipation.",
    );
    const guests = await this.db.transaction(async (trx) => {
      const guests = await this.guestsOf(trx, collaborationId);
      await this.dropCollaboration(trx, collaborationId);
      return guests;
    });
    for (const g of guests) this.notify(g.portal_url, collaborationId, g.portal_id, "ended", {});
    return { success: true };
  }

  /** Host: removes a guest. Its calls are refused from now on; copies follow the delete policies. */
  async removeParticipant(caller: Caller | null, collaborationId: string, portalId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "host", "Only the collaboration host removes participants.");
    const guest = await this.db.transaction(async (trx) => {
      const guest = await this.mustFindParticipant(trx, collaborationId, portalId);
      if (guest.role === "host")
        throw errors.invalidParameter("participantId", "is the host; delete the collaboration instead");
      await this.dropGuest(trx, collaborationId, guest);
      return guest;
    });
    this.notify(guest.portal_url, collaborationId, guest.portal_id, "ended", {});
    return { success: true };
  }

  /** Guest: leaves the collaboration; replication stops at once. */
  async removeParticipation(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const collab = await this.mustFind(this.db.kysely, collaborationId);
    this.requireRole(collab, "guest", "The host cannot leave its own collaboration; delete it instead.");
    const host = await this.db.transaction(async (trx) => {
      const host = await findHost(trx, collaborationId);
      await this.dropCollaboration(trx, collaborationId);
      return host;
    });
    this.notify(host.portal_url, collaborationId, host.portal_id, "left", {});
    return { success: true };
  }

  // ---------------------------------------------------------------- what ending replication does

  /** Releases copies per the delete policies, then removes the workspaces. */
  async dropWorkspaces(trx: Queryable, collaborationId: string, workspaceIds: readonly string[]) {
    const policies = await this.policies(trx, collaborationId);
    await releaseCopies(
      trx,
      workspaceIds,
      (origin) => policies.deleteReceived || (policies.contributed.get(origin) ?? false),
    );
    await deleteWorkspaces(trx, workspaceIds);
  }

  async dropCollaboration(trx: Queryable, collaborationId: string) {
    await this.dropWorkspaces(trx, collaborationId, await workspaceIdsOf(trx, collaborationId));
    await deleteCollaboration(trx, collaborationId);
  }

  /** Host side of a guest leaving or being removed: the copies of its items follow its policy. */
  async dropGuest(trx: Queryable, collaborationId: string, guest: ParticipantTable) {
    const self = await this.mustFindParticipant(trx, collaborationId, await this.selfId());
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

  private async policies(q: Queryable, collaborationId: string) {
    const selfId = await this.selfId();
    const rows = await listParticipants(q, collaborationId);
    return {
      deleteReceived: rows.find((r) => r.portal_id === selfId)?.delete_received === 1,
      contributed: new Map(rows.map((r) => [r.portal_id, r.delete_contributed === 1])),
    };
  }

  private guestsOf(q: Queryable, collaborationId: string) {
    return listGuests(q, collaborationId);
  }

  // ---------------------------------------------------------------- lookups

  async mustFind(q: Queryable, id: string): Promise<CollaborationTable> {
    const row = await findCollaboration(q, id);
    if (!row) throw errors.collaborationNotFound(id);
    return row;
  }

  async mustFindWorkspace(
    q: Queryable,
    collaborationId: string,
    workspaceId: string,
  ): Promise<WorkspaceTable> {
    const row = await findWorkspace(q, collaborationId, workspaceId);
    if (!row) throw errors.workspaceNotFound(workspaceId);
    return row;
  }

  async mustFindParticipant(
    q: Queryable,
    collaborationId: string,
    portalId: string,
  ): Promise<ParticipantTable> {
    await this.mustFind(q, collaborationId);
    const row = await findParticipant(q, collaborationId, portalId);
    if (!row) throw errors.notFound(`Participant '${portalId}'`);
    return row;
  }

  private async mustFindInvitation(q: Queryable, collaborationId: string, invitationId: string) {
    const row = await findInvitation(q, collaborationId, invitationId);
    if (!row) throw errors.notFound(`Invitation '${invitationId}'`);
    return row;
  }

  modesOf(q: Queryable, workspaceIds: readonly string[]) {
    return modesOf(q, workspaceIds);
  }

  private requireRole(collab: CollaborationTable, role: "host" | "guest", message: string) {
    if (collab.role !== role)
      throw new PorticoError(400, message, "COLLAB_0002", [
        `This portal is the collaboration's ${collab.role}.`,
      ]);
  }

  private async assertUniqueName(q: Queryable, name: string) {
    if (await collaborationNameTaken(q, name))
      throw errors.invalidParameter(
        "name",
        `'${name}' is already the name of a collaboration on this portal`,
      );
  }

  private async checkWorkspaceModes(
    collaborationId: string,
    modes: Record<string, AccessMode>,
    param: string,
  ) {
    const ids = Object.keys(modes);
    if (ids.length === 0) throw errors.invalidParameter(param, "must name at least one workspace");
    const found = new Set(await workspaceIdsOf(this.db.kysely, collaborationId, ids));
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
}

/** A signed file: `{type, version, <name>: {...}, signature}`. */
function parseSignedFile(text: string, param: string, type: string, name: "invitation" | "response") {
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
    throw fileRefused(param, `the file has no signed ${name}`);
  }
  return { body: body as Record<string, unknown>, signature: doc.signature };
}

function fileRefused(param: string, reason: string) {
  return new PorticoError(400, `The file in '${param}' was refused: ${reason}.`, "COLLAB_0001", [
    `'${param}': ${reason}.`,
  ]);
}
