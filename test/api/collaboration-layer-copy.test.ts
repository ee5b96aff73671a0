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
import {
  allFeatures,
  createPointLayer,
  featureData,
  queryLayer,
  shareItem,
} from "../helpers/hosted-layers.js";
import type { TestPortal } from "../helpers/portico.js";

/**
 * Hosted feature layers copied between real portals on loopback (`copyFeatureServiceData`): a
 * first copy of 10,000 features with their attachment, then only what changed (updates, adds,
 * deletes, a schema change), nothing when nothing changed, and the fallback to a reference.
 */

const FEATURES = 10_000;
const KINDS = {
  type: "codedValue",
  name: "kinds",
  codedValues: [0, 1, 2, 3, 4].map((c) => ({ name: `k${c}`, code: c })),
};
const FIELDS = [
  { name: "name", type: "esriFieldTypeString", length: 40 },
  { name: "n", type: "esriFieldTypeInteger" },
  { name: "seen", type: "esriFieldTypeDate" },
  { name: "kind", type: "esriFieldTypeSmallInteger", domain: KINDS },
  { name: "GlobalID", type: "esriFieldTypeGlobalID" },
];
const feature = (i: number) => ({
  attributes: {
    name: `site ${i}`,
    n: i * 3 - 1000,
    seen: Date.UTC(2001, 0, 1) + i * 86_400_000,
    kind: i % 5,
  },
  geometry: { x: -179.5 + (i % 360) * 0.99, y: -60 + Math.floor(i / 360) * 0.5 },
});

const createLayer = (portal: TestPortal, name: string, count: number, definition?: Record<string, unknown>) =>
  createPointLayer(portal, name, { fields: FIELDS, feature, count, definition });

const layerOf = (item: { url: string }) => `${item.url}/0`;

