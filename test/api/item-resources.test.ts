import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FILE_CHUNK_BYTES, readAll } from "../../src/content/file-store.js";
import { engine, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

type Who = { username: string; token: string };

/**
 * Item resources over plain HTTP: paths, limits, access and privilege rules, and what a refused
 * change leaves (nothing). test/api/esri-resources.test.ts has the calls of Esri's client.
 */
describe("item resources", () => {
  let portal: TestPortal;
  let alice: Who;
  let bob: Who;

  const addItem = async (who: Who, title: string, share?: "org" | "public") => {
    const added = await portal.post(
      `/content/users/${who.username}/addItem`,
      { title, type: "Web Map" },
      who.token,
    );
    if (share) {
      await portal.post(
        `/content/users/${who.username}/items/${added.id}/share`,
        { everyone: share === "public", org: true },
        who.token,
      );
    }
    return added.id as string;
  };
  const send = (
    who: Who | null,
    owner: string,
    id: string,
    op: string,
    fields: Record<string, string>,
    file?: { name: string; body: string | Uint8Array },
  ) => {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    if (file) form.set("file", new File([file.body], file.name));
    if (who) form.set("token", who.token);
    form.set("f", "json");
    return fetch(`${portal.api}/content/users/${owner}/items/${id}/${op}`, {
      method: "POST",
      body: form,
    }).then((r) => r.json() as Promise<any>);
  };
  /** removeResources takes no file: Esri's client sends it as a form. */
  const remove = (who: Who, id: string, params: Record<string, unknown>) =>
    portal.post(`/content/users/${who.username}/items/${id}/removeResources`, params, who.token);
  const resourceUrl = (id: string, path: string, who?: Who) =>
    `${portal.api}/content/items/${id}/resources/${path}${who ? `?token=${who.token}` : ""}`;

  beforeAll(async () => {
    portal = await startTestPortal();
    alice = await portal.addUser("res_alice");
    bob = await portal.addUser("res_bob");
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("adds files and text in folders, lists them paged and sorted, and streams each safely", async () => {
    const id = await addItem(alice, "With resources");
    const before = (await portal.get(`/content/items/${id}`, {}, alice.token)).modified;
    expect(
      await send(
        alice,
        alice.username,
        id,
        "addResources",
        { resourcesPrefix: "images" },
        { name: "logo.svg", body: "<svg onload=alert(1)/>" },
      ),
    ).toEqual({
      success: true,
      itemId: id,
      owner: alice.username,
      folder: null,
    });
    await send(alice, alice.username, id, "addResources", {
      text: '{"a":1}',
      fileName: "config.json",
      resourcesPrefix: "a/b",
    });
    await send(alice, alice.username, id, "addResources", { text: "hello", fileName: "notes.txt" });

    const listed = await portal.get(`/content/items/${id}/resources`, {}, alice.token);
    expect(listed).toMatchObject({ total: 3, start: 1, num: 10, nextStart: -1 });
    expect(listed.resources.map((r: any) => r.resource)).toEqual([
      "a/b/config.json",
      "images/logo.svg",
      "notes.txt",
    ]);
    for (const r of listed.resources) {
      expect(r).toEqual({
        resource: r.resource,
        created: expect.any(Number),
        size: expect.any(Number),
        access: "inherit",
      });
    }
    const bySize = await portal.get(
      `/content/items/${id}/resources`,
      { sortField: "size", sortOrder: "desc", num: 1, start: 2 },
      alice.token,
    );
    expect(bySize).toMatchObject({ total: 3, start: 2, num: 1, nextStart: 3 });
    expect(bySize.resources.map((r: any) => r.resource)).toEqual(["a/b/config.json"]);

    const svg = await fetch(resourceUrl(id, "images/logo.svg", alice));
    expect(svg.headers.get("content-type")).toBe("application/octet-stream");
    expect(svg.headers.get("content-disposition")).toMatch(/^attachment/);
    expect(svg.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await svg.text()).toBe("<svg onload=alert(1)/>");
    const config = await fetch(resourceUrl(id, "a/b/config.json", alice));
    expect(config.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await config.json()).toEqual({ a: 1 });

    const after = await portal.get(`/content/items/${id}`, {}, alice.token);
    expect(after.modified).toBeGreaterThan(before);
    const events = (await outbox(portal)).filter((e) => e.object_id === id && e.operation === "update");
    expect(events).toHaveLength(3);
  });

  it("replaces a resource with updateResources and removes one or all", async () => {
    const id = await addItem(alice, "Changing resources");
    await send(alice, alice.username, id, "addResources", {
      text: "one",
      fileName: "x.txt",
      resourcesPrefix: "f",
    });
    await send(alice, alice.username, id, "addResources", { text: "two", fileName: "y.txt" });
    const again = await send(alice, alice.username, id, "addResources", { text: "1", fileName: "y.txt" });
    expect(again.error.details[0]).toMatch(/'fileName'.*already/);

    expect(
      (
        await send(alice, alice.username, id, "updateResources", {
          text: "ONE!",
          fileName: "x.txt",
          resourcesPrefix: "f",
        })
      ).success,
    ).toBe(true);
    expect(await (await fetch(resourceUrl(id, "f/x.txt", alice))).text()).toBe("ONE!");
    const missing = await send(alice, alice.username, id, "updateResources", {
      text: "z",
      fileName: "z.txt",
    });
    expect(missing.error.message).toBe("Not found.");

    expect(await remove(alice, id, { resource: "f/x.txt" })).toEqual({ success: true });
    expect((await remove(alice, id, { resource: "f/x.txt" })).error.message).toBe("Not found.");
    expect((await remove(alice, id, {})).error.message).toMatch(/resource/);
    expect(await remove(alice, id, { deleteAll: true })).toEqual({ success: true });
    expect((await portal.get(`/content/items/${id}/resources`, {}, alice.token)).total).toBe(0);
    const gone = await fetch(resourceUrl(id, "y.txt", alice)).then((r) => r.json() as Promise<any>);
    expect(gone.error.message).toBe("Not found.");
  });

  it.each([
    ["../escape.txt", "fileName"],
    ["a/../../b.txt", "fileName"],
    [".hidden", "fileName"],
    ["a/b/c/d/e/f.txt", "fileName"],
    ["x".repeat(300), "fileName"],
  ])("refuses the path %j, naming the parameter", async (name, parameter) => {
    const id = await addItem(alice, "Paths");
    const answer = await send(alice, alice.username, id, "addResources", { text: "x", fileName: name });
    expect(answer.error.code).toBe(400);
    expect(answer.error.details[0]).toContain(`'${parameter}'`);
  });

  it("refuses a prefix that climbs out, and paths encoded in the URL", async () => {
    const id = await addItem(alice, "Prefix");
    const answer = await send(alice, alice.username, id, "addResources", {
      text: "x",
      fileName: "a.txt",
      resourcesPrefix: "../up",
    });
    expect(answer.error.details[0]).toContain("'fileName'");
    for (const path of ["..%2Fsecret", "a%2F..%2F..%2Fb", "a%2F%2E%2E%2Fb"]) {
      const read = await fetch(resourceUrl(id, path, alice)).then((r) => r.json() as Promise<any>);
      expect(read.error.details[0]).toContain("'resource'");
    }
  });

  it("keeps private resources to the owner and administrators, and leaves access out for others", async () => {
    const id = await addItem(alice, "Shared", "org");
    await send(alice, alice.username, id, "addResources", {
      text: "secret",
      fileName: "p.txt",
      access: "private",
    });
    await send(alice, alice.username, id, "addResources", { text: "open", fileName: "o.txt" });
    const asBob = await portal.get(`/content/items/${id}/resources`, {}, bob.token);
    expect(asBob.total).toBe(1);
    expect(asBob.resources).toEqual([{ resource: "o.txt", created: expect.any(Number), size: 4 }]);
    const read = await fetch(resourceUrl(id, "p.txt", bob)).then((r) => r.json() as Promise<any>);
    expect(read.error.message).toBe("Not found.");
    expect(await (await fetch(`${resourceUrl(id, "p.txt")}?token=${portal.adminToken}`)).text()).toBe(
      "secret",
    );
    const asAdmin = await portal.get(`/content/items/${id}/resources`, {}, portal.adminToken);
    expect(asAdmin.resources.map((r: any) => [r.resource, r.access])).toEqual([
      ["o.txt", "inherit"],
      ["p.txt", "private"],
    ]);
    // updateResources may change only the access.
    await send(alice, alice.username, id, "updateResources", { fileName: "p.txt", access: "inherit" });
    expect(await (await fetch(resourceUrl(id, "p.txt", bob))).text()).toBe("secret");
  });

  it("lets the owner and administrators change resources, not others; readers are who see the item", async () => {
    const shared = await addItem(alice, "Org item", "org");
    const hidden = await addItem(alice, "Private item");
    const byBob = await send(bob, alice.username, shared, "addResources", { text: "x", fileName: "b.txt" });
    expect(byBob.error.code).toBe(403);
    const hiddenByBob = await send(bob, alice.username, hidden, "addResources", {
      text: "x",
      fileName: "b.txt",
    });
    expect(hiddenByBob.error.code).toBe(400);
    expect(
      (
        await portal.post(
          `/content/users/${bob.username}/items/${shared}/removeResources`,
          { deleteAll: true },
          bob.token,
        )
      ).error.code,
    ).toBe(400);
    const byAdmin = await send(
      { username: "admin", token: portal.adminToken },
      alice.username,
      hidden,
      "addResources",
      { text: "a", fileName: "a.txt" },
    );
    expect(byAdmin.success).toBe(true);
    expect((await portal.get(`/content/items/${hidden}/resources`, {}, bob.token)).error.code).toBe(400);
    expect((await portal.get(`/content/items/${hidden}/resources`)).error.code).toBe(499);
    expect(
      (await send(null, alice.username, hidden, "addResources", { text: "a", fileName: "n.txt" })).error.code,
    ).toBe(499);
    await send(alice, alice.username, shared, "addResources", { text: "hi", fileName: "p.txt" });
    expect(await (await fetch(resourceUrl(shared, "p.txt", bob))).text()).toBe("hi");
  });

  it("refuses a file over 50 MB and the resource after the 1,000th, writing nothing", async () => {
    const id = await addItem(alice, "Limits");
    const big = await send(
      alice,
      alice.username,
      id,
      "addResources",
      {},
      { name: "big.bin", body: new Uint8Array(50 * 1024 * 1024 + 1) },
    );
    expect(big.error.details[0]).toContain("'file'");
    const db = portal.portico.db;
    await db.transaction(async (trx) => {
      for (let i = 0; i < 1000; i += 100) {
        await trx
          .insertInto("item_files")
          .values(
            Array.from({ length: 100 }, (_, j) => ({
              item_id: id,
              kind: `resources/r${i + j}.txt`,
              name: `r${i + j}.txt`,
              content_type: "text/plain",
              file_id: `limit${id}${i + j}`,
              size: 0,
              created: 1,
              access: "inherit",
            })),
          )
          .execute();
      }
    });
    const modified = (await portal.get(`/content/items/${id}`, {}, alice.token)).modified;
    const over = await send(alice, alice.username, id, "addResources", {
      text: "x",
      fileName: "one-more.txt",
    });
    expect(over.error.details[0]).toMatch(/1000 resources/);
    expect((await portal.get(`/content/items/${id}/resources`, { num: 1000 }, alice.token)).total).toBe(1000);
    expect((await portal.get(`/content/items/${id}`, {}, alice.token)).modified).toBe(modified);
    // The resources go with their item.
    await portal.post(`/content/users/${alice.username}/items/${id}/delete`, {}, alice.token);
    const left = await db.kysely.selectFrom("item_files").select("kind").where("item_id", "=", id).execute();
    expect(left).toEqual([]);
  });
});

describe("uploads in parts", () => {
  let portal: TestPortal;
  let alice: Who;
  let bob: Who;

  const begin = async (who: Who, params: Record<string, unknown> = {}) =>
    portal.post(
      `/content/users/${who.username}/addItem`,
      { title: "Parts", type: "CSV", multipart: true, filename: "data.csv", ...params },
      who.token,
    );
  const addPart = (who: Who, owner: string, id: string, partNum: string | undefined, body?: string) => {
    const form = new FormData();
    if (body !== undefined) form.set("file", new File([body], "blob"));
    form.set("token", who.token);
    form.set("f", "json");
    const query = partNum === undefined ? "" : `?partNum=${partNum}`;
    return fetch(`${portal.api}/content/users/${owner}/items/${id}/addPart${query}`, {
      method: "POST",
      body: form,
    }).then((r) => r.json() as Promise<any>);
  };
  const op = (who: Who, owner: string, id: string, name: string, params: Record<string, unknown> = {}) =>
    portal.post(`/content/users/${owner}/items/${id}/${name}`, params, who.token);

  beforeAll(async () => {
    portal = await startTestPortal();
    alice = await portal.addUser("parts_alice");
    bob = await portal.addUser("parts_bob");
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("checks multipart, filename and partNum, naming the parameter", async () => {
    expect((await begin(alice, { filename: "" })).error.details[0]).toContain("'filename'");
    expect((await begin(alice, { filename: "../x.csv" })).error.details[0]).toContain("'filename'");
    expect((await begin(alice, { filename: "a/b.csv" })).error.details[0]).toContain("'filename'");
    expect((await begin(alice, { text: "a,b" })).error.details[0]).toContain("'multipart'");
    const { id } = await begin(alice);
    for (const n of ["0", "10001", "x"]) {
      expect((await addPart(alice, alice.username, id, n, "a")).error.details[0]).toContain("'partNum'");
    }
    expect((await addPart(alice, alice.username, id, undefined, "a")).error.details[0]).toContain(
      "'partNum'",
    );
    expect((await addPart(alice, alice.username, id, "1")).error.details[0]).toContain("'file'");
  });

  it("refuses parts, commits and cancels of items with no upload under way", async () => {
    const plain = await portal.post(
      `/content/users/${alice.username}/addItem`,
      { title: "Plain", type: "CSV", text: "a,b" },
      alice.token,
    );
    expect((await addPart(alice, alice.username, plain.id, "1", "x")).error.message).toMatch(
      /no upload in parts/,
    );
    for (const name of ["parts", "commit", "cancel"]) {
      expect((await op(alice, alice.username, plain.id, name)).error.message).toMatch(/no upload in parts/);
    }
    expect(await op(alice, alice.username, plain.id, "status")).toEqual({
      itemId: plain.id,
      status: "completed",
      statusMessage: "completed",
    });
  });

  it("overwrites a part sent again, refuses an empty commit, and records only the commit as an update", async () => {
    const { id } = await begin(alice);
    expect((await op(alice, alice.username, id, "commit")).error.message).toMatch(/no parts/);
    expect((await op(alice, alice.username, id, "status")).status).toBe("partial");
    await addPart(alice, alice.username, id, "1", "first");
    await addPart(alice, alice.username, id, "1", "a,b\n");
    await addPart(alice, alice.username, id, "10000", "1,2\n");
    expect(await op(alice, alice.username, id, "parts")).toEqual({ parts: [1, 10000] });
    const before = (await outbox(portal)).filter((e) => e.object_id === id).map((e) => e.operation);
    expect(before).toEqual(["add"]);
    expect(await op(alice, alice.username, id, "commit", { tags: "done,csv" })).toEqual({
      success: true,
      id,
    });
    const events = (await outbox(portal)).filter((e) => e.object_id === id).map((e) => e.operation);
    expect(events).toEqual(["add", "update"]);
    const data = await fetch(`${portal.api}/content/items/${id}/data?token=${alice.token}`);
    expect(data.headers.get("content-type")).toBe("text/csv");
    expect(data.headers.get("content-disposition")).toMatch(/attachment; filename="?data\.csv/);
    expect(await data.text()).toBe("a,b\n1,2\n");
    expect((await portal.get(`/content/items/${id}`, {}, alice.token)).tags).toEqual(["done", "csv"]);
    const left = await portal.portico.db.kysely
      .selectFrom("item_files")
      .select("kind")
      .where("item_id", "=", id)
      .execute();
    expect(left).toEqual([{ kind: "data" }]);
  });

  it("commits parts of whole chunks by moving their chunks, others by copying them, the data exact either way", async () => {
    // Counts the chunks written to each file: moved chunks are updated, not inserted.
    const db = portal.portico.db.kysely;
    await sql`CREATE TABLE test_chunk_inserts (file_id text NOT NULL)`.execute(db);
    if (engine === "postgres") {
      await sql`CREATE FUNCTION test_chunk_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN INSERT INTO test_chunk_inserts VALUES (NEW.file_id); RETURN NEW; END $$`.execute(db);
      await sql`CREATE TRIGGER test_chunk_inserted AFTER INSERT ON item_file_chunks
                FOR EACH ROW EXECUTE FUNCTION test_chunk_inserted()`.execute(db);
    } else {
      await sql`CREATE TRIGGER test_chunk_inserted AFTER INSERT ON item_file_chunks
                BEGIN INSERT INTO test_chunk_inserts VALUES (NEW.file_id); END`.execute(db);
    }
    const sendPart = (id: string, n: number, body: Buffer) => {
      const form = new FormData();
      form.set("file", new File([body], "blob"));
      form.set("token", alice.token);
      form.set("f", "json");
      return fetch(`${portal.api}/content/users/${alice.username}/items/${id}/addPart?partNum=${n}`, {
        method: "POST",
        body: form,
      }).then((r) => r.json() as Promise<any>);
    };
    const upload = async (sizes: readonly number[]) => {
      const { id } = await begin(alice, { filename: "data.bin", type: "Code Sample" });
      const parts = sizes.map((size) => randomBytes(size));
      for (const [i, part] of parts.entries()) expect((await sendPart(id, i + 1, part)).success).toBe(true);
      expect(await op(alice, alice.username, id, "commit")).toEqual({ success: true, id });
      const data = await fetch(`${portal.api}/content/items/${id}/data?token=${alice.token}`);
      const expected = Buffer.concat(parts);
      expect(Buffer.from(await data.arrayBuffer()).equals(expected)).toBe(true);
      const whole = await readAll(db, id, "data");
      expect(whole?.bytes.equals(expected)).toBe(true);
      expect((await portal.get(`/content/items/${id}`, {}, alice.token)).size).toBe(expected.length);
      const inserted = await db
        .selectFrom("test_chunk_inserts" as any)
        .select("file_id")
        .where("file_id", "=", whole?.file.fileId ?? "")
        .execute();
      // Nothing of the parts is left: neither their rows nor their chunks.
      const left = await db.selectFrom("item_files").select("kind").where("item_id", "=", id).execute();
      expect(left).toEqual([{ kind: "data" }]);
      const chunks = await db
        .selectFrom("item_file_chunks")
        .innerJoin("item_files", "item_files.file_id", "item_file_chunks.file_id")
        .select("seq")
        .where("item_files.item_id", "=", id)
        .execute();
      expect(chunks.length).toBe(Math.ceil(expected.length / FILE_CHUNK_BYTES));
      return inserted.length;
    };
    // Whole chunks but the last part: moved, no chunk written again.
    expect(await upload([FILE_CHUNK_BYTES, 2 * FILE_CHUNK_BYTES, 5])).toBe(0);
    expect(await upload([FILE_CHUNK_BYTES, 0, FILE_CHUNK_BYTES + 1])).toBe(0);
    // A part of a chunk and a bit: copied, cut again into whole chunks.
    expect(await upload([FILE_CHUNK_BYTES + 3, FILE_CHUNK_BYTES, 7])).toBe(3);
    expect(await upload([5, FILE_CHUNK_BYTES])).toBe(2);
  });

  it("lets the owner and administrators upload, not others", async () => {
    const { id } = await begin(alice);
    await portal.post(`/content/users/${alice.username}/items/${id}/share`, { org: true }, alice.token);
    expect((await addPart(bob, alice.username, id, "1", "x")).error.code).toBe(403);
    expect((await op(bob, alice.username, id, "status")).error.code).toBe(403);
    const hidden = (await begin(alice)).id;
    expect((await addPart(bob, alice.username, hidden, "1", "x")).error.code).toBe(400);
    expect((await op(bob, alice.username, hidden, "parts")).error.code).toBe(400);
    const admin = { username: "admin", token: portal.adminToken };
    expect((await addPart(admin, alice.username, hidden, "1", "x")).success).toBe(true);
    expect(await op(admin, alice.username, hidden, "parts")).toEqual({ parts: [1] });
  });

  it("refuses a part that would make the upload larger than 1 GB, and parts go with their item", async () => {
    const { id } = await begin(alice);
    // A stored part that says it holds nearly 1 GB (its bytes are not needed to count it).
    await portal.portico.db.transaction(async (trx) => {
      await trx
        .insertInto("item_files")
        .values({
          item_id: id,
          kind: "parts/00001",
          name: "parts/00001",
          content_type: "application/octet-stream",
          file_id: `big${id}`,
          size: 1024 * 1024 * 1024 - 2,
        })
        .execute();
    });
    expect((await addPart(alice, alice.username, id, "2", "abc")).error.details[0]).toMatch(
      /'file'.*1024 MB/,
    );
    expect((await addPart(alice, alice.username, id, "2", "ab")).success).toBe(true);
    await op(alice, alice.username, id, "delete");
    const left = await portal.portico.db.kysely
      .selectFrom("item_files")
      .select("kind")
      .where("item_id", "=", id)
      .execute();
    expect(left).toEqual([]);
  });
});
