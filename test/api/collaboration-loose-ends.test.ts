import { randomUUID } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANSWER_SIGNATURE_HEADER } from "../../src/collaboration/peer.js";
import { signDocument } from "../../src/collaboration/signing.js";
import {
  addItem,
  collaborate,
  groupItems,
  type Linked,
  ok,
  PEER_ENV,
  self,
  startPeer,
  sync,
  waitFor,
  workspacePath,
} from "../helpers/collaboration.js";
import { engine, newStore, startTestPortal, type TestPortal, type TestStore } from "../helpers/portico.js";
import { freePort } from "../helpers/process.js";

/**
 * Loose ends of replication between real portals on loopback: a copy withdrawn by an unshare
 * still follows its origin's deletion under the delete policy; answers between portals are signed
 * and a tampered one is refused; notices are delivered at least once, across a receiver that is
 * down and a sender that restarts; nodes of one cluster act once on a realtime change.
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

/**
 * A man in the middle on plain HTTP: a node:http proxy between the guest and its host, which
 * forwards calls unchanged and does to the answers what `mode` says.
 */
type Mode = "pass" | "tamper" | "strip" | "forge-ended";
async function startProxy(): Promise<{
  server: Server;
  url: string;
  target: { url: string };
  mode: { value: Mode };
}> {
  const target = { url: "" };
  const mode = { value: "pass" as Mode };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (mode.value === "forge-ended" && req.url?.includes("/portico/peer/state")) {
        // What a host answers a guest it removed: the guest would drop the collaboration.
        const forged = { error: { code: 403, messageCode: "COLLAB_0410", message: "ended", details: [] } };
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(forged));
        return;
      }
      const upstream = request(
        `${target.url}${req.url}`,
        { method: req.method, headers: { ...req.headers, host: new URL(target.url).host } },
        (answer) => {
          const parts: Buffer[] = [];
          answer.on("data", (c: Buffer) => parts.push(c));
          answer.on("end", () => {
            let body = Buffer.concat(parts).toString("utf8");
            const headers = { ...answer.headers };
            if (mode.value === "tamper" && req.url?.includes("/portico/peer/offer"))
              body = body.replaceAll("proxied item", "tampered item");
            if (mode.value === "strip") delete headers[ANSWER_SIGNATURE_HEADER];
            headers["content-length"] = String(Buffer.byteLength(body));
            res.writeHead(answer.statusCode ?? 502, headers).end(body);
          });
        },
      );
      upstream.on("error", () => res.destroy());
      upstream.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, url, target, mode };
}

describe("answers between portals are signed", () => {
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;

  beforeAll(async () => {
    proxy = await startProxy();
    // The host's address in the collaboration is the proxy's: the guest calls it through it.
    [host, guest] = await Promise.all([peer({ PORTICO_PUBLIC_URL: proxy.url }), peer()]);
    proxy.target.url = host.portico.address;
    linked = await collaborate(host, [{ portal: guest, mode: "receive" }]);
  }, 60_000);
  afterAll(() => {
    proxy?.server.close();
  });

  it("refuses an altered answer, an unsigned one and a forged COLLAB_0410, then syncs once the path is clean", async () => {
    await addItem(host, "proxied item", linked.hostGroup);
    const guestGroup = linked.guestGroups[0] as string;

    proxy.mode.value = "tamper";
    const tampered = await sync(guest, linked);
    expect(tampered.status).toBe("failed");
    expect(tampered.participantTasks[0].error).toMatch(
      /answered 'offer' \(HTTP 200\) with a signature that does not match its key; the answer was refused/,
    );

    proxy.mode.value = "strip";
    const stripped = await sync(guest, linked);
    expect(stripped.status).toBe("failed");
    expect(stripped.summary).toMatch(
      /answered 'state' \(HTTP 200\) without a signature; the answer was refused/,
    );

    proxy.mode.value = "forge-ended";
    const forged = await sync(guest, linked);
    expect(forged.status).toBe("failed");
    expect(forged.summary).toMatch(/without a signature/);
    // The forged ending was not believed: the guest still takes part.
    const listed = await ok(guest.get(`${self}/collaborations`, {}, guest.adminToken), "collaborations");
    expect(listed.collaborations.map((c: any) => c.id)).toEqual([linked.collaborationId]);
    expect((await groupItems(guest, guestGroup)).size).toBe(0);

    proxy.mode.value = "pass";
    const clean = await sync(guest, linked);
    expect(clean.status).toBe("completed");
    expect([...(await groupItems(guest, guestGroup)).keys()]).toEqual(["proxied item"]);
  });
});

/** A portal on a fixed port and a kept store, so that it can be stopped and started again as itself. */
async function restartable(env: Record<string, string> = {}) {
  const port = String(await freePort());
  const store: TestStore = newStore();
  const start = () =>
    startTestPortal({ store, keepStore: true, env: { ...PEER_ENV, PORTICO_PORT: port, ...env } });
  return { store, start };
}

