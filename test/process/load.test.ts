import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, engine, form, json } from "../helpers/portico.js";
import { createProcessDatabase, freePort, type Running, run, stop, waitUntilUp } from "../helpers/process.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * A bounded load test: the benchmarks' mixed workload (reads, searches, item writes, sharing,
 * role changes, hosted services, webhook deliveries) against `portico serve` processes on
 * loopback: two nodes of one database on PostgreSQL, one node on SQLite. Every answer must be a
 * success, the webhook backlog must drain, and each node's memory must stay flat.
 *
 * CI runs it for PORTICO_LOAD_SECONDS (default 15; see the memory check for what a short run can
 * judge: 25 s judged no better, and ran beside the streamed-downloads test's memory bound longer);
 * run it for minutes with, e.g.,
 * `PORTICO_LOAD_SECONDS=180 npx vitest run test/process/load.test.ts` (and the PostgreSQL variables).
 * Nothing here judges speed: figures belong in `npm run bench`.
 */
const SECONDS = Number(process.env.PORTICO_LOAD_SECONDS ?? 15);
const NODES = engine === "postgres" ? 2 : 1;
const WORKERS_PER_NODE = 4;
const MB = 1024 * 1024;

type Op = "self" | "member" | "search" | "add" | "update" | "share" | "role" | "service";
/** Relative weights, roughly a portal's day: mostly reads, a steady trickle of changes. */
const MIX: [Op, number][] = [
  ["self", 25],
  ["member", 15],
  ["search", 15],
  ["add", 15],
  ["update", 10],
  ["share", 8],
  ["role", 7],
  ["service", 5],
];

describe(`mixed load on ${NODES} node(s) for ${SECONDS} s`, () => {
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  let receiver: Receiver;
  const nodes: Running[] = [];

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-load-"));
    database = await createProcessDatabase("portico_load");
    receiver = await startReceiver();
  });
  afterAll(async () => {
    for (const n of nodes) if (n.child.exitCode === null) n.child.kill("SIGKILL");
    await receiver?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it(
    "answers every request with a success, drains its webhook backlog, and keeps memory flat",
    async () => {
      const env = {
        PORTICO_DATA_DIR: dataDir,
        PORTICO_LOG_LEVEL: "warn",
        PORTICO_ADMIN_USERNAME: ADMIN.username,
        PORTICO_ADMIN_PASSWORD: ADMIN.password,
        PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8",
        ...(database ? { DATABASE_URL: database.url } : {}),
      };
      for (let i = 0; i < NODES; i++) {
        const node = run({ ...env, PORTICO_PORT: String(await freePort()) });
        nodes.push(node);
        await waitUntilUp(node);
      }
      const [first] = nodes as [Running];
      const origin = (node: Running) => node.base.replace("/sharing/rest", "");
      const post = async (node: Running, p: string, params: Record<string, unknown>) =>
        json(
          await fetch(p.startsWith("/portaladmin") ? `${origin(node)}${p}` : `${node.base}${p}`, {
            method: "POST",
            body: form({ f: "json", ...params }),
          }),
        );
      const get = async (node: Running, p: string, params: Record<string, unknown>) =>
        json(await fetch(`${node.base}${p}?${form({ f: "json", ...params })}`));
      const must = async (what: string, answer: Promise<any>) => {
        const r = await answer;
        if (r.error) throw new Error(`${what}: ${JSON.stringify(r.error)}`);
        return r;
      };

      const { token } = await must(
        "sign in",
        post(first, "/generateToken", { ...ADMIN, client: "requestip" }),
      );
      await must(
        "member",
        post(first, "/portaladmin/security/users/createUser", {
          username: "load_member",
          password: "load-member-pw",
          firstname: "Load",
          lastname: "Member",
          email: "member@example.com",
          role: "org_user",
          token,
        }),
      );
      const { token: memberToken } = await must(
        "member sign in",
        post(first, "/generateToken", {
          username: "load_member",
          password: "load-member-pw",
          client: "requestip",
        }),
      );
      const group = (
        await must("group", post(first, "/community/createGroup", { title: "load", access: "org", token }))
      ).group.id as string;
      await must(
        "webhook",
        post(first, "/portals/self/webhooks/createWebhook", {
          name: "load",
          url: receiver.url,
          changes: "manualChanges",
          events: "/items",
          token,
        }),
      );

      const items: string[] = [];
      const counts = new Map<Op, number>();
      const failures: string[] = [];
      const total = MIX.reduce((sum, [, w]) => sum + w, 0);
      let seed = 12345;
      const random = () => {
        // A fixed sequence (LCG), so a failing mix can be replayed.
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      const pick = (): Op => {
        let r = random() * total;
        for (const [op, w] of MIX) {
          r -= w;
          if (r < 0) return op;
        }
        return "self";
      };
      let roleFlip = 0;
      const perform = async (node: Running, op: Op): Promise<any> => {
        const item = items[Math.floor(random() * items.length)];
        switch (op) {
          case "self":
            return get(node, "/portals/self", { token });
          case "member":
            return get(node, "/community/self", { token: memberToken });
          case "search":
            return get(node, "/search", { q: `owner:${ADMIN.username}`, num: 10, token: memberToken });
          case "add": {
            const r = await post(node, `/content/users/${ADMIN.username}/addItem`, {
              title: `Load ${items.length}`,
              type: "Web Map",
              tags: "load,test",
              text: JSON.stringify({ operationalLayers: [] }),
              token,
            });
            if (r.success) items.push(r.id);
            return r;
          }
          case "update":
            if (!item) return { success: true };
            return post(node, `/content/users/${ADMIN.username}/items/${item}/update`, {
              snippet: `updated ${Date.now()}`,
              token,
            });
          case "share":
            if (!item) return { success: true };
            return post(node, `/content/users/${ADMIN.username}/shareItems`, {
              items: item,
              groups: group,
              org: true,
              token,
            });
          case "role":
            return post(node, "/portals/self/updateUserRole", {
              user: "load_member",
              role: roleFlip++ % 2 === 0 ? "org_publisher" : "org_user",
              token,
            });
          case "service":
            return post(node, `/content/users/${ADMIN.username}/createService`, {
              createParameters: { name: `load_service_${Date.now()}_${Math.floor(random() * 1e9)}` },
              outputType: "featureService",
              token,
            });
        }
      };

      // Memory of every node, read from its own /metrics each second.
      const memory: { at: number; heap: number[]; rss: number[] }[] = [];
      const sample = async () => {
        const texts = await Promise.all(nodes.map(async (n) => (await fetch(`${origin(n)}/metrics`)).text()));
        const value = (text: string, name: string) =>
          Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
        memory.push({
          at: Date.now(),
          heap: texts.map((t) => value(t, "nodejs_heap_size_used_bytes")),
          rss: texts.map((t) => value(t, "process_resident_memory_bytes")),
        });
      };

      const started = Date.now();
      const deadline = started + SECONDS * 1000;
      const sampler = setInterval(() => void sample(), 1000);
      const worker = async (node: Running) => {
        while (Date.now() < deadline) {
          const op = pick();
          try {
            const r = await perform(node, op);
            if (r?.error || r === undefined) failures.push(`${op}: ${JSON.stringify(r?.error)}`);
            counts.set(op, (counts.get(op) ?? 0) + 1);
          } catch (err) {
            failures.push(`${op}: ${(err as Error).message}`);
          }
        }
      };
      await Promise.all(nodes.flatMap((n) => Array.from({ length: WORKERS_PER_NODE }, () => worker(n))));
      clearInterval(sampler);
      await sample();

      expect(failures.slice(0, 10), `${failures.length} failed requests`).toEqual([]);
      for (const [op] of MIX) expect(counts.get(op) ?? 0, `${op} requests`).toBeGreaterThan(0);

      // The webhook backlog drains once the load stops (the gauges are cluster-wide).
      const gauges = async () => {
        const text = await (await fetch(`${origin(first)}/metrics`)).text();
        const v = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]);
        return v("portico_outbox_depth") + v("portico_webhook_pending_notifications");
      };
      const drainBy = Date.now() + 30_000;
      while ((await gauges()) !== 0 && Date.now() < drainBy) await new Promise((r) => setTimeout(r, 200));
      expect(await gauges()).toBe(0);
      expect(receiver.deliveries().length).toBeGreaterThanOrEqual(items.length);

      // Memory flat: the lowest heap of the last third (right after a collection, what is really
      // held) is not far above the lowest of the first third after warm-up. A leak of a few
      // hundred bytes per request grows past the margin within minutes. A short run's thirds
      // (CI's) may see no major collection at all, so their lowest is only an upper bound of
      // what is held: they get twice the early heap (measured in fresh-clone CI runs: 45 -> 97,
      // 48 -> 91 MB at 15 s, 47 -> 89 MB at 25 s, while 25-40 s runs by hand, alone or beside two
      // busy loops, stayed at 42 -> 57 MB or fell), a run of a minute or more keeps one and a half.
      const factor = SECONDS >= 60 ? 1.5 : 2;
      const warm = memory.filter((m) => m.at >= started + 3000);
      const third = Math.max(1, Math.floor(warm.length / 3));
      for (let n = 0; n < NODES; n++) {
        const low = (window: typeof warm) => Math.min(...window.map((m) => m.heap[n] as number));
        const early = low(warm.slice(0, third));
        const late = low(warm.slice(-third));
        expect(
          late,
          `node ${n} heap: ${Math.round(early / MB)} MB early, ${Math.round(late / MB)} MB late`,
        ).toBeLessThan(early * factor + 16 * MB);
      }
      if (process.env.PORTICO_LOAD_SECONDS) {
        // A long run's figures, for whoever runs it by hand (CI's short run stays quiet).
        const requests = [...counts.values()].reduce((a, b) => a + b, 0);
        const mb = (bytes: number | undefined) => `${Math.round((bytes ?? 0) / MB)} MB`;
        console.info(
          `load: ${requests} requests in ${SECONDS} s on ${NODES} node(s), ${failures.length} failed, ` +
            `${receiver.deliveries().length} webhook deliveries; ` +
            nodes
              .map(
                (_, n) =>
                  `node ${n}: heap ${mb(warm[0]?.heap[n])} -> ${mb(warm.at(-1)?.heap[n])}, ` +
                  `RSS ${mb(warm[0]?.rss[n])} -> ${mb(warm.at(-1)?.rss[n])}`,
              )
              .join("; "),
        );
      }
      expect(await Promise.all(nodes.map((n) => stop(n)))).toEqual(nodes.map(() => 0));
    },
    (SECONDS + 120) * 1000,
  );
});
