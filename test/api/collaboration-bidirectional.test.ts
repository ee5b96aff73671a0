import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  collaborate,
  groupItems,
  type Linked,
  ok,
  startPeer,
  sync,
  workspacePath,
} from "../helpers/collaboration.js";
import { allFeatures, createPointLayer, featureData, shareItem } from "../helpers/hosted-layers.js";
import type { TestPortal } from "../helpers/portico.js";

/**
 * Bidirectional sync of hosted feature layer data between real portals on loopback: edits made
 * on a copy travel back to the origin and the origin's to the copy, conflicts on one feature are
 * decided by the later edit and reported per feature, a sync after a sync moves nothing (no
 * echo), the send direction copies a guest's layer into its host, and three portals converge.
 */

const FIELDS = [
  { name: "name", type: "esriFieldTypeString", length: 40 },
  { name: "n", type: "esriFieldTypeInteger" },
  { name: "GlobalID", type: "esriFieldTypeGlobalID" },
];
const feature = (i: number) => ({
  attributes: { name: `site ${i}`, n: i },
  geometry: { x: -170 + (i % 340), y: -60 + Math.floor(i / 340) * 0.5 },
});

const createLayer = (portal: TestPortal, name: string, count: number, fields = FIELDS) =>
  createPointLayer(portal, name, { fields, feature, count });

async function edit(portal: TestPortal, layer: string, edits: Record<string, unknown>) {
  const r = await ok(portal.post(`${layer}/applyEdits`, edits, portal.adminToken), "applyEdits");
  for (const list of [r.addResults, r.updateResults, r.deleteResults])
    expect(list.every((x: { success: boolean }) => x.success)).toBe(true);
  // Edit moments are milliseconds: the next edit is strictly later on every portal of the test.
  await new Promise((r) => setTimeout(r, 5));
  return r;
}

const nameOf = async (portal: TestPortal, layer: string, oid: number) =>
  (await allFeatures(portal, layer)).get(oid)?.attributes.name;

const byObjectId = (a: { objectId: number }, b: { objectId: number }) => a.objectId - b.objectId;

async function copyLink(portal: TestPortal, linked: Linked, group?: string) {
  await ok(
    portal.post(
      workspacePath(linked, "updatePortalGroupLink"),
      { ...(group ? { portalGroupId: group } : {}), copyFeatureServiceData: true },
      portal.adminToken,
    ),
    "updatePortalGroupLink",
  );
}

