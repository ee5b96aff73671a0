import { createHmac, randomBytes } from "node:crypto";
import { sql } from "kysely";
import { Webhook } from "standardwebhooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { recordEvent } from "../../src/events/outbox.js";
import {
  analyzeNotifications,
  claimDue,
  insertWebhook,
  queueNotifications,
} from "../../src/webhooks/webhook.repository.js";
import { engine, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { type Received, type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * Organization webhooks over real HTTP, delivering to real receivers on loopback. Loopback is
 * refused by the address guard unless allowed, so this portal allows 127.0.0.0/8; one test runs a
 * portal without that setting to see the refusal.
 */

let portal: TestPortal;
let receiver: Receiver;
const hooks = "/portals/self/webhooks";

beforeAll(async () => {
  portal = await startTestPortal({ env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8" } });
  receiver = await startReceiver();
}, 60_000);

afterAll(async () => {
  await portal?.stop();
  await receiver?.close();
});

afterEach(async () => {
  receiver.respond = () => ({ status: 200, body: "ok" });
  receiver.received.length = 0;
  receiver.arrived.length = 0;
  // Each test starts with no webhooks, so no other test's subscription delivers into it.
  const list = await portal.get(hooks, { num: 100 }, portal.adminToken);
  for (const w of list.webhooks ?? []) await portal.post(`${hooks}/${w.id}/delete`, {}, portal.adminToken);
  await portal.post(
    `${hooks}/settings/update`,
    { notificationAttempts: 3, notificationTimeOutInSeconds: 10, notificationElapsedTimeInSeconds: 5 },
    portal.adminToken,
  );
});

async function createWebhook(params: Record<string, unknown> = {}) {
  const r = await portal.post(
    `${hooks}/createWebhook`,
    { name: "test hook", url: receiver.url, changes: "allChanges", ...params },
    portal.adminToken,
  );
  if (!r.success) throw new Error(`createWebhook: ${JSON.stringify(r)}`);
  return r.webhook as { id: string; [k: string]: unknown };
}

const payloadOf = (r: Received) => JSON.parse(r.body);
const eventsOf = (rs: Received[]) => rs.flatMap((r) => payloadOf(r).events as any[]);

async function addItem(title: string, extra: Record<string, unknown> = {}) {
  const r = await portal.post(
    "/content/users/admin_user/addItem",
    { title, type: "Web Map", ...extra },
    portal.adminToken,
  );
  if (!r.success) throw new Error(`addItem: ${JSON.stringify(r)}`);
  return r.id as string;
}

describe("webhook API", () => {
  it("creates a webhook with every field of the webhook resource, after checking its URL", async () => {
    const before = Date.now();
    const w = await createWebhook({
      secret: "s3cret",
      changes: "manualChanges",
      events: "/items,/groups/add",
      config: { deactivationPolicy: { numberOfFailures: 3, daysInPast: 2 } },
    });
    expect(w).toMatchObject({
      name: "test hook",
      payloadUrl: receiver.url,
      secret: "s3cret",
      isActive: true,
      events: ["/items", "/groups/add"],
      config: { deactivationPolicy: { numberOfFailures: 3, daysInPast: 2 } },
    });
    expect(w.id).toMatch(/^[0-9a-f]{32}$/);
    expect(typeof w.accountId).toBe("string");
    expect(typeof w.ownerId).toBe("string");
    expect(w.modifiedId).toBe(w.ownerId);
    expect(w.created).toBeGreaterThanOrEqual(before);
    expect(w.modified).toBe(w.created);
    // The check is a signed request with no events.
    const check = receiver.received.at(-1) as Received;
    expect(payloadOf(check).events).toEqual([]);
    expect(check.headers["webhook-signature"]).toMatch(/^v1,/);

    expect(await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).toEqual(w);
    const list = await portal.get(hooks, {}, portal.adminToken);
    expect(list).toMatchObject({ total: 1, start: 1, nextStart: -1 });
    expect(list.webhooks[0].id).toBe(w.id);
  });

  it("refuses bad parameters naming them, and writes nothing", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ name: undefined }, "name"],
      [{ url: undefined }, "url"],
      [{ url: "ftp://example.com/x" }, "url"],
      [{ url: "not a url" }, "url"],
      [{ changes: "someChanges" }, "changes"],
      [{ changes: "manualChanges" }, "events"],
      [{ changes: "manualChanges", events: "/items,/nonsense" }, "events"],
      [{ changes: "manualChanges", events: "/items/frobnicate" }, "events"],
      [{ changes: "manualChanges", events: "/groups/not-an-id/update" }, "events"],
      [{ config: "{not json" }, "config"],
      [{ config: { deactivationPolicy: { numberOfFailures: 0, daysInPast: 1 } } }, "config"],
      [{ config: { deactivationPolicy: { numberOfFailures: 2, daysInPast: 1.5 } } }, "config"],
      [{ config: { somethingElse: true } }, "config"],
      [{ secret: "whsec_!!!" }, "secret"],
    ];
    for (const [params, name] of cases) {
      const r = await portal.post(
        `${hooks}/createWebhook`,
        { name: "bad", url: receiver.url, changes: "allChanges", ...params },
        portal.adminToken,
      );
      expect(r.error?.code, JSON.stringify(params)).toBe(400);
      expect(JSON.stringify(r.error), JSON.stringify(params)).toContain(`'${name}'`);
    }
    const unknown = await portal.post(
      `${hooks}/createWebhook`,
      { name: "bad", url: receiver.url, changes: "manualChanges", events: "/items,/nonsense" },
      portal.adminToken,
    );
    expect(JSON.stringify(unknown.error)).toContain("/nonsense");
    expect((await portal.get(hooks, {}, portal.adminToken)).total).toBe(0);
  });

  it("fails creation with the reason when the payload URL does not answer 2xx", async () => {
    receiver.respond = () => ({ status: 404, body: "no such hook" });
    const r = await portal.post(
      `${hooks}/createWebhook`,
      { name: "x", url: receiver.url, changes: "allChanges" },
      portal.adminToken,
    );
    expect(r.error.code).toBe(400);
    expect(JSON.stringify(r.error)).toContain("HTTP 404");
    const closed = await portal.post(
      `${hooks}/createWebhook`,
      { name: "x", url: "http://127.0.0.1:1/hook", changes: "allChanges" },
      portal.adminToken,
    );
    expect(JSON.stringify(closed.error)).toContain("ECONNREFUSED");
    expect((await portal.get(hooks, {}, portal.adminToken)).total).toBe(0);
  });

  it("is for administrators only", async () => {
    const user = await portal.addUser("hook_member", "org_publisher");
    expect((await portal.get(hooks, {}, user.token)).error.code).toBe(403);
    const r = await portal.post(
      `${hooks}/createWebhook`,
      { name: "x", url: receiver.url, changes: "allChanges" },
      user.token,
    );
    expect(r.error.code).toBe(403);
    expect((await portal.get(hooks, {})).error.code).toBe(499);
    expect((await portal.get(`${hooks}/settings`, {}, user.token)).error.code).toBe(403);
  });

  it("updates, deactivates, activates and deletes", async () => {
    const w = await createWebhook();
    const updated = await portal.post(
      `${hooks}/${w.id}/update`,
      { name: "renamed", changes: "manualChanges", events: "/users" },
      portal.adminToken,
    );
    expect(updated.webhook).toMatchObject({ name: "renamed", events: ["/users"], payloadUrl: receiver.url });
    expect(updated.webhook.modified).toBeGreaterThanOrEqual(w.modified as number);
    const bad = await portal.post(`${hooks}/${w.id}/update`, { events: "/bogus" }, portal.adminToken);
    expect(bad.error.code).toBe(400);
    expect((await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).events).toEqual(["/users"]);

    await portal.post(`${hooks}/${w.id}/deactivate`, {}, portal.adminToken);
    expect((await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).isActive).toBe(false);
    await portal.post(`${hooks}/${w.id}/activate`, {}, portal.adminToken);
    expect((await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).isActive).toBe(true);
    expect((await portal.post(`${hooks}/${w.id}/delete`, {}, portal.adminToken)).success).toBe(true);
    expect((await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).error.code).toBe(400);
  });

  it("reads and validates the delivery settings", async () => {
    expect(await portal.get(`${hooks}/settings`, {}, portal.adminToken)).toEqual({
      notificationAttempts: 3,
      notificationTimeOutInSeconds: 10,
      notificationElapsedTimeInSeconds: 5,
    });
    const r = await portal.post(`${hooks}/settings/update`, { notificationAttempts: 5 }, portal.adminToken);
    expect(r).toMatchObject({ success: true, notificationAttempts: 5, notificationElapsedTimeInSeconds: 5 });
    for (const [name, value] of [
      ["notificationAttempts", 6],
      ["notificationTimeOutInSeconds", 61],
      ["notificationElapsedTimeInSeconds", 0],
      ["notificationAttempts", "three"],
    ] as const) {
      const bad = await portal.post(`${hooks}/settings/update`, { [name]: value }, portal.adminToken);
      expect(bad.error.code).toBe(400);
      expect(JSON.stringify(bad.error)).toContain(name);
    }
    expect((await portal.get(`${hooks}/settings`, {}, portal.adminToken)).notificationAttempts).toBe(5);
  });
});

