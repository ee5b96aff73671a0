import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import SQLite from "better-sqlite3";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { form, json } from "../helpers/portico.js";
import { createProcessDatabase, freePort, MAIN, run, stop, waitUntilUp } from "../helpers/process.js";

/**
 * The server as an operator runs it: `node dist/src/cli/main.js serve` (what `npm start` runs),
 * configured only through the environment and flags. `npm test` builds dist/ first.
 */

describe("portico serve", () => {
  let dataDir: string;
  let databaseUrl: string | undefined;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  const baseEnv = (): Record<string, string> => ({
    PORTICO_DATA_DIR: dataDir,
    PORTICO_LOG_LEVEL: "info",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  });

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), "run `npm run build` first (npm test does)").toBe(true);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-cli-"));
    database = await createProcessDatabase("portico_cli");
    databaseUrl = database?.url;
  });
  afterAll(async () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it("creates the first administrator with a password printed once, keeps data across restarts, and never logs secrets", async () => {
    const port = String(await freePort());
    const first = run({ ...baseEnv(), PORTICO_PORT: port });
    await waitUntilUp(first);
    const printed = /username: (\S+)\n\s+password: (\S+)/.exec(first.output());
    expect(printed, first.output()).not.toBeNull();
    const [, username, password] = printed as RegExpExecArray;

    const tokenAnswer = await json(
      await fetch(`${first.base}/generateToken`, {
        method: "POST",
        body: form({ username, password, client: "requestip", f: "json" }),
      }),
    );
    const token = tokenAnswer.token as string;
    expect(token).toBeTypeOf("string");
    const update = await json(
      await fetch(`${first.base}/portals/self/update?token=${token}`, {
        method: "POST",
        body: form({ name: "Persistent Org", f: "json" }),
      }),
    );
    expect(update.success).toBe(true);
    expect(await stop(first)).toBe(0);
    // Neither the password nor the token may appear in the logs (the password only in the banner).
    const logs = first.output().replace(/password: \S+/, "");
    expect(logs).not.toContain(password);
    expect(logs).not.toContain(token);
    expect(logs).toContain("[REDACTED]");

    const second = run({ ...baseEnv(), PORTICO_PORT: port });
    await waitUntilUp(second);
    expect(second.output()).not.toContain("password:");
    const self = await json(await fetch(`${second.base}/portals/self?f=json&token=${token}`));
    expect(self.name).toBe("Persistent Org");
    expect(self.user.username).toBe(username);
    expect(await stop(second)).toBe(0);
  });

  it("writes one access line per request, every one of them, when stopped right after serving", async () => {
    const r = run({ ...baseEnv(), PORTICO_PORT: String(await freePort()) });
    await waitUntilUp(r);
    // Lines go out asynchronously, gathered while a write is under way; the last ones may still be
    // buffered when the signal arrives, and must be written as the process exits.
    const count = 300;
    for (let i = 0; i < count; i += 30) {
      await Promise.all(
        Array.from({ length: 30 }, async (_, j) => (await fetch(`${r.base}/info?f=json&n=${i + j}`)).text()),
      );
    }
    expect(await stop(r)).toBe(0);
    const lines = r
      .output()
      .split("\n")
      .filter((line) => line.includes("&n="))
      .map((line) => JSON.parse(line));
    expect(lines.map((line) => Number(/&n=(\d+)$/.exec(line.req.url)?.[1])).sort((a, b) => a - b)).toEqual([
      ...Array(count).keys(),
    ]);
    for (const line of lines) {
      expect(line).toMatchObject({
        level: 30,
        reqId: expect.any(String),
        req: { method: "GET", remoteAddress: "127.0.0.1" },
        res: { statusCode: 200 },
        responseTime: expect.any(Number),
        msg: "request completed",
      });
    }
    expect(r.output()).toContain("shutting down");
  });

  it("stops cleanly on a SIGTERM that arrives while it is still starting", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-cli-early-"));
    const db = await createProcessDatabase("portico_cli_early");
    try {
      const r = run({
        PORTICO_DATA_DIR: dir,
        PORTICO_LOG_LEVEL: "info",
        PORTICO_PORT: String(await freePort()),
        ...(db ? { DATABASE_URL: db.url } : {}),
      });
      // The first administrator's banner is printed during start-up, before the server listens.
      for (let waited = 0; !r.output().includes("created the first administrator"); waited += 20) {
        if (waited > 30_000 || r.child.exitCode !== null) throw new Error(`no banner: ${r.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      r.child.kill("SIGTERM");
      expect(await r.exited).toBe(0);
      expect(r.output()).toContain("shutting down");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await db?.drop();
    }
  });

  it("takes flags over environment variables", async () => {
    const envPort = String(await freePort());
    const flagPort = String(await freePort());
    const r = run({ ...baseEnv(), PORTICO_PORT: envPort, PORTICO_CONTEXT_PATH: "/ignored" }, [
      "--port",
      flagPort,
      "--context-path",
      "/portal",
    ]);
    const info = { ...r, base: `http://127.0.0.1:${flagPort}/portal/sharing/rest` };
    await waitUntilUp(info);
    const answer = await json(await fetch(`${info.base}/info?f=json`));
    expect(answer.authInfo.tokenServicesUrl).toBe(
      `http://127.0.0.1:${flagPort}/portal/sharing/rest/generateToken`,
    );
    expect(await stop(r)).toBe(0);
  });

  it.each([
    ["PORTICO_PORT", "seventy"],
    ["PORTICO_PUBLIC_URL", "ftp://example.com"],
    ["PORTICO_CONTEXT_PATH", "/bad path"],
    ["DATABASE_URL", "mysql://localhost/db"],
    ["PORTICO_OUTBOUND_ALLOW", "10.0.0.0/99"],
    ["PORTICO_ADMIN_USERNAME", "ab"],
  ])("stops with a message naming %s when it is invalid", async (name, value) => {
    const r = run({
      ...baseEnv(),
      PORTICO_PORT: "0",
      PORTICO_ADMIN_USERNAME: "cli_admin",
      PORTICO_ADMIN_PASSWORD: "long-enough-pw",
      [name]: value,
    });
    expect(await r.exited).toBe(2);
    expect(r.output()).toContain(`invalid setting ${name}`);
  });
});

describe("portico doctor", () => {
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  const env = (): Record<string, string> => ({
    PORTICO_DATA_DIR: dataDir,
    PORTICO_LOG_LEVEL: "warn",
    PORTICO_ADMIN_USERNAME: "doctor_admin",
    PORTICO_ADMIN_PASSWORD: "doctor-password",
    ...(database ? { DATABASE_URL: database.url } : {}),
  });
  const doctor = (extra: Record<string, string> = {}) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      execFile(
        process.execPath,
        [MAIN, "doctor"],
        { env: { PATH: process.env.PATH ?? "", ...env(), ...extra } },
        (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
  /** Runs one statement on the deployment's database, as an operator's mistake would. */
  const tamper = async (statement: string) => {
    if (database) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      await client.query(statement).finally(() => client.end());
    } else {
      const db = new SQLite(path.join(dataDir, "portico.sqlite"));
      db.exec(statement);
      db.close();
    }
  };

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-doctor-"));
    database = await createProcessDatabase("portico_doctor");
  });
  afterAll(async () => {
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it("checks a deployment before its first start, while it serves, and after damage, changing nothing", async () => {
    const fresh = await doctor();
    expect(fresh.code, fresh.out).toBe(0);
    expect(fresh.out).toMatch(
      /^warn {2}(database|data directory|migrations): .*(does not exist yet|is empty)/m,
    );
    // A new database of a server that has PostGIS: serve will create the extension.
    if (database)
      expect(fresh.out).toMatch(/^ok {4}PostGIS: [\d.]+ is on the server but not in this database/m);

    const server = run({ ...env(), PORTICO_PORT: String(await freePort()) });
    await waitUntilUp(server);
    try {
      const healthy = await doctor();
      expect(healthy.code, healthy.out).toBe(0);
      expect(healthy.out).toMatch(/^ok {4}migrations: all \d+ applied$/m);
      expect(healthy.out).toMatch(/^ok {4}administrators: 1 enabled$/m);
      expect(healthy.out).toMatch(/^ok {4}webhooks: outbox: 0 events waiting; no overdue notification$/m);
      if (database) {
        expect(healthy.out).toMatch(/^ok {4}clock: within \d+ ms of the database's$/m);
        expect(healthy.out).toMatch(
          /^ok {4}PostGIS: [\d.]+ \(schema public\), used by hosted feature layers$/m,
        );
      } else expect(healthy.out).toContain("(a portico process is serving it)");
      expect(healthy.out).not.toContain("FAIL");
      // Doctor changed nothing: the server still serves.
      expect((await json(await fetch(`${server.base}/info?f=json`))).owningSystemUrl).toBeDefined();
    } finally {
      expect(await stop(server)).toBe(0);
    }

    await tamper("DELETE FROM kysely_migration WHERE name = '0006-collaboration'");
    const behind = await doctor();
    expect(behind.code).toBe(1);
    expect(behind.out).toMatch(/^FAIL {2}migrations: not applied: 0006-collaboration; /m);

    await tamper(
      "INSERT INTO kysely_migration (name, timestamp) VALUES ('0006-collaboration', '2026-01-01')",
    );
    await tamper("INSERT INTO kysely_migration (name, timestamp) VALUES ('9999-future', '2026-01-01')");
    await tamper("UPDATE users SET disabled = 1");
    const damaged = await doctor({ PORTICO_HOST: "0.0.0.0" });
    expect(damaged.code).toBe(1);
    expect(damaged.out).toMatch(/^FAIL {2}migrations: .*9999-future.*newer portico/m);
    expect(damaged.out).toMatch(/^FAIL {2}administrators: no enabled administrator/m);
    expect(damaged.out).toMatch(/^warn {2}public URL: PORTICO_PUBLIC_URL is not set/m);

    const invalid = await doctor({ PORTICO_PUBLIC_URL: "ftp://example.com" });
    expect(invalid.code).toBe(2);
    expect(invalid.out).toMatch(/^FAIL {2}settings: PORTICO_PUBLIC_URL: /m);
  });
});
