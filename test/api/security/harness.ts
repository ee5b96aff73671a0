import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ALL_PRIVILEGES,
  type BuiltInRole,
  PUBLISHER_PRIVILEGES,
  USER_PRIVILEGES,
} from "../../../src/auth/privileges.js";
import type { RouteDef } from "../../../src/http/pipeline.js";
import { allRoutes } from "../../../src/http/routes/index.js";
import { routeFileOf } from "../../../src/http/routes/route-files.js";
import { newId } from "../../../src/ids.js";
import { PEER_ENV } from "../../helpers/collaboration.js";
import { ADMIN, form, startTestPortal, type TestPortal } from "../../helpers/portico.js";

/**
 * The security matrix: every operation, called by an anonymous caller, a member (org_user), a
 * publisher (org_publisher) and an administrator (org_admin), gets exactly the answer its privilege
 * allows; a denied call writes nothing; tokens of disabled users fail everywhere.
 *
 * The expectations are written from the specification (`interface.md` §5, `wire.md` §2-§8), the
 * README and what ArcGIS does, never read from the routes' `privilege` at run time: a table derived
 * from the code under test could not fail. Every route of `allRoutes` must have an entry.
 *
 * The matrix is split by area, as the route files are (`routeFileOf`): `<area>.matrix.ts` holds an
 * area's expectations and how to call each of its routes, `<area>.test.ts` runs them on a portal of
 * its own, built with only what that area's calls act on, and `areas.test.ts` checks that the areas
 * together cover every route once. This module is what the areas share: the callers and outcomes,
 * the portal with its accounts, the builders of what calls act on, sending a call and judging its
 * answer.
 */

// ------------------------------------------------------------------------------------------ table

export const CALLERS = ["anonymous", "member", "publisher", "admin"] as const;
export type CallerClass = (typeof CALLERS)[number];

/** A success (no `error`, and `success` not false), or exactly this error. */
export type Outcome = "ok" | { code: number; messageCode: string };
type Expectation = Record<CallerClass, Outcome>;

/**
 * What each caller acts on. `org`: the organization, or a resource nobody owns; `own`: the caller's
 * own account or resource (an anonymous caller: another member's); `other`: a resource of another
 * member that the caller can see (org-shared) but does not own or manage; `private`: another
 * member's private resource; `manager`: a group of another member in which the caller is a group
 * manager; `ownItem`: somebody else's comment on the caller's own item; `website`, `security`,
 * `utility`: the organization settings of that privilege group; `host`, `guest`: a collaboration
 * in which this portal is the host, or a guest.
 */
export type Target =
  | "org"
  | "own"
  | "other"
  | "private"
  | "manager"
  | "ownItem"
  | "website"
  | "security"
  | "utility"
  | "host"
  | "guest";

export interface Case {
  on: Target;
  expect: Expectation;
}

export const OK = "ok" as const;
/** `wire.md` §2: an anonymous caller of an operation that needs a token. */
export const E499 = { code: 499, messageCode: "GWM_0002" };
/** `wire.md` §2: a signed-in caller without the privilege. */
export const E403 = { code: 403, messageCode: "GWM_0004" };
/**
 * Reads of what the caller may not see answer as if it did not exist, so ids and names cannot be
 * probed (a missing and a hidden item give the same answer; test/api/existence.test.ts compares them).
 * Anonymous callers are asked for a token (E499) for anything they may not see, existing or not,
 * so that clients offer to sign in; signed-in callers get these "does not exist or is
 * inaccessible" answers.
 */
export const USER_HIDDEN = { code: 400, messageCode: "COM_0003" };
export const ITEM_HIDDEN = { code: 400, messageCode: "CONT_0001" };
export const GROUP_HIDDEN = { code: 400, messageCode: "COM_0036" };
export const SERVICE_HIDDEN = { code: 400, messageCode: "SVC_0002" };