describe("webhook delivery", () => {
  it("delivers a signed payload that standardwebhooks and a plain HMAC both verify", async () => {
    const secret = "a secret with ünïcode";
    const w = await createWebhook({ secret });
    const itemId = await addItem("Signed");
    await receiver.waitFor(() => receiver.deliveries().length >= 1);
    const [delivery] = receiver.deliveries() as [Received];
    const payload = payloadOf(delivery);
    expect(payload.info).toMatchObject({ webhookId: w.id, webhookName: "test hook" });
    expect(payload.info.portalURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+/);
    expect(payload.events).toEqual([
      {
        userId: expect.any(String),
        username: "admin_user",
        when: expect.any(Number),
        operation: "add",
        source: "item",
        id: itemId,
        properties: {},
      },
    ]);
    expect(delivery.headers["content-type"]).toBe("application/json");
    // Standard Webhooks: the library, given the secret's bytes.
    const verified = new Webhook(Buffer.from(secret, "utf8"), { format: "raw" }).verify(
      delivery.body,
      delivery.headers as Record<string, string>,
    );
    expect(verified).toEqual(payload);
    // The same by hand, and Esri's header.
    const id = delivery.headers["webhook-id"] as string;
    const ts = delivery.headers["webhook-timestamp"] as string;
    const mac = createHmac("sha256", Buffer.from(secret, "utf8"));
    expect(delivery.headers["webhook-signature"]).toBe(
      `v1,${mac.update(`${id}.${ts}.${delivery.body}`).digest("base64")}`,
    );
    expect(delivery.headers["x-esrihook-signature"]).toBe(
      `sha256=${createHmac("sha256", Buffer.from(secret, "utf8")).update(delivery.body).digest("base64")}`,
    );
    // The plain-text secret is sent only when asked for.
    expect(delivery.headers["x-esrihook-secret"]).toBeUndefined();
    const tampered = delivery.body.replace(`"operation":"add"`, `"operation":"delete"`);
    expect(tampered).not.toBe(delivery.body);
    expect(() =>
      new Webhook(Buffer.from(secret, "utf8"), { format: "raw" }).verify(
        tampered,
        delivery.headers as Record<string, string>,
      ),
    ).toThrow();
  });

  it("takes a whsec_ secret as base64 key bytes, and sends the plain secret only when configured", async () => {
    const key = Buffer.from("0123456789abcdef0123456789abcdef");
    const secret = `whsec_${key.toString("base64")}`;
    await createWebhook({ secret, config: { sendSecretHeader: true } });
    await addItem("Whsec");
    await receiver.waitFor(() => receiver.deliveries().length >= 1);
    const [delivery] = receiver.deliveries() as [Received];
    // The library reads the secret as given.
    expect(new Webhook(secret).verify(delivery.body, delivery.headers as Record<string, string>)).toEqual(
      payloadOf(delivery),
    );
    expect(delivery.headers["x-esrihook-secret"]).toBe(secret);
  });

  it("delivers only the events a webhook's trigger URIs cover", async () => {
    const keep = await addItem("Watched");
    const other = await addItem("Ignored");
    receiver.received.length = 0;
    await createWebhook({
      changes: "manualChanges",
      events: `/items/${keep}/update,/groups/add,/users/update`,
    });
    await portal.post(`/content/users/admin_user/items/${other}/update`, { title: "x" }, portal.adminToken);
    await portal.post(`/content/users/admin_user/items/${keep}/update`, { title: "y" }, portal.adminToken);
    await portal.post(`/content/users/admin_user/items/${keep}/delete`, {}, portal.adminToken);
    const group = await portal.post(
      "/community/createGroup",
      { title: "Hooked group", access: "org" },
      portal.adminToken,
    );
    await portal.post(`/community/groups/${group.group.id}/update`, { snippet: "s" }, portal.adminToken);
    await receiver.waitFor(() => receiver.deliveries().length >= 2);
    // Give anything wrongly matched time to arrive.
    await new Promise((r) => setTimeout(r, 500));
    const events = eventsOf(receiver.deliveries()).map((e) => `${e.source}/${e.operation}/${e.id}`);
    expect(events.sort()).toEqual([`group/add/${group.group.id}`, `item/update/${keep}`].sort());
  });

  it("carries each event type's source, operation, object and additional properties", async () => {
    const member = await portal.addUser("hook_payloads");
    const itemId = await addItem("Shared around");
    const group = await portal.post(
      "/community/createGroup",
      { title: "Payload group", access: "org" },
      portal.adminToken,
    );
    const groupId = group.group.id as string;
    receiver.received.length = 0;
    await createWebhook();
    await portal.post(
      `/content/users/admin_user/items/${itemId}/share`,
      { groups: groupId, org: true },
      portal.adminToken,
    );
    await portal.post(`/community/groups/${groupId}/addUsers`, { users: member.username }, portal.adminToken);
    await portal.post(
      "/portals/self/updateUserRole",
      { user: member.username, role: "org_publisher" },
      portal.adminToken,
    );
    const expected = [
      { source: "item", operation: "share", id: itemId },
      { source: "group", operation: "share", id: groupId },
      { source: "group", operation: "addUsers", id: groupId },
      { source: "user", operation: "updateUserRole", id: member.username },
    ];
    await receiver.waitFor(() =>
      expected.every((x) =>
        eventsOf(receiver.deliveries()).some((e) => e.operation === x.operation && e.source === x.source),
      ),
    );
    const find = (source: string, operation: string) =>
      eventsOf(receiver.deliveries()).find((e) => e.source === source && e.operation === operation);
    for (const x of expected)
      expect(find(x.source, x.operation)).toMatchObject({ ...x, username: "admin_user" });
    expect(find("item", "share").properties.sharedToGroups).toEqual(expect.arrayContaining([groupId]));
    expect(find("group", "share").properties.sharedItems).toEqual([{ itemId, itemType: "Web Map" }]);
    expect(find("group", "addUsers").properties).toEqual({ addedUserNames: [member.username] });
    expect(find("user", "updateUserRole").properties).toEqual({ userRoleUpdatedTo: ["org_publisher"] });
  });

  it("retries a failing receiver at the configured interval, and shows every attempt", async () => {
    await portal.post(
      `${hooks}/settings/update`,
      { notificationAttempts: 3, notificationElapsedTimeInSeconds: 1 },
      portal.adminToken,
    );
    const w = await createWebhook();
    let calls = 0;
    receiver.respond = () => (++calls < 3 ? { status: 500, body: "busy" } : { status: 204 });
    await addItem("Retried");
    await receiver.waitFor(() => receiver.deliveries().length >= 3, 15_000);
    const ds = receiver.deliveries();
    expect(new Set(ds.map((d) => d.headers["webhook-id"])).size).toBe(1);
    expect((ds[1] as Received).at - (ds[0] as Received).at).toBeGreaterThanOrEqual(950);
    expect((ds[2] as Received).at - (ds[1] as Received).at).toBeGreaterThanOrEqual(950);
    await waitUntil(async () => (await status(w.id)).WebhookStatus[0]?.status === "delivered");
    const s = await status(w.id);
    expect(s.total).toBe(1);
    const entry = s.WebhookStatus[0];
    expect(entry).toMatchObject({
      isInvoked: true,
      status: "delivered",
      payload: payloadOf(ds[0] as Received),
    });
    expect(entry.attempts.map((a: any) => a.statusCode)).toEqual([500, 500, 204]);
    expect(entry.attempts[0].responseText).toBe("busy");
    expect(entry.attempts[0].durationMs).toBeGreaterThanOrEqual(0);
  }, 20_000);

  it("honours Retry-After over the configured interval", async () => {
    await portal.post(
      `${hooks}/settings/update`,
      { notificationAttempts: 2, notificationElapsedTimeInSeconds: 1 },
      portal.adminToken,
    );
    await createWebhook();
    let calls = 0;
    receiver.respond = () =>
      ++calls === 1 ? { status: 429, headers: { "retry-after": "3" } } : { status: 200 };
    await addItem("Later");
    await receiver.waitFor(() => receiver.deliveries().length >= 2, 15_000);
    const [first, second] = receiver.deliveries() as [Received, Received];
    expect(second.at - first.at).toBeGreaterThanOrEqual(2900);
  }, 20_000);

  it("deactivates at once on 410 Gone", async () => {
    const w = await createWebhook();
    receiver.respond = (r) => (payloadOf(r).events.length > 0 ? { status: 410 } : { status: 200 });
    await addItem("Gone");
    await waitUntil(
      async () => (await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).isActive === false,
    );
    expect(receiver.deliveries()).toHaveLength(1);
  });

  it("deactivates when numberOfFailures notifications fail, and starts a clean count on activate", async () => {
    await portal.post(`${hooks}/settings/update`, { notificationAttempts: 1 }, portal.adminToken);
    const w = await createWebhook({ config: { deactivationPolicy: { numberOfFailures: 2, daysInPast: 1 } } });
    receiver.respond = (r) => (payloadOf(r).events.length > 0 ? { status: 503 } : { status: 200 });
    await addItem("Fail one");
    await waitUntil(async () => (await status(w.id)).WebhookStatus[0]?.status === "failed");
    expect((await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).isActive).toBe(true);
    await addItem("Fail two");
    await waitUntil(
      async () => (await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).isActive === false,
    );
    // Inactive: later events are not delivered.
    const seen = receiver.deliveries().length;
    await addItem("Unseen");
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.deliveries()).toHaveLength(seen);

    // Reactivated with a clean count: one more failure does not deactivate it again.
    await portal.post(`${hooks}/${w.id}/activate`, {}, portal.adminToken);
    await addItem("Fail three");
    await waitUntil(async () => (await status(w.id)).total >= 3);
    await waitUntil(async () => (await status(w.id)).WebhookStatus.every((n: any) => n.status !== "pending"));
    expect((await portal.get(`${hooks}/${w.id}`, {}, portal.adminToken)).isActive).toBe(true);
  });

  it("redelivers one notification, or every failed one since a time", async () => {
    await portal.post(`${hooks}/settings/update`, { notificationAttempts: 1 }, portal.adminToken);
    const w = await createWebhook({
      config: { deactivationPolicy: { numberOfFailures: 100, daysInPast: 1 } },
    });
    const since = Date.now();
    receiver.respond = (r) => (payloadOf(r).events.length > 0 ? { status: 500 } : { status: 200 });
    await addItem("Redo one");
    await addItem("Redo two");
    await waitUntil(async () => {
      const s = await status(w.id);
      return s.total === 2 && s.WebhookStatus.every((n: any) => n.status === "failed");
    });
    receiver.respond = () => ({ status: 200 });
    const [newest] = (await status(w.id)).WebhookStatus;
    const one = await portal.post(
      `${hooks}/${w.id}/redeliver`,
      { notificationId: newest.id },
      portal.adminToken,
    );
    expect(one).toEqual({ success: true, redelivered: 1 });
    await waitUntil(async () => (await status(w.id)).WebhookStatus[0].status === "delivered");
    const redone = receiver.deliveries().at(-1) as Received;
    expect(redone.headers["webhook-id"]).toBe(newest.id);

    const all = await portal.post(`${hooks}/${w.id}/redeliver`, { since }, portal.adminToken);
    expect(all).toEqual({ success: true, redelivered: 1 });
    await waitUntil(async () =>
      (await status(w.id)).WebhookStatus.every((n: any) => n.status === "delivered"),
    );
    const both = await portal.post(`${hooks}/${w.id}/redeliver`, {}, portal.adminToken);
    expect(both.error.code).toBe(400);
    const unknown = await portal.post(
      `${hooks}/${w.id}/redeliver`,
      { notificationId: "nope" },
      portal.adminToken,
    );
    expect(unknown.error.code).toBe(400);
  });

  it("pings with a test event", async () => {
    const w = await createWebhook({ secret: "ping-secret" });
    const r = await portal.post(`${hooks}/${w.id}/ping`, {}, portal.adminToken);
    expect(r.success).toBe(true);
    await receiver.waitFor(() => receiver.deliveries().length >= 1);
    const [delivery] = receiver.deliveries() as [Received];
    expect(delivery.headers["webhook-id"]).toBe(r.notificationId);
    expect(payloadOf(delivery).events[0]).toMatchObject({ source: "webhook", operation: "ping", id: w.id });
  });

  it("records each attempt of a burst on its own: one refused among many fails alone", async () => {
    await portal.post(`${hooks}/settings/update`, { notificationAttempts: 1 }, portal.adminToken);
    const w = await createWebhook();
    // The eighteenth delivery to arrive is refused; the others are taken.
    let arrived = 0;
    let refused = "";
    receiver.respond = (r) => {
      const events = eventsOf([r]);
      if (events.length === 0 || ++arrived !== 18) return { status: 200 };
      refused = events[0].id;
      return { status: 500, body: "not this one" };
    };
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await addItem(`Batch ${i}`));
    // Both answers are recorded, in whatever recording batches they fell.
    await waitUntil(async () => {
      const s = await status(w.id);
      return s.total === 30 && s.WebhookStatus.every((n: any) => n.status !== "pending");
    }, 20_000);
    expect(ids).toContain(refused);
    const s = await status(w.id);
    const byObject = new Map(s.WebhookStatus.map((n: any) => [n.payload.events[0].id, n]));
    for (const id of ids) {
      const n = byObject.get(id) as any;
      expect(n.status).toBe(id === refused ? "failed" : "delivered");
      expect(n.attempts.map((a: any) => a.statusCode)).toEqual([id === refused ? 500 : 200]);
    }
    expect(eventsOf(receiver.deliveries()).filter((e) => e.id === refused).length).toBe(1);
  }, 30_000);

  it("sends each of a burst once while a hanging receiver holds every slot, claimed ones waiting past their lease margin included", async () => {
    // Sixteen attempts hang for longer than the lease's margin (5 s) while more are claimed and
    // held for the slots: those are handed back unattempted, claimed again, and sent once.
    const w = await createWebhook();
    let answered = 0;
    receiver.respond = (r) =>
      payloadOf(r).events.length > 0 && answered++ < 16 ? { status: 200, delayMs: 6000 } : { status: 200 };
    // Sixteen attempts in flight listen to the delivery job's shutdown signal at once: Node warned
    // of a listener leak past ten, where there is none.
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    const ids: string[] = [];
    try {
      for (let i = 0; i < 24; i++) ids.push(await addItem(`Held ${i}`));
      await receiver.waitFor(() => receiver.deliveries().length >= 24, 30_000);
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
    await waitUntil(async () => {
      const s = await status(w.id);
      return s.total === 24 && s.WebhookStatus.every((n: any) => n.status === "delivered");
    }, 15_000);
    const sent = eventsOf(receiver.deliveries()).map((e) => e.id);
    expect([...sent].sort()).toEqual([...ids].sort());
    const s = await status(w.id);
    for (const n of s.WebhookStatus) expect(n.attempts.length).toBe(1);
  }, 60_000);

  it("holds up to three loads of a fast receiver's slots, with never more than 16 attempts in flight", async () => {
    const w = await createWebhook();
    for (let i = 0; i < 16; i++) await addItem(`Pace ${i}`);
    await waitUntil(async () => {
      const s = await status(w.id);
      return s.total === 16 && s.WebhookStatus.every((n: any) => n.status === "delivered");
    }, 15_000);
    // The receiver's pace is now known, and fast. The next sixteen attempts hang while a burst is
    // dispatched: what the node leases meanwhile is those sixteen and what it holds for them.
    let hanging = 0;
    receiver.respond = (r) =>
      payloadOf(r).events.length > 0 && hanging++ < 16 ? { status: 200, delayMs: 4000 } : { status: 200 };
    const leased = async () => {
      const row = await portal.portico.db.kysely
        .selectFrom("notifications")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("webhook_id", "=", w.id)
        .where("status", "=", "pending")
        .where("lease_until", ">", Date.now())
        .executeTakeFirstOrThrow();
      return Number(row.n);
    };
    // Arrived and not answered yet (the sixteen of the pace were answered).
    const inFlight = () =>
      receiver.arrived.filter((r) => payloadOf(r).events.length > 0).length - receiver.deliveries().length;
    let mostLeased = 0;
    let mostInFlight = 0;
    let adding = true;
    // Watched while the burst is added and until the first hanging attempt is answered: till then
    // nothing of this webhook is unrecorded, so every lease is an attempt in flight or a held one.
    const watching = (async () => {
      while (receiver.deliveries().length === 16 && (adding || mostLeased < 64)) {
        mostLeased = Math.max(mostLeased, await leased());
        mostInFlight = Math.max(mostInFlight, inFlight());
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    for (let i = 0; i < 80; i += 8) {
      await Promise.all(Array.from({ length: 8 }, (_, j) => addItem(`Burst ${i + j}`)));
    }
    adding = false;
    await watching;
    // One load held (the depth of a webhook whose pace is unknown) would lease 32 at most.
    expect(mostLeased).toBeGreaterThan(32);
    expect(mostLeased).toBeLessThanOrEqual(64);
    expect(mostInFlight).toBeLessThanOrEqual(16);
    await receiver.waitFor(() => receiver.deliveries().length >= 96, 30_000);
    await waitUntil(async () => {
      const s = await status(w.id);
      return s.total === 96 && s.WebhookStatus.every((n: any) => n.status === "delivered");
    }, 15_000);
    expect(receiver.deliveries()).toHaveLength(96);
  }, 60_000);

  it("keeps delivering to a healthy receiver while another one hangs", async () => {
    await portal.post(
      `${hooks}/settings/update`,
      { notificationAttempts: 1, notificationTimeOutInSeconds: 5 },
      portal.adminToken,
    );
    const slow = await startReceiver();
    try {
      await createWebhook({ url: slow.url, name: "slow" });
      slow.respond = (r) =>
        payloadOf(r).events.length > 0 ? { status: 200, delayMs: 4000 } : { status: 200 };
      await createWebhook({ name: "fast" });
      for (let i = 0; i < 40; i++) await addItem(`Burst ${i}`);
      await receiver.waitFor(() => receiver.deliveries().length >= 40, 15_000);
      // Forty events reach the healthy receiver while the hanging one, at most 16 attempts in
      // flight each held 4 s, has not been sent them all. (No clock is asserted: how long the
      // burst takes depends on the machine.)
      expect(slow.received.filter((r) => payloadOf(r).events.length > 0).length).toBeLessThan(40);
    } finally {
      await slow.close();
    }
  }, 30_000);
});

// PostgreSQL's planner alone: defined only where it runs (SQLite has no statistics to gather).
const describeOnPostgres = engine === "postgres" ? describe : () => {};

describeOnPostgres("webhook delivery on PostgreSQL", () => {
  // Each connection plans the foreign-key check of every recorded attempt once, from the
  // statistics of `notifications` as they stand: gathered while the table was empty or small, a
  // plan that scans the table, run once per attempt of a burst. The dispatcher has them gathered
  // again as the table grows, rather than waiting for autovacuum (off on the CI's server).
  it("has the statistics of notifications gathered once a burst has queued a thousand", async () => {
    const w = await createWebhook();
    const db = portal.portico.db.kysely;
    const analyzed = async () => {
      const { rows } = await sql<{ n: string | number | null }>`
          SELECT analyze_count AS n FROM pg_stat_user_tables
          WHERE relid = 'notifications'::regclass`.execute(db);
      return Number(rows[0]?.n ?? 0);
    };
    // As after an ANALYZE of the whole database before any webhook: statistics of an empty table.
    await sql`ANALYZE notifications`.execute(db);
    const before = await analyzed();
    // A burst of changes written straight into the outbox, as the API records them.
    const now = Date.now();
    const events = Array.from({ length: 1200 }, () => {
      const id = randomBytes(16).toString("hex");
      return {
        id: randomBytes(16).toString("hex"),
        occurred: now,
        source: "item",
        operation: "update",
        object_id: id,
        actor_id: "test",
        actor_username: "admin_user",
        properties: "{}",
        uri: `/items/${id}/update`,
      };
    });
    for (let i = 0; i < events.length; i += 400)
      await db
        .insertInto("events")
        .values(events.slice(i, i + 400))
        .execute();
    const objects = new Set(events.map((e) => e.object_id));
    const burst = () => eventsOf(receiver.deliveries()).filter((e) => objects.has(e.id));
    await receiver.waitFor(() => burst().length >= events.length, 60_000);
    await waitUntil(async () => (await analyzed()) > before, 20_000);
    // Every event of the burst delivered once, and recorded so.
    expect(new Set(burst().map((e) => e.id)).size).toBe(events.length);
    await waitUntil(async () => {
      const left = await db
        .selectFrom("notifications")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("webhook_id", "=", w.id)
        .where("status", "!=", "delivered")
        .executeTakeFirstOrThrow();
      return Number(left.n) === 0;
    }, 20_000);
  }, 90_000);

  // A claim that read and sorted every pending notification cost milliseconds per claim once a
  // burst had queued thousands. The planner walks the due index and stops at the claim's limit
  // only if it expects most due rows to pass the filter on inactive webhooks; as an anti-join on
  // the statistics of one webhook it expected none to.
  it("claims the oldest due notifications without reading every pending one", async () => {
    const w = await createWebhook();
    const db = portal.portico.db.kysely;
    // Due an hour from now, so that the portal's own deliveries leave them to this claim.
    const due = Date.now() + 3_600_000;
    const pending = 3000;
    // Payloads the size of a dispatched event's, so that the table has the pages of a real burst.
    const payload = (i: number) => ({
      info: {
        webhookId: w.id,
        webhookName: "test hook",
        portalURL: "https://portal.example/portal",
        when: due,
      },
      events: [
        {
          userId: randomBytes(16).toString("hex"),
          username: "admin_user",
          when: due,
          operation: "update",
          source: "item",
          id: randomBytes(16).toString("hex"),
          properties: { n: i },
        },
      ],
    });
    await db.transaction().execute((trx) =>
      queueNotifications(
        trx,
        Array.from({ length: pending }, (_, i) => ({
          webhookId: w.id,
          eventId: `e${i}`,
          payload: payload(i),
        })),
        due,
      ),
    );
    // As the dispatcher's ANALYZE in the middle of a burst leaves them.
    await sql`ANALYZE notifications, webhooks`.execute(db);
    const { claimed, read } = await db.transaction().execute(async (trx) => {
      // The backend's counts not yet reported (this transaction's and maybe earlier ones on the
      // same connection): the claim's reads are the difference.
      const counts = async () => {
        const { rows } = await sql<{ seq_scan: string | number; idx_tup_fetch: string | number }>`
          SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
          WHERE relid = 'notifications'::regclass`.execute(trx);
        return { seqScans: Number(rows[0]?.seq_scan ?? 0), fetched: Number(rows[0]?.idx_tup_fetch ?? 0) };
      };
      const before = await counts();
      const claimed = await claimDue(trx, "postgres", {
        now: due,
        leaseMs: 60_000,
        max: 8,
        perWebhook: 32,
        depth: new Map(),
        inFlight: new Map(),
      });
      const after = await counts();
      return {
        claimed,
        read: { seqScans: after.seqScans - before.seqScans, fetched: after.fetched - before.fetched },
      };
    });
    expect(claimed).toHaveLength(8);
    expect(read.seqScans).toBe(0);
    // Four times the limit as candidates, then the chosen ones again: far fewer than are pending.
    expect(read.fetched).toBeLessThan(pending / 10);
  });

  // The dispatcher has nothing to mark while no webhook is active: the insert decides. A webhook
  // created meanwhile must not lose the event of a write that commits after it.
  it("records events already dispatched while no webhook is active, in the write's own transaction", async () => {
    const db = portal.portico.db;
    const objectId = randomBytes(16).toString("hex");
    const dispatched = await db.transaction(async (trx) => {
      await recordEvent(trx, { source: "item", operation: "update", objectId, actor: null });
      // Read before the commit: the dispatcher cannot have marked it.
      const row = await trx
        .selectFrom("events")
        .select("dispatched")
        .where("object_id", "=", objectId)
        .executeTakeFirstOrThrow();
      return row.dispatched;
    });
    expect(dispatched).toBe(1);
  });

  it("delivers the event of a write that commits after a webhook created while it was under way", async () => {
    const db = portal.portico.db;
    const admin = await db.kysely
      .selectFrom("users")
      .select("id")
      .where("username", "=", "admin_user")
      .executeTakeFirstOrThrow();
    const waitingOnEvents = async () => {
      const { rows } = await sql<{ n: string | number }>`
        SELECT count(*) AS n FROM pg_locks
        WHERE relation = 'events'::regclass AND NOT granted`.execute(db.kysely);
      return Number(rows[0]?.n ?? 0);
    };
    let write: Promise<string> | undefined;
    await db.transaction(async (trx) => {
      await insertWebhook(
        trx,
        {
          name: "created during a write",
          payloadUrl: receiver.url,
          secret: "",
          changes: "allChanges",
          events: ["/"],
          config: {},
        },
        admin.id,
        Date.now(),
      );
      // A write whose event is inserted while the webhook is not committed yet: it waits for it.
      write = addItem("Written while a webhook was created");
      await waitUntil(async () => (await waitingOnEvents()) > 0, 10_000);
    });
    const itemId = await (write as Promise<string>);
    await receiver.waitFor(() => eventsOf(receiver.deliveries()).some((e) => e.id === itemId), 20_000);
  });

  it("gives up gathering them while a lock stands in the way, rather than wait for it", async () => {
    const db = portal.portico.db.kysely;
    await db.transaction().execute(async (trx) => {
      // As a VACUUM of the table holds it (ANALYZE's own lock conflicts with it).
      await sql`LOCK TABLE notifications IN SHARE UPDATE EXCLUSIVE MODE`.execute(trx);
      const err = await analyzeNotifications(db).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as { code?: string } | undefined)?.code).toBe("55P03");
    });
    // Nothing left behind on the pool's connections: the next ANALYZE runs.
    await analyzeNotifications(db);
  });
});

