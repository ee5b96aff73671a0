import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import {
  addAttachment,
  deleteAttachments,
  getAttachments,
  updateAttachment,
} from "@esri/arcgis-rest-feature-service";
import { ArcGISIdentityManager } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attack, MB, multipart, multipartHeaders } from "../helpers/attack.js";
import { findInvalidRows } from "../helpers/invariants.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Attachments of features of hosted layers (`hasAttachments: true`), through the REST API as
 * clients call it: files sent as multipart uploads with the token last (as Esri's clients send
 * it), listed, downloaded byte for byte, replaced and deleted; gone with their feature, layer and
 * service; refused where the layer has none or the caller may not. Expected answers are written
 * by hand from the files sent here.
 */

type User = { username: string; password: string; token: string };

const GUID = /^\{[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}\}$/;
/** The policy every file answer carries (README, "Uploaded content is never a page of the portal"). */
const FILE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

const NOTES = Buffer.from("Field notes: fence broken at the north gate.\n");
/** Three chunks of 1 MiB and a part of a fourth. */
const PHOTO = randomBytes(3 * MB + 12_345);

const SITE_FIELDS = [
  { name: "GlobalID", type: "esriFieldTypeGlobalID", alias: "GlobalID" },
  { name: "label", type: "esriFieldTypeString", length: 50 },
];

