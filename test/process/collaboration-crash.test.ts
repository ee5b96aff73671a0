import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collaborate, ok, PEER_ENV, startPeer, waitFor, workspacePath } from "../helpers/collaboration.js";
import { ADMIN, form, json, type TestPortal } from "../helpers/portico.js";
import { createProcessDatabase, freePort, type Running, run, waitUntilUp } from "../helpers/process.js";

/**
 * A sync whose process dies: the guest runs as `portico serve` and is killed (SIGKILL, no
 * shutdown) in the middle of a sync, then started again on the same data. The dead sync must be
 * marked failed (at start on SQLite, by its silent heartbeat on PostgreSQL), must not block the
 * workspace, and the next sync must complete the replication without duplicates.
 */
const ITEMS = 600;

describe("a sync interrupted by a crash", () => {
  let host: TestPortal;
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  let guest: Running | undefined;

  beforeAll(async () => {
    host = await startPeer();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-sync-crash-"));
    database = await createProcessDatabase("portico_sync_crash");
  }, 60_000);
  afterAll(async () => {
    guest?.child.kill("SIGKILL");
    await host?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  /** The spawned guest, shaped like a test portal for the collaboration helpers. */
  async function asPortal(r: Running): Promise<TestPortal> {
    const call = async (
      method: "GET" | "POST",
      p: string,
      params: Record<string, unknown> = {},
      token?: string,
    ) => {
      const all = form({ f: "json", ...params, ...(token ? { token } : {}) });
      return json(
        method === "GET"
          ? await fetch(`${r.base}${p}?${all}`)
          : await fetch(`${r.base}${p}`, { method: "POST", body: all }),
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

  it("marks the dead sync failed, frees the workspace, and the next sync completes", async () => {
    const env = {
      ...PEER_ENV,
      PORTICO_SYNC_STALE_SECONDS: "2",
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "warn",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
      PORTICO_PORT: String(await freePort()),
      ...(database ? { DATABASE_URL: database.url } : {}),
    };
    guest = run(env);
    await waitUntilUp(guest);
    let portal = await asPortal(guest);
    const linked = await collaborate(host, [{ portal, mode: "receive" }]);
    for (let batch = 0; batch < ITEMS / 100; batch++) {
      const ids = await Promise.all(
        Array.from({ length: 100 }, async (_, i) => {
          const r = await ok(
            host.post(
              "/content/users/admin_user/addItem",
              {
                title: `item ${batch * 100 + i}`,
                type: "GeoJson",
                text: JSON.stringify({ pad: "p".repeat(4000) }),
              },
              host.adminToken,
            ),
            "addItem",
          );
          return r.id as string;
        }),
      );
      await ok(
        host.post(
          "/content/users/admin_user/shareItems",
          { items: ids.join(","), groups: linked.hostGroup },
          host.adminToken,
        ),
        "share",
      );
    }

    const guestGroup = linked.guestGroups[0] as string;
    const count = async (p: TestPortal) =>
      (await ok(p.get("/search", { q: `group:${guestGroup}`, num: 1 }, p.adminToken), "search"))
        .total as number;
    const started = await ok(
      portal.post(workspacePath(linked, "sync"), { async: true }, portal.adminToken),
      "sync",
    );
    // Killed once some items are stored and before all are.
    await waitFor("the sync to be under way", async () => (await count(portal)) > 0, 20_000);
    guest.child.kill("SIGKILL");
    await guest.exited;

    guest = run(env);
    await waitUntilUp(guest);
    portal = await asPortal(guest);
    const dead = await waitFor("the dead sync to be marked failed", async () => {
      const s = await ok(
        portal.get(workspacePath(linked, `syncStatus/${started.jobId}`), {}, portal.adminToken),
        "status",
      );
      return s.status === "failed" && s;
    });
    expect(dead.summary).toMatch(/stopped/);
    // The kill came mid-sync: part of the items had been stored, and they were kept.
    const before = await count(portal);
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(ITEMS);

    const next = await ok(
      portal.post(workspacePath(linked, "sync"), { async: false }, portal.adminToken),
      "sync",
    );
    expect(next.status).toBe("completed");
    expect(await count(portal)).toBe(ITEMS);
    // Each origin item has exactly one copy: what the dead sync stored was kept, not stored twice.
    const titles = new Set<string>();
    for (let start = 1; start > 0; ) {
      const page = await ok(
        portal.get(`/content/groups/${guestGroup}`, { start, num: 100 }, portal.adminToken),
        "content",
      );
      for (const item of page.items) titles.add(item.title);
      start = page.nextStart;
    }
    expect(titles.size).toBe(ITEMS);
    const list = await ok(portal.get(workspacePath(linked, "syncStatus"), {}, portal.adminToken), "list");
    expect(
      list.status.filter((s: any) => ["submitted", "started", "in_progress"].includes(s.status)),
    ).toEqual([]);
  }, 120_000);
});
