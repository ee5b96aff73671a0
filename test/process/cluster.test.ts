import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addItem, collaborate, ok, PEER_ENV, waitFor, workspacePath } from "../helpers/collaboration.js";
import { ADMIN, form, json, newStore, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { createProcessDatabase, freePort, type Running, run, stop, waitUntilUp } from "../helpers/process.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * Several nodes on one PostgreSQL database (issue 6). Background work is shared through the
 * database (SKIP LOCKED claims, leases, conditional updates, a unique index), so each piece of it
 * is done by one node, and a node that dies leaves nothing stuck. SQLite is one process per data
 * directory (test/api/nodes.test.ts), so vitest.config.ts runs this file on PostgreSQL only.
 */
describe("three nodes, one killed during a burst of changes", () => {
  let database: NonNullable<Awaited<ReturnType<typeof createProcessDatabase>>>;
  let receiver: Receiver;
  const nodes: Running[] = [];

  beforeAll(async () => {
    database = (await createProcessDatabase("portico_cluster")) as typeof database;
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const node of nodes) if (node.child.exitCode === null) node.child.kill("SIGKILL");
    await receiver?.close();
    await database?.drop();
  });

  it("delivers every event once per live node, takes over the dead node's work, and stops cleanly", async () => {
    const env = {
      DATABASE_URL: database.url,
      PORTICO_LOG_LEVEL: "warn",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
      PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8",
      PORTICO_SHUTDOWN_GRACE_SECONDS: "2",
    };
    // The first node creates the schema and the administrator; the others join it.
    nodes.push(run({ ...env, PORTICO_PORT: String(await freePort()) }));
    await waitUntilUp(nodes[0] as Running);
    for (let i = 1; i < 3; i++) nodes.push(run({ ...env, PORTICO_PORT: String(await freePort()) }));
    await Promise.all(nodes.map((n) => waitUntilUp(n)));
    const [a, b, c] = nodes as [Running, Running, Running];

    const call = async (node: Running, p: string, params: Record<string, unknown>) =>
      json(await fetch(`${node.base}${p}`, { method: "POST", body: form({ f: "json", ...params }) }));
    // A token issued by one node is good on the others.
    const { token } = await call(a, "/generateToken", { ...ADMIN, client: "requestip" });
    // Short attempts: the dead node's leases (attempt timeout + 5 s) run out within the test.
    await call(b, "/portals/self/webhooks/settings/update", { notificationTimeOutInSeconds: 2, token });
    const hook = await call(c, "/portals/self/webhooks/createWebhook", {
      name: "cluster",
      url: receiver.url,
      changes: "manualChanges",
      events: "/items/add",
      token,
    });
    expect(hook.success, JSON.stringify(hook)).toBe(true);
    // Slow enough answers that attempts are in flight on every node when one dies.
    receiver.respond = () => ({ status: 200, delayMs: 30 });

    const acknowledged: string[] = [];
    const byNode = new Map<Running, number>(nodes.map((n) => [n, 0]));
    let done = false;
    const worker = async (node: Running, w: number) => {
      for (let i = 0; !done; i++) {
        try {
          const r = await call(node, `/content/users/${ADMIN.username}/addItem`, {
            title: `Cluster ${w}.${i}`,
            type: "Web Map",
            token,
          });
          if (r.success) {
            acknowledged.push(r.id as string);
            byNode.set(node, (byNode.get(node) ?? 0) + 1);
          }
        } catch {
          return; // the node is gone
        }
      }
    };
    const workers = nodes.flatMap((node, n) => [0, 1, 2].map((w) => worker(node, n * 10 + w)));
    // Every node has taken changes before one of them dies.
    await waitFor("changes on every node", async () => [...byNode.values()].every((n) => n >= 30), 30_000);
    c.child.kill("SIGKILL");
    const killedAt = Date.now();
    await c.exited;
    while (acknowledged.length < 360) await new Promise((r) => setTimeout(r, 10));
    done = true;
    await Promise.all(workers);

    const db = new pg.Client({ connectionString: database.url });
    await db.connect();
    try {
      const count = async (statement: string) => Number((await db.query(statement)).rows[0].n);
      // Nothing stuck: every event dispatched and every notification delivered, the dead
      // node's claims included once their leases ran out.
      await waitFor(
        "every notification delivered",
        async () =>
          (await count("SELECT COUNT(*) AS n FROM events WHERE dispatched = 0")) === 0 &&
          (await count("SELECT COUNT(*) AS n FROM notifications WHERE status <> 'delivered'")) === 0,
        60_000,
      );
      const notifications = (await db.query("SELECT id, event_id FROM notifications")).rows as {
        id: string;
        event_id: string;
      }[];
      const events = await count(
        "SELECT COUNT(*) AS n FROM events WHERE source = 'item' AND operation = 'add'",
      );
      // One notification per event: each event was dispatched by one node.
      expect(notifications).toHaveLength(events);
      expect(new Set(notifications.map((n) => n.event_id)).size).toBe(events);
      // One recorded attempt per notification: no two live nodes sent the same one.
      const attempts = (
        await db.query(
          "SELECT notification_id, COUNT(*) AS n FROM notification_attempts GROUP BY notification_id",
        )
      ).rows as { notification_id: string; n: string }[];
      expect(attempts.filter((r) => Number(r.n) !== 1)).toEqual([]);
      expect(attempts).toHaveLength(events);

      // Every acknowledged change reached the receiver.
      const arrivals = receiver.arrived.filter((r) => JSON.parse(r.body).events.length > 0);
      const delivered = new Set(arrivals.flatMap((r) => JSON.parse(r.body).events.map((e: any) => e.id)));
      expect(acknowledged.filter((id) => !delivered.has(id))).toEqual([]);
      expect(new Set(arrivals.map((r) => r.headers["webhook-id"])).size).toBe(events);
      // A notification arrived twice only when the dead node had sent it before it died: after
      // the kill (and the moment its last bytes took to arrive) each arrived at most once.
      const late = new Map<string, number>();
      for (const r of arrivals) {
        if (r.at < killedAt + 250) continue;
        const id = String(r.headers["webhook-id"]);
        late.set(id, (late.get(id) ?? 0) + 1);
      }
      expect([...late].filter(([, n]) => n > 1)).toEqual([]);
    } finally {
      await db.end();
    }

    // SIGTERM: the live nodes stop accepting, finish, and exit cleanly.
    expect(await Promise.all([stop(a), stop(b)])).toEqual([0, 0]);
  }, 120_000);
});

