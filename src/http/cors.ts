import type { FastifyReply, FastifyRequest } from "fastify";

/**
 * CORS driven by the organization's `allowedOrigins`: empty lets any origin in (as ArcGIS does);
 * otherwise only the listed origins get a grant. Returns true when the request was a preflight and
 * has been answered.
 */
export function handleCors(
  request: FastifyRequest,
  reply: FastifyReply,
  allowedOrigins: readonly string[],
): boolean {
  const origin = request.headers.origin;
  const allowed =
    typeof origin === "string" &&
    (allowedOrigins.length === 0 ||
      allowedOrigins.some((o) => o.replace(/\/$/, "").toLowerCase() === origin.toLowerCase()));
  if (allowed) {
    reply.header("access-control-allow-origin", origin);
    reply.header("access-control-allow-credentials", "true");
  }
  reply.header("vary", "Origin");
  const isPreflight =
    request.method === "OPTIONS" && request.headers["access-control-request-method"] !== undefined;
  if (!isPreflight) return false;
  if (!allowed) {
    reply.code(403).send();
    return true;
  }
  const requested = request.headers["access-control-request-headers"];
  reply
    .header("access-control-allow-methods", "GET, POST, OPTIONS")
    .header(
      "access-control-allow-headers",
      typeof requested === "string" ? requested : "Authorization, X-Esri-Authorization, Content-Type",
    )
    .header("access-control-max-age", "600")
    .code(204)
    .send();
  return true;
}
