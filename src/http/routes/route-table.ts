import { apiRoot, type RouteDef } from "../pipeline.js";
import { allRoutes } from "./index.js";
import { routeFileOf } from "./route-files.js";

/** Where `npm run routes:doc` writes the table, from the repository's root. */
export const ROUTE_TABLE_PATH = "docs/routes.md";

/** One row of the route table: one address of one route. */
export interface RouteRow {
  name: string;
  methods: string;
  /** The path from the server's context path on, with `:params`. */
  path: string;
  auth: RouteDef["auth"];
  privilege: string | undefined;
  /** The route also asks for privileges that depend on which parameters are sent (`authorize`). */
  privilegeByParameters: boolean;
  file: string;
}

/** Every address of every route, in the order of its path: a URL is looked up by reading down. */
export function routeRows(routes: readonly RouteDef[] = allRoutes): RouteRow[] {
  const rows = routes.flatMap((route) =>
    (typeof route.path === "string" ? [route.path] : route.path).map((path) => ({
      name: route.name,
      methods: route.methods.join(", "),
      path: `${apiRoot(route.root, "")}${path}`,
      auth: route.auth,
      privilege: route.privilege,
      privilegeByParameters: route.authorize !== undefined,
      file: routeFileOf(route.root ?? "sharing", path),
    })),
  );
  // Code-point order, not the locale's: the file must come out the same on every machine.
  return rows.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.name < b.name ? -1 : 1));
}

/** docs/routes.md: the route table as Markdown. */
export function routeTableMarkdown(routes: readonly RouteDef[] = allRoutes): string {
  const privilege = (r: RouteRow) =>
    [r.privilege && `\`${r.privilege}\``, r.privilegeByParameters && "more, by the parameters sent"]
      .filter(Boolean)
      .join("; ");
  const lines = [
    "# Routes",
    "",
    "<!-- Written by `npm run routes:doc` from `allRoutes` (src/http/routes/route-table.ts); do not edit. -->",
    "",
    "Every address the server answers, below its context path (`PORTICO_CONTEXT_PATH`), with the file",
    "of `src/http/routes/` that declares it. The file follows from the URL by the rule in the README",
    "(Layout) and `routeFileOf` (src/http/routes/route-files.ts). Auth: `none` reads no credentials,",
    "`optional` serves anonymous callers, `required` refuses them.",
    "",
    "| Path | Methods | Name | Auth | Privilege | File |",
    "| --- | --- | --- | --- | --- | --- |",
    ...routeRows(routes).map(
      (r) => `| \`${r.path}\` | ${r.methods} | \`${r.name}\` | ${r.auth} | ${privilege(r)} | ${r.file} |`,
    ),
    "",
  ];
  return lines.join("\n");
}
