import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashToken } from "../../src/auth/auth.service.js";
import type { Caller } from "../../src/auth/caller.js";
import { BUILT_IN_PRIVILEGES } from "../../src/auth/privileges.js";
import { insertToken } from "../../src/auth/token.repository.js";
import { apiRoot, type RouteDef } from "../../src/http/pipeline.js";
import { allRoutes } from "../../src/http/routes/index.js";
import type { ParamSpec } from "../../src/validation/params.js";
import { findInvalidRows } from "../helpers/invariants.js";
import { ADMIN, engine, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * Fuzzes every operation of the server: each route of `allRoutes` (a new route is fuzzed without
 * touching this file), at each of its paths, with each of its methods, gets requests with random,
 * malformed and oversized parameters: bad JSON, wrong types, huge strings, unicode, injection-
 * looking text, unknown and real ids, duplicated and unknown parameters, broken bodies. Valid-
 * looking values (real fixture ids, values the route's own specs accept) are mixed in so that
 * requests also reach the services and the database.
 *
 * Every answer must be a success or the error envelope, never a 5xx status or an error of code
 * 500; after each route the database must hold no invalid row (`helpers/invariants.ts`), and the
 * rule broken is reported against the route whose requests broke it. Failures are collected and
 * reported per route, each with the request as sent (method, URL, caller, every parameter).
 *
 * Reproducible: a seeded PRNG makes every choice (`PORTICO_FUZZ_SEED`, printed at the start; a
 * fixed default for CI), each route and round drawing from its own stream (seed, route name,
 * round), so the same kinds of values go to the same routes in every run; ids are the fixtures'
 * of that run. Callers and fixtures that requests destroy are put back before the next route.
 *
 * `PORTICO_FUZZ_VERBOSE=1`
 * prints how each route answered (successes, error codes), to see how deep the requests reach.
 */

const DEFAULT_SEED = 0x5eed_2024;
const SEED = seedFromEnv(process.env.PORTICO_FUZZ_SEED);
/**
 * Rounds over every route: each round draws new values, and finds what the earlier rounds' writes
 * left (items with odd files, new groups and services) for its reads.
 */
const ROUNDS = 3;
/** Requests per path and method in each round. */
const CASES = 6;
/** Operations that take a password hash it or verify it (scrypt, a few hundred ms): fewer cases. */
const EXPENSIVE_CASES = 2;

function seedFromEnv(value: string | undefined): number {
  if (value === undefined || value === "") return DEFAULT_SEED;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`PORTICO_FUZZ_SEED must be an integer, got '${value}'`);
  return n >>> 0;
}

// ------------------------------------------------------------------------------------------ PRNG

/** mulberry32: small, fast, and the same sequence on every platform. */
class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(values: readonly T[]): T {
    if (values.length === 0) throw new Error("pick from nothing");
    return values[this.int(values.length)] as T;
  }
}

/** FNV-1a: a route's stream depends on its name, not on its position in `allRoutes`. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

// ---------------------------------------------------------------------------------------- values

/** Already percent-encoded bytes, sent as they are: invalid UTF-8 and lone surrogates. */
interface Raw {
  raw: string;
}
type Value = string | Raw;

const INJECTION = [
  "' OR '1'='1",
  '"; DROP TABLE users; --',
  "<script>alert(1)</script>",
  "../../etc/passwd",
  "..\\..\\windows\\win.ini",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the Log4Shell lookup itself, sent as text.
  "${jndi:ldap://x}",
  "%00",
  "{{7*7}}",
  "admin_user' --",
  "1); DELETE FROM items; --",
  "\\",
  "null",
  "undefined",
  "__proto__",
  "constructor",
  "$where",
  "*",
  "/",
  ".",
];
const UNICODE = [
  "😀🎉👩‍👩‍👧‍👦",
  "\u202Eevil\u202C",
  "שלום עולם",
  "مرحبا",
  "e\u0301\u0301\u0301\u0301\u0301",
  "a\u0000b",
  "\u0000",
  "\uFEFFbom",
  "𝕳𝖊𝖑𝖑𝖔",
  "\u2028\u2029",
  "\t\r\n",
  "   ",
  "İıſK",
  "ＡＢＣ",
];
/** Percent-encoded sequences a URL encoder would never produce. */
const RAW: readonly Raw[] = [
  { raw: "%ED%A0%80" },
  { raw: "abc%ED%B0%80def" },
  { raw: "%C0%AF" },
  { raw: "%FF%FE" },
  { raw: "%" },
  { raw: "%zz" },
  { raw: "a%2" },
  { raw: "%E2%82" },
];
const BAD_JSON = [
  "{",
  "[1,",
  '{"a":',
  "{'a':1}",
  "[1,]",
  '{"a":1}}',
  "NaN",
  "Infinity",
  '"unterminated',
  "{a:1}",
  "[".repeat(2000),
];
const WRONG_TYPES = [
  '{"a":1}',
  '["x"]',
  "[]",
  "{}",
  "true",
  "null",
  "NaN",
  "1e309",
  "-1e309",
  "-1",
  "0",
  "9007199254740993",
  "1.5",
  "0x1F",
  "1e3",
  " 7 ",
  "-0",
  "+1",
  "99999999999999999999999",
  "str",
  "true,false",
];
const HUGE = [
  () => "x".repeat(100_000),
  () => "😀".repeat(30_000),
  () => "a,".repeat(20_000),
  () => `${"[".repeat(5000)}${"]".repeat(5000)}`,
  () => `${'{"a":'.repeat(3000)}1${"}".repeat(3000)}`,
  () => JSON.stringify({ a: "y".repeat(100_000) }),
  () => JSON.stringify(Array.from({ length: 5000 }, (_, i) => `v${i}`)),
];
const TWO_MB = () => "z".repeat(2 * 1024 * 1024);

/** Words that some enum parameter accepts: the specs themselves say which (see `validValues`). */
const WORDS = [
  "private",
  "org",
  "public",
  "shared",
  "asc",
  "desc",
  "DESC",
  "title",
  "owner",
  "created",
  "modified",
  "username",
  "fullname",
  "numviews",
  "avgrating",
  "type",
  "role",
  "english",
  "metric",
  "arcgis",
  "enterprise",
  "allChanges",
  "manualChanges",
  "send",
  "receive",
  "sendAndReceive",
  "featureService",
  "group_member",
  "group_admin",
  "referer",
  "ip",
  "requestip",
  "org_user",
  "org_publisher",
  "org_admin",
  "enabled",
  "disabled",
  "iso19139",
  "en",
  "pt-BR",
  "us",
  "US",
  "WO",
  "Web Map",
  "Feature Service",
  "GeoJson",
];

