import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collaborate, ok, PEER_ENV, startPeer, waitFor, workspacePath } from "../helpers/collaboration.js";
import { ADMIN, form, json, type TestPortal } from "../helpers/portico.js";
import { createProcessDatabase, freePort, type Running, run, waitUntilUp } from "../helpers/process.js";

/**
 * A layer copy whose process dies: the guest runs as `portico serve` and is killed (SIGKILL) while
 * it copies a hosted layer page by page, then started again on the same data. The next sync must
 * finish the copy from where the stored pages left it: every origin feature exactly once.
 */
const FEATURES = 40_000;

describe("a layer copy interrupted by a crash", () => {
  let host: TestPortal;
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  let guest: Running | undefined;

  beforeAll(async () => {
    host = await startPeer();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-copy-crash-"));
    database = await createProcessDatabase("portico_copy_crash");
  }, 60_000);
  afterAll(async () => {
    guest?.child.kill("SIGKILL");
    await host?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  async function asPortal(r: Running): Promise<TestPortal> {
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

  it("finishes the copy at the next sync, each feature once", async () => {
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
    const guestGroup = linked.guestGroups[0] as string;
    await ok(
      portal.post(
        workspacePath(linked, "updatePortalGroupLink"),
        { portalGroupId: guestGroup, copyFeatureServiceData: true },
        portal.adminToken,
      ),
      "link",
    );
    const created = await ok(
      host.post(
        "/content/users/admin_user/createService",
        { createParameters: { name: "Many" }, outputType: "featureService" },
        host.adminToken,
      ),
      "createService",
    );
    await ok(
      host.post(
        `${host.portico.address}/rest/admin/services/Many/FeatureServer/addToDefinition`,
        {
          addToDefinition: {
            layers: [
              {
                name: "Many",
                geometryType: "esriGeometryPoint",
                spatialReference: { wkid: 4326 },
                fields: [{ name: "n", type: "esriFieldTypeInteger" }],
              },
            ],
          },
        },
        host.adminToken,
      ),
      "addToDefinition",
    );
    const origin = `${host.portico.address}/rest/services/Many/FeatureServer/0`;
    for (let start = 0; start < FEATURES; start += 2000) {
      const adds = Array.from({ length: 2000 }, (_, i) => ({
        attributes: { n: start + i },
        geometry: { x: ((start + i) % 360) - 179.5, y: ((start + i) % 170) - 85 },
      }));
      await ok(host.post(`${origin}/applyEdits`, { adds }, host.adminToken), "applyEdits");
    }
    await ok(
      host.post(
        `/content/users/admin_user/items/${created.itemId}/share`,
        { groups: linked.hostGroup },
        host.adminToken,
      ),
      "share",
    );

    const copyCount = async (p: TestPortal) => {
      const r = await p.get(
        `${p.portico.address}/rest/services/Many/FeatureServer/0/query`,
        { where: "1=1", returnCountOnly: true },
        p.adminToken,
      );
      return typeof r.count === "number" ? (r.count as number) : 0;
    };
    const started = await ok(
      portal.post(workspacePath(linked, "sync"), { async: true }, portal.adminToken),
      "sync",
    );
    await waitFor("the copy to be under way", async () => (await copyCount(portal)) > 0, 60_000);
    guest.child.kill("SIGKILL");
    await guest.exited;

    guest = run(env);
    await waitUntilUp(guest);
    portal = await asPortal(guest);
    await waitFor("the dead sync to be marked failed", async () => {
      const s = await ok(
        portal.get(workspacePath(linked, `syncStatus/${started.jobId}`), {}, portal.adminToken),
        "status",
      );
      return s.status === "failed";
    });
    const partial = await copyCount(portal);
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(FEATURES);

    const next = await ok(
      portal.post(workspacePath(linked, "sync"), { async: false }, portal.adminToken),
      "sync",
    );
    expect(next.status).toBe("completed");
    const status = await ok(
      portal.get(workspacePath(linked, `syncStatus/${next.jobId}`), {}, portal.adminToken),
      "status",
    );
    const [layer] = status.participantTasks[0].featureData[0].layers;
    // Only what the dead sync had not stored moved again.
    expect(layer.added).toBe(FEATURES - partial);
    expect(layer.updated).toBe(0);
    expect(await copyCount(portal)).toBe(FEATURES);
    const ns = new Set<number>();
    for (let offset = 0; offset < FEATURES; offset += 2000) {
      const page = await portal.get(
        `${portal.portico.address}/rest/services/Many/FeatureServer/0/query`,
        {
          where: "1=1",
          outFields: "n",
          orderByFields: "OBJECTID",
          resultOffset: offset,
          resultRecordCount: 2000,
        },
        portal.adminToken,
      );
      for (const f of page.features) ns.add(f.attributes.n);
    }
    expect(ns.size).toBe(FEATURES);
  }, 240_000);
});
