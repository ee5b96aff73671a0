/**
 * The rules of webhook delivery (`wire.md` §7) as pure functions: the settings and their ArcGIS
 * defaults, what one attempt's result makes of its notification (delivered, retried when, or
 * failed), and the deactivation policy. The repository applies them when it records outcomes.
 */

/** ArcGIS's defaults for the delivery settings (`wire.md` §7). */
export const DEFAULT_SETTINGS = {
  notificationAttempts: 3,
  notificationTimeOutInSeconds: 10,
  notificationElapsedTimeInSeconds: 5,
} as const;

/** Used when a webhook's config has no deactivationPolicy. */
export const DEFAULT_DEACTIVATION_POLICY = { numberOfFailures: 5, daysInPast: 5 } as const;

/** A receiver's Retry-After is honoured up to this long. */
export const MAX_RETRY_AFTER_MS = 60 * 60 * 1000;

const DAY_MS = 24 * 60 * 60 * 1000;

export interface DeactivationPolicy {
  numberOfFailures: number;
  daysInPast: number;
}

/** What `config` holds: the ArcGIS deactivation policy and portico's own delivery option. */
export interface WebhookConfig {
  deactivationPolicy?: DeactivationPolicy;
  /** Also send the secret itself in `x-esriHook-Secret`, as the public portal does. Off by default. */
  sendSecretHeader?: boolean;
}

export interface WebhookSettings {
  notificationAttempts: number;
  notificationTimeOutInSeconds: number;
  notificationElapsedTimeInSeconds: number;
}

/** What came back from one attempt. */
export interface AttemptResult {
  /** The receiver's HTTP status; null when no answer came (refused, unreachable, timed out). */
  statusCode: number | null;
  /** Why no answer came; empty when one did. */
  error: string;
  /** The start of the receiver's answer. */
  excerpt: string;
  /** How long the receiver asked to wait (`Retry-After`), if it did. */
  retryAfterMs: number | undefined;
}

/** Where an attempt leaves its notification, as the delivery metrics count it. */
export type AttemptVerdict = "delivered" | "retrying" | "failed";

/** The notification columns an attempt's outcome sets. */
export interface NotificationUpdate {
  status: "pending" | "delivered" | "failed";
  attempts: number;
  total_attempts: number;
  next_attempt: number;
  lease_until: number;
  completed: number | null;
  last_status: number | null;
  last_response: string;
}

/** The per-attempt limit; a setting of 0 still gets a second, as nothing answers in no time. */
export function attemptTimeoutMs(settings: WebhookSettings): number {
  return Math.max(1, settings.notificationTimeOutInSeconds) * 1000;
}

/**
 * What one attempt makes of its notification. A 2xx delivers it; 410 Gone fails it at once (and
 * deactivates the webhook: `gone`); anything else retries after the configured interval, or the
 * receiver's longer Retry-After, until the attempts of the settings are spent (at least one).
 * The lease is released either way.
 */
export function afterAttempt(
  notification: { attempts: number; total_attempts: number; next_attempt: number },
  result: AttemptResult,
  settings: WebhookSettings,
  now: number,
): { verdict: AttemptVerdict; gone: boolean; update: NotificationUpdate } {
  const maxAttempts = Math.max(1, settings.notificationAttempts);
  const retryDelayMs = settings.notificationElapsedTimeInSeconds * 1000;
  const { statusCode } = result;
  const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
  const gone = statusCode === 410;
  const attempts = notification.attempts + 1;
  const final = delivered || gone || attempts >= maxAttempts;
  const status = delivered ? "delivered" : final ? "failed" : "pending";
  return {
    verdict: status === "pending" ? "retrying" : status,
    gone,
    update: {
      status,
      attempts,
      total_attempts: notification.total_attempts + 1,
      next_attempt: final
        ? notification.next_attempt
        : now + Math.max(retryDelayMs, result.retryAfterMs ?? 0),
      lease_until: 0,
      completed: final ? now : null,
      last_status: statusCode,
      last_response: result.error || result.excerpt,
    },
  };
}

/** A webhook's deactivation policy, from its stored `config`. */
export function deactivationPolicyOf(config: string): DeactivationPolicy {
  return (JSON.parse(config) as WebhookConfig).deactivationPolicy ?? DEFAULT_DEACTIVATION_POLICY;
}

/**
 * Since when failed notifications count towards deactivation: the last `daysInPast` days, but not
 * before the webhook's creation or last activation (`countSince`), which start a clean count.
 */
export function failureCountStart(countSince: number, policy: DeactivationPolicy, now: number): number {
  return Math.max(countSince, now - policy.daysInPast * DAY_MS);
}

/** `Retry-After` as milliseconds from now (seconds or an HTTP date), capped; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  const ms = /^\d+$/.test(text.trim()) ? Number(text.trim()) * 1000 : Date.parse(text) - now;
  if (!Number.isFinite(ms) || ms < 0) return undefined;
  return Math.min(ms, MAX_RETRY_AFTER_MS);
}
