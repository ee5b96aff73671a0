import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { applyItems, type ItemPackage } from "../../src/collaboration/replication.js";
import {
  addItem,
  collaborate,
  createGroup,
  groupItems,
  itemData,
  type Linked,
  ok,
  self,
  startPeer,
  sync,
  waitFor,
  workspacePath,
} from "../helpers/collaboration.js";
import { outbox, type TestPortal } from "../helpers/portico.js";

/**
 * Replication between real portals on loopback, each with its own database: what moves in which
 * direction, changes, unshares and deletions, limits, the one-at-a-time rule, and the operations
 * that end replication.
 */

/*
 * Portals a describe block's beforeAll starts live until the file ends; those a test starts are
 * stopped when it ends. Each live portal keeps its PostgreSQL pool's idle connections, and the
 * twenty-odd portals of this file together would otherwise approach the server's 100.
 */
const portals: TestPortal[] = [];
let testPortals: TestPortal[] | undefined;
async function peer() {
  const p = await startPeer();
  (testPortals ?? portals).push(p);
  return p;
}
/** Takes a portal the test closed itself (its store kept for a restart) off the lists. */
function forget(p: TestPortal) {
  for (const list of [portals, testPortals ?? []]) {
    const i = list.indexOf(p);
    if (i >= 0) list.splice(i, 1);
  }
}
beforeEach(() => {
  testPortals = [];
});
afterEach(async () => {
  const started = testPortals ?? [];
  testPortals = undefined;
  await Promise.all(started.map((p) => p.stop()));
});
afterAll(async () => {
  await Promise.all(portals.map((p) => p.stop()));
});

const titles = (m: Map<string, any>) => [...m.keys()].sort();

