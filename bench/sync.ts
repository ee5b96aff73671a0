/**
 * The sync case of `npm run bench`: two portals on loopback, a host and a guest, in a distributed
 * collaboration with one workspace (host sends and receives, guest receives). The host adds
 * 1,000 items with a few KB of data each and shares them to its linked group (setup, not
 * measured); then the guest runs synchronous syncs, each timed from the request to its answer:
 * - the first, which copies all 1,000 items;
 * - after 10 of them change on the host (new title, new data), which moves only those;
 * - with nothing changed, which only compares offers and holdings.
 * Each sync's status must be `completed` with exactly the expected items succeeded.
 */
import { performance } from "node:perf_hooks";
import { postgresCpuMs } from "./load.js";
import { ADMIN, PortalApi } from "./portal-api.js";
import type { ServerProcess } from "./processes.js";
import { rate, seconds } from "./report.js";
import { createStore, type Engine, type Store } from "./stores.js";

export const SYNC = {
  items: 1_000,
  changed: 10,
  /** Bytes of each item's data (GeoJSON text), roughly. */
  dataBytes: 4 * 1024,
  /** Parallel addItem calls while seeding the host. */
  addConcurrency: 4,
  /** Items per shareItems call (the route takes at most 100). */
  shareBatch: 100,
} as const;

export interface SyncRun {
  ms: number;
  succeeded: number;
  /** CPU time (user + system) the guest and the host used during the sync, ms; undefined without /proc. */
  guestCpuMs: number | undefined;
  hostCpuMs: number | undefined;
  /**
   * CPU time of every PostgreSQL server process on this machine during the sync (both portals'
   * databases, and whatever else runs there), ms; undefined on SQLite or without /proc.
   */
  dbCpuMs: number | undefined;
}

export interface SyncFigures {
  engine: Engine;
  /** Milliseconds the host took to add and share the items through the API (setup). */
  seedMs: number;
  first: SyncRun;
  changed: SyncRun;
  unchanged: SyncRun;
}

export const SELF = "/sharing/rest/portals/self";

/** The calls the case makes, as the administrator of one portal. */
export class Admin {
  private constructor(
    readonly origin: string,
    private readonly token: string,
  ) {}

  static async of(server: ServerProcess): Promise<Admin> {
    return new Admin(server.url, await new PortalApi(server.url).signIn(ADMIN.username, ADMIN.password));
  }

  post(path: string, params: Record<string, unknown>, what: string): Promise<any> {
    return this.send("POST", path, params, what);
  }

  get(path: string, params: Record<string, unknown>, what: string): Promise<any> {
    return this.send("GET", path, params, what);
  }

