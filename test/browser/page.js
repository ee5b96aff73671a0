// The page of test/browser/maps-sdk.test.ts (bundled by test/browser/bundle.ts): the ArcGIS Maps
// SDK for JavaScript used against portico as an application uses it. Each function of
// `window.portico` does its steps and returns what the SDK answered; the test compares that with
// the data it created.
import esriConfig from "@arcgis/core/config.js";
import * as reactiveUtils from "@arcgis/core/core/reactiveUtils.js";
import Graphic from "@arcgis/core/Graphic.js";
import Extent from "@arcgis/core/geometry/Extent.js";
import Point from "@arcgis/core/geometry/Point.js";
import IdentityManager from "@arcgis/core/identity/IdentityManager.js";
import FeatureLayer from "@arcgis/core/layers/FeatureLayer.js";
import EsriMap from "@arcgis/core/Map.js";
import Portal from "@arcgis/core/portal/Portal.js";
import PortalItem from "@arcgis/core/portal/PortalItem.js";
import MapView from "@arcgis/core/views/MapView.js";

/**
 * The SDK asks the user to sign in (with a dialog) when portico refuses a request and no token it
 * holds fits: that ends the current step at once, rather than waiting for someone to type.
 */
const signInAsked = new Promise((_, reject) => {
  IdentityManager.on("dialog-create", () => reject(new Error("the SDK asked the user to sign in")));
});
signInAsked.catch(() => {});

/** Runs one step, and names it in the error the test sees (with the SDK's details). */
async function step(name, fn) {
  console.info(`step: ${name}`);
  try {
    return await Promise.race([fn(), signInAsked]);
  } catch (err) {
    const details = err?.details ? ` ${JSON.stringify(err.details)}` : "";
    throw new Error(`${name}: ${err?.name ?? "Error"}: ${err?.message ?? err}${details}`);
  }
}

const wgs84 = { wkid: 4326 };
const extentOf = (e) =>
  e && { xmin: e.xmin, ymin: e.ymin, xmax: e.xmax, ymax: e.ymax, wkid: e.spatialReference?.wkid };
const plain = (feature) => ({
  attributes: feature.attributes,
  x: feature.geometry?.x,
  y: feature.geometry?.y,
});
const point = (p) => new Point({ ...p, spatialReference: wgs84 });

/**
 * What a layer view holds, once it has caught up with edits made through its layer: the layer
 * view takes them in on its own schedule, so this asks again (while it is not updating) until
 * the count is `expected`, for at most 15 s, and returns the last count seen.
 */
async function settledCount(layerView, query, expected) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    await reactiveUtils.whenOnce(() => !layerView.updating);
    const count = await layerView.queryFeatureCount(query);
    if (count === expected || Date.now() > deadline) return count;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Anonymous use of a public service: portal, item, layer queries and edits, a map. */
