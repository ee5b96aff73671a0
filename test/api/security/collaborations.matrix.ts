import { expect } from "vitest";
import { collaborate, type Linked, PEER_ENV, self } from "../../helpers/collaboration.js";
import { startTestPortal, type TestPortal } from "../../helpers/portico.js";
import {
  ADMINS,
  type Area,
  asAdmin,
  bootstrap,
  type Call,
  type Case,
  c,
  E403,
  E499,
  mainId,
  must,
  newGroup,
  portal,
  row,
  type Setup,
  uid,
} from "./harness.js";

/*
 * The security matrix of distributed collaboration (the portals-collaborations routes, and the
 * peer endpoint in portico.routes.ts): this portal hosts a collaboration with a peer portal as its
 * guest, and is a guest in one the peer hosts.
 */

/** A peer call is authenticated by its signature, never by a token: any token is no help. */
const PEER_REFUSED = { code: 498, messageCode: "COLLAB_0498" };
/** Every collaboration operation needs portal:admin:manageCollaborations (README). */
const HOST = [c("host", ADMINS)];
const GUEST = [c("guest", ADMINS)];
/**
 * interface.md §5 names the side: an administrator on the other side is refused with the reason
 * (README: `COLLAB_0002`, `COLLAB_0003` for sync, `COLLAB_0004` for schedules), writing nothing.
 */
const wrongSide = (messageCode: string) => row(E499, E403, E403, { code: 400, messageCode });

const EXPECTED: Record<string, readonly Case[]> = {
  // interface.md §5: administrators of the host, or of the guest, depending on the operation.
  "collaborations.create": HOST,
  "collaborations.list": HOST,
  "collaborations.validateCollaborationInvitation": GUEST,
  "collaborations.acceptCollaborationInvitation": GUEST,
  "collaborations.get": HOST,
  "collaborations.updateInfo": HOST,
  "collaborations.delete": HOST,
  "collaborations.removeParticipation": [c("guest", ADMINS), c("host", wrongSide("COLLAB_0002"))],
  "collaborations.inviteParticipant": HOST,
  "collaborations.invitations": HOST,
  "collaborations.invitations.invalidate": HOST,
  "collaborations.invitations.refresh": HOST,
  "collaborations.exportInvitationResponse": GUEST,
  "collaborations.validateInvitationResponse": HOST,
  "collaborations.importInvitationResponse": HOST,
  "collaborations.participants": HOST,
  "collaborations.participant": HOST,
  "collaborations.participant.updateAccessModes": HOST,
  "collaborations.participant.updateItemDeletePolicy": HOST,
  "collaborations.participant.remove": HOST,
  "collaborations.addWorkspace": [c("host", ADMINS), c("guest", wrongSide("COLLAB_0002"))],
  "collaborations.workspaces": HOST,
  "collaborations.workspace": HOST,
  "collaborations.workspace.updateInfo": HOST,
  "collaborations.workspace.updatePortalGroupLink": [c("host", ADMINS), c("guest", ADMINS)],
  "collaborations.workspace.removePortalGroupLink": HOST,
  "collaborations.workspace.delete": [c("host", ADMINS), c("guest", wrongSide("COLLAB_0002"))],
  "collaborations.workspace.sync": [c("guest", ADMINS), c("host", wrongSide("COLLAB_0003"))],
  "collaborations.workspace.syncStatus": GUEST,
  "collaborations.workspace.syncStatus.one": GUEST,
  "collaborations.workspace.schedule": GUEST,
  "collaborations.workspace.schedule.update": GUEST,
  "collaborations.workspace.schedule.delete": [c("guest", ADMINS), c("host", wrongSide("COLLAB_0004"))],
  "collaborations.workspace.schedule.pause": GUEST,
  "collaborations.workspace.schedule.resume": GUEST,
  "collaborations.peer": [c("org", row(PEER_REFUSED, PEER_REFUSED, PEER_REFUSED, PEER_REFUSED))],
};

let peer: TestPortal;
let peerId: string;
/** This portal hosts `hosted` (the peer is its guest) and is a guest in `guestIn`. */
let hosted: Linked;
let guestIn: Linked;
let pending: { collaborationId: string; response: unknown };
let peerInvitation: unknown;
let syncId: string;

const FAR = Date.now() + 365 * 24 * 3600_000;

const collab = (cid: string, op = "") => `${self}/collaborations/${cid}${op ? `/${op}` : ""}`;
const ws = (linked: Linked, op = "") =>
  collab(linked.collaborationId, `workspaces/${linked.workspaceId}${op ? `/${op}` : ""}`);

/** A collaboration hosted by this portal, with one workspace and no guest. */
async function newHostedCollaboration(): Promise<{ collaborationId: string; workspaceId: string }> {
  const r = await asAdmin(`${self}/createCollaboration`, { name: `collab ${uid()}`, workspaceName: "ws" });
  return { collaborationId: r.collaboration.id, workspaceId: r.collaboration.workspaceIds[0] };
}

