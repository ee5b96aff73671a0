import { type LoadCase, type LoadResult, type LoadSettings, runLoad } from "./load.js";
import { type Pinning, pinCores } from "./pinning.js";
import { ADMIN, PortalApi } from "./portal-api.js";
import { readCase, writeCase } from "./portal-cases.js";
import type { ServerProcess } from "./processes.js";
import { rate } from "./report.js";
import { createStore, type Engine, type Store } from "./stores.js";

/**
 * Scale-out: the read and write cases against one node, then spread over N nodes of the same
 * PostgreSQL database, in the same run and with the same total connections (split evenly), so the
 * ratio says what adding nodes buys on this machine. Every node is started before the first
 * measurement; the idle ones cost next to nothing while one node is measured alone.
 *
 * On a machine where the nodes, PostgreSQL and the load generator share a few cores, the ratio
 * is bounded by the cores, not by portico: read it with the machine's core count in mind.
 */

export interface NodesFigures {
  nodes: number;
  /** The cores the nodes and the rest ran on, when `--pin` pinned them. */
  pinned: { nodeCores: string; otherCores: string } | undefined;
  single: { reads: LoadResult; writes: LoadResult };
  spread: { reads: LoadResult; writes: LoadResult };
}

export interface NodesDeps {
  start(store: Store): Promise<ServerProcess>;
  seedUsers(api: PortalApi, token: string, count: number): Promise<string[]>;
  measure(c: LoadCase, settings: LoadSettings): Promise<LoadResult>;
  say(line: string): void;
  /** Pin the nodes to half the cores and this process and PostgreSQL to the others (`--pin`). */
  pin: boolean;
}

export async function measureNodes(
  engine: Engine,
  nodes: number,
  users: number,
  settings: LoadSettings,
  deps: NodesDeps,
): Promise<NodesFigures> {
  const store = await createStore(engine);
  const servers: ServerProcess[] = [];
  let pinning: Pinning | undefined;
  try {
    // The first node migrates and creates the administrator; the others join the database.
    servers.push(await deps.start(store));
    for (let i = 1; i < nodes; i++) servers.push(await deps.start(store));
    const first = servers[0] as ServerProcess;
    const api = new PortalApi(first.url);
    const token = await api.signIn(ADMIN.username, ADMIN.password);
    const pool = await deps.seedUsers(api, token, users);
    deps.say(`  ${nodes} nodes of one ${engine.name} database up; ${pool.length} users in the write pool`);
    if (deps.pin) {
      pinning = pinCores();
      for (const s of servers) pinning.pinNode(s.pid);
      deps.say(
        `  pinned: the ${nodes} nodes on core(s) ${pinning.nodeCores}; the load generator and PostgreSQL on core(s) ${pinning.otherCores}`,
      );
    }

    const single = {
      reads: await deps.measure(
        { ...readCase(engine, first.url, token), name: `portals/self GET, 1 node`, serverPid: first.pid },
        settings,
      ),
      writes: await deps.measure(
        {
          ...writeCase(engine, first.url, token, pool),
          name: `updateUserRole POST, 1 node`,
          serverPid: first.pid,
        },
        settings,
      ),
    };
    // The token issued by the first node is used on all of them; each node's writes rotate over
    // its own slice of the pool, so no two requests in flight name the same user.
    const slices = servers.map((_, i) => pool.filter((_, j) => j % nodes === i));
    const spread = {
      reads: await spreadLoad(
        `portals/self GET, ${nodes} nodes`,
        servers.map((s) => ({ ...readCase(engine, s.url, token), serverPid: s.pid })),
        settings,
        deps,
      ),
      writes: await spreadLoad(
        `updateUserRole POST, ${nodes} nodes`,
        servers.map((s, i) => ({
          ...writeCase(engine, s.url, token, slices[i] as string[]),
          serverPid: s.pid,
        })),
        settings,
        deps,
      ),
    };
    const pinned = pinning ? { nodeCores: pinning.nodeCores, otherCores: pinning.otherCores } : undefined;
    return { nodes, pinned, single, spread };
  } finally {
    pinning?.release();
    for (const s of servers.reverse()) await s.stop();
    await store.destroy();
  }
}

/** One load generator per node, run at once with the connections split between them; summed. */
async function spreadLoad(
  name: string,
  cases: LoadCase[],
  settings: LoadSettings,
  deps: NodesDeps,
): Promise<LoadResult> {
  const per = { ...settings, connections: Math.max(1, Math.round(settings.connections / cases.length)) };
  const results = await Promise.all(cases.map((c) => runLoad(c, per)));
  const sum = (pick: (r: LoadResult) => number) => results.reduce((total, r) => total + pick(r), 0);
  const total: LoadResult = {
    name,
    rps: sum((r) => r.rps),
    // Percentiles do not add up; the slowest node's are the honest summary.
    p50: Math.max(...results.map((r) => r.p50)),
    p99: Math.max(...results.map((r) => r.p99)),
    answers: sum((r) => r.answers),
    errors: sum((r) => r.errors),
    non2xx: sum((r) => r.non2xx),
    rejected: sum((r) => r.rejected),
    samples: results.flatMap((r) => r.samples).slice(0, 3),
    // The nodes' CPU time together, per answer of all of them.
    cpuUsPerAnswer: results.some((r) => r.cpuUsPerAnswer === undefined)
      ? undefined
      : sum((r) => (r.cpuUsPerAnswer as number) * r.answers) /
        Math.max(
          1,
          sum((r) => r.answers),
        ),
  };
  deps.say(
    `  ${name.padEnd(34)} ${rate(total.rps).padStart(7)} req/s  (per node: ${results
      .map((r) => rate(r.rps))
      .join(", ")})  errors ${total.errors}  non-2xx ${total.non2xx}  rejected ${total.rejected}${
      total.cpuUsPerAnswer === undefined ? "" : `  nodes' CPU ${Math.round(total.cpuUsPerAnswer)} µs/answer`
    }`,
  );
  return total;
}
