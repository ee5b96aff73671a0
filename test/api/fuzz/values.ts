import type { ParamSpec } from "../../../src/validation/params.js";
import { ADMIN } from "../../helpers/portico.js";
import { type Fixtures, MEMBER } from "./fixtures.js";

/**
 * What the fuzzer sends as parameter values: the seeded PRNG every choice comes from, the pools of
 * hostile values (injection-looking text, unicode, invalid percent-encodings, bad JSON, wrong
 * types, huge strings), and the valid-looking ones (fixture ids, words and JSON the route's own
 * specs accept) that carry requests past validation into the services and the database.
 */

const DEFAULT_SEED = 0x5eed_2024;
/** The run's seed: `PORTICO_FUZZ_SEED`, or a fixed default for CI. */
export const SEED = seedFromEnv(process.env.PORTICO_FUZZ_SEED);

function seedFromEnv(value: string | undefined): number {
  if (value === undefined || value === "") return DEFAULT_SEED;
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`PORTICO_FUZZ_SEED must be an integer, got '${value}'`);
  return n >>> 0;
}

// ------------------------------------------------------------------------------------------ PRNG

/** mulberry32: small, fast, and the same sequence on every platform. */
export class Rng {
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
export function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

// ---------------------------------------------------------------------------------------- values

/** Already percent-encoded bytes, sent as they are: invalid UTF-8 and lone surrogates. */
interface Raw {
  raw: string;
}
export type Value = string | Raw;

export const INJECTION = [
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
export const UNICODE = [
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
export const TWO_MB = () => "z".repeat(2 * 1024 * 1024);

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

export const UNKNOWN_ID = "0123456789abcdef0123456789abcdef";

export const defined = (values: readonly (string | undefined)[]): string[] =>
  values.filter((v): v is string => v !== undefined && v !== "");

/** The portal the values are for: its fixtures, where it answers, where its webhooks may point. */
export interface FuzzTarget {
  readonly fx: Fixtures;
  /** `http://127.0.0.1:<port>` plus the context path: where the three API roots live. */
  readonly base: string;
  /** A loopback receiver the portal may deliver webhooks to. */
  readonly receiverUrl: string;
}

/** Values of the fixtures a parameter or path segment of this name refers to. */
export function realValues(name: string, target: FuzzTarget): string[] {
  const { fx, base } = target;
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
      target.receiverUrl,
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

/** Values a parameter's own spec accepts, from everything this module knows to try. */
function validValues(name: string, spec: ParamSpec, target: FuzzTarget, rng: Rng, long: boolean): string[] {
  const candidates: string[] = [...realValues(name, target), ...WORDS];
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
      const pool = realValues(name, target);
      if (pool.length > 0) candidates.push(pool.join(","), `${rng.pick(pool)},${UNKNOWN_ID}`);
      candidates.push("fuzz", "a,b", `${UNKNOWN_ID}`, ...(long ? longestValues(spec) : []));
      break;
    }
    case "json":
      for (const v of jsonValues(target.fx, rng)) candidates.push(JSON.stringify(v));
      candidates.push(...JSON_TEXTS);
      break;
    case "string":
      candidates.push(`Fuzz ${rng.int(1_000_000)}`, "fuzz", UNKNOWN_ID, ...(long ? longestValues(spec) : []));
      break;
  }
  return [...new Set(candidates)].filter((c) => c !== "" && spec.parse(c).ok);
}

/** Anything: malformed, wrong type, hostile, huge, or empty. */
export function hostileValue(rng: Rng, kind: ParamSpec["kind"], allowHuge: boolean): Value {
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

/**
 * A value for one parameter: now and then a big but well-formed JSON, else as hostile as the
 * request's hostility makes it (a value the spec accepts, or anything when none is known).
 */
export function paramValue(
  target: FuzzTarget,
  name: string,
  spec: ParamSpec,
  rng: Rng,
  hostility: number,
  hugeOk: boolean,
): Value {
  if (spec.kind === "json" && hugeOk && rng.chance(0.05)) {
    // Big but well-formed: oversized values that the spec's schema lets through, if any.
    const big = bigJsonFor(spec);
    if (big.length > 0) return rng.pick(big);
  }
  if (!rng.chance(hostility)) {
    const valid = validValues(name, spec, target, rng, hugeOk);
    if (valid.length > 0) return rng.pick(valid);
  }
  return hostileValue(rng, spec.kind, hugeOk);
}