async function publicLayer(config) {
  const out = {};
  esriConfig.portalUrl = config.portalUrl;

  const portal = await step("Portal.load", async () => {
    const p = new Portal({ url: config.portalUrl });
    await p.load();
    return p;
  });
  out.portal = { isPortal: portal.isPortal, name: portal.name, restUrl: portal.restUrl };

  const item = await step("PortalItem.load", async () => {
    const i = new PortalItem({ id: config.itemId, portal });
    await i.load();
    return i;
  });
  out.item = { type: item.type, title: item.title, url: item.url, access: item.access };

  const fromItem = await step("FeatureLayer from the portal item", async () => {
    const l = new FeatureLayer({ portalItem: { id: config.itemId, portal } });
    await l.load();
    return l;
  });
  out.fromItem = {
    url: fromItem.url,
    layerId: fromItem.layerId,
    title: fromItem.title,
    geometryType: fromItem.geometryType,
    count: await step("queryFeatureCount (item layer)", () => fromItem.queryFeatureCount()),
  };

  const layer = await step("FeatureLayer from the layer URL", async () => {
    const l = new FeatureLayer({ url: config.layerUrl, outFields: ["*"] });
    await l.load();
    return l;
  });
  const operations = layer.capabilities?.operations ?? {};
  out.layer = {
    geometryType: layer.geometryType,
    objectIdField: layer.objectIdField,
    fields: layer.fields.map((f) => f.name),
    operations: {
      query: operations.supportsQuery,
      add: operations.supportsAdd,
      update: operations.supportsUpdate,
      delete: operations.supportsDelete,
    },
    pbf: layer.capabilities?.query?.supportsFormatPBF,
    editingEnabled: layer.editingEnabled,
    fullExtent: extentOf(layer.fullExtent),
  };

  out.count = await step("queryFeatureCount", () => layer.queryFeatureCount());
  out.countWhere = await step("queryFeatureCount with where", () =>
    layer.queryFeatureCount({ where: config.where }),
  );
  out.countInBox = await step("queryFeatureCount in an extent", () =>
    layer.queryFeatureCount({ geometry: new Extent({ ...config.box, spatialReference: wgs84 }) }),
  );
  const features = await step("queryFeatures", () =>
    layer.queryFeatures({
      where: "1=1",
      outFields: ["*"],
      returnGeometry: true,
      orderByFields: ["rank DESC"],
    }),
  );
  out.features = { length: features.features.length, first: plain(features.features[0]) };
  const extent = await step("queryExtent", () => layer.queryExtent());
  out.extent = { count: extent.count, extent: extentOf(extent.extent) };
  out.objectIds = await step("queryObjectIds", () => layer.queryObjectIds());

  const added = await step("applyEdits (add)", () =>
    layer.applyEdits({
      addFeatures: [
        new Graphic({ geometry: point(config.added.point), attributes: config.added.attributes }),
      ],
    }),
  );
  out.added = added.addFeatureResults.map((r) => ({ objectId: r.objectId, error: r.error?.message ?? null }));
  out.countAfterAdd = await step("queryFeatureCount after the add", () => layer.queryFeatureCount());
  const addedBack = await step("queryFeatures of the added feature", () =>
    layer.queryFeatures({ objectIds: [out.added[0]?.objectId], outFields: ["*"], returnGeometry: true }),
  );
  out.addedBack = addedBack.features.map(plain);

  // The map is in Web Mercator (as under any basemap): the layer view asks for its features in
  // another coordinate system than the layer's, as quantized PBF tiles.
  const view = await step("MapView", async () => {
    const v = new MapView({
      container: "view",
      map: new EsriMap({ layers: [new FeatureLayer({ url: config.layerUrl, outFields: ["*"] })] }),
      spatialReference: { wkid: 3857 },
      extent: new Extent({ ...config.viewExtent, spatialReference: { wkid: 3857 } }),
      ui: { components: [] },
    });
    await v.when();
    return v;
  });
  out.viewWkid = view.spatialReference.wkid;
  const viewLayer = view.map.layers.getItemAt(0);
  const layerView = await step("whenLayerView", () => view.whenLayerView(viewLayer));
  await step("layer view updating", () => reactiveUtils.whenOnce(() => !layerView.updating));
  out.layerView = {
    count: await step("layerView.queryFeatureCount", () => layerView.queryFeatureCount()),
    countWhere: await step("layerView.queryFeatureCount with where", () =>
      layerView.queryFeatureCount({ where: config.where }),
    ),
  };

  // Edits through the view's layer: the layer view refetches what changed.
  const edits = await step("applyEdits (update, delete) in the view", () =>
    viewLayer.applyEdits({
      updateFeatures: [new Graphic({ attributes: config.updated })],
      deleteFeatures: [{ objectId: config.deleted }],
    }),
  );
  out.edits = {
    updated: edits.updateFeatureResults.map((r) => ({
      objectId: r.objectId,
      error: r.error?.message ?? null,
    })),
    deleted: edits.deleteFeatureResults.map((r) => ({
      objectId: r.objectId,
      error: r.error?.message ?? null,
    })),
  };
  out.layerViewAfterEdits = {
    count: await step("layerView.queryFeatureCount after the edits", () =>
      settledCount(layerView, {}, config.expectAfterEdits.count),
    ),
    countWhere: await step("layerView.queryFeatureCount with where after the edits", () =>
      settledCount(layerView, { where: config.where }, config.expectAfterEdits.countWhere),
    ),
  };
  out.countAfterEdits = await step("queryFeatureCount after the edits", () => layer.queryFeatureCount());
  view.destroy();
  return out;
}

/**
 * A signed-in member's private service: the token is registered for the portal, and the SDK
 * finds through the server's `/rest/info` that the feature service belongs to that portal.
 */
async function signedIn(config) {
  const out = {};
  esriConfig.portalUrl = config.portalUrl;
  IdentityManager.registerToken({
    server: `${config.portalUrl}/sharing/rest`,
    token: config.token,
    userId: config.username,
    expires: config.expires,
    ssl: true,
  });
  const layer = await step("FeatureLayer from the private item", async () => {
    const l = new FeatureLayer({ portalItem: { id: config.itemId }, outFields: ["*"] });
    await l.load();
    return l;
  });
  out.layer = { url: layer.url, layerId: layer.layerId, geometryType: layer.geometryType };
  out.count = await step("queryFeatureCount (private)", () => layer.queryFeatureCount());
  const added = await step("applyEdits (add, private)", () =>
    layer.applyEdits({
      addFeatures: [
        new Graphic({ geometry: point(config.added.point), attributes: config.added.attributes }),
      ],
    }),
  );
  out.added = added.addFeatureResults.map((r) => ({ objectId: r.objectId, error: r.error?.message ?? null }));
  out.countAfterAdd = await step("queryFeatureCount after the add (private)", () =>
    layer.queryFeatureCount(),
  );
  return out;
}

window.portico = { publicLayer, signedIn };