describe("address guard", () => {
  it("refuses loopback, private and link-local payload URLs unless PORTICO_OUTBOUND_ALLOW covers them", async () => {
    const guarded = await startTestPortal();
    try {
      for (const url of [
        receiver.url,
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/hook",
        "http://[::1]:8080/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost:9/hook",
        // IPv4-compatible IPv6, site-local, the discard prefix, and IPv4 in hex and decimal.
        "http://[::127.0.0.1]/hook",
        "http://[::169.254.169.254]/latest/meta-data",
        "http://[fec0::1]/hook",
        "http://[100::1]/hook",
        "http://0x7f000001/hook",
        "http://2130706433/hook",
      ]) {
        const r = await guarded.post(
          `${hooks}/createWebhook`,
          { name: "x", url, changes: "allChanges" },
          guarded.adminToken,
        );
        expect(r.error?.code, url).toBe(400);
        expect(JSON.stringify(r.error), url).toMatch(
          /refused: .*(loopback|private|linkLocal|carrierGradeNat|ipv4Compatible|deprecatedSiteLocal|discard)/,
        );
      }
      expect(receiver.received).toHaveLength(0);
    } finally {
      await guarded.stop();
    }
  });
});

async function status(id: string) {
  return portal.get(`${hooks}/${id}/notificationStatus`, { num: 100 }, portal.adminToken);
}

async function waitUntil(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}