export const row = (
  anonymous: Outcome,
  member: Outcome,
  publisher: Outcome,
  admin: Outcome,
): Expectation => ({
  anonymous,
  member,
  publisher,
  admin,
});
export const EVERYONE = row(OK, OK, OK, OK);
export const SIGNED_IN = row(E499, OK, OK, OK);
export const PUBLISHERS = row(E499, E403, OK, OK);
export const ADMINS = row(E499, E403, E403, OK);
/** Only the user whose account it is; administrators neither. */
export const NOBODY_ELSE = row(E499, E403, E403, E403);
export const c = (on: Target, expect: Expectation): Case => ({ on, expect });

/** Owner or administrator: the owner may, another member may not. */
export const OWNER_OR_ADMIN = [c("own", SIGNED_IN), c("other", ADMINS)];

/** Routes that read no credentials: sign-in itself, static answers, and signed peer calls. */
export const NO_CREDENTIALS = new Set([
  "root",
  "info",
  "generateToken",
  "oauth2.revokeToken",
  "oauth2.authorize",
  "oauth2.authorize.signIn",
  "oauth2.token",
  "oauth2.exchangeToken",
  "oauth2.validateAppAccess",
  "oauth2.platformSelf",
  "directory.signInPage",
  "directory.signIn",
  "directory.signOutPage",
  "directory.signOut",
  "server.info",
  "collaborations.peer",
]);

// ------------------------------------------------------------------------------------------ areas

/** One area of the matrix: the route files whose routes it holds, and its rows. */
export interface Area {
  /** Files of `src/http/routes/`, as `routeFileOf` names them. */
  files: readonly string[];
  expected: Record<string, readonly Case[]>;
  setup: Record<string, Setup>;
  /** Builds, once the portal and its accounts are up, what the area's calls act on. */
  prepare?: () => Promise<void>;
  /** Ends what `prepare` started beside the portal. */
  release?: () => Promise<void>;
  /**
   * The helper accounts the area's calls use besides the callers and `owner`. Each costs a 64 MiB
   * scrypt hash when it signs in, which makes accounts the largest part of a portal's set-up.
   */
  helpers?: readonly HelperAccount[];
}

/** The file of `src/http/routes/` that declares `route` (all its paths are in one file). */
export function routeFileOfRoute(route: RouteDef): string {
  const path = typeof route.path === "string" ? route.path : route.path[0];
  if (path === undefined) throw new Error(`${route.name} has no path`);
  return routeFileOf(route.root ?? "sharing", path);
}

/** The routes of `area`, in the order of `allRoutes`. */
export const routesOf = (area: Area): RouteDef[] =>
  allRoutes.filter((route) => area.files.includes(routeFileOfRoute(route)));

// --------------------------------------------------------------------------------------- fixtures

/** A 1x1 transparent PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

export interface Account {
  username: string;
  password: string;
  token: string;
}

/** The three signed-in caller classes, another member who owns what `other` targets, and helpers. */
const ACCOUNTS = {
  member: "org_user",
  publisher: "org_publisher",
  admin: "org_admin",
  owner: "org_publisher",
  invitee: "org_user",
  hermit: "org_user",
} as const;
type AccountName = keyof typeof ACCOUNTS;
/** The helpers: `invitee` is invited, added and handed items, `hermit` keeps a private profile. */
export type HelperAccount = Exclude<AccountName, CallerClass | "owner">;

/*
 * The portal of the test file and what every area acts on. Set by `usePortal`'s hook before any
 * test runs; the area modules read them (ES module bindings are live) when their calls are set up.
 */
export let portal: TestPortal;
export let bootstrap: Account;
export let mainId: string;
export const acct = {} as Record<AccountName, Account>;
/** Each caller's own org-access group, and `owner`'s, made by `newOwnGroups`. */
export const ownGroup = {} as Record<AccountName, string>;

let counter = 0;
export const uid = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;

