import { createHash } from "node:crypto";
import {
  addItemPart,
  addItemResource,
  cancelItemUpload,
  commitItemUpload,
  createItem,
  getItem,
  getItemData,
  getItemParts,
  getItemResource,
  getItemResources,
  getItemStatus,
  removeItemResource,
  setItemAccess,
  updateItemResource,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

/** A 1×1 PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

/**
 * Esri's client (@esri/arcgis-rest-portal 4.10.2) managing an item's resources on a running
 * portico, each answer checked against the one ArcGIS documents.
 */
describe("Esri arcgis-rest-js item resource functions", () => {
  let portal: TestPortal;
  let owner: ArcGISIdentityManager;
  let reader: ArcGISIdentityManager;

  beforeAll(async () => {
    portal = await startTestPortal();
    const o = await portal.addUser("resources_owner");
    const r = await portal.addUser("resources_reader");
    const signIn = (username: string, password: string) =>
      ArcGISIdentityManager.signIn({ username, password, portal: portal.api });
    owner = await signIn(o.username, o.password);
    reader = await signIn(r.username, r.password);
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("adds, lists, reads, updates and removes resources", async () => {
    const { id } = await createItem({ item: { title: "Story", type: "StoryMap" }, authentication: owner });
    const before = (await getItem(id, { authentication: owner })).modified;

    // A file in a folder, and text.
    const added = await addItemResource({
      id,
      resource: new Blob([PNG], { type: "image/png" }),
      name: "logo.png",
      prefix: "images",
      authentication: owner,
    });
    expect(added).toEqual({ success: true, itemId: id, owner: owner.username, folder: null });
    await addItemResource({ id, content: '{"theme":"dark"}', name: "config.json", authentication: owner });
    await addItemResource({
      id,
      content: "only mine",
      name: "draft.txt",
      private: true,
      authentication: owner,
    });

    const listed = await getItemResources(id, { authentication: owner });
    expect(listed).toMatchObject({ total: 3, start: 1, num: 1000, nextStart: -1 });
    expect(listed.resources).toEqual([
      { resource: "config.json", created: expect.any(Number), size: 16, access: "inherit" },
      { resource: "draft.txt", created: expect.any(Number), size: 9, access: "private" },
      { resource: "images/logo.png", created: expect.any(Number), size: PNG.length, access: "inherit" },
    ]);
    expect((await getItem(id, { authentication: owner })).modified).toBeGreaterThan(before);

    const logo: Blob = await getItemResource(id, { fileName: "images/logo.png", authentication: owner });
    expect(logo.type).toBe("image/png");
    expect(Buffer.from(await logo.arrayBuffer())).toEqual(PNG);
    expect(
      await getItemResource(id, { fileName: "config.json", readAs: "json", authentication: owner }),
    ).toEqual({
      theme: "dark",
    });

    const updated = await updateItemResource({
      id,
      content: '{"theme":"light"}',
      name: "config.json",
      authentication: owner,
    });
    expect(updated).toEqual({ success: true, itemId: id, owner: owner.username, folder: null });
    expect(
      await getItemResource(id, { fileName: "config.json", readAs: "json", authentication: owner }),
    ).toEqual({
      theme: "light",
    });

    expect(await removeItemResource({ id, resource: "images/logo.png", authentication: owner })).toEqual({
      success: true,
    });
    expect((await getItemResources(id, { authentication: owner })).resources?.map((r) => r.resource)).toEqual(
      ["config.json", "draft.txt"],
    );
    expect(await removeItemResource({ id, deleteAll: true, authentication: owner })).toEqual({
      success: true,
    });
    expect(await getItemResources(id, { authentication: owner })).toEqual({
      total: 0,
      start: 1,
      num: 1000,
      nextStart: -1,
      resources: [],
    });

    // Every change was an update of the item.
    const updates = (await outbox(portal)).filter((e) => e.object_id === id && e.operation === "update");
    expect(updates).toHaveLength(6);
  });

  it("shows a reader the item's resources without the private ones or their access", async () => {
    const { id } = await createItem({
      item: { title: "Shared story", type: "StoryMap" },
      authentication: owner,
    });
    await setItemAccess({ id, owner: owner.username, access: "org", authentication: owner });
    await addItemResource({ id, content: "hello", name: "hello.txt", authentication: owner });
    await addItemResource({
      id,
      content: "secret",
      name: "secret.txt",
      private: true,
      authentication: owner,
    });
    const listed = await getItemResources(id, { authentication: reader });
    expect(listed.resources).toEqual([{ resource: "hello.txt", created: expect.any(Number), size: 5 }]);
    expect(await getItemResource(id, { fileName: "hello.txt", readAs: "text", authentication: reader })).toBe(
      "hello",
    );
    // getItemResource hands back whatever body it gets, an error envelope too.
    expect(
      await getItemResource(id, { fileName: "secret.txt", readAs: "json", authentication: reader }),
    ).toMatchObject({ error: { code: 400, message: "Not found." } });
    await expect(
      addItemResource({ id, owner: owner.username, content: "x", name: "x.txt", authentication: reader }),
    ).rejects.toThrow(/GWM_0004/);
  });

  it("uploads an item's data in parts, out of order, and commits it with new details", async () => {
    const created = await createItem({
      item: { title: "Big table", type: "CSV" },
      multipart: true,
      filename: "big.csv",
      authentication: owner,
    });
    expect(created).toEqual({ success: true, id: expect.any(String), folder: null });
    const { id } = created;
    expect(await getItemStatus({ id, authentication: owner })).toEqual({
      itemId: id,
      status: "partial",
      statusMessage: "partial",
    });
    // Not finished: no data before the commit.
    expect(await getItemData(id, { authentication: owner })).toBeUndefined();

    // Parts that are not whole chunks of storage, so the commit has to cut them again.
    const one = Buffer.alloc(1024 * 1024 + 300_000, "a");
    const two = Buffer.alloc(1024 * 1024 + 7, "b");
    const three = Buffer.from("\nlast line\n");
    for (const [partNum, bytes] of [
      [3, three],
      [1, one],
      [2, two],
    ] as const) {
      expect(await addItemPart({ id, partNum, file: new Blob([bytes]), authentication: owner })).toEqual({
        success: true,
        id,
      });
    }
    expect(await getItemParts({ id, authentication: owner })).toEqual({ parts: [1, 2, 3] });

    expect(
      await commitItemUpload({ id, item: { title: "Big table, done", type: "CSV" }, authentication: owner }),
    ).toEqual({
      success: true,
      id,
    });
    expect(await getItemStatus({ id, authentication: owner })).toMatchObject({ status: "completed" });
    const whole = Buffer.concat([one, two, three]);
    const data: Blob = await getItemData(id, { file: true, authentication: owner });
    const got = Buffer.from(await data.arrayBuffer());
    expect(got.length).toBe(whole.length);
    expect(createHash("sha256").update(got).digest("hex")).toBe(
      createHash("sha256").update(whole).digest("hex"),
    );
    const item = await getItem(id, { authentication: owner });
    expect(item).toMatchObject({ title: "Big table, done", size: whole.length });
    await expect(getItemParts({ id, authentication: owner })).rejects.toThrow(/no upload in parts/);
  });

  it("cancels an upload in parts: its parts go, the item stays without data", async () => {
    const { id } = await createItem({
      item: { title: "Abandoned", type: "CSV" },
      multipart: true,
      filename: "abandoned.csv",
      authentication: owner,
    });
    await addItemPart({ id, partNum: 1, file: new Blob(["x,y\n"]), authentication: owner });
    expect(await cancelItemUpload({ id, authentication: owner })).toEqual({ success: true, id });
    expect(await getItemStatus({ id, authentication: owner })).toMatchObject({ status: "completed" });
    expect(await getItemData(id, { authentication: owner })).toBeUndefined();
    await expect(
      commitItemUpload({ id, item: { title: "Abandoned", type: "CSV" }, authentication: owner }),
    ).rejects.toThrow(/no upload in parts/);
  });
});
