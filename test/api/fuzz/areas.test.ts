import { describe, expect, it } from "vitest";
import { allRoutes } from "../../../src/http/routes/index.js";
import { areaRoutes, FUZZ_AREAS, type FuzzArea } from "./areas.js";

const areas = Object.keys(FUZZ_AREAS) as FuzzArea[];
const areaOf = (route: (typeof allRoutes)[number]) =>
  areas.filter((area) => areaRoutes(area).includes(route));

describe("the fuzz areas", () => {
  it("hold every route of allRoutes in exactly one area, so that none goes unfuzzed or is fuzzed twice", () => {
    expect(allRoutes.filter((route) => areaOf(route).length === 0).map((r) => r.name)).toEqual([]);
    expect(allRoutes.filter((route) => areaOf(route).length > 1).map((r) => r.name)).toEqual([]);
    // Nothing but allRoutes either: an area holding a table the server does not serve would fail here.
    expect(areas.flatMap(areaRoutes)).toHaveLength(allRoutes.length);
  });

  it("see each route under its own name, from which its requests are drawn", () => {
    expect(new Set(allRoutes.map((route) => route.name)).size).toBe(allRoutes.length);
  });

  it("leave no area empty", () => {
    for (const area of areas) expect(areaRoutes(area).length, area).toBeGreaterThan(0);
  });
});
