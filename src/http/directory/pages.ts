import type { ParamSpecs } from "../../validation/params.js";
import { escapeHtml, PAGE_STYLE } from "./html.js";
import type { DirectoryLink, PageLinks } from "./route-index.js";
import { CSRF_FIELD } from "./session.js";

/**
 * The pages of the API directory (`f=html`): an answer's fields as definition lists and tables,
 * the links a route table gives it, operation forms, the sign-in. No script; everything that comes
 * from data is escaped; no credential is ever put into a URL (links carry `f=html` and ids only).
 */

/** Who is signed in to the directory, and the CSRF value their forms carry. */
export interface Viewer {
  username: string;
  csrf: string;
}

export interface PageContext {
  contextPath: string;
  /** This page's URL path, without its query. */
  path: string;
  viewer: Viewer | undefined;
  /** The way to this page, each step linked when it is a resource. */
  crumbs: readonly { label: string; href?: string | undefined }[];
  /** Link of a thing an answer names (an item's id, a user's name), when the portal has its page. */
  reference?: ((kind: ReferenceKind, value: string) => string | undefined) | undefined;
}

export type ReferenceKind = "user" | "item" | "group";

const e = escapeHtml;

/** The sign-in page's path (and the sign-out's), below the context path. */
export const signInPath = (contextPath: string) => `${contextPath}/sharing/rest/login`;
export const signOutPath = (contextPath: string) => `${contextPath}/sharing/rest/logout`;

function header(ctx: PageContext): string {
  const crumbs = ctx.crumbs
    .map((c) => `<li>${c.href ? `<a href="${e(c.href)}">${e(c.label)}</a>` : e(c.label)}</li>`)
    .join("");
  const who = ctx.viewer
    ? `<div>Signed in as <strong>${e(ctx.viewer.username)}</strong> <form method="post" action="${e(signOutPath(ctx.contextPath))}">` +
      `<input type="hidden" name="${CSRF_FIELD}" value="${e(ctx.viewer.csrf)}"><button type="submit">Sign out</button></form></div>`
    : `<div><a href="${e(`${signInPath(ctx.contextPath)}?next=${encodeURIComponent(ctx.path)}`)}">Sign in</a></div>`;
  return `<header><nav aria-label="Breadcrumb"><ol>${crumbs}</ol></nav>${who}</header>`;
}

