/**
 * The layer-copy case of `npm run bench`: two portals on loopback in a collaboration whose guest
 * link asks for copies of hosted layer data (`copyFeatureServiceData`). The host loads a point
 * layer of 100,000 features through `applyEdits` and shares its service to the workspace (setup,
 * timed apart); then the guest runs synchronous syncs, each timed from the request to its answer:
 * - the first, which copies the whole layer into a hosted service of the guest;
 * - after 1,000 of the host's features were updated, which moves only those.
 * Each sync must complete, its `featureData` must count exactly what moved, and the guest's copy
 * must then hold as many features as the host's layer, with the updates.
 */
import { performance } from "node:perf_hooks";
import { ADMIN } from "./portal-api.js";
import type { ServerProcess } from "./processes.js";
import { rate, seconds } from "./report.js";
import type { Engine, Store } from "./stores.js";
import { type Admin, type Linked, runTimedSync, SELF, withLinkedPortals } from "./sync.js";

export const LAYER_COPY = {
  features: 100_000,
  edits: 1_000,
  /** Features per applyEdits call while loading the host's layer. */
  batch: 2_000,
  /** applyEdits calls in flight while loading. */
  inFlight: 2,
} as const;

export interface LayerCopyRun {
  ms: number;
  /** Features added and updated on the guest's copy, as the sync's featureData counts them. */
  added: number;
  updated: number;
  guestCpuMs: number | undefined;
  hostCpuMs: number | undefined;
}

export interface LayerCopyFigures {
  engine: Engine;
  /** Milliseconds the host took to load its layer through applyEdits (setup). */
  loadMs: number;
  first: LayerCopyRun;
  delta: LayerCopyRun;
}

const FIELDS = [
  { name: "OBJECTID", type: "esriFieldTypeOID" },
  { name: "name", type: "esriFieldTypeString", length: 64 },
  { name: "pop", type: "esriFieldTypeInteger" },
  { name: "value", type: "esriFieldTypeDouble" },
];

/** Feature `i` of the layer, revision `r`: a point over Europe, from a fixed formula. */
function feature(i: number, r: number) {
  return {
    geometry: { x: -10 + ((i * 7919) % 40_000) / 1000, y: 35 + ((i * 104_729) % 30_000) / 1000 },
    attributes: { name: `Site ${i}`, pop: i * 3 + r, value: i / 7 + r },
  };
}

async function loadLayer(host: Admin, name: string): Promise<{ itemId: string; layer: string }> {
  const created = await host.post(
    `/sharing/rest/content/users/${ADMIN.username}/createService`,
    {
      createParameters: { name, capabilities: "Create,Delete,Query,Update,Editing" },
      outputType: "featureService",
    },
    "createService",
  );
  await host.post(
    `/rest/admin/services/${name}/FeatureServer/addToDefinition`,
    {
      addToDefinition: {
        layers: [
          {
            name,
            geometryType: "esriGeometryPoint",
            spatialReference: { wkid: 4326 },
            fields: FIELDS,
          },
        ],
      },
    },
    "addToDefinition",
  );
  const layer = `/rest/services/${name}/FeatureServer/0`;
  let next = 0;
  const worker = async () => {
    while (next < LAYER_COPY.features) {
      const start = next;
      next += LAYER_COPY.batch;
      const adds = Array.from({ length: Math.min(LAYER_COPY.batch, LAYER_COPY.features - start) }, (_, k) =>
        feature(start + k, 0),
      );
      const r = await host.post(`${layer}/applyEdits`, { adds, rollbackOnFailure: true }, "applyEdits adds");
      if (!(r.addResults as { success: boolean }[]).every((a) => a.success)) {
        throw new Error("applyEdits refused features of the bench layer");
      }
    }
  };
  await Promise.all(Array.from({ length: LAYER_COPY.inFlight }, worker));
  return { itemId: created.itemId as string, layer };
}

/** One synchronous sync on the guest, timed, with the layer's counts from its featureData. */
async function timedCopySync(
  guest: Admin,
  linked: Linked,
  what: string,
  servers: { guest: ServerProcess; host: ServerProcess },
): Promise<LayerCopyRun> {
  const { ms, guestCpuMs, hostCpuMs, status } = await runTimedSync(guest, linked, what, servers);
  if (status.status !== "completed") {
    throw new Error(`${what}: the sync ended ${status.status}: ${status.summary}`);
  }
  const layers = ((status.participantTasks ?? []) as { featureData?: { mode: string; layers: any[] }[] }[])
    .flatMap((t) => t.featureData ?? [])
    .flatMap((d) => {
      if (d.mode !== "copy") throw new Error(`${what}: the layer arrived as ${d.mode}, not as a copy`);
      return d.layers;
    });
  const failed = layers.reduce((n, l) => n + l.failed + (l.notProcessed ? 1 : 0), 0);
  if (failed > 0)
    throw new Error(`${what}: ${failed} features failed: ${JSON.stringify(layers).slice(0, 400)}`);
  return {
    ms,
    added: layers.reduce((n, l) => n + l.added, 0),
    updated: layers.reduce((n, l) => n + l.updated, 0),
    guestCpuMs,
    hostCpuMs,
  };
}

