import { describe, expect, it } from "vitest";
import { collaborate, ok, waitFor, workspacePath } from "../helpers/collaboration.js";
import { useCrashRig, within } from "../helpers/crash.js";
import type { TestPortal } from "../helpers/portico.js";

/**
 * A sync whose process dies: the guest runs as `portico serve` and is killed (SIGKILL, no
 * shutdown) in the middle of a sync, then started again on the same data. The dead sync must be
 * marked failed (at start on SQLite, by its silent heartbeat on PostgreSQL), must not block the
 * workspace, and the next sync must complete the replication without duplicates.
 *
 * Items move in batches of 100 (`BATCH_ITEMS`), one `export` call each. The gate lets the first two
 * calls through and holds the third: the kill comes as the guest stores the second batch or waits
 * for the third, so at most 200 of the 300 items are stored, whatever the machine's speed (the
 * first batch's 100 are, unless some failed to store: those move again at the next sync).
 */
const ITEMS = 300;

describe("a sync interrupted by a crash", () => {
  const rig = useCrashRig("sync-crash", "export", 2);

  it("marks the dead sync failed, frees the workspace, and the next sync completes", async () => {
    const { host } = rig;
    let portal = await rig.startGuest();
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
    // Killed once the second batch has reached it, the third held back.
    await within(rig.gate.reached, 60_000, "the second batch");
    await rig.killGuest();
    rig.gate.open();

    portal = await rig.startGuest();
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
    expect(before).toBeLessThanOrEqual(200);

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
