import { describe, expect, it } from "vitest";
import { checkTypedValue, itemSpecs, urlRefusal } from "./item-specs.js";

describe("item specs", () => {
  it("accepts only absolute http and https URLs", () => {
    expect(urlRefusal("https://services.example.com/arcgis/rest/services/x/FeatureServer")).toBe(undefined);
    expect(urlRefusal("http://example.com")).toBe(undefined);
    for (const bad of [
      "javascript:alert(1)",
      "JaVaScRiPt:alert(1)",
      "data:text/html,<b>",
      "/relative",
      "vbscript:x",
    ])
      expect(urlRefusal(bad), bad).toMatch(/absolute http or https/);
  });

  it("checks typed lists as the form value would be checked", () => {
    expect(checkTypedValue(itemSpecs.tags, ["a", "b"])).toBe(undefined);
    expect(checkTypedValue(itemSpecs.tags, [])).toBe(undefined);
    expect(checkTypedValue(itemSpecs.tags, Array(129).fill("t"))).toMatch(/at most 128 entries/);
    expect(checkTypedValue(itemSpecs.tags, [" padded"])).toMatch(/trimmed/);
    expect(checkTypedValue(itemSpecs.tags, [1])).toMatch(/array of strings/);
    expect(checkTypedValue(itemSpecs.title, 5)).toMatch(/must be a string/);
    expect(checkTypedValue(itemSpecs.properties, { a: "b\u0000" })).toMatch(/NUL/);
    expect(checkTypedValue(itemSpecs.properties, [1])).toMatch(/must be object/);
  });
});