  /** Form parameters as ArcGIS clients send them (objects as JSON); an `error` answer throws. */
  private async send(
    method: "GET" | "POST",
    path: string,
    params: Record<string, unknown>,
    what: string,
  ): Promise<any> {
    const form = new URLSearchParams({ f: "json", token: this.token });
    for (const [key, value] of Object.entries(params)) {
      form.set(key, typeof value === "string" ? value : JSON.stringify(value));
    }
    const res =
      method === "GET"
        ? await fetch(`${this.origin}${path}?${form}`)
        : await fetch(`${this.origin}${path}`, { method, body: form });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${what}: HTTP ${res.status}: ${text.slice(0, 300)}`);
    const answer = JSON.parse(text);
    if (answer.error) throw new Error(`${what}: ${JSON.stringify(answer.error).slice(0, 500)}`);
    return answer;
  }

  /** An item's data, as stored. */
  async data(id: string): Promise<string> {
    const res = await fetch(
      `${this.origin}/sharing/rest/content/items/${id}/data?${new URLSearchParams({ token: this.token })}`,
    );
    const text = await res.text();
    if (res.status !== 200) throw new Error(`item data: HTTP ${res.status}: ${text.slice(0, 300)}`);
    return text;
  }

  async createGroup(title: string): Promise<string> {
    const r = await this.post("/sharing/rest/community/createGroup", { title, access: "org" }, "createGroup");
    return r.group.id as string;
  }
}

export interface Linked {
  collaborationId: string;
  workspaceId: string;
  hostGroup: string;
  guestGroup: string;
}

/**
 * The trust exchange: the host creates the collaboration and its workspace on a new group and
 * invites the guest to receive; the guest accepts and links a group of its own; the host imports
 * the guest's response.
 */
export async function collaborate(host: Admin, guest: Admin): Promise<Linked> {
  const hostGroup = await host.createGroup("bench sync host group");
  const created = await host.post(
    `${SELF}/createCollaboration`,
    {
      name: "bench sync",
      description: "npm run bench",
      workspaceName: "bench workspace",
      portalGroupId: hostGroup,
      accessMode: "sendAndReceive",
      hostContactFirstname: "Bench",
      hostContactLastname: "Host",
      hostContactEmailAddress: "bench@example.com",
    },
    "createCollaboration",
  );
  const collaborationId = created.collaboration.id as string;
  const workspaceId = created.collaboration.workspaceIds[0] as string;
  const invitation = await host.post(
    `${SELF}/collaborations/${collaborationId}/inviteParticipant`,
    {
      guestPortalUrl: guest.origin,
      collaborationWorkspacesParticipantConfigJSON: [{ [workspaceId]: "receive" }],
    },
    "inviteParticipant",
  );
  await guest.post(
    `${SELF}/acceptCollaborationInvitation`,
    { invitationJSON: JSON.stringify(invitation) },
    "acceptCollaborationInvitation",
  );
  const guestGroup = await guest.createGroup("bench sync guest group");
  await guest.post(
    `${SELF}/collaborations/${collaborationId}/workspaces/${workspaceId}/updatePortalGroupLink`,
    { portalGroupId: guestGroup },
    "updatePortalGroupLink",
  );
  const response = await guest.get(
    `${SELF}/collaborations/${collaborationId}/exportInvitationResponse`,
    {},
    "exportInvitationResponse",
  );
  await host.post(
    `${SELF}/collaborations/${collaborationId}/importInvitationResponse`,
    { invitationResponseJSON: JSON.stringify(response) },
    "importInvitationResponse",
  );
  return { collaborationId, workspaceId, hostGroup, guestGroup };
}

/** A GeoJSON FeatureCollection of about `SYNC.dataBytes`, different for each item and revision. */
function geojson(item: number, revision: number): string {
  const features: unknown[] = [];
  let text = "";
  for (let f = 0; text.length < SYNC.dataBytes; f++) {
    const x = -120 + ((item * 7 + f) % 240);
    const y = -60 + ((item * 3 + f * 11) % 120);
    const ring = Array.from({ length: 8 }, (_, k) => [
      Number((x + Math.cos((k * Math.PI) / 4) * 0.01).toFixed(6)),
      Number((y + Math.sin((k * Math.PI) / 4) * 0.01).toFixed(6)),
    ]);
    ring.push(ring[0] as number[]);
    features.push({
      type: "Feature",
      properties: { item, revision, feature: f, name: `Feature ${f} of bench item ${item}` },
      geometry: { type: "Polygon", coordinates: [ring] },
    });
    text = JSON.stringify({ type: "FeatureCollection", features });
  }
  return text;
}

const addPath = `/sharing/rest/content/users/${ADMIN.username}/addItem`;
const itemPath = (id: string, op: string) =>
  `/sharing/rest/content/users/${ADMIN.username}/items/${id}/${op}`;

/** Adds the items on the host, a few calls at a time, and shares them to the linked group. */
async function seedHost(host: Admin, groupId: string): Promise<string[]> {
  const ids: string[] = new Array(SYNC.items);
  let next = 0;
  const worker = async () => {
    while (next < SYNC.items) {
      const i = next++;
      const r = await host.post(
        addPath,
        {
          title: `Bench sync item ${i}`,
          type: "GeoJson",
          tags: "bench,sync",
          snippet: `Item ${i} of the sync case`,
          text: geojson(i, 0),
        },
        "addItem",
      );
      ids[i] = r.id as string;
    }
  };
  await Promise.all(Array.from({ length: SYNC.addConcurrency }, worker));
  for (let i = 0; i < ids.length; i += SYNC.shareBatch) {
    const batch = ids.slice(i, i + SYNC.shareBatch);
    const r = await host.post(
      `/sharing/rest/content/users/${ADMIN.username}/shareItems`,
      { items: batch.join(","), groups: groupId },
      "shareItems",
    );
    const refused = (r.results as { success: boolean; notSharedWith: string[] }[]).filter(
      (x) => !x.success || x.notSharedWith.length > 0,
    );
    if (refused.length > 0 || r.results.length !== batch.length) {
      throw new Error(`shareItems left items unshared: ${JSON.stringify(refused.slice(0, 3))}`);
    }
  }
  return ids;
}

/**
 * One synchronous sync on the guest, timed from the request to its answer, with the CPU time (user
 * + system, ms) the guest and the host used meanwhile (undefined without /proc) and the job's
 * syncStatus answer.
 */
export async function runTimedSync(
  guest: Admin,
  linked: Linked,
  what: string,
  servers: { guest: ServerProcess; host: ServerProcess },
  databases: readonly string[] = [],
): Promise<{
  ms: number;
  guestCpuMs: number | undefined;
  hostCpuMs: number | undefined;
  dbCpuMs: number | undefined;
  status: any;
}> {
  const workspace = `${SELF}/collaborations/${linked.collaborationId}/workspaces/${linked.workspaceId}`;
  const db = () => (databases.length > 0 ? postgresCpuMs(databases) : undefined);
  const cpuBefore = [servers.guest.cpuMs(), servers.host.cpuMs()];
  const dbBefore = db();
  const started = performance.now();
  const r = await guest.post(`${workspace}/sync`, { async: "false" }, `${what}: sync`);
  const ms = performance.now() - started;
  const cpuAfter = [servers.guest.cpuMs(), servers.host.cpuMs()];
  const dbAfter = db();
  const used = (i: number) => {
    const a = cpuBefore[i];
    const b = cpuAfter[i];
    return a === undefined || b === undefined ? undefined : b - a;
  };
  // Per backend: one that started meanwhile counts from zero, one that ended meanwhile is left
  // out (its time goes with it) rather than subtracting what it had used before.
  let dbCpuMs: number | undefined;
  if (dbBefore && dbAfter) {
    dbCpuMs = 0;
    for (const [pid, after] of dbAfter) dbCpuMs += after - (dbBefore.get(pid) ?? 0);
  }
  const status = await guest.get(`${workspace}/syncStatus/${r.jobId}`, {}, `${what}: syncStatus`);
  return { ms, guestCpuMs: used(0), hostCpuMs: used(1), dbCpuMs, status };
}

/** One synchronous sync on the guest, timed; its status must be completed with `expected` items moved. */
async function timedSync(
  guest: Admin,
  linked: Linked,
  expected: number,
  what: string,
  servers: { guest: ServerProcess; host: ServerProcess },
  databases: readonly string[],
): Promise<SyncRun> {
  const { ms, guestCpuMs, hostCpuMs, dbCpuMs, status } = await runTimedSync(
    guest,
    linked,
    what,
    servers,
    databases,
  );
  const tasks = (status.participantTasks ?? []) as {
    status: string;
    succeededCount: number;
    failedCount: number;
    notProcessedCount: number;
  }[];
  const succeeded = tasks.reduce((sum, t) => sum + t.succeededCount, 0);
  const failed = tasks.reduce((sum, t) => sum + t.failedCount + t.notProcessedCount, 0);
  if (status.status !== "completed" || succeeded !== expected || failed !== 0) {
    throw new Error(
      `${what}: expected a completed sync with ${expected} items succeeded, got status ` +
        `${status.status}, ${succeeded} succeeded, ${failed} failed or not processed: ${status.summary}`,
    );
  }
  return { ms, succeeded, guestCpuMs, hostCpuMs, dbCpuMs };
}

/** The CPU the two portals used in a sync, per item moved (or in all, when none moved). */
export function syncCpu(run: SyncRun): string {
  if (run.guestCpuMs === undefined || run.hostCpuMs === undefined) return "";
  const per = run.succeeded > 0 ? run.succeeded : 1;
  const unit = run.succeeded > 0 ? "/item" : "";
  const f = (v: number) => `${(v / per).toFixed(run.succeeded > 0 ? 2 : 0)} ms${unit}`;
  const db = run.dbCpuMs === undefined ? "" : `, PostgreSQL ${f(run.dbCpuMs)}`;
  return `CPU guest ${f(run.guestCpuMs)}, host ${f(run.hostCpuMs)}${db}`;
}

/** The items shared to a group, by title, read a page at a time. */
async function groupItems(portal: Admin, groupId: string): Promise<Map<string, string>> {
  const byTitle = new Map<string, string>();
  for (let start = 1; ; ) {
    const r = await portal.get(
      `/sharing/rest/content/groups/${groupId}`,
      { start, num: 100 },
      "group content",
    );
    for (const item of r.items as { id: string; title: string }[]) byTitle.set(item.title, item.id);
    if (r.nextStart === -1 || r.nextStart === undefined || r.items.length === 0) return byTitle;
    start = r.nextStart;
  }
}

/** Checks, after the timed syncs, that the guest's group holds every item as the host has it now. */
async function checkCopies(guest: Admin, groupId: string, changed: readonly number[]) {
  const copies = await groupItems(guest, groupId);
  const changedSet = new Set(changed);
  for (let i = 0; i < SYNC.items; i++) {
    const title = `Bench sync item ${i}${changedSet.has(i) ? " (changed)" : ""}`;
    if (!copies.has(title)) throw new Error(`the guest has no copy titled '${title}'`);
  }
  if (copies.size !== SYNC.items) throw new Error(`the guest's group holds ${copies.size} items`);
  for (const i of [0, changed[changed.length - 1] as number]) {
    const title = `Bench sync item ${i}${changedSet.has(i) ? " (changed)" : ""}`;
    const data = await guest.data(copies.get(title) as string);
    if (data !== geojson(i, changedSet.has(i) ? 1 : 0)) {
      throw new Error(`the guest's copy of item ${i} does not hold the host's data`);
    }
  }
}

/** Two portals on fresh stores of `engine`, the guest invited by the host (`collaborate`). */
export interface LinkedPortals {
  host: Admin;
  guest: Admin;
  linked: Linked;
  hostServer: ServerProcess;
  guestServer: ServerProcess;
  /** The PostgreSQL databases of the two portals (none on SQLite). */
  databases: string[];
}

/**
 * Runs `work` on two linked portals, each started by `start` on a fresh store of `engine`; stops
 * them and removes their stores afterwards, whatever `work` did. `what` names the case in errors.
 */
export async function withLinkedPortals<T>(
  engine: Engine,
  start: (store: Store) => Promise<ServerProcess>,
  what: string,
  work: (portals: LinkedPortals) => Promise<T>,
): Promise<T> {
  const stores: Store[] = [];
  const servers: ServerProcess[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const store = await createStore(engine);
      stores.push(store);
      servers.push(await start(store));
    }
    const [hostServer, guestServer] = servers as [ServerProcess, ServerProcess];
    const [host, guest] = await Promise.all(servers.map((s) => Admin.of(s)));
    if (!host || !guest) throw new Error(`the ${what} case needs two portals`);
    const linked = await collaborate(host, guest);
    const databases = stores.flatMap((store) =>
      store.env.DATABASE_URL ? [new URL(store.env.DATABASE_URL).pathname.slice(1)] : [],
    );
    return await work({ host, guest, linked, hostServer, guestServer, databases });
  } finally {
    for (const server of servers.reverse()) await server.stop();
    for (const store of stores) await store.destroy();
  }
}

