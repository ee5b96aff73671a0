import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PEER_HEADERS } from "../../src/collaboration/peer.js";
import { fingerprint, signDocument } from "../../src/collaboration/signing.js";
import { createGroup, ok, self, startPeer } from "../helpers/collaboration.js";
import type { TestPortal } from "../helpers/portico.js";

/**
 * The trust exchange between real portals on loopback: signed invitation and response files,
 * and every way a file is refused.
 */

let host: TestPortal;
let guest: TestPortal;
let other: TestPortal;
let collaborationId: string;
let workspaceId: string;

beforeAll(async () => {
  [host, guest, other] = await Promise.all([startPeer(), startPeer(), startPeer()]);
  const group = await createGroup(host, "shared with partners");
  const r = await ok(
    host.post(
      `${self}/createCollaboration`,
      {
        name: "Partners",
        description: "d",
        workspaceName: "Roads",
        portalGroupId: group,
        hostContactFirstname: "Hal",
      },
      host.adminToken,
    ),
    "createCollaboration",
  );
  collaborationId = r.collaboration.id;
  workspaceId = r.collaboration.workspaceIds[0];
}, 60_000);

afterAll(async () => {
  await Promise.all([host?.stop(), guest?.stop(), other?.stop()]);
});

const collab = (op: string) => `${self}/collaborations/${collaborationId}/${op}`;

async function invite(portal: TestPortal, mode = "sendAndReceive") {
  const res = await fetch(`${host.api}${collab("inviteParticipant")}`, {
    method: "POST",
    body: new URLSearchParams({
      f: "json",
      token: host.adminToken,
      guestPortalUrl: `${portal.portico.address}/sharing/rest`,
      collaborationWorkspacesParticipantConfigJSON: JSON.stringify([{ [workspaceId]: mode }]),
    }),
  });
  expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="collaboration-invitation-/);
  return (await res.json()) as any;
}

function expectRefused(r: any, param: string, reason: RegExp) {
  expect(r.error?.code, JSON.stringify(r)).toBe(400);
  expect(r.error.messageCode).toBe("COLLAB_0001");
  expect(r.error.message).toContain(`'${param}'`);
  expect(r.error.message).toMatch(reason);
}

