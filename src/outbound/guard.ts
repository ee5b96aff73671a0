import dns from "node:dns";
import type net from "node:net";
import ipaddr from "ipaddr.js";
import { Agent, buildConnector, type Dispatcher } from "undici";

/**
 * Every call portico makes to an address a user gave (webhook payload URLs, peer portals) goes
 * through here. A user who may create a webhook must not be able to make the server reach what
 * only the server can reach: loopback, private networks, link-local (cloud metadata at
 * 169.254.169.254), carrier-grade NAT and reserved ranges are refused unless the operator allows
 * them with `PORTICO_OUTBOUND_ALLOW`.
 *
 * Names are checked after resolution and the address actually connected to is checked again, so
 * a name that resolves to a public address when checked and a private one when connecting (DNS
 * rebinding) is still refused. Redirects are never followed (undici's dispatch follows none), the
 * response read is capped, and connect and total times are bounded.
 */

/**
 * What may be reached: public unicast only. An IPv4 address must be one ipaddr.js calls `unicast`
 * (none of its special ranges: loopback, private, link-local, carrier-grade NAT, documentation,
 * benchmarking, multicast, reserved...). An IPv6 address must be `unicast` too and, beyond that, in
 * 2000::/3, the only block IANA allocates for global unicast: this refuses what ipaddr.js names no
 * range for, such as IPv4-compatible addresses (`::127.0.0.1`, deprecated by RFC 4291 and routed
 * by some systems to the IPv4 address), and every unallocated block. Two forms that embed an IPv4
 * address are judged by that address: IPv4-mapped (`::ffff:a.b.c.d`, a dual-stack socket's way of
 * reaching IPv4) and NAT64's well-known prefix (`64:ff9b::a.b.c.d`, RFC 6052), which a NAT64
 * gateway translates to the IPv4 address. Other embedding forms (6to4 `2002::/16`, Teredo
 * `2001::/32`, local-use NAT64 `64:ff9b:1::/48`, IPv4-translated `::ffff:0:a.b.c.d`) are refused
 * outright: they are tunnels or local translations whose far end the guard cannot judge.
 */
const GLOBAL_UNICAST = ipaddr.parseCIDR("2000::/3");
const NAT64_WELL_KNOWN = ipaddr.parseCIDR("64:ff9b::/96");

/**
 * Parses an address, reading a dotted-quad tail of an IPv6 address as the two groups it stands
 * for: ipaddr.js reads `::a.b.c.d` as IPv4-mapped (`::ffff:a.b.c.d`), which it is not, while the
 * same address in hex (`::7f00:1`, as URLs and some resolvers write it) is read as it is.
 */
function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const tail = /^(.*:)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})(%.*)?$/.exec(address);
  if (tail && ipaddr.IPv4.isValidFourPartDecimal(tail[2] as string)) {
    const [a, b, c, d] = ipaddr.IPv4.parse(tail[2] as string).octets as [number, number, number, number];
    const hex = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
    return ipaddr.IPv6.parse(`${tail[1]}${hex}${tail[3] ?? ""}`);
  }
  return ipaddr.parse(address);
}

/** The IPv4 address an IPv4-mapped or well-known-prefix NAT64 address stands for. */
function embeddedIPv4(ip: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | undefined {
  if (ip.kind() !== "ipv6") return undefined;
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  if (v6.match(NAT64_WELL_KNOWN)) {
    const [hi, lo] = v6.parts.slice(6) as [number, number];
    return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  }
  return undefined;
}

/** Why `ip` is no public unicast address (the name of its range), or undefined when it is one. */
function nonPublicRange(ip: ipaddr.IPv4 | ipaddr.IPv6): string | undefined {
  const range = ip.range();
  if (range !== "unicast") return range;
  if (ip.kind() === "ipv4" || ip.match(GLOBAL_UNICAST)) return undefined;
  const parts = (ip as ipaddr.IPv6).parts;
  return parts.slice(0, 6).every((p) => p === 0) ? "ipv4Compatible" : "unallocated";
}

/**
 * Why `value` cannot be called at all, whatever its address: not a URL, not http(s), or with
 * credentials in it. Also what parameters holding such URLs are validated with.
 */
export function httpUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "is not a URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an http or https URL";
  if (url.username || url.password) return "must not carry credentials (user:password@)";
  return undefined;
}

export class OutboundRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutboundRefused";
  }
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The start of the body, at most `maxResponseBytes`, as UTF-8 text. */
  excerpt: string;
}

export interface PostOptions {
  headers: Record<string, string>;
  body: string;
  /** Time allowed to open the connection (TCP and TLS). */
  connectTimeoutMs: number;
  /** Time allowed for the whole exchange, connection included. */
  totalTimeoutMs: number;
  /** How much of the answer is read; the rest is discarded unread. */
  maxResponseBytes: number;
  /** Cuts the exchange off early (a shutdown that cannot wait for it). */
  signal?: AbortSignal;
}

