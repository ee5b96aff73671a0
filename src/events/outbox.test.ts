import { describe, expect, it } from "vitest";
import { triggerUri } from "./outbox.js";

describe("triggerUri", () => {
  it("gives add events the collection scope, since the object did not exist before", () => {
    expect(triggerUri({ source: "user", operation: "add", objectId: "jdoe" })).toBe("/users/add");
    expect(triggerUri({ source: "role", operation: "add", objectId: "r1" })).toBe("/roles/add");
  });

  it("gives other events the object scope", () => {
    expect(triggerUri({ source: "user", operation: "updateUserRole", objectId: "jdoe" })).toBe(
      "/users/jdoe/updateUserRole",
    );
    expect(triggerUri({ source: "item", operation: "update", objectId: "abc" })).toBe("/items/abc/update");
  });
});
