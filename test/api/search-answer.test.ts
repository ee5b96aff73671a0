import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { form, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * A search page's compact JSON is written directly (`itemResourceJson`, `JsonAnswer`), with the
 * stored tag, keyword and category lists copied in when already in `JSON.stringify`'s form. These
 * check it byte for byte against the item's own resource and against the page rendered from its
 * objects (`f=pjson`), for lists that need escaping, empty ones, and lists stored in another form.
 */

let portal: TestPortal;
let token: string;
let username: string;

/** The answer's text, as it came. */
async function text(path: string, params: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${portal.api}${path}?${form({ ...params, token })}`);
  expect(res.status).toBe(200);
  return res.text();
}

/** The compact page, checked against the page rendered from objects; its text. */
async function searchText(q: string): Promise<string> {
  const compact = await text("/search", { q, f: "json", countFields: "tags", countSize: 5 });
  const pretty = await text("/search", { q, f: "pjson", countFields: "tags", countSize: 5 });
  expect(compact).toBe(JSON.stringify(JSON.parse(pretty)));
  return compact;
}

async function addItem(params: Record<string, unknown>): Promise<string> {
  const added = await portal.post(`/content/users/${username}/addItem`, params, token);
  expect(added.success).toBe(true);
  return added.id as string;
}

beforeAll(async () => {
  portal = await startTestPortal();
  const owner = await portal.addUser("sa_owner", "org_publisher");
  token = owner.token;
  username = owner.username;
});
afterAll(async () => {
  await portal.stop();
});

describe("search answer text", () => {
  it("writes awkward tags, keywords, categories and properties as the item's resource has them", async () => {
    const id = await addItem({
      title: 'Quote " and back\\slash \u2028 ünïcødé 😀',
      type: "Web Map",
      tags: 'say "hi",back\\slash,ünïcødé,😀 grin,tab\there,del\u007f,line\u2028sep,sa-awkward',
      typeKeywords: 'kw "q",kw\\b,Ⅻ',
      categories: '/Categories/Wa"ter,/Categories/Ünï\\cødé',
      properties: JSON.stringify({ b: 1, 10: ["x", '"'], a: { "2": null, z: "\\" } }),
      extent: "-0.5,60,6.25,61",
      snippet: "snip\u0001pet",
    });
    const page = await searchText("tags:sa-awkward");
    const item = await text(`/content/items/${id}`, { f: "json" });
    expect(JSON.parse(page).results).toHaveLength(1);
    expect(page).toContain(`"results":[${item}]`);
    expect(JSON.parse(item).tags).toContain('say "hi"');
    // The directory's page is made from the answer's objects: the item is listed, escaped.
    const html = await text("/search", { q: "tags:sa-awkward", f: "html" });
    expect(html).toContain(`/sharing/rest/content/items/${id}?f=html`);
    expect(html).toContain("say &quot;hi&quot;");
  });

  it("writes empty lists and missing values", async () => {
    const id = await addItem({ title: "Bare", type: "Web Map" });
    const page = await searchText(`id:${id}`);
    const item = await text(`/content/items/${id}`, { f: "json" });
    expect(page).toContain(`"results":[${item}]`);
    expect(JSON.parse(item)).toMatchObject({ tags: [], typeKeywords: [], categories: [], extent: [] });
  });

  it("writes lists stored in another form as JSON.stringify writes them", async () => {
    const id = await addItem({ title: "Stored otherwise", type: "Web Map", tags: "sa-stored" });
    // Not what the API writes, but valid JSON of the same lists: spaces, `\u` and `\/` escapes.
    await portal.portico.db.kysely
      .updateTable("items")
      .set({
        tags: '[ "sa-stored", "\\u0041\\/b", "\\ud83d\\ude00" ]',
        type_keywords: '["\\u00e9"]',
        categories: '[\n"/Categories/X"]',
      })
      .where("id", "=", id)
      .execute();
    const page = await searchText(`id:${id}`);
    const item = await text(`/content/items/${id}`, { f: "json" });
    expect(page).toContain(`"results":[${item}]`);
    expect(JSON.parse(page).results[0]).toMatchObject({
      tags: ["sa-stored", "A/b", "😀"],
      typeKeywords: ["é"],
      categories: ["/Categories/X"],
    });
    expect(page).toContain('"tags":["sa-stored","A/b","😀"]');
  });

  it("writes the groups an item is shared with", async () => {
    const group = await portal.post("/community/createGroup", { title: "SA Group", access: "org" }, token);
    const id = await addItem({ title: "Shared", type: "Web Map", tags: "sa-shared" });
    await portal.post(`/content/users/${username}/items/${id}/share`, { groups: group.group.id }, token);
    const page = await searchText("tags:sa-shared");
    expect(JSON.parse(page).results[0].groupIds).toEqual([group.group.id]);
  });
});