/** The fixtures real ids come from; recreated when a request deleted one. */
interface Fixtures {
  orgId: string;
  adminToken: string;
  memberToken: string;
  groupId?: string | undefined;
  inviteGroupId?: string | undefined;
  folderId?: string | undefined;
  folderTitle?: string | undefined;
  itemId?: string | undefined;
  itemOwner?: string | undefined;
  commentId?: string | undefined;
  roleId?: string | undefined;
  webhookId?: string | undefined;
  notificationId?: string | undefined;
  serviceName?: string | undefined;
  serviceItemId?: string | undefined;
  collaborationId?: string | undefined;
  workspaceId?: string | undefined;
  collabInvitationId?: string | undefined;
  invitationText?: string | undefined;
  groupInvitationId?: string | undefined;
  syncId?: string | undefined;
  /** Workspaces made last, in any collaboration. */
  workspaceIds: string[];
  /** Titles and names in use (groups, folders, roles, services, collaborations, workspaces). */
  takenNames: string[];
  /** The item and group changed last, whoever made them: often one a fuzzed request made. */
  latestItemId?: string | undefined;
  latestGroupId?: string | undefined;
}

/** A 1x1 transparent PNG. */
const PNG_1X1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
/** `portal.addUser` gives its users this password. */
const MEMBER = { username: "fuzz_member", password: "pw-fuzz_member-secret" } as const;
const UNKNOWN_ID = "0123456789abcdef0123456789abcdef";

const defined = (values: readonly (string | undefined)[]): string[] =>
  values.filter((v): v is string => v !== undefined && v !== "");

/** Values of the fixtures a parameter or path segment of this name refers to. */
function realValues(name: string, fx: Fixtures, base: string): string[] {
  const n = name.toLowerCase();
  if (n === "portalid") return ["self", fx.orgId, "SELF"];
  if (/(^|target)username$|^users?$|^admins$/.test(n)) {
    return defined([ADMIN.username, MEMBER.username, fx.itemOwner, "ADMIN_USER"]);
  }
  if (/group/.test(n)) return defined([fx.groupId, fx.inviteGroupId, fx.latestGroupId]);
  if (n === "itemid" || n === "items") return defined([fx.itemId, fx.serviceItemId, fx.latestItemId]);
  if (/folder/.test(n)) return defined([fx.folderId, fx.folderTitle, "/"]);
  if (n === "role") return defined(["org_user", "org_publisher", "org_admin", fx.roleId]);
  if (n === "roleid") return defined([fx.roleId]);
  if (n === "webhookid") return defined([fx.webhookId]);
  if (n === "notificationid") return defined([fx.notificationId]);
  if (n === "commentid") return defined([fx.commentId]);
  if (n === "invitationid") return defined([fx.groupInvitationId, fx.collabInvitationId]);
  if (n === "collaborationid") return defined([fx.collaborationId]);
  if (n === "workspaceid") return defined([fx.workspaceId]);
  if (n === "participantid") return [fx.orgId];
  if (n === "syncid") return defined([fx.syncId]);
  if (n === "name" && fx.serviceName) return [fx.serviceName, fx.serviceName.toUpperCase()];
  if (n === "layerid") return ["0", "1", "00"];
  if (n === "op")
    return ["state", "offer", "export", "holdings", "apply", "withdraw", "left", "nudge", "ended"];
  if (/url$/.test(n)) {
    return [
      receiver.url,
      "https://hooks.invalid/portico",
      "http://127.0.0.1:9/hook",
      "http://10.0.0.1/x",
      "http://169.254.169.254/latest/meta-data",
      "http://[::1]:9/",
      `${base}/rest`,
      `${base}/rest/services`,
      "https://guest.invalid/portal",
      "ftp://files.invalid/x",
      "javascript:alert(1)",
      "https://user:pw@hooks.invalid/",
    ];
  }
  if (/email/.test(n)) return ["fuzz@example.com", "a@b", "@", "no-at-sign"];
  if (/password/.test(n)) return ["fuzz-password-1", ADMIN.password, MEMBER.password, "short"];
  if (n === "events")
    return ["/items", "/groups/add", "/users", `/items/${fx.itemId ?? UNKNOWN_ID}`, "/nope", "/"];
  if (n === "q") {
    return [
      "fuzz",
      "title:fuzz",
      `owner:${ADMIN.username} AND type:"Web Map"`,
      "((((",
      "tags:",
      "NOT",
      '"unterminated',
      `id:${fx.itemId ?? UNKNOWN_ID}`,
      `group:${fx.groupId ?? UNKNOWN_ID}`,
      "a OR b AND NOT c",
      "access:public OR access:org",
      "*",
      "title:* AND NOT owner:x",
      ")",
      "AND OR NOT",
    ];
  }
  if (n === "invitationjson" && fx.invitationText) {
    const text = fx.invitationText;
    return [
      text,
      text.replace(/"expires": \d+/, '"expires": 1'),
      text.slice(0, text.length >> 1),
      `${text} `,
    ];
  }
  if (n === "invitationresponsejson") {
    return [
      JSON.stringify({ type: "portico-collaboration-response", version: 1, response: {}, signature: "x" }),
      fx.invitationText ?? "{}",
    ];
  }
  if (n === "since" || n === "starttime") return [String(Date.now()), "0", String(Date.now() + 3600_000)];
  if (n === "signature") return ["AAAA", "not base64!", "x".repeat(200)];
  if (/title|name$/.test(n)) {
    // Names already taken (in another case too): where names are unique, the clash must be refused.
    const taken = defined([...fx.takenNames]);
    return ["Fuzz", "fuzz title", "Fuzz_Name_1", ...taken, ...taken.map((t) => t.toUpperCase())];
  }
  if (/comment|description|snippet/.test(n)) return ["fuzz text", "Some *markdown* and <b>html</b>"];
  if (n === "text") return ['{"fuzz":true}', "plain text", "[]"];
  if (n === "tags" || n === "typekeywords") return ["fuzz", "a,b,c", "Fuzz,FUZZ,fuzz", " , ,x"];
  return [];
}

