import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Item relationships, the info folder and an item's groups over plain HTTP: the errors, limits and
 * privilege rules Esri's client never reaches (test/api/esri-items.test.ts has the working calls).
 */
describe("item relationships, info files and unknown operations", () => {
  let portal: TestPortal;
  let alice: { username: string; token: string };
  let bob: { username: string; token: string };

  const addItem = async (who: { username: string; token: string }, title: string, access?: string) => {
    const added = await portal.post(
      `/content/users/${who.username}/addItem`,
      { title, type: "Web Map" },
      who.token,
    );
    if (access) {
      await portal.post(
        `/content/users/${who.username}/items/${added.id}/share`,
        { everyone: access === "public", org: true },
        who.token,
      );
    }
    return added.id as string;
  };
  const upload = (
    who: { username: string; token: string },
    id: string,
    name: string,
    body: string,
    folder?: string,
  ) => {
    const form = new FormData();
    if (folder) form.set("folderName", folder);
    form.set("file", new File([body], name));
    form.set("token", who.token);
    form.set("f", "json");
    return fetch(`${portal.api}/content/users/${who.username}/items/${id}/updateinfo`, {
      method: "POST",
      body: form,
    }).then((r) => r.json() as Promise<any>);
  };

  beforeAll(async () => {
    portal = await startTestPortal();
    alice = await portal.addUser("details_alice");
    bob = await portal.addUser("details_bob");
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("answers Invalid URL for operations asked for with a method they do not take, instead of taking them for folders", async () => {
    for (const op of ["export", "addRelationship", "deleteRelationship"]) {
      const answer = await portal.get(`/content/users/${alice.username}/${op}`, {}, alice.token);
      expect(answer.error).toMatchObject({ code: 400, message: "Invalid URL" });
    }
  });

  it("checks relationship types and the ownership rules, and refuses duplicates", async () => {
    const map = await addItem(alice, "Map");
    const bobsLayer = await addItem(bob, "Bob's layer", "org");
    const bobsPrivate = await addItem(bob, "Bob's private");
    const rel = (params: Record<string, unknown>, who = alice) =>
      portal.post(`/content/users/${who.username}/addRelationship`, params, who.token);

    expect(
      (await rel({ originItemId: map, destinationItemId: bobsLayer, relationshipType: "Nope" })).error
        .details,
    ).toEqual(["'relationshipType' is 'Nope', which is not a relationship type."]);
    expect((await rel({ originItemId: map, destinationItemId: bobsLayer })).error.message).toMatch(
      /relationshipType/,
    );
    expect(
      (await rel({ originItemId: map, destinationItemId: map, relationshipType: "Map2Service" })).error
        .details[0],
    ).toMatch(/destinationItemId/);
    // Another's private item is not there for Alice; a visible one of Bob's may be a Map2Service end,
    // not a Service2Data one (mustOwnAllItems).
    expect(
      (await rel({ originItemId: map, destinationItemId: bobsPrivate, relationshipType: "Map2Service" }))
        .error.code,
    ).toBe(400);
    expect(
      (await rel({ originItemId: map, destinationItemId: bobsLayer, relationshipType: "Service2Data" })).error
        .code,
    ).toBe(403);
    // Only the origin's owner relates it, and only in their own content.
    expect(
      (await rel({ originItemId: bobsLayer, destinationItemId: map, relationshipType: "Map2Service" })).error
        .code,
    ).toBe(403);
    expect(
      (await rel({ originItemId: map, destinationItemId: bobsLayer, relationshipType: "Map2Service" }, bob))
        .error.code,
    ).toBe(400);
    expect(
      await rel({ originItemId: map, destinationItemId: bobsLayer, relationshipTypes: "map2service" }),
    ).toEqual({
      success: true,
    });
    expect(
      (await rel({ originItemId: map, destinationItemId: bobsLayer, relationshipType: "Map2Service" })).error
        .message,
    ).toMatch(/already have/);
    // Bob did not add it, so he cannot delete it, even as the destination's owner.
    const byBob = await portal.post(
      `/content/users/${bob.username}/deleteRelationship`,
      { originItemId: map, destinationItemId: bobsLayer, relationshipType: "Map2Service" },
      bob.token,
    );
    expect(byBob.error.code).toBe(400);

    // Deleting an item deletes its relationships.
    await portal.post(`/content/users/${bob.username}/items/${bobsLayer}/delete`, {}, bob.token);
    const rows = await portal.portico.db.kysely.selectFrom("item_relationships").selectAll().execute();
    expect(rows.filter((r) => r.origin_id === map)).toEqual([]);
  });

  it("lists related items only for a visible item, and checks its parameters", async () => {
    const map = await addItem(alice, "Private map");
    const missing = await portal.get(
      `/content/items/${map}/relatedItems`,
      { relationshipTypes: "Map2Service" },
      bob.token,
    );
    expect(missing.error.code).toBe(400);
    const noType = await portal.get(`/content/items/${map}/relatedItems`, {}, alice.token);
    expect(noType.error.message).toMatch(/relationshipTypes/);
    const badDirection = await portal.get(
      `/content/items/${map}/relatedItems`,
      { relationshipTypes: "Map2Service", direction: "sideways" },
      alice.token,
    );
    expect(badDirection.error.details[0]).toMatch(/direction/);
    const anonymous = await portal.get(`/content/items/${map}/relatedItems`, {
      relationshipTypes: "Map2Service",
    });
    expect(anonymous.error.code).toBe(499);
  });

  it("takes only small JSON, XML, CFG, TXT, PBF and PNG info files from the owner, and serves none as a page", async () => {
    const item = await addItem(alice, "Info");
    expect((await upload(alice, item, "page.html", "<script>alert(1)</script>")).error.details[0]).toMatch(
      /'file'/,
    );
    expect((await upload(alice, item, "iteminfo.xml", "<x/>")).error.details[0]).toMatch(
      /made from the item/,
    );
    expect((await upload(alice, item, "a.png", "<svg/>")).error.details[0]).toMatch(/not a PNG/);
    expect((await upload(alice, item, "a.json", "{}", "thumbnail")).error.details[0]).toMatch(/'folderName'/);
    const big = await upload(alice, item, "big.json", "x".repeat(100 * 1024 + 1));
    expect(big.error.code).toBe(400);
    expect((await upload(bob, item, "a.json", "{}")).error.code).toBe(400);

    expect(await upload(alice, item, "config.json", '{"a":1}')).toMatchObject({
      success: true,
      itemId: item,
    });
    const svgLike = await upload(
      alice,
      item,
      "metadata.xml",
      '<svg xmlns="http://www.w3.org/2000/svg"><script/></svg>',
      "metadata",
    );
    expect(svgLike.success).toBe(true);
    const metadata = await fetch(
      `${portal.api}/content/items/${item}/info/metadata/metadata.xml?token=${alice.token}`,
    );
    expect(metadata.headers.get("content-type")).toBe("application/octet-stream");
    expect(metadata.headers.get("content-disposition")).toMatch(/^attachment/);
    expect(metadata.headers.get("content-security-policy")).toMatch(/sandbox/);
    const config = await fetch(`${portal.api}/content/items/${item}/info/config.json?token=${alice.token}`);
    expect(await config.json()).toEqual({ a: 1 });
    // Bob may not see the private item, so not its files either; a missing file names itself.
    const hidden = await portal.get(`/content/items/${item}/info/config.json`, {}, bob.token);
    expect(hidden.error.code).toBe(400);
    const none = await portal.get(`/content/items/${item}/info/other.json`, {}, alice.token);
    expect(none.error.details[0]).toMatch(/other\.json/);
    const noMetadata = await portal.get(
      `/content/items/${await addItem(alice, "Bare")}/info/metadata/metadata.xml`,
      {},
      alice.token,
    );
    expect(noMetadata.error).toMatchObject({ code: 400, message: "Not found." });
  });

  it("lets only the owner or an administrator delete a thumbnail, and lists no groups a caller may not see", async () => {
    const item = await addItem(alice, "Thumb", "org");
    const byBob = await portal.post(
      `/content/users/${alice.username}/items/${item}/deleteThumbnail`,
      {},
      bob.token,
    );
    expect(byBob.error.code).toBe(403);
    const adminToken = await portal.signIn(ADMIN.username, ADMIN.password);
    expect(
      await portal.post(`/content/users/${alice.username}/items/${item}/deleteThumbnail`, {}, adminToken),
    ).toEqual({
      success: true,
    });
    expect(await portal.get(`/content/items/${item}/groups`, {}, bob.token)).toEqual({
      admin: [],
      member: [],
      other: [],
    });
    const privateItem = await addItem(alice, "Private");
    expect((await portal.get(`/content/items/${privateItem}/groups`, {}, bob.token)).error.code).toBe(400);
  });

  it("answers FeatureServer/sources and FeatureServer/layers, not as layer ids", async () => {
    const publisher = await portal.addUser("details_publisher", "org_publisher");
    const name = "details_service";
    await portal.post(
      `/content/users/${publisher.username}/createService`,
      { createParameters: { name, spatialReference: { wkid: 4326 } }, outputType: "featureService" },
      publisher.token,
    );
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    expect(
      await portal.get(`${server}/services/${name}/FeatureServer/sources`, {}, publisher.token),
    ).toMatchObject({
      services: [],
    });
    expect(await portal.get(`${server}/services/${name}/FeatureServer/layers`, {}, publisher.token)).toEqual({
      layers: [],
      tables: [],
    });
  });
});