describe("collaboration trust", () => {
  it("refuses an altered, expired or misaddressed invitation, and a second acceptance", async () => {
    const file = await invite(guest);
    expect(file.type).toBe("portico.collaborationInvitation");
    expect(file.invitation.workspaces).toEqual([
      expect.objectContaining({ id: workspaceId, accessMode: "sendAndReceive" }),
    ]);

    const altered = structuredClone(file);
    altered.invitation.workspaces[0].accessMode = "receive";
    expectRefused(
      await guest.post(
        `${self}/validateCollaborationInvitation`,
        { invitationJSON: JSON.stringify(altered) },
        guest.adminToken,
      ),
      "invitationJSON",
      /altered/,
    );

    // Correctly signed by the host, but past its expiration.
    const key = await host.portico.db.kysely.selectFrom("portal_keys").selectAll().executeTakeFirstOrThrow();
    const expired = structuredClone(file);
    expired.invitation.expires = Date.now() - 1000;
    expired.signature = signDocument(expired.invitation, key.private_key);
    expectRefused(
      await guest.post(
        `${self}/validateCollaborationInvitation`,
        { invitationJSON: JSON.stringify(expired) },
        guest.adminToken,
      ),
      "invitationJSON",
      /expired/,
    );

    // Meant for the guest; another portal cannot use it.
    expectRefused(
      await other.post(
        `${self}/acceptCollaborationInvitation`,
        { invitationJSON: JSON.stringify(file) },
        other.adminToken,
      ),
      "invitationJSON",
      /is for http/,
    );

    const valid = await ok(
      guest.post(
        `${self}/validateCollaborationInvitation`,
        { invitationJSON: JSON.stringify(file) },
        guest.adminToken,
      ),
      "validate",
    );
    expect(valid).toMatchObject({ valid: true, hostKeyFingerprint: fingerprint(key.public_key) });
    expect(await guest.get(`${self}/collaborations`, {}, guest.adminToken)).toEqual({ collaborations: [] });

    // Uploaded as a file, the way the portal's pages send it.
    const body = new FormData();
    body.append("f", "json");
    body.append("token", guest.adminToken);
    body.append("guestContactFirstname", "Gail");
    body.append("invitationFile", new Blob([JSON.stringify(file, null, 4)]), "invitation.json");
    const accepted = (await (
      await fetch(`${guest.api}${self}/acceptCollaborationInvitation`, { method: "POST", body })
    ).json()) as any;
    expect(accepted).toMatchObject({ success: true, collaborationId });
    expect(accepted.invitationResponse.type).toBe("portico.collaborationInvitationResponse");

    expectRefused(
      await guest.post(
        `${self}/acceptCollaborationInvitation`,
        { invitationJSON: JSON.stringify(file) },
        guest.adminToken,
      ),
      "invitationJSON",
      /already participates/,
    );
    const mine = await ok(
      guest.get(`${self}/collaborations/${collaborationId}`, {}, guest.adminToken),
      "get",
    );
    const hostOrg = await ok(host.get(`${self}`, {}, host.adminToken), "portals/self");
    expect(mine).toMatchObject({ isHost: false, status: "pending", collaborationHostPortalId: hostOrg.id });
  });

  it("establishes trust with the response, refusing it altered or imported twice", async () => {
    const response = await ok(guest.get(collab("exportInvitationResponse"), {}, guest.adminToken), "export");
    const altered = structuredClone(response);
    altered.response.guestPortalName = "Someone else";
    expectRefused(
      await host.post(
        collab("importInvitationResponse"),
        { invitationResponseJSON: JSON.stringify(altered) },
        host.adminToken,
      ),
      "invitationResponseJSON",
      /altered/,
    );
    expect((await host.get(collab("participants"), {}, host.adminToken)).participants).toHaveLength(1);

    const guestKey = await guest.portico.db.kysely
      .selectFrom("portal_keys")
      .selectAll()
      .executeTakeFirstOrThrow();
    const checked = await ok(
      host.post(
        collab("validateInvitationResponse"),
        { invitationResponseJSON: JSON.stringify(response) },
        host.adminToken,
      ),
      "validate",
    );
    expect(checked.guestKeyFingerprint).toBe(fingerprint(guestKey.public_key));

    const body = new FormData();
    body.append("f", "json");
    body.append("token", host.adminToken);
    body.append("invitationResponseFile", new Blob([JSON.stringify(response)]), "response.json");
    const imported = (await (
      await fetch(`${host.api}${collab("importInvitationResponse")}`, { method: "POST", body })
    ).json()) as any;
    expect(imported).toMatchObject({ success: true, collaborationId });

    expectRefused(
      await host.post(
        collab("importInvitationResponse"),
        { invitationResponseJSON: JSON.stringify(response) },
        host.adminToken,
      ),
      "invitationResponseJSON",
      /already accepted/,
    );
    const participants = (await host.get(collab("participants"), {}, host.adminToken)).participants as any[];
    expect(participants.map((p) => p.role).sort()).toEqual(["guest", "host"]);
    const g = participants.find((p) => p.role === "guest");
    expect(g).toMatchObject({
      portalUrl: guest.portico.address,
      firstName: "Gail",
      workspaceAccessModes: { [workspaceId]: "sendAndReceive" },
    });
    const invitations = (await host.get(collab("invitations"), {}, host.adminToken))
      .collaborationInvitations as any[];
    expect(invitations.find((i) => i.status === "accepted")?.guestPortalId).toBe(g.portalId);
  });

  it("refuses responses to invalidated or refreshed invitations", async () => {
    const first = await invite(other);
    await ok(
      other.post(
        `${self}/acceptCollaborationInvitation`,
        { invitationJSON: JSON.stringify(first) },
        other.adminToken,
      ),
      "accept",
    );
    const response = await ok(other.get(collab("exportInvitationResponse"), {}, other.adminToken), "export");

    // Refreshed since: the response answers the earlier issue.
    const refreshed = await ok(
      host.post(collab(`invitations/${first.invitation.id}/refresh`), { expiration: 2 }, host.adminToken),
      "refresh",
    );
    expect(refreshed.invitation.expires).toBeGreaterThan(first.invitation.expires - 70 * 3600_000);
    expectRefused(
      await host.post(
        collab("importInvitationResponse"),
        { invitationResponseJSON: JSON.stringify(response) },
        host.adminToken,
      ),
      "invitationResponseJSON",
      /refreshed/,
    );

    await ok(
      host.post(collab(`invitations/${first.invitation.id}/invalidate`), {}, host.adminToken),
      "invalidate",
    );
    expectRefused(
      await host.post(
        collab("importInvitationResponse"),
        { invitationResponseJSON: JSON.stringify(response) },
        host.adminToken,
      ),
      "invitationResponseJSON",
      /invalidated/,
    );
    expect((await host.get(collab("participants"), {}, host.adminToken)).participants).toHaveLength(2);
  });

  it("keeps collaboration operations to administrators and to the right side", async () => {
    const member = await host.addUser("collab_member");
    const denied = await host.post(
      `${self}/createCollaboration`,
      { name: "x", workspaceName: "y" },
      member.token,
    );
    expect(denied.error.code).toBe(403);
    expect((await host.get(`${self}/collaborations`)).error.code).toBe(499);

    const missing = await host.post(`${self}/createCollaboration`, { workspaceName: "y" }, host.adminToken);
    expect(missing.error).toMatchObject({ code: 400, messageCode: "PARAM_0001" });
    expect(missing.error.message).toContain("'name'");
    const long = await host.post(
      collab("addWorkspace"),
      { collaborationWorkspaceName: "n".repeat(101) },
      host.adminToken,
    );
    expect(long.error.message).toContain("'collaborationWorkspaceName'");
    const badModes = await host.post(
      collab("inviteParticipant"),
      {
        guestPortalUrl: "http://127.0.0.1:1",
        collaborationWorkspacesParticipantConfigJSON: [{ nope: "send" }],
      },
      host.adminToken,
    );
    expect(badModes.error.message).toContain("'collaborationWorkspacesParticipantConfigJSON'");

    // Host-only operations on the guest, guest-only ones on the host.
    const onGuest = await guest.post(
      collab("addWorkspace"),
      { collaborationWorkspaceName: "z" },
      guest.adminToken,
    );
    expect(onGuest.error).toMatchObject({ code: 400, messageCode: "COLLAB_0002" });
    const onHost = await host.post(collab("removeParticipation"), {}, host.adminToken);
    expect(onHost.error).toMatchObject({ code: 400, messageCode: "COLLAB_0002" });
    const syncOnHost = await host.post(`${collab(`workspaces/${workspaceId}`)}/sync`, {}, host.adminToken);
    expect(syncOnHost.error.messageCode).toBe("COLLAB_0003");
    const unknown = await host.get(
      `${self}/collaborations/0123456789abcdef0123456789abcdef`,
      {},
      host.adminToken,
    );
    expect(unknown.error.messageCode).toBe("COLLAB_0404");

    const added = await ok(
      host.post(
        collab("addWorkspace"),
        { collaborationWorkspaceName: "Parcels", config: { maxItemSizeInMB: 5 } },
        host.adminToken,
      ),
      "addWorkspace",
    );
    expect(added.workspace).toMatchObject({
      name: "Parcels",
      lastSyncSuccess: -1,
      config: { maxItemSizeInMB: 5, maxReplicationPackageSizeInMB: 5120, bidirectionalSyncCapable: true },
    });
  });

  it("refuses peer calls that are unsigned, altered, replayed, or whose headers name another sender", async () => {
    const hostId = (
      await ok(host.get(`${self}/collaborations/${collaborationId}`, {}, host.adminToken), "get")
    ).portalId;
    const guestId = (
      await ok(guest.get(`${self}/collaborations/${collaborationId}`, {}, guest.adminToken), "get")
    ).portalId;
    const key = await guest.portico.db.kysely.selectFrom("portal_keys").selectAll().executeTakeFirstOrThrow();
    const envelope = {
      collaborationId,
      from: guestId,
      to: hostId,
      op: "state",
      issued: Date.now(),
      nonce: `n-${Math.random()}`,
      body: {},
    };
    const call = (e: unknown, signature: string, headers: Record<string, string> = {}) =>
      fetch(`${host.api}/portico/peer/state?f=json`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ envelope: e, signature }),
      }).then((r) => r.json() as Promise<any>);

    const signature = signDocument(envelope, key.private_key);
    const forged = await call(
      envelope,
      signDocument(
        envelope,
        (await host.portico.db.kysely.selectFrom("portal_keys").selectAll().executeTakeFirstOrThrow())
          .private_key,
      ),
    );
    expect(forged.error).toMatchObject({ code: 498, messageCode: "COLLAB_0498" });
    expect(forged.error.message).toMatch(/signature/);
    const altered = await call({ ...envelope, body: { extra: true } }, signature);
    expect(altered.error.message).toMatch(/signature/);

    // Headers that let a body in must name the sender the envelope is signed by.
    for (const headers of [
      { [PEER_HEADERS.collaboration]: collaborationId, [PEER_HEADERS.from]: hostId },
      { [PEER_HEADERS.collaboration]: "another", [PEER_HEADERS.from]: guestId },
    ]) {
      const borrowed = await call(envelope, signature, headers);
      expect(borrowed.error).toMatchObject({ code: 498, messageCode: "COLLAB_0498" });
    }

    const first = await call(envelope, signature, {
      [PEER_HEADERS.collaboration]: collaborationId,
      [PEER_HEADERS.from]: guestId,
    });
    expect(first.collaboration.id).toBe(collaborationId);
    const replayed = await call(envelope, signature);
    expect(replayed.error.message).toMatch(/replayed/);

    const stale = { ...envelope, nonce: "n-stale", issued: Date.now() - 10 * 60_000 };
    expect((await call(stale, signDocument(stale, key.private_key))).error.message).toMatch(/clock window/);
  });
});
