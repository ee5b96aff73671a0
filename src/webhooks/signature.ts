import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";

/**
 * Signing keys and headers of a delivery (`wire.md` §7). The key is the UTF-8 bytes of the secret;
 * a secret in the Standard Webhooks form `whsec_<base64>` is the base64-decoded bytes after the
 * prefix, as Standard Webhooks libraries read it, so receivers can pass the secret to them as is.
 */
export function signingKey(secret: string): Buffer {
  if (secret.startsWith("whsec_")) return Buffer.from(secret.slice("whsec_".length), "base64");
  return Buffer.from(secret, "utf8");
}

/** Whether `secret` can sign: a `whsec_` secret must hold some base64. */
export function secretProblem(secret: string): string | undefined {
  if (secret.startsWith("whsec_")) {
    const body = secret.slice("whsec_".length);
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body) || signingKey(secret).length === 0) {
      return "starts with whsec_ but the rest is not base64";
    }
  }
  return undefined;
}

/**
 * Headers for one attempt. `webhook-id` is the notification's id, the same for every attempt, so
 * receivers can drop duplicates; the timestamp is the attempt's own. Without a secret nothing is
 * signed; the id and timestamp are still sent.
 */
export function deliveryHeaders(
  notificationId: string,
  body: string,
  secret: string,
  when: Date,
): Record<string, string> {
  const headers: Record<string, string> = {
    "webhook-id": notificationId,
    "webhook-timestamp": String(Math.floor(when.getTime() / 1000)),
  };
  if (secret === "") return headers;
  const key = signingKey(secret);
  headers["webhook-signature"] = new Webhook(key, { format: "raw" }).sign(notificationId, when, body);
  headers["x-esriHook-Signature"] = `sha256=${createHmac("sha256", key).update(body).digest("base64")}`;
  return headers;
}