describe("sync between a host and a guest", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  let guestGroup: string;

  beforeAll(async () => {
    [host, guest] = await Promise.all([peer(), peer()]);
    linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    guestGroup = linked.guestGroups[0] as string;
  }, 60_000);

  it("moves new items both ways, with their data, and records their events", async () => {
    const a = await addItem(host, "host A", linked.hostGroup, { tags: "roads,paved", snippet: "a road" });
    await addItem(host, "host B", linked.hostGroup);
    await addItem(host, "host private", undefined);
    await addItem(guest, "guest C", guestGroup);

    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const byDirection = Object.fromEntries(status.participantTasks.map((t: any) => [t.direction, t]));
    expect(byDirection.receive).toMatchObject({ succeededCount: 2, failedCount: 0, notProcessedCount: 0 });
    expect(byDirection.send).toMatchObject({ succeededCount: 1, failedCount: 0, notProcessedCount: 0 });

    const onGuest = await groupItems(guest, guestGroup);
    expect(titles(onGuest)).toEqual(["guest C", "host A", "host B"]);
    const copy = onGuest.get("host A");
    expect(copy.id).not.toBe(a);
    expect(copy).toMatchObject({ tags: ["roads", "paved"], snippet: "a road", owner: "admin_user" });
    expect(JSON.parse(await itemData(guest, copy.id))).toMatchObject({ title: "host A" });
    expect(titles(await groupItems(host, linked.hostGroup))).toEqual(["guest C", "host A", "host B"]);

    // The copies were added like any item: their events are in the outbox, for webhooks.
    const events = await outbox(guest);
    expect(events.some((e) => e.object_id === copy.id && e.operation === "add" && e.source === "item")).toBe(
      true,
    );
    expect(events.some((e) => e.object_id === guestGroup && e.operation === "share")).toBe(true);
    expect(
      events.some((e) => e.object_id === copy.id && e.operation === "share" && e.source === "item"),
    ).toBe(true);
    // And indexed like any item: search finds it by its words and by its tags.
    for (const q of ['title:"host A"', "tags:paved"]) {
      const found = await ok(guest.get("/search", { q }, guest.adminToken), "search");
      expect(found.results.map((i: any) => i.id)).toEqual([copy.id]);
    }

    const ws = await ok(guest.get(workspacePath(linked), {}, guest.adminToken), "workspace");
    expect(ws.lastSyncSuccess).toBeGreaterThan(0);
    const list = await ok(guest.get(workspacePath(linked, "syncStatus"), {}, guest.adminToken), "syncStatus");
    expect(list.status[0]).toMatchObject({
      syncId: status.syncId,
      syncExecType: "manual",
      status: "completed",
    });
  });

  it("moves nothing when nothing changed, and never sends a received copy back", async () => {
    const again = await sync(guest, linked);
    expect(again.status).toBe("completed");
    for (const t of again.participantTasks)
      expect(t.succeededCount + t.failedCount + t.notProcessedCount).toBe(0);
    expect((await groupItems(host, linked.hostGroup)).size).toBe(3);
  });

  it("carries changes, unshares and deletions at the origin", async () => {
    const hostItems = await groupItems(host, linked.hostGroup);
    const a = hostItems.get("host A").id;
    const b = hostItems.get("host B").id;
    await ok(
      host.post(
        `/content/users/admin_user/items/${a}/update`,
        { title: "host A v2", text: '{"v":2}' },
        host.adminToken,
      ),
      "update",
    );
    await ok(
      host.post(
        `/content/users/admin_user/items/${b}/unshare`,
        { groups: linked.hostGroup },
        host.adminToken,
      ),
      "unshare",
    );
    const c = (await groupItems(guest, guestGroup)).get("guest C").id;
    // The guest's items are deleted on the host along with it.
    await ok(
      host.post(
        `${self}/collaborations/${linked.collaborationId}/participants/${await guestId(guest, linked)}/updateItemDeletePolicy`,
        { deleteContributedItems: true },
        host.adminToken,
      ),
      "policy",
    );
    await ok(guest.post(`/content/users/admin_user/items/${c}/delete`, {}, guest.adminToken), "delete");
    const copyOfB = (await groupItems(guest, guestGroup)).get("host B").id;

    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const receive = status.participantTasks.find((t: any) => t.direction === "receive");
    expect(receive.succeeded.map((s: any) => s.action).sort()).toEqual(["updated", "withdrawn"]);

    const onGuest = await groupItems(guest, guestGroup);
    expect(titles(onGuest)).toEqual(["host A v2"]);
    expect(await itemData(guest, onGuest.get("host A v2").id)).toBe('{"v":2}');
    // Unshared at the origin: the copy left the group but is still the guest's item.
    expect((await guest.get(`/content/items/${copyOfB}`, {}, guest.adminToken)).title).toBe("host B");
    // Deleted at the origin, with deleteContributedItems: the host's copy is gone.
    expect(titles(await groupItems(host, linked.hostGroup))).toEqual(["host A v2"]);

    // Shared again: the same copy comes back rather than a second one.
    await ok(
      host.post(`/content/users/admin_user/items/${b}/share`, { groups: linked.hostGroup }, host.adminToken),
      "share",
    );
    await sync(guest, linked);
    expect((await groupItems(guest, guestGroup)).get("host B").id).toBe(copyOfB);
  });

  it("reports items over maxItemSizeInMB as failed and moves the rest", async () => {
    await ok(
      host.post(
        `${self}/collaborations/${linked.collaborationId}/workspaces/${linked.workspaceId}/updateInfo`,
        { config: { maxItemSizeInMB: 0.001 } },
        host.adminToken,
      ),
      "updateInfo",
    );
    await addItem(host, "too big", linked.hostGroup, { text: "y".repeat(4096) });
    await addItem(host, "small", linked.hostGroup, { text: "{}" });
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed_with_failures");
    const receive = status.participantTasks.find((t: any) => t.direction === "receive");
    expect(receive.failed).toEqual([
      expect.objectContaining({ title: "too big", reason: expect.stringContaining("maxItemSizeInMB") }),
    ]);
    expect(receive.succeeded.map((s: any) => s.title)).toEqual(["small"]);
    expect((await groupItems(guest, guestGroup)).has("small")).toBe(true);
    await ok(
      host.post(
        `${self}/collaborations/${linked.collaborationId}/workspaces/${linked.workspaceId}/updateInfo`,
        { config: { maxItemSizeInMB: 1024 } },
        host.adminToken,
      ),
      "updateInfo",
    );
  });

  it("starts one sync of a workspace at a time, naming the running one", async () => {
    for (let i = 0; i < 4; i++) {
      const ids = await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          addItem(host, `bulk ${i}-${j}`, undefined, { text: "z".repeat(2048) }),
        ),
      );
      await ok(
        host.post(
          "/content/users/admin_user/shareItems",
          { items: ids.join(","), groups: linked.hostGroup },
          host.adminToken,
        ),
        "shareItems",
      );
    }
    const first = await ok(
      guest.post(workspacePath(linked, "sync"), { async: true }, guest.adminToken),
      "sync",
    );
    expect(first).toMatchObject({ success: true, jobId: expect.any(String), key: first.jobId });
    const second = await guest.post(workspacePath(linked, "sync"), { async: true }, guest.adminToken);
    expect(second.error).toMatchObject({ code: 400, messageCode: "COLLAB_0010" });
    expect(second.error.message).toContain(first.jobId);

    const done = await waitFor("the first sync to finish", async () => {
      const s = await guest.get(workspacePath(linked, `syncStatus/${first.jobId}`), {}, guest.adminToken);
      return !["submitted", "started", "in_progress"].includes(s.status) && s;
    });
    expect(done.status).toBe("completed");
    // 200 new items, and "too big" from the test before, now within the restored limit.
    const received = done.participantTasks.find((t: any) => t.direction === "receive");
    expect(received.succeededCount).toBe(201);
    expect(received.succeeded.some((s: any) => s.title === "too big")).toBe(true);
    const third = await ok(
      guest.post(workspacePath(linked, "sync"), { async: true }, guest.adminToken),
      "sync",
    );
    expect(third.jobId).not.toBe(first.jobId);
    await waitFor("the third sync", async () => {
      const s = await guest.get(workspacePath(linked, `syncStatus/${third.jobId}`), {}, guest.adminToken);
      return s.status === "completed";
    });
  });
  it("applies received items side by side; a bad one fails alone, and applying again adds no duplicates", async () => {
    const origin = `origin-${Math.random()}`;
    const target = { workspaceId: linked.workspaceId, originPortalId: origin, groupId: guestGroup };
    const pkg = (i: number, title: string | null): ItemPackage => ({
      id: `${origin}-item-${i}`,
      version: 1,
      // A title the store cannot take: the item fails while the others are being stored.
      title: title as string,
      type: "GeoJson",
      typeKeywords: [],
      description: "",
      snippet: "",
      tags: ["chunked"],
      url: null,
      properties: null,
      size: 2,
      data: {
        name: "d.geojson",
        contentType: "application/json",
        content: Buffer.from("{}").toString("base64"),
      },
      thumbnail: null,
    });
    const count = 12;
    const bad = 5;
    const packages = Array.from({ length: count }, (_, i) => pkg(i, i === bad ? null : `chunked ${i}`));
    const first = await applyItems(guest.portico.db, target, packages);
    expect(first.map((r) => r.id)).toEqual(packages.map((p) => p.id));
    expect(first.filter((r) => r.ok).map((r) => r.action)).toEqual(Array(count - 1).fill("created"));
    expect(first[bad]).toMatchObject({ ok: false, reason: expect.stringContaining("could not be stored") });

    const copies = () =>
      guest.portico.db.kysely
        .selectFrom("collaboration_copies as c")
        .innerJoin("items as i", "i.id", "c.item_id")
        .select(["c.origin_item_id", "i.title"])
        .where("c.origin_portal_id", "=", origin)
        .execute();
    expect((await copies()).length).toBe(count - 1);

    // The next sync brings the failed item and finds the others held: one copy each, no duplicates.
    const second = await applyItems(guest.portico.db, target, [
      ...packages.slice(0, bad),
      pkg(bad, `chunked ${bad}`),
      ...packages.slice(bad + 1),
    ]);
    expect(second.every((r) => r.ok)).toBe(true);
    expect(second[bad]?.action).toBe("created");
    expect(second.filter((r) => r.action === "updated").length).toBe(count - 1);
    const held = await copies();
    expect(held.map((c) => c.origin_item_id).sort()).toEqual(packages.map((p) => p.id).sort());
    // Each copy is one item, shared to the linked group once.
    const shared = await guest.portico.db.kysely
      .selectFrom("item_shares as s")
      .innerJoin("items as i", "i.id", "s.item_id")
      .select("i.title")
      .where("s.group_id", "=", guestGroup)
      .where("i.title", "like", "chunked %")
      .execute();
    expect(shared.map((r) => r.title).sort()).toEqual(packages.map((_, i) => `chunked ${i}`).sort());

    // New versions of held copies are stored together too (their page in one transaction), and
    // when one is bad, it fails alone and its copy stays as it was.
    const renamed = (i: number, version: number, title: string | null) => ({
      ...pkg(i, title),
      version,
      tags: [`rev${version}`],
      data: {
        name: "d2.geojson",
        contentType: "application/json",
        content: Buffer.from(`{"v":${version}}`).toString("base64"),
      },
    });
    const rows = () =>
      guest.portico.db.kysely
        .selectFrom("collaboration_copies as c")
        .innerJoin("items as i", "i.id", "c.item_id")
        .select(["c.origin_item_id", "c.origin_version", "i.id", "i.title"])
        .where("c.origin_portal_id", "=", origin)
        .orderBy("c.origin_item_id")
        .execute();
    const search = async (q: string) =>
      (await ok(guest.get("/search", { q, num: 100 }, guest.adminToken), "search")).results
        .map((r: any) => r.title)
        .sort();
    for (const [version, failing] of [
      [2, undefined],
      [3, bad],
    ] as const) {
      const results = await applyItems(
        guest.portico.db,
        target,
        packages.map((_, i) => renamed(i, version, i === failing ? null : `rev${version} ${i}`)),
      );
      expect(results.map((r) => r.id)).toEqual(packages.map((p) => p.id));
      const stored = results.filter((r) => r.ok);
      expect(stored.map((r) => r.action)).toEqual(Array(stored.length).fill("updated"));
      expect(stored.length).toBe(failing === undefined ? count : count - 1);
      const now = await rows();
      expect(now.length).toBe(count);
      for (const row of now) {
        const i = packages.findIndex((p) => p.id === row.origin_item_id);
        const v = i === failing ? version - 1 : version;
        expect(row.title).toBe(`rev${v} ${i}`);
        expect(Number(row.origin_version)).toBe(v);
        expect(await itemData(guest, row.id)).toBe(`{"v":${v}}`);
      }
      // Found by their new words and tags, no longer by the old ones.
      const titled = (v: number) =>
        packages
          .flatMap((_, i) => ((i === failing ? version - 1 : version) === v ? [`rev${v} ${i}`] : []))
          .sort();
      expect(await search(`tags:rev${version}`)).toEqual(titled(version));
      expect(await search(`title:"rev${version}"`)).toEqual(titled(version));
      expect(await search(`tags:rev${version - 1}`)).toEqual(titled(version - 1));
      const events = await outbox(guest);
      for (const row of now.filter((r) => Number(r.origin_version) === version))
        expect(
          events.some((e) => e.object_id === row.id && e.operation === "update" && e.source === "item"),
        ).toBe(true);
    }
  });
});

