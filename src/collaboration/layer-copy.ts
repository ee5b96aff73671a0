import { sql } from "kysely";
import { updateItem } from "../content/item.repository.js";
import { contentTypeSpec, fileNameSpec } from "../content/item-specs.js";
import { noteChange } from "../db/change-feed.js";
import type { Db, Queryable } from "../db/database.js";
import type { DataCopyTable, LayerCursorTable } from "../db/schema.js";
import { PorticoError } from "../errors.js";
import { insertAttachment } from "../features/attachment-store.js";
import { inLayerReference, isError } from "../features/edits/apply-edits.js";
import { checkAdd, columnValue } from "../features/edits/values.js";
import { findService, findServiceOfItem, insertService } from "../features/feature-service.repository.js";
import { completedDefinition, type LayerSchema, layerSchema, SchemaError } from "../features/layer-schema.js";
import {
  addFieldColumns,
  beginLayerEdit,
  type ChangeCursor,
  createLayerStorage,
  deleteRows,
  dropFieldColumns,
  dropLayerStorage,
  existingRows,
  insertRows,
  type RowWrite,
  reserveObjectIds,
  touchLayerSchema,
} from "../features/layer-store.js";
import {
  type AddToDefinition,
  addToDefinition,
  addToDefinitionSchema,
  buildDefinition,
  type CreateParameters,
  checkCreateParameters,
  createParametersSchema,
  type LayerDefinition,
  MAX_SERVICE_NAME,
  type StoredService,
} from "../features/service-definition.js";
import { p } from "../validation/params.js";
import type { ChangePage, ServiceState } from "./layer-copy-source.js";
import { base64Bytes } from "./peer-messages.js";

/**
 * The receiving side of layer copies: a received Feature Service item becomes a hosted service of
 * this portal (same layers, fields, domains, object ids, GlobalIDs, features and attachments, its
 * own URL), and then takes its origin's changes page by page. Nothing a peer sends is trusted:
 * the definition passes the checks of `createService` and `addToDefinition`, each feature those of
 * `applyEdits` (`checkAdd`, the coordinate bounds), each attachment those of `addAttachment`'s
 * file name and type. Each page is applied in one transaction together with the layer's cursor,
 * so a sync cut off anywhere resumes after the last page stored and never stores a row twice
 * (rows are keyed by the origin's object ids).
 *
 * A copy is read-only (`capabilities` `Query`) unless its workspace is `bidirectionalSyncCapable`
 * and every layer of the service has a GlobalID field (features are matched by it across portals,
 * as ArcGIS requires GlobalIDs for sync): then it keeps its origin's capabilities, and the edits
 * made on it travel back to the origin at the next sync (`layer-edits.ts`).
 */

/** What a read-only copy's service allows: reading. */
export const COPY_CAPABILITIES = "Query";

/** Why a copy in a bidirectional workspace stays read-only, or undefined when it can be edited. */
export function notEditable(
  state: Pick<ServiceState, "definition" | "layers" | "tables">,
): string | undefined {
  for (const [list, kind] of [
    [state.layers, "layer"],
    [state.tables, "table"],
  ] as const) {
    for (const l of list) {
      const fields = Array.isArray(l.fields) ? l.fields : [];
      if (!fields.some((f) => (f as { type?: unknown }).type === "esriFieldTypeGlobalID"))
        return `${kind} ${l.id} has no GlobalID field (edits travel back only with GlobalIDs)`;
    }
  }
  return undefined;
}

const createSpec = p.json<CreateParameters>(createParametersSchema, { check: checkCreateParameters });
const addSpec = p.json<AddToDefinition>(addToDefinitionSchema);

/** Where a layer copy's rows and tombstones have come to. */
export interface LayerCursor {
  rows: ChangeCursor;
  deletes: ChangeCursor;
}

/** The start of a layer: before every row (rows written before migration 0023 carry moment 0). */
export const START: LayerCursor = { rows: { moment: -1, objectId: 0 }, deletes: { moment: -1, objectId: 0 } };
/** Past every change up to `moment`. */
export const reached = (moment: number): LayerCursor => ({
  rows: { moment, objectId: Number.MAX_SAFE_INTEGER },
  deletes: { moment, objectId: Number.MAX_SAFE_INTEGER },
});