export async function must(promise: Promise<any>, what: string): Promise<any> {
  const r = await promise;
  if (r?.error) throw new Error(`${what}: ${JSON.stringify(r.error)}`);
  return r;
}

export const asAdmin = (path: string, params: Record<string, unknown> = {}) =>
  must(portal.post(path, params, bootstrap.token), path);
export const as = (who: Account, path: string, params: Record<string, unknown> = {}) =>
  must(portal.post(path, params, who.token), `${path} as ${who.username}`);

/** An item of `owner`, private, with JSON data and a thumbnail, sent as clients upload files. */
export async function newItem(owner: Account, access: "private" | "org" = "private"): Promise<string> {
  const body = new FormData();
  body.append("f", "json");
  body.append("token", owner.token);
  body.append("title", `Item ${uid()}`);
  body.append("type", "GeoJson");
  body.append("text", JSON.stringify({ type: "FeatureCollection", features: [] }));
  body.append("thumbnail", new Blob([PNG]), "thumb.png");
  const res = await fetch(`${portal.api}/content/users/${owner.username}/addItem`, { method: "POST", body });
  const r = (await res.json()) as any;
  if (!r.success) throw new Error(`addItem: ${JSON.stringify(r)}`);
  if (access === "org")
    await as(owner, `/content/users/${owner.username}/items/${r.id}/share`, { org: true });
  return r.id as string;
}

/** An Application item of `owner` registered as an OAuth 2.0 app (oob and a loopback URI). */
export async function newApp(
  owner: Account,
  access: "private" | "org" = "private",
): Promise<{ itemId: string; clientId: string; clientSecret: string }> {
  const item = await as(owner, `/content/users/${owner.username}/addItem`, {
    title: `App ${uid()}`,
    type: "Application",
  });
  if (access === "org")
    await as(owner, `/content/users/${owner.username}/items/${item.id}/share`, { org: true });
  const app = await as(owner, "/oauth2/registerApp", {
    itemId: item.id,
    appType: "multiple",
    redirect_uris: JSON.stringify(["urn:ietf:wg:oauth:2.0:oob", "http://127.0.0.1:9/callback"]),
  });
  return { itemId: item.id, clientId: app.client_id, clientSecret: app.client_secret };
}

export async function newGroup(owner: Account, access: "private" | "org" = "org"): Promise<string> {
  const r = await as(owner, "/community/createGroup", { title: `Group ${uid()}`, access });
  return r.group.id as string;
}

/** An org-access group of each caller and of `owner`: see `ownGroupOf`. */
export async function newOwnGroups(): Promise<void> {
  for (const n of ["member", "publisher", "admin", "owner"] as const) ownGroup[n] = await newGroup(acct[n]);
}

export function ownGroupOf(account: Account): string {
  const name = (Object.keys(acct) as AccountName[]).find((n) => acct[n] === account);
  const id = name && ownGroup[name];
  if (!id) throw new Error(`no group of ${account.username}`);
  return id;
}

/**
 * A copy of `template`'s account in the store, under a new name and with a built-in role: the
 * copy has the template's password. Creating an account through the API costs a 64 MiB scrypt
 * hash, and every test file of the matrix makes its own accounts.
 */
async function copyUser(template: string, username: string, role: BuiltInRole = "org_user"): Promise<void> {
  const db = portal.portico.db.kysely;
  const row = await db
    .selectFrom("users")
    .selectAll()
    .where("username", "=", template)
    .executeTakeFirstOrThrow();
  await db
    .insertInto("users")
    .values({
      ...row,
      id: newId(),
      username,
      username_key: username.toLowerCase(),
      email: `${username}@example.com`,
      role,
      role_id: null,
      created: Date.now(),
      modified: Date.now(),
    })
    .execute();
}

/**
 * A throwaway account to act on (delete, disable, change the role of). It never signs in, so it is
 * a copy of `invitee` (which the area must create, `Area.helpers`): the matrix needs a dozen.
 */