describe("feature attachments", () => {
  let portal: TestPortal;
  let owner: User;
  let member: User;
  let services: string;
  let admin: string;
  /** `Field`: Query only, shared with the organization; layer 0 has attachments, layer 1 not. */
  let sites: string;
  let plain: string;
  /** `Survey`: Query and Create, shared with the organization. */
  let survey: string;
  /** `Hidden`: shared with no one. */
  let hidden: string;
  /** Features of `sites` by label. */
  const site: Record<string, number> = {};

  const db = () => portal.portico.db.kysely;

  /** A multipart POST with the token as the last field, as Esri's clients send it. */
  async function upload(
    url: string,
    fields: Record<string, string>,
    file: { name: string; type: string; bytes: Buffer } | undefined,
    token: string | undefined,
  ): Promise<any> {
    const body = new FormData();
    body.append("f", "json");
    for (const [k, v] of Object.entries(fields)) body.append(k, v);
    if (file) body.append("attachment", new Blob([file.bytes], { type: file.type }), file.name);
    if (token) body.append("token", token);
    const res = await fetch(url, { method: "POST", body });
    expect(res.status).toBe(200);
    return res.json();
  }

  async function addFeatures(layer: string, labels: string[], token: string): Promise<number[]> {
    const r = await portal.post(
      `${layer}/addFeatures`,
      { features: labels.map((label, i) => ({ attributes: { label }, geometry: { x: i, y: i } })) },
      token,
    );
    expect(
      r.addResults.every((a: { success: boolean }) => a.success),
      JSON.stringify(r),
    ).toBe(true);
    return r.addResults.map((a: { objectId: number }) => a.objectId);
  }

  async function createService(
    name: string,
    capabilities: string,
    layers: Record<string, unknown>[],
    share: boolean,
  ): Promise<string> {
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      { createParameters: { name, capabilities }, outputType: "featureService" },
      owner.token,
    );
    expect(created.success, JSON.stringify(created)).toBe(true);
    const added = await portal.post(
      `${admin}/${name}/FeatureServer/addToDefinition`,
      { addToDefinition: { layers } },
      owner.token,
    );
    expect(added.success, JSON.stringify(added)).toBe(true);
    if (share) {
      const shared = await portal.post(
        `/content/users/${owner.username}/items/${created.itemId}/share`,
        { org: true },
        owner.token,
      );
      expect(shared.notSharedWith).toEqual([]);
    }
    return `${services}/${name}/FeatureServer`;
  }

  const lastEdit = async (layer: string) =>
    (await portal.get(layer, {}, owner.token)).editingInfo.lastEditDate as number;

  /** Attachment rows and chunk rows of a feature, straight from the database. */
  async function stored(itemId: string, layerId: number, objectId: number) {
    const rows = await db()
      .selectFrom("feature_attachments")
      .select(["attachment_id", "file_id", "size"])
      .where("item_id", "=", itemId)
      .where("layer_id", "=", layerId)
      .where("object_id", "=", objectId)
      .execute();
    const fileIds = rows.map((r) => r.file_id);
    const chunks =
      fileIds.length === 0
        ? []
        : await db()
            .selectFrom("feature_attachment_chunks")
            .select(["file_id", "seq"])
            .where("file_id", "in", fileIds)
            .execute();
    return { rows, chunks };
  }

  const countAll = async () => {
    const a = await db()
      .selectFrom("feature_attachments")
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirstOrThrow();
    const c = await db()
      .selectFrom("feature_attachment_chunks")
      .select((eb) => eb.fn.countAll().as("n"))
      .executeTakeFirstOrThrow();
    return [Number(a.n), Number(c.n)];
  };

  const itemIdOf = async (service: string) =>
    (await portal.get(service, {}, owner.token)).serviceItemId as string;

  beforeAll(async () => {
    portal = await startTestPortal();
    owner = await portal.addUser("att_owner", "org_publisher");
    member = await portal.addUser("att_member", "org_user");
    const server = portal.api.replace(/\/sharing\/rest$/, "/rest");
    services = `${server}/services`;
    admin = `${server}/admin/services`;
    const field = await createService(
      "Field",
      "Query",
      [
        { name: "Sites", geometryType: "esriGeometryPoint", hasAttachments: true, fields: SITE_FIELDS },
        { name: "Plain", geometryType: "esriGeometryPoint", fields: SITE_FIELDS },
      ],
      true,
    );
    sites = `${field}/0`;
    plain = `${field}/1`;
    survey = `${await createService(
      "Survey",
      "Query,Create,Editing",
      [{ name: "Reports", geometryType: "esriGeometryPoint", hasAttachments: true, fields: SITE_FIELDS }],
      true,
    )}/0`;
    hidden = `${await createService(
      "Hidden",
      "Query",
      [{ name: "Secret", geometryType: "esriGeometryPoint", hasAttachments: true, fields: SITE_FIELDS }],
      false,
    )}/0`;
    const labels = ["gate", "well", "barn", "shed"];
    const ids = await addFeatures(sites, labels, owner.token);
    labels.forEach((label, i) => {
      site[label] = ids[i] as number;
    });
    await addFeatures(plain, ["plain"], owner.token);
    await addFeatures(hidden, ["secret"], owner.token);
  });
  afterAll(async () => {
    await portal?.stop();
  });

  it("describes the layer as having attachments, answered per feature and not by upload id", async () => {
    const layer = await portal.get(sites, {}, member.token);
    expect(layer.hasAttachments).toBe(true);
    expect(layer.supportsAttachmentsByUploadId).toBe(false);
    expect(layer.advancedQueryCapabilities.supportsQueryAttachments).toBe(false);
    expect((await portal.get(plain, {}, member.token)).hasAttachments).toBe(false);
  });

  it("adds a small and a multi-MiB file, lists them and streams each back byte for byte", async () => {
    const gate = site.gate as number;
    const before = await lastEdit(sites);
    const first = await upload(
      `${sites}/${gate}/addAttachment`,
      {},
      { name: "notes.txt", type: "text/plain", bytes: NOTES },
      owner.token,
    );
    expect(first).toEqual({
      addAttachmentResult: { objectId: 1, globalId: expect.any(String), success: true },
    });
    expect(first.addAttachmentResult.globalId).toMatch(GUID);
    const afterFirst = await lastEdit(sites);
    expect(afterFirst).toBeGreaterThan(before);

    const second = await upload(
      `${sites}/${gate}/addAttachment`,
      { keywords: "north,photo", returnEditMoment: "true" },
      { name: "photo.jpg", type: "image/jpeg", bytes: PHOTO },
      owner.token,
    );
    expect(second).toMatchObject({ addAttachmentResult: { objectId: 2, success: true } });
    expect(second.editMoment).toEqual(expect.any(Number));
    expect(await lastEdit(sites)).toBeGreaterThan(afterFirst);

    const feature = await portal.get(
      `${sites}/query`,
      { objectIds: gate, outFields: "GlobalID" },
      owner.token,
    );
    const parentGlobalId = feature.features[0].attributes.GlobalID as string;
    expect(parentGlobalId).toMatch(GUID);
    const list = await portal.get(`${sites}/${gate}/attachments`, {}, member.token);
    expect(list).toEqual({
      attachmentInfos: [
        {
          id: 1,
          globalId: first.addAttachmentResult.globalId,
          parentGlobalId,
          name: "notes.txt",
          contentType: "text/plain",
          size: NOTES.length,
          keywords: "",
        },
        {
          id: 2,
          globalId: second.addAttachmentResult.globalId,
          parentGlobalId,
          name: "photo.jpg",
          contentType: "image/jpeg",
          size: 3 * MB + 12_345,
          keywords: "north,photo",
        },
      ],
    });

    // The photo is four chunks: three of 1 MiB and one of 12,345 bytes.
    const { chunks } = await stored(await itemIdOf(sites.replace(/\/0$/, "")), 0, gate);
    expect(chunks).toHaveLength(1 + 4);

    for (const [id, bytes, type, disposition] of [
      [1, NOTES, "text/plain", 'inline; filename="notes.txt"'],
      [2, PHOTO, "image/jpeg", 'inline; filename="photo.jpg"'],
    ] as const) {
      const res = await fetch(`${sites}/${gate}/attachments/${id}?token=${member.token}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe(type);
      expect(res.headers.get("content-length")).toBe(String(bytes.length));
      expect(res.headers.get("content-disposition")).toBe(disposition);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("content-security-policy")).toBe(FILE_POLICY);
      expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    }
  });

  it("never serves an uploaded page as a page: HTML is answered as a download of octets", async () => {
    const well = site.well as number;
    const page = Buffer.from("<html><script>alert(document.cookie)</script></html>");
    const r = await upload(
      `${sites}/${well}/addAttachment`,
      {},
      { name: "page.html", type: "text/html", bytes: page },
      owner.token,
    );
    expect(r.addAttachmentResult.success).toBe(true);
    const res = await fetch(
      `${sites}/${well}/attachments/${r.addAttachmentResult.objectId}?token=${owner.token}`,
    );
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="page.html"');
    expect(res.headers.get("content-security-policy")).toBe(FILE_POLICY);
    expect(Buffer.from(await res.arrayBuffer()).equals(page)).toBe(true);
  });

  it("replaces an attachment's file under the same id and GlobalID, and drops the old bytes", async () => {
    const barn = site.barn as number;
    const itemId = await itemIdOf(sites.replace(/\/0$/, ""));
    const added = await upload(
      `${sites}/${barn}/addAttachment`,
      { keywords: "draft" },
      { name: "plan.txt", type: "text/plain", bytes: Buffer.from("first plan") },
      owner.token,
    );
    const id = added.addAttachmentResult.objectId as number;
    const oldFile = (await stored(itemId, 0, barn)).rows[0]?.file_id;
    const before = await lastEdit(sites);
    const csv = Buffer.from("post,state\n1,broken\n2,fixed\n");
    const updated = await upload(
      `${sites}/${barn}/updateAttachment`,
      { attachmentId: String(id) },
      { name: "posts.csv", type: "text/csv", bytes: csv },
      owner.token,
    );
    expect(updated).toEqual({
      updateAttachmentResult: { objectId: id, globalId: added.addAttachmentResult.globalId, success: true },
    });
    expect(await lastEdit(sites)).toBeGreaterThan(before);
    const list = await portal.get(`${sites}/${barn}/attachments`, {}, owner.token);
    expect(list.attachmentInfos).toMatchObject([
      { id, name: "posts.csv", contentType: "text/csv", size: csv.length, keywords: "draft" },
    ]);
    const res = await fetch(`${sites}/${barn}/attachments/${id}?token=${owner.token}`);
    expect(res.headers.get("content-disposition")).toBe('attachment; filename="posts.csv"');
    expect(Buffer.from(await res.arrayBuffer()).equals(csv)).toBe(true);
    const now = await stored(itemId, 0, barn);
    expect(now.rows.map((r) => r.file_id)).not.toContain(oldFile);
    const oldChunks = await db()
      .selectFrom("feature_attachment_chunks")
      .select("seq")
      .where("file_id", "=", oldFile as string)
      .execute();
    expect(oldChunks).toEqual([]);

    // Keywords sent with an update replace the old ones.
    await upload(
      `${sites}/${barn}/updateAttachment`,
      { attachmentId: String(id), keywords: "final" },
      { name: "posts.csv", type: "text/csv", bytes: csv },
      owner.token,
    );
    expect(
      (await portal.get(`${sites}/${barn}/attachments`, {}, owner.token)).attachmentInfos[0].keywords,
    ).toBe("final");

    // An id the feature does not have is reported, and moves nothing.
    const unchanged = await lastEdit(sites);
    const missing = await upload(
      `${sites}/${barn}/updateAttachment`,
      { attachmentId: "9999" },
      { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") },
      owner.token,
    );
    expect(missing.updateAttachmentResult).toMatchObject({
      objectId: 9999,
      success: false,
      error: { code: 1011 },
    });
    expect(await lastEdit(sites)).toBe(unchanged);
  });

  it("deletes attachments: a missing id undoes the others by default, and fails alone without rollback", async () => {
    const shed = site.shed as number;
    const ids: number[] = [];
    const globals: string[] = [];
    for (const name of ["a.txt", "b.txt"]) {
      const r = await upload(
        `${sites}/${shed}/addAttachment`,
        {},
        { name, type: "text/plain", bytes: Buffer.from(name) },
        owner.token,
      );
      ids.push(r.addAttachmentResult.objectId);
      globals.push(r.addAttachmentResult.globalId);
    }
    const [a, b] = ids as [number, number];
    const infos = async () =>
      (await portal.get(`${sites}/${shed}/attachments`, {}, owner.token)).attachmentInfos.map(
        (i: { id: number }) => i.id,
      );

    const before = await lastEdit(sites);
    const undone = await portal.post(
      `${sites}/${shed}/deleteAttachments`,
      { attachmentIds: `${a},9999` },
      owner.token,
    );
    expect(undone.deleteAttachmentResults).toEqual([
      {
        objectId: a,
        globalId: globals[0],
        success: false,
        error: { code: 1003, description: "Operation rolled back." },
      },
      {
        objectId: 9999,
        globalId: null,
        success: false,
        error: { code: 1011, description: "Attachment 9999 is missing." },
      },
    ]);
    expect(await infos()).toEqual([a, b]);
    expect(await lastEdit(sites)).toBe(before);

    const partial = await portal.post(
      `${sites}/${shed}/deleteAttachments`,
      { attachmentIds: `${a}, 9999`, rollbackOnFailure: false, returnEditMoment: true },
      owner.token,
    );
    expect(partial.deleteAttachmentResults).toMatchObject([
      { objectId: a, globalId: globals[0], success: true },
      { objectId: 9999, success: false },
    ]);
    expect(partial.editMoment).toEqual(expect.any(Number));
    expect(await infos()).toEqual([b]);
    expect(await lastEdit(sites)).toBeGreaterThan(before);
    const gone = await portal.get(`${sites}/${shed}/attachments/${a}`, {}, owner.token);
    expect(gone.error).toMatchObject({ code: 400, messageCode: "GWM_0404" });

    // An attachment of another feature is not this feature's to delete.
    const other = await portal.post(
      `${sites}/${site.gate}/deleteAttachments`,
      { attachmentIds: String(b) },
      owner.token,
    );
    expect(other.deleteAttachmentResults).toMatchObject([{ objectId: b, success: false }]);
    expect(await infos()).toEqual([b]);
  });

  it("deletes a feature's attachments with the feature, a layer's with the layer, a service's with its item", async () => {
    const [doomed, kept] = await addFeatures(sites, ["doomed", "kept"], owner.token);
    const itemId = await itemIdOf(sites.replace(/\/0$/, ""));
    for (const oid of [doomed, kept, doomed] as number[]) {
      const r = await upload(
        `${sites}/${oid}/addAttachment`,
        {},
        { name: "big.bin", type: "application/octet-stream", bytes: randomBytes(MB + 1) },
        owner.token,
      );
      expect(r.addAttachmentResult.success).toBe(true);
    }
    expect((await stored(itemId, 0, doomed as number)).chunks).toHaveLength(4);
    const deleted = await portal.post(`${sites}/deleteFeatures`, { objectIds: String(doomed) }, owner.token);
    expect(deleted.deleteResults).toMatchObject([{ objectId: doomed, success: true }]);
    expect(await stored(itemId, 0, doomed as number)).toEqual({ rows: [], chunks: [] });
    expect((await stored(itemId, 0, kept as number)).rows).toHaveLength(1);
    const listed = await portal.get(`${sites}/${doomed}/attachments`, {}, owner.token);
    expect(listed.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });

    // applyEdits deletes go the same way.
    const r = await portal.post(`${sites}/applyEdits`, { deletes: String(kept) }, owner.token);
    expect(r.deleteResults).toMatchObject([{ objectId: kept, success: true }]);
    expect(await stored(itemId, 0, kept as number)).toEqual({ rows: [], chunks: [] });

    // A layer dropped from the definition, and a deleted service, take theirs along.
    const scratch = await createService(
      "Scratch",
      "Query",
      [
        { name: "One", geometryType: "esriGeometryPoint", hasAttachments: true, fields: SITE_FIELDS },
        { name: "Two", geometryType: "esriGeometryPoint", hasAttachments: true, fields: SITE_FIELDS },
      ],
      false,
    );
    const scratchItem = await itemIdOf(scratch);
    for (const layerId of [0, 1]) {
      const [oid] = await addFeatures(`${scratch}/${layerId}`, ["x"], owner.token);
      const a = await upload(
        `${scratch}/${layerId}/${oid}/addAttachment`,
        {},
        { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") },
        owner.token,
      );
      expect(a.addAttachmentResult.success).toBe(true);
    }
    const inScratch = async () =>
      (
        await db()
          .selectFrom("feature_attachments")
          .select("layer_id")
          .where("item_id", "=", scratchItem)
          .orderBy("layer_id")
          .execute()
      ).map((r) => Number(r.layer_id));
    expect(await inScratch()).toEqual([0, 1]);
    const dropped = await portal.post(
      `${admin}/Scratch/FeatureServer/deleteFromDefinition`,
      { deleteFromDefinition: { layers: [{ id: 1 }] } },
      owner.token,
    );
    expect(dropped.success).toBe(true);
    expect(await inScratch()).toEqual([0]);
    const [attachmentsBefore, chunksBefore] = await countAll();
    const gone = await portal.post(
      `/content/users/${owner.username}/items/${scratchItem}/delete`,
      {},
      owner.token,
    );
    expect(gone.success).toBe(true);
    expect(await inScratch()).toEqual([]);
    expect(await countAll()).toEqual([(attachmentsBefore as number) - 1, (chunksBefore as number) - 1]);
  });

  it("refuses every attachment operation on a layer without hasAttachments", async () => {
    const noAttachments = { code: 400, messageCode: "SVC_0004" };
    const file = { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") };
    expect((await portal.get(`${plain}/1/attachments`, {}, owner.token)).error).toMatchObject(noAttachments);
    expect((await portal.get(`${plain}/1/attachments/1`, {}, owner.token)).error).toMatchObject(
      noAttachments,
    );
    expect((await upload(`${plain}/1/addAttachment`, {}, file, owner.token)).error).toMatchObject(
      noAttachments,
    );
    expect(
      (await upload(`${plain}/1/updateAttachment`, { attachmentId: "1" }, file, owner.token)).error,
    ).toMatchObject(noAttachments);
    expect(
      (await portal.post(`${plain}/1/deleteAttachments`, { attachmentIds: "1" }, owner.token)).error,
    ).toMatchObject(noAttachments);
  });

  it("needs the file itself: a missing attachment and an uploadId are refused naming the parameter", async () => {
    const missing = await upload(`${sites}/${site.gate}/addAttachment`, {}, undefined, owner.token);
    expect(missing.error).toMatchObject({ code: 400, messageCode: "PARAM_0001" });
    expect(missing.error.message).toContain("'attachment'");
    const byUpload = await portal.post(
      `${sites}/${site.gate}/addAttachment`,
      { uploadId: "abc" },
      owner.token,
    );
    expect(byUpload.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
    expect(byUpload.error.message).toContain("'uploadId'");
    const noFeature = await upload(
      `${sites}/424242/addAttachment`,
      {},
      { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") },
      owner.token,
    );
    expect(noFeature).toEqual({
      addAttachmentResult: {
        objectId: null,
        globalId: null,
        success: false,
        error: { code: 1011, description: "Object is missing." },
      },
    });
  });

  it("refuses anonymous callers (499) and members who may not edit (403), writing nothing", async () => {
    const file = { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") };
    const counts = await countAll();
    const edited = await lastEdit(sites);
    const tokenRequired = { code: 499, messageCode: "GWM_0002" };
    // Anonymous callers see neither the org-shared service nor the unshared one.
    for (const layer of [sites, hidden]) {
      expect((await portal.get(`${layer}/1/attachments`)).error).toMatchObject(tokenRequired);
      expect((await upload(`${layer}/1/addAttachment`, {}, file, undefined)).error).toMatchObject(
        tokenRequired,
      );
    }
    // A member does not see the unshared service at all.
    expect((await portal.get(`${hidden}/1/attachments`, {}, member.token)).error).toMatchObject({
      code: 400,
      messageCode: "SVC_0002",
    });
    // A member sees the org-shared layer (Query only): reads its attachments, changes none.
    const gate = site.gate as number;
    expect((await portal.get(`${sites}/${gate}/attachments`, {}, member.token)).attachmentInfos.length).toBe(
      2,
    );
    const forbidden = { code: 403, messageCode: "GWM_0004" };
    expect((await upload(`${sites}/${gate}/addAttachment`, {}, file, member.token)).error).toMatchObject(
      forbidden,
    );
    expect(
      (await upload(`${sites}/${gate}/updateAttachment`, { attachmentId: "1" }, file, member.token)).error,
    ).toMatchObject(forbidden);
    expect(
      (await portal.post(`${sites}/${gate}/deleteAttachments`, { attachmentIds: "1" }, member.token)).error,
    ).toMatchObject(forbidden);
    expect(await countAll()).toEqual(counts);
    expect(await lastEdit(sites)).toBe(edited);
  });

  it("lets a layer that only takes new features take new attachments, and nothing more", async () => {
    const [report] = await addFeatures(survey, ["report"], member.token);
    const added = await upload(
      `${survey}/${report}/addAttachment`,
      {},
      { name: "evidence.txt", type: "text/plain", bytes: Buffer.from("seen at noon") },
      member.token,
    );
    expect(added.addAttachmentResult).toMatchObject({ objectId: 1, success: true });
    const file = { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") };
    const forbidden = { code: 403, messageCode: "GWM_0004" };
    expect(
      (await upload(`${survey}/${report}/updateAttachment`, { attachmentId: "1" }, file, member.token)).error,
    ).toMatchObject(forbidden);
    expect(
      (await portal.post(`${survey}/${report}/deleteAttachments`, { attachmentIds: "1" }, member.token))
        .error,
    ).toMatchObject(forbidden);
    expect(
      (await portal.get(`${survey}/${report}/attachments`, {}, member.token)).attachmentInfos,
    ).toHaveLength(1);
  });

  it("with ownership-based access control, reaches the attachments of one's own features only", async () => {
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: {
          name: "Tracked",
          capabilities: "Query,Create,Update,Editing",
          editorTrackingInfo: {
            enableEditorTracking: true,
            enableOwnershipAccessControl: true,
            allowOthersToQuery: true,
            allowOthersToUpdate: false,
          },
        },
        outputType: "featureService",
      },
      owner.token,
    );
    expect(created.success).toBe(true);
    await portal.post(
      `${admin}/Tracked/FeatureServer/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            { name: "Mine", geometryType: "esriGeometryPoint", hasAttachments: true, fields: SITE_FIELDS },
          ],
        },
      },
      owner.token,
    );
    await portal.post(
      `/content/users/${owner.username}/items/${created.itemId}/share`,
      { org: true },
      owner.token,
    );
    const tracked = `${services}/Tracked/FeatureServer/0`;
    const other = await portal.addUser("att_other", "org_user");
    const [mine] = await addFeatures(tracked, ["mine"], member.token);
    const [theirs] = await addFeatures(tracked, ["theirs"], other.token);
    const file = { name: "x.txt", type: "text/plain", bytes: Buffer.from("x") };
    const onMine = await upload(`${tracked}/${mine}/addAttachment`, {}, file, member.token);
    expect(onMine.addAttachmentResult).toMatchObject({ objectId: 1, success: true });
    const onTheirs = await upload(`${tracked}/${theirs}/addAttachment`, {}, file, member.token);
    expect(onTheirs.addAttachmentResult).toMatchObject({ success: false, error: { code: 1011 } });
    const byOther = await upload(`${tracked}/${theirs}/addAttachment`, {}, file, other.token);
    expect(byOther.addAttachmentResult).toMatchObject({ objectId: 2, success: true });
    // Others may query: the member reads the other's attachments, and deletes none of them.
    const listed = await portal.get(`${tracked}/${theirs}/attachments`, {}, member.token);
    expect(listed.attachmentInfos.map((i: { id: number }) => i.id)).toEqual([2]);
    const refused = await portal.post(
      `${tracked}/${theirs}/deleteAttachments`,
      { attachmentIds: "2" },
      member.token,
    );
    expect(refused.deleteAttachmentResults).toMatchObject([{ objectId: 2, success: false }]);
    expect(
      (await portal.get(`${tracked}/${theirs}/attachments`, {}, other.token)).attachmentInfos,
    ).toHaveLength(1);
    // The service's owner reaches every feature.
    const byOwner = await portal.post(
      `${tracked}/${theirs}/deleteAttachments`,
      { attachmentIds: "2" },
      owner.token,
    );
    expect(byOwner.deleteAttachmentResults).toMatchObject([{ objectId: 2, success: true }]);
  });

  it("refuses a file over 100 MB naming the parameter, keeping nothing of it", async () => {
    const well = site.well as number;
    const counts = await countAll();
    const body = multipart([
      { name: "f", value: "json" },
      { name: "token", value: owner.token },
      { name: "attachment", filename: "huge.bin", bytes: 100 * MB + 1 },
    ]);
    const sent = attack(`${sites}/${well}/addAttachment`, multipartHeaders(body.length), body.chunks);
    const answer = await sent.answer;
    sent.destroy();
    expect(answer).toBeDefined();
    const error = JSON.parse(answer as string).error;
    expect(error).toMatchObject({ code: 400, messageCode: "PARAM_0005" });
    expect(error.message).toContain("'attachment'");
    expect(error.message).toContain("100 MB");
    expect(await countAll()).toEqual(counts);
    expect(fs.readdirSync(path.join(portal.store.dataDir, "tmp"))).toEqual([]);
  }, 120_000);

  it("works with Esri's client: addAttachment, getAttachments, updateAttachment, deleteAttachments", async () => {
    const session = await ArcGISIdentityManager.signIn({
      username: owner.username,
      password: owner.password,
      portal: portal.api,
    });
    const [oid] = await addFeatures(sites, ["esri"], owner.token);
    const featureId = oid as number;
    const added = await addAttachment({
      url: sites,
      featureId,
      attachment: new File([Buffer.from("from arcgis-rest-js")], "esri.txt", { type: "text/plain" }),
      authentication: session,
    });
    expect(added.addAttachmentResult).toMatchObject({ success: true });
    const attachmentId = added.addAttachmentResult.objectId;
    const listed = await getAttachments({ url: sites, featureId, authentication: session });
    expect(listed.attachmentInfos).toMatchObject([
      { id: attachmentId, name: "esri.txt", contentType: "text/plain", size: 19 },
    ]);
    const updated = await updateAttachment({
      url: sites,
      featureId,
      attachmentId,
      attachment: new File([Buffer.from("replaced")], "esri-2.txt", { type: "text/plain" }),
      authentication: session,
    });
    expect(updated.updateAttachmentResult).toMatchObject({ objectId: attachmentId, success: true });
    const relisted = await getAttachments({ url: sites, featureId, authentication: session });
    expect(relisted.attachmentInfos).toMatchObject([{ id: attachmentId, name: "esri-2.txt", size: 8 }]);
    const deleted = await deleteAttachments({
      url: sites,
      featureId,
      attachmentIds: [attachmentId],
      authentication: session,
    });
    expect(deleted.deleteAttachmentResults).toMatchObject([{ objectId: attachmentId, success: true }]);
    expect(
      (await getAttachments({ url: sites, featureId, authentication: session })).attachmentInfos,
    ).toEqual([]);
  });

  it("leaves no attachment without its feature, and no file without its bytes", async () => {
    expect(await findInvalidRows(portal.portico.db)).toEqual([]);
    // The rule finds an orphan: a row planted for a feature that does not exist, and removed.
    const itemId = await itemIdOf(sites.replace(/\/0$/, ""));
    await db()
      .insertInto("feature_attachments")
      .values({
        item_id: itemId,
        layer_id: 0,
        object_id: 777777,
        attachment_id: 777777,
        global_id: "{00000000-0000-0000-0000-000000000000}",
        name: "orphan.txt",
        content_type: "text/plain",
        keywords: "",
        file_id: "planted-orphan",
        size: 5,
      })
      .execute();
    try {
      expect(await findInvalidRows(portal.portico.db)).toEqual([
        `attachment: feature_attachments of ${itemId} layer 0: feature 777777 does not exist`,
        "file: feature_attachments planted-orphan: size 5 but 0 chunks of 0 bytes",
      ]);
    } finally {
      await db().deleteFrom("feature_attachments").where("file_id", "=", "planted-orphan").execute();
    }
  });
});
