import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { RouteDef } from "../pipeline.js";
import { allRoutes } from "./index.js";
import { type ApiRoot, ROUTE_FILE_PREFIXES, routeFileOf } from "./route-files.js";

/** Every `*.routes.ts` beside this test, imported on its own: a new file is checked without a list. */
const routeFiles = readdirSync(new URL(".", import.meta.url))
  .filter((f) => f.endsWith(".routes.ts"))
  .sort();

const modules = await Promise.all(
  routeFiles.map(async (file) => ({
    file,
    exports: (await import(/* @vite-ignore */ `./${file.replace(/\.ts$/, ".js")}`)) as Record<
      string,
      unknown
    >,
  })),
);

/** A route file's tables: its exported arrays (a file may export a constant beside its table). */
const tablesOf = (exports: Record<string, unknown>) =>
  Object.entries(exports).filter((entry): entry is [string, RouteDef[]] => Array.isArray(entry[1]));

const pathsOf = (route: RouteDef) => (typeof route.path === "string" ? [route.path] : [...route.path]);
const rootOf = (route: RouteDef): ApiRoot => route.root ?? "sharing";

describe("routeFileOf", () => {
  it("names the file of a URL with ids in it, as a reader would look it up", () => {
    expect(routeFileOf("sharing", "/community/groups")).toBe("community-groups.routes.ts");
    expect(routeFileOf("sharing", "/community/groups/0a1b2c/invite")).toBe("community-groups.routes.ts");
    expect(routeFileOf("sharing", "/community/createGroup")).toBe("community-groups.routes.ts");
    expect(routeFileOf("sharing", "/community/users/jsmith/invitations/42/accept")).toBe(
      "community-users.routes.ts",
    );
    expect(routeFileOf("sharing", "/community/self")).toBe("community-users.routes.ts");
    expect(routeFileOf("sharing", "/content/items/abc/comments/7/delete")).toBe("content-items.routes.ts");
    expect(routeFileOf("sharing", "/content/users/jsmith/f00/createService")).toBe("content-users.routes.ts");
    expect(routeFileOf("sharing", "/content/groups/abc")).toBe("content-groups.routes.ts");
    expect(routeFileOf("sharing", "/portals/self")).toBe("portals.routes.ts");
    expect(routeFileOf("sharing", "/portals/self/securityPolicy/update")).toBe("portals.routes.ts");
    expect(routeFileOf("sharing", "/portals/self/createRole")).toBe("portals-roles.routes.ts");
    expect(routeFileOf("sharing", "/portals/0123/webhooks/w1/ping")).toBe("portals-webhooks.routes.ts");
    expect(routeFileOf("sharing", "/portals/self/acceptCollaborationInvitation")).toBe(
      "portals-collaborations.routes.ts",
    );
    expect(routeFileOf("sharing", "/portico/peer/sync")).toBe("portico.routes.ts");
    expect(routeFileOf("sharing", "/oauth2/revokeToken")).toBe("oauth2.routes.ts");
    expect(routeFileOf("sharing", "/search")).toBe("search.routes.ts");
    expect(routeFileOf("sharing", "/generateToken")).toBe("sharing.routes.ts");
    expect(routeFileOf("sharing", "/")).toBe("sharing.routes.ts");
  });

  it("tells the roots apart: the same path below another root is another file", () => {
    expect(routeFileOf("sharing", "/info")).toBe("sharing.routes.ts");
    expect(routeFileOf("server", "/info")).toBe("rest.routes.ts");
    expect(routeFileOf("portaladmin", "/security/users/createUser")).toBe("portaladmin.routes.ts");
  });

  it("sends a feature's attachment operations to their own file and the feature itself to the services", () => {
    const feature = "/services/Parcels/FeatureServer/0/17";
    expect(routeFileOf("server", feature)).toBe("rest-services.routes.ts");
    expect(routeFileOf("server", `${feature}/attachments/3`)).toBe("rest-services-attachments.routes.ts");
    expect(routeFileOf("server", `${feature}/deleteAttachments`)).toBe("rest-services-attachments.routes.ts");
    expect(routeFileOf("server", "/services/Parcels/FeatureServer/0/query")).toBe("rest-services.routes.ts");
    expect(routeFileOf("server", "/admin/services/Parcels/FeatureServer/0/addToDefinition")).toBe(
      "rest-admin-services.routes.ts",
    );
  });

  it("reads a URL as the server routes it: any case, doubled or trailing slashes", () => {
    expect(routeFileOf("sharing", "/Community/GROUPS/abc/")).toBe("community-groups.routes.ts");
    expect(routeFileOf("sharing", "//portals//self//roles")).toBe("portals-roles.routes.ts");
  });

  it("has a catch-all for every root, and names only files that exist", () => {
    for (const root of ["sharing", "server", "portaladmin"] as const)
      expect(ROUTE_FILE_PREFIXES.some((r) => r.root === root && r.prefix === "")).toBe(true);
    expect([...new Set(ROUTE_FILE_PREFIXES.map((r) => r.file))].sort()).toEqual(routeFiles);
  });
});

describe("route files", () => {
  it.each(modules)("$file exports one route table, named after the file", ({ file, exports }) => {
    const expected = `${file
      .replace(/\.routes\.ts$/, "")
      .replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase())}Routes`;
    expect(tablesOf(exports).map(([name]) => name)).toEqual([expected]);
  });

  it.each(modules)("$file holds only routes whose URL the rule sends to it", ({ file, exports }) => {
    const routes = tablesOf(exports).flatMap(([, table]) => table);
    expect(routes.length).toBeGreaterThan(0);
    const misplaced = routes.flatMap((route) =>
      pathsOf(route)
        .filter((path) => routeFileOf(rootOf(route), path) !== file)
        .map((path) => `${route.name} ${path} -> ${routeFileOf(rootOf(route), path)}`),
    );
    expect(misplaced).toEqual([]);
  });

  it("makes up allRoutes: every route of it comes from exactly one file, and every file's routes are in it", () => {
    const fromFiles = modules.flatMap(({ exports }) => tablesOf(exports).flatMap(([, table]) => table));
    for (const route of allRoutes) expect(fromFiles.filter((r) => r === route)).toHaveLength(1);
    for (const route of fromFiles) expect(allRoutes.filter((r) => r === route)).toHaveLength(1);
    expect(fromFiles).toHaveLength(allRoutes.length);
  });
});
