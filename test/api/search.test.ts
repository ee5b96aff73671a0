import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * `/search` and `/community/groups` over real HTTP. Items are created and shared through the
 * content API; groups are written straight into the tables because this suite is about who finds
 * them, not about creating them.
 */

let portal: TestPortal;
let alice: { username: string; token: string };
let bob: { username: string; token: string };
let carol: { username: string; token: string };
const ids: Record<string, string> = {};
const GROUP_TEAM = "a1b2c3d4e5f60718293a4b5c6d7e8f90";
const GROUP_PUBLIC = "b1b2c3d4e5f60718293a4b5c6d7e8f90";
const GROUP_ORG = "c1b2c3d4e5f60718293a4b5c6d7e8f90";
const GROUP_HIDDEN = "d1b2c3d4e5f60718293a4b5c6d7e8f90";

async function addItem(
  user: { username: string; token: string },
  key: string,
  fields: { title: string; type: string; tags: string; description?: string; snippet?: string },
) {
  const r = await portal.post(`/content/users/${user.username}/addItem`, fields, user.token);
  if (!r.success) throw new Error(`addItem ${key}: ${JSON.stringify(r)}`);
  ids[key] = r.id as string;
}

async function share(
  user: { username: string; token: string },
  key: string,
  to: { everyone?: boolean; org?: boolean; groups?: string },
) {
  const r = await portal.post(`/content/users/${user.username}/items/${ids[key]}/share`, to, user.token);
  if (r.error || (r.notSharedWith ?? []).length > 0) throw new Error(`share ${key}: ${JSON.stringify(r)}`);
}

async function insertGroup(
  id: string,
  title: string,
  owner: string,
  access: string,
  members: string[],
  extra: { tags?: string[]; description?: string } = {},
) {
  const db = portal.portico.db;
  const users = await db.kysely
    .selectFrom("users")
    .select(["id", "username"])
    .where(
      "username_key",
      "in",
      [owner, ...members].map((u) => u.toLowerCase()),
    )
    .execute();
  const idOf = (u: string) => users.find((r) => r.username === u)?.id as string;
  const now = Date.now();
  await db.transaction(async (trx) => {
    await trx
      .insertInto("groups")
      .values({
        id,
        owner_id: idOf(owner),
        owner,
        title,
        title_key: title.toLowerCase(),
        description: extra.description ?? "",
        snippet: "",
        tags: JSON.stringify(extra.tags ?? []),
        access,
        is_invitation_only: 0,
        is_view_only: 0,
        protected: 0,
        sort_field: "title",
        sort_order: "asc",
        created: now,
        modified: now,
      })
      .execute();
    for (const u of [owner, ...members]) {
      await trx
        .insertInto("group_members")
        .values({
          group_id: id,
          user_id: idOf(u),
          username: u,
          member_type: u === owner ? "owner" : "member",
          joined: now,
        })
        .execute();
    }
  });
}

const search = (params: Record<string, unknown>, token?: string) => portal.get("/search", params, token);
const titles = (r: { results: { title: string }[] }) => r.results.map((i) => i.title).sort();

beforeAll(async () => {
  portal = await startTestPortal();
  alice = await portal.addUser("alice_search");
  bob = await portal.addUser("bob_search");
  carol = await portal.addUser("carol_search");
  await insertGroup(GROUP_TEAM, "Water Team", alice.username, "private", [bob.username], {
    tags: ["Hydrology", "team"],
    description: "People who look after the lakes",
  });
  await insertGroup(GROUP_PUBLIC, "Open Data", alice.username, "public", []);
  await insertGroup(GROUP_ORG, "All Staff", carol.username, "org", []);
  await insertGroup(GROUP_HIDDEN, "Carol Private", carol.username, "private", []);

  await addItem(alice, "lake", {
    title: "Lake Water Quality",
    type: "Feature Service",
    tags: "water,lakes",
    description: "Monitoring of LAKES in the region",
    snippet: "Quality samples",
  });
  await addItem(alice, "parks", { title: "City Parks", type: "Web Map", tags: "parks,city" });
  await addItem(alice, "secret", { title: "Secret Plans", type: "Web Map", tags: "internal,water" });
  await addItem(alice, "notes", { title: "Team Notes", type: "PDF", tags: "notes" });
  await addItem(alice, "pct", { title: "100% Done_report", type: "PDF", tags: "report" });
  await addItem(bob, "river", {
    title: "River Map",
    type: "Web Map",
    tags: "water,rivers",
    snippet: "Where the city parks meet the river",
  });
  await share(alice, "lake", { everyone: true });
  await share(alice, "parks", { org: true });
  await share(alice, "notes", { groups: GROUP_TEAM });
  await share(alice, "pct", { everyone: true });
  await share(bob, "river", { everyone: true });
}, 60_000);