/** JSON values that fit some JSON parameter; the specs say which fit which. */
function jsonValues(fx: Fixtures, rng: Rng): unknown[] {
  const n = rng.int(1_000_000);
  // The fixture's workspace, or one of another collaboration.
  const wid = rng.pick(defined([fx.workspaceId, ...fx.workspaceIds, UNKNOWN_ID]));
  return [
    {},
    [],
    { privileges: ["portal:user:createItem", "portal:admin:viewUsers", "portal:user:shareToGroup"] },
    { privileges: [] },
    { privileges: ["portal:admin:manageRoles", "portal:admin:viewUsers", "portal:admin:changeUserRoles"] },
    { name: `Fuzz_${n}` },
    {
      name: `Fuzz_x_${n}`,
      capabilities: "Query,Create",
      initialExtent: { xmin: 0, ymin: 0, xmax: 1, ymax: 1, spatialReference: { wkid: 4326 } },
    },
    { name: "has space" },
    { layers: [{ name: `L${n}`, geometryType: "esriGeometryPoint", spatialReference: { wkid: 4326 } }] },
    { tables: [{ name: `T${n}` }], layers: [{ name: `L${n}`, id: 7 }] },
    { layers: [{ id: 0 }], tables: [{ id: 1 }] },
    { layers: [{ name: "big", id: 1e300 }] },
    { maxRecordCount: 1000, description: "d", capabilities: "query,update" },
    { spatialReference: { wkid: 3857 } },
    { deactivationPolicy: { numberOfFailures: 3, daysInPast: 2 }, sendSecretHeader: true },
    { maxItemSizeInMB: 10, maxReplicationPackageSizeInMB: 100, bidirectionalSyncCapable: false },
    [{ [wid]: "receive" }],
    { [wid]: "send" },
    { url: "https://svc.invalid/arcgis/rest/services/x/GPServer" },
    [{ url: "https://geo.invalid/GeocodeServer" }],
    ["https://app.invalid"],
    ["https://app.invalid/"],
    { xmin: -180, ymin: -90, xmax: 180, ymax: 90, spatialReference: { wkid: 4326 } },
    [{ owner: ADMIN.username, title: "t", id: fx.groupId ?? UNKNOWN_ID }],
    [ADMIN.username, MEMBER.username],
    { sourceName: "x" },
    { title: "basemap", baseMapLayers: [{ url: "https://x.invalid" }] },
    {
      collaborationId: fx.collaborationId ?? UNKNOWN_ID,
      from: UNKNOWN_ID,
      to: fx.orgId,
      op: "state",
      issued: Date.now(),
      nonce: `n${n}`,
      body: {},
    },
    { a: { b: { c: [1, "two", null, true, 1e308, -0] } } },
  ];
}

/** JSON texts no object literal can produce: keys that name prototypes, duplicate keys. */
const JSON_TEXTS = [
  '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}',
  '{"name":"Fuzz_dup","name":"Fuzz_dup2"}',
  '[{"__proto__":"send"}]',
  '{"layers":[{"name":"__proto__"}]}',
];

/** Lengths tried to find the longest text a parameter takes (around the usual limits). */
const LENGTHS = [64, 100, 128, 250, 254, 256, 1024, 2048, 4096, 32_000, 64_000];
const longestFits = new WeakMap<ParamSpec, string[]>();

/**
 * The longest run of `x`, and of a four-byte character, that a text parameter accepts: what
 * reaches the database at the limit (indexes and columns see the most bytes there).
 */
function longestValues(spec: ParamSpec): string[] {
  let fits = longestFits.get(spec);
  if (!fits) {
    fits = [];
    for (const unit of ["x", "😀"]) {
      const fitting = LENGTHS.map((n) => unit.repeat(n)).filter((text) => spec.parse(text).ok);
      if (fitting.length > 0) fits.push(fitting.at(-1) as string);
    }
    longestFits.set(spec, fits);
  }
  return fits;
}

/** Values a parameter's own spec accepts, from everything this file knows to try. */
function validValues(
  name: string,
  spec: ParamSpec,
  fx: Fixtures,
  base: string,
  rng: Rng,
  long: boolean,
): string[] {
  const candidates: string[] = [...realValues(name, fx, base), ...WORDS];
  switch (spec.kind) {
    case "boolean":
      candidates.push("true", "false", "TRUE", "False");
      break;
    case "integer":
      candidates.push("1", "2", "10", "0", "100", "-1", "72", "5", String(Date.now()));
      break;
    case "number":
      candidates.push("0.5", "1", "24", "0.001", "3.5", "-1");
      break;
    case "list": {
      const pool = realValues(name, fx, base);
      if (pool.length > 0) candidates.push(pool.join(","), `${rng.pick(pool)},${UNKNOWN_ID}`);
      candidates.push("fuzz", "a,b", `${UNKNOWN_ID}`, ...(long ? longestValues(spec) : []));
      break;
    }
    case "json":
      for (const v of jsonValues(fx, rng)) candidates.push(JSON.stringify(v));
      candidates.push(...JSON_TEXTS);
      break;
    case "string":
      candidates.push(`Fuzz ${rng.int(1_000_000)}`, "fuzz", UNKNOWN_ID, ...(long ? longestValues(spec) : []));
      break;
  }
  return [...new Set(candidates)].filter((c) => c !== "" && spec.parse(c).ok);
}

/** Anything: malformed, wrong type, hostile, huge, or empty. */
function hostileValue(rng: Rng, kind: ParamSpec["kind"], allowHuge: boolean): Value {
  const r = rng.next();
  if (allowHuge && r < 0.04) return rng.pick(HUGE)();
  if (r < 0.2) return rng.pick(INJECTION);
  if (r < 0.38) return rng.pick(UNICODE);
  if (r < 0.46) return rng.pick(RAW);
  if (r < 0.6 || kind === "json") return rng.chance(0.5) ? rng.pick(BAD_JSON) : rng.pick(WRONG_TYPES);
  if (r < 0.82) return rng.pick(WRONG_TYPES);
  if (r < 0.92) return "";
  return `${rng.pick(WORDS)}${rng.pick(UNICODE)}`;
}

