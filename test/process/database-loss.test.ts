import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/collaboration.js";
import { ADMIN, form, json } from "../helpers/portico.js";
import { createProcessDatabase, freePort, type Running, run, waitUntilUp } from "../helpers/process.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * A node that loses its PostgreSQL connections (a restart, a failover, pg_terminate_backend,
 * idle_session_timeout) stays up, answers "database unavailable" and a 503 `/ready` while the
 * server is away, and serves again, caches coherent, once it is back. PostgreSQL only
 * (vitest.config.ts leaves this file out of the SQLite run): an embedded database cannot go away.
 */

const LOST_LOG = "lost the database connection";
const RESTORED_LOG = "database connection restored";

/** `url` with an application_name, by which pg_stat_activity tells this node's connections. */
function withApplicationName(url: string, name: string): string {
  const u = new URL(url);
  u.searchParams.set("application_name", name);
  return u.toString();
}

async function call(node: Running, p: string, params: Record<string, unknown>) {
  return json(await fetch(`${node.base}${p}`, { method: "POST", body: form({ f: "json", ...params }) }));
}

/** Counts the lines of the node's log that carry `message`. */
function logged(node: Running, message: string): number {
  return node
    .output()
    .split("\n")
    .filter((line) => line.includes(message)).length;
}

/** The node's `portico_database_connected` sample, as text. */
async function connectedGauge(origin: string): Promise<string | undefined> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  return /^portico_database_connected (\S+)$/m.exec(text)?.[1];
}

const DATABASE_UNAVAILABLE = { code: 500, messageCode: "GEN_0503" };

describe("pg_terminate_backend on every connection of a node", () => {
  let database: NonNullable<Awaited<ReturnType<typeof createProcessDatabase>>>;
  let admin: pg.Client;
  const nodes: Running[] = [];
  const appA = `portico_a_${randomBytes(4).toString("hex")}`;

  beforeAll(async () => {
    database = (await createProcessDatabase("portico_pgloss")) as typeof database;
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
  });
  afterAll(async () => {
    for (const node of nodes) if (node.child.exitCode === null) node.child.kill("SIGKILL");
    await admin?.end();
    await database?.drop();
  });

  /**
   * Terminates every backend of node A; returns their pids. The call sits in the select list, which
   * is evaluated only for the rows the WHERE kept: SQL does not promise to evaluate `AND` left to
   * right, and this server is shared with other tests.
   */
  async function terminateA(): Promise<number[]> {
    const { rows } = await admin.query<{ pid: number }>(
      "SELECT pid, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity WHERE application_name = $1",
      [appA],
    );
    return rows.map((r) => r.pid);
  }

  /** Waits until node A's change feed listens again on a new connection. */
  async function feedListensAgain(node: Running, terminated: number[]): Promise<void> {
    await waitFor("node A's LISTEN connection is back", async () => {
      if (node.child.exitCode !== null) throw new Error(`node A exited: ${node.output()}`);
      const { rows } = await admin.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'",
        [appA],
      );
      return rows.some((r) => !terminated.includes(r.pid));
    });
  }

  it("survives, serves the next requests, and keeps its caches coherent with another node", async () => {
    const env = {
      PORTICO_LOG_LEVEL: "info",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
    };
    const a = run({
      ...env,
      DATABASE_URL: withApplicationName(database.url, appA),
      PORTICO_PORT: String(await freePort()),
    });
    nodes.push(a);
    await waitUntilUp(a);
    const b = run({
      ...env,
      DATABASE_URL: withApplicationName(database.url, `${appA}_b`),
      PORTICO_PORT: String(await freePort()),
    });
    nodes.push(b);
    await waitUntilUp(b);

    const { token } = await call(a, "/generateToken", { ...ADMIN, client: "requestip" });
    const created = await json(
      await fetch(`${a.base.replace("/sharing/rest", "")}/portaladmin/security/users/createUser`, {
        method: "POST",
        body: form({
          f: "json",
          username: "loss_member",
          password: "loss-member-password",
          firstname: "Loss",
          lastname: "Member",
          email: "loss@example.com",
          role: "org_user",
          token,
        }),
      }),
    );
    expect(created.success, JSON.stringify(created)).toBe(true);
    const member = await call(a, "/generateToken", {
      username: "loss_member",
      password: "loss-member-password",
      client: "requestip",
    });
    const roleOnA = async () => (await call(a, "/community/self", { token: member.token })).role;
    /** Changes the member's role on node B and waits until node A, which had it cached, shows it. */
    const changeOnBSeenOnA = async (role: string) => {
      expect(await roleOnA()).not.toBe(role);
      const r = await call(b, "/portals/self/updateUserRole", { user: "loss_member", role, token });
      expect(r.success, JSON.stringify(r)).toBe(true);
      await waitFor(`node A reports ${role}`, async () => (await roleOnA()) === role);
    };
    expect(await roleOnA()).toBe("org_user");

    // While idle: the pool's connections and the LISTEN connection all go at once.
    const idle = await terminateA();
    expect(idle.length).toBeGreaterThanOrEqual(2);
    await feedListensAgain(a, idle);
    for (let i = 0; i < 5; i++) {
      const self = await call(a, "/community/self", { token });
      expect(self.username, JSON.stringify(self)).toBe(ADMIN.username);
    }
    await changeOnBSeenOnA("org_publisher");

    // While a request runs: it waits for a row lock this test holds, and loses its connection.
    const locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
    try {
      await locker.query("BEGIN");
      await locker.query("SELECT id FROM users WHERE username = 'loss_member' FOR UPDATE");
      const running = call(a, "/portals/self/updateUserRole", {
        user: "loss_member",
        role: "org_user",
        token,
      });
      await waitFor("node A's request waits for the lock", async () => {
        const { rows } = await admin.query(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
          [appA],
        );
        return rows.length > 0;
      });
      const busy = await terminateA();
      expect((await running).error).toMatchObject(DATABASE_UNAVAILABLE);
      await locker.query("ROLLBACK");
      await feedListensAgain(a, busy);
    } finally {
      await locker.end();
    }
    // The interrupted change was not made; the next requests succeed.
    expect(await roleOnA()).toBe("org_publisher");
    await changeOnBSeenOnA("org_user");

    expect(a.child.exitCode).toBeNull();
    expect(a.child.signalCode).toBeNull();
    // No outage of the server: the pool's connections were replaced at once, so only the change
    // feed's loss and return were logged, once each per termination.
    await waitFor("the feed's return logged", async () => logged(a, RESTORED_LOG) === 2);
    expect(logged(a, LOST_LOG)).toBe(2);
  }, 90_000);
});