afterAll(async () => {
  await portal?.stop();
});

describe("item search: q forms", () => {
  it("answers in the ArcGIS shape, with full item JSON", async () => {
    const r = await search({ q: `id:${ids.lake}` }, alice.token);
    expect(r).toMatchObject({ query: `id:${ids.lake}`, total: 1, start: 1, num: 10, nextStart: -1 });
    expect(r.results[0]).toMatchObject({
      id: ids.lake,
      owner: alice.username,
      title: "Lake Water Quality",
      type: "Feature Service",
      tags: ["water", "lakes"],
      access: "public",
      groupIds: [],
    });
    const notes = await search({ q: `id:${ids.notes}` }, alice.token);
    expect(notes.results[0].groupIds).toEqual([GROUP_TEAM]);
  });

  it("matches bare words and phrases in title, tags, description and snippet, case-insensitively", async () => {
    expect(titles(await search({ q: "LAKE" }, alice.token))).toEqual(["Lake Water Quality"]);
    // "lakes" is in the tags and the description; "samples" only in the snippet.
    expect(titles(await search({ q: "samples" }, alice.token))).toEqual(["Lake Water Quality"]);
    expect(titles(await search({ q: "rivers" }, alice.token))).toEqual(["River Map"]);
    expect(titles(await search({ q: '"city parks"' }, alice.token))).toEqual(["City Parks", "River Map"]);
    expect((await search({ q: '"parks city"' }, alice.token)).total).toBe(0);
  });

  it("treats % and _ as literal characters", async () => {
    expect(titles(await search({ q: "100%" }, alice.token))).toEqual(["100% Done_report"]);
    // Changed with the full-text index (migration 0009): "e_r" used to match as a substring of
    // "Done_report". The ArcGIS search reference says "A single term is a single word, such as
    // fire or California", so terms match words, not pieces of them; "_" separates words.
    expect((await search({ q: "e_r" }, alice.token)).total).toBe(0);
    expect(titles(await search({ q: "done_report" }, alice.token))).toEqual(["100% Done_report"]);
    expect((await search({ q: "1%e" }, alice.token)).total).toBe(0);
  });

  it("filters by title, owner, type, tags, group, id, access and orgid", async () => {
    expect(titles(await search({ q: "title:map" }, alice.token))).toEqual(["River Map"]);
    expect(titles(await search({ q: "title:riv*" }, alice.token))).toEqual(["River Map"]);
    expect(titles(await search({ q: `owner:${bob.username.toUpperCase()}` }, alice.token))).toEqual([
      "River Map",
    ]);
    expect(titles(await search({ q: 'type:"feature service"' }, alice.token))).toEqual([
      "Lake Water Quality",
    ]);
    expect(titles(await search({ q: "tags:Water" }, alice.token))).toEqual([
      "Lake Water Quality",
      "River Map",
      "Secret Plans",
    ]);
    // A tag matches whole: "lake" is a word of a title but not a tag.
    expect((await search({ q: "tags:lake" }, alice.token)).total).toBe(0);
    expect(titles(await search({ q: `group:${GROUP_TEAM}` }, alice.token))).toEqual(["Team Notes"]);
    expect(titles(await search({ q: `id:${ids.parks}` }, alice.token))).toEqual(["City Parks"]);
    expect(titles(await search({ q: "access:org" }, alice.token))).toEqual(["City Parks"]);
    expect(titles(await search({ q: "access:shared" }, alice.token))).toEqual(["Team Notes"]);
    const self = await portal.get("/portals/self", {}, alice.token);
    expect((await search({ q: `orgid:${self.id} AND type:PDF` }, alice.token)).total).toBe(2);
    expect((await search({ q: "orgid:someotherorg" }, alice.token)).total).toBe(0);
  });

  it("combines terms with AND (also implicitly), OR, NOT and parentheses", async () => {
    expect(titles(await search({ q: 'tags:water AND type:"Web Map"' }, alice.token))).toEqual([
      "River Map",
      "Secret Plans",
    ]);
    expect(titles(await search({ q: 'tags:water type:"Web Map"' }, alice.token))).toEqual([
      "River Map",
      "Secret Plans",
    ]);
    expect(titles(await search({ q: "tags:parks OR tags:rivers" }, alice.token))).toEqual([
      "City Parks",
      "River Map",
    ]);
    expect(titles(await search({ q: `tags:water NOT owner:${bob.username}` }, alice.token))).toEqual([
      "Lake Water Quality",
      "Secret Plans",
    ]);
    expect(
      titles(
        await search(
          { q: `(tags:parks OR tags:water) AND NOT (type:"Web Map" AND owner:${alice.username})` },
          alice.token,
        ),
      ),
    ).toEqual(["Lake Water Quality", "River Map"]);
    expect(titles(await search({ q: "tags:(parks OR rivers)" }, alice.token))).toEqual([
      "City Parks",
      "River Map",
    ]);
  });

  it("matches everything for * and for no q", async () => {
    expect((await search({ q: "*" }, portal.adminToken)).total).toBe(6);
    expect((await search({}, portal.adminToken)).total).toBe(6);
  });

  it("refuses malformed queries and unknown fields, naming q", async () => {
    for (const q of ["(water OR lakes", "water)", '"water', "colour:blue", "title:", "water AND"]) {
      const r = await search({ q }, alice.token);
      expect(r.error?.code, q).toBe(400);
      expect(r.error.message, q).toContain("'q'");
      expect(r.error.details[0], q).toMatch(/^'q' /);
    }
  });

  it("is reachable with POST as well", async () => {
    const r = await portal.post("/search", { q: "tags:rivers" }, alice.token);
    expect(titles(r)).toEqual(["River Map"]);
  });
});

