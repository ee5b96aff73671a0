import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

/** A 1x1 transparent PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

/** POSTs a multipart form, as clients do for uploads. */
async function postMultipart(
  url: string,
  fields: Record<string, string>,
  files: Record<string, [Buffer, string]>,
) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  for (const [k, [data, name]] of Object.entries(files)) form.append(k, new Blob([data]), name);
  const res = await fetch(url, { method: "POST", body: form });
  return res.json() as Promise<any>;
}

describe("items and folders", () => {
  let portal: TestPortal;
  let alice: { username: string; password: string; token: string };
  let bob: { username: string; password: string; token: string };
  const base = (u: string) => `/content/users/${u}`;

  beforeAll(async () => {
    portal = await startTestPortal();
    alice = await portal.addUser("alice_gis", "org_publisher");
    bob = await portal.addUser("bob_viewer");
  });
  afterAll(async () => {
    await portal.stop();
  });

  const addItem = (params: Record<string, unknown>, token = alice.token, folder = "") =>
    portal.post(`${base(alice.username)}${folder ? `/${folder}` : ""}/addItem`, params, token);

  it("adds an item with its details and data, and reads them back", async () => {
    const added = await addItem({
      title: "Rivers",
      type: "Web Map",
      tags: "water,rivers",
      typeKeywords: "Web Map,Map",
      description: "All the rivers",
      snippet: "Rivers of the region",
      text: '{"operationalLayers":[]}',
      properties: { source: "survey" },
    });
    expect(added).toMatchObject({ success: true, folder: null });
    const item = await portal.get(`/content/items/${added.id}`, {}, alice.token);
    expect(item).toMatchObject({
      id: added.id,
      owner: alice.username,
      title: "Rivers",
      type: "Web Map",
      tags: ["water", "rivers"],
      typeKeywords: ["Web Map", "Map"],
      description: "All the rivers",
      snippet: "Rivers of the region",
      properties: { source: "survey" },
      access: "private",
      protected: false,
      ownerFolder: null,
    });
    const data = await fetch(`${portal.api}/content/items/${added.id}/data?token=${alice.token}`);
    expect(data.headers.get("content-type")).toContain("application/json");
    expect(await data.json()).toEqual({ operationalLayers: [] });
    const event = (await outbox(portal)).at(-1)!;
    expect(event).toMatchObject({ source: "item", operation: "add", object_id: added.id, uri: "/items/add" });
  });

  it("stores an uploaded file and thumbnail, and refuses a thumbnail that is not an image", async () => {
    const added = await postMultipart(
      `${portal.api}${base(alice.username)}/addItem`,
      { f: "json", token: alice.token, title: "Survey CSV", type: "CSV" },
      { file: [Buffer.from("a,b\n1,2\n"), "survey.csv"], thumbnail: [PNG, "thumb.png"] },
    );
    expect(added.success).toBe(true);
    const item = await portal.get(`/content/items/${added.id}`, {}, alice.token);
    expect(item.size).toBe(8);
    expect(item.thumbnail).toBe("thumbnail/thumb.png");
    const data = await fetch(`${portal.api}/content/items/${added.id}/data?token=${alice.token}`);
    expect(await data.text()).toBe("a,b\n1,2\n");
    const thumb = await fetch(
      `${portal.api}/content/items/${added.id}/info/thumbnail/thumb.png?token=${alice.token}`,
    );
    expect(thumb.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await thumb.arrayBuffer()).equals(PNG)).toBe(true);

    const before = (await outbox(portal)).length;
    const bad = await postMultipart(
      `${portal.api}${base(alice.username)}/addItem`,
      { f: "json", token: alice.token, title: "Bad thumb", type: "CSV" },
      { thumbnail: [Buffer.from("<svg/>"), "thumb.png"] },
    );
    expect(bad.error.message).toContain("'thumbnail'");
    expect((await outbox(portal)).length).toBe(before);
  });

  it("names missing and invalid item parameters and writes nothing", async () => {
    const before = (await outbox(portal)).length;
    expect((await addItem({ type: "Web Map" })).error.message).toContain("'title'");
    expect((await addItem({ title: "x".repeat(251), type: "Web Map" })).error.message).toContain("'title'");
    expect((await addItem({ title: "t", type: "Web Map", properties: "{oops" })).error.message).toContain(
      "'properties'",
    );
    expect((await outbox(portal)).length).toBe(before);
  });

  it("refuses adding content to someone else's account, and hides private items from others", async () => {
    const denied = await portal.post(
      `${base(alice.username)}/addItem`,
      { title: "t", type: "Web Map" },
      bob.token,
    );
    expect(denied.error.code).toBe(403);
    const mine = await addItem({ title: "Secret", type: "Web Map" });
    expect((await portal.get(`/content/items/${mine.id}`, {}, bob.token)).error.code).toBe(400);
    expect((await portal.get(`/content/items/${mine.id}`)).error.code).toBe(499);
    // An administrator with portal:admin:viewItems sees it.
    expect((await portal.get(`/content/items/${mine.id}`, {}, portal.adminToken)).title).toBe("Secret");
  });

  it("updates details, clears fields with clearEmptyFields, and records the update event", async () => {
    const added = await addItem({ title: "Old", type: "Web Map", snippet: "keep", description: "drop" });
    const r = await portal.post(
      `${base(alice.username)}/items/${added.id}/update`,
      { title: "New", description: "", clearEmptyFields: true, tags: "a,b" },
      alice.token,
    );
    expect(r).toEqual({ success: true, id: added.id });
    const item = await portal.get(`/content/items/${added.id}`, {}, alice.token);
    expect(item).toMatchObject({ title: "New", snippet: "keep", description: "", tags: ["a", "b"] });
    expect((await outbox(portal)).at(-1)).toMatchObject({
      operation: "update",
      uri: `/items/${added.id}/update`,
    });
    const other = await portal.post(
      `${base(alice.username)}/items/${added.id}/update`,
      { title: "Mine" },
      bob.token,
    );
    // Bob cannot see Alice's private item: it is "missing" to him, not forbidden.
    expect(other.error).toMatchObject({ code: 400, messageCode: "CONT_0001" });
    await portal.post(`${base(alice.username)}/items/${added.id}/share`, { org: true }, alice.token);
    const seen = await portal.post(
      `${base(alice.username)}/items/${added.id}/update`,
      { title: "Mine" },
      bob.token,
    );
    expect(seen.error.code).toBe(403);
  });

  it("creates folders, moves items into them, lists them, and refuses deleting a non-empty folder", async () => {
    const created = await portal.post(
      `${base(alice.username)}/createFolder`,
      { title: "Hydro" },
      alice.token,
    );
    expect(created.folder).toMatchObject({ title: "Hydro", username: alice.username });
    const dup = await portal.post(`${base(alice.username)}/createFolder`, { title: "hydro" }, alice.token);
    expect(dup.error.message).toContain("'title'");
    const folderId = created.folder.id as string;
    const added = await addItem({ title: "In root", type: "Web Map" });
    const moved = await portal.post(
      `${base(alice.username)}/items/${added.id}/move`,
      { folder: folderId },
      alice.token,
    );
    expect(moved).toMatchObject({ success: true, folder: folderId });
    expect((await outbox(portal)).at(-1)).toMatchObject({ operation: "move", object_id: added.id });
    const listing = await portal.get(`${base(alice.username)}/${folderId}`, {}, alice.token);
    expect(listing.items.map((i: { id: string }) => i.id)).toEqual([added.id]);
    expect(listing.currentFolder.id).toBe(folderId);
    expect(listing.folders.map((f: { title: string }) => f.title)).toContain("Hydro");
    const root = await portal.get(base(alice.username), { num: 100 }, alice.token);
    expect(root.items.map((i: { id: string }) => i.id)).not.toContain(added.id);
    const refused = await portal.post(`${base(alice.username)}/${folderId}/delete`, {}, alice.token);
    expect(refused.error.message).toContain("1 item");
    await portal.post(
      `${base(alice.username)}/${folderId}/items/${added.id}/move`,
      { folder: "/" },
      alice.token,
    );
    expect((await portal.post(`${base(alice.username)}/${folderId}/delete`, {}, alice.token)).success).toBe(
      true,
    );
  });

  it("protects an item from deletion until unprotected, then deletes it with its event", async () => {
    const added = await addItem({ title: "Keep me", type: "Web Map" });
    await portal.post(`${base(alice.username)}/items/${added.id}/protect`, {}, alice.token);
    const refused = await portal.post(`${base(alice.username)}/items/${added.id}/delete`, {}, alice.token);
    expect(refused.error.message).toContain("protected");
    await portal.post(`${base(alice.username)}/items/${added.id}/unprotect`, {}, alice.token);
    expect(await portal.post(`${base(alice.username)}/items/${added.id}/delete`, {}, alice.token)).toEqual({
      success: true,
      itemId: added.id,
    });
    expect((await portal.get(`/content/items/${added.id}`, {}, alice.token)).error.code).toBe(400);
    expect((await outbox(portal)).at(-1)).toMatchObject({
      operation: "delete",
      uri: `/items/${added.id}/delete`,
    });
  });

  it("reassigns an item to another user with reassignedTo, for administrators only", async () => {
    const added = await addItem({ title: "Handover", type: "Web Map" });
    const denied = await portal.post(
      `${base(alice.username)}/items/${added.id}/reassign`,
      { targetUsername: bob.username },
      alice.token,
    );
    expect(denied.error.code).toBe(403);
    const r = await portal.post(
      `${base(alice.username)}/items/${added.id}/reassign`,
      { targetUsername: bob.username },
      portal.adminToken,
    );
    expect(r.success).toBe(true);
    expect((await portal.get(`/content/items/${added.id}`, {}, bob.token)).owner).toBe(bob.username);
    const event = (await outbox(portal)).at(-1)!;
    expect(event).toMatchObject({ operation: "reassign", uri: `/items/${added.id}/reassign` });
    expect(JSON.parse(event.properties)).toEqual({ reassignedTo: [bob.username] });
  });

  it("deletes items in bulk with deleteItems, each succeeding or failing alone with its event", async () => {
    const a = await addItem({ title: "Bulk A", type: "Web Map" });
    const kept = await addItem({ title: "Bulk kept", type: "Web Map" });
    const b = await addItem({ title: "Bulk B", type: "Web Map" });
    await portal.post(`${base(alice.username)}/items/${kept.id}/protect`, {}, alice.token);
    const bobs = await portal.post(
      `${base(bob.username)}/addItem`,
      { title: "Bob's", type: "Web Map" },
      bob.token,
    );
    const before = (await outbox(portal)).length;

    const r = await portal.post(
      `${base(alice.username)}/deleteItems`,
      { items: [a.id, kept.id, bobs.id, b.id].join(",") },
      alice.token,
    );
    expect(r.results).toEqual([
      { itemId: a.id, success: true },
      {
        itemId: kept.id,
        success: false,
        error: { code: 400, message: expect.stringContaining("protected") },
      },
      {
        itemId: bobs.id,
        success: false,
        error: { code: 400, message: "Item does not exist or is inaccessible." },
      },
      { itemId: b.id, success: true },
    ]);
    expect((await portal.get(`/content/items/${a.id}`, {}, alice.token)).error.code).toBe(400);
    expect((await portal.get(`/content/items/${b.id}`, {}, alice.token)).error.code).toBe(400);
    expect((await portal.get(`/content/items/${kept.id}`, {}, alice.token)).id).toBe(kept.id);
    expect((await portal.get(`/content/items/${bobs.id}`, {}, bob.token)).id).toBe(bobs.id);
    // One event per deleted item, none for the refused ones.
    const events = (await outbox(portal)).slice(before);
    expect(events.map((e) => [e.operation, e.object_id])).toEqual([
      ["delete", a.id],
      ["delete", b.id],
    ]);

    // Another user's content: refused as a whole, before any item is looked at.
    const denied = await portal.post(`${base(bob.username)}/deleteItems`, { items: bobs.id }, alice.token);
    expect(denied.error.code).toBe(403);
    expect((await portal.get(`/content/items/${bobs.id}`, {}, bob.token)).id).toBe(bobs.id);
    // An administrator deletes it.
    const byAdmin = await portal.post(
      `${base(bob.username)}/deleteItems`,
      { items: bobs.id },
      portal.adminToken,
    );
    expect(byAdmin.results).toEqual([{ itemId: bobs.id, success: true }]);

    const missing = await portal.post(`${base(alice.username)}/deleteItems`, {}, alice.token);
    expect(missing.error).toMatchObject({ code: 400 });
    expect(missing.error.message).toContain("'items'");
    const many = Array.from({ length: 101 }, (_, i) => `id${i}`).join(",");
    const tooMany = await portal.post(`${base(alice.username)}/deleteItems`, { items: many }, alice.token);
    expect(tooMany.error.message).toContain("'items'");
  });

  it("moves items in bulk with moveItems, the folder checked once and each item alone", async () => {
    const folder = (
      await portal.post(`${base(alice.username)}/createFolder`, { title: "Bulk move" }, alice.token)
    ).folder.id as string;
    const a = await addItem({ title: "Move A", type: "Web Map" });
    const b = await addItem({ title: "Move B", type: "Web Map" });
    const r = await portal.post(
      `${base(alice.username)}/moveItems`,
      { items: `${a.id},nosuchitem0,${b.id}`, folder },
      alice.token,
    );
    expect(r.results).toEqual([
      { itemId: a.id, success: true },
      {
        itemId: "nosuchitem0",
        success: false,
        error: { code: 400, message: "Item does not exist or is inaccessible." },
      },
      { itemId: b.id, success: true },
    ]);
    const listing = await portal.get(`${base(alice.username)}/${folder}`, {}, alice.token);
    expect(listing.items.map((i: { id: string }) => i.id).sort()).toEqual([a.id, b.id].sort());
    expect((await outbox(portal)).slice(-2).map((e) => [e.operation, e.object_id])).toEqual([
      ["move", a.id],
      ["move", b.id],
    ]);

    // A folder that is not the user's fails the request, naming the parameter; nothing moves.
    const before = (await outbox(portal)).length;
    const bobsFolder = (
      await portal.post(`${base(bob.username)}/createFolder`, { title: "Bob's" }, bob.token)
    ).folder.id as string;
    const wrong = await portal.post(
      `${base(alice.username)}/moveItems`,
      { items: a.id, folder: bobsFolder },
      alice.token,
    );
    expect(wrong.error.message).toContain("'folder'");
    expect((await outbox(portal)).length).toBe(before);

    const back = await portal.post(
      `${base(alice.username)}/moveItems`,
      { items: `${a.id},${b.id}`, folder: "/" },
      alice.token,
    );
    expect(back.results.map((x: { success: boolean }) => x.success)).toEqual([true, true]);
    expect((await portal.get(`${base(alice.username)}/${folder}`, {}, alice.token)).items).toEqual([]);
    const denied = await portal.post(
      `${base(alice.username)}/moveItems`,
      { items: a.id, folder: "/" },
      bob.token,
    );
    expect(denied.error.code).toBe(403);
    // Asked for with GET, they are operations, not folders.
    expect((await portal.get(`${base(alice.username)}/moveItems`, {}, alice.token)).error.message).toContain(
      "Invalid URL",
    );
  });

  it("keeps a folder titled 'Items' reachable by its title for addItem and delete beside the user item", async () => {
    // Folders are named in the path by id or title (case-insensitive), and the router prefers the
    // static `items` of content/users/<u>/items/<id> to a folder parameter: only GET answers the
    // user item, so these POSTs still reach the folder's operations.
    const folder = (
      await portal.post(`${base(alice.username)}/createFolder`, { title: "Items" }, alice.token)
    ).folder.id as string;
    const added = await portal.post(
      `${base(alice.username)}/Items/addItem`,
      { title: "Filed by title", type: "Web Map" },
      alice.token,
    );
    expect(added).toMatchObject({ success: true, folder });
    const refused = await portal.post(`${base(alice.username)}/items/delete`, {}, alice.token);
    expect(refused.error.message).toContain("1 item");
    const own = await portal.get(`${base(alice.username)}/items/${added.id}`, {}, alice.token);
    expect(own.item).toMatchObject({ id: added.id, ownerFolder: folder });
    await portal.post(`${base(alice.username)}/items/${added.id}/delete`, {}, alice.token);
    const deleted = await portal.post(`${base(alice.username)}/Items/delete`, {}, alice.token);
    expect(deleted.folder).toMatchObject({ id: folder, title: "Items" });
  });

  it("records no move event for an item already in the folder, however often moveItems names it", async () => {
    const folder = (
      await portal.post(`${base(alice.username)}/createFolder`, { title: "Stay put" }, alice.token)
    ).folder.id as string;
    const a = await addItem({ title: "Moved once", type: "Web Map" });
    const before = (await outbox(portal)).length;
    const r = await portal.post(
      `${base(alice.username)}/moveItems`,
      { items: `${a.id},${a.id},${a.id}`, folder },
      alice.token,
    );
    expect(r.results.map((x: { success: boolean }) => x.success)).toEqual([true, true, true]);
    const again = await portal.post(`${base(alice.username)}/items/${a.id}/move`, { folder }, alice.token);
    expect(again).toMatchObject({ success: true, folder });
    // One move happened, so one event: a webhook hears of changes, not of requests.
    expect((await outbox(portal)).slice(before).map((e) => [e.operation, e.object_id])).toEqual([
      ["move", a.id],
    ]);
  });

  it("refuses deleting a user who owns content", async () => {
    const owner = await portal.addUser("content_owner", "org_publisher");
    await portal.post(`${base(owner.username)}/addItem`, { title: "Mine", type: "Web Map" }, owner.token);
    const r = await portal.post(`/community/users/${owner.username}/delete`, {}, portal.adminToken);
    expect(r.error.message).toContain("owns 1 item(s)");
  });
});