describe("copies of hosted feature layers", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  let guestGroup: string;
  let origin: { itemId: string; layer: string };
  let copyLayer: string;

  beforeAll(async () => {
    [host, guest] = await Promise.all([startPeer(), startPeer()]);
    // Not bidirectional: the copy is read-only (bidirectional copies: collaboration-bidirectional.test.ts).
    linked = await collaborate(host, [{ portal: guest, mode: "receive" }], {
      config: { bidirectionalSyncCapable: false },
    });
    guestGroup = linked.guestGroups[0] as string;
    await ok(
      guest.post(
        workspacePath(linked, "updatePortalGroupLink"),
        { portalGroupId: guestGroup, copyFeatureServiceData: true, copyByRefIfCopyFail: true },
        guest.adminToken,
      ),
      "updatePortalGroupLink",
    );
    origin = await createLayer(host, "Sites", FEATURES, { hasAttachments: true });
    const form = new FormData();
    form.append("f", "json");
    form.append("token", host.adminToken);
    form.append(
      "attachment",
      new Blob([Buffer.from("a photo of site 7")], { type: "image/jpeg" }),
      "site7.jpg",
    );
    const res = await fetch(`${origin.layer}/8/addAttachment`, { method: "POST", body: form });
    const added = (await res.json()) as { addAttachmentResult: { success: boolean } };
    expect(added.addAttachmentResult.success).toBe(true);
    await shareItem(host, origin.itemId, linked.hostGroup);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([host?.stop(), guest?.stop()]);
  });

  it("copies a layer of 10,000 features as a hosted service of the receiving portal", async () => {
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(featureData(status)).toEqual([
      {
        id: origin.itemId,
        title: "Sites",
        mode: "copy",
        layers: [{ id: 0, added: FEATURES, updated: 0, deleted: 0, failed: 0, failures: [] }],
      },
    ]);
    const copy = (await groupItems(guest, guestGroup)).get("Sites");
    expect(copy.url).toBe(`${guest.portico.address}/rest/services/Sites/FeatureServer`);
    expect(copy.owner).toBe("admin_user");
    copyLayer = layerOf(copy);
    const [mine, theirs] = await Promise.all([
      allFeatures(host, origin.layer),
      allFeatures(guest, copyLayer),
    ]);
    expect(theirs.size).toBe(FEATURES);
    expect(theirs).toEqual(mine);
    const definition = await ok(guest.get(copyLayer, {}, guest.adminToken), "layer");
    const kind = definition.fields.find((f: any) => f.name === "kind");
    expect(kind.domain).toEqual(KINDS);
    expect(definition.hasAttachments).toBe(true);
    const service = await ok(guest.get(copy.url, {}, guest.adminToken), "service");
    expect(service.capabilities).toBe("Query");
    const refused = await guest.post(
      `${copyLayer}/applyEdits`,
      { updates: [{ attributes: { OBJECTID: 1, name: "edited on the copy" } }] },
      guest.adminToken,
    );
    // Refused even to the administrator: edits there would never reach the origin.
    expect(refused.error?.code).toBe(403);
    expect(refused.error.details.join(" ")).toMatch(/read-only; edit its origin/);
    const attachments = await ok(
      guest.get(`${copyLayer}/8/attachments`, {}, guest.adminToken),
      "attachments",
    );
    expect(attachments.attachmentInfos).toMatchObject([
      { name: "site7.jpg", contentType: "image/jpeg", size: 17 },
    ]);
    const bytes = await fetch(
      `${copyLayer}/8/attachments/${attachments.attachmentInfos[0].id}?token=${guest.adminToken}`,
    );
    expect(await bytes.text()).toBe("a photo of site 7");
  }, 120_000);

  it("moves only the 100 edits made since, then the deletes, then nothing", async () => {
    const updates = Array.from({ length: 60 }, (_, i) => ({
      attributes: { OBJECTID: 100 + i * 7, name: `renamed ${i}`, kind: 4 },
    }));
    const adds = Array.from({ length: 40 }, (_, i) => feature(FEATURES + i));
    await ok(host.post(`${origin.layer}/applyEdits`, { adds, updates }, host.adminToken), "applyEdits");
    let status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(featureData(status)[0].layers).toEqual([
      { id: 0, added: 40, updated: 60, deleted: 0, failed: 0, failures: [] },
    ]);
    expect(await allFeatures(guest, copyLayer)).toEqual(await allFeatures(host, origin.layer));

    await ok(
      host.post(
        `${origin.layer}/deleteFeatures`,
        { where: "OBJECTID <= 25 OR OBJECTID = 8" },
        host.adminToken,
      ),
      "deleteFeatures",
    );
    status = await sync(guest, linked);
    expect(featureData(status)[0].layers).toEqual([
      { id: 0, added: 0, updated: 0, deleted: 25, failed: 0, failures: [] },
    ]);
    const copied = await allFeatures(guest, copyLayer);
    expect(copied.size).toBe(FEATURES + 40 - 25);
    expect(copied).toEqual(await allFeatures(host, origin.layer));

    status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    expect(featureData(status)).toEqual([]);
    expect(status.participantTasks[0].succeeded).toEqual([]);
  }, 120_000);

  it("moves a layer's schema change with the values of the new field", async () => {
    await ok(
      host.post(
        `${host.portico.address}/rest/admin/services/Sites/FeatureServer/0/addToDefinition`,
        { addToDefinition: { fields: [{ name: "note", type: "esriFieldTypeString", length: 20 }] } },
        host.adminToken,
      ),
      "add field",
    );
    await ok(
      host.post(
        `${origin.layer}/updateFeatures`,
        { features: [{ attributes: { OBJECTID: 500, note: "fenced" } }] },
        host.adminToken,
      ),
      "update",
    );
    const status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const [data] = featureData(status);
    expect(data.mode).toBe("copy");
    const definition = await ok(guest.get(copyLayer, {}, guest.adminToken), "layer");
    expect(definition.fields.map((f: any) => f.name)).toContain("note");
    const one = await queryLayer(guest, copyLayer, { where: "note = 'fenced'" });
    expect(one.features.map((f: any) => f.attributes.OBJECTID)).toEqual([500]);
    expect(await allFeatures(guest, copyLayer)).toEqual(await allFeatures(host, origin.layer));
  }, 120_000);

  it("falls back to a reference when a copy is over maxItemSizeInMB, or fails the item without the flag", async () => {
    await ok(
      host.post(
        `/portals/self/collaborations/${linked.collaborationId}/workspaces/${linked.workspaceId}/updateInfo`,
        { config: { maxItemSizeInMB: 0.01 } },
        host.adminToken,
      ),
      "updateInfo",
    );
    const big = await createLayer(host, "Big", 300);
    await shareItem(host, big.itemId, linked.hostGroup);
    let status = await sync(guest, linked);
    expect(status.status).toBe("completed");
    const [reference] = featureData(status).filter((d: any) => d.title === "Big");
    expect(reference).toMatchObject({ mode: "reference", layers: [] });
    expect(reference.reason).toMatch(/maxItemSizeInMB/);
    const copy = (await groupItems(guest, guestGroup)).get("Big");
    expect(copy.url).toBe(`${host.portico.address}/rest/services/Big/FeatureServer`);
    // A reference is not tried again until its origin's definition changes.
    status = await sync(guest, linked);
    expect(featureData(status)).toEqual([]);

    await ok(
      guest.post(
        workspacePath(linked, "updatePortalGroupLink"),
        { copyByRefIfCopyFail: false },
        guest.adminToken,
      ),
      "updatePortalGroupLink",
    );
    const other = await createLayer(host, "Other", 300);
    await shareItem(host, other.itemId, linked.hostGroup);
    status = await sync(guest, linked);
    expect(status.status).toBe("completed_with_failures");
    const task = status.participantTasks[0];
    expect(task.failed).toEqual([
      {
        id: other.itemId,
        title: "Other",
        reason: expect.stringMatching(/could not be copied: .*maxItemSizeInMB/),
      },
    ]);
    expect(task.succeeded.map((s: any) => s.id)).not.toContain(other.itemId);
    expect((await groupItems(guest, guestGroup)).has("Other")).toBe(false);
  }, 120_000);
});

