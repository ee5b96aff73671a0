import fs from "node:fs";
import http from "node:http";
import type net from "node:net";
import path from "node:path";

/**
 * A loopback web server for the page that runs the ArcGIS Maps SDK, on another origin than
 * portico's (as an application is): the page at `/`, and folders of files under prefixes (the
 * bundled script, the SDK's assets: workers, translations, styles).
 */

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".json": "application/json",
  ".css": "text/css",
  ".wasm": "application/wasm",
  ".png": "image/png",
  ".svg": "image/svg+xml",
  ".woff2": "font/woff2",
};

export interface PageServer {
  /** `http://127.0.0.1:<port>` */
  origin: string;
  /** Paths asked for that do not exist (a chunk or asset the SDK wanted and did not get). */
  missing: string[];
  close(): Promise<void>;
}

/** The file a path names under one of `folders`, if it exists (and does not climb out of it). */
function fileFor(folders: Record<string, string>, pathname: string): string | undefined {
  const prefix = Object.keys(folders).find((p) => pathname.startsWith(p));
  if (prefix === undefined) return undefined;
  const root = path.resolve(folders[prefix]!);
  const file = path.resolve(root, pathname.slice(prefix.length));
  if (!file.startsWith(root + path.sep)) return undefined;
  return fs.statSync(file, { throwIfNoEntry: false })?.isFile() ? file : undefined;
}

export async function startPageServer(options: {
  html: string;
  /** URL prefix (`/app/`) → folder. */
  folders: Record<string, string>;
}): Promise<PageServer> {
  const missing: string[] = [];
  const server = http.createServer((req, res) => {
    const pathname = decodeURIComponent(new URL(req.url ?? "/", "http://localhost").pathname);
    if (pathname === "/") {
      res.writeHead(200, { "content-type": TYPES[".html"] }).end(options.html);
      return;
    }
    const file = fileFor(options.folders, pathname);
    if (!file) {
      missing.push(pathname);
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": TYPES[path.extname(file)] ?? "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    missing,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