export class OutboundGuard {
  private readonly allowed: [ipaddr.IPv4 | ipaddr.IPv6, number][];
  private readonly agents = new Map<number, Agent>();
  /** Checked URLs as origin and path (see `target`). */
  private readonly targets = new Map<string, Target>();

  /** @param allow CIDRs (or single addresses) that may be reached although refused by default. */
  constructor(allow: readonly string[]) {
    this.allowed = allow.map((entry) =>
      ipaddr.parseCIDR(entry.includes("/") ? entry : `${entry}/${entry.includes(":") ? 128 : 32}`),
    );
  }

  /** Why `address` may not be reached, or undefined when it may. */
  refusal(address: string): string | undefined {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = parseAddress(address);
    } catch {
      return `${address} is not an IP address`;
    }
    const embedded = embeddedIPv4(ip);
    for (const [net, bits] of this.allowed) {
      for (const candidate of embedded ? [ip, embedded] : [ip]) {
        if (net.kind() === candidate.kind() && candidate.match(net, bits)) return undefined;
      }
    }
    const range = nonPublicRange(embedded ?? ip);
    if (range === undefined) return undefined;
    const a = /^[aeiou]/i.test(range) ? "an" : "a";
    const what = embedded
      ? `${address} stands for ${embedded.toString()}, ${a} ${range} address`
      : `${address} is ${a} ${range} address`;
    return `${what}; outbound calls reach only public addresses unless PORTICO_OUTBOUND_ALLOW covers it`;
  }

  /** Checks a URL before any connection: its form, and the host when it is an address literal. */
  checkUrl(url: string): URL {
    const problem = httpUrlProblem(url);
    if (problem) throw new OutboundRefused(`'${url}' ${problem}`);
    const parsed = new URL(url);
    const host = parsed.hostname.replace(/^\[|\]$/g, "");
    if (ipaddr.isValid(host)) {
      const reason = this.refusal(host);
      if (reason) throw new OutboundRefused(reason);
    }
    return parsed;
  }

  /**
   * `checkUrl` as a request's origin and path, remembered per URL: what it answers depends on
   * the URL's text and the guard's allowed ranges alone (names are resolved and judged at each
   * connection, never here), and deliveries send the same few URLs thousands of times a second.
   * A refusal is not remembered, so it is worded afresh each time. At most `TARGETS_KEPT` are
   * kept; past that the memory starts over.
   */
  private target(url: string): Target {
    let target = this.targets.get(url);
    if (target === undefined) {
      const parsed = this.checkUrl(url);
      // As undici's `request` makes them of a URL.
      target = {
        origin: parsed.origin,
        path: parsed.search ? `${parsed.pathname}${parsed.search}` : parsed.pathname,
      };
      if (this.targets.size >= TARGETS_KEPT) this.targets.clear();
      this.targets.set(url, target);
    }
    return target;
  }

  /**
   * POSTs `body` to `url` through the guard. Resolves with the answer whatever its status; rejects
   * with `OutboundRefused` for a refused destination and with the network error otherwise.
   *
   * The exchange is dispatched with a handler of its own (`CappedAnswer`) rather than undici's
   * `request`, whose answer is a stream read by an async iterator, each exchange an async
   * resource with listeners of its own: profiled at a few thousand deliveries a second, that
   * machinery was a fifth of the delivering node's CPU.
   */
  post(url: string, options: PostOptions): Promise<OutboundResponse> {
    let target: Target;
    try {
      target = this.target(url);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<OutboundResponse>((resolve, reject) => {
      const answer = new CappedAnswer(options.maxResponseBytes, resolve, reject, options.signal);
      // One timer per exchange, cleared when it ends. `AbortSignal.timeout` keeps its timer (and
      // signal) alive for the whole timeout after the answer, and `AbortSignal.any` would tie every
      // exchange's signal to the caller's long-lived one: at 3,000 deliveries a second and the
      // default 10 s timeout, some 30,000 live timers and signals for the garbage collector.
      answer.timer = setTimeout(
        () => answer.cut(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
        options.totalTimeoutMs,
      );
      const outer = options.signal;
      if (outer?.aborted) {
        answer.cut(outer.reason);
        return;
      }
      outer?.addEventListener("abort", answer, { once: true });
      try {
        this.agent(options.connectTimeoutMs).dispatch(
          {
            origin: target.origin,
            path: target.path,
            method: "POST",
            headers: options.headers,
            body: options.body,
            headersTimeout: options.totalTimeoutMs,
            bodyTimeout: options.totalTimeoutMs,
          },
          answer,
        );
      } catch (err) {
        answer.onResponseError(undefined, err as Error);
      }
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.agents.values()].map((a) => a.close()));
    this.agents.clear();
  }

  /** One keep-alive pool per connect timeout (there is one in practice: the organization's setting). */
  private agent(connectTimeoutMs: number): Agent {
    let agent = this.agents.get(connectTimeoutMs);
    if (agent) return agent;
    const connector = buildConnector({
      timeout: connectTimeoutMs,
      lookup: (hostname, opts, callback) => this.lookup(hostname, opts, callback),
    } as buildConnector.BuildOptions);
    agent = new Agent({
      connect: (opts, callback) => {
        connector(opts, (err, socket) => {
          if (err || !socket) return callback(err ?? new Error("no socket"), null);
          // The address really connected to, whatever resolution happened on the way.
          const reason = this.refusal((socket as net.Socket).remoteAddress ?? "");
          if (reason) {
            socket.destroy();
            return callback(new OutboundRefused(reason), null);
          }
          callback(null, socket);
        });
      },
      keepAliveTimeout: 10_000,
    });
    this.agents.set(connectTimeoutMs, agent);
    return agent;
  }

  /** `dns.lookup` keeping only the addresses the guard allows; none left is a refusal. */
  private lookup(
    hostname: string,
    options: dns.LookupOptions,
    callback: (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void,
  ): void {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "");
      const usable = addresses.filter((a) => this.refusal(a.address) === undefined);
      if (usable.length === 0) {
        const first = addresses[0];
        const reason = first ? this.refusal(first.address) : `${hostname} has no address`;
        return callback(new OutboundRefused(`${hostname} resolves to ${reason}`), "");
      }
      if (options.all) return callback(null, usable);
      const chosen = usable[0] as dns.LookupAddress;
      callback(null, chosen.address, chosen.family);
    });
  }
}