describe("item search: paging and sorting", () => {
  it("pages with start, num and nextStart", async () => {
    const first = await search({ q: "*", num: 4, sortField: "title" }, portal.adminToken);
    expect(first).toMatchObject({ total: 6, start: 1, num: 4, nextStart: 5 });
    expect(first.results).toHaveLength(4);
    const second = await search(
      { q: "*", num: 4, start: first.nextStart, sortField: "title" },
      portal.adminToken,
    );
    expect(second).toMatchObject({ total: 6, start: 5, num: 4, nextStart: -1 });
    expect(second.results).toHaveLength(2);
    const all = [...first.results, ...second.results].map((i: { id: string }) => i.id);
    expect(new Set(all).size).toBe(6);
    const past = await search({ q: "*", start: 50 }, portal.adminToken);
    expect(past).toMatchObject({ total: 6, start: 50, nextStart: -1, results: [] });
  });

  it("refuses num above 100 and unknown sort fields", async () => {
    expect((await search({ q: "*", num: 101 }, alice.token)).error.message).toContain("'num'");
    expect((await search({ q: "*", sortField: "colour" }, alice.token)).error.message).toContain(
      "'sortField'",
    );
    expect((await search({ q: "*", sortOrder: "up" }, alice.token)).error.message).toContain("'sortOrder'");
  });

  it("sorts by title, type and owner, ascending unless told otherwise", async () => {
    const asc = await search({ q: "*", sortField: "title", num: 100 }, portal.adminToken);
    expect(asc.results.map((i: { title: string }) => i.title)).toEqual([
      "100% Done_report",
      "City Parks",
      "Lake Water Quality",
      "River Map",
      "Secret Plans",
      "Team Notes",
    ]);
    const desc = await search({ q: "*", sortField: "TITLE", sortOrder: "DESC", num: 100 }, portal.adminToken);
    expect(desc.results.map((i: { title: string }) => i.title)).toEqual(
      [...asc.results.map((i: { title: string }) => i.title)].reverse(),
    );
    const byType = await search({ q: "*", sortField: "type" }, portal.adminToken);
    expect(byType.results.map((i: { type: string }) => i.type)).toEqual([
      "Feature Service",
      "PDF",
      "PDF",
      "Web Map",
      "Web Map",
      "Web Map",
    ]);
    const byOwner = await search({ q: "*", sortField: "owner", sortOrder: "desc" }, portal.adminToken);
    expect(byOwner.results[0].owner).toBe(bob.username);
  });

  it("puts the most recently modified first by default", async () => {
    const r = await search({ q: `owner:${alice.username}`, num: 100 }, portal.adminToken);
    const modified = r.results.map((i: { modified: number }) => i.modified);
    expect(modified).toEqual([...modified].sort((a, b) => b - a));
    const created = await search({ q: `owner:${alice.username}`, sortField: "created" }, portal.adminToken);
    expect(created.results[0].title).toBe("Lake Water Quality");
  });
});

