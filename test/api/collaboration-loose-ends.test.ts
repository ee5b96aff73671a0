import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addItem,
  collaborate,
  groupItems,
  type Linked,
  ok,
  self,
  startPeer,
  sync,
} from "../helpers/collaboration.js";
import type { TestPortal } from "../helpers/portico.js";

/**
 * Loose ends of replication between real portals on loopback: a copy withdrawn by an unshare
 * still follows its origin's deletion under the delete policy.
 */

const portals: TestPortal[] = [];
afterAll(async () => {
  await Promise.all(portals.map((p) => p.stop()));
});
async function peer(env: Record<string, string> = {}) {
  const p = await startPeer(env);
  portals.push(p);
  return p;
}
const participantId = async (portal: TestPortal, linked: Linked): Promise<string> =>
  (await ok(portal.get(`${self}/collaborations/${linked.collaborationId}`, {}, portal.adminToken), "get"))
    .portalId;
const exists = async (portal: TestPortal, id: string) =>
  !(await portal.get(`/content/items/${id}`, {}, portal.adminToken)).error;
const unshare = (portal: TestPortal, id: string, group: string) =>
  ok(
    portal.post(`/content/users/admin_user/items/${id}/unshare`, { groups: group }, portal.adminToken),
    "unshare",
  );
const remove = (portal: TestPortal, id: string) =>
  ok(portal.post(`/content/users/admin_user/items/${id}/delete`, {}, portal.adminToken), "delete");
const task = (status: any, direction: string) =>
  status.participantTasks.find((t: any) => t.direction === direction);

describe("a copy withdrawn by an unshare, whose origin is deleted later", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  let guestGroup: string;

  beforeAll(async () => {
    [host, guest] = await Promise.all([peer(), peer()]);
    linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    guestGroup = linked.guestGroups[0] as string;
  }, 60_000);

  /** Shares an item on each side, syncs, unshares both, syncs: both copies are withdrawn. */
  async function withdrawnPair(tag: string) {
    const onHost = await addItem(host, `host ${tag}`, linked.hostGroup);
    const onGuest = await addItem(guest, `guest ${tag}`, guestGroup);
    await sync(guest, linked);
    const copyOnGuest = (await groupItems(guest, guestGroup)).get(`host ${tag}`).id as string;
    const copyOnHost = (await groupItems(host, linked.hostGroup)).get(`guest ${tag}`).id as string;
    await unshare(host, onHost, linked.hostGroup);
    await unshare(guest, onGuest, guestGroup);
    const withdrawn = await sync(guest, linked);
    expect(task(withdrawn, "receive").succeeded).toEqual([
      expect.objectContaining({ id: onHost, action: "withdrawn" }),
    ]);
    expect(task(withdrawn, "send").succeeded).toEqual([
      expect.objectContaining({ id: onGuest, action: "withdrawn" }),
    ]);
    expect(await exists(guest, copyOnGuest)).toBe(true);
    expect(await exists(host, copyOnHost)).toBe(true);
    // Nothing changed since: a sync reports nothing about withdrawn copies.
    const quiet = await sync(guest, linked);
    for (const t of quiet.participantTasks) expect(t.succeededCount + t.failedCount).toBe(0);
    return { onHost, onGuest, copyOnGuest, copyOnHost };
  }

  it("without deleteContributedItems, is released when its origin is deleted, and stays", async () => {
    const pair = await withdrawnPair("kept");
    await remove(host, pair.onHost);
    await remove(guest, pair.onGuest);
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(task(status, "receive").succeeded).toEqual([
      expect.objectContaining({ id: pair.onHost, action: "withdrawn" }),
    ]);
    expect(task(status, "send").succeeded).toEqual([
      expect.objectContaining({ id: pair.onGuest, action: "withdrawn" }),
    ]);
    expect(await exists(guest, pair.copyOnGuest)).toBe(true);
    expect(await exists(host, pair.copyOnHost)).toBe(true);
    // Released: no longer a copy of anything, so no later sync asks about it.
    const quiet = await sync(guest, linked);
    for (const t of quiet.participantTasks) expect(t.succeededCount + t.failedCount).toBe(0);
  });

  it("with deleteContributedItems, is deleted when its origin is deleted, on either side", async () => {
    const collab = `${self}/collaborations/${linked.collaborationId}/participants`;
    for (const id of [await participantId(host, linked), await participantId(guest, linked)])
      await ok(
        host.post(
          `${collab}/${id}/updateItemDeletePolicy`,
          { deleteContributedItems: true },
          host.adminToken,
        ),
        "policy",
      );
    const pair = await withdrawnPair("gone");
    await remove(host, pair.onHost);
    await remove(guest, pair.onGuest);
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(task(status, "receive").succeeded).toEqual([
      expect.objectContaining({ id: pair.onHost, action: "deleted" }),
    ]);
    expect(task(status, "send").succeeded).toEqual([
      expect.objectContaining({ id: pair.onGuest, action: "deleted" }),
    ]);
    expect(await exists(guest, pair.copyOnGuest)).toBe(false);
    expect(await exists(host, pair.copyOnHost)).toBe(false);
  });
});
