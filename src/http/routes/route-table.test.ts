import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { allRoutes } from "./index.js";
import { ROUTE_TABLE_PATH, routeRows, routeTableMarkdown } from "./route-table.js";

describe("route table", () => {
  it("docs/routes.md is what `npm run routes:doc` writes from allRoutes now", () => {
    const written = readFileSync(new URL(`../../../${ROUTE_TABLE_PATH}`, import.meta.url), "utf8");
    expect(
      written === routeTableMarkdown(),
      `${ROUTE_TABLE_PATH} is out of date with allRoutes: run \`npm run routes:doc\` and commit it`,
    ).toBe(true);
  });

  it("has a row for each address of each route, below the route's API root", () => {
    const addresses = allRoutes.reduce((n, r) => n + (typeof r.path === "string" ? 1 : r.path.length), 0);
    const rows = routeRows();
    expect(rows).toHaveLength(addresses);
    expect(rows.filter((r) => r.name === "content.user").map((r) => r.path)).toEqual([
      "/sharing/rest/content/users/:username",
      "/sharing/rest/content/users/:username/:folderId",
    ]);
    expect(rows.find((r) => r.name === "server.info")).toMatchObject({
      path: "/rest/info",
      auth: "none",
      file: "rest.routes.ts",
    });
    expect(rows.find((r) => r.name === "portaladmin.createUser")).toMatchObject({
      path: "/portaladmin/security/users/createUser",
      privilege: "portal:admin:inviteUsers",
      file: "portaladmin.routes.ts",
    });
  });

  it("holds JSON parameter schemas that compile (they are compiled at first use when serving)", () => {
    let compiled = 0;
    for (const route of allRoutes) {
      for (const [name, spec] of Object.entries(route.params)) {
        if (spec.kind !== "json") continue;
        expect(spec.compile, `${route.name} ${name}`).toBeTypeOf("function");
        expect(() => spec.compile?.(), `${route.name} ${name}`).not.toThrow();
        compiled++;
      }
    }
    expect(compiled).toBeGreaterThan(50);
  });
});
