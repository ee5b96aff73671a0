import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/** `/health` and `/ready`: what load balancers and orchestrators ask (plain HTTP status codes). */
describe("probes", () => {
  let portal: TestPortal;
  beforeAll(async () => {
    portal = await startTestPortal({ env: { PORTICO_CONTEXT_PATH: "/portal" } });
  });
  afterAll(async () => {
    await portal?.stop();
  });

  it("answer at the root and under the context path", async () => {
    for (const base of [portal.portico.address, `${portal.portico.address}/portal`]) {
      const health = await fetch(`${base}/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: "ok" });
      const ready = await fetch(`${base}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({
        status: "ready",
        checks: { database: { ok: true }, migrations: { ok: true } },
      });
    }
  });

  it("/ready says which migration the database lacks", async () => {
    const { db } = portal.portico;
    const table = db.schema ? sql.table(`${db.schema}.kysely_migration`) : sql.table("kysely_migration");
    await db.transaction((trx) => sql`DELETE FROM ${table} WHERE name = '0006-collaboration'`.execute(trx));
    const ready = await fetch(`${portal.portico.address}/ready`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({
      status: "not ready",
      checks: {
        database: { ok: true },
        migrations: { ok: false, detail: "not applied: 0006-collaboration" },
      },
    });
  });
});

it("/ready is 503 when the database cannot be reached, while /health still answers", async () => {
  const portal = await startTestPortal();
  try {
    await portal.portico.db.close();
    const ready = await fetch(`${portal.portico.address}/ready`);
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as any;
    expect(body.checks.database.ok).toBe(false);
    expect(body.checks.database.detail).toMatch(/^unreachable: /);
    expect((await fetch(`${portal.portico.address}/health`)).status).toBe(200);
  } finally {
    // Everything but the database (closed above) stops; closing it a second time may throw.
    await portal.portico.close().catch(() => {});
    await portal.store.destroy();
  }
});