/**
 * Runs the case on fresh stores of `engine`; `start` starts one portal on a store (the portals
 * must be allowed to call each other on loopback). `say` reports progress.
 */
export async function measureSync(
  engine: Engine,
  start: (store: Store) => Promise<ServerProcess>,
  say: (line: string) => void,
): Promise<SyncFigures> {
  return withLinkedPortals(
    engine,
    start,
    "sync",
    async ({ host, guest, linked, hostServer, guestServer, databases }) => {
      const seeding = performance.now();
      const ids = await seedHost(host, linked.hostGroup);
      const seedMs = performance.now() - seeding;
      say(
        `  ${engine.name}: host added and shared ${SYNC.items.toLocaleString("en-US")} items ` +
          `(${(geojson(0, 0).length / 1024).toFixed(1)} KB of data each) in ${(seedMs / 1000).toFixed(1)} s ` +
          `(${Math.round((SYNC.items * 1000) / seedMs)} items/s through the API)`,
      );

      const pair = { guest: guestServer, host: hostServer };
      const first = await timedSync(guest, linked, SYNC.items, "first sync", pair, databases);
      say(
        `  ${engine.name}: first sync ${seconds(first.ms)} (${rate((first.succeeded * 1000) / first.ms)} items/s; ${syncCpu(first)})`,
      );

      // Spread over the offer, not only its first few items.
      const changedItems = Array.from({ length: SYNC.changed }, (_, k) =>
        Math.floor(((k + 0.5) * SYNC.items) / SYNC.changed),
      );
      for (const i of changedItems) {
        await host.post(
          itemPath(ids[i] as string, "update"),
          { title: `Bench sync item ${i} (changed)`, text: geojson(i, 1) },
          "update",
        );
      }
      const changed = await timedSync(guest, linked, SYNC.changed, "sync after changes", pair, databases);
      say(
        `  ${engine.name}: sync of ${SYNC.changed} changed items ${seconds(changed.ms)} (${syncCpu(changed)})`,
      );

      const unchanged = await timedSync(guest, linked, 0, "sync with nothing changed", pair, databases);
      say(`  ${engine.name}: sync with nothing changed ${seconds(unchanged.ms)} (${syncCpu(unchanged)})`);
      await checkCopies(guest, linked.guestGroup, changedItems);

      for (const [i, server] of [hostServer, guestServer].entries()) {
        const lines = server.output();
        if (lines.length === 0) continue;
        say(`  ${i === 0 ? "host" : "guest"} ${server.name} logged (last lines):`);
        for (const line of lines.slice(-5)) say(`    ${line.slice(0, 300)}`);
      }
      return { engine, seedMs, first, changed, unchanged };
    },
  );
}
