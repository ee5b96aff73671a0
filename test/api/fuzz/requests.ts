import { apiRoot, type RouteDef } from "../../../src/http/pipeline.js";
import {
  type FuzzTarget,
  hostileValue,
  INJECTION,
  paramValue,
  type Rng,
  realValues,
  TWO_MB,
  UNICODE,
  UNKNOWN_ID,
  type Value,
} from "./values.js";

/**
 * One fuzzed request for a route: its path filled with real, unknown or hostile ids, a caller
 * (administrator, member, anonymous, or a broken token in any of the places a token may travel),
 * a handful of its parameters plus duplicated and unknown ones, sent in the URL, as a form, as
 * multipart with odd files, as JSON, or as a raw body no client should send.
 */

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

type CallerKind = "admin" | "member" | "anonymous" | "bogus";

export interface Request {
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

/** A path segment: mostly a real id, else an unknown or hostile one. */
function segment(target: FuzzTarget, name: string, rng: Rng): string {
  const real = realValues(name, target);
  const r = rng.next();
  if (real.length > 0 && r < 0.85) return encodeURIComponent(rng.pick(real));
  if (r < 0.9) return rng.pick([UNKNOWN_ID, "does_not_exist", "-1", "0", "99999999999999999999", "self"]);
  if (r < 0.96) return encodeURIComponent(`${rng.pick([...INJECTION, ...UNICODE])}`);
  return rng.pick(["%00", "%ED%A0%80", "%2F", "%", "%zz", "x".repeat(3000), "%E2%80%AE", "a%20b", "%2e%2e"]);
}

function fillPath(target: FuzzTarget, path: string, rng: Rng): string {
  return path.replace(/:([A-Za-z]+)/g, (_, name: string) => segment(target, name, rng));
}

/** One fuzzed request for a route at a path, as a caller. */
export function buildRequest(
  target: FuzzTarget,
  route: RouteDef,
  path: string,
  method: "GET" | "POST",
  rng: Rng,
): Request {
  const { fx, base } = target;
  const root = apiRoot(route.root, "");
  const url = `${base}${root}${fillPath(target, path, rng)}`;
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
    pairs.push([name, paramValue(target, name, spec, rng, hostility, hugeOk)]);
    if (rng.chance(0.06)) pairs.push([name, paramValue(target, name, spec, rng, hostility, false)]);
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