export async function newUser(): Promise<string> {
  if (!acct.invitee) throw new Error("newUser copies invitee, an account this area does not create");
  const username = `tmp_${uid()}`;
  await copyUser(acct.invitee.username, username);
  return username;
}

export const adminPath = (name: string, op: string) =>
  `${portal.portico.address}/rest/admin/services/${name}/FeatureServer/${op}`;

export async function addLayer(name: string): Promise<number> {
  const r = await asAdmin(adminPath(name, "addToDefinition"), {
    addToDefinition: {
      layers: [{ name: `Layer ${uid()}`, geometryType: "esriGeometryPoint", hasAttachments: true }],
    },
  });
  return r.layers[0].id as number;
}

/** A hosted feature service of `owner` (by name), with layer 0. */
export async function newService(owner: Account, access: "private" | "org" = "private"): Promise<string> {
  const name = `svc_${uid()}`;
  const r = await as(owner, `/content/users/${owner.username}/createService`, {
    createParameters: { name },
    outputType: "featureService",
  });
  await addLayer(name);
  if (access === "org") {
    await as(owner, `/content/users/${owner.username}/items/${r.itemId}/share`, { org: true });
  }
  return name;
}

export async function newRole(): Promise<string> {
  const r = await asAdmin("/portals/self/createRole", { name: `Role ${uid()}`, description: "throwaway" });
  return r.id as string;
}

/**
 * Starts the test file's portal with its accounts before its tests, and whatever `area` needs
 * beside them; stops it all after. The portal may reach loopback (`PEER_ENV`): the webhooks' receiver
 * and the collaborations' peer portal live there.
 */
export function usePortal(area: Area): void {
  beforeAll(async () => {
    portal = await startTestPortal({ env: PEER_ENV });
    bootstrap = { ...ADMIN, token: portal.adminToken };
    // The member is created through the API; the other accounts are copies of it that sign in
    // with its password, which saves a scrypt hash each (`copyUser`).
    acct.member = await portal.addUser("sec_member", ACCOUNTS.member);
    const others: AccountName[] = ["publisher", "admin", "owner", ...(area.helpers ?? [])];
    await Promise.all(
      others.map(async (n) => {
        const username = `sec_${n}`;
        await copyUser(acct.member.username, username, ACCOUNTS[n]);
        const { password } = acct.member;
        acct[n] = { username, password, token: await portal.signIn(username, password) };
      }),
    );
    mainId = (await portal.get("/portals/self", {}, bootstrap.token)).id;
    await area.prepare?.();
  }, 60_000);

  afterAll(async () => {
    await area.release?.();
    await portal?.stop();
  });
}

// ---------------------------------------------------------------------------- custom-role holders

/**
 * Custom roles for the rules between administrators (README, Security): every one holds the
 * administrative privileges of the account actions; they differ in the rest.
 */
const ACCOUNT_PRIVILEGES = [
  "portal:admin:viewUsers",
  "portal:admin:updateUsers",
  "portal:admin:changeUserRoles",
  "portal:admin:disableUsers",
  "portal:admin:deleteUsers",
  "portal:admin:reassignItems",
  "portal:admin:viewItems",
];
export const CUSTOM_ROLES = {
  /** The account privileges and every member privilege. */
  narrow: [...ACCOUNT_PRIVILEGES, ...USER_PRIVILEGES],
  /** That and publishing. */
  broad: [...ACCOUNT_PRIVILEGES, ...USER_PRIVILEGES, ...PUBLISHER_PRIVILEGES],
  /** Every privilege there is: still not a default administrator. */
  full: ALL_PRIVILEGES,
};
export type CustomRole = keyof typeof CUSTOM_ROLES;
/** Who acts: a holder of a custom role, or the default administrator. */
export type ActingAdmin = CustomRole | "default";

// ------------------------------------------------------------------------------------------ calls

