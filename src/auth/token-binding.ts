import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

/**
 * What a token is bound to (`generateToken`'s `client`), and whether a request may use it. ArcGIS:
 * a `referer` token is accepted only from pages under the referer it was made for, an `ip` token
 * only from that address, a `requestip` token only from the address that asked for it.
 */
export type TokenClient = "referer" | "ip" | "requestip";

/** What the pipeline knows of a request that presents a token. */
export interface Presenter {
  /** The `Referer` header, when sent. */
  referer: string | undefined;
  /** The client's address (`request.ip`: the socket, or what a trusted proxy says). */
  ip: string;
}

/**
 * An address in its canonical text, so that one client is one string: `::ffff:10.0.0.1` and
 * `10.0.0.1` are one client (a dual-stack socket reports the first), `2001:0DB8::1` and
 * `2001:db8::1` one address. (ipaddr.js also reads the deprecated IPv4-compatible `::a.b.c.d` as
 * IPv4-mapped; no socket reports such an address.) Text that is no address is only trimmed and
 * lower-cased.
 */
export function normalizeIp(address: string): string {
  const trimmed = address.trim();
  if (isIP(trimmed) === 0) return trimmed.toLowerCase();
  return ipaddr.process(trimmed).toString();
}

/**
 * The client a request counts as for fair shares (the password-hashing queue): an IPv4 address,
 * or an IPv6 address's /64. One subscriber is usually given a whole /64 and may use any address in
 * it, so counting IPv6 addresses one by one would give one host as many shares as it likes.
 */
export function clientGroup(address: string): string {
  const ip = normalizeIp(address);
  if (isIP(ip) !== 6) return ip;
  const prefix = ipaddr.IPv6.parse(ip.replace(/%.*$/, "")).parts.slice(0, 4);
  return `${new ipaddr.IPv6([...prefix, 0, 0, 0, 0]).toString()}/64`;
}

export function isIpAddress(value: string): boolean {
  return isIP(value.trim()) !== 0;
}

function parse(value: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    return undefined;
  }
}

/** True when `path` is `prefix` or below it (`/app` covers `/app`, `/app/`, `/app/x`, not `/apple`). */
function underPath(path: string, prefix: string): boolean {
  if (prefix === "" || prefix === "/") return true;
  const base = prefix.endsWith("/") ? prefix.slice(0, -1) : prefix;
  return path === base || path.startsWith(`${base}/`);
}

/**
 * Whether a request's `Referer` header is allowed for a token bound to `bound`:
 * - the same text (scripts send a fixed referer, e.g. arcgis-rest-js's `@esri/arcgis-rest-js`);
 * - `bound` an http(s) URL: the header is a URL of the same origin whose path is under `bound`'s;
 * - `bound` a host with an optional path (`app.example.com/maps`, what browser clients send):
 *   the header is a URL on that host, any scheme, whose path is under that path.
 * No header never matches: a referer token presented without one is refused.
 */
export function refererAllowed(bound: string, sent: string | undefined): boolean {
  if (sent === undefined || sent === "" || bound === "") return false;
  if (sent === bound) return true;
  const url = parse(sent);
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) return false;
  const schemeGiven = /^https?:\/\//i.test(bound);
  // Without a scheme, only a host name (with port and path) is read as one; anything else
  // (`@esri/arcgis-rest-js`) matches only itself.
  if (!schemeGiven && !/^[a-z0-9.-]+(:\d+)?(\/\S*)?$/i.test(bound)) return false;
  const boundUrl = parse(schemeGiven ? bound : `http://${bound}`);
  if (boundUrl === undefined) return false;
  if (boundUrl.username !== "" || boundUrl.password !== "") return false;
  if (schemeGiven ? url.origin !== boundUrl.origin : url.host !== boundUrl.host) return false;
  return underPath(url.pathname, boundUrl.pathname);
}

/** Whether a request may present a token bound as `client` to `bound`. */
export function presenterAllowed(client: string, bound: string, presenter: Presenter): boolean {
  if (client === "referer") return refererAllowed(bound, presenter.referer);
  if (client === "ip" || client === "requestip") {
    // The same text is the same address; parsing both (on every request with such a token) is for
    // the other spellings of it.
    return bound === presenter.ip || normalizeIp(bound) === normalizeIp(presenter.ip);
  }
  return false;
}
