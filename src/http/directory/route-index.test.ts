import { describe, expect, it } from "vitest";
import { defineRoute } from "../pipeline.js";
import { RouteIndex } from "./route-index.js";

const route = (name: string, path: string, methods: ("GET" | "POST")[] = ["GET", "POST"], extra = {}) =>
  defineRoute({ name, methods, path, auth: "optional", params: {}, handler: async () => ({}), ...extra });

const index = new RouteIndex(
  [
    route("things", "/things"),
    route("thing", "/things/:thingId"),
    route("thing.parts", "/things/:thingId/parts"),
    route("thing.part", "/things/:thingId/parts/:partId"),
    route("thing.update", "/things/:thingId/update", ["POST"]),
    route("thing.part.delete", "/things/:thingId/parts/:partId/delete", ["POST"]),
    route("thing.reset", "/things/:thingId/reset", ["GET", "POST"], { changesState: true }),
    route("owner.thing.move", "/owners/:username/things/:thingId/move", ["POST"]),
    route("owner.folder.thing.move", "/owners/:username/:folderId/things/:thingId/move", ["POST"]),
  ],
  "/ctx",
);

describe("RouteIndex.linksOf", () => {
  it("links the nearest resources and the operations below a page, with its URL's values", () => {
    const thing = index.entryOf("sharing", "/things/:thingId");
    if (!thing) throw new Error("no entry");
    const links = index.linksOf(thing, { thingId: "a/b" }, { owner: "ann" });
    expect(links.children.map((l) => l.href)).toEqual(["/ctx/sharing/rest/things/a%2Fb/parts?f=html"]);
    // A GET that changes state is an operation; the part's delete belongs to the part's page.
    expect(links.operations.map((l) => l.href)).toEqual([
      "/ctx/sharing/rest/things/a%2Fb/update?f=html",
      "/ctx/sharing/rest/things/a%2Fb/reset?f=html",
    ]);
    // The owner's address of the same thing, filled from the answer; not the one needing a folder.
    expect(links.related.map((l) => l.href)).toEqual([
      "/ctx/sharing/rest/owners/ann/things/a%2Fb/move?f=html",
    ]);
  });

  it("links the ids an answer lists one level down, and names the template when it lists none", () => {
    const parts = index.entryOf("sharing", "/things/:thingId/parts");
    if (!parts) throw new Error("no entry");
    const listed = index.linksOf(
      parts,
      { thingId: "t" },
      { parts: [{ id: 7, name: "<wheel>" }, { id: "x" }] },
    );
    expect(listed.children).toEqual([
      { href: "/ctx/sharing/rest/things/t/parts/7?f=html", label: "<wheel> (7)", name: "thing.part" },
      { href: "/ctx/sharing/rest/things/t/parts/x?f=html", label: "x", name: "thing.part" },
    ]);
    // Ids in arrays not named for the parameter are not taken for it.
    const unrelated = index.linksOf(parts, { thingId: "t" }, { fields: [{ id: 1 }] });
    expect(unrelated.children).toEqual([]);
    expect(unrelated.templates).toEqual([":partId (thing.part)"]);
  });

  it("knows where a GET is answered (no form page is added there)", () => {
    expect(index.hasGet("sharing", "/things/:thingId/update")).toBe(false);
    expect(index.hasGet("sharing", "/things/:thingId/reset")).toBe(true);
  });
});
