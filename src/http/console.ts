import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { CONSOLE_CLIENT_ID } from "../content/app-registration.service.js";
import type { Services } from "../services.js";

/**
 * The administration console (README "Console"): a static single-page application under
 * `<context path>/portico/console/`, built by `npm run build` into `dist/console` (console/build.ts)
 * and served from there. It is a browser app of the portal's own OAuth 2.0 (client id
 * `portico-console`, registered here on first visit), so it holds no privilege of its own: every
 * call it makes is the signed-in user's, through the public API.
 *
 * Its pages run only the portal's own scripts and styles (CSP `'self'`); tiles of a basemap the
 * organization configured may come from elsewhere (https images and fetches), nothing else.
 */

/** Where `npm run build` puts the console: `<package root>/dist/console`. */
export function consoleDir(): string {
  // This file runs from src/http (tsx, tests) or dist/src/http (npm start): the package root is
  // the nearest folder above with a package.json.
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, "package.json")) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return path.join(dir, "dist", "console");
}

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  // MapLibre's worker is a file of the console (its CSP build), never a blob.
  "worker-src 'self'",
  "img-src 'self' data: blob: https:",
  "connect-src 'self' https:",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".txt": "text/plain; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".png": "image/png",
  ".svg": "image/svg+xml",
};

/** The console's asset names: letters, digits, dots, dashes and underscores (no folders). */
const ASSET = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

const escapeAttr = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export function registerConsole(
  app: FastifyInstance,
  options: { services: Services; contextPath: string; publicUrl: () => string; dir?: string },
): void {
  const base = `${options.contextPath}/portico/console`;
  const dir = options.dir ?? consoleDir();
  const headers = {
    "content-security-policy": CONSOLE_CSP,
    "x-frame-options": "DENY",
    "cache-control": "no-cache",
  };
  // ignoreTrailingSlash makes `/portico/console` this route too; its page names its assets by
  // absolute path, so it works at either.
  app.get(`${base}/`, { config: { name: "console" } }, async (_request, reply) => {
    const portal = `${options.publicUrl()}${options.contextPath}`;
    const redirectUri = `${portal}/portico/console/`;
    await options.services.apps.ensureConsoleApp(redirectUri);
    const index = path.join(dir, "index.html");
    if (!fs.existsSync(index)) {
      return reply
        .status(404)
        .headers(headers)
        .type("text/plain; charset=utf-8")
        .send("The console is not built: run `npm run build` (it writes dist/console).\n");
    }
    // The page learns where it is from the portal, not from its own address: the redirect URI
    // must be the registered one exactly.
    const config = JSON.stringify({ clientId: CONSOLE_CLIENT_ID, portal, redirectUri, base });
    const html = (await fs.promises.readFile(index, "utf8"))
      .replaceAll("__BASE__", escapeAttr(base))
      .replace("__CONFIG__", escapeAttr(config));
    return reply.headers(headers).type("text/html; charset=utf-8").send(html);
  });
  app.get(`${base}/assets/:file`, { config: { name: "console.asset" } }, async (request, reply) => {
    const { file } = request.params as { file: string };
    const full = path.join(dir, "assets", file);
    if (!ASSET.test(file) || !fs.existsSync(full)) {
      return reply.status(404).headers(headers).type("text/plain; charset=utf-8").send("not found\n");
    }
    return reply
      .headers(headers)
      .type(TYPES[path.extname(file)] ?? "application/octet-stream")
      .send(fs.createReadStream(full));
  });
}