describe("item search: who sees what", () => {
  it("shows a private item to its owner and administrators only", async () => {
    expect((await search({ q: "secret" }, alice.token)).total).toBe(1);
    expect((await search({ q: "secret" }, portal.adminToken)).total).toBe(1);
    expect((await search({ q: "secret" }, bob.token)).total).toBe(0);
    expect((await search({ q: "secret" })).total).toBe(0);
    expect((await search({ q: `id:${ids.secret}` }, carol.token)).total).toBe(0);
  });

  it("shows group-shared items to the group's members only", async () => {
    expect(titles(await search({ q: "notes" }, bob.token))).toEqual(["Team Notes"]);
    expect((await search({ q: "notes" }, carol.token)).total).toBe(0);
  });

  it("counts only what the caller may see", async () => {
    // carol: public and org items; bob: those plus the group item.
    expect(titles(await search({ q: "*" }, carol.token))).toEqual([
      "100% Done_report",
      "City Parks",
      "Lake Water Quality",
      "River Map",
    ]);
    expect((await search({ q: "*" }, bob.token)).total).toBe(5);
    expect((await search({ q: "*" }, portal.adminToken)).total).toBe(6);
  });

  it("shows org items to members only, and public items to anonymous callers of a public organization", async () => {
    // A private organization shows anonymous callers nothing.
    expect((await search({ q: "*" })).total).toBe(0);
    const update = await portal.post("/portals/self/update", { access: "public" }, portal.adminToken);
    expect(update.error).toBeUndefined();
    expect(titles(await search({ q: "*" }))).toEqual(["100% Done_report", "Lake Water Quality", "River Map"]);
    expect((await search({ q: "parks" })).total).toBe(1);
    expect((await search({ q: "parks" }, carol.token)).total).toBe(2);
    const back = await portal.post("/portals/self/update", { access: "private" }, portal.adminToken);
    expect(back.error).toBeUndefined();
  });

  it("keeps results and totals current as an item's tags, sharing and owner change", async () => {
    // Totals are cached per query and viewer, and `tags:` reads copies of the item's columns kept
    // beside its tags; every step below must show through both at once.
    const tagged = async (tag: string, token: string) => {
      const r = await search({ q: `tags:${tag}` }, token);
      return { total: r.total as number, titles: titles(r) };
    };
    await addItem(alice, "moving", { title: "Moving Target", type: "Web Map", tags: "drift" });
    expect(await tagged("drift", alice.token)).toEqual({ total: 1, titles: ["Moving Target"] });
    expect(await tagged("drift", carol.token)).toEqual({ total: 0, titles: [] });

    await share(alice, "moving", { org: true });
    expect(await tagged("drift", carol.token)).toEqual({ total: 1, titles: ["Moving Target"] });

    const retag = await portal.post(
      `/content/users/${alice.username}/items/${ids.moving}/update`,
      { tags: "current" },
      alice.token,
    );
    expect(retag.success).toBe(true);
    expect(await tagged("drift", carol.token)).toEqual({ total: 0, titles: [] });
    expect(await tagged("current", carol.token)).toEqual({ total: 1, titles: ["Moving Target"] });

    // Sharing with neither the organization nor everyone makes the item private again.
    const unshare = await portal.post(
      `/content/users/${alice.username}/items/${ids.moving}/share`,
      { org: false, everyone: false },
      alice.token,
    );
    expect(unshare.error).toBeUndefined();
    expect(await tagged("current", carol.token)).toEqual({ total: 0, titles: [] });

    const reassign = await portal.post(
      `/content/users/${alice.username}/items/${ids.moving}/reassign`,
      { targetUsername: carol.username },
      portal.adminToken,
    );
    expect(reassign.success).toBe(true);
    expect(await tagged("current", carol.token)).toEqual({ total: 1, titles: ["Moving Target"] });
    expect(await tagged("current", alice.token)).toEqual({ total: 0, titles: [] });
  });

  it("refuses an invalid token rather than searching anonymously", async () => {
    const r = await search({ q: "*" }, "not-a-token");
    expect(r.error.code).toBe(498);
  });
});