describe("sharing with the organization and everyone, and comments", () => {
  let portal: TestPortal;
  let alice: { username: string; token: string };
  let bob: { username: string; token: string };
  beforeAll(async () => {
    portal = await startTestPortal();
    alice = await portal.addUser("alice_share", "org_publisher");
    bob = await portal.addUser("bob_share");
  });
  afterAll(async () => {
    await portal.stop();
  });

  const add = async (title: string) =>
    (await portal.post(`/content/users/${alice.username}/addItem`, { title, type: "Web Map" }, alice.token))
      .id as string;
  const share = (id: string, params: Record<string, unknown>) =>
    portal.post(`/content/users/${alice.username}/items/${id}/share`, params, alice.token);

  it("shares with the organization and records sharedToGroups: Organization", async () => {
    const id = await add("Org map");
    expect(await share(id, { org: true })).toEqual({ notSharedWith: [], itemId: id });
    expect((await portal.get(`/content/items/${id}`, {}, bob.token)).access).toBe("org");
    expect((await portal.get(`/content/items/${id}`)).error.code).toBe(499);
    const event = (await outbox(portal)).at(-1)!;
    expect(event).toMatchObject({ operation: "share", uri: `/items/${id}/share` });
    expect(JSON.parse(event.properties)).toEqual({ sharedToGroups: ["Organization"] });
  });

  it("shares with everyone, visible anonymously only when the organization is public", async () => {
    const id = await add("Public map");
    await share(id, { everyone: true });
    expect((await portal.get(`/content/items/${id}`, {}, bob.token)).access).toBe("public");
    expect((await portal.get(`/content/items/${id}`)).error.code).toBe(499);
    await portal.post("/portals/self/update", { access: "public" }, portal.adminToken);
    expect((await portal.get(`/content/items/${id}`)).title).toBe("Public map");
    await portal.post("/portals/self/update", { access: "private" }, portal.adminToken);
  });

  it("refuses public sharing while canSharePublic is false, and writes nothing", async () => {
    const id = await add("Not public");
    await portal.post("/portals/self/update", { canSharePublic: false }, portal.adminToken);
    const before = (await outbox(portal)).length;
    const r = await share(id, { everyone: true });
    expect(r.error.message).toContain("'everyone'");
    expect((await portal.get(`/content/items/${id}`, {}, alice.token)).access).toBe("private");
    expect((await outbox(portal)).length).toBe(before);
    await portal.post("/portals/self/update", { canSharePublic: true }, portal.adminToken);
  });

  it("withdraws public sharing with everyone=false and records unsharedFromGroups: Everyone", async () => {
    const id = await add("Was public");
    await share(id, { everyone: true });
    await share(id, { everyone: false });
    expect((await portal.get(`/content/items/${id}`, {}, alice.token)).access).toBe("org");
    expect(JSON.parse((await outbox(portal)).at(-1)!.properties)).toEqual({
      unsharedFromGroups: ["Everyone"],
    });
  });

  it("reports per item in shareItems, including items the caller may not share", async () => {
    const mine = await add("Bulk one");
    const theirs = (
      await portal.post(`/content/users/${bob.username}/addItem`, { title: "B", type: "Web Map" }, bob.token)
    ).id;
    const r = await portal.post(
      `/content/users/${alice.username}/shareItems`,
      { items: `${mine},${theirs}`, org: true },
      alice.token,
    );
    expect(r.results[0]).toMatchObject({ itemId: mine, success: true, notSharedWith: [] });
    expect(r.results[1]).toMatchObject({ success: false });
  });

  it("shares with a group: members see the item, others do not; both item and group events are recorded", async () => {
    const id = await add("Group map");
    const carol = await portal.addUser("carol_share");
    const group = await portal.post(
      "/community/createGroup",
      { title: "Hydro team", access: "org" },
      alice.token,
    );
    await portal.post(`/community/groups/${group.group.id}/addUsers`, { users: bob.username }, alice.token);
    expect(await share(id, { groups: group.group.id })).toEqual({ notSharedWith: [], itemId: id });
    expect((await portal.get(`/content/items/${id}`, {}, bob.token)).access).toBe("shared");
    expect((await portal.get(`/content/items/${id}`, {}, carol.token)).error.code).toBe(400);
    const events = (await outbox(portal)).slice(-2);
    expect(events[0]).toMatchObject({ source: "group", operation: "share", object_id: group.group.id });
    expect(JSON.parse(events[0]!.properties)).toEqual({ sharedItems: [{ itemId: id, itemType: "Web Map" }] });
    expect(JSON.parse(events[1]!.properties)).toEqual({ sharedToGroups: [group.group.id] });

    // Someone who is not a member cannot share into the group.
    const carolItem = (
      await portal.post(
        `/content/users/${carol.username}/addItem`,
        { title: "C", type: "Web Map" },
        carol.token,
      )
    ).id;
    const refused = await portal.post(
      `/content/users/${carol.username}/items/${carolItem}/share`,
      { groups: group.group.id },
      carol.token,
    );
    expect(refused.notSharedWith).toEqual([group.group.id]);

    const unshared = await portal.post(
      `/content/users/${alice.username}/items/${id}/unshare`,
      { groups: group.group.id },
      alice.token,
    );
    expect(unshared).toEqual({ notUnsharedFrom: [], itemId: id });
    expect((await portal.get(`/content/items/${id}`, {}, bob.token)).error.code).toBe(400);
    expect((await portal.get(`/content/items/${id}`, {}, alice.token)).access).toBe("private");
    expect(JSON.parse((await outbox(portal)).at(-2)!.properties)).toEqual({
      unsharedItems: [{ itemId: id, itemType: "Web Map" }],
    });
  });

  it("shares one item into one group from many concurrent requests: all succeed, one share, one event", async () => {
    const id = await add("Raced map");
    const group = (await portal.post("/community/createGroup", { title: "Race", access: "org" }, alice.token))
      .group.id as string;
    const answers = await Promise.all(Array.from({ length: 16 }, () => share(id, { groups: group })));
    expect(answers.filter((a) => a.error)).toEqual([]);
    const shares = await portal.portico.db.kysely
      .selectFrom("item_shares")
      .selectAll()
      .where("item_id", "=", id)
      .execute();
    expect(shares).toEqual([{ item_id: id, group_id: group }]);
    const groupEvents = (await outbox(portal)).filter(
      (e) => e.source === "group" && e.operation === "share" && e.object_id === group,
    );
    expect(groupEvents).toHaveLength(1);
  });

  it("lets only the owner and group managers share into a view-only group", async () => {
    const group = await portal.post(
      "/community/createGroup",
      { title: "Announcements", access: "org", isViewOnly: true },
      alice.token,
    );
    await portal.post(`/community/groups/${group.group.id}/addUsers`, { users: bob.username }, alice.token);
    const bobItem = (
      await portal.post(`/content/users/${bob.username}/addItem`, { title: "B2", type: "Web Map" }, bob.token)
    ).id;
    const byMember = await portal.post(
      `/content/users/${bob.username}/items/${bobItem}/share`,
      { groups: group.group.id },
      bob.token,
    );
    expect(byMember.notSharedWith).toEqual([group.group.id]);
    const id = await add("Announcement");
    expect((await share(id, { groups: group.group.id })).notSharedWith).toEqual([]);
  });

  it("answers content/users/<u>/items/<id> with the item and its sharing, to its owner and administrators", async () => {
    const id = await add("Sharing shown");
    const group = await portal.post(
      "/community/createGroup",
      { title: "Shown to", access: "org" },
      alice.token,
    );
    await portal.post(`/community/groups/${group.group.id}/addUsers`, { users: bob.username }, alice.token);
    await share(id, { groups: group.group.id });
    const own = await portal.get(`/content/users/${alice.username}/items/${id}`, {}, alice.token);
    expect(own.item).toMatchObject({ id, owner: alice.username, title: "Sharing shown", access: "shared" });
    expect(own.sharing).toEqual({ access: "shared", groups: [group.group.id] });
    const byAdmin = await portal.get(`/content/users/${alice.username}/items/${id}`, {}, portal.adminToken);
    expect(byAdmin.sharing).toEqual(own.sharing);
    // A member who sees the item is refused; its owner's name is the path's.
    expect((await portal.get(`/content/users/${alice.username}/items/${id}`, {}, bob.token)).error.code).toBe(
      403,
    );
    const wrongOwner = await portal.get(`/content/users/${bob.username}/items/${id}`, {}, portal.adminToken);
    expect(wrongOwner.error.code).toBe(400);
    // One who does not see it hears that it does not exist.
    const hidden = await add("Private one");
    expect(
      (await portal.get(`/content/users/${alice.username}/items/${hidden}`, {}, bob.token)).error,
    ).toMatchObject({
      code: 400,
      message: "Item does not exist or is inaccessible.",
    });
  });

  it("adds, lists, updates and deletes comments with their events", async () => {
    const id = await add("Commented");
    await share(id, { org: true });
    const added = await portal.post(`/content/items/${id}/addComment`, { comment: "Nice map" }, bob.token);
    expect(added.success).toBe(true);
    expect((await outbox(portal)).at(-1)).toMatchObject({
      operation: "addComment",
      uri: `/items/${id}/addComment`,
    });
    const list = await portal.get(`/content/items/${id}/comments`, {}, alice.token);
    expect(list.comments).toMatchObject([{ owner: bob.username, comment: "Nice map" }]);
    const notAuthor = await portal.post(
      `/content/items/${id}/comments/${added.commentId}/update`,
      { comment: "Hijack" },
      alice.token,
    );
    expect(notAuthor.error.code).toBe(403);
    await portal.post(
      `/content/items/${id}/comments/${added.commentId}/update`,
      { comment: "Very nice" },
      bob.token,
    );
    expect((await outbox(portal)).at(-1)).toMatchObject({ operation: "updateComment" });
    // The item's owner may delete any comment on it.
    expect(
      (await portal.post(`/content/items/${id}/comments/${added.commentId}/delete`, {}, alice.token)).success,
    ).toBe(true);
    expect((await outbox(portal)).at(-1)).toMatchObject({ operation: "deleteComment" });
  });

  it("lists an item's comments a page at a time, oldest first, with ArcGIS's paging fields", async () => {
    const id = await add("Much discussed");
    await share(id, { org: true });
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push(
        (await portal.post(`/content/items/${id}/addComment`, { comment: `c${i}` }, bob.token)).commentId,
      );
    }
    // Oldest first; comments added within one millisecond are ordered by id.
    const all = await portal.get(`/content/items/${id}/comments`, { num: 100 }, alice.token);
    expect(all).toMatchObject({ total: 12, start: 1, num: 100, nextStart: -1 });
    const allIds = all.comments.map((c: { id: string }) => c.id);
    expect([...allIds].sort()).toEqual([...ids].sort());
    const created = all.comments.map((c: { created: number }) => c.created);
    expect(created).toEqual([...created].sort((a, b) => a - b));
    const first = await portal.get(`/content/items/${id}/comments`, {}, alice.token);
    expect(first).toMatchObject({ total: 12, start: 1, num: 10, nextStart: 11 });
    expect(first.comments.map((c: { id: string }) => c.id)).toEqual(allIds.slice(0, 10));
    const last = await portal.get(`/content/items/${id}/comments`, { start: 11, num: 5 }, alice.token);
    expect(last).toMatchObject({ total: 12, start: 11, num: 5, nextStart: -1 });
    expect(last.comments.map((c: { id: string }) => c.id)).toEqual(allIds.slice(10));
    const tooMany = await portal.get(`/content/items/${id}/comments`, { num: 101 }, alice.token);
    expect(tooMany.error.message).toContain("'num'");
  });

  it("refuses comments while commentsEnabled is false", async () => {
    const id = await add("Quiet");
    await portal.post("/portals/self/update", { commentsEnabled: false }, portal.adminToken);
    const r = await portal.post(`/content/items/${id}/addComment`, { comment: "hello" }, alice.token);
    expect(r.error.code).toBe(403);
    expect(r.error.details.join(" ")).toContain("commentsEnabled");
    await portal.post("/portals/self/update", { commentsEnabled: true }, portal.adminToken);
  });

  it("refuses listing another user's content to members", async () => {
    expect((await portal.get(`/content/users/${alice.username}`, {}, bob.token)).error.code).toBe(403);
    expect((await portal.get(`/content/users/${alice.username}`, {}, portal.adminToken)).username).toBe(
      alice.username,
    );
  });
});
