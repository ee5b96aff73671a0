import type { FastifyRequest } from "fastify";
import { errors } from "../../errors.js";
import type { Services } from "../../services.js";
import type { RouteDef } from "../pipeline.js";
import { WebAnswer } from "../render.js";
import { PAGE_CSP } from "./html.js";
import {
  operationPage,
  type PageContext,
  type ReferenceKind,
  type RouteFacts,
  resourcePage,
  type Viewer,
} from "./pages.js";
import { API_ROOT_PATHS, type DirectoryEntry, RouteIndex } from "./route-index.js";
import { CSRF_FIELD, csrfMatches, csrfOf, directoryTokenOf } from "./session.js";

/** Where a reference of an answer (`pages.ts`) leads: the resource of that kind, by its template. */
const REFERENCES: Readonly<Record<ReferenceKind, { template: string; param: string }>> = {
  user: { template: "/community/users/:username", param: "username" },
  item: { template: "/content/items/:itemId", param: "itemId" },
  group: { template: "/community/groups/:groupId", param: "groupId" },
};

/**
 * The API directory: the `f=html` pages of every route, built from the route table. The pipeline
 * asks it which sign-in cookie a request may use, and hands it the answers to render.
 */
export class Directory {
  readonly index: RouteIndex;

  constructor(
    routes: readonly RouteDef[],
    private readonly contextPath: string,
    private readonly services: Services,
  ) {
    this.index = new RouteIndex(routes, contextPath);
  }

  /**
   * The directory session a request of `route` may be authenticated with, when it sent no token:
   * only for `f=html`; a GET of a route that changes nothing, or a POST whose form carries the
   * session's CSRF value (a POST with the cookie and without the value is refused: it was not sent
   * from the directory's page).
   */
  sessionFor(
    request: FastifyRequest,
    raw: Readonly<Record<string, string>>,
    route: RouteDef,
  ): string | undefined {
    if (raw.f !== "html") return undefined;
    const session = directoryTokenOf(request.headers.cookie);
    if (session === undefined) return undefined;
    if (request.method === "GET" || request.method === "HEAD") {
      return route.methods.includes("GET") && !route.changesState ? session : undefined;
    }
    if (request.method !== "POST") return undefined;
    if (!csrfMatches(raw[CSRF_FIELD], session)) throw errors.directoryFormRefused();
    return session;
  }

  /** Who is signed in to the directory in the browser of this request (for the page's header). */
  async viewerOf(request: FastifyRequest): Promise<Viewer | undefined> {
    const session = directoryTokenOf(request.headers.cookie);
    if (session === undefined) return undefined;
    const caller = await this.services.auth.directorySession(session);
    return caller ? { username: caller.username, csrf: csrfOf(session) } : undefined;
  }

  entryOf(route: RouteDef, template: string): DirectoryEntry | undefined {
    return this.index.entryOf(route.root ?? "sharing", template);
  }

  /** The page of an answer of `entry` (a resource, an operation's answer, an error). */
  async answerPage(
    request: FastifyRequest,
    entry: DirectoryEntry,
    body: unknown,
    query: Readonly<Record<string, string>>,
  ): Promise<WebAnswer> {
    const path = pathParams(request);
    const ctx = await this.context(request, entry, path);
    const posted = request.method === "POST";
    const page = resourcePage({
      ctx,
      title: titleOf(entry, path),
      route: factsOf(entry.route),
      body,
      links: this.index.linksOf(entry, path, body),
      query,
      answerOf: posted || !entry.resource ? entry.route.name : undefined,
    });
    return new WebAnswer({ page, csp: PAGE_CSP });
  }

  /** The form page of an operation. */
  async formPage(request: FastifyRequest, entry: DirectoryEntry): Promise<WebAnswer> {
    const path = pathParams(request);
    const ctx = await this.context(request, entry, path);
    const page = operationPage({
      ctx,
      title: `Operation ${titleOf(entry, path)}`,
      route: factsOf(entry.route),
      links: this.index.linksOf(entry, path, undefined),
    });
    return new WebAnswer({ page, csp: PAGE_CSP });
  }

  private async context(
    request: FastifyRequest,
    entry: DirectoryEntry,
    path: Readonly<Record<string, string>>,
  ): Promise<PageContext> {
    const here = this.index.urlOf(entry.root, entry.segments, { portalId: "self", ...path });
    const rootPath = `${this.contextPath}${API_ROOT_PATHS[entry.root]}`;
    const below = here.slice(rootPath.length).split("/").filter(Boolean);
    const crumbs = [
      {
        label: API_ROOT_PATHS[entry.root].slice(1),
        href: this.index.resourceAt(entry.root, []) ? `${rootPath}?f=html` : undefined,
      },
      ...below.map((segment, i) => {
        const prefix = below.slice(0, i + 1);
        const linked = i < below.length - 1 && this.index.resourceAt(entry.root, prefix.map(decodeSegment));
        return {
          label: decodeSegment(segment),
          href: linked ? `${rootPath}/${prefix.join("/")}?f=html` : undefined,
        };
      }),
    ];
    return {
      contextPath: this.contextPath,
      path: here,
      viewer: await this.viewerOf(request),
      crumbs,
      reference: (kind, value) => {
        const ref = REFERENCES[kind];
        const target = this.index.entryOf("sharing", ref.template);
        return target
          ? `${this.index.urlOf("sharing", target.segments, { [ref.param]: value })}?f=html`
          : undefined;
      },
    };
  }
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

const pathParams = (request: FastifyRequest) => (request.params ?? {}) as Record<string, string>;

function titleOf(entry: DirectoryEntry, path: Readonly<Record<string, string>>): string {
  const shown = entry.segments.map((s) => (s.startsWith(":") ? (path[s.slice(1)] ?? s) : s)).join("/");
  return `${API_ROOT_PATHS[entry.root]}/${shown}`;
}

function factsOf(route: RouteDef): RouteFacts {
  return {
    name: route.name,
    methods: route.methods,
    auth: route.auth,
    privilege: route.privilege,
    params: route.params,
    files: route.files ? Object.keys(route.files) : [],
  };
}