describe("bidirectional sync of a host's layer and a guest's copy", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  let origin: { itemId: string; layer: string };
  let copy: string;

  beforeAll(async () => {
    [host, guest] = await Promise.all([startPeer(), startPeer()]);
    linked = await collaborate(host, [{ portal: guest, mode: "receive" }], {
      config: { bidirectionalSyncCapable: true },
    });
    await copyLink(guest, linked, linked.guestGroups[0]);
    origin = await createLayer(host, "Roads", 300);
    await shareItem(host, origin.itemId, linked.hostGroup);
    const status = await sync(guest, linked);
    expect(featureData(status)[0].layers[0]).toMatchObject({ added: 300, failed: 0 });
    const item = (await groupItems(guest, linked.guestGroups[0] as string)).get("Roads");
    copy = `${item.url}/0`;
  }, 120_000);
  afterAll(async () => {
    await Promise.all([host?.stop(), guest?.stop()]);
  });

  it("makes the copy editable, with its origin's capabilities", async () => {
    const service = await ok(guest.get(copy.replace(/\/0$/, ""), {}, guest.adminToken), "service");
    expect(service.capabilities).toBe("Create,Delete,Query,Update,Editing");
  });

  it("moves edits both ways in one sync, decides conflicts by the later edit and reports them", async () => {
    // Feature 5: the host first, the guest later (the copy wins); feature 6 the other way round.
    await edit(host, origin.layer, { updates: [{ attributes: { OBJECTID: 5, name: "host 5 early" } }] });
    await edit(guest, copy, { updates: [{ attributes: { OBJECTID: 5, name: "guest 5 late" } }] });
    await edit(guest, copy, { updates: [{ attributes: { OBJECTID: 6, name: "guest 6 early" } }] });
    await edit(host, origin.layer, { updates: [{ attributes: { OBJECTID: 6, name: "host 6 late" } }] });
    // No conflicts: each side edits, adds and deletes features of its own.
    await edit(guest, copy, {
      updates: [{ attributes: { OBJECTID: 10, name: "guest 10" } }],
      deletes: [20],
      adds: [{ attributes: { name: "added on the guest", n: -1 }, geometry: { x: 1, y: 1 } }],
    });
    await edit(host, origin.layer, {
      updates: [{ attributes: { OBJECTID: 11, name: "host 11" } }],
      deletes: [21],
      adds: [{ attributes: { name: "added on the host", n: -2 }, geometry: { x: 2, y: 2 } }],
    });

    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const [layer] = featureData(status)[0].layers;
    expect(layer.editsBack).toMatchObject({ added: 1, updated: 2, deleted: 1, failed: 0 });
    expect([...layer.conflicts].sort(byObjectId)).toEqual([
      { objectId: 5, winner: "copy", reason: expect.stringMatching(/both sides updated/) },
      { objectId: 6, winner: "origin", reason: expect.stringMatching(/both sides updated/) },
    ]);

    const [mine, theirs] = await Promise.all([allFeatures(host, origin.layer), allFeatures(guest, copy)]);
    expect(theirs).toEqual(mine);
    expect(mine.get(5).attributes.name).toBe("guest 5 late");
    expect(mine.get(6).attributes.name).toBe("host 6 late");
    expect(mine.get(10).attributes.name).toBe("guest 10");
    expect(mine.get(11).attributes.name).toBe("host 11");
    expect(mine.has(20) || mine.has(21)).toBe(false);
    // Both added a feature since the last sync, each under the next object id of its side: the
    // guest's got a fresh one at the host, and both features are on both sides.
    const added = [...mine.values()].filter((f) => f.attributes.n < 0).map((f) => f.attributes.name);
    expect(added.sort()).toEqual(["added on the guest", "added on the host"]);
    expect(mine.size).toBe(300);
  }, 60_000);

  it("moves nothing on the next sync: what a sync stored is not sent back (no echo)", async () => {
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(featureData(status)).toEqual([]);
  }, 60_000);

  it("decides a delete against an update by the later edit too", async () => {
    // 30: the guest deletes, then the host updates (the update wins: the feature stays).
    await edit(guest, copy, { deletes: [30] });
    await edit(host, origin.layer, { updates: [{ attributes: { OBJECTID: 30, name: "host 30 kept" } }] });
    // 31: the host deletes, then the guest updates (the update wins: the feature comes back).
    await edit(host, origin.layer, { deletes: [31] });
    await edit(guest, copy, { updates: [{ attributes: { OBJECTID: 31, name: "guest 31 revived" } }] });
    // 32: the host updates, then the guest deletes (the delete wins).
    await edit(host, origin.layer, { updates: [{ attributes: { OBJECTID: 32, name: "host 32" } }] });
    await edit(guest, copy, { deletes: [32] });

    let status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const [layer] = featureData(status)[0].layers;
    expect([...layer.conflicts].sort(byObjectId)).toEqual([
      { objectId: 30, winner: "origin", reason: expect.stringMatching(/copy deleted the feature/) },
      { objectId: 31, winner: "copy", reason: expect.stringMatching(/origin deleted the feature/) },
      { objectId: 32, winner: "copy", reason: expect.stringMatching(/copy deleted the feature/) },
    ]);
    const [mine, theirs] = await Promise.all([allFeatures(host, origin.layer), allFeatures(guest, copy)]);
    expect(theirs).toEqual(mine);
    expect(mine.get(30).attributes.name).toBe("host 30 kept");
    expect(mine.get(31).attributes.name).toBe("guest 31 revived");
    expect(mine.has(32)).toBe(false);

    status = await sync(guest, linked);
    expect(featureData(status)).toEqual([]);
  }, 60_000);

  it("refuses a copy's edits that applyEdits would refuse, feature by feature", async () => {
    await edit(guest, copy, { updates: [{ attributes: { OBJECTID: 40, name: "fine" } }] });
    // Written straight into the copy's table: a value applyEdits refuses (longer than the field).
    const table = `fl_${(await groupItems(guest, linked.guestGroups[0] as string)).get("Roads").id}_0`;
    const db = guest.portico.db;
    const { sql } = await import("kysely");
    // As an edit would: the layer's moment moves on and the row takes it.
    await sql`UPDATE feature_layers SET data_last_edit_date = data_last_edit_date + 1 WHERE table_name = ${table}`.execute(
      db.kysely,
    );
    await sql`
      UPDATE ${sql.id(table)} SET f_name = ${"x".repeat(60)},
        edit_moment = (SELECT data_last_edit_date FROM feature_layers WHERE table_name = ${table})
      WHERE objectid = 41
    `.execute(db.kysely);
    const status = await sync(guest, linked);
    const [layer] = featureData(status)[0].layers;
    expect(layer.editsBack).toMatchObject({ updated: 1, failed: 1 });
    expect(layer.editsBack.failures).toEqual([{ objectId: 41, reason: expect.stringMatching(/name/) }]);
    expect(await nameOf(host, origin.layer, 40)).toBe("fine");
    expect(await nameOf(host, origin.layer, 41)).toBe("site 40");
  }, 60_000);

  it("keeps a copy read-only when a layer has no GlobalID field, saying why", async () => {
    const plain = await createLayer(
      host,
      "Plain",
      10,
      FIELDS.filter((f) => f.type !== "esriFieldTypeGlobalID"),
    );
    await shareItem(host, plain.itemId, linked.hostGroup);
    const status = await sync(guest, linked);
    const [data] = featureData(status).filter((d: any) => d.title === "Plain");
    expect(data).toMatchObject({ mode: "copy", readOnly: expect.stringMatching(/layer 0 has no GlobalID/) });
    const item = (await groupItems(guest, linked.guestGroups[0] as string)).get("Plain");
    const refused = await guest.post(
      `${item.url}/0/applyEdits`,
      { updates: [{ attributes: { OBJECTID: 1, name: "x" } }] },
      guest.adminToken,
    );
    expect(refused.error?.code).toBe(403);
  }, 60_000);
});