export interface LayerOutcome {
  id: number;
  added: number;
  updated: number;
  deleted: number;
  failed: number;
  /** The first failures, with the feature's object id at the origin. */
  failures: { objectId: number | null; reason: string }[];
  notProcessed?: string;
}

/** A feature both sides changed since the copy last took the origin's changes, and who won (`layer-edits.ts`). */
export interface Conflict {
  objectId: number;
  winner: "origin" | "copy";
  reason: string;
}

/** What moved of one layer in a sync, and in a bidirectional workspace what came back from the copy. */
export interface LayerReport extends LayerOutcome {
  /** The copy's own edits stored at the origin (bidirectional workspaces). */
  editsBack?: LayerOutcome;
  conflicts?: Conflict[];
}

export interface DataOutcome {
  /** The origin item's id, as in the task's other lists. */
  id: string;
  title: string;
  mode: "copy" | "reference" | "failed";
  reason?: string;
  /** Why a copy in a bidirectional workspace stays read-only. */
  readOnly?: string;
  layers: LayerReport[];
}

const MAX_FAILURES_LISTED = 20;

export function newLayerOutcome(id: number): LayerOutcome {
  return { id, added: 0, updated: 0, deleted: 0, failed: 0, failures: [] };
}

function failOne(outcome: LayerOutcome, objectId: number | null, reason: string) {
  outcome.failed++;
  if (outcome.failures.length < MAX_FAILURES_LISTED) outcome.failures.push({ objectId, reason });
}

export function findDataCopy(q: Queryable, itemId: string): Promise<DataCopyTable | undefined> {
  return q
    .selectFrom("collaboration_data_copies")
    .selectAll()
    .where("item_id", "=", itemId)
    .executeTakeFirst();
}

/** The data copies of several items, by item id. */
export async function findDataCopies(
  q: Queryable,
  itemIds: readonly string[],
): Promise<Map<string, DataCopyTable>> {
  if (itemIds.length === 0) return new Map();
  const rows = await q
    .selectFrom("collaboration_data_copies")
    .selectAll()
    .where("item_id", "in", [...itemIds])
    .execute();
  return new Map(rows.map((r) => [r.item_id, r]));
}

export async function saveDataCopy(q: Queryable, row: DataCopyTable): Promise<void> {
  await q
    .insertInto("collaboration_data_copies")
    .values(row)
    .onConflict((oc) =>
      oc
        .column("item_id")
        .doUpdateSet({ mode: row.mode, reason: row.reason, origin_modified: row.origin_modified }),
    )
    .execute();
}

type CursorTable = "collaboration_layer_cursors" | "collaboration_layer_sends";

async function cursorsIn(
  q: Queryable,
  table: CursorTable,
  itemId: string,
): Promise<Map<number, LayerCursor>> {
  const rows = await q.selectFrom(table).selectAll().where("item_id", "=", itemId).execute();
  return new Map(rows.map((r) => [Number(r.layer_id), cursorOf(r)]));
}

/** How far each layer of copy `itemId` has taken its origin's changes (in the origin's moments). */
export const layerCursors = (q: Queryable, itemId: string) =>
  cursorsIn(q, "collaboration_layer_cursors", itemId);

/** How far each layer of copy `itemId` has sent its own edits to the origin (in the copy's moments). */
export const sendCursors = (q: Queryable, itemId: string) =>
  cursorsIn(q, "collaboration_layer_sends", itemId);

const cursorOf = (r: LayerCursorTable): LayerCursor => ({
  rows: { moment: Number(r.rows_moment), objectId: Number(r.rows_oid) },
  deletes: { moment: Number(r.deletes_moment), objectId: Number(r.deletes_oid) },
});