/** A whole page: the header with the way here and who is signed in, then `main`. */
export function layout(title: string, ctx: PageContext | undefined, main: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>portico: ${e(title)}</title>
<style>${PAGE_STYLE}</style>
</head><body>${ctx ? header(ctx) : ""}<main>${main}</main>
</body></html>
`;
}

// ------------------------------------------------------------------------------------- answers

/** Bounds of a rendered answer: a page of a huge answer stays a page. */
const MAX_DEPTH = 8;
const MAX_NODES = 5000;
const MAX_ITEMS = 200;
const MAX_TEXT = 4000;
const MAX_COLUMNS = 12;

/** Keys whose numbers are times (epoch milliseconds), shown with their date too. */
const TIME_KEY = /^(created|modified|lastLogin|expires|.*Date|.*Time|.*At)$/;

interface Walk {
  nodes: number;
  /** Members of a `groups` list: their ids name groups. */
  groups: WeakSet<object>;
  reference: PageContext["reference"];
}

function scalar(
  value: unknown,
  key: string | undefined,
  holder: Record<string, unknown> | undefined,
  walk: Walk,
): string {
  if (value === null || value === undefined) return `<span class="meta">null</span>`;
  if (typeof value === "number") {
    if (key && TIME_KEY.test(key) && value > 1e11 && value < 1e14) {
      return `${value} <span class="meta">(${new Date(value).toISOString()})</span>`;
    }
    return String(value);
  }
  if (typeof value === "boolean") return String(value);
  const text = String(value);
  const shown =
    text.length > MAX_TEXT
      ? `${e(text.slice(0, MAX_TEXT))}<span class="meta">… (${text.length - MAX_TEXT} more characters)</span>`
      : e(text);
  const href = referenceOf(key, text, holder, walk);
  return href ? `<a href="${e(href)}">${shown}</a>` : shown;
}

/**
 * The page a value names, by where it stands: an `owner` is a user, the `id` of something with an
 * owner, a type and a title an item, the `id` of a `group` or of a member of `groups` a group. Nothing else is a
 * link: no text of an answer (a URL someone stored, a token) becomes one.
 */
function referenceOf(
  key: string | undefined,
  value: string,
  holder: Record<string, unknown> | undefined,
  walk: Walk,
): string | undefined {
  if (!walk.reference || key === undefined || value === "") return undefined;
  if (key === "owner") return walk.reference("user", value);
  if (key !== "id" || !holder) return undefined;
  if (typeof holder.owner === "string" && typeof holder.type === "string" && "title" in holder) {
    return walk.reference("item", value);
  }
  if (walk.groups.has(holder)) return walk.reference("group", value);
  return undefined;
}

function renderValue(
  value: unknown,
  depth: number,
  walk: Walk,
  key?: string,
  holder?: Record<string, unknown>,
): string {
  walk.nodes++;
  if (walk.nodes > MAX_NODES) return `<span class="meta">…</span>`;
  if (typeof value !== "object" || value === null) return scalar(value, key, holder, walk);
  if (depth >= MAX_DEPTH) return `<span class="meta">(nested deeper than shown)</span>`;
  if (Array.isArray(value)) return renderArray(value, depth, walk, key);
  // A `group` (createGroup's answer) is a group: its id links to its page.
  if (key === "group") walk.groups.add(value);
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return `<span class="meta">{}</span>`;
  const items = entries
    .slice(0, MAX_ITEMS)
    .map(
      ([k, v]) =>
        `<dt>${e(k)}</dt><dd>${renderValue(v, depth + 1, walk, k, value as Record<string, unknown>)}</dd>`,
    )
    .join("");
  const more =
    entries.length > MAX_ITEMS ? `<p class="meta">${entries.length - MAX_ITEMS} more fields</p>` : "";
  return `<dl>${items}</dl>${more}`;
}

function renderArray(list: readonly unknown[], depth: number, walk: Walk, key: string | undefined): string {
  if (list.length === 0) return `<span class="meta">[]</span>`;
  const shown = list.slice(0, MAX_ITEMS);
  const more = list.length > MAX_ITEMS ? `<p class="meta">${list.length - MAX_ITEMS} more entries</p>` : "";
  // Members of `groups` are groups: their ids link to the groups' pages.
  const mark = (element: Record<string, unknown>) => {
    if (key === "groups") walk.groups.add(element);
    return element;
  };
  const objects = shown.every((v) => typeof v === "object" && v !== null && !Array.isArray(v));
  if (objects) {
    const columns = [...new Set(shown.flatMap((v) => Object.keys(v as object)))];
    if (columns.length <= MAX_COLUMNS) {
      const head = columns.map((c) => `<th scope="col">${e(c)}</th>`).join("");
      const rows = shown
        .map((v) => {
          const record = mark(v as Record<string, unknown>);
          return `<tr>${columns.map((c) => `<td>${c in record ? renderValue(record[c], depth + 1, walk, c, record) : ""}</td>`).join("")}</tr>`;
        })
        .join("");
      return `<table><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>${more}`;
    }
    return `<ol>${shown.map((v) => `<li>${renderValue(mark(v as Record<string, unknown>), depth + 1, walk)}</li>`).join("")}</ol>${more}`;
  }
  if (shown.every((v) => typeof v !== "object" || v === null)) {
    return `${shown.map((v) => scalar(v, key, undefined, walk)).join(", ")}${more}`;
  }
  return `<ol>${shown.map((v) => `<li>${renderValue(v, depth + 1, walk)}</li>`).join("")}</ol>${more}`;
}

/** An answer's fields, readably; an error envelope as a message with its details. */
export function answerHtml(body: unknown, reference?: PageContext["reference"]): string {
  const walk: Walk = { nodes: 0, groups: new WeakSet(), reference };
  const error = errorOf(body);
  if (error) {
    const details = Array.isArray(error.details)
      ? error.details.map((d) => `<li>${e(String(d))}</li>`).join("")
      : "";
    return `<div class="error" role="alert"><p><strong>Error ${e(String(error.code ?? ""))}</strong>: ${e(String(error.message ?? ""))}</p>${details ? `<ul>${details}</ul>` : ""}</div>`;
  }
  return renderValue(body, 0, walk);
}

function errorOf(body: unknown): Record<string, unknown> | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  const error = (body as Record<string, unknown>).error;
  return typeof error === "object" && error !== null ? (error as Record<string, unknown>) : undefined;
}

/** The error code of an error envelope. */
export function errorCodeOf(body: unknown): number | undefined {
  const code = errorOf(body)?.code;
  return typeof code === "number" ? code : undefined;
}

/** A page of an answer without its route's context (errors raised before any route ran). */
export function plainPage(title: string, body: unknown): string {
  return layout(title, undefined, `<h1>${e(title)}</h1>${answerHtml(body)}`);
}

// ------------------------------------------------------------------------------------ resources

function linkList(heading: string, links: readonly DirectoryLink[]): string {
  if (links.length === 0) return "";
  const items = links
    .map((l) => `<li><a href="${e(l.href)}">${e(l.label)}</a> <span class="meta">${e(l.name)}</span></li>`)
    .join("");
  return `<section><h2>${e(heading)}</h2><ul class="links">${items}</ul></section>`;
}

export interface RouteFacts {
  name: string;
  methods: readonly string[];
  auth: string;
  privilege?: string | undefined;
  params: ParamSpecs;
  files?: readonly string[];
}

function facts(route: RouteFacts): string {
  const privilege = route.privilege ? `; privilege <code>${e(route.privilege)}</code>` : "";
  return `<p class="meta">Route <code>${e(route.name)}</code>: ${e(route.methods.join(", "))}; sign-in ${e(route.auth)}${privilege}.</p>`;
}

/** Why the page shows no answer: the caller must sign in first. */
function signInNote(ctx: PageContext, code: number | undefined): string {
  if (ctx.viewer || (code !== 499 && code !== 498 && code !== 403)) return "";
  return `<p><a href="${e(`${signInPath(ctx.contextPath)}?next=${encodeURIComponent(ctx.path)}`)}">Sign in</a> to see this resource.</p>`;
}

/** The page of a resource (or of an operation's answer): its fields, then where it leads. */
export function resourcePage(options: {
  ctx: PageContext;
  title: string;
  route: RouteFacts;
  body: unknown;
  links: PageLinks | undefined;
  /** The parameters of this request, to fill the resource's parameter form. */
  query: Readonly<Record<string, string>>;
  /** The answer of an operation posted from its form (then the form is linked, not shown). */
  answerOf?: string | undefined;
}): string {
  const { ctx, route, links } = options;
  const code = errorCodeOf(options.body);
  const heading = options.answerOf ? `Answer of ${options.answerOf}` : options.title;
  const parts = [
    `<h1>${e(heading)}</h1>`,
    facts(route),
    signInNote(ctx, code),
    `<section><h2>${code === undefined ? "Fields" : "Error"}</h2>${answerHtml(options.body, ctx.reference)}</section>`,
  ];
  if (options.answerOf) {
    parts.push(`<p><a href="${e(`${ctx.path}?f=html`)}">Back to the form</a></p>`);
  } else {
    parts.push(parameterForm(ctx, route, options.query));
    parts.push(
      `<p class="meta">Formats: <a href="${e(`${ctx.path}?f=pjson`)}">JSON</a> (API clients send their token; the directory's sign-in is for these pages only).</p>`,
    );
  }
  if (links) {
    parts.push(linkList("Child resources", links.children));
    parts.push(linkList("Operations", links.operations));
    parts.push(linkList("Related resources and operations", links.related));
    if (links.templates.length > 0) {
      parts.push(
        `<section><h2>Resources by id</h2><ul class="links">${links.templates.map((t) => `<li><code>${e(t)}</code></li>`).join("")}</ul></section>`,
      );
    }
  }
  return layout(heading, ctx, parts.join("\n"));
}