const EXTRA_PARAMS = [
  "__proto__",
  "constructor",
  "prototype",
  "hasOwnProperty",
  "toString",
  "callback",
  "x".repeat(300),
  "😀",
  "a[b]",
  "a.b",
  "",
  "clearEmptyFields",
  "start",
  "num",
];
const FORMATS = ["json", "pjson", "pjsonm", "html", "xml", "JSON", "", "kmz"];

// --------------------------------------------------------------------------------------- requests

type CallerKind = "admin" | "member" | "anonymous" | "bogus";

interface Request {
  method: "GET" | "POST";
  url: string;
  headers: Record<string, string>;
  body?: string | FormData | Uint8Array;
  /** What was sent, for the failure report. */
  summary: string;
}

const encode = (v: Value): string => (typeof v === "string" ? encodeURIComponent(v) : v.raw);
const decodeForForm = (v: Value): string => {
  if (typeof v === "string") return v;
  try {
    return decodeURIComponent(v.raw);
  } catch {
    return v.raw;
  }
};
const show = (v: Value): string => {
  const text = typeof v === "string" ? JSON.stringify(v) : `raw:${v.raw}`;
  return text.length > 120 ? `${text.slice(0, 100)}… (${text.length} chars)` : text;
};

const FILE_FIELDS = ["file", "thumbnail", "invitationFile", "invitationResponseFile", "upload"];
const FILE_NAMES = [
  "data.json",
  "thumb.png",
  "😀.png",
  'a"b.png',
  "../../etc/passwd",
  "x\r\nSet-Cookie: a=b.png",
  "",
  "ß.gif",
  `${"long".repeat(100)}.jpg`,
  "é.jpeg",
  "nul\u0000.png",
  "ctl\u0001\u007f.png",
];
const FILE_TYPES = [
  "image/png",
  "image/gif",
  "image/jpeg",
  "application/json",
  "text/html",
  "",
  "image/png\u0000",
  "text/plain; charset=😀",
];
const FILE_CONTENTS: (() => Uint8Array)[] = [
  () => Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]),
  () => new TextEncoder().encode("GIF89a\x01\x00\x01\x00"),
  () => Uint8Array.from([0xff, 0xd8, 0xff, 0xe0, 0, 16]),
  () => new TextEncoder().encode('{"fuzz":true}'),
  () => new Uint8Array(0),
  () => Uint8Array.from({ length: 4096 }, (_, i) => (i * 7919) & 0xff),
  () => new Uint8Array(200_000).fill(0x41),
];

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Raw bodies no client should send. */
const MALFORMED: readonly { type?: string; body: string }[] = [
  { type: "text/plain", body: "a=b&c=d" },
  { type: "application/json", body: '{"a":' },
  { type: "application/json", body: "[1,2,3]" },
  { type: "application/json", body: '"just a string"' },
  { type: "application/json", body: "123" },
  { type: "application/json", body: "null" },
  { type: "application/json", body: '{"f":{"nested":true},"token":["a","b"]}' },
  {
    type: "multipart/form-data; boundary=XYZ",
    body: '--XYZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nb',
  },
  { type: "multipart/form-data", body: "--\r\n\r\n" },
  {
    type: "multipart/form-data; boundary=B",
    body: '--B\r\nContent-Disposition: form-data; name="file"; filename="x.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--B--',
  },
  {
    // Well-formed, with an RFC 8187 file name (a name no browser would put in `filename`).
    type: "multipart/form-data; boundary=B",
    body: [
      '--B\r\nContent-Disposition: form-data; name="title"\r\n\r\nfile name test',
      '--B\r\nContent-Disposition: form-data; name="type"\r\n\r\nCSV',
      "--B\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%F0%9F%98%80%01.csv\r\nContent-Type: text/csv\r\n\r\na,b",
      "--B--\r\n",
    ].join("\r\n"),
  },
  { type: "application/x-www-form-urlencoded", body: "%%%&&&===&a=%E0%A4%A&=x&&" },
  { type: "application/x-www-form-urlencoded; charset=utf-16", body: "a=b" },
  { type: "application/xml", body: "<a><b/></a>" },
  { body: "a=b" },
  { type: "application/json; charset=latin1", body: '{"a":"b"}' },
  { type: "application/x-www-form-urlencoded", body: "f=json&f=html&f=xml" },
];

// ------------------------------------------------------------------------------------------ state

let portal: TestPortal;
let receiver: Receiver;
let fx: Fixtures;
/** `http://127.0.0.1:<port>` plus the context path: where the three API roots live. */
let base: string;
let counter = 0;
const timing = { fixtures: 0, requests: 0, invariants: 0 };
let requests = 0;
/** Transactions begun (every write is one), and how many there were at the last invariant check. */
let writes = 0;
let checkedAtWrites = -1;
let ensuredAtWrites = -1;
/** Rules already broken, so each route is blamed only for what its own requests broke. */
let knownInvalid = new Set<string>();

/** Who repairs the callers: an administrator that exists only in this test. */
const system: Caller = {
  userId: "fuzz-system",
  username: "fuzz-system",
  role: "org_admin",
  roleId: null,
  privileges: new Set(BUILT_IN_PRIVILEGES.org_admin),
};

async function api(path: string, params: Record<string, unknown>, token = fx.adminToken): Promise<any> {
  const url =
    path.startsWith("/rest") || path.startsWith("/portaladmin")
      ? `${base}${path}`
      : `${base}/sharing/rest${path}`;
  return portal.post(url, params, token);
}

const exists = async (
  table: "groups" | "folders" | "items" | "roles" | "webhooks" | "comments",
  id?: string,
) =>
  id !== undefined &&
  (await portal.portico.db.kysely.selectFrom(table).select("id").where("id", "=", id).executeTakeFirst()) !==
    undefined;

/**
 * Signs a user in again without its password, which fuzzed requests may have changed: a token row
 * as `generateToken` writes it. (Sign-in also costs a scrypt verification, a few hundred ms.)
 */