describe("group search", () => {
  const groupSearch = (params: Record<string, unknown>, token?: string) =>
    portal.get("/community/groups", params, token);
  const groupTitles = (r: { results: { title: string }[] }) => r.results.map((g) => g.title).sort();

  it("answers the group resource, as community/groups/<id> does but without userMembership", async () => {
    const r = await groupSearch({ q: `id:${GROUP_TEAM}` }, alice.token);
    expect(r).toMatchObject({ query: `id:${GROUP_TEAM}`, total: 1, start: 1, num: 10, nextStart: -1 });
    const { userMembership, ...resource } = await portal.get(
      `/community/groups/${GROUP_TEAM}`,
      {},
      alice.token,
    );
    expect(userMembership).toBeDefined();
    expect(r.results[0]).toEqual(resource);
    expect(r.results[0]).toMatchObject({
      id: GROUP_TEAM,
      title: "Water Team",
      owner: alice.username,
      description: "People who look after the lakes",
      snippet: "",
      tags: ["Hydrology", "team"],
      access: "private",
      isInvitationOnly: false,
      isViewOnly: false,
      protected: false,
      created: expect.any(Number),
      modified: expect.any(Number),
    });
  });

  it("searches words, title, owner, tags, id and access", async () => {
    expect(groupTitles(await groupSearch({ q: "lakes" }, alice.token))).toEqual(["Water Team"]);
    expect(groupTitles(await groupSearch({ q: "title:data" }, alice.token))).toEqual(["Open Data"]);
    expect(groupTitles(await groupSearch({ q: `owner:${alice.username}` }, alice.token))).toEqual([
      "Open Data",
      "Water Team",
    ]);
    expect(groupTitles(await groupSearch({ q: "tags:hydrology" }, alice.token))).toEqual(["Water Team"]);
    expect((await groupSearch({ q: "tags:hydro" }, alice.token)).total).toBe(0);
    expect(groupTitles(await groupSearch({ q: "access:public OR access:org" }, alice.token))).toEqual([
      "All Staff",
      "Open Data",
    ]);
  });

  it("shows public and org groups to members, private groups to their members and administrators", async () => {
    expect(groupTitles(await groupSearch({ q: "*" }, bob.token))).toEqual([
      "All Staff",
      "Open Data",
      "Water Team",
    ]);
    expect(groupTitles(await groupSearch({ q: "*" }, carol.token))).toEqual([
      "All Staff",
      "Carol Private",
      "Open Data",
    ]);
    expect((await groupSearch({ q: "*" }, portal.adminToken)).total).toBe(4);
    expect((await groupSearch({ q: "*" })).total).toBe(0);
  });

  it("sorts by title by default, pages, and refuses item-only fields", async () => {
    const r = await groupSearch({ q: "*", num: 2 }, portal.adminToken);
    expect(r.results.map((g: { title: string }) => g.title)).toEqual(["All Staff", "Carol Private"]);
    expect(r.nextStart).toBe(3);
    const bad = await groupSearch({ q: "type:map" }, portal.adminToken);
    expect(bad.error.code).toBe(400);
    expect(bad.error.message).toContain("'q'");
  });
});