describe("idle_session_timeout on the node's database", () => {
  let database: NonNullable<Awaited<ReturnType<typeof createProcessDatabase>>>;
  let admin: pg.Client;
  let node: Running | undefined;
  const app = `portico_idle_${randomBytes(4).toString("hex")}`;

  beforeAll(async () => {
    database = (await createProcessDatabase("portico_pgidle")) as typeof database;
    admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    await admin.query(
      `ALTER DATABASE ${new URL(database.url).pathname.slice(1)} SET idle_session_timeout = '4s'`,
    );
    // This session started before the setting; it stays unlimited.
  });
  afterAll(async () => {
    if (node && node.child.exitCode === null) node.child.kill("SIGKILL");
    await admin?.end();
    await database?.drop();
  });

  it("keeps the LISTEN connection (and the caches) instead of losing it at every limit", async () => {
    const running = run({
      DATABASE_URL: withApplicationName(database.url, app),
      PORTICO_PORT: String(await freePort()),
      PORTICO_LOG_LEVEL: "info",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
    });
    node = running;
    await waitUntilUp(running);
    const listening = async () =>
      (
        await admin.query<{ pid: number; lived: boolean }>(
          "SELECT pid, now() - backend_start > interval '14 seconds' AS lived FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %'",
          [app],
        )
      ).rows;
    const first = (await listening())[0];
    expect(first).toBeDefined();
    // Outlives three limits: the server ends idle sessions, and this one is idle between pings.
    await waitFor(
      "the LISTEN connection has lived through three limits",
      async () => {
        const rows = await listening();
        if (!rows.some((r) => r.pid === first?.pid)) throw new Error(`it was ended: ${running.output()}`);
        return rows.some((r) => r.pid === first?.pid && r.lived);
      },
      30_000,
    );
    // The pool's own idle connections were ended too; the server answered, so that was no outage.
    expect(logged(running, LOST_LOG)).toBe(0);
    expect(running.child.exitCode).toBeNull();
  }, 60_000);
});

