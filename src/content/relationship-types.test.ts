import { describe, expect, it } from "vitest";
import { mustOwnDestination, RELATIONSHIP_TYPES, relationshipType } from "./relationship-types.js";

describe("item relationship types", () => {
  it("knows the documented types in any case and nothing else", () => {
    expect(relationshipType("map2service")).toBe("Map2Service");
    expect(relationshipType("WMA2CODE")).toBe("WMA2Code");
    expect(relationshipType("Map2Nothing")).toBeUndefined();
    expect(relationshipType("")).toBeUndefined();
    expect(Object.keys(RELATIONSHIP_TYPES)).toHaveLength(26);
  });

  it("requires the destination's owner where the type's rule says so", () => {
    expect(mustOwnDestination("Service2Data")).toBe(true);
    expect(mustOwnDestination("Style2Style")).toBe(true);
    expect(mustOwnDestination("Map2Service")).toBe(false);
    expect(mustOwnDestination("Survey2Service")).toBe(false);
  });
});
