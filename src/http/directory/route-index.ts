import type { RouteDef } from "../pipeline.js";

/**
 * The route table read as a directory: which addresses are resources (answer a GET without
 * changing anything) and which are operations, and, for the page of one of them, the resources and
 * operations it leads to. Everything is derived from the routes' paths: a route gets its page and
 * its place among the links without any code of its own.
 */

export type ApiRoot = NonNullable<RouteDef["root"]>;

/** One address of one route. */
export interface DirectoryEntry {
  route: RouteDef;
  root: ApiRoot;
  /** The path template below the API root, e.g. `/portals/:portalId/roles`. */
  template: string;
  segments: readonly string[];
  /** Answers a GET that changes nothing: shown as a page of its fields. */
  resource: boolean;
}

/** A link of a page: where it goes and what it says. */
export interface DirectoryLink {
  href: string;
  label: string;
  /** The route's name, said beside the label. */
  name: string;
}

export interface PageLinks {
  /** Resources below this one (and those of the ids in its answer). */
  children: DirectoryLink[];
  /** Operations on this resource. */
  operations: DirectoryLink[];
  /** Resources and operations elsewhere about the same thing (an item's owner's operations on it). */
  related: DirectoryLink[];
  /** Resources below this one that need an id the answer does not give, as templates. */
  templates: string[];
}

const isParam = (segment: string) => segment.startsWith(":");
const splitPath = (template: string) => template.split("/").filter((s) => s !== "");

/** Whether two template segments stand for the same place: both parameters, or the same word. */
const sameSegment = (a: string, b: string) =>
  isParam(a) ? isParam(b) : !isParam(b) && a.toLowerCase() === b.toLowerCase();

/** Whether template `a` is a proper prefix of template `b`. */
const isPrefix = (a: readonly string[], b: readonly string[]) =>
  a.length < b.length && a.every((s, i) => sameSegment(s, b[i] as string));

/** Where `:portalId` is not in the URL: `self` names the caller's organization (`wire.md` §1). */
const DEFAULTS: Readonly<Record<string, string>> = { portalId: "self" };

/** Arrays of an answer that list the things a `:param` of a child names, beyond `<param>s`. */
const LISTS: Readonly<Record<string, readonly string[]>> = {
  layerId: ["layers", "tables"],
  invitationId: ["userInvitations", "invitations"],
};

/** Most links of one kind on a page; a search answer lists at most 100 things anyway. */
const MAX_LINKS = 200;

export const API_ROOT_PATHS: Readonly<Record<ApiRoot, string>> = {
  sharing: "/sharing/rest",
  server: "/rest",
  portaladmin: "/portaladmin",
};

export class RouteIndex {
  readonly entries: readonly DirectoryEntry[];
  private readonly byUrl = new Map<string, DirectoryEntry>();

  constructor(
    routes: readonly RouteDef[],
    private readonly contextPath: string,
  ) {
    const entries: DirectoryEntry[] = [];
    for (const route of routes) {
      const root = route.root ?? "sharing";
      for (const template of typeof route.path === "string" ? [route.path] : route.path) {
        const entry = {
          route,
          root,
          template,
          segments: splitPath(template),
          resource: route.methods.includes("GET") && !route.changesState,
        };
        entries.push(entry);
        // A GET and a POST route at one address: the GET one is the page.
        const key = `${root} ${template}`;
        if (!this.byUrl.has(key) || entry.resource) this.byUrl.set(key, entry);
      }
    }
    this.entries = entries;
  }

  /** The entry of an address as registered (`root` and the template). */
  entryOf(root: ApiRoot, template: string): DirectoryEntry | undefined {
    return this.byUrl.get(`${root} ${template}`);
  }

  /** Whether some route answers a GET at this template (then no form page is added there). */
  hasGet(root: ApiRoot, template: string): boolean {
    const segments = splitPath(template);
    return this.entries.some(
      (e) =>
        e.root === root &&
        e.route.methods.includes("GET") &&
        e.segments.length === segments.length &&
        e.segments.every((s, i) => s === segments[i]),
    );
  }

  /** The URL path of a template with its parameters filled (each value one encoded segment). */
  urlOf(root: ApiRoot, segments: readonly string[], values: Readonly<Record<string, string>>): string {
    const filled = segments.map((s) => (isParam(s) ? encodeURIComponent(values[s.slice(1)] ?? "") : s));
    return `${this.contextPath}${API_ROOT_PATHS[root]}${filled.length ? `/${filled.join("/")}` : ""}`;
  }

  /** The entry a URL path below an API root goes to, by its segments (for breadcrumbs). */
  resourceAt(root: ApiRoot, segments: readonly string[]): DirectoryEntry | undefined {
    return this.entries.find(
      (e) =>
        e.resource &&
        e.root === root &&
        e.segments.length === segments.length &&
        e.segments.every((s, i) => isParam(s) || s.toLowerCase() === segments[i]?.toLowerCase()),
    );
  }