describe("three nodes of a guest portal syncing one workspace", () => {
  const portals: TestPortal[] = [];
  const store = newStore();
  afterAll(async () => {
    for (const p of portals.reverse()) await p.stop();
    await store.destroy();
  });

  it("runs one sync of a workspace at a time across nodes, and fires each schedule once", async () => {
    const host = await startTestPortal({ env: PEER_ENV });
    portals.push(host);
    const first = await startTestPortal({ store, keepStore: true, env: PEER_ENV });
    portals.push(first);
    const linked = await collaborate(host, [{ portal: first, mode: "sendAndReceive" }]);
    const guests = [first];
    for (let i = 0; i < 2; i++) {
      const node = await startTestPortal({ store, keepStore: true, env: PEER_ENV });
      portals.push(node);
      guests.push(node);
    }
    for (let i = 0; i < 150; i++) await addItem(host, `shared ${i}`, linked.hostGroup);

    // The same manual sync asked of every node at once: one runs, the others are refused
    // naming it.
    const answers = await Promise.all(
      guests.map((g) => g.post(workspacePath(linked, "sync"), { async: true }, g.adminToken)),
    );
    const started = answers.filter((r) => r.success);
    expect(started, JSON.stringify(answers)).toHaveLength(1);
    for (const refused of answers.filter((r) => !r.success)) {
      expect(refused.error.messageCode).toBe("COLLAB_0010");
      expect(refused.error.message).toContain(started[0].jobId);
    }
    await waitFor("the sync to complete", async () => {
      const r = await first.get(
        workspacePath(linked, `syncStatus/${started[0].jobId}`),
        {},
        first.adminToken,
      );
      return r.status === "completed";
    });

    // A schedule of four fires, two seconds apart: each fire is claimed by one node.
    await ok(
      first.post(
        workspacePath(linked, "schedule/update"),
        { startTime: Date.now() + 1000, interval: 2 / 3600, repeatCount: 3 },
        first.adminToken,
      ),
      "schedule",
    );
    await waitFor(
      "the schedule to complete",
      async () =>
        (await first.get(workspacePath(linked, "schedule"), {}, first.adminToken)).state === "completed",
      30_000,
    );
    const jobs = await waitFor("the scheduled syncs to finish", async () => {
      const r = await first.get(workspacePath(linked, "syncStatus"), {}, first.adminToken);
      const scheduled = (r.status as any[]).filter((s) => s.syncExecType === "scheduled");
      return scheduled.length === 4 && scheduled.every((s) => s.status === "completed") && scheduled;
    });
    expect(jobs).toHaveLength(4);
    const { db } = first.portico;
    const all = await db.kysely
      .selectFrom("sync_jobs")
      .selectAll()
      .where("exec_type", "=", "scheduled")
      .execute();
    expect(all).toHaveLength(4);
    // Never two at once: each scheduled sync ended before the next began.
    const spans = all.map((j) => [j.start_time, j.end_time] as const).sort((x, y) => x[0] - y[0]);
    for (let i = 1; i < spans.length; i++) {
      expect(spans[i]?.[0]).toBeGreaterThanOrEqual(spans[i - 1]?.[1] as number);
    }
  }, 90_000);
});
