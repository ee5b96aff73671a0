import { startTestPortal, type TestPortal } from "./portico.js";

/**
 * Portals that collaborate, on loopback. Each has its own database; peer calls go through the
 * address guard, which these portals allow to reach loopback (PORTICO_OUTBOUND_ALLOW).
 */
export const PEER_ENV = { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8", PORTICO_SYNC_STALE_SECONDS: "3" };

export const startPeer = (env: Record<string, string> = {}) =>
  startTestPortal({ env: { ...PEER_ENV, ...env } });

export const self = "/portals/self";

export async function ok(promise: Promise<any>, what: string): Promise<any> {
  const r = await promise;
  if (r.error) throw new Error(`${what}: ${JSON.stringify(r.error)}`);
  return r;
}

export async function createGroup(portal: TestPortal, title: string): Promise<string> {
  const r = await ok(
    portal.post("/community/createGroup", { title, access: "org" }, portal.adminToken),
    "createGroup",
  );
  return r.group.id as string;
}

export async function addItem(
  portal: TestPortal,
  title: string,
  groupId: string | undefined,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const r = await ok(
    portal.post(
      "/content/users/admin_user/addItem",
      { title, type: "GeoJson", text: JSON.stringify({ title, pad: "x".repeat(64) }), ...extra },
      portal.adminToken,
    ),
    "addItem",
  );
  if (groupId)
    await ok(
      portal.post(`/content/users/admin_user/items/${r.id}/share`, { groups: groupId }, portal.adminToken),
      "share",
    );
  return r.id as string;
}

/** Items shared to a group, by title. */
export async function groupItems(portal: TestPortal, groupId: string): Promise<Map<string, any>> {
  const r = await ok(
    portal.get(`/content/groups/${groupId}`, { num: 100 }, portal.adminToken),
    "group content",
  );
  return new Map((r.items as any[]).map((i) => [i.title as string, i]));
}

export async function itemData(portal: TestPortal, id: string): Promise<string> {
  const res = await fetch(`${portal.api}/content/items/${id}/data?token=${portal.adminToken}`);
  return res.text();
}

export interface Linked {
  collaborationId: string;
  workspaceId: string;
  hostGroup: string;
  guestGroups: string[];
}

/**
 * The whole trust exchange: the host creates a collaboration with one workspace linked to a new
 * group and invites each guest with its access mode; each guest accepts, links a group of its
 * own, and the host imports each response.
 */
export async function collaborate(
  host: TestPortal,
  guests: { portal: TestPortal; mode: string }[],
  options: { hostMode?: string; config?: Record<string, unknown> } = {},
): Promise<Linked> {
  const hostGroup = await createGroup(host, `host group ${Math.random()}`);
  const created = await ok(
    host.post(
      `${self}/createCollaboration`,
      {
        name: `collab ${Math.random()}`,
        description: "test",
        workspaceName: "ws",
        portalGroupId: hostGroup,
        accessMode: options.hostMode ?? "sendAndReceive",
        hostContactFirstname: "Hal",
        hostContactLastname: "Host",
        hostContactEmailAddress: "hal@example.com",
        ...(options.config ? { config: options.config } : {}),
      },
      host.adminToken,
    ),
    "createCollaboration",
  );
  const collaborationId = created.collaboration.id as string;
  const workspaceId = created.collaboration.workspaceIds[0] as string;
  const guestGroups: string[] = [];
  for (const { portal, mode } of guests) {
    const invitation = await ok(
      host.post(
        `${self}/collaborations/${collaborationId}/inviteParticipant`,
        {
          guestPortalUrl: portal.portico.address,
          collaborationWorkspacesParticipantConfigJSON: [{ [workspaceId]: mode }],
        },
        host.adminToken,
      ),
      "inviteParticipant",
    );
    await ok(
      portal.post(
        `${self}/acceptCollaborationInvitation`,
        { invitationJSON: JSON.stringify(invitation) },
        portal.adminToken,
      ),
      "acceptCollaborationInvitation",
    );
    const group = await createGroup(portal, `guest group ${Math.random()}`);
    guestGroups.push(group);
    await ok(
      portal.post(
        `${self}/collaborations/${collaborationId}/workspaces/${workspaceId}/updatePortalGroupLink`,
        { portalGroupId: group },
        portal.adminToken,
      ),
      "updatePortalGroupLink",
    );
    const response = await ok(
      portal.get(`${self}/collaborations/${collaborationId}/exportInvitationResponse`, {}, portal.adminToken),
      "exportInvitationResponse",
    );
    await ok(
      host.post(
        `${self}/collaborations/${collaborationId}/importInvitationResponse`,
        { invitationResponseJSON: JSON.stringify(response) },
        host.adminToken,
      ),
      "importInvitationResponse",
    );
  }
  return { collaborationId, workspaceId, hostGroup, guestGroups };
}

export function workspacePath(linked: Linked, op = ""): string {
  return `${self}/collaborations/${linked.collaborationId}/workspaces/${linked.workspaceId}${op ? `/${op}` : ""}`;
}

export async function sync(guest: TestPortal, linked: Linked): Promise<any> {
  const r = await ok(guest.post(workspacePath(linked, "sync"), { async: false }, guest.adminToken), "sync");
  return ok(guest.get(workspacePath(linked, `syncStatus/${r.jobId}`), {}, guest.adminToken), "syncStatus");
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