async function mintToken(userId: string): Promise<string> {
  const token = randomBytes(32).toString("base64url");
  const now = Date.now();
  await portal.portico.db.transaction((trx) =>
    insertToken(trx, {
      token_hash: hashToken(token),
      user_id: userId,
      created: now,
      expires: now + 3600_000,
      client: "requestip",
      referer: "127.0.0.1",
    }),
  );
  return token;
}

/**
 * Puts back what the fuzzing took away: both callers (enabled, with their role, signed in) and
 * one of each fixture. Callers are repaired through the services as a system administrator, since
 * no caller may be left able to do it; fixtures are recreated through the API.
 */
async function ensureFixtures(): Promise<void> {
  // Nothing was written since the fixtures were last seen complete: they still are.
  if (writes === ensuredAtWrites) return;
  await repairFixtures();
  ensuredAtWrites = writes;
}

async function repairFixtures(): Promise<void> {
  const db = portal.portico.db.kysely;
  const users = portal.portico.services.users;
  for (const [who, role, password] of [
    [ADMIN.username, "org_admin", ADMIN.password],
    [MEMBER.username, "org_user", MEMBER.password],
  ] as const) {
    let row = await db.selectFrom("users").selectAll().where("username", "=", who).executeTakeFirst();
    if (!row) {
      await users.create(system, {
        username: who,
        password,
        firstName: "Fuzz",
        lastName: who,
        email: `${who}@example.com`,
        role,
      });
      row = await db.selectFrom("users").selectAll().where("username", "=", who).executeTakeFirstOrThrow();
    }
    if (row.disabled) await users.setDisabled(system, who, false);
    if (row.role !== role || row.role_id !== null) await users.updateRole(system, who, role);
    const key = who === ADMIN.username ? "adminToken" : "memberToken";
    const valid = await portal.portico.services.auth
      .authenticate(fx[key], { referer: undefined, ip: "127.0.0.1" })
      .then(
        () => true,
        () => false,
      );
    if (!valid) fx[key] = await mintToken(row.id);
  }

  const n = ++counter;
  if (!(await exists("groups", fx.groupId))) {
    const r = await api("/community/createGroup", { title: `Fuzz group ${n}`, access: "org" });
    fx.groupId = r.group?.id;
    if (fx.groupId) await api(`/community/groups/${fx.groupId}/addUsers`, { users: MEMBER.username });
  }
  if (!(await exists("folders", fx.folderId))) {
    const r = await api(`/content/users/${ADMIN.username}/createFolder`, { title: `fuzz folder ${n}` });
    fx.folderId = r.folder?.id;
    fx.folderTitle = r.folder?.title;
  }
  if (!(await exists("items", fx.itemId))) {
    // Multipart, for a thumbnail besides the data.
    const form = new FormData();
    for (const [k, v] of Object.entries({
      f: "json",
      token: fx.adminToken,
      title: `Fuzz item ${n}`,
      type: "GeoJson",
      tags: "fuzz,Fixture",
      text: JSON.stringify({ type: "FeatureCollection", features: [] }),
    })) {
      form.append(k, v);
    }
    form.append("thumbnail", new Blob([PNG_1X1], { type: "image/png" }), "thumbnail.png");
    // The data as a file whose name is no plain ASCII: downloads must still answer.
    const name = ["données 😀.json", "ctl\u0001.json", 'quo"te\\.json', "plain.json"][n % 4] as string;
    form.append(
      "file",
      new Blob(['{"type":"FeatureCollection","features":[]}'], { type: "application/json" }),
      name,
    );
    const res = await fetch(`${base}/sharing/rest/content/users/${ADMIN.username}/addItem`, {
      method: "POST",
      body: form,
    });
    const r = (await res.json()) as any;
    fx.itemId = r.id;
    if (fx.itemId && fx.groupId) {
      await api(`/content/users/${ADMIN.username}/items/${fx.itemId}/share`, {
        groups: fx.groupId,
        org: true,
      });
    }
  }
  const item = fx.itemId
    ? await db.selectFrom("items").select("owner").where("id", "=", fx.itemId).executeTakeFirst()
    : undefined;
  fx.itemOwner = item?.owner;
  if (!(await exists("comments", fx.commentId)) && fx.itemId) {
    const comment = () => api(`/content/items/${fx.itemId}/addComment`, { comment: `fuzz comment ${n}` });
    let r = await comment();
    if (r.error) {
      // A fuzzed organization update may have turned comments off.
      await api("/portals/self/update", { commentsEnabled: true });
      r = await comment();
    }
    fx.commentId = r.commentId;
  }
  if (!(await exists("roles", fx.roleId))) {
    fx.roleId = (await api("/portals/self/createRole", { name: `Fuzz role ${n}` })).id;
    if (fx.roleId) {
      await api(`/portals/self/roles/${fx.roleId}/setPrivileges`, {
        privileges: { privileges: ["portal:user:createItem", "portal:user:joinGroup"] },
      });
    }
  }
  if (!(await exists("webhooks", fx.webhookId))) {
    const r = await api("/portals/self/webhooks/createWebhook", {
      name: `fuzz hook ${n}`,
      url: receiver.url,
      changes: "manualChanges",
      events: "/roles/delete",
    });
    fx.webhookId = r.webhook?.id;
    fx.notificationId = undefined;
  }
  if (fx.webhookId) {
    const notification = await db
      .selectFrom("notifications")
      .select("id")
      .where("webhook_id", "=", fx.webhookId)
      .executeTakeFirst();
    if (!notification) await api(`/portals/self/webhooks/${fx.webhookId}/ping`, {});
    fx.notificationId = (
      await db
        .selectFrom("notifications")
        .select("id")
        .where("webhook_id", "=", fx.webhookId)
        .executeTakeFirst()
    )?.id;
  }
  const service = fx.serviceItemId
    ? await db
        .selectFrom("feature_services")
        .select("name")
        .where("item_id", "=", fx.serviceItemId)
        .executeTakeFirst()
    : undefined;
  if (!service) {
    const r = await api(`/content/users/${ADMIN.username}/createService`, {
      createParameters: { name: `Fuzz_service_${n}` },
      outputType: "featureService",
    });
    fx.serviceItemId = r.itemId;
    fx.serviceName = r.name;
    if (fx.serviceName) {
      await api(`/rest/admin/services/${fx.serviceName}/FeatureServer/addToDefinition`, {
        addToDefinition: { layers: [{ name: "Points", geometryType: "esriGeometryPoint" }] },
      });
    }
  }
  const workspace = fx.workspaceId
    ? await db.selectFrom("workspaces").select("id").where("id", "=", fx.workspaceId).executeTakeFirst()
    : undefined;
  if (!workspace) {
    // A group of its own: a group is linked to one workspace at most.
    const group = (await api("/community/createGroup", { title: `Fuzz link group ${n}`, access: "org" }))
      .group?.id;
    const r = await api("/portals/self/createCollaboration", {
      name: `Fuzz collaboration ${n}`,
      workspaceName: "fuzz workspace",
      portalGroupId: group,
      accessMode: "sendAndReceive",
      hostContactEmailAddress: "host@example.com",
    });
    fx.collaborationId = r.collaboration?.id;
    fx.workspaceId = r.collaboration?.workspaceIds?.[0];
    fx.collabInvitationId = undefined;
  }
  const invitation = fx.collabInvitationId
    ? await db
        .selectFrom("collaboration_invitations")
        .select("status")
        .where("id", "=", fx.collabInvitationId)
        .executeTakeFirst()
    : undefined;
  if (invitation?.status !== "pending" && fx.collaborationId && fx.workspaceId) {
    const r = await api(`/portals/self/collaborations/${fx.collaborationId}/inviteParticipant`, {
      guestPortalUrl: `https://guest${n}.invalid/portal`,
      collaborationWorkspacesParticipantConfigJSON: [{ [fx.workspaceId]: "receive" }],
    });
    fx.collabInvitationId = r.invitation?.id;
    fx.invitationText = r.invitation ? JSON.stringify(r, null, 2) : undefined;
  }
  const groupInvitation = await db
    .selectFrom("group_invitations")
    .select("id")
    .where("username", "=", MEMBER.username)
    .executeTakeFirst();
  if (!groupInvitation) {
    if (!(await exists("groups", fx.inviteGroupId))) {
      fx.inviteGroupId = (
        await api("/community/createGroup", { title: `Fuzz invitations ${n}`, isInvitationOnly: true })
      ).group?.id;
    }
    if (fx.inviteGroupId) {
      await api(`/community/groups/${fx.inviteGroupId}/removeUsers`, { users: MEMBER.username });
      await api(`/community/groups/${fx.inviteGroupId}/invite`, { users: MEMBER.username });
    }
  }
  fx.groupInvitationId = (
    await db
      .selectFrom("group_invitations")
      .select("id")
      .where("username", "=", MEMBER.username)
      .executeTakeFirst()
  )?.id;
  fx.syncId = (await db.selectFrom("sync_jobs").select("id").executeTakeFirst())?.id;
  const newest = async (
    table: "groups" | "folders" | "roles" | "collaborations" | "workspaces",
    column: "title" | "name",
  ) =>
    (
      await sql<{
        v: string;
      }>`SELECT ${sql.ref(column)} AS v FROM ${sql.table(table)} ORDER BY created DESC LIMIT 2`.execute(db)
    ).rows.map((r) => r.v);
  fx.takenNames = [
    ...(await newest("groups", "title")),
    ...(await newest("folders", "title")),
    ...(await newest("roles", "name")),
    ...(await newest("collaborations", "name")),
    ...(await newest("workspaces", "name")),
    ...defined([fx.serviceName]),
  ];
  fx.workspaceIds = (
    await db.selectFrom("workspaces").select("id").orderBy("created", "desc").limit(3).execute()
  ).map((w) => w.id);
  fx.latestItemId = (
    await db.selectFrom("items").select("id").orderBy("modified", "desc").executeTakeFirst()
  )?.id;
  fx.latestGroupId = (
    await db.selectFrom("groups").select("id").orderBy("modified", "desc").executeTakeFirst()
  )?.id;
}

