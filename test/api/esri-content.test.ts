import {
  createGroup,
  createItem,
  getItem,
  searchItems,
  shareItemWithGroup,
  unshareItemWithGroup,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, request } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/** Esri's client (@esri/arcgis-rest-portal 4.10.2) managing content on a running portico. */
describe("Esri arcgis-rest-js content functions", () => {
  let portal: TestPortal;
  let owner: ArcGISIdentityManager;
  let reader: ArcGISIdentityManager;

  beforeAll(async () => {
    portal = await startTestPortal();
    const o = await portal.addUser("esri_owner", "org_publisher");
    const r = await portal.addUser("esri_reader");
    owner = await ArcGISIdentityManager.signIn({
      username: o.username,
      password: o.password,
      portal: portal.api,
    });
    reader = await ArcGISIdentityManager.signIn({
      username: r.username,
      password: r.password,
      portal: portal.api,
    });
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("creates an item and a group, shares the item with the group, finds and reads it, and unshares it", async () => {
    const created = await createItem({
      item: {
        title: "Esri Web Map",
        type: "Web Map",
        tags: ["esri", "client"],
        snippet: "Made by arcgis-rest-js",
      },
      authentication: owner,
    });
    expect(created.success).toBe(true);
    const item = await getItem(created.id, { authentication: owner });
    expect(item).toMatchObject({ title: "Esri Web Map", type: "Web Map", tags: ["esri", "client"] });

    const group = await createGroup({
      group: { title: "Esri Group", access: "org", tags: ["esri"] },
      authentication: owner,
    });
    expect(group.success).toBe(true);
    // The reader joins the group (added by its owner), so sharing makes the item visible to them.
    // Through the client: its token is bound to the referer the client sends.
    const added = await request(`${portal.api}/community/groups/${group.group.id}/addUsers`, {
      params: { users: reader.username },
      authentication: owner,
    });
    expect(added.notAdded).toEqual([]);
    await expect(getItem(created.id, { authentication: reader })).rejects.toThrow();

    const shared = await shareItemWithGroup({
      id: created.id,
      groupId: group.group.id,
      authentication: owner,
    });
    expect(shared.notSharedWith).toEqual([]);
    expect((await getItem(created.id, { authentication: reader })).id).toBe(created.id);

    const found = await searchItems({ q: `group: ${group.group.id}`, authentication: reader });
    expect(found.results.map((r) => r.id)).toEqual([created.id]);
    const byTag = await searchItems({ q: "tags:esri", authentication: owner });
    expect(byTag.results.map((r) => r.id)).toContain(created.id);

    const unshared = await unshareItemWithGroup({
      id: created.id,
      groupId: group.group.id,
      authentication: owner,
    });
    expect(unshared.notUnsharedFrom).toEqual([]);
    await expect(getItem(created.id, { authentication: reader })).rejects.toThrow();
  });
});