describe("notices are delivered at least once", () => {
  it("delivers 'left' to a host that was down, from a guest restarted meanwhile", async () => {
    const h = await restartable();
    const g = await restartable();
    let host = await h.start();
    let guest = await g.start();
    try {
      const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
      await host.portico.close();
      await ok(
        guest.post(
          `${self}/collaborations/${linked.collaborationId}/removeParticipation`,
          {},
          guest.adminToken,
        ),
        "leave",
      );
      // The notice waits in the guest's outbox, its first attempt failed.
      const queued = await waitFor("a failed attempt", async () => {
        const row = await guest.portico.db.kysely.selectFrom("peer_notices").selectAll().executeTakeFirst();
        return row && row.attempts > 0 ? row : undefined;
      });
      expect(queued).toMatchObject({ op: "left", collaboration_id: linked.collaborationId });
      expect(queued.last_error).toMatch(/could not be reached/);
      // The guest restarts before the host is back: the notice survives in its database.
      await guest.portico.close();
      guest = await g.start();
      host = await h.start();
      await waitFor(
        "the host to drop the guest",
        async () => {
          const r = await host.get(
            `${self}/collaborations/${linked.collaborationId}/participants`,
            {},
            host.adminToken,
          );
          return r.participants?.length === 1;
        },
        30_000,
      );
      await waitFor(
        "the guest's outbox to empty",
        async () =>
          (await guest.portico.db.kysely.selectFrom("peer_notices").selectAll().execute()).length === 0,
      );
    } finally {
      await Promise.allSettled([host.portico.close(), guest.portico.close()]);
      await Promise.all([h.store.destroy(), g.store.destroy()]);
    }
  }, 60_000);
});

// Several nodes share one database only on PostgreSQL.
if (engine === "postgres")
  describe("two host nodes on one database", () => {
    it("nudge a guest once per change, and a guest that was down gets the nudge when it is back", async () => {
      const store = newStore();
      const g = await restartable();
      const a = await startTestPortal({ store, keepStore: true, env: PEER_ENV });
      const b = await startTestPortal({ store, keepStore: true, env: PEER_ENV });
      let guest = await g.start();
      try {
        const linked = await collaborate(a, [{ portal: guest, mode: "receive" }], { hostMode: "send" });
        const guestGroup = linked.guestGroups[0] as string;
        await ok(
          b.post(workspacePath(linked, "updatePortalGroupLink"), { enableRealtimeSync: true }, b.adminToken),
          "realtime",
        );
        const realtimeSyncs = async () =>
          (
            (await guest.get(workspacePath(linked, "syncStatus"), {}, guest.adminToken)).status as any[]
          ).filter((j) => j.syncExecType === "realtime");
        // A change made on node A: both nodes see it, one of them nudges.
        await addItem(a, "first change", linked.hostGroup);
        await waitFor("the change on the guest", async () =>
          (await groupItems(guest, guestGroup)).has("first change"),
        );
        await waitFor("the realtime sync to end", async () =>
          (await realtimeSyncs()).every((j) => j.endTime > 0),
        );
        // Both nodes have checked the change by now (they wake on it half a second after it).
        await waitFor("both nodes to record the fingerprint", async () => {
          const rows = await b.portico.db.kysely.selectFrom("realtime_prints").selectAll().execute();
          return rows.length === 1;
        });
        await new Promise((r) => setTimeout(r, 1500));
        expect(await realtimeSyncs()).toHaveLength(1);
        expect(await a.portico.db.kysely.selectFrom("peer_notices").selectAll().execute()).toEqual([]);

        // The guest is down when the next change is made on node B: the nudge waits, and arrives.
        await guest.portico.close();
        await addItem(b, "second change", linked.hostGroup);
        await waitFor("a failed nudge", async () => {
          const row = await a.portico.db.kysely.selectFrom("peer_notices").selectAll().executeTakeFirst();
          return row && row.op === "nudge" && row.attempts > 0;
        });
        guest = await g.start();
        await waitFor(
          "the second change on the guest",
          async () => (await groupItems(guest, guestGroup)).has("second change"),
          30_000,
        );
        expect(await realtimeSyncs()).toHaveLength(2);
      } finally {
        await Promise.allSettled([guest.portico.close(), b.portico.close(), a.portico.close()]);
        await Promise.all([store.destroy(), g.store.destroy()]);
      }
    }, 90_000);
  });