/** A path segment: mostly a real id, else an unknown or hostile one. */
function segment(name: string, rng: Rng): string {
  const real = realValues(name, fx, base);
  const r = rng.next();
  if (real.length > 0 && r < 0.85) return encodeURIComponent(rng.pick(real));
  if (r < 0.9) return rng.pick([UNKNOWN_ID, "does_not_exist", "-1", "0", "99999999999999999999", "self"]);
  if (r < 0.96) return encodeURIComponent(`${rng.pick([...INJECTION, ...UNICODE])}`);
  return rng.pick(["%00", "%ED%A0%80", "%2F", "%", "%zz", "x".repeat(3000), "%E2%80%AE", "a%20b", "%2e%2e"]);
}

function fillPath(path: string, rng: Rng): string {
  return path.replace(/:([A-Za-z]+)/g, (_, name: string) => segment(name, rng));
}

/**
 * Large values of the shapes JSON parameters take: maps and arrays with more entries than one SQL
 * statement can bind, or than a definition may hold. Each spec is checked against them once.
 */
const BIG_JSON: readonly (() => string)[] = [
  // 70,000 map entries in all: more than SQLite (32,766) or PostgreSQL (65,535) binds in one query.
  () =>
    JSON.stringify(
      Array.from({ length: 100 }, (_, j) =>
        Object.fromEntries(Array.from({ length: 700 }, (_, i) => [`w${j}_${i}`, "receive"])),
      ),
    ),
  () => JSON.stringify({ layers: Array.from({ length: 1001 }, (_, i) => ({ name: `L${i}` })) }),
  () => JSON.stringify({ privileges: Array.from({ length: 20_000 }, () => "portal:user:createItem") }),
  () => JSON.stringify(Array.from({ length: 20_000 }, (_, i) => `https://o${i}.invalid`)),
];
let bigJsonTexts: string[] | undefined;
const bigJsonFits = new WeakMap<ParamSpec, string[]>();

function bigJsonFor(spec: ParamSpec): string[] {
  let fits = bigJsonFits.get(spec);
  if (!fits) {
    bigJsonTexts ??= BIG_JSON.map((make) => make());
    fits = bigJsonTexts.filter((text) => spec.parse(text).ok);
    bigJsonFits.set(spec, fits);
  }
  return fits;
}