async function saveIn(q: Queryable, table: CursorTable, itemId: string, layerId: number, c: LayerCursor) {
  const values = {
    rows_moment: c.rows.moment,
    rows_oid: c.rows.objectId,
    deletes_moment: c.deletes.moment,
    deletes_oid: c.deletes.objectId,
  };
  await q
    .insertInto(table)
    .values({ item_id: itemId, layer_id: layerId, ...values })
    .onConflict((oc) => oc.columns(["item_id", "layer_id"]).doUpdateSet(values))
    .execute();
}

const saveCursor = (q: Queryable, itemId: string, layerId: number, c: LayerCursor) =>
  saveIn(q, "collaboration_layer_cursors", itemId, layerId, c);

export const saveSendCursor = (q: Queryable, itemId: string, layerId: number, c: LayerCursor) =>
  saveIn(q, "collaboration_layer_sends", itemId, layerId, c);

/** Notes that layer `layerId` of `itemId` stored, at `moment`, what a sync brought from `portalId`. */
export async function recordApplied(
  q: Queryable,
  itemId: string,
  layerId: number,
  moment: number,
  portalId: string,
): Promise<void> {
  await q
    .insertInto("collaboration_applied_moments")
    .values({ item_id: itemId, layer_id: layerId, moment, portal_id: portalId })
    .onConflict((oc) => oc.columns(["item_id", "layer_id", "moment"]).doNothing())
    .execute();
}

type Checked<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * The origin's service as this portal would store it under `name`, checked as `createService`
 * and `addToDefinition` check a caller's: the same schemas, the same cross-checks, each layer's
 * schema built and completed as when a client adds it. The reason when it cannot be held here.
 */
export function copyDefinition(state: ServiceState, name: string, editable: boolean): Checked<StoredService> {
  const capabilities = editable ? state.definition.capabilities : COPY_CAPABILITIES;
  const params = createSpec.parse(JSON.stringify({ ...state.definition, name, capabilities }));
  if (!params.ok) return { ok: false, reason: `its service definition ${params.reason}` };
  const empty: StoredService = { name, definition: buildDefinition(params.value), layers: [], tables: [] };
  if (state.layers.length + state.tables.length === 0) return { ok: true, value: empty };
  // A layer's own capabilities would override the service's: a read-only copy's layers read only.
  const own = (l: LayerDefinition) =>
    editable || l.capabilities === undefined ? l : { ...l, capabilities: COPY_CAPABILITIES };
  const add = addSpec.parse(JSON.stringify({ layers: state.layers.map(own), tables: state.tables.map(own) }));
  if (!add.ok) return { ok: false, reason: `its layers ${add.reason}` };
  try {
    const { service } = addToDefinition(empty, add.value);
    const complete = (l: LayerDefinition, kind: "layer" | "table") =>
      completedDefinition(l, layerSchema(l, kind, service.definition));
    return {
      ok: true,
      value: {
        ...service,
        layers: service.layers.map((l) => complete(l, "layer")),
        tables: service.tables.map((t) => complete(t, "table")),
      },
    };
  } catch (err) {
    if (err instanceof SchemaError || err instanceof PorticoError)
      return { ok: false, reason: `its layers cannot be held here: ${err.message}` };
    throw err;
  }
}

function schemasOf(service: StoredService): Map<number, LayerSchema> {
  const out = new Map<number, LayerSchema>();
  for (const l of service.layers) out.set(l.id, layerSchema(l, "layer", service.definition));
  for (const t of service.tables) out.set(t.id, layerSchema(t, "table", service.definition));
  return out;
}

const sameField = (a: LayerSchema["fields"][number], b: LayerSchema["fields"][number]) =>
  a.type === b.type && a.length === b.length;

/** A free service name: the origin's, else with `_1`, `_2`, ... as Esri's `getUniqueServiceName` tries. */
async function freeName(q: Queryable, wanted: string): Promise<string> {
  for (let n = 0; n < 1000; n++) {
    const suffix = n === 0 ? "" : `_${n}`;
    const name = `${wanted.slice(0, MAX_SERVICE_NAME - suffix.length)}${suffix}`;
    if (!(await findService(q, name))) return name;
  }
  throw new Error(`no free service name like '${wanted}'`);
}

