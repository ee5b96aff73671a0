import fs from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { PEER_ENV, startPeer } from "./collaboration.js";
import { ADMIN, form, json, type TestPortal } from "./portico.js";
import { createProcessDatabase, freePort, type Running, run, waitUntilUp } from "./process.js";

/**
 * A gate between a guest and its host: a node:http proxy that passes every peer call unchanged,
 * except the calls of one peer operation (`export`, `layerChanges`, ...) after the first `passes`:
 * those it holds unanswered until `open()`. `reached` resolves once the answer to the last passing
 * call has gone back to the guest, so a test that kills the guest then kills it while it stores
 * that answer or waits for the next, never after it has moved everything.
 */
export interface PeerGate {
  url: string;
  reached: Promise<void>;
  /** Lets every later call through; calls held until now are dropped (their caller is gone). */
  open(): void;
  close(): void;
}

export async function startPeerGate(target: () => string, op: string, passes: number): Promise<PeerGate> {
  let calls = 0;
  let open = false;
  const held = new Set<() => void>();
  let reach: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    reach = resolve;
  });
  const server = createServer((req, res) => {
    const gated = !open && req.url?.startsWith(`/sharing/rest/portico/peer/${op}?`) === true;
    const call = gated ? ++calls : 0;
    if (gated && call > passes) {
      held.add(() => res.destroy());
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const upstream = request(
        `${target()}${req.url}`,
        { method: req.method, headers: { ...req.headers, host: new URL(target()).host } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          if (call === passes) res.on("finish", reach);
        },
      );
      upstream.on("error", () => res.destroy());
      upstream.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    reached,
    open() {
      open = true;
      for (const drop of held) drop();
      held.clear();
    },
    close() {
      for (const drop of held) drop();
      server.close();
      server.closeAllConnections();
    },
  };
}

/** Rejects after `ms` unless `promise` settles first. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A spawned server shaped like a test portal for the collaboration helpers (absolute paths too). */
export async function asPortal(r: Running): Promise<TestPortal> {
  const call = async (
    method: "GET" | "POST",
    p: string,
    params: Record<string, unknown> = {},
    token?: string,
  ) => {
    const all = form({ f: "json", ...params, ...(token ? { token } : {}) });
    const url = p.startsWith("http") ? p : `${r.base}${p}`;
    return json(
      method === "GET" ? await fetch(`${url}?${all}`) : await fetch(url, { method: "POST", body: all }),
    );
  };
  const { token } = await call("POST", "/generateToken", { ...ADMIN, client: "requestip" });
  return {
    portico: { address: r.base.replace(/\/sharing\/rest$/, "") },
    api: r.base,
    adminToken: token,
    post: (p: string, params?: Record<string, unknown>, t?: string) => call("POST", p, params, t),
    get: (p: string, params?: Record<string, unknown>, t?: string) => call("GET", p, params, t),
  } as unknown as TestPortal;
}

export interface CrashRig {
  /** The host, an in-process test portal, which the guest reaches through `gate`. */
  host: TestPortal;
  gate: PeerGate;
  /** Starts the guest, `portico serve` on the rig's data (again, after a kill), once it answers. */
  startGuest(): Promise<TestPortal>;
  /** SIGKILL: no shutdown, nothing flushed. */
  killGuest(): Promise<void>;
}

/**
 * The set-up of a crash test: a host behind a gate on `op` (see `PeerGate`) and a guest that runs
 * as `portico serve` (SIGKILL reaches only a process of its own) on a data directory, and on
 * PostgreSQL a database, that outlive it. Registers its own beforeAll/afterAll.
 */
export function useCrashRig(name: string, op: string, passes: number): CrashRig {
  const rig = {} as CrashRig;
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  let env: Record<string, string>;
  let guest: Running | undefined;

  beforeAll(async () => {
    let host: TestPortal | undefined;
    rig.gate = await startPeerGate(() => (host as TestPortal).portico.address, op, passes);
    host = await startPeer({ PORTICO_PUBLIC_URL: rig.gate.url });
    rig.host = host;
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `portico-${name}-`));
    database = await createProcessDatabase(`portico_${name.replaceAll("-", "_")}`);
    env = {
      ...PEER_ENV,
      PORTICO_SYNC_STALE_SECONDS: "2",
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "warn",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
      PORTICO_PORT: String(await freePort()),
      ...(database ? { DATABASE_URL: database.url } : {}),
    };
  }, 60_000);
  afterAll(async () => {
    guest?.child.kill("SIGKILL");
    await guest?.exited;
    rig.gate?.close();
    await rig.host?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  rig.startGuest = async () => {
    guest = run(env);
    await waitUntilUp(guest);
    return asPortal(guest);
  };
  rig.killGuest = async () => {
    guest?.child.kill("SIGKILL");
    await guest?.exited;
  };
  return rig;
}