function paramValue(name: string, spec: ParamSpec, rng: Rng, hostility: number, hugeOk: boolean): Value {
  if (spec.kind === "json" && hugeOk && rng.chance(0.05)) {
    // Big but well-formed: oversized values that the spec's schema lets through, if any.
    const big = bigJsonFor(spec);
    if (big.length > 0) return rng.pick(big);
  }
  if (!rng.chance(hostility)) {
    const valid = validValues(name, spec, fx, base, rng, hugeOk);
    if (valid.length > 0) return rng.pick(valid);
  }
  return hostileValue(rng, spec.kind, hugeOk);
}

/** One fuzzed request for a route at a path, as a caller. */
function buildRequest(route: RouteDef, path: string, method: "GET" | "POST", rng: Rng): Request {
  const root = apiRoot(route.root, "");
  const url = `${base}${root}${fillPath(path, rng)}`;
  const headers: Record<string, string> = {};
  const pairs: [string, Value][] = [];
  // GET parameters travel in the URL, which Node caps at 16 KB of headers: huge values only in bodies.
  const hugeOk = method === "POST";

  const callerRoll = rng.next();
  const caller: CallerKind =
    callerRoll < 0.7 ? "admin" : callerRoll < 0.82 ? "member" : callerRoll < 0.92 ? "anonymous" : "bogus";
  const token =
    caller === "admin"
      ? fx.adminToken
      : caller === "member"
        ? fx.memberToken
        : caller === "bogus"
          ? rng.pick(["bogus", "", "x".repeat(2000), fx.adminToken.slice(0, -1), "Bearer x", "%00"])
          : undefined;
  let tokenInQuery = false;
  if (token !== undefined) {
    const where = rng.next();
    if (where < 0.7) pairs.push(["token", token]);
    else if (where < 0.8) tokenInQuery = true;
    else if (where < 0.9) headers.authorization = `Bearer ${token.replace(/[^\x21-\x7e]/g, "")}`;
    else headers["x-esri-authorization"] = `Bearer ${token.replace(/[^\x21-\x7e]/g, "")}`;
  }
  if (rng.chance(0.85)) pairs.push(["f", rng.chance(0.9) ? "json" : rng.pick(FORMATS)]);

  // How hostile this request is: some are all valid-looking, to reach the services and the
  // database with as many parameters as possible; others are mostly or wholly malformed.
  const hostility = rng.pick([0, 0.15, 0.5, 0.9]);
  const specs = Object.entries(route.params);
  // A handful of optional parameters per request, even for routes that take dozens.
  const optional = Math.min(0.5, 4 / Math.max(1, specs.filter(([, spec]) => !spec.required).length));
  for (const [name, spec] of specs) {
    if (!rng.chance(spec.required ? 0.92 : optional)) continue;
    pairs.push([name, paramValue(name, spec, rng, hostility, hugeOk)]);
    if (rng.chance(0.06)) pairs.push([name, paramValue(name, spec, rng, hostility, false)]);
  }
  if (rng.chance(0.25)) pairs.push([rng.pick(EXTRA_PARAMS), hostileValue(rng, "string", false)]);
  if (hugeOk && rng.chance(0.01) && pairs.length > 0) {
    const i = rng.int(pairs.length);
    pairs[i] = [(pairs[i] as [string, Value])[0], TWO_MB()];
  }

  const describe = (mode: string) =>
    `${method} ${url.length > 300 ? `${url.slice(0, 300)}…` : url} as ${caller} (${mode}) ${pairs
      .map(([k, v]) => `${k.length > 40 ? `${k.slice(0, 40)}…` : k}=${show(v)}`)
      .join(" ")}`;
  const query = (list: [string, Value][]) =>
    list.map(([k, v]) => `${encodeURIComponent(k)}=${encode(v)}`).join("&");

  if (method === "GET") {
    const all: [string, Value][] = tokenInQuery && token !== undefined ? [["token", token], ...pairs] : pairs;
    return { method, url: all.length ? `${url}?${query(all)}` : url, headers, summary: describe("query") };
  }
  const urlWithQuery = tokenInQuery && token !== undefined ? `${url}?${query([["token", token]])}` : url;
  const mode = rng.next();
  if (mode < 0.7) {
    headers["content-type"] = "application/x-www-form-urlencoded";
    return { method, url: urlWithQuery, headers, body: query(pairs), summary: describe("form") };
  }
  if (mode < 0.84) {
    const form = new FormData();
    for (const [k, v] of pairs) form.append(k, decodeForForm(v));
    const files = rng.int(3);
    const sent: string[] = [];
    for (let i = 0; i < files; i++) {
      const field = rng.pick(FILE_FIELDS);
      const filename = rng.pick(FILE_NAMES);
      const type = rng.pick(FILE_TYPES);
      const content = rng.pick(FILE_CONTENTS)();
      form.append(field, new Blob([content], type ? { type } : {}), filename);
      sent.push(`${field}=<${filename}, ${type}, ${content.length} bytes>`);
    }
    return {
      method,
      url: urlWithQuery,
      headers,
      body: form,
      summary: `${describe("multipart")} ${sent.join(" ")}`,
    };
  }
  if (mode < 0.92) {
    // A JSON body: portico accepts one as a convenience; values here may be objects and arrays.
    // Written as text: a value that is JSON itself goes in as it is (objects, arrays, numbers,
    // nested however deep), the rest as strings; a repeated name is a repeated key.
    headers["content-type"] = "application/json";
    const members = pairs.map(([k, v]) => {
      const text = decodeForForm(v);
      return `${JSON.stringify(k)}:${rng.chance(0.3) && isJson(text) ? text : JSON.stringify(text)}`;
    });
    return { method, url: urlWithQuery, headers, body: `{${members.join(",")}}`, summary: describe("json") };
  }
  const malformed = rng.pick(MALFORMED);
  if (malformed.type) headers["content-type"] = malformed.type;
  const auth = token !== undefined ? `${url}?${query([["token", token]])}` : url;
  return {
    method,
    url: auth,
    headers,
    body: new TextEncoder().encode(malformed.body),
    summary: `${method} ${url} as ${caller} (raw ${malformed.type ?? "no content-type"}) ${JSON.stringify(malformed.body)}`,
  };
}

/** Why an answer is not acceptable, or undefined when it is. */
function judge(request: Request, res: Response, text: string): string | undefined {
  // Node's HTTP parser refuses a request line and headers over 16 KiB before any of portico runs;
  // clients send long requests as POST.
  if (res.status === 431 && request.url.length > 15_000) return undefined;
  return problemOf(res, text);
}