// ------------------------------------------------------------------------------------- forms

/** Parameters no form shows: the format is the page's, and a token never goes into a page. */
const HIDDEN_PARAMS = new Set(["f", "token", CSRF_FIELD]);

function fieldOf(
  name: string,
  spec: { kind: string; required: boolean; values?: readonly string[] | undefined },
  value: string | undefined,
): string {
  const { kind, required } = spec;
  const id = `p-${name}`;
  const hint = [kind === "list" ? "comma-separated" : kind, required ? "required" : ""]
    .filter(Boolean)
    .join(", ");
  const label = `<label for="${e(id)}">${e(name)} <span class="hint">(${e(hint)})</span></label>`;
  const v = value === undefined ? "" : e(value);
  if (kind === "boolean") {
    const option = (o: string) =>
      `<option value="${o}"${value === o ? " selected" : ""}>${o === "" ? "(not sent)" : o}</option>`;
    return `${label}<select id="${e(id)}" name="${e(name)}">${["", "true", "false"].map(option).join("")}</select>`;
  }
  if (spec.values) {
    const option = (o: string) =>
      `<option value="${e(o)}"${value === o ? " selected" : ""}>${o === "" ? "(not sent)" : e(o)}</option>`;
    return `${label}<select id="${e(id)}" name="${e(name)}">${["", ...spec.values].map(option).join("")}</select>`;
  }
  if (kind === "json") return `${label}<textarea id="${e(id)}" name="${e(name)}" rows="4">${v}</textarea>`;
  const secret = /password|secret/i.test(name);
  return `${label}<input type="${secret ? "password" : "text"}" id="${e(id)}" name="${e(name)}" value="${secret ? "" : v}" autocomplete="off"${kind === "integer" || kind === "number" ? ' inputmode="decimal"' : ""}>`;
}