/** An invitation of this portal into a new collaboration of the peer. */
async function invitationFromPeer(): Promise<{ collaborationId: string; invitation: unknown }> {
  const created = await must(
    peer.post(
      `${self}/createCollaboration`,
      { name: `peer collab ${uid()}`, workspaceName: "ws" },
      peer.adminToken,
    ),
    "peer createCollaboration",
  );
  const cid = created.collaboration.id as string;
  const invitation = await must(
    peer.post(
      collab(cid, "inviteParticipant"),
      {
        guestPortalUrl: portal.portico.address,
        collaborationWorkspacesParticipantConfigJSON: [
          { [created.collaboration.workspaceIds[0]]: "sendAndReceive" },
        ],
      },
      peer.adminToken,
    ),
    "peer inviteParticipant",
  );
  return { collaborationId: cid, invitation };
}

/** A collaboration hosted here that the peer accepted, with its response not imported yet. */
async function pendingResponse(): Promise<{ collaborationId: string; response: unknown }> {
  const { collaborationId, workspaceId } = await newHostedCollaboration();
  const invitation = await asAdmin(collab(collaborationId, "inviteParticipant"), {
    guestPortalUrl: peer.portico.address,
    collaborationWorkspacesParticipantConfigJSON: [{ [workspaceId]: "sendAndReceive" }],
  });
  await must(
    peer.post(
      `${self}/acceptCollaborationInvitation`,
      { invitationJSON: JSON.stringify(invitation) },
      peer.adminToken,
    ),
    "peer accept",
  );
  const response = await must(
    peer.get(collab(collaborationId, "exportInvitationResponse"), {}, peer.adminToken),
    "peer exportInvitationResponse",
  );
  return { collaborationId, response };
}

async function ensureSchedule(state: "active" | "paused") {
  await asAdmin(ws(guestIn, "schedule/update"), { startTime: FAR, interval: 24, repeatCount: -1 });
  await asAdmin(ws(guestIn, state === "active" ? "schedule/resume" : "schedule/pause"));
}

function hostPath() {
  return { collaborationId: hosted.collaborationId, workspaceId: hosted.workspaceId };
}

function guestPath() {
  return { collaborationId: guestIn.collaborationId, workspaceId: guestIn.workspaceId };
}

/** An invitation of this portal's host collaboration to some other portal. */
async function invitationOnHost(): Promise<Call> {
  const file = await asAdmin(collab(hosted.collaborationId, "inviteParticipant"), {
    guestPortalUrl: `https://guest-${uid()}.example.org`,
    collaborationWorkspacesParticipantConfigJSON: [{ [hosted.workspaceId]: "receive" }],
  });
  return { path: { collaborationId: hosted.collaborationId, invitationId: file.invitation.id } };
}

