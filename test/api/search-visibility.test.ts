import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * The visibility rule inside the statements of an item search, page by page: on PostgreSQL a
 * page probes each row's shares while its count may hash them, and a search's statements (count,
 * page with each item's groups, aggregations) travel together; both engines must answer exactly
 * what `content/items/<id>` would let each caller see, in order, on every page, with totals that
 * follow membership changes.
 */

type User = { username: string; token: string };

let portal: TestPortal;
let owner: User;
let member: User;
let outsider: User;
let groupA: string;
let groupB: string;

/** Access of item i, by i % 6: what the item is shared with. */
const SHARES: readonly { everyone?: boolean; org?: boolean; groups?: "A" | "B" | "AB" }[] = [
  {}, // private
  { groups: "A" },
  { groups: "B" },
  { groups: "AB" },
  { org: true },
  { everyone: true },
];
const ITEMS = 24;

interface Found {
  id: string;
  title: string;
  modified: number;
  groupIds: string[];
  access: string;
}

async function search(params: Record<string, unknown>, user?: User) {
  const r = await portal.get("/search", params, user?.token);
  if (r.error) throw new Error(`search ${JSON.stringify(params)}: ${JSON.stringify(r.error)}`);
  return r as { total: number; start: number; num: number; nextStart: number; results: Found[] };
}

/** Every page of a search, `num` at a time, checking the paging fields on the way. */
async function allPages(params: Record<string, unknown>, user: User | undefined, num: number) {
  const found: Found[] = [];
  let start = 1;
  let total: number | undefined;
  for (;;) {
    const page = await search({ ...params, start, num }, user);
    total ??= page.total;
    expect(page.total).toBe(total);
    found.push(...page.results);
    if (page.nextStart === -1) break;
    expect(page.results).toHaveLength(num);
    expect(page.nextStart).toBe(start + num);
    start = page.nextStart;
  }
  return { total: total as number, found };
}

/** Indexes (by title) of the items `user` should see: i % 6 of SHARES. */
function visibleTo(kinds: readonly number[]): Set<string> {
  const titles = new Set<string>();
  for (let i = 0; i < ITEMS; i++) if (kinds.includes(i % 6)) titles.add(title(i));
  return titles;
}

const admin = (): User => ({ username: "admin", token: portal.adminToken });
const title = (i: number) => `Visibility ${String(i).padStart(2, "0")}`;

beforeAll(async () => {
  portal = await startTestPortal();
  owner = await portal.addUser("vis_owner");
  member = await portal.addUser("vis_member");
  outsider = await portal.addUser("vis_outsider");
  const create = async (name: string) => {
    const r = await portal.post("/community/createGroup", { title: name, access: "private" }, owner.token);
    if (!r.group) throw new Error(`createGroup: ${JSON.stringify(r)}`);
    return r.group.id as string;
  };
  groupA = await create("Visibility A");
  groupB = await create("Visibility B");
  await portal.post(`/community/groups/${groupA}/addUsers`, { users: member.username }, owner.token);
  await portal.post(`/community/groups/${groupB}/addUsers`, { users: outsider.username }, owner.token);
  for (let i = 0; i < ITEMS; i++) {
    const added = await portal.post(
      `/content/users/${owner.username}/addItem`,
      { title: title(i), type: "Dashboard", tags: "visible-check" },
      owner.token,
    );
    if (!added.success) throw new Error(`addItem: ${JSON.stringify(added)}`);
    const { groups, ...rest } = SHARES[i % 6] as (typeof SHARES)[number];
    const to = {
      ...rest,
      ...(groups
        ? { groups: groups === "A" ? groupA : groups === "B" ? groupB : `${groupA},${groupB}` }
        : {}),
    };
    if (Object.keys(to).length > 0) {
      const shared = await portal.post(
        `/content/users/${owner.username}/items/${added.id}/share`,
        to,
        owner.token,
      );
      if (shared.error || (shared.notSharedWith ?? []).length > 0)
        throw new Error(`share: ${JSON.stringify(shared)}`);
    }
  }
}, 120_000);

afterAll(async () => {
  await portal?.stop();
});

const QUERIES = {
  owner: () => `owner:${owner.username}`,
  tags: () => "tags:visible-check",
  type: () => 'type:"dashboard"',
} as const;

describe("item search: visibility on every page", () => {
  for (const [name, q] of Object.entries(QUERIES)) {
    it(`${name}: a member sees own groups' shares, org and public items, page by page, in order`, async () => {
      // The administrator's pages are the reference order (newest first, id breaking ties).
      const all = await allPages({ q: q() }, admin(), 7);
      expect(all.total).toBe(ITEMS);
      expect(new Set(all.found.map((i) => i.id)).size).toBe(ITEMS);
      const expected = visibleTo([1, 3, 4, 5]);
      const seen = await allPages({ q: q() }, member, 5);
      expect(seen.total).toBe(expected.size);
      expect(seen.found.map((i) => i.id)).toEqual(
        all.found.filter((i) => expected.has(i.title)).map((i) => i.id),
      );
    });
  }

  it("shows each group's members their items once, however many of their groups hold it", async () => {
    const outsiderView = await allPages({ q: QUERIES.owner() }, outsider, 4);
    expect(new Set(outsiderView.found.map((i) => i.title))).toEqual(visibleTo([2, 3, 4, 5]));
    expect(outsiderView.found).toHaveLength(outsiderView.total);
  });

  it("answers each item's groups, all of them in id order, whoever asks", async () => {
    const seen = await allPages({ q: QUERIES.tags() }, member, 10);
    const both = [groupA, groupB].sort();
    for (const item of seen.found) {
      const kind = Number(item.title.slice(-2)) % 6;
      const expected = kind === 1 ? [groupA] : kind === 3 ? both : [];
      expect(item.groupIds).toEqual(expected);
      expect(item.access).toBe(kind === 4 ? "org" : kind === 5 ? "public" : "shared");
    }
  });

  it("shows the owner everything of theirs, and an anonymous caller of a private organization nothing", async () => {
    expect((await search({ q: QUERIES.type() }, owner)).total).toBe(ITEMS);
    expect((await search({ q: QUERIES.type() })).total).toBe(0);
  });

  it("sorts the visible items by title and by modified, both ways, on every page", async () => {
    const expected = [...visibleTo([1, 3, 4, 5])].sort();
    const asc = await allPages({ q: QUERIES.owner(), sortField: "title" }, member, 5);
    expect(asc.found.map((i) => i.title)).toEqual(expected);
    const desc = await allPages({ q: QUERIES.tags(), sortField: "title", sortOrder: "desc" }, member, 5);
    expect(desc.found.map((i) => i.title)).toEqual([...expected].reverse());
    const oldest = await allPages({ q: QUERIES.type(), sortField: "modified", sortOrder: "asc" }, member, 5);
    const newest = await allPages({ q: QUERIES.type() }, member, 5);
    expect(oldest.found.map((i) => i.id)).toEqual(newest.found.map((i) => i.id).reverse());
    for (let i = 1; i < oldest.found.length; i++) {
      expect(oldest.found[i]!.modified).toBeGreaterThanOrEqual(oldest.found[i - 1]!.modified);
    }
  });

  it("counts aggregations over the visible items, with the total read or cached alike", async () => {
    const params = { q: QUERIES.owner(), countFields: "access", num: 2 };
    const expected = [
      { value: "shared", count: 8 },
      { value: "org", count: 4 },
      { value: "public", count: 4 },
    ];
    for (let round = 0; round < 2; round++) {
      const r = (await search(params, member)) as unknown as {
        total: number;
        results: unknown[];
        aggregations: { counts: { fieldName: string; fieldValues: { value: string; count: number }[] }[] };
      };
      expect(r.total).toBe(16);
      expect(r.results).toHaveLength(2);
      expect(r.aggregations.counts).toEqual([{ fieldName: "access", fieldValues: expected }]);
    }
  });

  it("follows membership: joining a group shows its items and their total at once, leaving hides them", async () => {
    const count = async () => (await search({ q: QUERIES.owner() }, outsider)).total;
    const before = await count();
    expect(before).toBe(visibleTo([2, 3, 4, 5]).size);
    const added = await portal.post(
      `/community/groups/${groupA}/addUsers`,
      { users: outsider.username },
      owner.token,
    );
    expect(added.error).toBeUndefined();
    expect(await count()).toBe(visibleTo([1, 2, 3, 4, 5]).size);
    const pages = await allPages({ q: QUERIES.tags() }, outsider, 6);
    expect(new Set(pages.found.map((i) => i.title))).toEqual(visibleTo([1, 2, 3, 4, 5]));
    const removed = await portal.post(
      `/community/groups/${groupA}/removeUsers`,
      { users: outsider.username },
      owner.token,
    );
    expect(removed.error).toBeUndefined();
    expect(await count()).toBe(before);
    const after = await allPages({ q: QUERIES.type() }, outsider, 6);
    expect(new Set(after.found.map((i) => i.title))).toEqual(visibleTo([2, 3, 4, 5]));
  });
});
