import { apiRoot, type RouteDef } from "../pipeline.js";
import { allRoutes } from "./index.js";
import { ROUTE_FILE_PREFIXES, routeFileOf } from "./route-files.js";

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

/**
 * A Markdown table with its columns padded to their widest cell, as the formatter (Biome) writes
 * tables: the generated file then passes the lint unchanged.
 */
function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)];
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
    "## The rule",
    "",
    "The file of `src/http/routes/` that declares an endpoint: below its API root, the longest of these",
    "prefixes that matches the URL's path names the file. A prefix is whole segments; a `:name` segment",
    "stands for any one segment. The empty prefix of a root takes what no longer one does.",
    "",
    ...markdownTable(
      ["API root", "Prefix", "File"],
      ROUTE_FILE_PREFIXES.map((r) => [
        `\`${apiRoot(r.root, "")}\``,
        r.prefix === "" ? "(empty)" : `\`${r.prefix}\``,
        r.file,
      ]),
    ),
    "",
    "## Every address",
    "",
    "Below the server's context path (`PORTICO_CONTEXT_PATH`). Auth: `none` reads no credentials,",
    "`optional` serves anonymous callers, `required` refuses them.",
    "",
    ...markdownTable(
      ["Path", "Methods", "Name", "Auth", "Privilege", "File"],
      routeRows(routes).map((r) => [
        `\`${r.path}\``,
        r.methods,
        `\`${r.name}\``,
        r.auth,
        privilege(r),
        r.file,
      ]),
    ),
    "",
  ];
  return lines.join("\n");
}
