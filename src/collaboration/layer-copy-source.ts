import { sql } from "kysely";
import { streamChunks } from "../content/file-store.js";
import type { Queryable } from "../db/database.js";
import { attachmentChunks, listAttachments } from "../features/attachment-store.js";
import { findServiceOfItem } from "../features/feature-service.repository.js";
import {
  type LayerSchema,
  layerSchema,
  OID_COLUMN,
  SchemaError,
  SHAPE_COLUMN,
} from "../features/layer-schema.js";
import {
  type ChangeCursor,
  changedRows,
  deletedRows,
  layerStates,
  storedAsText,
  tableName,
} from "../features/layer-store.js";
import type { LayerDefinition, ServiceProperties } from "../features/service-definition.js";
import { FEATURES_PER_PAGE, PAGE_BYTES } from "./layer-copy-messages.js";

/**
 * The sending side of layer copies (a host, for guests whose group link copies feature data): the
 * state of the hosted services a workspace offers, and pages of what changed in one of their
 * layers between two edit moments. Only items the linked group offers are answered (shared to
 * it, not themselves received copies), as `export` answers items.
 */

/** What a receiver needs to decide whether a service's copy is up to date, and to build it. */
export interface ServiceState {
  id: string;
  name: string;
  /** The definition's version: it grows with every definition change. */
  modified: number;
  definition: ServiceProperties;
  layers: LayerDefinition[];
  tables: LayerDefinition[];
  /** Each stored layer's data moment (`data_last_edit_date`): what a copy reaches up to. */
  moments: { id: number; moment: number }[];
  /** About how many bytes its features and attachments take (the receiver measures what arrives). */
  bytes: number;
}

/** A page of one layer's changes, in (moment, object id) order; `done` when nothing up to `upTo` is left. */
export interface ChangePage {
  features: { attributes: Record<string, unknown>; geometry: unknown; attachments?: AttachmentPackage[] }[];
  deletes: number[];
  /**
   * The edit moment of each feature and of each delete, in the sender's clock, and the GlobalID
   * each deleted feature had: what the origin needs to decide a conflict (`layer-edits.ts`).
   */
  moments?: number[];
  deleteMoments?: number[];
  deleteGlobalIds?: (string | null)[];
  rowsNext: ChangeCursor;
  deletesNext: ChangeCursor;
  done: boolean;
}

/** What a stored service's row holds, parsed. */
export interface ServiceParts {
  definition: ServiceProperties;
  layers: LayerDefinition[];
  tables: LayerDefinition[];
}

export const serviceParts = (row: { definition: string; layers: string; tables: string }): ServiceParts => ({
  definition: JSON.parse(row.definition) as ServiceProperties,
  layers: JSON.parse(row.layers) as LayerDefinition[],
  tables: JSON.parse(row.tables) as LayerDefinition[],
});

/** Where a reader of a layer's changes starts and stops. */
export interface ChangeWindow {
  rowsAfter: ChangeCursor;
  deletesAfter: ChangeCursor;
  upTo: number;
  maxBytes?: number;
}

export interface AttachmentPackage {
  id: number;
  globalId: string;
  name: string;
  contentType: string;
  keywords: string;
  /** Base64. */
  content: string;
}

/** The items among `ids` that the linked group offers: shared to it, not themselves received copies. */
export async function offeredIds(
  q: Queryable,
  groupId: string,
  ids: readonly string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await q
    .selectFrom("item_shares as s")
    .leftJoin("collaboration_copies as c", "c.item_id", "s.item_id")
    .select("s.item_id")
    .where("s.group_id", "=", groupId)
    .where("s.item_id", "in", [...ids])
    .where("c.item_id", "is", null)
    .execute();
  return new Set(rows.map((r) => r.item_id));
}

/** The hosted services among `ids` that the linked group offers; other ids are left out. */
export async function serviceStates(
  q: Queryable,
  groupId: string,
  ids: readonly string[],
): Promise<ServiceState[]> {
  const offered = await offeredIds(q, groupId, ids);
  const out: ServiceState[] = [];
  for (const id of ids) {
    if (!offered.has(id)) continue;
    const row = await findServiceOfItem(q, id);
    if (!row) continue;
    const states = await layerStates(q, id);
    const service = {
      definition: JSON.parse(row.definition) as ServiceProperties,
      layers: JSON.parse(row.layers) as LayerDefinition[],
      tables: JSON.parse(row.tables) as LayerDefinition[],
    };
    let bytes = 0;
    for (const layerId of states.keys())
      bytes += await layerBytes(q, id, layerId, schemaOfLayer(service, layerId)?.geometryType !== undefined);
    out.push({
      id,
      name: row.name,
      modified: Number(row.modified),
      ...service,
      moments: [...states.values()].map((s) => ({ id: s.layerId, moment: s.dataLastEditDate })),
      bytes,
    });
  }
  return out;
}

/** Shapes' text plus a rough 100 bytes of attributes per row, plus the attachments' bytes. */
async function layerBytes(q: Queryable, itemId: string, layerId: number, hasShape: boolean): Promise<number> {
  const table = sql.id(tableName(itemId, layerId));
  const rows = await sql<{ n: number; b: number | null }>`
    SELECT COUNT(*) AS n, ${hasShape ? sql`SUM(LENGTH(${sql.id(SHAPE_COLUMN)}))` : sql`0`} AS b FROM ${table}
  `.execute(q);
  const attachments = await sql<{ b: number | null }>`
    SELECT SUM(size) AS b FROM feature_attachments WHERE item_id = ${itemId} AND layer_id = ${layerId}
  `.execute(q);
  const r = rows.rows[0];
  return Number(r?.n ?? 0) * 100 + Number(r?.b ?? 0) + Number(attachments.rows[0]?.b ?? 0);
}