/*
 * A host on SQLite (DATABASE_URL set empty) and a guest on the run's engine: PostgreSQL when the
 * suite runs on it, so the copy crosses engines (integers, doubles, dates and text read back by one
 * and written by the other).
 */
describe("a copy between an SQLite host and a guest on the run's engine", () => {
  let host: TestPortal;
  let guest: TestPortal;
  afterAll(async () => {
    await Promise.all([host?.stop(), guest?.stop()]);
  });

  it("copies, then moves edits and deletes, then nothing", async () => {
    [host, guest] = await Promise.all([startPeer({ DATABASE_URL: "" }), startPeer()]);
    expect(host.portico.db.engine).toBe("sqlite");
    const linked = await collaborate(host, [{ portal: guest, mode: "receive" }]);
    const group = linked.guestGroups[0] as string;
    await ok(
      guest.post(
        workspacePath(linked, "updatePortalGroupLink"),
        { portalGroupId: group, copyFeatureServiceData: true },
        guest.adminToken,
      ),
      "link",
    );
    const origin = await createLayer(host, "Mixed", 2000);
    await shareItem(host, origin.itemId, linked.hostGroup);
    let status = await sync(guest, linked);
    expect(featureData(status)[0].layers[0]).toMatchObject({ added: 2000, failed: 0 });
    const copy = layerOf((await groupItems(guest, group)).get("Mixed"));
    expect(await allFeatures(guest, copy)).toEqual(await allFeatures(host, origin.layer));

    await ok(
      host.post(
        `${origin.layer}/applyEdits`,
        {
          updates: [{ attributes: { OBJECTID: 3, name: 'Café "ü" à l\'ouest', n: -7 } }],
          deletes: [5, 6],
          adds: [feature(99_999)],
        },
        host.adminToken,
      ),
      "applyEdits",
    );
    status = await sync(guest, linked);
    expect(featureData(status)[0].layers[0]).toMatchObject({ added: 1, updated: 1, deleted: 2, failed: 0 });
    expect(await allFeatures(guest, copy)).toEqual(await allFeatures(host, origin.layer));
    status = await sync(guest, linked);
    expect(featureData(status)).toEqual([]);
  }, 120_000);
});
