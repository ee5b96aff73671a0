import { ok } from "./collaboration.js";
import type { TestPortal } from "./portico.js";

/**
 * Hosted point layers for the collaboration tests that copy layer data (layer copy, bidirectional
 * sync): made, shared, read back and reported through the API as a client would.
 */

export interface PointFeature {
  attributes: Record<string, unknown>;
  geometry: { x: number; y: number };
}

/**
 * A hosted Feature Service `name` of `portal`'s administrator, editable, with one point layer of
 * `fields` (and `definition`'s other properties) holding `feature(0)` to `feature(count - 1)`,
 * added 2,000 to an applyEdits call. Its item id and the layer's URL.
 */
export async function createPointLayer(
  portal: TestPortal,
  name: string,
  options: {
    fields: readonly object[];
    feature: (i: number) => PointFeature;
    count: number;
    definition?: Record<string, unknown>;
  },
): Promise<{ itemId: string; layer: string }> {
  const created = await ok(
    portal.post(
      "/content/users/admin_user/createService",
      {
        createParameters: { name, capabilities: "Create,Delete,Query,Update,Editing" },
        outputType: "featureService",
      },
      portal.adminToken,
    ),
    "createService",
  );
  const base = portal.portico.address;
  const layer = { name, geometryType: "esriGeometryPoint", spatialReference: { wkid: 4326 } };
  await ok(
    portal.post(
      `${base}/rest/admin/services/${name}/FeatureServer/addToDefinition`,
      { addToDefinition: { layers: [{ ...layer, fields: options.fields, ...options.definition }] } },
      portal.adminToken,
    ),
    "addToDefinition",
  );
  const url = `${base}/rest/services/${name}/FeatureServer/0`;
  for (let start = 0; start < options.count; start += 2000) {
    const adds = Array.from({ length: Math.min(2000, options.count - start) }, (_, i) =>
      options.feature(start + i),
    );
    const r = await ok(portal.post(`${url}/applyEdits`, { adds }, portal.adminToken), "applyEdits");
    if (!r.addResults.every((a: { success: boolean }) => a.success))
      throw new Error(`applyEdits refused features of ${name}: ${JSON.stringify(r.addResults.slice(0, 3))}`);
  }
  return { itemId: created.itemId as string, layer: url };
}

/** Shares an item of `portal`'s administrator to `group`. */
export async function shareItem(portal: TestPortal, itemId: string, group: string): Promise<void> {
  await ok(
    portal.post(`/content/users/admin_user/items/${itemId}/share`, { groups: group }, portal.adminToken),
    "share",
  );
}

/** A layer query with every field. */
export async function queryLayer(portal: TestPortal, layer: string, params: Record<string, unknown>) {
  return ok(portal.get(`${layer}/query`, { outFields: "*", ...params }, portal.adminToken), "query");
}

/** Every feature of a layer by object id, read in pages of 2,000. */
export async function allFeatures(portal: TestPortal, layer: string): Promise<Map<number, any>> {
  const out = new Map<number, any>();
  for (let offset = 0; ; offset += 2000) {
    const page = await queryLayer(portal, layer, {
      where: "1=1",
      orderByFields: "OBJECTID",
      resultOffset: offset,
      resultRecordCount: 2000,
    });
    for (const f of page.features) out.set(f.attributes.OBJECTID, f);
    if (page.features.length < 2000) return out;
  }
}

/** A sync status's per-item layer reports (`featureData`), of the tasks of one direction if given. */
export function featureData(status: any, direction?: string): any[] {
  return status.participantTasks
    .filter((t: any) => !direction || t.direction === direction)
    .flatMap((t: any) => t.featureData ?? []);
}
