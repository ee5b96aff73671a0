import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, form, json } from "../helpers/portico.js";
import { createProcessDatabase, freePort, run, stop, waitUntilUp } from "../helpers/process.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * At-least-once across a crash: the server process is killed (SIGKILL, no shutdown) in the middle
 * of a burst of changes while deliveries are in flight, then started again on the same data.
 * Every change the server acknowledged must reach the receiver; duplicates are allowed.
 */
describe("webhook delivery across a crash", () => {
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  let receiver: Receiver;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-crash-"));
    database = await createProcessDatabase("portico_crash");
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it("delivers every acknowledged event after a kill -9 and a restart", async () => {
    const env = {
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "warn",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
      PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8",
      ...(database ? { DATABASE_URL: database.url } : {}),
    };
    // Until the crash the receiver never answers a delivery, so every notification is either
    // waiting or in flight (leased) when the process dies; only the URL check is answered.
    let crashed = false;
    receiver.respond = (r) =>
      crashed || JSON.parse(r.body).events.length === 0 ? { status: 200 } : { status: 200, delayMs: 120_000 };
    const port = String(await freePort());
    const first = run({ ...env, PORTICO_PORT: port });
    await waitUntilUp(first);
    const call = async (p: string, params: Record<string, unknown>) =>
      json(await fetch(`${first.base}${p}`, { method: "POST", body: form({ f: "json", ...params }) }));
    const { token } = await call("/generateToken", { ...ADMIN, client: "requestip" });
    // Short attempts, so that on PostgreSQL the dead process's leases run out within the test.
    await call("/portals/self/webhooks/settings/update", { notificationTimeOutInSeconds: 2, token });
    const hook = await call("/portals/self/webhooks/createWebhook", {
      name: "crash",
      url: receiver.url,
      changes: "manualChanges",
      events: "/items/add",
      token,
    });
    expect(hook.success, JSON.stringify(hook)).toBe(true);

    const acknowledged: string[] = [];
    let killed = false;
    const worker = async (w: number) => {
      for (let i = 0; !killed; i++) {
        try {
          const r = await call(`/content/users/${ADMIN.username}/addItem`, {
            title: `Crash ${w}.${i}`,
            type: "Web Map",
            token,
          });
          if (r.success) acknowledged.push(r.id as string);
        } catch {
          return; // the server is gone
        }
      }
    };
    const workers = Array.from({ length: 6 }, (_, w) => worker(w));
    while (acknowledged.length < 150) await new Promise((r) => setTimeout(r, 5));
    killed = true;
    first.child.kill("SIGKILL");
    await first.exited;
    await Promise.all(workers);
    expect(receiver.deliveries()).toHaveLength(0);
    crashed = true;

    const second = run({ ...env, PORTICO_PORT: port });
    try {
      await waitUntilUp(second);
      const delivered = () =>
        new Set(
          receiver.deliveries().flatMap((r) => JSON.parse(r.body).events.map((e: { id: string }) => e.id)),
        );
      await receiver.waitFor(() => acknowledged.every((id) => delivered().has(id)), 30_000);
      expect(acknowledged.filter((id) => !delivered().has(id))).toEqual([]);
    } finally {
      await stop(second);
    }
  }, 90_000);
});