  /**
   * The links of the page of `entry` at the URL whose parameters are `path`, given its answer.
   * Below it: the nearest resources (a resource between this one and a deeper one leads there)
   * and the operations whose nearest resource this is; a resource one id deeper, for each id the
   * answer lists. Beside it: what another address offers about the same thing (all of its
   * parameters known from this URL, and the owner an answer names).
   */
  linksOf(entry: DirectoryEntry, path: Readonly<Record<string, string>>, answer: unknown): PageLinks {
    const links: PageLinks = { children: [], operations: [], related: [], templates: [] };
    const values: Record<string, string> = { ...DEFAULTS, ...path };
    const seen = new Set<string>();
    const add = (list: DirectoryLink[], link: DirectoryLink) => {
      if (seen.has(link.href) || list.length >= MAX_LINKS) return;
      seen.add(link.href);
      list.push(link);
    };
    const sameRoot = this.entries.filter((e) => e.root === entry.root);
    const below = sameRoot.filter((e) => isPrefix(entry.segments, e.segments));
    const nearest = (e: DirectoryEntry, among: readonly DirectoryEntry[]) =>
      !among.some((a) => a.resource && a !== e && isPrefix(a.segments, e.segments));
    const between = (e: DirectoryEntry) => below.filter((a) => isPrefix(a.segments, e.segments));
    // A child continues this page's URL, whatever its own template names the parameters.
    const here = this.urlOf(entry.root, entry.segments, values);
    for (const child of below) {
      if (!nearest(child, between(child))) continue;
      const rest = child.segments.slice(entry.segments.length);
      const unknown = rest.filter((s) => isParam(s) && values[s.slice(1)] === undefined);
      const url = (extra: Record<string, string> = {}) => {
        const filled = rest.map((s) =>
          isParam(s) ? encodeURIComponent(extra[s.slice(1)] ?? values[s.slice(1)] ?? "") : s,
        );
        return `${here}/${filled.join("/")}?f=html`;
      };
      if (unknown.length === 0) {
        add(child.resource ? links.children : links.operations, {
          href: url(),
          label: rest.map((s) => (isParam(s) ? (values[s.slice(1)] ?? s) : s)).join("/"),
          name: child.route.name,
        });
        continue;
      }
      const param = (unknown[0] as string).slice(1);
      const ids = unknown.length === 1 && rest.length === 1 && child.resource ? idsIn(answer, param) : [];
      for (const id of ids) {
        add(links.children, { href: url({ [param]: id.value }), label: id.label, name: child.route.name });
      }
      if (ids.length === 0 && child.resource) links.templates.push(`${rest.join("/")} (${child.route.name})`);
    }
    // The owner of the thing this page shows, for what its owner's addresses offer about it.
    const owner = answerField(answer, "owner");
    const known: Record<string, string> = {
      ...values,
      ...(owner && !values.username ? { username: owner } : {}),
    };
    // `:portalId` is every organization route's: only the other parameters say what this is about.
    const params = entry.segments
      .filter(isParam)
      .map((s) => s.slice(1))
      .filter((name) => name !== "portalId");
    const related = this.entries.filter(
      (e) =>
        e !== entry &&
        params.length > 0 &&
        !(
          e.root === entry.root &&
          (isPrefix(entry.segments, e.segments) || isPrefix(e.segments, entry.segments))
        ) &&
        e.segments.some(isParam) &&
        e.segments.every((s) => !isParam(s) || known[s.slice(1)] !== undefined) &&
        params.every((name) => e.segments.includes(`:${name}`)) &&
        !(
          e.segments.length === entry.segments.length &&
          e.segments.every((s, i) => sameSegment(s, entry.segments[i] as string))
        ),
    );
    for (const e of related) {
      if (!nearest(e, related)) continue;
      add(links.related, {
        href: `${this.urlOf(e.root, e.segments, known)}?f=html`,
        label: `${API_ROOT_PATHS[e.root]}/${e.segments.map((s) => (isParam(s) ? known[s.slice(1)] : s)).join("/")}`,
        name: `${e.route.name}${e.resource ? "" : " (operation)"}`,
      });
    }
    return links;
  }
}

/** A top-level text field of an answer. */
function answerField(answer: unknown, name: string): string | undefined {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) return undefined;
  const value = (answer as Record<string, unknown>)[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * The ids an answer lists for a `:param` one level down: in its arrays of objects named for the
 * parameter (`roles` for `:roleId`, `layers` and `tables` for `:layerId`) or `results`, each
 * object's `<param>` or `id`.
 */
function idsIn(answer: unknown, param: string): { value: string; label: string }[] {
  if (typeof answer !== "object" || answer === null) return [];
  const base = param.replace(/Id$/, "").toLowerCase();
  const names = new Set([...(LISTS[param] ?? []), `${base}s`, "results"].map((n) => n.toLowerCase()));
  const lists = Array.isArray(answer)
    ? [answer]
    : Object.entries(answer as Record<string, unknown>)
        .filter(([key, value]) => Array.isArray(value) && names.has(key.toLowerCase()))
        .map(([, value]) => value as unknown[]);
  const out: { value: string; label: string }[] = [];
  for (const list of lists) {
    for (const element of list.slice(0, MAX_LINKS)) {
      if (typeof element !== "object" || element === null) continue;
      const record = element as Record<string, unknown>;
      const id = record[param] ?? record.id;
      if (typeof id !== "string" && typeof id !== "number") continue;
      const title = record.title ?? record.name ?? record.username;
      const value = String(id);
      out.push({ value, label: typeof title === "string" && title !== "" ? `${title} (${value})` : value });
    }
  }
  return out;
}
