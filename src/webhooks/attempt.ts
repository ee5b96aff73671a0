import { type OutboundGuard, OutboundRefused, type OutboundResponse } from "../outbound/guard.js";
import { deliveryHeaders } from "./signature.js";

/**
 * One signed POST to a payload URL, as deliveries and the payload-URL check make it, and how its
 * failure reads in `notificationStatus` and error messages.
 */

/** How much of a receiver's answer is kept per attempt. */
export const RESPONSE_EXCERPT_BYTES = 4096;
/** A check of the payload URL at creation gets this long, whatever the settings say. */
const CHECK_TIMEOUT_MS = 10_000;

export interface SignedPost {
  url: string;
  /** The notification's id: `webhook-id`, the same on every attempt. */
  id: string;
  body: string;
  secret: string;
  /** Also send the secret itself (`x-esriHook-Secret`), when there is one. */
  sendSecretHeader?: boolean | undefined;
  /** The attempt's time, signed in `webhook-timestamp`. */
  when: Date;
  /** The limit of the connection and of the whole exchange. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/** POSTs through the address guard; resolves with any answer, rejects as `guard.post` does. */
export function postSigned(guard: Pick<OutboundGuard, "post">, post: SignedPost): Promise<OutboundResponse> {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "portico-webhooks",
    ...deliveryHeaders(post.id, post.body, post.secret, post.when),
  };
  if (post.sendSecretHeader && post.secret !== "") headers["x-esriHook-Secret"] = post.secret;
  return guard.post(post.url, {
    headers,
    body: post.body,
    connectTimeoutMs: post.timeoutMs,
    totalTimeoutMs: post.timeoutMs,
    maxResponseBytes: RESPONSE_EXCERPT_BYTES,
    ...(post.signal ? { signal: post.signal } : {}),
  });
}

/** Why a payload URL cannot be used, or undefined when it answered 2xx. */
export type PayloadUrlCheck = (
  url: string,
  secret: string,
  webhookName: string,
) => Promise<string | undefined>;

/**
 * The check made when a webhook is created or its URL or secret change: an empty notification,
 * signed with the secret, through the address guard. `portalUrl` is the portal as payloads name it.
 */
export function payloadUrlCheck(
  guard: Pick<OutboundGuard, "post">,
  portalUrl: () => string,
): PayloadUrlCheck {
  return async (url, secret, webhookName) => {
    const now = Date.now();
    // An empty notification: receivers see the signed headers and no events.
    const body = JSON.stringify({
      info: { webhookId: "", webhookName, portalURL: portalUrl(), when: now },
      events: [],
    });
    try {
      const res = await postSigned(guard, {
        url,
        id: `check_${now}`,
        body,
        secret,
        when: new Date(now),
        timeoutMs: CHECK_TIMEOUT_MS,
      });
      if (res.status >= 200 && res.status < 300) return undefined;
      return `${url} answered HTTP ${res.status}`;
    } catch (err) {
      return describeFailure(err);
    }
  };
}

/** A failed exchange in a line: the guard's refusal, a timeout, or the network error's code and message. */
export function describeFailure(err: unknown): string {
  if (err instanceof OutboundRefused) return `refused: ${err.message}`;
  const e = err as {
    name?: string;
    code?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "timed out";
  const code = e?.code ?? e?.cause?.code;
  const message = e?.cause?.message ?? e?.message ?? String(err);
  return code ? `${code}: ${message}` : message;
}
