import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import {
  exportItem,
  getItem,
  getItemData,
  getItemStatus,
  type IExportItemResponse,
} from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager, ArcGISRequestError } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nextDueExportJob } from "../../src/features/export/export-job.repository.js";
import { ADMIN, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";
import {
  createSampleService,
  type SamplePoint,
  samplePoints,
  sampleZones,
} from "../helpers/sample-layers.js";

/**
 * Esri's client exporting hosted feature layers (`exportItem`), following the job on the new
 * item's status (`getItemStatus`) and downloading its data (`getItemData`): GeoJSON, CSV (one
 * layer, and a zip of several), Shapefile (read back with GDAL's `ogrinfo`) and Feature
 * Collection, each checked against the generated features (helpers/sample-layers.ts), with
 * `where` and layer selection honoured; then the refusals.
 */

const run = promisify(execFile);
// More points than one page of the export's reads (1,000), so that paging is exercised.
const POINTS = samplePoints(2345);
const ZONES = sampleZones(45);

/** Polls the export item's status until the job is no longer processing. */
async function finished(id: string, jobId: string, authentication: ArcGISIdentityManager) {
  for (let i = 0; i < 600; i++) {
    let status: { status: string; statusMessage?: string; itemId?: string };
    try {
      status = await getItemStatus({ id, jobId, jobType: "export", authentication } as never);
    } catch (err) {
      // Esri's client throws on an answer whose status is "failed", with its statusMessage.
      if (err instanceof ArcGISRequestError) return { status: "failed", statusMessage: err.message };
      throw err;
    }
    if (status.status !== "processing") return status;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`export ${jobId} of item ${id} still processing`);
}

/** `ogr2ogr -f GeoJSON` of one layer of a source, parsed (this GDAL's ogrinfo has no -json). */
async function ogrGeoJson(source: string, ...args: string[]): Promise<any> {
  const { stdout } = await run("ogr2ogr", ["-f", "GeoJSON", "/vsistdout/", source, ...args], {
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(stdout);
}

async function bytesOf(id: string, authentication: ArcGISIdentityManager): Promise<Buffer> {
  const blob = (await getItemData(id, { authentication, file: true })) as Blob;
  return Buffer.from(await blob.arrayBuffer());
}

describe("export of hosted feature layers (content/users/<u>/export)", () => {
  let portal: TestPortal;
  let owner: ArcGISIdentityManager;
  let other: ArcGISIdentityManager;
  let admin: ArcGISIdentityManager;
  let ownerName: string;
  let otherName: string;
  let otherToken: string;
  let ownerTok: string;
  let serviceItemId: string;
  let extractItemId: string;
  let tmp: string;
  /** What the portal logged at level error (a job's internal failure is logged so). */
  const errorLogs: { msg?: string }[] = [];

  beforeAll(async () => {
    portal = await startTestPortal({
      env: { PORTICO_LOG_LEVEL: "error" },
      logger: {
        level: "error",
        stream: new Writable({
          write(chunk, _enc, done) {
            for (const line of String(chunk).split("\n").filter(Boolean)) errorLogs.push(JSON.parse(line));
            done();
          },
        }),
      },
    });
    const o = await portal.addUser("export_owner", "org_publisher");
    const x = await portal.addUser("export_other", "org_publisher");
    ownerName = o.username;
    otherName = x.username;
    otherToken = x.token;
    ownerTok = o.token;
    const signIn = (username: string, password: string) =>
      ArcGISIdentityManager.signIn({ username, password, portal: portal.api });
    owner = await signIn(o.username, o.password);
    other = await signIn(x.username, x.password);
    admin = await signIn(ADMIN.username, ADMIN.password);
    const created = await createSampleService(
      portal,
      o,
      "ExportSites",
      { points: POINTS, zones: ZONES },
      { maxRecordCount: 500 },
    );
    serviceItemId = created.itemId;
    // A service whose owner lets others export it (ArcGIS's "Extract" capability), shared with the org.
    const extract = await createSampleService(
      portal,
      o,
      "ExportShared",
      { points: POINTS.slice(0, 30), zones: [] },
      { maxRecordCount: 500, capabilities: "Query,Extract" },
    );
    extractItemId = extract.itemId;
    for (const id of [serviceItemId, extractItemId]) {
      const shared = await portal.post(
        `/content/users/${ownerName}/items/${id}/share`,
        { org: true },
        o.token,
      );
      expect(shared.notSharedWith ?? []).toEqual([]);
    }
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "portico-export-"));
  }, 180_000);

  afterAll(async () => {
    await portal?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  async function exported(
    authentication: ArcGISIdentityManager,
    options: { exportFormat: string; exportParameters?: unknown; title?: string; id?: string },
  ): Promise<{ started: IExportItemResponse; bytes: Buffer }> {
    const started = await exportItem({
      id: options.id ?? serviceItemId,
      authentication,
      exportFormat: options.exportFormat as never,
      ...(options.exportParameters ? { exportParameters: options.exportParameters as never } : {}),
      title: options.title ?? `export ${options.exportFormat}`,
    });
    expect(started.jobId).toMatch(/^[A-Za-z0-9]+$/);
    expect(started.serviceItemId).toBe(options.id ?? serviceItemId);
    const status = await finished(started.exportItemId, started.jobId, authentication);
    expect(status).toMatchObject({ status: "completed", itemId: started.exportItemId });
    return { started, bytes: await bytesOf(started.exportItemId, authentication) };
  }

  it("exports a layer as GeoJSON in WGS 84, every feature across pages, as a new item of the caller", async () => {
    const before = (await outbox(portal)).length;
    const { started, bytes } = await exported(owner, {
      exportFormat: "GeoJson",
      exportParameters: { layers: [{ id: 0 }] },
    });
    expect(started).toMatchObject({ type: "GeoJson", exportFormat: "GeoJson" });
    const collection = JSON.parse(bytes.toString("utf8"));
    expect(collection.type).toBe("FeatureCollection");
    expect(collection.features).toHaveLength(POINTS.length);
    const byId = new Map(collection.features.map((f: any) => [f.id, f]));
    for (const p of [POINTS[0], POINTS[7], POINTS[1500], POINTS.at(-1)] as SamplePoint[]) {
      const f = byId.get(p.objectId) as any;
      expect(f.geometry.type).toBe("Point");
      expect(f.geometry.coordinates[0]).toBeCloseTo(p.x, 9);
      expect(f.geometry.coordinates[1]).toBeCloseTo(p.y, 9);
      expect(f.properties).toMatchObject({ name: p.name, n: p.n, score: p.score, seen: p.seen });
    }
    const item = await getItem(started.exportItemId, { authentication: owner });
    expect(item).toMatchObject({
      owner: ownerName,
      type: "GeoJson",
      title: "export GeoJson",
      size: bytes.length,
    });
    // The item's add, then its update when the job stored the file.
    const events = (await outbox(portal)).slice(before).filter((e) => e.object_id === started.exportItemId);
    expect(events.map((e) => e.operation)).toEqual(["add", "update"]);
  });

  it("exports one layer as CSV with x and y (WGS 84) and honours the where clause", async () => {
    const { started, bytes } = await exported(owner, {
      exportFormat: "CSV",
      exportParameters: { layers: [{ id: 0, where: "kind = 2 AND n < 3000" }] },
    });
    expect(started.type).toBe("CSV");
    const csvFile = path.join(tmp, "points.csv");
    fs.writeFileSync(csvFile, bytes);
    const expected = POINTS.filter((p) => p.kind === 2 && p.n < 3000);
    // GDAL's CSV driver reads it (quotes, non-ASCII names), x and y as the point.
    const info = await ogrGeoJson(
      csvFile,
      "-oo",
      "X_POSSIBLE_NAMES=x",
      "-oo",
      "Y_POSSIBLE_NAMES=y",
      "-oo",
      "AUTODETECT_TYPE=YES",
    );
    const features = info.features as any[];
    expect(features).toHaveLength(expected.length);
    const header = bytes.toString("utf8").split("\r\n")[0];
    expect(header).toBe("OBJECTID,name,n,score,seen,kind,x,y");
    for (const [i, p] of expected.entries()) {
      const f = features[i];
      expect(f.properties.name).toBe(p.name);
      expect(Number(f.properties.n)).toBe(p.n);
      expect(f.geometry.coordinates[0]).toBeCloseTo(p.x, 9);
      expect(f.geometry.coordinates[1]).toBeCloseTo(p.y, 9);
      expect(Date.parse(String(f.properties.seen).replace(/\//g, "-"))).toBe(p.seen);
    }
  });

  it("exports several layers as a CSV Collection: a zip of one CSV per layer", async () => {
    const { started, bytes } = await exported(owner, { exportFormat: "CSV" });
    expect(started.type).toBe("CSV Collection");
    const zip = path.join(tmp, "collection.zip");
    fs.writeFileSync(zip, bytes);
    const { stdout: listing } = await run("unzip", ["-Z1", zip]);
    expect(listing.trim().split("\n").sort()).toEqual(["Points.csv", "Zones.csv"]);
    const { stdout: zones } = await run("unzip", ["-p", zip, "Zones.csv"]);
    const lines = zones.trim().split("\r\n");
    // Polygons have no single x and y: their attributes alone, as ArcGIS exports them.
    expect(lines[0]).toBe("OBJECTID,label,area");
    expect(lines).toHaveLength(ZONES.length + 1);
    const { stdout: points } = await run("unzip", ["-p", zip, "Points.csv"], { maxBuffer: 64 * 1024 * 1024 });
    expect(points.trim().split("\r\n")).toHaveLength(POINTS.length + 1);
  });

  it("exports a Shapefile that GDAL reads: points and polygons, attributes, projection, the where", async () => {
    const { started, bytes } = await exported(owner, {
      exportFormat: "Shapefile",
      exportParameters: { layers: [{ id: 0, where: "n >= 0" }, { id: 1 }] },
    });
    expect(started.type).toBe("Shapefile");
    const zip = path.join(tmp, "shapes.zip");
    fs.writeFileSync(zip, bytes);
    const source = `/vsizip/${zip}`;
    const points = await ogrGeoJson(source, "Points");
    const zones = await ogrGeoJson(source, "Zones");
    const { stdout: summary } = await run("ogrinfo", ["-so", source, "Points"]);
    expect(summary).toMatch(/^Geometry: Point$/m);
    expect(summary).toMatch(/GEOGCRS\["WGS 84"|GEOGCS\["WGS 84"/);
    const expected = POINTS.filter((p) => p.n >= 0);
    expect(points.features).toHaveLength(expected.length);
    for (const [i, p] of expected.entries()) {
      const f = points.features[i];
      expect(f.properties).toMatchObject({ OBJECTID: p.objectId, name: p.name, n: p.n, kind: p.kind });
      if (p.score === null) expect(f.properties.score).toBeNull();
      else expect(f.properties.score).toBeCloseTo(p.score, 12);
      // dBASE dates hold the day only.
      expect(f.properties.seen).toBe(new Date(p.seen).toISOString().slice(0, 10));
      // GDAL writes GeoJSON with 15 significant digits.
      expect(f.geometry.coordinates[0]).toBeCloseTo(p.x, 12);
      expect(f.geometry.coordinates[1]).toBeCloseTo(p.y, 12);
    }
    expect(zones.features).toHaveLength(ZONES.length);
    for (const [i, z] of ZONES.entries()) {
      const f = zones.features[i];
      expect(f.properties.label).toBe(z.label);
      expect(["Polygon", "MultiPolygon"]).toContain(f.geometry.type);
      const rings = f.geometry.type === "Polygon" ? [f.geometry.coordinates] : f.geometry.coordinates;
      expect(rings).toHaveLength(z.polygons.length);
      expect(rings.map((p: unknown[]) => p.length)).toEqual(z.polygons.map((p) => p.length));
    }
  });

  it("exports a Feature Collection in a targetSR, with each layer's definition", async () => {
    const { started, bytes } = await exported(owner, {
      exportFormat: "Feature Collection",
      exportParameters: { layers: [{ id: 0, where: "objectid <= 3" }], targetSR: { wkid: 3857 } },
    });
    expect(started.type).toBe("Feature Collection");
    const data = (await getItemData(started.exportItemId, { authentication: owner })) as any;
    expect(JSON.parse(bytes.toString("utf8"))).toEqual(data);
    expect(data.layers).toHaveLength(1);
    const layer = data.layers[0];
    expect(layer.layerDefinition).toMatchObject({
      name: "Points",
      geometryType: "esriGeometryPoint",
      objectIdField: "OBJECTID",
    });
    expect(layer.featureSet.spatialReference.latestWkid).toBe(3857);
    expect(layer.featureSet.features).toHaveLength(3);
    const p = POINTS[0] as SamplePoint;
    const x = (p.x * Math.PI * 6378137) / 180;
    expect(layer.featureSet.features[0].geometry.x).toBeCloseTo(x, 3);
    expect(layer.featureSet.features[0].attributes).toMatchObject({ OBJECTID: 1, name: p.name });
  });

  it("lets another user export only a service whose capabilities include Extract", async () => {
    const refused = await portal.post(
      `/content/users/${otherName}/export`,
      { itemId: serviceItemId, exportFormat: "GeoJson", exportParameters: { layers: [{ id: 0 }] } },
      otherToken,
    );
    expect(refused.error.code).toBe(403);
    expect(refused.error.message + (refused.error.details ?? []).join(" ")).toMatch(/Extract/);
    const { started, bytes } = await exported(other, {
      id: extractItemId,
      exportFormat: "GeoJson",
      exportParameters: { layers: [{ id: 0 }] },
    });
    expect(JSON.parse(bytes.toString()).features).toHaveLength(30);
    expect((await getItem(started.exportItemId, { authentication: other })).owner).toBe(otherName);
    // Administrators export anything.
    const byAdmin = await exported(admin, {
      exportFormat: "GeoJson",
      exportParameters: { layers: [{ id: 1 }] },
    });
    expect(JSON.parse(byAdmin.bytes.toString()).features).toHaveLength(ZONES.length);
  });

  it("refuses unknown and unsupported formats, bad where clauses and layers, and items that are not services", async () => {
    const call = (params: Record<string, unknown>, user = ownerName, token?: string) =>
      portal.post(
        `/content/users/${user}/export`,
        { itemId: serviceItemId, ...params },
        token ?? ownerToken(),
      );
    const fgdb = await call({ exportFormat: "File Geodatabase", exportParameters: { layers: [{ id: 0 }] } });
    expect(fgdb.error.code).toBe(400);
    expect(fgdb.error.details.join(" ")).toMatch(/exportFormat.*File Geodatabase.*not supported/);
    const unknown = await call({ exportFormat: "Parquet" });
    expect(unknown.error.details.join(" ")).toMatch(/exportFormat.*not an export format/);
    const badWhere = await call({
      exportFormat: "CSV",
      exportParameters: { layers: [{ id: 0, where: "1=1) OR (1=1" }] },
    });
    expect(badWhere.error.details.join(" ")).toMatch(/exportParameters.*layers\[0\]\.where/);
    const unknownField = await call({
      exportFormat: "CSV",
      exportParameters: { layers: [{ id: 0, where: "secret = 1" }] },
    });
    expect(unknownField.error.details.join(" ")).toMatch(/field that does not exist/);
    const noLayer = await call({ exportFormat: "CSV", exportParameters: { layers: [{ id: 7 }] } });
    expect(noLayer.error.details.join(" ")).toMatch(/layer 7/);
    const twoGeoJson = await call({ exportFormat: "GeoJson" });
    expect(twoGeoJson.error.details.join(" ")).toMatch(/GeoJson export holds one/);
    const badSr = await call({
      exportFormat: "CSV",
      exportParameters: { layers: [{ id: 0 }], targetSR: 999999 },
    });
    expect(badSr.error.details.join(" ")).toMatch(/exportParameters/);
    const sameColumns = await call({
      exportFormat: "CSV",
      exportParameters: { layers: [{ id: 0, xColumnName: "y" }] },
    });
    expect(sameColumns.error.details.join(" ")).toMatch(
      /exportParameters.*xColumnName and yColumnName are the same/,
    );
    const notJson = await call({ exportFormat: "CSV", exportParameters: "{layers" });
    expect(notJson.error.details.join(" ")).toMatch(/exportParameters.*JSON/);
    // An item that is not a hosted feature service.
    const web = await portal.post(
      `/content/users/${ownerName}/addItem`,
      { title: "a map", type: "Web Map", text: "{}" },
      ownerToken(),
    );
    const notService = await call({ itemId: web.id, exportFormat: "CSV" });
    expect(notService.error.details.join(" ")).toMatch(/itemId.*not a hosted feature service/);
    // Into another user's content, and an item the caller cannot see.
    const intoOther = await call({ exportFormat: "CSV" }, otherName);
    expect(intoOther.error.code).toBe(403);
    const hidden = await call({ itemId: web.id, exportFormat: "CSV" }, otherName, otherToken);
    expect(hidden.error.code).toBe(400);
    expect(hidden.error.message).toMatch(/Item does not exist or is inaccessible|not found/i);
    // Nothing was made by any of these.
    const content = await portal.get(`/content/users/${ownerName}`, { num: 100 }, ownerToken());
    expect(content.items.filter((i: any) => i.title === "export CSV" && i.type === "CSV").length).toBe(1);
  });

  it("reports a failed export on the item's status, with a message, and leaves it without data", async () => {
    const { started } = await exported(owner, {
      exportFormat: "CSV",
      exportParameters: { layers: [{ id: 1 }] },
      title: "doomed",
    });
    // The job is put back as a node that died would leave it (no lease), with its service gone
    // and its item without data: the next node to look takes it up, and it fails.
    const db = portal.portico.db;
    await db.transaction(async (trx) => {
      await trx
        .updateTable("export_jobs")
        .set({ status: "processing", lease_until: 0, attempts: 0, service_item_id: "gone0000" })
        .where("job_id", "=", started.jobId)
        .execute();
      await trx.deleteFrom("item_files").where("item_id", "=", started.exportItemId).execute();
    });
    // Another export wakes the runner, which runs every job that is due.
    await exported(owner, { exportFormat: "GeoJson", exportParameters: { layers: [{ id: 1 }] } });
    const status = await finished(started.exportItemId, started.jobId, owner);
    expect(status.status).toBe("failed");
    expect(status.statusMessage).toMatch(/the service this export reads \(item gone0000\) no longer exists/);
    const raw = await portal.get(
      `/content/users/${ownerName}/items/${started.exportItemId}/status`,
      {},
      ownerToken(),
    );
    expect(raw).toMatchObject({ itemId: started.exportItemId, status: "failed" });
    expect(await getItemData(started.exportItemId, { authentication: owner })).toBeUndefined();
    const wrongJob = await portal.get(
      `/content/users/${ownerName}/items/${started.exportItemId}/status`,
      { jobId: "nothisjob", jobType: "export" },
      ownerToken(),
    );
    expect(wrongJob.error.details.join(" ")).toMatch(/jobId/);
    // Another user neither sees the status nor the data of the caller's export.
    const foreign = await portal.get(
      `/content/users/${ownerName}/items/${started.exportItemId}/status`,
      { jobId: started.jobId, jobType: "export" },
      otherToken,
    );
    expect(foreign.error.code).toBe(400);
  });

  /**
   * `count` export jobs in processing of new items of `user`, created at `from`, `from + 1`, …,
   * held by a node until `leaseUntil` (so that this portal's runner leaves them alone).
   */
  async function heldJobs(user: string, token: string, count: number, from: number, leaseUntil: number) {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const item = await portal.post(
        `/content/users/${user}/addItem`,
        { title: `held ${i}`, type: "GeoJson", text: "{}" },
        token,
      );
      const jobId = `held${from + i}${user.length}`;
      await portal.portico.db.kysely
        .insertInto("export_jobs")
        .values({
          job_id: jobId,
          item_id: item.id,
          service_item_id: serviceItemId,
          format: "GeoJson",
          parameters: JSON.stringify({ title: "held", layers: [] }),
          only_created_by: null,
          status: "processing",
          message: "processing",
          attempts: 1,
          lease_until: leaseUntil,
          created: from + i,
          modified: from + i,
        })
        .execute();
      ids.push(jobId);
    }
    return ids;
  }

  it("refuses a sixth processing export of a user, naming the limit, and not another user's", async () => {
    const lease = Date.now() + 3_600_000;
    const held = await heldJobs(ownerName, ownerToken(), 5, 1_000, lease);
    const db = portal.portico.db.kysely;
    try {
      const refused = await portal.post(
        `/content/users/${ownerName}/export`,
        {
          itemId: serviceItemId,
          exportFormat: "GeoJson",
          exportParameters: { layers: [{ id: 1 }] },
          title: "sixth",
        },
        ownerToken(),
      );
      expect(refused.error?.code).toBe(400);
      expect(refused.error.message).toMatch(/has 5 exports processing; a user may have at most 5 at once/);
      const content = await portal.get(`/content/users/${ownerName}`, { num: 100 }, ownerToken());
      expect(content.items.filter((i: any) => i.title === "sixth")).toEqual([]);
      // Another user's exports are not held up by the owner's.
      const { bytes } = await exported(other, {
        id: extractItemId,
        exportFormat: "GeoJson",
        exportParameters: { layers: [{ id: 0 }] },
      });
      expect(JSON.parse(bytes.toString()).features).toHaveLength(30);
      // Once one of the owner's is done, the owner exports again.
      await db
        .updateTable("export_jobs")
        .set({ status: "completed" })
        .where("job_id", "=", held[0] as string)
        .execute();
      await exported(owner, {
        exportFormat: "GeoJson",
        exportParameters: { layers: [{ id: 1 }] },
        title: "sixth",
      });
    } finally {
      await db.deleteFrom("export_jobs").where("job_id", "in", held).execute();
    }
  });

  it("takes owners in turn: a later user's first export before a user's queued second", async () => {
    const lease = Date.now() + 3_600_000;
    const db = portal.portico.db.kysely;
    const mine = await heldJobs(ownerName, ownerToken(), 3, 1_000, lease);
    const theirs = await heldJobs(otherName, otherToken, 1, 2_000, lease);
    try {
      // As a node sees them once their leases ran out, save the owner's first, still running.
      await db
        .updateTable("export_jobs")
        .set({ lease_until: lease * 2 })
        .where("job_id", "=", mine[0] as string)
        .execute();
      expect(await nextDueExportJob(db, lease + 1)).toBe(theirs[0]);
      await db
        .updateTable("export_jobs")
        .set({ lease_until: lease * 2 })
        .where("job_id", "=", theirs[0] as string)
        .execute();
      expect(await nextDueExportJob(db, lease + 1)).toBe(mine[1]);
    } finally {
      await db
        .deleteFrom("export_jobs")
        .where("job_id", "in", [...mine, ...theirs])
        .execute();
    }
  });

  it("fails a job whose service is deleted while it reads it with a clear message, logging no error", async () => {
    const doomed = await createSampleService(
      portal,
      { username: ownerName, token: ownerToken() },
      "ExportDeleted",
      { points: POINTS.slice(0, 1500), zones: [] },
      { maxRecordCount: 500 },
    );
    const featureData = portal.portico.services.featureData;
    const exportPage = featureData.exportPage;
    // The service is deleted once the job has read its first page, before it reads the second.
    featureData.exportPage = async function (this: typeof featureData, open, page) {
      if (page.after > 0) {
        const deleted = await portal.post(
          `/content/users/${ownerName}/items/${doomed.itemId}/delete`,
          {},
          ownerToken(),
        );
        expect(deleted.success).toBe(true);
      }
      return exportPage.call(this, open, page);
    };
    const logged = errorLogs.length;
    try {
      const started = await exportItem({
        id: doomed.itemId,
        authentication: owner,
        exportFormat: "CSV",
        exportParameters: { layers: [{ id: 0 }] } as never,
        title: "deleted midway",
      });
      const status = await finished(started.exportItemId, started.jobId, owner);
      expect(status.status).toBe("failed");
      expect(status.statusMessage).toMatch(/the service this export reads \(item \w+\) no longer exists/);
      expect(status.statusMessage).not.toMatch(/internal/);
      expect(errorLogs.slice(logged)).toEqual([]);
    } finally {
      featureData.exportPage = exportPage;
    }
  });

  function ownerToken(): string {
    return ownerTok;
  }
});