/** The newest PostgreSQL server binaries installed (Debian layout). */
function postgresBin(): string {
  const root = "/usr/lib/postgresql";
  const versions = fs
    .readdirSync(root)
    .filter((v) => fs.existsSync(path.join(root, v, "bin", "pg_ctl")))
    .sort((x, y) => Number(y) - Number(x));
  if (versions.length === 0) throw new Error(`no PostgreSQL server binaries under ${root}`);
  return path.join(root, versions[0] as string, "bin");
}

/**
 * A PostgreSQL cluster of the test's own, on its own port and in a temporary directory, that the
 * test may stop and start; never the shared server other tests use. initdb refuses to run as
 * root, so the cluster belongs to the `postgres` system user when the test runs as root.
 */
class ThrowawayCluster {
  readonly root = fs.mkdtempSync(path.join(os.tmpdir(), "portico-pgcluster-"));
  readonly data = path.join(this.root, "data");
  private readonly bin = postgresBin();

  constructor(readonly port: number) {
    if (process.getuid?.() === 0) {
      const uid = Number(execFileSync("id", ["-u", "postgres"]).toString());
      const gid = Number(execFileSync("id", ["-g", "postgres"]).toString());
      fs.chownSync(this.root, uid, gid);
    }
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private pg(tool: string, args: string[]): void {
    const command = path.join(this.bin, tool);
    // Its messages would go to the test's output; a failure throws with them.
    const quiet = { stdio: ["ignore", "pipe", "pipe"] as ("ignore" | "pipe")[] };
    if (process.getuid?.() === 0) execFileSync("runuser", ["-u", "postgres", "--", command, ...args], quiet);
    else execFileSync(command, args, quiet);
  }

  init(): void {
    this.pg("initdb", ["-D", this.data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]);
  }

  start(): void {
    const options = `-p ${this.port} -k ${this.root} -c listen_addresses=127.0.0.1 -c fsync=off`;
    this.pg("pg_ctl", ["-D", this.data, "-l", path.join(this.root, "log"), "-o", options, "-w", "start"]);
  }

  stop(mode: "fast" | "immediate" = "fast"): void {
    this.pg("pg_ctl", ["-D", this.data, "-m", mode, "-w", "stop"]);
  }

  /** The server's processes: the postmaster and its children (backends, background workers). */
  private processes(): number[] {
    const postmaster = Number(fs.readFileSync(path.join(this.data, "postmaster.pid"), "utf8").split("\n")[0]);
    const children = execFileSync("ps", ["-o", "pid=", "--ppid", String(postmaster)])
      .toString()
      .split("\n")
      .map((line) => Number(line.trim()))
      .filter((pid) => pid > 0);
    return [postmaster, ...children];
  }

  private frozen: number[] = [];

  /**
   * Stops the server's processes without ending them: connections stay open and nothing answers,
   * as when a failover takes the server's address away or its host hangs.
   */
  freeze(): void {
    this.frozen = this.processes();
    for (const pid of this.frozen) process.kill(pid, "SIGSTOP");
  }

  thaw(): void {
    for (const pid of this.frozen.splice(0)) process.kill(pid, "SIGCONT");
  }

  destroy(): void {
    this.thaw();
    try {
      this.stop("immediate");
    } catch {
      // not running
    }
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

describe("a restart of the PostgreSQL server", () => {
  let cluster: ThrowawayCluster;
  let receiver: Receiver;
  let running: Running;
  let origin: string;

  beforeAll(async () => {
    cluster = new ThrowawayCluster(await freePort());
    cluster.init();
    cluster.start();
    receiver = await startReceiver();
    running = run({
      DATABASE_URL: cluster.url,
      PORTICO_PORT: String(await freePort()),
      PORTICO_LOG_LEVEL: "info",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
      PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8",
      // For the frozen server below; far above what any query here takes.
      PORTICO_DATABASE_QUERY_TIMEOUT_SECONDS: "3",
    });
    await waitUntilUp(running);
    origin = running.base.replace("/sharing/rest", "");
  }, 60_000);
  afterAll(async () => {
    if (running && running.child.exitCode === null) running.child.kill("SIGKILL");
    await receiver?.close();
    cluster?.destroy();
  });

  it("leaves the node up: 503 on /ready and 'database unavailable' while it is away, serving again after", async () => {
    const { token } = await call(running, "/generateToken", { ...ADMIN, client: "requestip" });
    const hook = await call(running, "/portals/self/webhooks/createWebhook", {
      name: "restart",
      url: receiver.url,
      changes: "manualChanges",
      events: "/items/add",
      token,
    });
    expect(hook.success, JSON.stringify(hook)).toBe(true);
    const addItem = (title: string) =>
      call(running, `/content/users/${ADMIN.username}/addItem`, { title, type: "Web Map", token });
    const delivered = (id: string) => receiver.waitFor((all) => all.some((r) => r.body.includes(id)), 20_000);
    const before = await addItem("Before the restart");
    expect(before.success, JSON.stringify(before)).toBe(true);
    await delivered(before.id);

    cluster.stop("fast");
    await waitFor("/ready answers 503", async () => (await fetch(`${origin}/ready`)).status === 503);
    const ready = await json(await fetch(`${origin}/ready`));
    // Why, without the database server's address: /ready answers anyone.
    expect(ready.checks.database).toEqual({ ok: false, detail: "unreachable: ECONNREFUSED" });
    expect((await fetch(`${origin}/health`)).status).toBe(200);
    // Searches are never cached: this one needs the database.
    expect((await call(running, "/search", { q: "restart", token })).error).toMatchObject(
      DATABASE_UNAVAILABLE,
    );
    expect((await addItem("During the restart")).error).toMatchObject(DATABASE_UNAVAILABLE);
    await waitFor("the loss logged", async () => logged(running, LOST_LOG) === 1);
    expect(await connectedGauge(origin)).toBe("0");

    cluster.start();
    await waitFor("/ready answers 200", async () => (await fetch(`${origin}/ready`)).status === 200, 30_000);
    const after = await addItem("After the restart");
    expect(after.success, JSON.stringify(after)).toBe(true);
    const found = await call(running, "/search", { q: "restart", token });
    expect(found.results.map((r: { title: string }) => r.title).sort()).toEqual([
      "After the restart",
      "Before the restart",
    ]);
    // The delivery engine kept running through the outage.
    await delivered(after.id);

    await waitFor("the return logged", async () => logged(running, RESTORED_LOG) === 1, 30_000);
    expect(logged(running, LOST_LOG)).toBe(1);
    expect(await connectedGauge(origin)).toBe("1");
    expect(running.child.exitCode).toBeNull();
    expect(running.child.signalCode).toBeNull();
  }, 120_000);

  it("answers 'database unavailable' rather than hanging while the server does not answer at all", async () => {
    const { token } = await call(running, "/generateToken", { ...ADMIN, client: "requestip" });
    // This leaves an idle connection in the pool, which the next request takes.
    expect((await call(running, "/search", { q: "restart", token })).results).toBeDefined();
    cluster.freeze();
    try {
      let hung: NodeJS.Timeout | undefined;
      const answer = await Promise.race([
        call(running, "/search", { q: "restart", token }),
        new Promise((resolve) => {
          hung = setTimeout(() => resolve("no answer after 45 s"), 45_000);
        }),
      ]);
      clearTimeout(hung);
      expect((answer as { error?: unknown }).error ?? answer).toMatchObject(DATABASE_UNAVAILABLE);
      expect((await fetch(`${origin}/ready`)).status).toBe(503);
    } finally {
      cluster.thaw();
    }
    await waitFor("/ready answers 200", async () => (await fetch(`${origin}/ready`)).status === 200, 30_000);
    expect((await call(running, "/search", { q: "restart", token })).results).toBeDefined();
    expect(running.child.exitCode).toBeNull();
  }, 120_000);
});