/** How many URLs' checks `OutboundGuard` remembers, at most. */
const TARGETS_KEPT = 1000;

/** A checked URL as a request gives it to undici. */
interface Target {
  origin: string;
  path: string;
}

/**
 * One exchange's answer: its status and headers, and at most `max` bytes of its body; the rest
 * is not read (the connection is closed instead). Settles once: with the answer, or with the
 * first error (the network's, a timeout, the caller's abort). As a listener of the caller's
 * signal it cuts the exchange off with the signal's reason.
 */
class CappedAnswer implements Dispatcher.DispatchHandler {
  timer: NodeJS.Timeout | undefined;
  private controller: Dispatcher.DispatchController | undefined;
  /** Why the exchange was cut off before undici had started it, if it was. */
  private reason: unknown;
  private settled = false;
  private status = 0;
  private headers: Record<string, string | string[] | undefined> = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly max: number,
    private readonly resolve: (answer: OutboundResponse) => void,
    private readonly reject: (err: unknown) => void,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** The caller's signal aborted. */
  handleEvent(): void {
    this.cut(this.signal?.reason);
  }

  /** Ends the exchange with `reason`, wherever it stands. */
  cut(reason: unknown): void {
    if (this.settled) return;
    this.reason = reason;
    const err =
      reason instanceof Error ? reason : new DOMException("This operation was aborted", "AbortError");
    // Settled first: undici answers the abort with `onResponseError(err)` at once, which would
    // otherwise settle with `err` rather than the reason (a reason that is no Error).
    this.fail(reason);
    // Not started yet: undici calls `onRequestStart` later, which aborts then; the caller hears now.
    if (this.controller) this.controller.abort(err);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.settled) controller.abort(this.reason instanceof Error ? this.reason : new Error("aborted"));
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    // 1xx answers come before the real one; `request` skips them too.
    if (statusCode < 200) return;
    this.status = statusCode;
    this.headers = headers;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    const room = this.max - this.size;
    this.chunks.push(room < chunk.length ? chunk.subarray(0, room) : chunk);
    this.size += Math.min(room, chunk.length);
    if (this.size >= this.max) {
      // Enough: the rest is discarded unread, with the connection.
      this.succeed();
      controller.abort(new Error("answer read up to its cap"));
    }
  }

  onResponseEnd(): void {
    this.succeed();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    this.fail(err);
  }

  private succeed(): void {
    if (this.settled) return;
    this.finish();
    this.resolve({
      status: this.status,
      headers: this.headers,
      excerpt: Buffer.concat(this.chunks, this.size).toString("utf8"),
    });
  }

  private fail(err: unknown): void {
    if (this.settled) return;
    this.finish();
    this.reject(err);
  }

  private finish(): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.signal?.removeEventListener("abort", this);
  }
}
