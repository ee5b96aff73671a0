import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

type Who = { username: string; token: string };

/** Requests fired at once at a cap with this many places left. */
const AT_ONCE = 8;
const LEFT = 2;

/**
 * Per-item caps under concurrent requests: each is counted and then written, so two requests at
 * once must not both pass it. PostgreSQL runs them side by side (READ COMMITTED); SQLite's single
 * writer runs them one after the other.
 */
describe("per-item caps under concurrent requests", () => {
  let portal: TestPortal;
  let alice: Who;

  const addItem = async (who: Who, title: string, params: Record<string, unknown> = {}) => {
    const added = await portal.post(
      `/content/users/${who.username}/addItem`,
      { title, type: "Web Map", ...params },
      who.token,
    );
    return added.id as string;
  };
  const send = (who: Who, id: string, op: string, fields: Record<string, string>, file?: File) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    if (file) form.set("file", file);
    form.set("token", who.token);
    form.set("f", "json");
    return fetch(`${portal.api}/content/users/${who.username}/items/${id}/${op}`, {
      method: "POST",
      body: form,
    }).then((r) => r.json() as Promise<any>);
  };
  /** Item files of some kinds that take no bytes: they only count. */
  const fill = async (id: string, kinds: readonly string[], size = 0) => {
    await portal.portico.db.transaction(async (trx) => {
      for (let i = 0; i < kinds.length; i += 100) {
        await trx
          .insertInto("item_files")
          .values(
            kinds.slice(i, i + 100).map((kind) => ({
              item_id: id,
              kind,
              name: kind.split("/").at(-1) ?? kind,
              content_type: "text/plain",
              file_id: `fill-${id}-${kind}`,
              size,
              created: 1,
              access: "inherit",
            })),
          )
          .execute();
      }
    });
  };
  const countKinds = async (id: string, prefix: string) =>
    (
      await portal.portico.db.kysely
        .selectFrom("item_files")
        .select("kind")
        .where("item_id", "=", id)
        .where("kind", "like", `${prefix}%`)
        .execute()
    ).length;
  /**
   * Relates `item` to `n` copies of the item `copyOf` (alike but for their id): `forward` makes
   * `item` their origin, `reverse` their destination.
   */
  const relateCopies = async (item: string, n: number, direction: "forward" | "reverse", copyOf = item) => {
    const copies = Array.from({ length: n }, (_, i) => `copy${item}${direction}${i}`);
    await portal.portico.db.transaction(async (trx) => {
      const row = await trx
        .selectFrom("items")
        .selectAll()
        .where("id", "=", copyOf)
        .executeTakeFirstOrThrow();
      for (let i = 0; i < copies.length; i += 100) {
        const some = copies.slice(i, i + 100);
        await trx
          .insertInto("items")
          .values(some.map((id) => ({ ...row, id })))
          .execute();
        await trx
          .insertInto("item_relationships")
          .values(
            some.map((copy) => ({
              origin_id: direction === "forward" ? item : copy,
              destination_id: direction === "forward" ? copy : item,
              type: "Map2Service",
              created_by: row.owner_id,
              created: 1,
            })),
          )
          .execute();
      }
    });
  };
  const successes = (answers: any[]) => answers.filter((a) => a.success === true).length;

  beforeAll(async () => {
    portal = await startTestPortal();
    alice = await portal.addUser("caps_alice");
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("adds no resource past the 1,000th when several are added at once", async () => {
    const id = await addItem(alice, "Resources");
    await fill(
      id,
      Array.from({ length: 1000 - LEFT }, (_, i) => `resources/r${i}.txt`),
    );
    const answers = await Promise.all(
      Array.from({ length: AT_ONCE }, (_, i) =>
        send(alice, id, "addResources", { text: "x", fileName: `new${i}.txt` }),
      ),
    );
    expect(successes(answers)).toBe(LEFT);
    expect(await countKinds(id, "resources/")).toBe(1000);
  });

  it("adds no info file past the 100th when several are uploaded at once", async () => {
    const id = await addItem(alice, "Info");
    await fill(
      id,
      Array.from({ length: 100 - LEFT }, (_, i) => `info/f${i}.txt`),
    );
    const answers = await Promise.all(
      Array.from({ length: AT_ONCE }, (_, i) =>
        send(alice, id, "updateinfo", {}, new File(["x"], `new${i}.txt`)),
      ),
    );
    expect(successes(answers)).toBe(LEFT);
    expect(await countKinds(id, "info/")).toBe(100);
  });

  it("stores no part past 1 GB of parts when several are sent at once", async () => {
    const { id } = await portal.post(
      `/content/users/${alice.username}/addItem`,
      { title: "Parts", type: "CSV", multipart: true, filename: "data.csv" },
      alice.token,
    );
    // A stored part that says it holds all but LEFT bytes of 1 GB.
    await fill(id, ["parts/00001"], 1024 * 1024 * 1024 - LEFT);
    const answers = await Promise.all(
      Array.from({ length: AT_ONCE }, (_, i) =>
        fetch(`${portal.api}/content/users/${alice.username}/items/${id}/addPart?partNum=${i + 2}`, {
          method: "POST",
          body: (() => {
            const form = new FormData();
            form.set("file", new File(["x"], "blob"));
            form.set("token", alice.token);
            form.set("f", "json");
            return form;
          })(),
        }).then((r) => r.json() as Promise<any>),
      ),
    );
    expect(successes(answers)).toBe(LEFT);
    expect(await countKinds(id, "parts/")).toBe(1 + LEFT);
  });

  it("relates an item to no more than 1,000 others when several are added at once", async () => {
    const origin = await addItem(alice, "Origin");
    await relateCopies(origin, 1000 - LEFT, "forward");
    const destinations: string[] = [];
    for (let i = 0; i < AT_ONCE; i++) destinations.push(await addItem(alice, `Destination ${i}`));
    const answers = await Promise.all(
      destinations.map((destinationItemId) =>
        portal.post(
          `/content/users/${alice.username}/addRelationship`,
          { originItemId: origin, destinationItemId, relationshipType: "Map2Service" },
          alice.token,
        ),
      ),
    );
    expect(successes(answers)).toBe(LEFT);
    const rows = await portal.portico.db.kysely
      .selectFrom("item_relationships")
      .select("destination_id")
      .where("origin_id", "=", origin)
      .execute();
    expect(rows.length).toBe(1000);
  });

  it("keeps the relationships others' items make to an item apart from those of its owner's items", async () => {
    const bob = await portal.addUser("caps_bob");
    const target = await addItem(alice, "Much related");
    await portal.post(`/content/users/${alice.username}/items/${target}/share`, { org: true }, alice.token);
    const bobs = await addItem(bob, "Bob's");
    // Bob's items have used up what others may relate to Alice's item.
    await relateCopies(target, 1000, "reverse", bobs);
    const rel = (who: Who, originItemId: string) =>
      portal.post(
        `/content/users/${who.username}/addRelationship`,
        { originItemId, destinationItemId: target, relationshipType: "Map2Service" },
        who.token,
      );
    const refused = await rel(bob, bobs);
    expect(refused.error.message).toMatch(/1000 relationships from other owners' items/);
    // Alice still relates her own items to it, and they are listed before any of Bob's.
    const own = await addItem(alice, "Alice's");
    expect(await rel(alice, own)).toEqual({ success: true });
    const related = await portal.get(
      `/content/items/${target}/relatedItems`,
      { relationshipTypes: "Map2Service", direction: "reverse", sortOrder: "asc" },
      alice.token,
    );
    expect(related).toMatchObject({ total: 1 });
    expect(related.relatedItems.map((i: { id: string }) => i.id)).toEqual([own]);
    // Bob sees his own items' relationships, all of the other owners' allowance, and not Alice's private item.
    const seenByBob = await portal.get(
      `/content/items/${target}/relatedItems`,
      { relationshipTypes: "Map2Service", direction: "reverse", num: 1 },
      bob.token,
    );
    expect(seenByBob.total).toBe(1000);
  });
});