/**
 * Makes item `itemId` (a received copy) a hosted service holding the origin's definition, or
 * brings its definition to the origin's: layers added or removed with their storage, fields
 * added or dropped with their columns. A layer whose fields changed is read again from the start
 * (its rows carry values of the new fields); one whose geometry or kind changed is rebuilt. One
 * transaction; the reason when the definition cannot be held.
 */
export async function applyServiceState(
  db: Db,
  itemId: string,
  state: ServiceState,
  servicesBase: string,
  editable: boolean,
): Promise<Checked<{ created: boolean }>> {
  const existing = await findServiceOfItem(db.kysely, itemId);
  const name = existing?.name ?? (await freeName(db.kysely, state.name));
  const checked = copyDefinition(state, name, editable);
  if (!checked.ok) return checked;
  const next = checked.value;
  const now = Date.now();
  await db.transaction(async (trx) => {
    noteChange(trx, `content:${itemId}`);
    const after = schemasOf(next);
    if (!existing) {
      await insertService(trx, {
        item_id: itemId,
        name,
        definition: JSON.stringify(next.definition),
        layers: JSON.stringify(next.layers),
        tables: JSON.stringify(next.tables),
        is_view: 0,
        created: now,
        modified: now,
        read_only: editable ? 0 : 1,
      });
      for (const schema of after.values()) {
        await createLayerStorage(trx, db, itemId, schema, now);
        await saveCursor(trx, itemId, schema.id, START);
        await saveSendCursor(trx, itemId, schema.id, START);
      }
      await updateItem(trx, itemId, { url: `${servicesBase}/${name}/FeatureServer` });
    } else {
      const before = schemasOf({
        name,
        definition: JSON.parse(existing.definition),
        layers: JSON.parse(existing.layers),
        tables: JSON.parse(existing.tables),
      });
      for (const [id, old] of before) {
        const now2 = after.get(id);
        if (!now2 || now2.kind !== old.kind || now2.geometryType !== old.geometryType) {
          await dropLayerStorage(trx, itemId, id);
          for (const table of [
            "collaboration_layer_cursors",
            "collaboration_layer_sends",
            "collaboration_applied_moments",
            "collaboration_feature_moments",
          ] as const)
            await trx.deleteFrom(table).where("item_id", "=", itemId).where("layer_id", "=", id).execute();
        }
      }
      for (const [id, schema] of after) {
        const old = before.get(id);
        if (!old || old.kind !== schema.kind || old.geometryType !== schema.geometryType) {
          await createLayerStorage(trx, db, itemId, schema, now);
          await saveCursor(trx, itemId, id, START);
          await saveSendCursor(trx, itemId, id, START);
          continue;
        }
        const oldByColumn = new Map(old.fields.map((f) => [f.column, f]));
        const newByColumn = new Map(schema.fields.map((f) => [f.column, f]));
        const dropped = old.fields.filter((f) => {
          const n = newByColumn.get(f.column);
          return !n || !sameField(f, n);
        });
        const added = schema.fields.filter((f) => {
          const o = oldByColumn.get(f.column);
          return !o || !sameField(f, o);
        });
        if (dropped.length > 0) await dropFieldColumns(trx, itemId, id, dropped);
        if (added.length > 0) {
          await addFieldColumns(trx, db.engine, itemId, id, added);
          // The new columns' values are the origin's: the layer's rows come again.
          const cursor = (await layerCursors(trx, itemId)).get(id) ?? START;
          await saveCursor(trx, itemId, id, { rows: START.rows, deletes: cursor.deletes });
        }
        if (dropped.length + added.length > 0) await touchLayerSchema(trx, itemId, id, now);
      }
      await trx
        .updateTable("feature_services")
        .set({
          definition: JSON.stringify(next.definition),
          layers: JSON.stringify(next.layers),
          tables: JSON.stringify(next.tables),
          read_only: editable ? 0 : 1,
          // `modified` versions the layer schemas cached by the feature data service: it only grows.
          modified: sql<number>`CASE WHEN modified >= ${now} THEN modified + 1 ELSE ${now} END`,
        })
        .where("item_id", "=", itemId)
        .execute();
    }
    await saveDataCopy(trx, { item_id: itemId, mode: "copy", reason: null, origin_modified: state.modified });
  });
  return { ok: true, value: { created: !existing } };
}

