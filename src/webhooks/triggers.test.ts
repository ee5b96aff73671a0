import { describe, expect, it } from "vitest";
import { parseTrigger, triggerCovers } from "./triggers.js";

const ITEM = "0123456789abcdef0123456789ABCDEF";

describe("parseTrigger", () => {
  it("reads / as every event", () => {
    expect(parseTrigger("/")).toEqual({});
  });

  it("reads the any-object scopes: a source, or a source and an operation", () => {
    expect(parseTrigger("/items")).toEqual({ source: "item" });
    expect(parseTrigger("/groups/share")).toEqual({ source: "group", operation: "share" });
    expect(parseTrigger("/users/add")).toEqual({ source: "user", operation: "add" });
    expect(parseTrigger("/roles/delete")).toEqual({ source: "role", operation: "delete" });
  });

  it("reads the one-object scopes, with ids in lower case", () => {
    expect(parseTrigger(`/items/${ITEM}`)).toEqual({ source: "item", object: ITEM.toLowerCase() });
    expect(parseTrigger(`/items/${ITEM}/share`)).toEqual({
      source: "item",
      object: ITEM.toLowerCase(),
      operation: "share",
    });
    expect(parseTrigger("/users/JDoe.gis/updateUserRole")).toEqual({
      source: "user",
      object: "jdoe.gis",
      operation: "updateUserRole",
    });
  });

  it("takes a second segment that names an operation as the operation, not as a username", () => {
    expect(parseTrigger("/users/update")).toEqual({ source: "user", operation: "update" });
    expect(parseTrigger("/users/updates")).toEqual({ source: "user", object: "updates" });
  });

  it("refuses URIs that are not trigger URIs, saying why", () => {
    for (const uri of ["items", "/items/", "//items", `/items/${ITEM}/share/x`]) {
      expect(parseTrigger(uri), uri).toMatch(/is not a trigger URI/);
    }
    expect(parseTrigger("/widgets")).toMatch(/starts with \/widgets/);
    expect(parseTrigger("/items/nothex")).toMatch(/names neither a item id/);
    expect(parseTrigger("/users/ab")).toMatch(/names neither a user/);
    expect(parseTrigger(`/groups/${ITEM}/publish`)).toMatch(/has no group operation 'publish'/);
  });

  it("has no one-object scope for add, since the object does not exist before it", () => {
    expect(parseTrigger(`/items/${ITEM}/add`)).toMatch(/has no item operation 'add'/);
  });
});

describe("triggerCovers", () => {
  const event = { source: "item", operation: "share", objectId: ITEM };

  it("covers an event by every part the trigger names, ids compared case-insensitively", () => {
    expect(triggerCovers({}, event)).toBe(true);
    expect(triggerCovers({ source: "item" }, event)).toBe(true);
    expect(triggerCovers({ source: "item", operation: "share" }, event)).toBe(true);
    expect(triggerCovers({ source: "item", object: ITEM.toLowerCase(), operation: "share" }, event)).toBe(
      true,
    );
  });

  it("does not cover an event that differs in any part the trigger names", () => {
    expect(triggerCovers({ source: "group" }, event)).toBe(false);
    expect(triggerCovers({ source: "item", operation: "unshare" }, event)).toBe(false);
    expect(triggerCovers({ source: "item", object: "f".repeat(32) }, event)).toBe(false);
  });
});
