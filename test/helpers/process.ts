import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import net from "node:net";
import path from "node:path";
import pg from "pg";
import { engine } from "./portico.js";

/**
 * Runs the server as an operator does: `node dist/src/cli/main.js serve` (what `npm start` runs),
 * configured only through the environment and flags. `npm test` builds dist/ first.
 */
export const MAIN = path.resolve(import.meta.dirname, "../../dist/src/cli/main.js");

/**
 * A port to hand a spawned server, which binds it a second or so later. Taken at random below
 * Linux's ephemeral range (32768-60999): a port from `listen(0)` is closed again before the server
 * binds it, and meanwhile another test's server listening on port 0 could be given the same one
 * and answer this one's readiness probe (seen once in CI: a test read a certificate its server had
 * not made). Below that range only other callers of this function pick, at random among 10,000.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (await bindable(port)) return port;
  }
  return bindable(0) as Promise<number>;
}

/** Binds `port` on 127.0.0.1 and lets it go: the port bound (0: the one the system chose), or 0 when taken. */
function bindable(port: number): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(0));
    server.listen(port, "127.0.0.1", () => {
      const bound = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(bound));
    });
  });
}

export interface Running {
  child: ChildProcess;
  output: () => string;
  base: string;
  exited: Promise<number | null>;
}

/**
 * HTTPS is off unless a test turns it on (PORTICO_HTTPS_PORT=0): its default port, 7443, would
 * be bound by every server of the files that run side by side, and the public URL would be HTTPS.
 */
export function run(env: Record<string, string>, args: string[] = []): Running {
  const child = spawn(process.execPath, [MAIN, "serve", ...args], {
    env: { PATH: process.env.PATH ?? "", PORTICO_HTTPS_PORT: "off", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout?.on("data", (d) => {
    out += d;
  });
  child.stderr?.on("data", (d) => {
    out += d;
  });
  // Once its output is closed too: what it writes as it exits (log lines flushed then) is read.
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, output: () => out, base: `http://127.0.0.1:${env.PORTICO_PORT}/sharing/rest`, exited };
}

export async function waitUntilUp(r: Running): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (r.child.exitCode !== null) throw new Error(`server exited: ${r.output()}`);
    try {
      const res = await fetch(`${r.base}/info?f=json`);
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`server did not start: ${r.output()}`);
}

export async function stop(r: Running): Promise<number | null> {
  r.child.kill("SIGTERM");
  return r.exited;
}

/**
 * On PostgreSQL, a database of its own for a spawned server (the CLI has no schema setting);
 * undefined on SQLite.
 */
export async function createProcessDatabase(
  prefix: string,
): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  if (engine !== "postgres") return undefined;
  const admin = process.env.PORTICO_TEST_DATABASE_URL as string;
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  const query = async (statement: string) => {
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      await client.query(statement);
    } finally {
      await client.end();
    }
  };
  await query(`CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