/** The feature as this layer stores it, checked as `applyEdits` checks an add; its origin's object id kept. */
function copiedRow(
  schema: LayerSchema,
  feature: unknown,
  now: number,
): Checked<{ row: RowWrite; attachments: unknown[] }> {
  const f = (typeof feature === "object" && feature !== null ? feature : {}) as Record<string, unknown>;
  const attributes = (
    typeof f.attributes === "object" && f.attributes !== null ? f.attributes : {}
  ) as Record<string, unknown>;
  const oid = attributes[schema.objectIdField.name];
  if (typeof oid !== "number" || !Number.isSafeInteger(oid) || oid < 1)
    return { ok: false, reason: `its ${schema.objectIdField.name} is not a positive integer` };
  const checked = checkAdd(schema, { attributes, geometry: f.geometry ?? null }, { useGlobalIds: true, now });
  if (!checked.ok) return { ok: false, reason: checked.error.description };
  const columns = { ...checked.value.columns };
  const tracking = schema.editFields;
  if (tracking) {
    // Who made and edited the feature, and when, are the origin's (checkAdd writes this edit's).
    for (const name of Object.values(tracking)) {
      const field = schema.fields.find((x) => x.name === name);
      if (!field || !(name in attributes)) continue;
      const value = columnValue(field, attributes[name]);
      if (!value.ok) return { ok: false, reason: value.error.description };
      columns[field.column] = value.value;
    }
  }
  const geometry = inLayerReference(schema, checked.value.geometry);
  if (isError(geometry)) return { ok: false, reason: geometry.description };
  const attachments = Array.isArray(f.attachments) ? f.attachments : [];
  return { ok: true, value: { row: { objectId: oid, columns, geometry: geometry ?? null }, attachments } };
}

export interface AttachmentIn {
  id: number;
  globalId: string;
  name: string;
  contentType: string;
  keywords: string;
  bytes: Buffer;
}

/** An attachment as `addAttachment` would take it: a file name, a content type, base64 content. */
function checkAttachment(raw: unknown): Checked<AttachmentIn> {
  const a = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  if (typeof a.id !== "number" || !Number.isSafeInteger(a.id) || a.id < 1)
    return { ok: false, reason: "an attachment's id is not a positive integer" };
  if (typeof a.globalId !== "string" || !/^\{[0-9A-F-]{36}\}$/.test(a.globalId))
    return { ok: false, reason: `attachment ${a.id} has no valid GlobalID` };
  const name = fileNameSpec.parse(typeof a.name === "string" ? a.name : "");
  if (!name.ok) return { ok: false, reason: `attachment ${a.id}'s name ${name.reason}` };
  const type = contentTypeSpec.parse(typeof a.contentType === "string" ? a.contentType : "");
  if (!type.ok) return { ok: false, reason: `attachment ${a.id}'s content type ${type.reason}` };
  if (typeof a.keywords !== "string" || a.keywords.length > 1024)
    return { ok: false, reason: `attachment ${a.id}'s keywords are not text of up to 1024 characters` };
  if (typeof a.content !== "string" || base64Bytes(a.content) === undefined)
    return { ok: false, reason: `attachment ${a.id}'s content is not base64` };
  return {
    ok: true,
    value: {
      id: a.id,
      globalId: a.globalId,
      name: a.name as string,
      contentType: a.contentType as string,
      keywords: a.keywords,
      bytes: Buffer.from(a.content, "base64"),
    },
  };
}

/** A layer of a stored service, opened to write into it. */
export interface WritableLayer {
  schema: LayerSchema;
  withAttachments: boolean;
}

