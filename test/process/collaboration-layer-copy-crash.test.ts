import { describe, expect, it } from "vitest";
import { collaborate, ok, waitFor, workspacePath } from "../helpers/collaboration.js";
import { useCrashRig, within } from "../helpers/crash.js";
import type { TestPortal } from "../helpers/portico.js";

/**
 * A layer copy whose process dies: the guest runs as `portico serve` and is killed (SIGKILL) while
 * it copies a hosted layer page by page, then started again on the same data. The next sync must
 * finish the copy from where the stored pages left it: every origin feature exactly once.
 *
 * Features move in pages of 2,000 (`FEATURES_PER_PAGE`), one `layerChanges` call each. The gate lets
 * the first two calls through and holds the third: the kill comes as the guest stores the second
 * page or waits for the third, so one or two of the three pages are stored, whatever the machine's
 * speed.
 */
const FEATURES = 6_000;

describe("a layer copy interrupted by a crash", () => {
  const rig = useCrashRig("copy-crash", "layerChanges", 2);

  it("finishes the copy at the next sync, each feature once", async () => {
    const { host } = rig;
    let portal = await rig.startGuest();
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
    // Killed once the second page has reached it, the third held back.
    await within(rig.gate.reached, 60_000, "the second page");
    await rig.killGuest();
    rig.gate.open();

    portal = await rig.startGuest();
    await waitFor("the dead sync to be marked failed", async () => {
      const s = await ok(
        portal.get(workspacePath(linked, `syncStatus/${started.jobId}`), {}, portal.adminToken),
        "status",
      );
      return s.status === "failed";
    });
    const partial = await copyCount(portal);
    // Whole pages: a page and its cursor are stored in one transaction.
    expect([2000, 4000]).toContain(partial);

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