describe("the send direction: a guest's layer copied into its host", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  let origin: { itemId: string; layer: string };
  let copy: string;
  const COUNT = 1_200;

  beforeAll(async () => {
    [host, guest] = await Promise.all([startPeer(), startPeer()]);
    linked = await collaborate(host, [{ portal: guest, mode: "send" }], { hostMode: "receive" });
    await copyLink(host, linked);
    origin = await createLayer(guest, "Parcels", COUNT);
    await shareItem(guest, origin.itemId, linked.guestGroups[0] as string);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([host?.stop(), guest?.stop()]);
  });

  it(`copies ${COUNT} features into a hosted service of the host`, async () => {
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(featureData(status, "send")).toEqual([
      {
        id: origin.itemId,
        title: "Parcels",
        mode: "copy",
        layers: [{ id: 0, added: COUNT, updated: 0, deleted: 0, failed: 0, failures: [] }],
      },
    ]);
    const item = (await groupItems(host, linked.hostGroup)).get("Parcels");
    expect(item.url).toBe(`${host.portico.address}/rest/services/Parcels/FeatureServer`);
    copy = `${item.url}/0`;
    const [mine, theirs] = await Promise.all([allFeatures(guest, origin.layer), allFeatures(host, copy)]);
    expect(theirs.size).toBe(COUNT);
    expect(theirs).toEqual(mine);
  }, 120_000);

  it("moves the host copy's edits to the guest and the guest's to the copy, with a conflict", async () => {
    await edit(guest, origin.layer, { updates: [{ attributes: { OBJECTID: 3, name: "guest 3 early" } }] });
    await edit(host, copy, { updates: [{ attributes: { OBJECTID: 3, name: "host 3 late" } }] });
    await edit(host, copy, { updates: [{ attributes: { OBJECTID: 4, name: "host 4" } }], deletes: [9] });
    await edit(guest, origin.layer, { updates: [{ attributes: { OBJECTID: 5, name: "guest 5" } }] });
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const [layer] = featureData(status, "send")[0].layers;
    expect(layer.editsBack).toMatchObject({ updated: 2, deleted: 1, failed: 0 });
    expect(layer.conflicts).toEqual([
      { objectId: 3, winner: "copy", reason: expect.stringMatching(/both sides updated/) },
    ]);
    const [mine, theirs] = await Promise.all([allFeatures(guest, origin.layer), allFeatures(host, copy)]);
    expect(theirs).toEqual(mine);
    expect(mine.get(3).attributes.name).toBe("host 3 late");
    expect(mine.get(4).attributes.name).toBe("host 4");
    expect(mine.get(5).attributes.name).toBe("guest 5");
    expect(mine.has(9)).toBe(false);

    const again = await sync(guest, linked);
    expect(featureData(again)).toEqual([]);
  }, 120_000);
});

