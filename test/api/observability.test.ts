import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPortico } from "../../src/app.js";
import { openDatabase } from "../../src/db/database.js";
import { Metrics } from "../../src/observability/metrics.js";
import {
  ADMIN,
  form,
  json,
  newStore,
  startTestPortal,
  type TestPortal,
  testConfig,
} from "../helpers/portico.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

const hooks = "/portals/self/webhooks";

/** The samples of one metric in a Prometheus text exposition, as label text → value. */
function samples(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match) out.set(match[1] ?? "", Number(match[2]));
  }
  return out;
}

describe("metrics", () => {
  let portal: TestPortal;
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
    portal = await startTestPortal({ env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8" } });
  });
  afterAll(async () => {
    await portal?.stop();
    await receiver?.close();
  });

  it("counts requests by route and outcome, times them, and reports deliveries, the outbox and sync jobs", async () => {
    const hook = await portal.post(
      `${hooks}/createWebhook`,
      { name: "metrics", url: receiver.url, changes: "manualChanges", events: "/items/add" },
      portal.adminToken,
    );
    expect(hook.success, JSON.stringify(hook)).toBe(true);
    for (let i = 0; i < 3; i++) {
      const r = await portal.post(
        `/content/users/${ADMIN.username}/addItem`,
        { title: `metered ${i}`, type: "Web Map" },
        portal.adminToken,
      );
      expect(r.success).toBe(true);
    }
    expect((await portal.get("/content/items/doesnotexist", {}, portal.adminToken)).error.code).toBe(400);
    expect((await portal.get("/community/self")).error.code).toBe(499);
    await receiver.waitFor(() => receiver.deliveries().length === 3);

    // Deliveries are counted once their outcome is recorded, just after the receiver answered.
    let text = "";
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${portal.portico.address}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/plain");
      text = await res.text();
      if (samples(text, "portico_webhook_deliveries_total").get('{outcome="delivered"}') === 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const requests = samples(text, "portico_http_requests_total");
    expect(requests.get('{route="items.add",method="POST",outcome="success",code=""}')).toBe(3);
    expect(requests.get('{route="items.get",method="GET",outcome="error",code="400"}')).toBe(1);
    expect(requests.get('{route="community.self",method="GET",outcome="error",code="499"}')).toBe(1);
    const latency = samples(text, "portico_http_request_duration_seconds_count");
    expect(latency.get('{route="items.add",method="POST"}')).toBe(3);
    // The histogram's buckets are cumulative, end with +Inf at the count, and the sum is in seconds.
    const buckets = [...samples(text, "portico_http_request_duration_seconds_bucket")]
      .filter(([labels]) => labels.endsWith(',route="items.add",method="POST"}'))
      .map(([labels, value]) => [/le="([^"]+)"/.exec(labels)?.[1], value] as const);
    expect(buckets.map(([le]) => le)).toEqual([
      ...["0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10"],
      "+Inf",
    ]);
    expect(buckets.map(([, value]) => value)).toEqual(
      buckets.map(([, value]) => value).sort((a, b) => a - b),
    );
    expect(buckets.at(-1)?.[1]).toBe(3);
    const sum = samples(text, "portico_http_request_duration_seconds_sum").get(
      '{route="items.add",method="POST"}',
    );
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(60);
    expect(samples(text, "portico_webhook_deliveries_total").get('{outcome="delivered"}')).toBe(3);
    expect(samples(text, "portico_outbox_depth").get("")).toBe(0);
    expect(samples(text, "portico_webhook_pending_notifications").get("")).toBe(0);
    expect(samples(text, "portico_sync_jobs").get('{state="in_progress"}')).toBe(0);
    expect(samples(text, "process_resident_memory_bytes").get("")).toBeGreaterThan(0);
    expect(text).toMatch(/^portico_info\{version="\d+\.\d+\.\d+",engine="(sqlite|postgres)"\} 1$/m);
    expect(samples(text, "portico_database_connected").get("")).toBe(1);
  });

  it("serves metrics only to the addresses PORTICO_METRICS_ALLOW lists", async () => {
    const closed = await startTestPortal({ env: { PORTICO_METRICS_ALLOW: "10.0.0.0/8" } });
    try {
      const res = await fetch(`${closed.portico.address}/metrics`);
      expect(res.status).toBe(403);
      expect(await res.text()).toContain("PORTICO_METRICS_ALLOW");
    } finally {
      await closed.stop();
    }
  });
});

describe("request ids", () => {
  it("answers with the request id, keeping a sane incoming X-Request-Id and replacing others", async () => {
    const portal = await startTestPortal();
    try {
      const fresh = await fetch(`${portal.api}/info?f=json`);
      expect(fresh.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
      const other = await fetch(`${portal.api}/info?f=json`);
      expect(other.headers.get("x-request-id")).not.toBe(fresh.headers.get("x-request-id"));
      const kept = await fetch(`${portal.api}/info?f=json`, { headers: { "x-request-id": "lb-1234.abc" } });
      expect(kept.headers.get("x-request-id")).toBe("lb-1234.abc");
      const replaced = await fetch(`${portal.api}/info?f=json`, {
        headers: { "x-request-id": "forged id; drop" },
      });
      expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      await portal.stop();
    }
  });

  it("writes one access line per request with its id, and never a password or token", async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const store = newStore();
    const config = testConfig(store, { PORTICO_LOG_LEVEL: "info" });
    const portico = await startPortico({
      config,
      schema: store.schema,
      logger: { stream },
      announce: () => {},
    });
    try {
      const api = `${portico.address}/sharing/rest`;
      const token = (
        await json(
          await fetch(`${api}/generateToken`, {
            method: "POST",
            body: form({ f: "json", ...ADMIN, client: "requestip" }),
          }),
        )
      ).token as string;
      await fetch(`${api}/portals/self?f=json&token=${token}`);
      await fetch(`${api}/content/items/nothing?f=json`, { headers: { "x-request-id": "trace-7" } });
      const served = lines.filter((l) => l.req !== undefined || l.res !== undefined);
      // generateToken, portals/self and the item: one line each, written once answered.
      expect(served).toHaveLength(3);
      for (const line of served) {
        expect(line, JSON.stringify(line)).toMatchObject({
          reqId: expect.any(String),
          req: { method: expect.any(String), url: expect.any(String), remoteAddress: "127.0.0.1" },
          res: { statusCode: 200 },
          responseTime: expect.any(Number),
          msg: "request completed",
        });
      }
      expect(served.filter((l) => l.reqId === "trace-7")).toHaveLength(1);
      const all = JSON.stringify(lines);
      expect(all).not.toContain(ADMIN.password);
      expect(all).not.toContain(token);
    } finally {
      await portico.close();
      await store.destroy();
    }
  });

  it("logs URLs with the values of secret parameters redacted, however their names are written", async () => {
    const lines: Record<string, unknown>[] = [];
    const stream = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const store = newStore();
    const portico = await startPortico({
      config: testConfig(store, { PORTICO_LOG_LEVEL: "info" }),
      schema: store.schema,
      logger: { stream },
      announce: () => {},
    });
    try {
      const api = `${portico.address}/sharing/rest`;
      const signIn = async () =>
        (
          await json(
            await fetch(`${api}/generateToken`, {
              method: "POST",
              body: form({ f: "json", ...ADMIN, client: "requestip" }),
            }),
          )
        ).token as string;
      // The server reads a percent-encoded `token` name as the token: it really is a credential.
      const encoded = await signIn();
      const self = await json(await fetch(`${api}/portals/self?f=json&%74oken=${encoded}`));
      expect(self.user?.username).toBe(ADMIN.username);
      const upper = await signIn();
      await fetch(`${api}/portals/self?f=json&%54%4F%4B%45%4E=${upper}`);
      const revoked = await signIn();
      await fetch(`${api}/oauth2/revokeToken?f=json&auth_token=${revoked}`);
      await fetch(`${api}/info?f=json&client_secret=s3cr3t-client&code=s3cr3t-code&refresh_token=s3cr3t-rt`);
      await fetch(`${api}/info?f=json&new%50assword=s3cr3t-new&oldPassword=s3cr3t-old`);

      const urls = lines
        .map((l) => (l.req as { url?: string } | undefined)?.url)
        .filter((u): u is string => u !== undefined);
      expect(urls).toContain("/sharing/rest/portals/self?f=json&%74oken=[REDACTED]");
      expect(urls).toContain("/sharing/rest/portals/self?f=json&%54%4F%4B%45%4E=[REDACTED]");
      expect(urls).toContain("/sharing/rest/oauth2/revokeToken?f=json&auth_token=[REDACTED]");
      expect(urls).toContain(
        "/sharing/rest/info?f=json&client_secret=[REDACTED]&code=[REDACTED]&refresh_token=[REDACTED]",
      );
      expect(urls).toContain("/sharing/rest/info?f=json&new%50assword=[REDACTED]&oldPassword=[REDACTED]");
      const all = JSON.stringify(lines);
      for (const secret of [encoded, upper, revoked, "s3cr3t"]) expect(all).not.toContain(secret);
    } finally {
      await portico.close();
      await store.destroy();
    }
  });
});

describe("graceful stop", () => {
  it("hands back a webhook attempt still in flight after the grace period; the next start sends it", async () => {
    const receiver = await startReceiver();
    const store = newStore();
    const env = { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8", PORTICO_SHUTDOWN_GRACE_SECONDS: "1" };
    let hanging = true;
    receiver.respond = (r) =>
      hanging && JSON.parse(r.body).events.length > 0 ? { status: 200, delayMs: 60_000 } : { status: 200 };
    let portal = await startTestPortal({ store, keepStore: true, env });
    try {
      await portal.post(`${hooks}/settings/update`, { notificationTimeOutInSeconds: 120 }, portal.adminToken);
      const hook = await portal.post(
        `${hooks}/createWebhook`,
        { name: "stop", url: receiver.url, changes: "manualChanges", events: "/items/add" },
        portal.adminToken,
      );
      expect(hook.success, JSON.stringify(hook)).toBe(true);
      await portal.post(
        `/content/users/${ADMIN.username}/addItem`,
        { title: "in flight", type: "Web Map" },
        portal.adminToken,
      );
      const hasEvents = (r: { body: string }) => JSON.parse(r.body).events.length > 0;
      await receiver.waitFor(() => receiver.arrived.filter(hasEvents).length === 1);

      // The attempt hangs (its timeout is 120 s, its lease longer); stopping cuts it off after 1 s.
      await portal.portico.close();
      const db = await openDatabase({
        databaseUrl: testConfig(store).databaseUrl,
        dataDir: store.dataDir,
        schema: store.schema,
      });
      try {
        const rows = await db.kysely.selectFrom("notifications").selectAll().execute();
        expect(rows).toHaveLength(1);
        // Handed back: due now, with no attempt counted against it.
        expect(rows[0]).toMatchObject({ status: "pending", lease_until: 0, attempts: 0, total_attempts: 0 });
        expect(await db.kysely.selectFrom("notification_attempts").selectAll().execute()).toHaveLength(0);
        // The cluster-wide gauges read the database, whatever node serves them: with no engine
        // running, the handed-back notification waits and an undispatched event is counted.
        const metrics = new Metrics(db, { engine: db.engine, version: "test" });
        await db.transaction((trx) => trx.updateTable("events").set({ dispatched: 0 }).execute());
        const text = (await metrics.text()).body;
        expect(samples(text, "portico_webhook_pending_notifications").get("")).toBe(1);
        expect(samples(text, "portico_outbox_depth").get("")).toBeGreaterThanOrEqual(1);
        await db.transaction((trx) => trx.updateTable("events").set({ dispatched: 1 }).execute());
      } finally {
        await db.close();
      }

      hanging = false;
      portal = await startTestPortal({ store, keepStore: true, env });
      await receiver.waitFor(() => receiver.arrived.filter(hasEvents).length === 2);
      const [first, second] = receiver.arrived.filter(hasEvents);
      expect(second?.headers["webhook-id"]).toBe(first?.headers["webhook-id"]);
    } finally {
      await portal.stop();
      await store.destroy();
      await receiver.close();
    }
  });
});
