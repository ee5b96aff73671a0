import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db, Queryable } from "../db/database.js";
import type { AccessMode, CollaborationTable } from "../db/schema.js";
import { errors } from "../errors.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import {
  findAcceptedInvitation,
  findCollaboration,
  findHost,
  findInvitation,
  insertCollaboration,
  insertInvitation,
  insertParticipants,
  invitationModes,
  isParticipant,
  listInvitations,
  markInvitationAccepted,
  markInvitationInvalidated,
  participantContact,
  reissueInvitation,
} from "./collaboration.repository.js";
import {
  checkWorkspaceModes,
  mustFindCollaboration,
  mustFindInvitation,
  mustFindParticipant,
  requireRole,
} from "./collaboration-checks.js";
import { COLLABORATION_PRIVILEGE, type Contact } from "./collaboration-types.js";
import {
  INVITATION_TYPE,
  type InvitationDoc,
  parseSignedFile,
  RESPONSE_TYPE,
  type ResponseDoc,
} from "./invitation-files.js";
import { normalizePortalUrl, type PortalKeys } from "./peer.js";
import { digestOf, fingerprint, signDocument, verifyDocument } from "./signing.js";
import {
  findWorkspacesById,
  insertModes,
  insertWorkspace,
  modesOf,
  workspaceConfig,
} from "./workspace.repository.js";

/**
 * Joining a collaboration (`wire.md` §8): the host's invitations, the guest's acceptance and
 * response, and the host's import of that response.
 *
 * Trust: the host signs an invitation with its Ed25519 key; the guest checks it, keeps the host's
 * key and answers with a response signed by its own key; the host checks that and keeps the
 * guest's key. Every later call between the two is signed and checked against those keys.
 */