/** One request of the matrix: the values of the route's `:params`, its parameters, and checks. */
export interface Call {
  path?: Record<string, string>;
  params?: Record<string, unknown>;
  /** Which of the route's paths (with or without a folder) to call. */
  variant?: number;
  /** Files to send (as multipart/form-data, after the parameters). */
  files?: Record<string, { name: string; type: string; bytes: Buffer }>;
  /** Checks of a successful answer beyond "no error". */
  check?: (r: any) => void | Promise<void>;
}

export interface CallContext {
  who: CallerClass;
  on: Target;
  /** The caller's account; for an anonymous caller, `owner`'s. */
  me: Account;
}

export type Setup = (ctx: CallContext) => Promise<Call>;

/** The account whose resource the call targets: the caller's own, or `owner`'s. */
export const holder = ({ on, me }: CallContext): Account => (on === "own" ? me : acct.owner);

export function unexpected(on: Target): never {
  throw new Error(`no set-up for target '${on}'`);
}

// ------------------------------------------------------------------------------------- requests

type Transport = "param" | "bearer" | "esri";

export function urlOf(route: RouteDef, call: Call): string {
  const paths = typeof route.path === "string" ? [route.path] : route.path;
  const template = paths[call.variant ?? 0];
  if (template === undefined) throw new Error(`${route.name} has no path ${call.variant}`);
  const values: Record<string, string> = { portalId: "self", ...call.path };
  const path = template.replace(/:(\w+)/g, (_m, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for :${name} of ${route.name}`);
    return encodeURIComponent(value);
  });
  const root =
    route.root === "portaladmin" ? "/portaladmin" : route.root === "server" ? "/rest" : "/sharing/rest";
  return `${portal.portico.address}${root}${path}`;
}

/** Calls a route as clients do; answers the parsed JSON, or a description of a binary answer. */
export async function send(
  route: RouteDef,
  call: Call,
  token: string | undefined,
  transport: Transport = "param",
  method: "GET" | "POST" = route.methods.includes("POST") ? "POST" : "GET",
): Promise<any> {
  const params: Record<string, unknown> = { f: "json", ...call.params };
  const headers: Record<string, string> = {};
  if (token !== undefined) {
    if (transport === "param") params.token = token;
    else headers[transport === "bearer" ? "authorization" : "x-esri-authorization"] = `Bearer ${token}`;
  }
  const url = urlOf(route, call);
  const res =
    method === "GET"
      ? await fetch(`${url}?${form(params)}`, { headers })
      : await fetch(url, {
          method: "POST",
          body: call.files ? multipartOf(form(params), call.files) : form(params),
          headers,
        });
  const type = res.headers.get("content-type") ?? "";
  if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${route.name}: ${await res.text()}`);
  if (type.includes("json")) return res.json();
  return { contentType: type, bytes: (await res.arrayBuffer()).byteLength };
}

/** Parameters and files as one multipart body, as clients upload files. */
function multipartOf(params: URLSearchParams, files: NonNullable<Call["files"]>): FormData {
  const body = new FormData();
  for (const [key, value] of params) body.append(key, value);
  for (const [key, file] of Object.entries(files)) {
    body.append(key, new Blob([file.bytes], { type: file.type }), file.name);
  }
  return body;
}

export const routeNamed = (name: string): RouteDef => {
  const route = allRoutes.find((r) => r.name === name);
  if (!route) throw new Error(`no route ${name}`);
  return route;
};

/**
 * Every table a caller's request can change, read in full; the outbox by its length, since the
 * delivery engine marks events dispatched in the background, and notifications by their number for
 * the same reason. Peer nonces and delivery attempts are written by other portals and the engine.
 */
const WATCHED = [
  "organizations",
  "users",
  "roles",
  "tokens",
  "oauth_apps",
  "oauth_codes",
  "oauth_refresh_tokens",
  "oauth_app_tokens",
  "folders",
  "items",
  "item_tags",
  "item_files",
  "item_file_chunks",
  "groups",
  "group_members",
  "group_invitations",
  "item_shares",
  "comments",
  "feature_services",
  "feature_layers",
  "feature_attachments",
  "feature_attachment_chunks",
  "webhooks",
  "webhook_settings",
  "portal_keys",
  "collaborations",
  "collaboration_participants",
  "collaboration_invitations",
  "workspaces",
  "workspace_modes",
  "workspace_links",
  "collaboration_copies",
  "sync_jobs",
  "sync_schedules",
] as const;

async function snapshot(): Promise<Record<string, string>> {
  const db = portal.portico.db.kysely;
  const tables = await Promise.all(
    WATCHED.map(async (table) => {
      const rows = await db.selectFrom(table).selectAll().execute();
      return [
        table,
        rows
          .map((r) => JSON.stringify(r))
          .sort()
          .join("\n"),
      ] as const;
    }),
  );
  const events = await db
    .selectFrom("events")
    .select((eb) => [eb.fn.countAll().as("n"), eb.fn.max("seq").as("last")])
    .executeTakeFirstOrThrow();
  const notifications = await db
    .selectFrom("notifications")
    .select((eb) => eb.fn.countAll().as("n"))
    .executeTakeFirstOrThrow();
  return {
    ...Object.fromEntries(tables),
    events: `${events.n}/${events.last}`,
    notifications: String(notifications.n),
  };
}

function changedTables(before: Record<string, string>, after: Record<string, string>): string[] {
  return Object.keys(before).filter((t) => before[t] !== after[t]);
}

const describeOutcome = (o: Outcome) => (o === OK ? "success" : `${o.code} ${o.messageCode}`);

/**
 * Sends `call` as `token` and records in `problems` what is wrong with the answer against `want`:
 * a success that is not one or whose check fails, or a refusal with another code, or one that
 * wrote to a watched table.
 */
export async function judge(
  problems: string[],
  label: string,
  want: Outcome,
  route: RouteDef,
  call: Call,
  token: string | undefined,
): Promise<void> {
  const before = want === OK ? undefined : await snapshot();
  const r = await send(route, call, token);
  if (want === OK) {
    if (r.error !== undefined || r.success === false) {
      problems.push(`${label}: expected success, got ${JSON.stringify(r.error ?? r)}`);
      return;
    }
    try {
      await call.check?.(r);
    } catch (err) {
      problems.push(`${label}: ${(err as Error).message}`);
    }
    return;
  }
  if (r.error?.code !== want.code || r.error?.messageCode !== want.messageCode) {
    problems.push(`${label}: expected ${describeOutcome(want)}, got ${JSON.stringify(r.error ?? r)}`);
  }
  const changed = changedTables(before as Record<string, string>, await snapshot());
  if (changed.length > 0) problems.push(`${label}: a refused call wrote to ${changed.join(", ")}`);
}

// ----------------------------------------------------------------------------------------- tests

/** The matrix of `area`: one test per route, every case called by every caller. */
export function describeMatrix(area: Area): void {
  describe("every operation answers each caller as its privilege allows", () => {
    for (const route of routesOf(area)) {
      it(route.name, async () => {
        const cases = area.expected[route.name];
        const setup = area.setup[route.name];
        if (!cases || !setup) throw new Error(`${route.name} has no security expectation`);
        const problems: string[] = [];
        for (const { on, expect: expected } of cases) {
          for (const who of CALLERS) {
            const ctx: CallContext = { who, on, me: who === "anonymous" ? acct.owner : acct[who] };
            const call = await setup(ctx);
            const want = expected[who];
            const label = `${route.name} on ${on} as ${who}`;
            await judge(problems, label, want, route, call, who === "anonymous" ? undefined : ctx.me.token);
          }
        }
        expect(problems).toEqual([]);
      });
    }
  });
}