/** The schema of layer `layerId` of a stored service, or undefined when it has none (or cannot hold data). */
export function schemaOfLayer(
  service: { definition: ServiceProperties; layers: LayerDefinition[]; tables: LayerDefinition[] },
  layerId: number,
): LayerSchema | undefined {
  const layer = service.layers.find((l) => l.id === layerId);
  const table = service.tables.find((l) => l.id === layerId);
  const def = layer ?? table;
  if (!def) return undefined;
  try {
    return layerSchema(def, layer ? "layer" : "table", service.definition);
  } catch (err) {
    if (err instanceof SchemaError) return undefined;
    throw err;
  }
}

const NUMERIC_OUT = (field: { type: string }) => !storedAsText(field as never);

/** A stored row as a feature of the layer: attributes by field name, geometry as stored. */
export function rowFeature(schema: LayerSchema, row: Record<string, unknown>) {
  const attributes: Record<string, unknown> = {};
  for (const f of schema.fields) {
    const v = f.column === schema.objectIdField.column ? row[OID_COLUMN] : row[f.column];
    attributes[f.name] = v === null || v === undefined ? null : NUMERIC_OUT(f) ? Number(v) : v;
  }
  const shape = row[SHAPE_COLUMN];
  return {
    attributes,
    geometry: typeof shape === "string" ? (JSON.parse(shape) as unknown) : null,
  };
}

/**
 * One page of layer `layerId`'s changes after the cursors and up to `upTo`: rows written (every
 * field, the geometry, the attachments whole) and object ids deleted. Undefined when the item is
 * not offered or has no such stored layer. What a sync stored from the caller is left out.
 */
export async function layerChanges(
  q: Queryable,
  groupId: string,
  request: ChangeWindow & { id: string; layerId: number },
  caller: string,
): Promise<ChangePage | undefined> {
  if (!(await offeredIds(q, groupId, [request.id])).has(request.id)) return undefined;
  return readChanges(q, request.id, request.layerId, request, caller);
}

/**
 * A page of the changes of layer `layerId` of hosted service `itemId` in `window`, leaving out
 * what a sync stored from `exceptFrom`; undefined when the item has no such stored layer.
 */
export async function readChanges(
  q: Queryable,
  itemId: string,
  layerId: number,
  window: ChangeWindow,
  exceptFrom: string,
): Promise<ChangePage | undefined> {
  const row = await findServiceOfItem(q, itemId);
  if (!row) return undefined;
  const service = serviceParts(row);
  const schema = schemaOfLayer(service, layerId);
  if (!schema || !(await layerStates(q, itemId)).has(layerId)) return undefined;
  const withAttachments =
    [...service.layers, ...service.tables].find((l) => l.id === layerId)?.hasAttachments === true;
  const rows = await changedRows(
    q,
    itemId,
    layerId,
    window.rowsAfter,
    window.upTo,
    FEATURES_PER_PAGE,
    exceptFrom,
  );
  const features: ChangePage["features"] = [];
  const moments: number[] = [];
  const pageBytes = Math.min(PAGE_BYTES, window.maxBytes ?? PAGE_BYTES);
  let bytes = 0;
  let rowsNext = window.rowsAfter;
  for (const r of rows) {
    const feature: ChangePage["features"][number] = rowFeature(schema, r);
    const objectId = Number(r[OID_COLUMN]);
    if (withAttachments) {
      const stored = await listAttachments(q, itemId, layerId, objectId);
      const packages: AttachmentPackage[] = [];
      for (const a of stored) {
        const chunks: Buffer[] = [];
        for await (const chunk of streamChunks(q, attachmentChunks(a))) chunks.push(chunk as Buffer);
        packages.push({
          id: a.attachmentId,
          globalId: a.globalId,
          name: a.name,
          contentType: a.contentType,
          keywords: a.keywords,
          content: Buffer.concat(chunks).toString("base64"),
        });
      }
      feature.attachments = packages;
    }
    const size = JSON.stringify(feature).length;
    if (features.length > 0 && bytes + size > pageBytes) break;
    bytes += size;
    features.push(feature);
    rowsNext = { moment: Number(r.edit_moment), objectId };
    moments.push(rowsNext.moment);
  }
  const rowsDone = features.length === rows.length && rows.length < FEATURES_PER_PAGE;
  const tombstones = await deletedRows(
    q,
    itemId,
    layerId,
    window.deletesAfter,
    window.upTo,
    FEATURES_PER_PAGE,
    exceptFrom,
  );
  const last = tombstones[tombstones.length - 1];
  return {
    features,
    deletes: tombstones.map((t) => t.objectId),
    moments,
    deleteMoments: tombstones.map((t) => t.moment),
    deleteGlobalIds: tombstones.map((t) => t.globalId),
    rowsNext,
    deletesNext: last ? { moment: last.moment, objectId: last.objectId } : window.deletesAfter,
    done: rowsDone && tombstones.length < FEATURES_PER_PAGE,
  };
}
