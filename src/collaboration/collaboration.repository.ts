import { later, type Queryable } from "../db/database.js";
import type { AccessMode, CollaborationTable, InvitationTable, ParticipantTable } from "../db/schema.js";
import type { Contact } from "./collaboration-types.js";

/**
 * Collaborations, their participants and invitations. With `workspace.repository.ts` and
 * `sync.repository.ts`, every query of distributed collaboration's own tables but the copies
 * replication keeps (`replication.ts`); their JSON columns and defaults are written there and
 * nowhere else.
 */

// ---------------------------------------------------------------- collaborations

export function findCollaboration(q: Queryable, id: string): Promise<CollaborationTable | undefined> {
  return q.selectFrom("collaborations").selectAll().where("id", "=", id).executeTakeFirst();
}

export function listCollaborations(q: Queryable): Promise<CollaborationTable[]> {
  return q.selectFrom("collaborations").selectAll().orderBy("created").execute();
}

export async function collaborationNameTaken(q: Queryable, name: string): Promise<boolean> {
  const same = await q.selectFrom("collaborations").select("id").where("name", "=", name).executeTakeFirst();
  return same !== undefined;
}

export async function insertCollaboration(
  q: Queryable,
  c: Pick<CollaborationTable, "id" | "name" | "description" | "role" | "host_portal_id">,
  now: number,
): Promise<void> {
  await q
    .insertInto("collaborations")
    .values({ ...c, created: now, modified: now })
    .execute();
}

export async function updateCollaboration(
  q: Queryable,
  id: string,
  patch: { name?: string | undefined; description?: string | undefined },
  now: number,
): Promise<void> {
  await later(
    q,
    q
      .updateTable("collaborations")
      .set({
        ...(patch.name !== undefined ? { name: patch.name } : {}),
        ...(patch.description !== undefined ? { description: patch.description } : {}),
        modified: now,
      })
      .where("id", "=", id)
      .compile(),
  );
}

/** Deletes the collaboration row; its participants, invitations and workspaces go with it (cascade). */
export async function deleteCollaboration(q: Queryable, id: string): Promise<void> {
  await q.deleteFrom("collaborations").where("id", "=", id).execute();
}

// ---------------------------------------------------------------- participants

export interface NewParticipant {
  collaborationId: string;
  portalId: string;
  role: "host" | "guest";
  portalUrl: string;
  portalName: string;
  publicKey: string;
  contact: Contact;
  status: ParticipantTable["status"];
}

/** A participant joins with both delete policies off; the host changes them later. */
function participantRow(p: NewParticipant, now: number): ParticipantTable {
  return {
    collaboration_id: p.collaborationId,
    portal_id: p.portalId,
    role: p.role,
    portal_url: p.portalUrl,
    portal_name: p.portalName,
    public_key: p.publicKey,
    contact: JSON.stringify(p.contact),
    delete_contributed: 0,
    delete_received: 0,
    status: p.status,
    retired_keys: "[]",
    created: now,
    modified: now,
  };
}

/** A participant's current key and the keys it retired (`peer.ts`, `RetiredKey`). */
export async function setParticipantKeys(
  q: Queryable,
  collaborationId: string,
  portalId: string,
  publicKey: string,
  retired: readonly object[],
  now: number,
): Promise<void> {
  await q
    .updateTable("collaboration_participants")
    .set({ public_key: publicKey, retired_keys: JSON.stringify(retired), modified: now })
    .where("collaboration_id", "=", collaborationId)
    .where("portal_id", "=", portalId)
    .execute();
}

export async function insertParticipants(
  q: Queryable,
  participants: readonly NewParticipant[],
  now: number,
): Promise<void> {
  await q
    .insertInto("collaboration_participants")
    .values(participants.map((p) => participantRow(p, now)))
    .execute();
}

export function participantContact(row: ParticipantTable): Contact {
  return JSON.parse(row.contact) as Contact;
}

export function findParticipant(
  q: Queryable,
  collaborationId: string,
  portalId: string,
): Promise<ParticipantTable | undefined> {
  return q
    .selectFrom("collaboration_participants")
    .selectAll()
    .where("collaboration_id", "=", collaborationId)
    .where("portal_id", "=", portalId)
    .executeTakeFirst();
}

export async function isParticipant(
  q: Queryable,
  collaborationId: string,
  portalId: string,
): Promise<boolean> {
  const row = await q
    .selectFrom("collaboration_participants")
    .select("portal_id")
    .where("collaboration_id", "=", collaborationId)
    .where("portal_id", "=", portalId)
    .executeTakeFirst();
  return row !== undefined;
}

/** The collaboration's host; every collaboration has one (it is written with the collaboration). */
export function findHost(q: Queryable, collaborationId: string): Promise<ParticipantTable> {
  return q
    .selectFrom("collaboration_participants")
    .selectAll()
    .where("collaboration_id", "=", collaborationId)
    .where("role", "=", "host")
    .executeTakeFirstOrThrow();
}

export function listParticipants(q: Queryable, collaborationId: string): Promise<ParticipantTable[]> {
  return q
    .selectFrom("collaboration_participants")
    .selectAll()
    .where("collaboration_id", "=", collaborationId)
    .orderBy("created")
    .execute();
}