describe("three portals: a host and two guests editing copies of one layer", () => {
  let host: TestPortal;
  let first: TestPortal;
  let second: TestPortal;
  let linked: Linked;
  let origin: { itemId: string; layer: string };
  const copies: string[] = [];

  beforeAll(async () => {
    [host, first, second] = await Promise.all([startPeer(), startPeer(), startPeer()]);
    linked = await collaborate(host, [
      { portal: first, mode: "receive" },
      { portal: second, mode: "receive" },
    ]);
    await copyLink(first, linked, linked.guestGroups[0]);
    await copyLink(second, linked, linked.guestGroups[1]);
    origin = await createLayer(host, "Wells", 50);
    await shareItem(host, origin.itemId, linked.hostGroup);
    for (const [i, guest] of [first, second].entries()) {
      await sync(guest, linked);
      const item = (await groupItems(guest, linked.guestGroups[i] as string)).get("Wells");
      copies.push(`${item.url}/0`);
    }
  }, 120_000);
  afterAll(async () => {
    await Promise.all([host?.stop(), first?.stop(), second?.stop()]);
  });

  it("converges: the later of two guests' edits wins, though it reaches the host last", async () => {
    const [one, two] = copies as [string, string];
    await edit(second, two, { updates: [{ attributes: { OBJECTID: 7, name: "second, early" } }] });
    await edit(first, one, { updates: [{ attributes: { OBJECTID: 7, name: "first, late" } }] });
    await edit(first, one, { updates: [{ attributes: { OBJECTID: 8, name: "first 8" } }] });
    await edit(second, two, { deletes: [9] });

    await sync(first, linked);
    const status = await sync(second, linked);
    // The host holds the first guest's edit of 7, made after the second's: the second's loses.
    expect(featureData(status)[0].layers[0].conflicts).toEqual([
      { objectId: 7, winner: "origin", reason: expect.stringMatching(/both sides updated/) },
    ]);
    await sync(first, linked);
    const [h, a, b] = await Promise.all([
      allFeatures(host, origin.layer),
      allFeatures(first, one),
      allFeatures(second, two),
    ]);
    expect(a).toEqual(h);
    expect(b).toEqual(h);
    expect(h.get(7).attributes.name).toBe("first, late");
    expect(h.get(8).attributes.name).toBe("first 8");
    expect(h.has(9)).toBe(false);
    for (const guest of [first, second]) expect(featureData(await sync(guest, linked))).toEqual([]);
  }, 120_000);
});