async function guestId(guest: TestPortal, linked: Linked): Promise<string> {
  return (
    await ok(guest.get(`${self}/collaborations/${linked.collaborationId}`, {}, guest.adminToken), "get")
  ).portalId;
}

describe("access modes", () => {
  it("moves items only from senders to receivers, and a received copy is never sent on", async () => {
    const [host, sender, receiver] = await Promise.all([peer(), peer(), peer()]);
    const linked = await collaborate(host, [
      { portal: sender, mode: "send" },
      { portal: receiver, mode: "receive" },
    ]);
    const [senderGroup, receiverGroup] = linked.guestGroups as [string, string];
    await addItem(host, "from host", linked.hostGroup);
    await addItem(sender, "from sender", senderGroup);
    await addItem(receiver, "from receiver", receiverGroup);

    const s1 = await sync(sender, linked);
    expect(s1.participantTasks.map((t: any) => t.direction)).toEqual(["send"]);
    const s2 = await sync(receiver, linked);
    expect(s2.participantTasks.map((t: any) => t.direction)).toEqual(["receive"]);

    expect(titles(await groupItems(host, linked.hostGroup))).toEqual(["from host", "from sender"]);
    expect(titles(await groupItems(sender, senderGroup))).toEqual(["from sender"]);
    // The host's own item reaches the receiver; the sender's, a copy on the host, does not.
    expect(titles(await groupItems(receiver, receiverGroup))).toEqual(["from host", "from receiver"]);

    // The host turns the receiver into a sender: its item now goes to the host.
    const receiverId = await guestId(receiver, linked);
    await ok(
      host.post(
        `${self}/collaborations/${linked.collaborationId}/participants/${receiverId}/updateParticipantAccessModes`,
        { collaborationWorkspacesParticipantConfigJSON: { [linked.workspaceId]: "send" } },
        host.adminToken,
      ),
      "updateParticipantAccessModes",
    );
    const s3 = await sync(receiver, linked);
    expect(s3.participantTasks.map((t: any) => t.direction)).toEqual(["send"]);
    expect(titles(await groupItems(host, linked.hostGroup))).toEqual([
      "from host",
      "from receiver",
      "from sender",
    ]);
  });
});

