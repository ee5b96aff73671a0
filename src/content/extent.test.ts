import { describe, expect, it } from "vitest";
import { categoryRefusal, extentJson, parseBox } from "./extent.js";

describe("parseBox", () => {
  it("reads four comma-separated numbers", () => {
    expect(parseBox("-110.5, 44.5,-110,45", false)).toEqual({
      xmin: -110.5,
      ymin: 44.5,
      xmax: -110,
      ymax: 45,
    });
  });

  it("reads the two corners Esri's client may send as JSON", () => {
    expect(parseBox("[[1,2],[3,4]]", false)).toEqual({ xmin: 1, ymin: 2, xmax: 3, ymax: 4 });
  });

  it("refuses anything but four finite numbers", () => {
    for (const raw of ["1,2,3", "1,2,3,4,5", "a,b,c,d", "1,2,3,NaN", "1e999,0,0,0", "[[1,2],[3]]", "[1,2"]) {
      expect(parseBox(raw, false), raw).toBeTypeOf("string");
    }
  });

  it("refuses coordinates outside WGS 84 and inverted latitudes", () => {
    expect(parseBox("-181,0,0,1", false)).toContain("longitudes");
    expect(parseBox("0,-91,1,1", false)).toContain("latitudes");
    expect(parseBox("0,5,1,1", false)).toContain("ymin");
  });

  it("lets only a search box cross the antimeridian", () => {
    expect(parseBox("170,0,-170,10", true)).toEqual({ xmin: 170, ymin: 0, xmax: -170, ymax: 10 });
    expect(parseBox("170,0,-170,10", false)).toContain("xmin");
  });
});

describe("extentJson", () => {
  it("answers two corners, or an empty array without an extent", () => {
    expect(extentJson({ extent_xmin: 1, extent_ymin: 2, extent_xmax: 3, extent_ymax: 4 })).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(
      extentJson({ extent_xmin: null, extent_ymin: null, extent_xmax: null, extent_ymax: null }),
    ).toEqual([]);
  });
});

describe("categoryRefusal", () => {
  it("accepts category paths and refuses other text", () => {
    expect(categoryRefusal("/Categories/Water")).toBeUndefined();
    expect(categoryRefusal("Categories/Water")).toContain("starting with '/'");
    expect(categoryRefusal("/Categories//Water")).toContain("empty level");
    expect(categoryRefusal("/a/b/c/d/e/f")).toContain("levels");
  });
});