function fields(route: RouteFacts, values: Readonly<Record<string, string>>): string {
  return Object.entries(route.params)
    .filter(([name]) => !HIDDEN_PARAMS.has(name))
    .map(([name, spec]) => fieldOf(name, spec, values[name]))
    .join("\n");
}

/** A resource's parameters (a search's `q`), as a GET form to this page. */
function parameterForm(ctx: PageContext, route: RouteFacts, query: Readonly<Record<string, string>>): string {
  if (!route.methods.includes("GET")) return "";
  const inputs = fields(route, query);
  if (inputs === "") return "";
  return `<section><h2>Parameters</h2><form class="op" method="get" action="${e(ctx.path)}">
<input type="hidden" name="f" value="html">
${inputs}
<button type="submit">Get</button></form></section>`;
}

/** The form page of an operation: one field per declared parameter, posted to the operation. */
export function operationPage(options: {
  ctx: PageContext;
  title: string;
  route: RouteFacts;
  links?: PageLinks;
}): string {
  const { ctx, route } = options;
  const files = route.files ?? [];
  const fileInputs = files
    .map(
      (name) =>
        `<label for="file-${e(name)}">${e(name)} <span class="hint">(file)</span></label><input type="file" id="file-${e(name)}" name="${e(name)}">`,
    )
    .join("\n");
  const needsSignIn = route.auth === "required" && !ctx.viewer;
  const csrf = ctx.viewer ? `<input type="hidden" name="${CSRF_FIELD}" value="${e(ctx.viewer.csrf)}">` : "";
  const note = needsSignIn
    ? `<p><a href="${e(`${signInPath(ctx.contextPath)}?next=${encodeURIComponent(ctx.path)}`)}">Sign in</a> to use this operation.</p>`
    : "";
  const parts = [
    `<h1>${e(options.title)}</h1>`,
    facts(route),
    note,
    `<form class="op" method="post" action="${e(ctx.path)}"${files.length ? ' enctype="multipart/form-data"' : ""}>
<input type="hidden" name="f" value="html">
${csrf}
${fields(route, {})}
${fileInputs}
<button type="submit">Submit</button></form>`,
  ];
  if (options.links) parts.push(linkList("Related resources and operations", options.links.related));
  return layout(options.title, ctx, parts.join("\n"));
}

// ------------------------------------------------------------------------------------- sign-in

export function signInPage(options: {
  ctx: PageContext;
  portalName: string;
  formSecret: string;
  next: string;
  username?: string | undefined;
  error?: string | undefined;
}): string {
  const { ctx } = options;
  const error = options.error ? `<p class="error" role="alert">${e(options.error)}</p>` : "";
  const signedIn = ctx.viewer
    ? `<p>You are signed in as <strong>${e(ctx.viewer.username)}</strong>. Signing in again replaces that sign-in.</p>`
    : "";
  return layout(
    `Sign in to ${options.portalName}`,
    ctx,
    `<h1>Sign in to the API directory of ${e(options.portalName)}</h1>
<p>The directory's pages and forms then act as you. The sign-in is kept in a cookie that only these pages accept; API clients send a token as always.</p>
${signedIn}${error}
<form class="op" method="post" action="${e(signInPath(ctx.contextPath))}">
<input type="hidden" name="directory_form" value="${e(options.formSecret)}">
<input type="hidden" name="next" value="${e(options.next)}">
<label for="username">Username</label>
<input type="text" id="username" name="username" autocomplete="username" required value="${e(options.username ?? "")}">
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`,
  );
}

export function signOutPage(options: { ctx: PageContext; error?: string | undefined }): string {
  const { ctx } = options;
  const error = options.error ? `<p class="error" role="alert">${e(options.error)}</p>` : "";
  const main = ctx.viewer
    ? `<h1>Sign out</h1>${error}<p>Signed in as <strong>${e(ctx.viewer.username)}</strong>.</p>
<form class="op" method="post" action="${e(signOutPath(ctx.contextPath))}"><input type="hidden" name="${CSRF_FIELD}" value="${e(ctx.viewer.csrf)}"><button type="submit">Sign out</button></form>`
    : `<h1>Signed out</h1>${error}<p>Nobody is signed in to the directory in this browser. <a href="${e(`${signInPath(ctx.contextPath)}`)}">Sign in</a></p>`;
  return layout("Sign out", ctx, main);
}