describe("ending replication", () => {
  it("removePortalGroupLink stops syncs through that link", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    await addItem(host, "kept", linked.hostGroup);
    await sync(guest, linked);
    const removed = await ok(
      guest.post(workspacePath(linked, "removePortalGroupLink"), {}, guest.adminToken),
      "remove link",
    );
    expect(removed).toEqual({
      collaborationId: linked.collaborationId,
      collaborationWorkspaceId: linked.workspaceId,
      success: true,
    });
    await addItem(host, "after", linked.hostGroup);
    const r = await ok(guest.post(workspacePath(linked, "sync"), { async: false }, guest.adminToken), "sync");
    expect(r.success).toBe(false);
    const status = await ok(
      guest.get(workspacePath(linked, `syncStatus/${r.jobId}`), {}, guest.adminToken),
      "status",
    );
    expect(status.summary).toMatch(/no group is linked/);
    // The copy stayed, as the guest's own item (deleteReceivedItems is off).
    expect(titles(await groupItems(guest, linked.guestGroups[0] as string))).toEqual(["kept"]);
  });

  it("deleting a workspace on the host ends it on the guest at once", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    await ok(host.post(workspacePath(linked, "delete"), {}, host.adminToken), "delete workspace");
    const gone = await waitFor("the guest to drop the workspace", async () => {
      const r = await guest.get(workspacePath(linked), {}, guest.adminToken);
      return r.error?.messageCode === "COLLAB_0405" && r;
    });
    expect(gone.error.code).toBe(400);
  });

  it("a guest that leaves is no longer a participant, and its received items follow its policy", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    const id = await guestId(guest, linked);
    await ok(
      host.post(
        `${self}/collaborations/${linked.collaborationId}/participants/${id}/updateItemDeletePolicy`,
        { deleteReceivedItems: true },
        host.adminToken,
      ),
      "policy",
    );
    await addItem(host, "received", linked.hostGroup);
    await addItem(guest, "contributed", linked.guestGroups[0]);
    await sync(guest, linked);
    expect(titles(await groupItems(guest, linked.guestGroups[0] as string))).toEqual([
      "contributed",
      "received",
    ]);

    await ok(
      guest.post(
        `${self}/collaborations/${linked.collaborationId}/removeParticipation`,
        {},
        guest.adminToken,
      ),
      "leave",
    );
    expect(titles(await groupItems(guest, linked.guestGroups[0] as string))).toEqual(["contributed"]);
    expect((await guest.get(`${self}/collaborations`, {}, guest.adminToken)).collaborations).toEqual([]);
    await waitFor("the host to drop the guest", async () => {
      const r = await host.get(
        `${self}/collaborations/${linked.collaborationId}/participants`,
        {},
        host.adminToken,
      );
      return r.participants.length === 1;
    });
    // deleteContributedItems is off: the host keeps its copy as its own item, outside the linked
    // group, so it is not offered on to other guests as if it were the host's.
    const hostGroupNow = await groupItems(host, linked.hostGroup);
    expect(titles(hostGroupNow)).toEqual(["received"]);
    const search = await ok(host.get("/search", { q: 'title:"contributed"' }, host.adminToken), "search");
    expect(search.results.map((i: any) => i.title)).toEqual(["contributed"]);
  });

  it("a guest the host removed is refused, and learns it even when the notice was lost", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    const id = await guestId(guest, linked);
    // Simulate a lost notice: the guest is stopped while the host removes it.
    const store = guest.store;
    await guest.portico.close();
    await ok(
      host.post(
        `${self}/collaborations/${linked.collaborationId}/participants/${id}/remove`,
        {},
        host.adminToken,
      ),
      "remove",
    );
    const { startTestPortal } = await import("../helpers/portico.js");
    const back = await startTestPortal({ store, env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8" } });
    (testPortals ?? portals).push(back);
    const r = await ok(back.post(workspacePath(linked, "sync"), { async: false }, back.adminToken), "sync");
    expect(r.success).toBe(false);
    expect(r.summary).toMatch(/ended this portal's participation/);
    expect((await back.get(`${self}/collaborations`, {}, back.adminToken)).collaborations).toEqual([]);
    forget(guest);
  });

  it("deleting the collaboration on the host ends it for the guest", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    await ok(
      host.post(`${self}/collaborations/${linked.collaborationId}/delete`, {}, host.adminToken),
      "delete",
    );
    expect((await host.get(`${self}/collaborations`, {}, host.adminToken)).collaborations).toEqual([]);
    await waitFor("the guest to drop the collaboration", async () => {
      const r = await guest.get(`${self}/collaborations`, {}, guest.adminToken);
      return r.collaborations.length === 0;
    });
  });
});

