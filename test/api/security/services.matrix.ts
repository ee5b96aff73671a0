import { expect } from "vitest";
import {
  type Area,
  acct,
  addLayer,
  adminPath,
  asAdmin,
  bootstrap,
  type CallContext,
  type Case,
  c,
  E403,
  E499,
  EVERYONE,
  must,
  newService,
  OK,
  OWNER_OR_ADMIN,
  portal,
  row,
  SERVICE_HIDDEN,
  type Setup,
  SIGNED_IN,
  uid,
} from "./harness.js";

/*
 * The security matrix of hosted feature services (the routes below `/rest`: rest, rest-services,
 * rest-services-attachments and rest-admin-services): reading layers, their features and
 * attachments, editing them, and changing the services' definitions.
 */

/** Edits of a hosted layer whose service allows queries only. */
const FEATURE_EDITS = [
  c("own", row(E499, OK, OK, OK)),
  c("other", row(E499, E403, E403, OK)),
  c("private", row(E499, { code: 400, messageCode: "SVC_0002" }, { code: 400, messageCode: "SVC_0002" }, OK)),
];

/** queryRelatedRecords of a layer the caller may read. */
const NO_RELATIONSHIP = { code: 400, messageCode: "PARAM_0002" };

const EXPECTED: Record<string, readonly Case[]> = {
  "server.info": [c("org", EVERYONE)],
  // Hosted services are read as their items are shared; changed by the owner or administrators.
  "featureServer.service": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.layer": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.adminService": OWNER_OR_ADMIN,
  "featureServer.addToDefinition": OWNER_OR_ADMIN,
  "featureServer.updateDefinition": OWNER_OR_ADMIN,
  "featureServer.deleteFromDefinition": OWNER_OR_ADMIN,
  "featureServer.layerAddToDefinition": OWNER_OR_ADMIN,
  "featureServer.layerUpdateDefinition": OWNER_OR_ADMIN,
  "featureServer.layerDeleteFromDefinition": OWNER_OR_ADMIN,
  "featureServer.layers": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.sources": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  // Layer data is read as the service's item is shared (the services here allow Query)...
  "featureServer.query": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  // Hosted layers take part in no relationship: a caller who may read the layer is told the
  // relationshipId is not one of it; others get the answer of a missing service.
  "featureServer.queryRelatedRecords": [
    c("own", row(E499, NO_RELATIONSHIP, NO_RELATIONSHIP, NO_RELATIONSHIP)),
    c("other", row(E499, NO_RELATIONSHIP, NO_RELATIONSHIP, NO_RELATIONSHIP)),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, NO_RELATIONSHIP)),
  ],
  "featureServer.serviceQuery": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.feature": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  // ...and edited by the owner and administrators always, others only where the capabilities
  // allow editing (not here): members who see the service are refused, others hear it is missing.
  "featureServer.applyEdits": FEATURE_EDITS,
  "featureServer.addFeatures": FEATURE_EDITS,
  "featureServer.updateFeatures": FEATURE_EDITS,
  "featureServer.deleteFeatures": FEATURE_EDITS,
  "featureServer.serviceApplyEdits": FEATURE_EDITS,
  // Attachments are read as the layer is queried, and changed as its features are updated.
  "featureServer.attachments": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.attachment": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.addAttachment": FEATURE_EDITS,
  "featureServer.updateAttachment": FEATURE_EDITS,
  "featureServer.deleteAttachments": FEATURE_EDITS,
};

/** Hosted feature services (by name), each with layer 0. */
const ownService = {} as Record<"member" | "publisher" | "admin", string>;
let orgService: string;
let privateService: string;

/** A file to attach, and the bytes a download of it answers. */
const ATTACHMENT = { name: "note.txt", type: "text/plain", bytes: Buffer.from("attached note") };

/** A new feature of layer 0 of service `name` with one attachment, added by the administrator. */
async function featureWithAttachment(name: string): Promise<{ objectId: string; attachmentId: string }> {
  const layer = `${portal.portico.address}/rest/services/${name}/FeatureServer/0`;
  const added = await asAdmin(`${layer}/addFeatures`, {
    features: [{ attributes: {}, geometry: { x: 1, y: 2 } }],
  });
  const objectId = String(added.addResults[0].objectId);
  const body = new FormData();
  body.append("f", "json");
  body.append("token", bootstrap.token);
  body.append("attachment", new Blob([ATTACHMENT.bytes], { type: ATTACHMENT.type }), ATTACHMENT.name);
  const r = (await (
    await fetch(`${layer}/${objectId}/addAttachment`, { method: "POST", body })
  ).json()) as any;
  if (!r.addAttachmentResult?.success) throw new Error(`addAttachment: ${JSON.stringify(r)}`);
  return { objectId, attachmentId: String(r.addAttachmentResult.objectId) };
}

const readService =
  (extra: Record<string, string> = {}): Setup =>
  async (ctx) => {
    const name =
      ctx.on === "own"
        ? ctx.who === "anonymous"
          ? orgService
          : ownService[ctx.who]
        : ctx.on === "other"
          ? orgService
          : privateService;
    return { path: { name, ...extra } };
  };

/** The service whose definition a call changes: the caller's own, or `owner`'s org-shared one. */
const changedService = (ctx: CallContext) =>
  ctx.on === "own" && ctx.who !== "anonymous" ? ownService[ctx.who] : orgService;