/** The copy's layer on the guest, found in its linked group. */
async function copyLayerOf(guest: Admin, groupId: string, title: string): Promise<string> {
  const r = await guest.get(`/sharing/rest/content/groups/${groupId}`, { num: 100 }, "group content");
  const copy = (r.items as { title: string; url: string }[]).find((i) => i.title === title);
  if (!copy) throw new Error(`the guest's group holds no '${title}'`);
  return `${new URL(copy.url).pathname}/0`;
}

async function count(portal: Admin, layer: string, where: string): Promise<number> {
  const r = await portal.get(`${layer}/query`, { where, returnCountOnly: true }, "count");
  return r.count as number;
}

export async function measureLayerCopy(
  engine: Engine,
  start: (store: Store) => Promise<ServerProcess>,
  say: (line: string) => void,
): Promise<LayerCopyFigures> {
  return withLinkedPortals(
    engine,
    start,
    "layer-copy",
    async ({ host, guest, linked, hostServer, guestServer }) => {
      await guest.post(
        `${SELF}/collaborations/${linked.collaborationId}/workspaces/${linked.workspaceId}/updatePortalGroupLink`,
        { portalGroupId: linked.guestGroup, copyFeatureServiceData: true },
        "updatePortalGroupLink",
      );

      const name = "bench_points";
      const loading = performance.now();
      const origin = await loadLayer(host, name);
      const loadMs = performance.now() - loading;
      await host.post(
        `/sharing/rest/content/users/${ADMIN.username}/items/${origin.itemId}/share`,
        { groups: linked.hostGroup },
        "share",
      );
      say(
        `  ${engine.name}: host loaded ${LAYER_COPY.features.toLocaleString("en-US")} points through applyEdits in ` +
          `${seconds(loadMs)} and shared the service`,
      );

      const pair = { guest: guestServer, host: hostServer };
      const cpu = (run: LayerCopyRun) =>
        run.guestCpuMs === undefined || run.hostCpuMs === undefined
          ? ""
          : `; CPU guest ${(run.guestCpuMs / 1000).toFixed(1)} s, host ${(run.hostCpuMs / 1000).toFixed(1)} s`;
      const first = await timedCopySync(guest, linked, "first layer copy", pair);
      if (first.added !== LAYER_COPY.features) {
        throw new Error(`first layer copy: ${first.added} features added, not ${LAYER_COPY.features}`);
      }
      say(
        `  ${engine.name}: first sync copied ${first.added.toLocaleString("en-US")} features in ${seconds(first.ms)} ` +
          `(${rate((first.added * 1000) / first.ms)} features/s${cpu(first)})`,
      );
      const copy = await copyLayerOf(guest, linked.guestGroup, name);
      if ((await count(guest, copy, "1=1")) !== LAYER_COPY.features) {
        throw new Error("the guest's copy does not hold every feature of the host's layer");
      }

      // Every hundredth feature gets a new revision: 1,000 updates spread over the layer.
      const step = Math.floor(LAYER_COPY.features / LAYER_COPY.edits);
      const updates = Array.from({ length: LAYER_COPY.edits }, (_, k) => {
        const i = k * step;
        return { ...feature(i, 1), attributes: { ...feature(i, 1).attributes, OBJECTID: i + 1 } };
      });
      await host.post(
        `${origin.layer}/applyEdits`,
        { updates, rollbackOnFailure: true },
        "applyEdits updates",
      );
      const delta = await timedCopySync(guest, linked, "delta sync", pair);
      if (delta.updated !== LAYER_COPY.edits || delta.added !== 0) {
        throw new Error(
          `delta sync: ${delta.updated} updated and ${delta.added} added, not ${LAYER_COPY.edits} updated`,
        );
      }
      say(
        `  ${engine.name}: delta sync of ${LAYER_COPY.edits.toLocaleString("en-US")} updated features ${seconds(delta.ms)}${cpu(delta)}`,
      );
      // The copy holds the updates: a sample of the updated features read back at revision 1.
      const sample = updates.filter((_, k) => k % 100 === 0).map((u) => u.attributes.OBJECTID);
      const read = await guest.get(
        `${copy}/query`,
        { objectIds: sample.join(","), outFields: "OBJECTID,pop" },
        "query the copy",
      );
      const stale = (read.features as { attributes: { OBJECTID: number; pop: number } }[]).filter(
        (f) => f.attributes.pop !== (f.attributes.OBJECTID - 1) * 3 + 1,
      );
      if (read.features.length !== sample.length || stale.length > 0) {
        throw new Error(
          `the guest's copy does not hold the host's updates (${stale.length} stale of ${sample.length})`,
        );
      }
      return { engine, loadMs, first, delta };
    },
  );
}