export function listGuests(q: Queryable, collaborationId: string): Promise<ParticipantTable[]> {
  return q
    .selectFrom("collaboration_participants")
    .selectAll()
    .where("collaboration_id", "=", collaborationId)
    .where("role", "=", "guest")
    .execute();
}

export async function setDeletePolicy(
  q: Queryable,
  collaborationId: string,
  portalId: string,
  policy: { deleteContributed?: boolean | undefined; deleteReceived?: boolean | undefined },
  now: number,
): Promise<void> {
  await q
    .updateTable("collaboration_participants")
    .set({
      ...(policy.deleteContributed !== undefined
        ? { delete_contributed: policy.deleteContributed ? 1 : 0 }
        : {}),
      ...(policy.deleteReceived !== undefined ? { delete_received: policy.deleteReceived ? 1 : 0 } : {}),
      modified: now,
    })
    .where("collaboration_id", "=", collaborationId)
    .where("portal_id", "=", portalId)
    .execute();
}

/** A guest takes the host's word for a participant's delete policies; being told them makes it active. */
export async function acceptPoliciesFromHost(
  q: Queryable,
  collaborationId: string,
  portalId: string,
  policy: { deleteContributed: boolean; deleteReceived: boolean },
): Promise<void> {
  await later(
    q,
    q
      .updateTable("collaboration_participants")
      .set({
        delete_contributed: policy.deleteContributed ? 1 : 0,
        delete_received: policy.deleteReceived ? 1 : 0,
        status: "active",
      })
      .where("collaboration_id", "=", collaborationId)
      .where("portal_id", "=", portalId)
      .compile(),
  );
}

export async function deleteParticipant(
  q: Queryable,
  collaborationId: string,
  portalId: string,
): Promise<void> {
  await q
    .deleteFrom("collaboration_participants")
    .where("collaboration_id", "=", collaborationId)
    .where("portal_id", "=", portalId)
    .execute();
}

// ---------------------------------------------------------------- invitations

export interface NewInvitation {
  id: string;
  collaborationId: string;
  guestPortalUrl: string;
  workspaces: Record<string, AccessMode>;
  expires: number;
  status: InvitationTable["status"];
  digest: string;
  file: string;
  guestPortalId: string | null;
}

export async function insertInvitation(q: Queryable, i: NewInvitation, now: number): Promise<void> {
  await q
    .insertInto("collaboration_invitations")
    .values({
      id: i.id,
      collaboration_id: i.collaborationId,
      guest_portal_url: i.guestPortalUrl,
      workspaces: JSON.stringify(i.workspaces),
      expires: i.expires,
      status: i.status,
      digest: i.digest,
      file: i.file,
      guest_portal_id: i.guestPortalId,
      created: now,
      modified: now,
    })
    .execute();
}

/** The access modes an invitation gives its guest, by workspace id. */
export function invitationModes(row: InvitationTable): Record<string, AccessMode> {
  return JSON.parse(row.workspaces) as Record<string, AccessMode>;
}

export function findInvitation(
  q: Queryable,
  collaborationId: string,
  invitationId: string,
): Promise<InvitationTable | undefined> {
  return q
    .selectFrom("collaboration_invitations")
    .selectAll()
    .where("id", "=", invitationId)
    .where("collaboration_id", "=", collaborationId)
    .executeTakeFirst();
}

export function listInvitations(q: Queryable, collaborationId: string): Promise<InvitationTable[]> {
  return q
    .selectFrom("collaboration_invitations")
    .selectAll()
    .where("collaboration_id", "=", collaborationId)
    .orderBy("created")
    .execute();
}

/** On a guest: the one invitation it accepted into the collaboration. */
export function findAcceptedInvitation(q: Queryable, collaborationId: string) {
  return q
    .selectFrom("collaboration_invitations")
    .select(["id", "digest"])
    .where("collaboration_id", "=", collaborationId)
    .executeTakeFirstOrThrow();
}

/** On a host: whether `guestPortalId` once joined the collaboration through an invitation. */
export async function wasAccepted(
  q: Queryable,
  collaborationId: string,
  guestPortalId: string,
): Promise<boolean> {
  const row = await q
    .selectFrom("collaboration_invitations")
    .select("id")
    .where("collaboration_id", "=", collaborationId)
    .where("guest_portal_id", "=", guestPortalId)
    .where("status", "=", "accepted")
    .executeTakeFirst();
  return row !== undefined;
}

export async function markInvitationInvalidated(
  q: Queryable,
  invitationId: string,
  now: number,
): Promise<void> {
  await q
    .updateTable("collaboration_invitations")
    .set({ status: "invalidated", modified: now })
    .where("id", "=", invitationId)
    .execute();
}

export async function markInvitationAccepted(
  q: Queryable,
  invitationId: string,
  guestPortalId: string,
  now: number,
): Promise<void> {
  await q
    .updateTable("collaboration_invitations")
    .set({ status: "accepted", guest_portal_id: guestPortalId, modified: now })
    .where("id", "=", invitationId)
    .execute();
}

/** Replaces a pending invitation's file; an invitation no longer pending stays as it is. */
export async function reissueInvitation(
  q: Queryable,
  invitationId: string,
  issue: { expires: number; digest: string; file: string },
  now: number,
): Promise<void> {
  await q
    .updateTable("collaboration_invitations")
    .set({ ...issue, modified: now })
    .where("id", "=", invitationId)
    .where("status", "=", "pending")
    .execute();
}
