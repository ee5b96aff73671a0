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
    const others = Array.from({ length: 1000 - LEFT }, (_, i) => `filler${origin}${i}`);
    await portal.portico.db.transaction(async (trx) => {
      // Copies of the origin's row stand for the items it is related to already.
      const row = await trx
        .selectFrom("items")
        .selectAll()
        .where("id", "=", origin)
        .executeTakeFirstOrThrow();
      for (let i = 0; i < others.length; i += 100) {
        await trx
          .insertInto("items")
          .values(others.slice(i, i + 100).map((id) => ({ ...row, id })))
          .execute();
      }
      for (let i = 0; i < others.length; i += 100) {
        await trx
          .insertInto("item_relationships")
          .values(
            others.slice(i, i + 100).map((destination_id) => ({
              origin_id: origin,
              destination_id,
              type: "Map2Service",
              created_by: "x",
              created: 1,
            })),
          )
          .execute();
      }
    });
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
});