const SETUP: Record<string, Setup> = {
  "server.info": async () => ({}),
  "featureServer.service": readService(),
  "featureServer.layer": readService({ layerId: "0" }),
  "featureServer.addToDefinition": async (ctx) => ({
    path: { name: changedService(ctx) },
    params: { addToDefinition: { layers: [{ name: `Layer ${uid()}`, geometryType: "esriGeometryPoint" }] } },
  }),
  "featureServer.layers": readService(),
  "featureServer.adminService": async (ctx) => ({
    path: { name: changedService(ctx) },
    check: (r) => expect(r.adminServiceInfo.type).toBe("FeatureServer"),
  }),
  "featureServer.queryRelatedRecords": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { relationshipId: 0, objectIds: "1" },
  }),
  "featureServer.sources": async (ctx) => ({
    ...(await readService()(ctx)),
    check: (r) => expect(r.services).toEqual([]),
  }),
  "featureServer.query": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { where: "1=1", returnCountOnly: true },
    check: (r) => expect(typeof r.count).toBe("number"),
  }),
  "featureServer.serviceQuery": async (ctx) => ({
    ...(await readService()(ctx)),
    params: { layerDefs: { "0": "1=1" }, returnCountOnly: true },
    check: (r) => expect(r.layers[0].id).toBe(0),
  }),
  "featureServer.feature": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const name = (setup.path as { name: string }).name;
    const added = await asAdmin(
      `${portal.portico.address}/rest/services/${name}/FeatureServer/0/addFeatures`,
      {
        features: [{ attributes: {}, geometry: { x: 1, y: 2 } }],
      },
    );
    return { path: { ...setup.path, objectId: String(added.addResults[0].objectId) } };
  },
  "featureServer.applyEdits": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { adds: [{ attributes: {}, geometry: { x: 1, y: 2 } }] },
    check: (r) => expect(r.addResults[0].success).toBe(true),
  }),
  "featureServer.addFeatures": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { features: [{ attributes: {}, geometry: { x: 1, y: 2 } }] },
    check: (r) => expect(r.addResults[0].success).toBe(true),
  }),
  "featureServer.updateFeatures": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { features: [{ attributes: { OBJECTID: 999999 } }] },
    check: (r) => expect(r.updateResults).toHaveLength(1),
  }),
  "featureServer.deleteFeatures": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { objectIds: "999999" },
    check: (r) => expect(r.deleteResults).toHaveLength(1),
  }),
  "featureServer.serviceApplyEdits": async (ctx) => ({
    ...(await readService()(ctx)),
    params: { edits: [{ id: 0, adds: [{ attributes: {}, geometry: { x: 1, y: 2 } }] }] },
    check: (r) => expect(r[0].addResults[0].success).toBe(true),
  }),
  "featureServer.attachments": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      check: (r) => expect(r.attachmentInfos).toMatchObject([{ id: Number(attachmentId) }]),
    };
  },
  "featureServer.attachment": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId, attachmentId },
      check: (r) => expect(r).toEqual({ contentType: ATTACHMENT.type, bytes: ATTACHMENT.bytes.length }),
    };
  },
  "featureServer.addAttachment": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      files: { attachment: ATTACHMENT },
      check: (r) => expect(r.addAttachmentResult.success).toBe(true),
    };
  },
  "featureServer.updateAttachment": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      params: { attachmentId },
      files: { attachment: ATTACHMENT },
      check: (r) => expect(r.updateAttachmentResult.success).toBe(true),
    };
  },
  "featureServer.deleteAttachments": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      params: { attachmentIds: attachmentId },
      check: (r) => expect(r.deleteAttachmentResults).toMatchObject([{ success: true }]),
    };
  },
  "featureServer.updateDefinition": async (ctx) => ({
    path: { name: changedService(ctx) },
    params: { updateDefinition: { description: `described ${uid()}` } },
  }),
  "featureServer.deleteFromDefinition": async (ctx) => {
    const name = changedService(ctx);
    return { path: { name }, params: { deleteFromDefinition: { layers: [{ id: await addLayer(name) }] } } };
  },
  "featureServer.layerAddToDefinition": async (ctx) => ({
    path: { name: changedService(ctx), layerId: "0" },
    params: { addToDefinition: { fields: [{ name: `f_${uid()}`, type: "esriFieldTypeInteger" }] } },
  }),
  "featureServer.layerUpdateDefinition": async (ctx) => ({
    path: { name: changedService(ctx), layerId: "0" },
    params: { updateDefinition: { description: `described ${uid()}` } },
  }),
  "featureServer.layerDeleteFromDefinition": async (ctx) => {
    const name = changedService(ctx);
    const field = `f_${uid()}`;
    await asAdmin(adminPath(name, "0/addToDefinition"), {
      addToDefinition: { fields: [{ name: field, type: "esriFieldTypeString" }] },
    });
    return { path: { name, layerId: "0" }, params: { deleteFromDefinition: { fields: [{ name: field }] } } };
  },
};

export const servicesArea: Area = {
  files: [
    "rest.routes.ts",
    "rest-services.routes.ts",
    "rest-services-attachments.routes.ts",
    "rest-admin-services.routes.ts",
  ],
  expected: EXPECTED,
  setup: SETUP,
  async prepare() {
    orgService = await newService(acct.owner, "org");
    privateService = await newService(acct.owner);
    ownService.publisher = await newService(acct.publisher);
    ownService.admin = await newService(acct.admin);
    // A member cannot publish; an administrator gives them a service, which they then own.
    ownService.member = await newService(acct.owner);
    const svcItem = (
      await must(
        portal.get(
          `${portal.portico.address}/rest/services/${ownService.member}/FeatureServer`,
          {},
          bootstrap.token,
        ),
        "service",
      )
    ).serviceItemId as string;
    await asAdmin(`/content/users/${acct.owner.username}/items/${svcItem}/reassign`, {
      targetUsername: acct.member.username,
    });
  },
};
