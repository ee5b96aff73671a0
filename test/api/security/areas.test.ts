import { describe, expect, it } from "vitest";
import { allRoutes } from "../../../src/http/routes/index.js";
import { collaborationsArea } from "./collaborations.matrix.js";
import { communityArea } from "./community.matrix.js";
import { contentArea } from "./content.matrix.js";
import { type Area, NO_CREDENTIALS, routeFileOfRoute, routesOf } from "./harness.js";
import { portalArea } from "./portal.matrix.js";
import { servicesArea } from "./services.matrix.js";

/**
 * The areas of the security matrix together: each `<area>.test.ts` runs only the routes of its
 * area's route files, so a route no area's table holds, or one held by the area of another file,
 * would go untested without this check. It starts no portal.
 */
const AREAS: Record<string, Area> = {
  content: contentArea,
  community: communityArea,
  portal: portalArea,
  collaborations: collaborationsArea,
  services: servicesArea,
};

describe("the expectation table", () => {
  it("covers every route, with a set-up for each, and names no route that does not exist", () => {
    const names = allRoutes.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
    // Every route file belongs to exactly one area, and every file an area names declares routes.
    const files = Object.values(AREAS).flatMap((area) => area.files);
    expect(new Set(files).size).toBe(files.length);
    expect([...new Set(allRoutes.map(routeFileOfRoute))].sort()).toEqual([...files].sort());
    // The union of the tables is every route, each once; each in the area of its route file.
    const tabled = Object.values(AREAS).flatMap((area) => Object.keys(area.expected));
    const setUp = Object.values(AREAS).flatMap((area) => Object.keys(area.setup));
    expect([...tabled].sort()).toEqual([...names].sort());
    expect([...setUp].sort()).toEqual([...names].sort());
    for (const [name, area] of Object.entries(AREAS)) {
      const own = routesOf(area)
        .map((r) => r.name)
        .sort();
      expect(Object.keys(area.expected).sort(), `${name} expectations`).toEqual(own);
      expect(Object.keys(area.setup).sort(), `${name} set-ups`).toEqual(own);
    }
    for (const name of NO_CREDENTIALS) expect(names).toContain(name);
  });
});