describe("schedules and realtime", () => {
  it("fires a schedule, keeps it across a restart, and pauses, resumes and deletes it", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    await addItem(host, "scheduled", linked.hostGroup);
    const startTime = Date.now() + 2500;
    await ok(
      guest.post(
        workspacePath(linked, "schedule/update"),
        { startTime, interval: 1, repeatCount: -1 },
        guest.adminToken,
      ),
      "schedule",
    );
    expect(await ok(guest.get(workspacePath(linked, "schedule"), {}, guest.adminToken), "get")).toMatchObject(
      {
        startTime,
        interval: 1,
        repeatCount: -1,
        nextFireTime: startTime,
        state: "active",
      },
    );

    // Restarted before the first fire: the schedule is in the database and fires after.
    const store = guest.store;
    await guest.portico.close();
    forget(guest);
    const { startTestPortal } = await import("../helpers/portico.js");
    const back = await startTestPortal({ store, env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8" } });
    (testPortals ?? portals).push(back);
    const job = await waitFor("the scheduled sync", async () => {
      const r = await back.get(workspacePath(linked, "syncStatus"), {}, back.adminToken);
      return r.status.find((s: any) => s.syncExecType === "scheduled" && s.status === "completed");
    });
    expect(job.startTime).toBeGreaterThanOrEqual(startTime);
    expect((await groupItems(back, linked.guestGroups[0] as string)).has("scheduled")).toBe(true);
    const after = await ok(back.get(workspacePath(linked, "schedule"), {}, back.adminToken), "get");
    expect(after.nextFireTime).toBe(startTime + 3600_000);

    await ok(back.post(workspacePath(linked, "schedule/pause"), {}, back.adminToken), "pause");
    expect((await back.get(workspacePath(linked, "schedule"), {}, back.adminToken)).state).toBe("paused");
    await ok(back.post(workspacePath(linked, "schedule/resume"), {}, back.adminToken), "resume");
    expect((await back.get(workspacePath(linked, "schedule"), {}, back.adminToken)).state).toBe("active");
    await ok(back.post(workspacePath(linked, "schedule/delete"), {}, back.adminToken), "delete");
    expect((await back.get(workspacePath(linked, "schedule"), {}, back.adminToken)).error.code).toBe(400);
    const onHost = await host.post(
      workspacePath(linked, "schedule/update"),
      { interval: 1 },
      host.adminToken,
    );
    expect(onHost.error.messageCode).toBe("COLLAB_0004");
  });

  it("syncs shortly after a change on a realtime link, on either side", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    const guestGroup = linked.guestGroups[0] as string;
    for (const [portal] of [[guest], [host]] as const) {
      await ok(
        portal.post(
          workspacePath(linked, "updatePortalGroupLink"),
          { enableRealtimeSync: true },
          portal.adminToken,
        ),
        "realtime",
      );
    }
    await addItem(guest, "guest change", guestGroup);
    await waitFor("the guest's change on the host", async () =>
      (await groupItems(host, linked.hostGroup)).has("guest change"),
    );
    await addItem(host, "host change", linked.hostGroup);
    await waitFor("the host's change on the guest", async () =>
      (await groupItems(guest, guestGroup)).has("host change"),
    );
    const jobs = (await guest.get(workspacePath(linked, "syncStatus"), {}, guest.adminToken)).status as any[];
    expect(jobs.every((j) => j.syncExecType === "realtime")).toBe(true);
  });

  it("acts once on a change made right after realtime is turned on, on either side", async () => {
    const [host, guest] = await Promise.all([peer(), peer()]);
    const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
    const guestGroup = linked.guestGroups[0] as string;
    const id = await addItem(guest, "right after", undefined);
    // Lets the realtime checks that the setup's events woke run first (they see no realtime link),
    // so that the guest's first check of the link is the one its share wakes, with the item in it.
    // Before turning realtime on recorded the link's fingerprint, that check took what it saw for
    // the baseline and the change never synced.
    await new Promise((r) => setTimeout(r, 1500));
    await ok(
      guest.post(
        workspacePath(linked, "updatePortalGroupLink"),
        { enableRealtimeSync: true },
        guest.adminToken,
      ),
      "realtime",
    );
    await ok(
      guest.post(`/content/users/admin_user/items/${id}/share`, { groups: guestGroup }, guest.adminToken),
      "share",
    );
    await waitFor("the guest's change on the host", async () =>
      (await groupItems(host, linked.hostGroup)).has("right after"),
    );

    // On the host, the check its item's creation wakes is the first: it once nudged (an empty
    // group, nothing to compare with), and the share nudged again.
    const hostItem = await addItem(host, "host right after", undefined);
    await ok(
      host.post(
        workspacePath(linked, "updatePortalGroupLink"),
        { enableRealtimeSync: true },
        host.adminToken,
      ),
      "realtime",
    );
    await new Promise((r) => setTimeout(r, 1500));
    await ok(
      host.post(
        `/content/users/admin_user/items/${hostItem}/share`,
        { groups: linked.hostGroup },
        host.adminToken,
      ),
      "share",
    );
    await waitFor("the host's change on the guest", async () =>
      (await groupItems(guest, guestGroup)).has("host right after"),
    );
    const syncs = async () =>
      (await guest.get(workspacePath(linked, "syncStatus"), {}, guest.adminToken)).status as any[];
    await waitFor("the syncs to end", async () => (await syncs()).every((j) => j.endTime > 0));
    // Any further check has run by now (they wake half a second after a change).
    await new Promise((r) => setTimeout(r, 1500));
    expect((await syncs()).map((j) => j.syncExecType)).toEqual(["realtime", "realtime"]);
  });
});

it("checks the group a link names", async () => {
  const [host, guest] = await Promise.all([peer(), peer()]);
  const linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }]);
  const bad = await guest.post(
    workspacePath(linked, "updatePortalGroupLink"),
    { portalGroupId: "0123456789abcdef0123456789abcdef" },
    guest.adminToken,
  );
  expect(bad.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
  expect(bad.error.message).toContain("'portalGroupId'");
  const group = await createGroup(guest, "another");
  const ws = await ok(
    guest.post(
      workspacePath(linked, "updatePortalGroupLink"),
      { portalGroupId: group, enableRealtimeSync: false },
      guest.adminToken,
    ),
    "relink",
  );
  expect(ws.success).toBe(true);
  const info = await ok(guest.get(workspacePath(linked), {}, guest.adminToken), "workspace");
  const mine = info.participantGroupLinks.find((l: any) => l.portalGroupId !== undefined);
  expect(mine).toMatchObject({
    portalGroupId: group,
    enableRealtimeSync: false,
    accessMode: "sendAndReceive",
  });
});