/** Layer `layerId` of hosted service `itemId`, read in `trx`. */
export async function openLayer(trx: Queryable, itemId: string, layerId: number): Promise<WritableLayer> {
  const row = await findServiceOfItem(trx, itemId);
  if (!row) throw new Error("the service is gone");
  const service: StoredService = {
    name: row.name,
    definition: JSON.parse(row.definition),
    layers: JSON.parse(row.layers),
    tables: JSON.parse(row.tables),
  };
  const schema = schemasOf(service).get(layerId);
  if (!schema) throw new Error(`the service has no layer ${layerId}`);
  const withAttachments =
    [...service.layers, ...service.tables].find((l) => l.id === layerId)?.hasAttachments === true;
  return { schema, withAttachments };
}

/** A feature of a page that passed the checks of `applyEdits`, with its place in the page. */
export interface CheckedFeature {
  row: RowWrite;
  attachments: AttachmentIn[];
  index: number;
}

/**
 * The features of a page as this layer would store them: each checked as `applyEdits` checks an
 * add, and its attachments as `addAttachment` checks one; a feature that fails, fails alone.
 */
export function checkFeatures(
  layer: WritableLayer,
  features: readonly unknown[],
  now: number,
  counts: LayerOutcome,
): Map<number, CheckedFeature> {
  const rows = new Map<number, CheckedFeature>();
  for (const [index, feature] of features.entries()) {
    const oid = (feature as { attributes?: Record<string, unknown> })?.attributes?.[
      layer.schema.objectIdField.name
    ];
    const label = typeof oid === "number" ? oid : null;
    const c = copiedRow(layer.schema, feature, now);
    if (!c.ok) {
      failOne(counts, label, c.reason);
      continue;
    }
    if (rows.has(c.value.row.objectId)) {
      failOne(counts, label, "sent twice in one page");
      continue;
    }
    const attachments: AttachmentIn[] = [];
    for (const raw of layer.withAttachments ? c.value.attachments : []) {
      const a = checkAttachment(raw);
      if (!a.ok) failOne(counts, label, a.reason);
      else attachments.push(a.value);
    }
    rows.set(c.value.row.objectId, { row: c.value.row, attachments, index });
  }
  return rows;
}

/** Which features hold the attachments `ids` of a layer, by attachment id. */
export async function attachmentOwners(
  q: Queryable,
  itemId: string,
  layerId: number,
  ids: readonly number[],
): Promise<Map<number, number>> {
  if (ids.length === 0) return new Map();
  const rows = await q
    .selectFrom("feature_attachments")
    .select(["attachment_id", "object_id"])
    .where("item_id", "=", itemId)
    .where("layer_id", "=", layerId)
    .where("attachment_id", "in", [...ids])
    .execute();
  return new Map(rows.map((r) => [Number(r.attachment_id), Number(r.object_id)]));
}

/** `count` fresh attachment ids of a layer: the first. */
export async function takeAttachmentIds(q: Queryable, itemId: string, layerId: number, count: number) {
  const r = await sql<{ next_attachment_id: number }>`
    UPDATE feature_layers SET next_attachment_id = next_attachment_id + ${count}
    WHERE item_id = ${itemId} AND layer_id = ${layerId} RETURNING next_attachment_id
  `.execute(q);
  return Number(r.rows[0]?.next_attachment_id ?? count) - count;
}

/**
 * Writes features whole at `moment` (a row they replace goes with its attachments, and so does a
 * tombstone of theirs: a feature deleted here and written again by a sync lives again), with
 * their attachments, keeping the layer's next object and attachment ids past theirs. Counts each
 * as added or updated. An attachment id held here by another feature is moved out of the way
 * first: on a copy, the origin's ids are the truth, and that other feature's attachment was added
 * on the copy and goes to the origin with its new id (the origin renumbers clashes before it
 * writes, `layer-edits.ts`, so there it never happens).
 */