export class InvitationService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly keys: PortalKeys,
    /** This portal's URL as peers reach it (public URL and context path). */
    private readonly portalUrl: () => string,
  ) {}

  async invite(
    caller: Caller | null,
    collaborationId: string,
    input: { guestPortalUrl: string; workspaces: Record<string, AccessMode>; expirationHours: number },
  ) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Only the collaboration host invites participants.");
    const guestPortalUrl = normalizePortalUrl(input.guestPortalUrl);
    if (guestPortalUrl === normalizePortalUrl(this.portalUrl())) {
      throw errors.invalidParameter("guestPortalUrl", "is this portal; invite another portal");
    }
    await checkWorkspaceModes(
      this.db.kysely,
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
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "host", "Invitations are kept by the collaboration host.");
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

  async invalidateInvitation(
    caller: Caller | null,
    collaborationId: string,
    invitationId: string,
  ): Promise<void> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    await this.db.transaction(async (trx) => {
      const row = await mustFindInvitation(trx, collaborationId, invitationId);
      if (row.status === "accepted")
        throw errors.conflict("The invitation was already accepted; remove the participant instead.");
      await markInvitationInvalidated(trx, invitationId, Date.now());
    });
  }

  /** Issues the invitation again with a new expiration; files issued before it no longer count. */
  async refreshInvitation(
    caller: Caller | null,
    collaborationId: string,
    invitationId: string,
    expirationHours: number,
  ) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    const row = await mustFindInvitation(this.db.kysely, collaborationId, invitationId);
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
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const { response, invitation } = await this.checkResponse(this.db.kysely, collaborationId, text, param);
    return {
      invitationId: invitation.id,
      guestPortalId: response.guestPortalId,
      guestPortalUrl: response.guestPortalUrl,
      guestPortalName: response.guestPortalName,
      guestKeyFingerprint: fingerprint(response.guestPublicKey),
    };
  }

  /**
   * Imports a response file: the guest becomes a participant, and trust is established. Answers the
   * new participant's id (its portal's).
   */
  async importResponse(
    caller: Caller | null,
    collaborationId: string,
    text: string,
    param: string,
  ): Promise<string> {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
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
    return response.guestPortalId;
  }

  private async checkResponse(q: Queryable, collaborationId: string, text: string, param: string) {
    const collab = await mustFindCollaboration(q, collaborationId);
    requireRole(collab, "host", "Only the collaboration host imports invitation responses.");
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
        throw errors.collaborationFileRefused(param, `the response has no '${field}'`);
      }
    }
    if (!verifyDocument(response, doc.signature, response.guestPublicKey)) {
      throw errors.collaborationFileRefused(
        param,
        "its signature does not match its contents (the file was altered)",
      );
    }
    if (response.collaborationId !== collaborationId) {
      throw errors.collaborationFileRefused(param, "it answers an invitation to another collaboration");
    }
    const invitation = await findInvitation(q, collaborationId, response.invitationId);
    if (!invitation)
      throw errors.collaborationFileRefused(param, "it answers an invitation this portal did not issue");
    if (invitation.status === "accepted")
      throw errors.collaborationFileRefused(
        param,
        "the invitation was already accepted (a response is imported once)",
      );
    if (invitation.status === "invalidated")
      throw errors.collaborationFileRefused(param, "the invitation was invalidated");
    if (invitation.expires < Date.now())
      throw errors.collaborationFileRefused(
        param,
        "the invitation has expired; refresh it and send the guest the new file",
      );
    if (invitation.digest !== response.invitationDigest) {
      throw errors.collaborationFileRefused(
        param,
        "it answers an earlier issue of the invitation, which was refreshed since",
      );
    }
    if (normalizePortalUrl(response.guestPortalUrl) !== invitation.guest_portal_url) {
      throw errors.collaborationFileRefused(
        param,
        `it comes from ${response.guestPortalUrl}, but the invitation is for ${invitation.guest_portal_url}`,
      );
    }
    if (await isParticipant(q, collaborationId, response.guestPortalId))
      throw errors.collaborationFileRefused(param, "that portal already participates in this collaboration");
    return { response, invitation };
  }

  /** Checks an invitation file on the guest; answers what accepting it would join. */
  async validateInvitation(caller: Caller | null, text: string, param: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const invitation = await this.checkInvitation(this.db.kysely, text, param);
    return {
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

  /** Joins the collaboration an invitation file names; answers its id and the response file to send back. */
  async acceptInvitation(caller: Caller | null, text: string, param: string, contact: Contact) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
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
      collaborationId: invitation.collaborationId,
      invitationResponse: JSON.parse(await this.responseText(invitation.collaborationId)) as unknown,
    };
  }

  /** The response file the guest sends back to the host (signed now; the content is fixed). */
  async exportResponse(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const collab = await mustFindCollaboration(this.db.kysely, collaborationId);
    requireRole(collab, "guest", "Only a guest exports an invitation response.");
    return this.responseText(collaborationId);
  }

  private async responseText(collaborationId: string): Promise<string> {
    const org = await this.portal.get();
    const { publicKey, privateKey } = await this.keys.get();
    // The guest keeps the invitation it accepted; the response answers exactly that issue of it.
    const accepted = await findAcceptedInvitation(this.db.kysely, collaborationId);
    const self = await mustFindParticipant(this.db.kysely, collaborationId, org.id);
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
        throw errors.collaborationFileRefused(param, `the invitation has no '${field}'`);
    }
    if (!Array.isArray(inv.workspaces) || typeof inv.expires !== "number") {
      throw errors.collaborationFileRefused(param, "the invitation has no workspaces or no expiration");
    }
    if (!verifyDocument(inv, doc.signature, inv.hostPublicKey)) {
      throw errors.collaborationFileRefused(
        param,
        "its signature does not match its contents (the file was altered)",
      );
    }
    if (inv.expires < Date.now())
      throw errors.collaborationFileRefused(param, "the invitation has expired; ask the host to refresh it");
    if (inv.hostPortalId === org.id)
      throw errors.collaborationFileRefused(param, "it was issued by this portal");
    if (normalizePortalUrl(inv.guestPortalUrl) !== normalizePortalUrl(this.portalUrl())) {
      throw errors.collaborationFileRefused(
        param,
        `it is for ${inv.guestPortalUrl}, and this portal is ${this.portalUrl()}`,
      );
    }
    if (await findCollaboration(q, inv.collaborationId))
      throw errors.collaborationFileRefused(
        param,
        "this portal already participates in that collaboration (an invitation is accepted once)",
      );
    return inv;
  }
}
