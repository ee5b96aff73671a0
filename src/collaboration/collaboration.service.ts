import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db, Queryable } from "../db/database.js";
import type { AccessMode, CollaborationTable, ParticipantTable, WorkspaceTable } from "../db/schema.js";
import { errors, PorticoError } from "../errors.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import { normalizePortalUrl, type PeerClient, type PortalKeys } from "./peer.js";
import { releaseCopies } from "./replication.js";
import { digestOf, fingerprint, signDocument, verifyDocument } from "./signing.js";

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

const PRIVILEGE = "portal:admin:manageCollaborations" as const;
export const ACCESS_MODES: readonly AccessMode[] = ["send", "receive", "sendAndReceive"];
const INVITATION_TYPE = "portico.collaborationInvitation";
const RESPONSE_TYPE = "portico.collaborationInvitationResponse";

export const sends = (mode: AccessMode | undefined) => mode === "send" || mode === "sendAndReceive";
export const receives = (mode: AccessMode | undefined) => mode === "receive" || mode === "sendAndReceive";

export interface Contact {
  firstName: string;
  lastName: string;
  email: string;
}

export interface WorkspaceConfig {
  maxItemSizeInMB: number;
  maxReplicationPackageSizeInMB: number;
  bidirectionalSyncCapable: boolean;
}

const DEFAULT_WORKSPACE_CONFIG: WorkspaceConfig = {
  maxItemSizeInMB: 1024,
  maxReplicationPackageSizeInMB: 5120,
  bidirectionalSyncCapable: true,
};

export interface NewWorkspace {
  name: string;
  description: string;
  portalGroupId?: string | undefined;
  accessMode?: AccessMode | undefined;
  config?: Partial<WorkspaceConfig> | undefined;
}

export interface GroupLinkUpdate {
  portalGroupId?: string | undefined;
  enableRealtimeSync?: boolean | undefined;
  copyFeatureServiceData?: boolean | undefined;
  copyByRefIfCopyFail?: boolean | undefined;
}

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

/** The state of a collaboration the host gives a guest (peer call `state`). */
export interface HostState {
  collaboration: { id: string; name: string; description: string };
  workspaces: {
    id: string;
    name: string;
    description: string;
    config: WorkspaceConfig;
    modes: Record<string, AccessMode>;
  }[];
  participants: {
    portalId: string;
    role: "host" | "guest";
    portalUrl: string;
    portalName: string;
    deleteContributed: boolean;
    deleteReceived: boolean;
  }[];
}