export async function writeFeatures(
  trx: Queryable,
  db: Db,
  itemId: string,
  layer: WritableLayer,
  features: readonly CheckedFeature[],
  moment: number,
  counts: LayerOutcome,
): Promise<void> {
  if (features.length === 0) return;
  const { schema } = layer;
  const ids = features.map((f) => f.row.objectId);
  const had = await existingRows(trx, itemId, schema, ids);
  // Replaced whole: the old row and its attachments go (no tombstone: the feature stays).
  await deleteRows(trx, itemId, schema, ids, undefined);
  await trx
    .deleteFrom("feature_deletes")
    .where("item_id", "=", itemId)
    .where("layer_id", "=", schema.id)
    .where("object_id", "in", ids)
    .execute();
  await insertRows(
    trx,
    db,
    itemId,
    schema,
    features.map((f) => f.row),
    moment,
  );
  await reserveObjectIds(trx, itemId, schema.id, Math.max(...ids) + 1);
  const incoming = features.flatMap((f) => f.attachments.map((a) => a.id));
  const owners = await attachmentOwners(trx, itemId, schema.id, incoming);
  for (const [attachmentId, owner] of owners) {
    const fresh = await takeAttachmentIds(trx, itemId, schema.id, 1);
    await trx
      .updateTable("feature_attachments")
      .set({ attachment_id: fresh })
      .where("item_id", "=", itemId)
      .where("layer_id", "=", schema.id)
      .where("attachment_id", "=", attachmentId)
      .where("object_id", "=", owner)
      .execute();
  }
  let maxAttachment = 0;
  for (const f of features) {
    if (had.has(f.row.objectId)) counts.updated++;
    else counts.added++;
    for (const a of f.attachments) {
      await insertAttachment(
        trx,
        {
          itemId,
          layerId: schema.id,
          objectId: f.row.objectId,
          attachmentId: a.id,
          globalId: a.globalId,
          name: a.name,
          contentType: a.contentType,
          keywords: a.keywords,
        },
        { data: a.bytes },
      );
      maxAttachment = Math.max(maxAttachment, a.id);
    }
  }
  if (maxAttachment > 0) {
    await trx
      .updateTable("feature_layers")
      .set({ next_attachment_id: maxAttachment + 1 })
      .where("item_id", "=", itemId)
      .where("layer_id", "=", schema.id)
      .where("next_attachment_id", "<=", maxAttachment)
      .execute();
  }
}

export function addCounts(outcome: LayerOutcome, counts: LayerOutcome) {
  outcome.added += counts.added;
  outcome.updated += counts.updated;
  outcome.deleted += counts.deleted;
  outcome.failed += counts.failed;
  for (const f of counts.failures)
    if (outcome.failures.length < MAX_FAILURES_LISTED) outcome.failures.push(f);
}

/**
 * Applies one page of a layer's changes to the copy, with the cursor it reaches (`cursor`), in
 * one transaction. Rows are replaced whole by object id (a row the copy had is counted updated),
 * with their attachments; deletes remove rows and attachments. A feature that fails its checks
 * fails alone, and the cursor moves past it all the same: the next change of it at the origin
 * brings it again. The page's moment is noted as coming from `origin`, so that the copy's own
 * edits, sent back in a bidirectional workspace, leave it out.
 */
export async function applyPage(
  db: Db,
  itemId: string,
  layerId: number,
  page: Pick<ChangePage, "features" | "deletes">,
  cursor: LayerCursor,
  outcome: LayerOutcome,
  origin: string,
): Promise<void> {
  const counts = newLayerOutcome(layerId);
  await db.transaction(async (trx) => {
    const layer = await openLayer(trx, itemId, layerId);
    const now = Date.now();
    const edit = await beginLayerEdit(trx, itemId, layerId, now, 0);
    if (!edit) throw new Error(`layer ${layerId} of the copy holds no data`);
    const rows = checkFeatures(layer, page.features, now, counts);
    await writeFeatures(trx, db, itemId, layer, [...rows.values()], edit.moment, counts);
    const deletes = page.deletes.filter((d) => !rows.has(d));
    if (deletes.length > 0)
      counts.deleted += (await deleteRows(trx, itemId, layer.schema, deletes, edit.moment)).size;
    if (rows.size + deletes.length > 0) await recordApplied(trx, itemId, layerId, edit.moment, origin);
    await saveCursor(trx, itemId, layerId, cursor);
  });
  addCounts(outcome, counts);
}