const SETUP: Record<string, Setup> = {
  "collaborations.create": async () => ({ params: { name: `collab ${uid()}`, workspaceName: "ws" } }),
  "collaborations.list": async () => ({
    check: (r) => expect(JSON.stringify(r)).toContain(hosted.collaborationId),
  }),
  "collaborations.validateCollaborationInvitation": async () => ({
    params: { invitationJSON: JSON.stringify(peerInvitation) },
    check: (r) => expect(r.valid).toBe(true),
  }),
  "collaborations.acceptCollaborationInvitation": async () => ({
    params: { invitationJSON: JSON.stringify((await invitationFromPeer()).invitation) },
  }),
  "collaborations.get": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.updateInfo": async () => ({
    path: { collaborationId: hosted.collaborationId },
    params: { description: `about ${uid()}` },
  }),
  "collaborations.delete": async () => ({
    path: { collaborationId: (await newHostedCollaboration()).collaborationId },
  }),
  "collaborations.removeParticipation": async ({ on }) => {
    if (on === "host") return { path: { collaborationId: (await newHostedCollaboration()).collaborationId } };
    const { invitation } = await invitationFromPeer();
    const r = await asAdmin(`${self}/acceptCollaborationInvitation`, {
      invitationJSON: JSON.stringify(invitation),
    });
    return { path: { collaborationId: r.collaborationId } };
  },
  "collaborations.inviteParticipant": async () => ({
    path: { collaborationId: hosted.collaborationId },
    params: {
      guestPortalUrl: `https://guest-${uid()}.example.org`,
      collaborationWorkspacesParticipantConfigJSON: [{ [hosted.workspaceId]: "receive" }],
    },
    check: (r) => expect(r.invitation.collaborationId).toBe(hosted.collaborationId),
  }),
  "collaborations.invitations": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.invitations.invalidate": invitationOnHost,
  "collaborations.invitations.refresh": invitationOnHost,
  "collaborations.exportInvitationResponse": async () => ({
    path: { collaborationId: guestIn.collaborationId },
    check: (r) => expect(r.response.collaborationId).toBe(guestIn.collaborationId),
  }),
  "collaborations.validateInvitationResponse": async () => ({
    path: { collaborationId: pending.collaborationId },
    params: { invitationResponseJSON: JSON.stringify(pending.response) },
    check: (r) => expect(r.valid).toBe(true),
  }),
  "collaborations.importInvitationResponse": async () => {
    const { collaborationId, response } = await pendingResponse();
    return { path: { collaborationId }, params: { invitationResponseJSON: JSON.stringify(response) } };
  },
  "collaborations.participants": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.participant": async () => ({
    path: { collaborationId: hosted.collaborationId, participantId: peerId },
  }),
  "collaborations.participant.updateAccessModes": async () => ({
    path: { collaborationId: hosted.collaborationId, participantId: peerId },
    params: { collaborationWorkspacesParticipantConfigJSON: [{ [hosted.workspaceId]: "sendAndReceive" }] },
  }),
  "collaborations.participant.updateItemDeletePolicy": async () => ({
    path: { collaborationId: hosted.collaborationId, participantId: peerId },
    params: { deleteReceivedItems: false },
  }),
  "collaborations.participant.remove": async () => {
    const linked = await collaborate(portal, [{ portal: peer, mode: "sendAndReceive" }]);
    return { path: { collaborationId: linked.collaborationId, participantId: peerId } };
  },
  "collaborations.addWorkspace": async ({ on }) => ({
    path: { collaborationId: (on === "host" ? hosted : guestIn).collaborationId },
    params: { collaborationWorkspaceName: `ws ${uid()}` },
  }),
  "collaborations.workspaces": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.workspace": async () => ({
    path: { collaborationId: hosted.collaborationId, workspaceId: hosted.workspaceId },
  }),
  "collaborations.workspace.updateInfo": async () => ({
    path: { collaborationId: hosted.collaborationId, workspaceId: hosted.workspaceId },
    params: { collaborationWorkspaceDescription: `about ${uid()}` },
  }),
  "collaborations.workspace.updatePortalGroupLink": async ({ on }) => {
    const linked = on === "host" ? hosted : guestIn;
    return {
      path: { collaborationId: linked.collaborationId, workspaceId: linked.workspaceId },
      params: { enableRealtimeSync: false },
    };
  },
  "collaborations.workspace.removePortalGroupLink": async () => {
    const r = await asAdmin(collab(hosted.collaborationId, "addWorkspace"), {
      collaborationWorkspaceName: `ws ${uid()}`,
      portalGroupId: await newGroup(bootstrap),
    });
    return { path: { collaborationId: hosted.collaborationId, workspaceId: r.workspace.id } };
  },
  "collaborations.workspace.delete": async ({ on }) => {
    if (on === "guest") return { path: guestPath() };
    const r = await asAdmin(collab(hosted.collaborationId, "addWorkspace"), {
      collaborationWorkspaceName: `ws ${uid()}`,
    });
    return { path: { collaborationId: hosted.collaborationId, workspaceId: r.workspace.id } };
  },
  "collaborations.workspace.sync": async ({ on }) => ({
    path: on === "guest" ? guestPath() : hostPath(),
    params: { async: false },
    check: (r) => expect(r.status).toBe("completed"),
  }),
  "collaborations.workspace.syncStatus": async () => ({ path: guestPath() }),
  "collaborations.workspace.syncStatus.one": async () => ({ path: { ...guestPath(), syncId } }),
  "collaborations.workspace.schedule": async () => {
    await ensureSchedule("active");
    return { path: guestPath(), check: (r) => expect(r.startTime).toBe(FAR) };
  },
  "collaborations.workspace.schedule.update": async () => ({
    path: guestPath(),
    params: { startTime: FAR, interval: 24, repeatCount: -1 },
  }),
  "collaborations.workspace.schedule.delete": async ({ on }) => {
    if (on === "host") return { path: hostPath() };
    await ensureSchedule("active");
    return { path: guestPath() };
  },
  "collaborations.workspace.schedule.pause": async () => {
    await ensureSchedule("active");
    return { path: guestPath() };
  },
  "collaborations.workspace.schedule.resume": async () => {
    await ensureSchedule("paused");
    return { path: guestPath() };
  },
  "collaborations.peer": async () => ({
    path: { op: "state" },
    params: {
      envelope: {
        collaborationId: hosted.collaborationId,
        from: peerId,
        to: mainId,
        op: "state",
        issued: Date.now(),
        nonce: uid(),
        body: {},
      },
      signature: Buffer.alloc(64).toString("base64"),
    },
  }),
};

export const collaborationsArea: Area = {
  files: [
    "portals-collaborations.routes.ts",
    "portals-collaborations-workspaces.routes.ts",
    "portico.routes.ts",
  ],
  expected: EXPECTED,
  setup: SETUP,
  async prepare() {
    peer = await startTestPortal({ env: PEER_ENV });
    peerId = (await peer.get("/portals/self", {}, peer.adminToken)).id;
    hosted = await collaborate(portal, [{ portal: peer, mode: "sendAndReceive" }]);
    guestIn = await collaborate(peer, [{ portal, mode: "sendAndReceive" }]);
    pending = await pendingResponse();
    peerInvitation = (await invitationFromPeer()).invitation;
    const synced = await asAdmin(ws(guestIn, "sync"), { async: false });
    syncId = synced.jobId as string;
  },
  async release() {
    await peer?.stop();
  },
};
