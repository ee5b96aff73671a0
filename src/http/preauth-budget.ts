import { Transform } from "node:stream";
import ipaddr from "ipaddr.js";
import { errors } from "../errors.js";

/**
 * What request bodies read before their caller is known may cost, bounded for the whole process.
 *
 * Esri's clients send the token as the last form field, so a body (32 MB for `addItem`, 110 MB for
 * a peer call) is read whole before anyone knows who sent it. Every body whose caller was not
 * authenticated before it was read (no token in a header or the query string) draws from one
 * budget while its bytes arrive, from the first byte, and gives everything back when its request
 * ends; no body draws bytes it has not sent. One sender (an address, an IPv6 /64) may hold at most
 * a quarter of the budget, so a few of them cannot starve everyone else. When the budget, or the
 * sender's share of it, is spent, the body is refused at once. Callers that send their token in a
 * header are never limited by it. The same kind of budget bounds the disk that files of unknown
 * callers take (`multipart.ts`).
 *
 * A body of a caller not yet known must also keep arriving (`PACE_MIN_BYTES` in every
 * `PACE_WINDOW_MS`): one that stalls is refused well before the general request timeout, so that
 * nobody holds a share by sending nothing.
 */

/** The part of the budget one sender may hold: a quarter. */
export const SENDER_SHARE = 4;
/** A body of a caller not yet known must send at least this much in every window (or end)... */
export const PACE_MIN_BYTES = 64 * 1024;
/** ...of this length. */
export const PACE_WINDOW_MS = 10_000;

/** Who a share is counted for: the address, with IPv6 grouped by /64 (one host's usual block). */
export function senderOf(address: string): string {
  // Parsing an address costs more than the rest of metering a small body; the few addresses a
  // node hears from repeat.
  let sender = senders.get(address);
  if (sender === undefined) {
    sender = senderOfAddress(address);
    if (senders.size >= SENDER_CACHE_LIMIT) senders.clear();
    senders.set(address, sender);
  }
  return sender;
}

const senders = new Map<string, string>();
const SENDER_CACHE_LIMIT = 10_000;

function senderOfAddress(address: string): string {
  try {
    const ip = ipaddr.process(address);
    if (ip.kind() === "ipv4") return ip.toString();
    return `${(ip as ipaddr.IPv6).parts.slice(0, 4).join(":")}::/64`;
  } catch {
    return address;
  }
}

export class PreAuthBudget {
  private used = 0;
  private readonly bySender = new Map<string, number>();

  constructor(readonly maxBytes: number) {}

  /** Bytes currently drawn by requests in flight. */
  get inUse(): number {
    return this.used;
  }

  /** Bytes currently drawn by requests of `sender`. */
  heldBy(sender: string): number {
    return this.bySender.get(sender) ?? 0;
  }

  /** Most bytes one sender may hold (`whole`: a sender allowed the whole budget, see `open`). */
  capOf(whole = false): number {
    return whole ? this.maxBytes : Math.floor(this.maxBytes / SENDER_SHARE);
  }

  /**
   * A request's share, counted for `sender` and capped at a quarter of the budget (the whole
   * budget when `whole`: a peer call that names a participant, whose largest calls need more);
   * draws as its body arrives, gives everything back once.
   */
  open(sender: string, whole = false): PreAuthShare {
    return new PreAuthShare(this, sender, this.capOf(whole));
  }

  /** @internal */
  take(sender: string, bytes: number, cap: number): boolean {
    const held = this.heldBy(sender);
    if (this.used + bytes > this.maxBytes || held + bytes > cap) return false;
    this.used += bytes;
    this.bySender.set(sender, held + bytes);
    return true;
  }

  /** @internal */
  give(sender: string, bytes: number): void {
    if (bytes === 0) return;
    this.used -= bytes;
    const left = this.heldBy(sender) - bytes;
    if (left > 0) this.bySender.set(sender, left);
    else this.bySender.delete(sender);
  }
}

/** One request's draw on the budget. */
export class PreAuthShare {
  private held = 0;
  private closed = false;

  constructor(
    private readonly budget: PreAuthBudget,
    private readonly sender: string,
    /** Most bytes this request's sender may hold together. */
    readonly cap: number,
  ) {}

  /**
   * Makes sure this request holds `bytes` (all it has read so far that it keeps). False when the
   * budget or the sender's part of it cannot cover them: refuse the request.
   */
  cover(bytes: number): boolean {
    if (this.closed) return false;
    const want = bytes - this.held;
    if (want <= 0) return true;
    if (!this.budget.take(this.sender, want, this.cap)) return false;
    this.held += want;
    return true;
  }

  /** Gives back what this request drew; later calls do nothing. */
  release(): void {
    if (this.closed) return;
    this.closed = true;
    this.budget.give(this.sender, this.held);
    this.held = 0;
  }
}

/**
 * Watches that a body keeps arriving: aborts `signal` with `errors.bodyTooSlow()` when fewer than
 * `PACE_MIN_BYTES` arrived in a window of `PACE_WINDOW_MS` and the body has not ended.
 */
export class BodyPace {
  /** Made when first asked for (multipart reads): most bodies only need `onStall`. */
  private controller: AbortController | undefined;
  private stalled: Error | undefined;
  private listener: ((err: Error) => void) | undefined;
  private bytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(windowMs = PACE_WINDOW_MS, minBytes = PACE_MIN_BYTES) {
    this.timer = setInterval(() => {
      if (this.bytes < minBytes) {
        this.stop();
        this.stall(errors.bodyTooSlow(minBytes, windowMs));
      }
      this.bytes = 0;
    }, windowMs);
    this.timer.unref();
  }

  /** Aborted, with the error to answer, when the body stalls. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.stalled) this.controller.abort(this.stalled);
    }
    return this.controller.signal;
  }

  /**
   * `listener` hears the error to answer when the body stalls (once; one listener), as `signal`'s
   * abort would tell it, without the cost of an AbortSignal for every body.
   */
  onStall(listener: (err: Error) => void): void {
    if (this.stalled) listener(this.stalled);
    else this.listener = listener;
  }

  arrived(bytes: number): void {
    this.bytes += bytes;
  }

  /** The body ended (or the request did): no more watching. */
  stop(): void {
    clearInterval(this.timer);
  }

  private stall(err: Error): void {
    this.stalled = err;
    this.controller?.abort(err);
    const listener = this.listener;
    this.listener = undefined;
    listener?.(err);
  }
}

/**
 * Passes a body through, covering its bytes from `share` while they arrive (O(1) per chunk), and
 * telling `pace` of them; fails the stream with `errors.preAuthBudgetSpent()` as soon as the
 * budget cannot cover them, and with the pace's error when the body stalls.
 */
export function meteredBody(share: PreAuthShare, pace: BodyPace): Transform {
  let received = 0;
  const metered = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      pace.arrived(chunk.length);
      if (share.cover(received)) callback(null, chunk);
      else callback(errors.preAuthBudgetSpent());
    },
    flush(callback) {
      pace.stop();
      callback();
    },
  });
  pace.onStall((err) => metered.destroy(err));
  // The body's reader hears the error; once it has stopped listening (the request already
  // refused otherwise), a late one must not become an uncaught exception.
  metered.on("error", () => {});
  return metered;
}