describe("key rotation and revocation", () => {
  /** A call as `from` would make it, signed with `privateKey`. */
  async function signedCall(
    to: TestPortal,
    envelope: {
      collaborationId: string;
      from: string;
      to: string;
      op: string;
      body: Record<string, unknown>;
    },
    privateKey: string,
  ): Promise<any> {
    const full = { ...envelope, issued: Date.now(), nonce: randomUUID() };
    const res = await fetch(`${to.api}/portico/peer/${envelope.op}?f=json`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ envelope: full, signature: signDocument(full, privateKey) }),
    });
    return res.json();
  }
  const keyOf = async (portal: TestPortal) =>
    ok(portal.get(`${self}/collaborationKey`, {}, portal.adminToken), "collaborationKey");
  /** The fingerprint `portal` holds for participant `id`. */
  const heldFingerprint = async (portal: TestPortal, linked: Linked, id: string) =>
    (
      await ok(
        portal.get(
          `${self}/collaborations/${linked.collaborationId}/participants/${id}`,
          {},
          portal.adminToken,
        ),
        "participant",
      )
    ).keyFingerprint as string;
  const retiredPrivateKey = async (portal: TestPortal) =>
    (
      await portal.portico.db.kysely
        .selectFrom("portal_keys")
        .select("private_key")
        .where("id", "!=", "portal")
        .orderBy("retired", "desc")
        .executeTakeFirstOrThrow()
    ).private_key;

  it("rotates either side's key, syncs both ways after, and refuses what a revoked key signs", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    const hostId = await participantId(host, linked);
    const guestId = await participantId(guest, linked);
    const guestGroup = linked.guestGroups[0] as string;

    // The host rotates; the guest learns the new key from a message signed with the old one.
    const before = await keyOf(host);
    const rotated = await ok(host.post(`${self}/collaborationKey/rotate`, {}, host.adminToken), "rotate");
    expect(rotated).toMatchObject({
      success: true,
      previousKeyFingerprint: before.keyFingerprint,
      previousKeyRevoked: false,
      participantsTold: 1,
    });
    expect(rotated.keyFingerprint).not.toBe(before.keyFingerprint);
    await waitFor(
      "the guest to take the host's new key",
      async () => (await heldFingerprint(guest, linked, hostId)) === rotated.keyFingerprint,
    );
    await addItem(host, "after host rotation", linked.hostGroup);
    await addItem(guest, "from guest after host rotation", guestGroup);
    expect((await sync(guest, linked)).status).toBe("completed");
    expect((await groupItems(guest, guestGroup)).has("after host rotation")).toBe(true);
    expect((await groupItems(host, linked.hostGroup)).has("from guest after host rotation")).toBe(true);

    // The guest rotates and revokes its old key at once (it was compromised).
    const guestBefore = await keyOf(guest);
    const guestRotated = await ok(
      guest.post(`${self}/collaborationKey/rotate`, { revokePrevious: true }, guest.adminToken),
      "rotate",
    );
    await waitFor(
      "the host to take the guest's new key",
      async () => (await heldFingerprint(host, linked, guestId)) === guestRotated.keyFingerprint,
    );
    await addItem(guest, "after guest rotation", guestGroup);
    expect((await sync(guest, linked)).status).toBe("completed");
    expect((await groupItems(host, linked.hostGroup)).has("after guest rotation")).toBe(true);
    expect((await keyOf(guest)).retiredKeys).toEqual([
      expect.objectContaining({ keyFingerprint: guestBefore.keyFingerprint, revoked: true }),
    ]);
    // Whoever holds the guest's old key is refused, and told why.
    const asOldGuest = await signedCall(
      host,
      { collaborationId: linked.collaborationId, from: guestId, to: hostId, op: "state", body: {} },
      await retiredPrivateKey(guest),
    );
    expect(asOldGuest.error).toMatchObject({ code: 498, messageCode: "COLLAB_0498" });
    expect(asOldGuest.error.message).toContain("signed with a key its portal revoked");

    // The host's old key is still accepted for an hour after its rotation, until the host revokes it.
    const oldHostKey = await retiredPrivateKey(host);
    // A notice that changes nothing: the end of a workspace the guest does not know.
    const notice = {
      collaborationId: linked.collaborationId,
      from: hostId,
      to: guestId,
      op: "ended",
      body: { workspaceId: "no_such_workspace" },
    };
    const graced = await signedCall(guest, notice, oldHostKey);
    expect(graced.success).toBe(true);
    const revoked = await ok(
      host.post(
        `${self}/collaborationKey/revoke`,
        { keyFingerprint: before.keyFingerprint },
        host.adminToken,
      ),
      "revoke",
    );
    expect(revoked).toMatchObject({
      success: true,
      keyFingerprint: before.keyFingerprint,
      participantsTold: 1,
    });
    await waitFor("the guest to refuse the host's revoked key", async () => {
      const r = await signedCall(guest, notice, oldHostKey);
      return r.error?.message?.includes("signed with a key its portal revoked");
    });
    expect((await sync(guest, linked)).status).toBe("completed");
    // The current key cannot be revoked, only rotated with revokePrevious.
    const current = await host.post(
      `${self}/collaborationKey/revoke`,
      { keyFingerprint: rotated.keyFingerprint },
      host.adminToken,
    );
    expect(current.error).toMatchObject({ code: 400 });
    expect(JSON.stringify(current.error)).toContain("keyFingerprint");
  }, 60_000);
});
