import { getViewSources } from "@esri/arcgis-rest-feature-service";
import {
  addItemData,
  addItemRelationship,
  createFolder,
  createGroup,
  createItem,
  createItemInFolder,
  getItem,
  getItemData,
  getItemGroups,
  getItemInfo,
  getItemMetadata,
  getRelatedItems,
  getUserContent,
  moveItem,
  protectItem,
  reassignItem,
  removeFolder,
  removeItem,
  removeItemRelationship,
  removeItemThumbnail,
  setItemAccess,
  shareItemWithGroup,
  unprotectItem,
  updateItem,
  updateItemInfo,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, request } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

/** A 1×1 PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

/**
 * Esri's client (@esri/arcgis-rest-portal 4.10.2) managing items on a running portico: folders,
 * data, moves, protection, access, reassignment, relationships, the info folder and an item's
 * groups, each checked against the answer ArcGIS documents.
 */
describe("Esri arcgis-rest-js item functions", () => {
  let portal: TestPortal;
  let owner: ArcGISIdentityManager;
  let reader: ArcGISIdentityManager;
  let admin: ArcGISIdentityManager;
  let readerName: string;

  beforeAll(async () => {
    portal = await startTestPortal();
    const o = await portal.addUser("items_owner", "org_publisher");
    const r = await portal.addUser("items_reader");
    readerName = r.username;
    const signIn = (username: string, password: string) =>
      ArcGISIdentityManager.signIn({ username, password, portal: portal.api });
    owner = await signIn(o.username, o.password);
    reader = await signIn(r.username, r.password);
    admin = await signIn(ADMIN.username, ADMIN.password);
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("creates a folder and an item in it, lists it, adds data, updates, moves, protects and removes it", async () => {
    const folder = await createFolder({ title: "Esri Folder", authentication: owner });
    expect(folder).toMatchObject({
      success: true,
      folder: { title: "Esri Folder", username: owner.username },
    });
    const created = await createItemInFolder({
      item: { title: "In a folder", type: "Web Map", tags: ["f"] },
      folderId: folder.folder.id,
      authentication: owner,
    });
    expect(created).toMatchObject({ success: true, folder: folder.folder.id });

    const content = await getUserContent({ folderId: folder.folder.id, authentication: owner });
    expect(content.currentFolder).toMatchObject({ id: folder.folder.id, title: "Esri Folder" });
    expect(content.items.map((i) => i.id)).toEqual([created.id]);
    expect(content.total).toBe(1);

    // No data yet: Esri's client reads ArcGIS's empty answer as nothing.
    expect(await getItemData(created.id, { authentication: owner })).toBeUndefined();
    const added = await addItemData({
      id: created.id,
      text: '{"operationalLayers":[]}',
      authentication: owner,
    });
    expect(added).toMatchObject({ success: true, id: created.id });
    expect(await getItemData(created.id, { authentication: owner })).toEqual({ operationalLayers: [] });

    const updated = await updateItem({
      item: { id: created.id, snippet: "Now summarised" },
      authentication: owner,
    });
    expect(updated).toEqual({ success: true, id: created.id });
    expect((await getItem(created.id, { authentication: owner })).snippet).toBe("Now summarised");

    const moved = await moveItem({ itemId: created.id, folderId: "/", authentication: owner });
    expect(moved).toMatchObject({ success: true, itemId: created.id, owner: owner.username, folder: null });
    expect((await getUserContent({ authentication: owner })).items.map((i) => i.id)).toContain(created.id);

    expect(await protectItem({ id: created.id, authentication: owner })).toEqual({ success: true });
    expect((await getItem(created.id, { authentication: owner })).protected).toBe(true);
    await expect(removeItem({ id: created.id, authentication: owner })).rejects.toThrow(/protected/);
    expect(await unprotectItem({ id: created.id, authentication: owner })).toEqual({ success: true });
    expect(await removeItem({ id: created.id, authentication: owner })).toMatchObject({
      success: true,
      itemId: created.id,
    });
    await expect(getItem(created.id, { authentication: owner })).rejects.toThrow();

    const removed = await removeFolder({ folderId: folder.folder.id, authentication: owner });
    expect(removed).toEqual({
      success: true,
      folder: { username: owner.username, id: folder.folder.id, title: "Esri Folder" },
    });
  });

  it("sets an item's access and lists its groups by the caller's membership", async () => {
    const item = await createItem({ item: { title: "Shared map", type: "Web Map" }, authentication: owner });
    const mine = await createGroup({
      group: { title: "Owner's group", access: "org" },
      authentication: owner,
    });
    const other = await createGroup({
      group: { title: "Admin's group", access: "org" },
      authentication: admin,
    });
    const hidden = await createGroup({
      group: { title: "Hidden group", access: "private" },
      authentication: admin,
    });
    await request(`${portal.api}/community/groups/${other.group.id}/addUsers`, {
      params: { users: owner.username },
      authentication: admin,
    });
    await request(`${portal.api}/community/groups/${hidden.group.id}/addUsers`, {
      params: { users: owner.username },
      authentication: admin,
    });
    for (const group of [mine, other, hidden]) {
      const shared = await shareItemWithGroup({
        id: item.id,
        groupId: group.group.id,
        authentication: owner,
      });
      expect(shared.notSharedWith).toEqual([]);
    }

    const org = await setItemAccess({ id: item.id, access: "org", authentication: owner });
    expect(org).toMatchObject({ itemId: item.id, notSharedWith: [] });
    expect((await getItem(item.id, { authentication: owner })).access).toBe("org");

    const ofOwner = await getItemGroups(item.id, { authentication: owner });
    expect(ofOwner.admin?.map((g) => g.id)).toEqual([mine.group.id]);
    expect(ofOwner.member?.map((g) => g.title).sort()).toEqual(["Admin's group", "Hidden group"]);
    expect(ofOwner.other).toEqual([]);
    // The reader sees the item (org) and the org groups, as groups it is not in; not the private one.
    const ofReader = await getItemGroups(item.id, { authentication: reader });
    expect(ofReader.admin).toEqual([]);
    expect(ofReader.member).toEqual([]);
    expect(ofReader.other?.map((g) => g.title)).toEqual(["Admin's group", "Owner's group"]);
    expect(ofReader.other?.[0]).toMatchObject({
      userMembership: { username: readerName, memberType: "none" },
    });
  });

  it("reassigns an item to another user as an administrator", async () => {
    const item = await createItem({
      item: { title: "To hand over", type: "Web Map" },
      authentication: owner,
    });
    const reassigned = await reassignItem({
      id: item.id,
      currentOwner: owner.username,
      targetUsername: readerName,
      authentication: admin,
    });
    expect(reassigned).toEqual({ success: true, itemId: item.id });
    expect((await getItem(item.id, { authentication: admin })).owner).toBe(readerName);
  });

  it("relates items, lists them in both directions and deletes the relationship", async () => {
    const map = await createItem({ item: { title: "Map", type: "Web Map" }, authentication: owner });
    const layer = await createItem({
      item: { title: "Layer", type: "Feature Service" },
      authentication: owner,
    });
    const added = await addItemRelationship({
      originItemId: map.id,
      destinationItemId: layer.id,
      relationshipType: "Map2Service",
      authentication: owner,
    });
    expect(added).toEqual({ success: true });

    const forward = await getRelatedItems({
      id: map.id,
      relationshipType: "Map2Service",
      direction: "forward",
      authentication: owner,
    });
    expect(forward.total).toBe(1);
    expect(forward.relatedItems.map((i) => [i.id, i.title])).toEqual([[layer.id, "Layer"]]);
    const reverse = await getRelatedItems({
      id: layer.id,
      relationshipType: ["Map2Service", "Service2Data"],
      direction: "reverse",
      authentication: owner,
    });
    expect(reverse.relatedItems.map((i) => i.id)).toEqual([map.id]);
    // The reader sees the map once it is shared with the organization, but not the private layer.
    await setItemAccess({ id: map.id, access: "org", authentication: owner });
    const seen = await getRelatedItems({
      id: map.id,
      relationshipType: "Map2Service",
      authentication: reader,
    });
    expect(seen).toMatchObject({ total: 0, relatedItems: [] });

    const removed = await removeItemRelationship({
      originItemId: map.id,
      destinationItemId: layer.id,
      relationshipType: "Map2Service",
      authentication: owner,
    });
    expect(removed).toEqual({ success: true });
    const after = await getRelatedItems({
      id: map.id,
      relationshipType: "Map2Service",
      direction: "forward",
      authentication: owner,
    });
    expect(after).toMatchObject({ total: 0, relatedItems: [] });
  });

  it("reads the generated iteminfo.xml, uploads metadata and reads it back, and removes the thumbnail", async () => {
    const item = await createItem({
      item: { title: "Roads & rivers", type: "Web Map", tags: ["a", "b"] },
      authentication: owner,
    });
    const info = await getItemInfo(item.id, { authentication: owner });
    expect(info).toContain("<ESRI_ItemInformation");
    expect(info).toContain("<title>Roads &amp; rivers</title>");
    expect(info).toContain("<tags>a,b</tags>");

    const metadata = '<?xml version="1.0"?><metadata><Esri><title>Roads</title></Esri></metadata>';
    const uploaded = await updateItemInfo({
      id: item.id,
      folderName: "metadata",
      file: new File([metadata], "metadata.xml", { type: "text/xml" }),
      authentication: owner,
    });
    expect(uploaded).toEqual({ success: true, itemId: item.id, owner: owner.username, folder: null });
    expect(await getItemMetadata(item.id, { authentication: owner })).toBe(metadata);
    expect((await outbox(portal)).at(-1)).toMatchObject({
      source: "item",
      operation: "update",
      object_id: item.id,
    });

    await updateItem({
      item: { id: item.id },
      params: { thumbnail: new File([PNG], "thumb.png", { type: "image/png" }) },
      authentication: owner,
    });
    expect((await getItem(item.id, { authentication: owner })).thumbnail).toBe("thumbnail/thumb.png");
    expect(await removeItemThumbnail({ id: item.id, authentication: owner })).toEqual({ success: true });
    expect((await getItem(item.id, { authentication: owner })).thumbnail).toBeNull();
  });

  it("answers a hosted service's sources as a service that is no view", async () => {
    const name = "esri_items_service";
    const created = await request(`${portal.api}/content/users/${owner.username}/createService`, {
      params: {
        createParameters: { name, spatialReference: { wkid: 4326 } },
        outputType: "featureService",
      },
      authentication: owner,
    });
    expect(created.success).toBe(true);
    const sources = await getViewSources(created.serviceurl, owner);
    expect(sources).toEqual({ currentVersion: expect.any(Number), services: [] });
  });
});