/** Tells other portals about a change that ends replication; failures are only logged. */
export type Notify = (
  portalUrl: string,
  collaborationId: string,
  to: string,
  op: string,
  body: Record<string, unknown>,
) => void;

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
      await trx
        .insertInto("collaborations")
        .values({
          id,
          name: input.name,
          description: input.description,
          role: "host",
          host_portal_id: org.id,
          created: now,
          modified: now,
        })
        .execute();
      await trx
        .insertInto("collaboration_participants")
        .values({
          collaboration_id: id,
          portal_id: org.id,
          role: "host",
          portal_url: this.portalUrl(),
          portal_name: String(org.settings.name ?? ""),
          public_key: publicKey,
          contact: JSON.stringify(input.contact),
          delete_contributed: 0,
          delete_received: 0,
          status: "active",
          created: now,
          modified: now,
        })
        .execute();
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
    const same = await trx
      .selectFrom("workspaces")
      .select("id")
      .where("collaboration_id", "=", collaborationId)
      .where("name", "=", input.name)
      .executeTakeFirst();
    if (same) {
      throw errors.invalidParameter(
        "collaborationWorkspaceName",
        `'${input.name}' is already a workspace of this collaboration`,
      );
    }
    await trx
      .insertInto("workspaces")
      .values({
        id,
        collaboration_id: collaborationId,
        name: input.name,
        description: input.description,
        config: JSON.stringify({ ...DEFAULT_WORKSPACE_CONFIG, ...input.config }),
        last_sync_success: -1,
        created: now,
        modified: now,
      })
      .execute();
    await trx
      .insertInto("workspace_modes")
      .values({ workspace_id: id, portal_id: hostId, access_mode: input.accessMode ?? "sendAndReceive" })
      .execute();
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
      trx
        .insertInto("collaboration_invitations")
        .values({
          id,
          collaboration_id: collaborationId,
          guest_portal_url: guestPortalUrl,
          workspaces: JSON.stringify(input.workspaces),
          expires: file.invitation.expires,
          status: "pending",
          digest: digestOf(file.invitation),
          file: JSON.stringify(file, null, 2),
          guest_portal_id: null,
          created: now,
          modified: now,
        })
        .execute(),
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
    const host = await this.db.kysely
      .selectFrom("collaboration_participants")
      .selectAll()
      .where("collaboration_id", "=", collab.id)
      .where("role", "=", "host")
      .executeTakeFirstOrThrow();
    const workspaceRows = await this.db.kysely
      .selectFrom("workspaces")
      .selectAll()
      .where("id", "in", Object.keys(modes))
      .execute();
    const hostModes = await this.modesOf(this.db.kysely, Object.keys(modes));
    const invitation: InvitationDoc = {
      id,
      collaborationId: collab.id,
      collaborationName: collab.name,
      collaborationDescription: collab.description,
      hostPortalId: collab.host_portal_id,
      hostPortalUrl: this.portalUrl(),
      hostPortalName: host.portal_name,
      hostPublicKey: publicKey,
      hostContact: JSON.parse(host.contact) as Contact,
      guestPortalUrl,
      workspaces: workspaceRows.map((w) => ({
        id: w.id,
        name: w.name,
        description: w.description,
        config: JSON.parse(w.config) as WorkspaceConfig,
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
    const rows = await this.db.kysely
      .selectFrom("collaboration_invitations")
      .selectAll()
      .where("collaboration_id", "=", collaborationId)
      .orderBy("created")
      .execute();
    return {
      collaborationInvitations: rows.map((r) => ({
        id: r.id,
        guestPortalUrl: r.guest_portal_url,
        status: r.status === "pending" && r.expires < Date.now() ? "expired" : r.status,
        expiration: r.expires,
        workspaces: JSON.parse(r.workspaces) as Record<string, AccessMode>,
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
      await trx
        .updateTable("collaboration_invitations")
        .set({ status: "invalidated", modified: Date.now() })
        .where("id", "=", invitationId)
        .execute();
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
    const modes = JSON.parse(row.workspaces) as Record<string, AccessMode>;
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
      trx
        .updateTable("collaboration_invitations")
        .set({
          expires: file.invitation.expires,
          digest: digestOf(file.invitation),
          file: text,
          modified: now,
        })
        .where("id", "=", invitationId)
        .where("status", "=", "pending")
        .execute(),
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
      await trx
        .insertInto("collaboration_participants")
        .values({
          collaboration_id: collaborationId,
          portal_id: response.guestPortalId,
          role: "guest",
          portal_url: response.guestPortalUrl,
          portal_name: response.guestPortalName,
          public_key: response.guestPublicKey,
          contact: JSON.stringify(response.guestContact),
          delete_contributed: 0,
          delete_received: 0,
          status: "active",
          created: now,
          modified: now,
        })
        .execute();
      const modes = JSON.parse(invitation.workspaces) as Record<string, AccessMode>;
      const existing = await trx
        .selectFrom("workspaces")
        .select("id")
        .where("id", "in", Object.keys(modes))
        .execute();
      for (const { id } of existing) {
        await trx
          .insertInto("workspace_modes")
          .values({
            workspace_id: id,
            portal_id: response.guestPortalId,
            access_mode: modes[id] as AccessMode,
          })
          .execute();
      }
      // Marked here, in the same transaction: a second import of this file finds it accepted.
      await trx
        .updateTable("collaboration_invitations")
        .set({ status: "accepted", guest_portal_id: response.guestPortalId, modified: now })
        .where("id", "=", invitation.id)
        .execute();
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
    const invitation = await q
      .selectFrom("collaboration_invitations")
      .selectAll()
      .where("id", "=", response.invitationId)
      .where("collaboration_id", "=", collaborationId)
      .executeTakeFirst();
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
    const already = await q
      .selectFrom("collaboration_participants")
      .select("portal_id")
      .where("collaboration_id", "=", collaborationId)
      .where("portal_id", "=", response.guestPortalId)
      .executeTakeFirst();
    if (already) throw fileRefused(param, "that portal already participates in this collaboration");
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
      await trx
        .insertInto("collaborations")
        .values({
          id: c.collaborationId,
          name: c.collaborationName,
          description: c.collaborationDescription,
          role: "guest",
          host_portal_id: c.hostPortalId,
          created: now,
          modified: now,
        })
        .execute();
      const participant = (
        portalId: string,
        role: "host" | "guest",
        url: string,
        name: string,
        key: string,
        who: Contact,
        status: "active" | "pending",
      ) => ({
        collaboration_id: c.collaborationId,
        portal_id: portalId,
        role,
        portal_url: url,
        portal_name: name,
        public_key: key,
        contact: JSON.stringify(who),
        delete_contributed: 0,
        delete_received: 0,
        status,
        created: now,
        modified: now,
      });
      await trx
        .insertInto("collaboration_participants")
        .values([
          participant(
            c.hostPortalId,
            "host",
            normalizePortalUrl(c.hostPortalUrl),
            c.hostPortalName,
            c.hostPublicKey,
            c.hostContact,
            "active",
          ),
          participant(
            org.id,
            "guest",
            this.portalUrl(),
            String(org.settings.name ?? ""),
            publicKey,
            contact,
            "pending",
          ),
        ])
        .execute();
      for (const w of c.workspaces) {
        await trx
          .insertInto("workspaces")
          .values({
            id: w.id,
            collaboration_id: c.collaborationId,
            name: w.name,
            description: w.description,
            config: JSON.stringify(w.config),
            last_sync_success: -1,
            created: now,
            modified: now,
          })
          .execute();
        await trx
          .insertInto("workspace_modes")
          .values([
            { workspace_id: w.id, portal_id: org.id, access_mode: w.accessMode },
            { workspace_id: w.id, portal_id: c.hostPortalId, access_mode: w.hostAccessMode },
          ])
          .execute();
      }
      await trx
        .insertInto("collaboration_invitations")
        .values({
          id: c.id,
          collaboration_id: c.collaborationId,
          guest_portal_url: this.portalUrl(),
          workspaces: JSON.stringify(Object.fromEntries(c.workspaces.map((w) => [w.id, w.accessMode]))),
          expires: c.expires,
          status: "accepted",
          digest: digestOf(c),
          file: text,
          guest_portal_id: org.id,
          created: now,
          modified: now,
        })
        .execute();
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
    const accepted = await this.db.kysely
      .selectFrom("collaboration_invitations")
      .select(["id", "digest"])
      .where("collaboration_id", "=", collaborationId)
      .executeTakeFirstOrThrow();
    const self = await this.mustFindParticipant(this.db.kysely, collaborationId, org.id);
    const response: ResponseDoc = {
      invitationId: accepted.id,
      collaborationId,
      invitationDigest: accepted.digest,
      guestPortalId: org.id,
      guestPortalUrl: this.portalUrl(),
      guestPortalName: self.portal_name,
      guestPublicKey: publicKey,
      guestContact: JSON.parse(self.contact) as Contact,
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
    const known = await q
      .selectFrom("collaborations")
      .select("id")
      .where("id", "=", inv.collaborationId)
      .executeTakeFirst();
    if (known)
      throw fileRefused(
        param,
        "this portal already participates in that collaboration (an invitation is accepted once)",
      );
    return inv;
  }

  // ---------------------------------------------------------------- both: reading and updating

  async list(caller: Caller | null) {
    requirePrivilege(caller, PRIVILEGE);
    const rows = await this.db.kysely.selectFrom("collaborations").selectAll().orderBy("created").execute();
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
    const workspaces = await this.db.kysely
      .selectFrom("workspaces")
      .select("id")
      .where("collaboration_id", "=", row.id)
      .execute();
    const participants = await this.db.kysely
      .selectFrom("collaboration_participants")
      .select(["portal_id", "status"])
      .where("collaboration_id", "=", row.id)
      .execute();
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      collaborationHostPortalId: row.host_portal_id,
      isHost: row.role === "host",
      portalId: selfId,
      status: participants.find((p) => p.portal_id === selfId)?.status ?? "active",
      workspaceIds: workspaces.map((w) => w.id),
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
      await trx
        .updateTable("collaborations")
        .set({
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.description !== undefined ? { description: input.description } : {}),
          modified: Date.now(),
        })
        .where("id", "=", id)
        .execute();
    });
    return { success: true, collaborationId: id };
  }

  async participants(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    await this.mustFind(this.db.kysely, collaborationId);
    const rows = await this.db.kysely
      .selectFrom("collaboration_participants")
      .selectAll()
      .where("collaboration_id", "=", collaborationId)
      .orderBy("created")
      .execute();
    const out = [];
    for (const row of rows) out.push(await this.participantJson(row));
    return { participants: out };
  }

  async participant(caller: Caller | null, collaborationId: string, portalId: string) {
    requirePrivilege(caller, PRIVILEGE);
    return this.participantJson(await this.mustFindParticipant(this.db.kysely, collaborationId, portalId));
  }

  private async participantJson(row: ParticipantTable) {
    const modes = await this.db.kysely
      .selectFrom("workspace_modes as m")
      .innerJoin("workspaces as w", "w.id", "m.workspace_id")
      .select(["m.workspace_id", "m.access_mode"])
      .where("w.collaboration_id", "=", row.collaboration_id)
      .where("m.portal_id", "=", row.portal_id)
      .execute();
    const contact = JSON.parse(row.contact) as Contact;
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
      workspaceAccessModes: Object.fromEntries(modes.map((m) => [m.workspace_id, m.access_mode])),
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
      for (const [workspaceId, mode] of Object.entries(modes)) {
        await trx
          .deleteFrom("workspace_modes")
          .where("workspace_id", "=", workspaceId)
          .where("portal_id", "=", portalId)
          .execute();
        await trx
          .insertInto("workspace_modes")
          .values({ workspace_id: workspaceId, portal_id: portalId, access_mode: mode })
          .execute();
      }
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
      await trx
        .updateTable("collaboration_participants")
        .set({
          ...(policy.deleteContributedItems !== undefined
            ? { delete_contributed: policy.deleteContributedItems ? 1 : 0 }
            : {}),
          ...(policy.deleteReceivedItems !== undefined
            ? { delete_received: policy.deleteReceivedItems ? 1 : 0 }
            : {}),
          modified: Date.now(),
        })
        .where("collaboration_id", "=", collaborationId)
        .where("portal_id", "=", portalId)
        .execute();
    });
    return { success: true };
  }

  // ---------------------------------------------------------------- workspaces

  async workspaces(caller: Caller | null, collaborationId: string) {
    requirePrivilege(caller, PRIVILEGE);
    await this.mustFind(this.db.kysely, collaborationId);
    const rows = await this.db.kysely
      .selectFrom("workspaces")
      .selectAll()
      .where("collaboration_id", "=", collaborationId)
      .orderBy("created")
      .execute();
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
    const modes = await this.db.kysely
      .selectFrom("workspace_modes as m")
      .innerJoin("collaboration_participants as p", (j) =>
        j.onRef("p.portal_id", "=", "m.portal_id").on("p.collaboration_id", "=", row.collaboration_id),
      )
      .select(["m.portal_id", "m.access_mode", "p.portal_name", "p.role"])
      .where("m.workspace_id", "=", row.id)
      .execute();
    const link = await this.db.kysely
      .selectFrom("workspace_links")
      .selectAll()
      .where("workspace_id", "=", row.id)
      .executeTakeFirst();
    return {
      id: row.id,
      name: row.name,
      description: row.description,
      collaborationId: row.collaboration_id,
      config: JSON.parse(row.config) as WorkspaceConfig,
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
      await trx
        .updateTable("workspaces")
        .set({
          ...(input.name !== undefined ? { name: input.name } : {}),
          ...(input.description !== undefined ? { description: input.description } : {}),
          ...(input.config !== undefined
            ? { config: JSON.stringify({ ...(JSON.parse(row.config) as WorkspaceConfig), ...input.config }) }
            : {}),
          modified: Date.now(),
        })
        .where("id", "=", workspaceId)
        .execute();
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
    const current = await trx
      .selectFrom("workspace_links")
      .selectAll()
      .where("workspace_id", "=", workspaceId)
      .executeTakeFirst();
    const groupId = input.portalGroupId ?? current?.group_id;
    if (!groupId) throw errors.missingParameter(param);
    const group = await trx.selectFrom("groups").select("id").where("id", "=", groupId).executeTakeFirst();
    if (!group) throw errors.invalidParameter(param, `'${groupId}' is not a group of this portal`);
    const elsewhere = await trx
      .selectFrom("workspace_links")
      .select("workspace_id")
      .where("group_id", "=", groupId)
      .where("workspace_id", "!=", workspaceId)
      .executeTakeFirst();
    if (elsewhere)
      throw errors.invalidParameter(param, `group '${groupId}' is already linked to another workspace`);
    const row = {
      workspace_id: workspaceId,
      group_id: groupId,
      realtime: (input.enableRealtimeSync ?? current?.realtime === 1) ? 1 : 0,
      copy_feature_data: (input.copyFeatureServiceData ?? current?.copy_feature_data === 1) ? 1 : 0,
      copy_by_ref_if_copy_fail:
        (input.copyByRefIfCopyFail ?? current?.copy_by_ref_if_copy_fail === 1) ? 1 : 0,
      modified: now,
    };
    if (current && current.group_id !== groupId) {
      // Copies received into the old group stay there as this portal's items; replication starts
      // over with the new group.
      await releaseCopies(trx, [workspaceId], () => false);
    }
    if (current)
      await trx.updateTable("workspace_links").set(row).where("workspace_id", "=", workspaceId).execute();
    else await trx.insertInto("workspace_links").values(row).execute();
  }

  /** Ends replication through this portal's link (`interface.md` §3); the copies follow this portal's delete policy. */
  async removeGroupLink(caller: Caller | null, collaborationId: string, workspaceId: string) {
    requirePrivilege(caller, PRIVILEGE);
    const selfId = await this.selfId();
    await this.db.transaction(async (trx) => {
      await this.mustFindWorkspace(trx, collaborationId, workspaceId);
      const link = await trx
        .selectFrom("workspace_links")
        .select("group_id")
        .where("workspace_id", "=", workspaceId)
        .executeTakeFirst();
      if (!link) throw errors.conflict("The workspace has no group linked on this portal.");
      const self = await this.mustFindParticipant(trx, collaborationId, selfId);
      await releaseCopies(trx, [workspaceId], () => self.delete_received === 1);
      await trx.deleteFrom("sync_schedules").where("workspace_id", "=", workspaceId).execute();
      await trx.deleteFrom("workspace_links").where("workspace_id", "=", workspaceId).execute();
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
      const host = await trx
        .selectFrom("collaboration_participants")
        .selectAll()
        .where("collaboration_id", "=", collaborationId)
        .where("role", "=", "host")
        .executeTakeFirstOrThrow();
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
    if (workspaceIds.length > 0)
      await trx
        .deleteFrom("workspaces")
        .where("id", "in", [...workspaceIds])
        .execute();
  }

  async dropCollaboration(trx: Queryable, collaborationId: string) {
    const workspaces = await trx
      .selectFrom("workspaces")
      .select("id")
      .where("collaboration_id", "=", collaborationId)
      .execute();
    await this.dropWorkspaces(
      trx,
      collaborationId,
      workspaces.map((w) => w.id),
    );
    await trx.deleteFrom("collaborations").where("id", "=", collaborationId).execute();
  }

  /** Host side of a guest leaving or being removed: the copies of its items follow its policy. */
  async dropGuest(trx: Queryable, collaborationId: string, guest: ParticipantTable) {
    const self = await this.mustFindParticipant(trx, collaborationId, await this.selfId());
    const workspaces = await trx
      .selectFrom("workspaces")
      .select("id")
      .where("collaboration_id", "=", collaborationId)
      .execute();
    const ids = workspaces.map((w) => w.id);
    await releaseCopies(
      trx,
      ids,
      () => guest.delete_contributed === 1 || self.delete_received === 1,
      guest.portal_id,
      true,
    );
    if (ids.length > 0)
      await trx
        .deleteFrom("workspace_modes")
        .where("workspace_id", "in", ids)
        .where("portal_id", "=", guest.portal_id)
        .execute();
    await trx
      .deleteFrom("collaboration_participants")
      .where("collaboration_id", "=", collaborationId)
      .where("portal_id", "=", guest.portal_id)
      .execute();
  }

  private async policies(q: Queryable, collaborationId: string) {
    const selfId = await this.selfId();
    const rows = await q
      .selectFrom("collaboration_participants")
      .select(["portal_id", "delete_contributed", "delete_received"])
      .where("collaboration_id", "=", collaborationId)
      .execute();
    return {
      deleteReceived: rows.find((r) => r.portal_id === selfId)?.delete_received === 1,
      contributed: new Map(rows.map((r) => [r.portal_id, r.delete_contributed === 1])),
    };
  }

  private guestsOf(q: Queryable, collaborationId: string) {
    return q
      .selectFrom("collaboration_participants")
      .selectAll()
      .where("collaboration_id", "=", collaborationId)
      .where("role", "=", "guest")
      .execute();
  }

  // ---------------------------------------------------------------- lookups

  async mustFind(q: Queryable, id: string): Promise<CollaborationTable> {
    const row = await q.selectFrom("collaborations").selectAll().where("id", "=", id).executeTakeFirst();
    if (!row) throw errors.collaborationNotFound(id);
    return row;
  }

  async mustFindWorkspace(
    q: Queryable,
    collaborationId: string,
    workspaceId: string,
  ): Promise<WorkspaceTable> {
    const row = await q
      .selectFrom("workspaces")
      .selectAll()
      .where("id", "=", workspaceId)
      .where("collaboration_id", "=", collaborationId)
      .executeTakeFirst();
    if (!row) throw errors.workspaceNotFound(workspaceId);
    return row;
  }

  async mustFindParticipant(
    q: Queryable,
    collaborationId: string,
    portalId: string,
  ): Promise<ParticipantTable> {
    await this.mustFind(q, collaborationId);
    const row = await q
      .selectFrom("collaboration_participants")
      .selectAll()
      .where("collaboration_id", "=", collaborationId)
      .where("portal_id", "=", portalId)
      .executeTakeFirst();
    if (!row) throw errors.notFound(`Participant '${portalId}'`);
    return row;
  }

  private async mustFindInvitation(q: Queryable, collaborationId: string, invitationId: string) {
    const row = await q
      .selectFrom("collaboration_invitations")
      .selectAll()
      .where("id", "=", invitationId)
      .where("collaboration_id", "=", collaborationId)
      .executeTakeFirst();
    if (!row) throw errors.notFound(`Invitation '${invitationId}'`);
    return row;
  }

  async modesOf(
    q: Queryable,
    workspaceIds: readonly string[],
  ): Promise<Map<string, Map<string, AccessMode>>> {
    const out = new Map<string, Map<string, AccessMode>>();
    if (workspaceIds.length === 0) return out;
    const rows = await q
      .selectFrom("workspace_modes")
      .selectAll()
      .where("workspace_id", "in", [...workspaceIds])
      .execute();
    for (const r of rows) {
      const m = out.get(r.workspace_id) ?? new Map<string, AccessMode>();
      out.set(r.workspace_id, m);
      m.set(r.portal_id, r.access_mode);
    }
    return out;
  }

  private requireRole(collab: CollaborationTable, role: "host" | "guest", message: string) {
    if (collab.role !== role)
      throw new PorticoError(400, message, "COLLAB_0002", [
        `This portal is the collaboration's ${collab.role}.`,
      ]);
  }

  private async assertUniqueName(q: Queryable, name: string) {
    const same = await q
      .selectFrom("collaborations")
      .select("id")
      .where("name", "=", name)
      .executeTakeFirst();
    if (same)
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
    const rows = await this.db.kysely
      .selectFrom("workspaces")
      .select("id")
      .where("collaboration_id", "=", collaborationId)
      .where("id", "in", ids)
      .execute();
    const found = new Set(rows.map((r) => r.id));
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