function problemOf(res: Response, text: string): string | undefined {
  if (res.status >= 500) return `HTTP ${res.status}: ${text.slice(0, 300)}`;
  const type = res.headers.get("content-type") ?? "";
  // Files (item data, invitation files) are served as they are; `nosniff` marks them.
  const file = res.headers.get("x-content-type-options") === "nosniff";
  if (type.startsWith("application/json") && !file) {
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      return `unparsable JSON answer: ${text.slice(0, 200)}`;
    }
    const error = body?.error;
    if (error !== undefined) {
      if (typeof error !== "object" || error === null || typeof error.code !== "number") {
        return `not the error envelope: HTTP ${res.status} ${text.slice(0, 300)}`;
      }
      if (error.code === 500) return `internal error: ${text.slice(0, 300)}`;
      if (typeof error.message !== "string" || error.message === "")
        return `error without a message: ${text}`;
    }
  } else if (type.startsWith("text/html") && /&quot;code&quot;: 500,/.test(text)) {
    return `internal error in an HTML answer: ${text.slice(0, 300)}`;
  }
  return undefined;
}

/** Outcomes per route (`success`, or the error's messageCode), printed with PORTICO_FUZZ_VERBOSE=1. */
const outcomes = new Map<string, Map<string, number>>();

function outcomeOf(res: Response, text: string): string {
  if (res.status !== 200) return `HTTP ${res.status}`;
  try {
    const error = JSON.parse(text)?.error;
    return error ? `${error.code} ${error.messageCode ?? ""}` : "success";
  } catch {
    return "success";
  }
}

async function send(routeName: string, request: Request): Promise<string | undefined> {
  requests++;
  try {
    const res = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      ...(request.body !== undefined ? { body: request.body } : {}),
    });
    const text = await res.text();
    const counts = outcomes.get(routeName) ?? new Map<string, number>();
    const outcome = outcomeOf(res, text);
    counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
    outcomes.set(routeName, counts);
    return judge(request, res, text);
  } catch (err) {
    return `no answer: ${(err as Error).message} ${(err as { cause?: Error }).cause?.message ?? ""}`;
  }
}

// ------------------------------------------------------------------------------------------ tests

const routes = allRoutes.filter((r, i) => allRoutes.findIndex((o) => o.name === r.name) === i);

describe(`fuzz every operation (${engine}, seed ${SEED})`, () => {
  let started = 0;

  beforeAll(async () => {
    console.log(`fuzz: seed ${SEED} (set PORTICO_FUZZ_SEED=${SEED} to repeat this run), ${ROUNDS} rounds`);
    started = Date.now();
    receiver = await startReceiver();
    // Loopback is allowed to this host only, for the fixture webhook's receiver.
    portal = await startTestPortal({ env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.1/32" } });
    base = portal.api.replace(/\/sharing\/rest$/, "");
    const db = portal.portico.db;
    const transaction = db.transaction.bind(db);
    db.transaction = ((work, options) => {
      writes++;
      return transaction(work, options);
    }) as typeof db.transaction;
    const member = await portal.addUser(MEMBER.username);
    const org = await portal.get("/portals/self", {}, portal.adminToken);
    fx = {
      orgId: org.id,
      adminToken: portal.adminToken,
      memberToken: member.token,
      takenNames: [],
      workspaceIds: [],
    };
    await ensureFixtures();
    knownInvalid = new Set(await findInvalidRows(portal.portico.db));
    expect([...knownInvalid]).toEqual([]);
  }, 60_000);

  afterAll(async () => {
    console.log(`fuzz: ${requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s (${engine})`);
    console.log(
      `fuzz: ${Object.entries(timing)
        .map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`)
        .join(", ")}`,
    );
    if (process.env.PORTICO_FUZZ_VERBOSE === "1") {
      for (const [name, counts] of outcomes) {
        console.log(`fuzz: ${name}: ${[...counts].map(([o, n]) => `${o} ${n}`).join(", ")}`);
      }
    }
    await portal?.stop();
    await receiver?.close();
  });

  it("covers every route", () => {
    expect(routes.length).toBe(allRoutes.length);
    expect(routes.length).toBeGreaterThan(90);
  });

  // Rounds run over every route in turn, so that what one round's writes made (items with odd
  // files, groups, services) is there for the next round's reads.
  for (let round = 0; round < ROUNDS; round++) {
    describe(`round ${round + 1} of ${ROUNDS}`, () => {
      for (const route of routes) {
        it(`${route.name} answers every fuzzed request with a success or the error envelope`, async () => {
          let t = performance.now();
          await ensureFixtures();
          timing.fixtures += performance.now() - t;
          t = performance.now();
          const failures: string[] = [];
          const paths = typeof route.path === "string" ? [route.path] : [...route.path];
          const expensive = Object.keys(route.params).some((name) => /password/i.test(name));
          const rng = new Rng((SEED ^ hash(route.name)) + round * 0x9e3779b9);
          for (const path of paths) {
            for (const method of route.methods) {
              for (let i = 0; i < (expensive ? EXPENSIVE_CASES : CASES); i++) {
                const request = buildRequest(route, path, method, rng);
                const problem = await send(route.name, request);
                if (problem) failures.push(`case ${i}: ${request.summary}\n    -> ${problem}`);
              }
            }
          }
          timing.requests += performance.now() - t;
          // Checked again only when something was written since the last check (the final test
          // checks everything regardless).
          if (writes !== checkedAtWrites) {
            checkedAtWrites = writes;
            t = performance.now();
            const invalid = await findInvalidRows(portal.portico.db);
            timing.invariants += performance.now() - t;
            const fresh = invalid.filter((v) => !knownInvalid.has(v));
            knownInvalid = new Set(invalid);
            for (const v of fresh) failures.push(`invalid row after ${route.name}: ${v}`);
          }
          if (failures.length > 0) expect.fail(`${failures.length} failure(s):\n${failures.join("\n")}`);
        });
      }
    });
  }

  it("leaves no invalid row in the database", async () => {
    // Background work (webhook deliveries, the dispatcher) has had the whole run to write too.
    expect(await findInvalidRows(portal.portico.db)).toEqual([]);
  });
});
