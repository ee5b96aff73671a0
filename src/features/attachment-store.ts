import { type Kysely, sql } from "kysely";
import { type ChunkedFile, type FileSource, writeChunks } from "../content/file-store.js";
import type { Queryable } from "../db/database.js";
import { newId } from "../ids.js";

/**
 * The attachments of features of hosted layers (migration 0011): a row per attachment naming its
 * feature, its bytes in `feature_attachment_chunks` written and read a chunk at a time by the file
 * store. Every function runs in the caller's transaction and does what its statement says; the
 * caller keeps an attachment edit and the layer's edit dates in one transaction.
 */

/** Unused `Kysely` generic parameter: what `layer-store.ts` is called with (migrations included). */
type AnyQueryable = Queryable | Kysely<unknown>;

export interface StoredAttachment {
  itemId: string;
  layerId: number;
  objectId: number;
  attachmentId: number;
  globalId: string;
  name: string;
  contentType: string;
  keywords: string;
  fileId: string;
  size: number;
}

/** What describes an attachment's file: from the upload, and the `keywords` parameter. */
export interface AttachmentMeta {
  name: string;
  contentType: string;
  keywords: string;
}

/** Where an attachment's bytes are, for the file store to stream them. */
export const attachmentChunks = (a: StoredAttachment): ChunkedFile => ({
  table: "feature_attachment_chunks",
  fileId: a.fileId,
  size: a.size,
});

const COLUMNS = [
  "item_id",
  "layer_id",
  "object_id",
  "attachment_id",
  "global_id",
  "name",
  "content_type",
  "keywords",
  "file_id",
  "size",
] as const;

function fromRow(r: {
  item_id: string;
  layer_id: number;
  object_id: number;
  attachment_id: number;
  global_id: string;
  name: string;
  content_type: string;
  keywords: string;
  file_id: string;
  size: number;
}): StoredAttachment {
  // PostgreSQL answers bigint columns as text.
  return {
    itemId: r.item_id,
    layerId: Number(r.layer_id),
    objectId: Number(r.object_id),
    attachmentId: Number(r.attachment_id),
    globalId: r.global_id,
    name: r.name,
    contentType: r.content_type,
    keywords: r.keywords,
    fileId: r.file_id,
    size: Number(r.size),
  };
}

/** A feature's attachments, by attachment id. */
export async function listAttachments(
  q: Queryable,
  itemId: string,
  layerId: number,
  objectId: number,
): Promise<StoredAttachment[]> {
  const rows = await q
    .selectFrom("feature_attachments")
    .select(COLUMNS)
    .where("item_id", "=", itemId)
    .where("layer_id", "=", layerId)
    .where("object_id", "=", objectId)
    .orderBy("attachment_id")
    .execute();
  return rows.map(fromRow);
}

/** One attachment of a feature; undefined when the feature has none of that id. */
export async function findAttachment(
  q: Queryable,
  itemId: string,
  layerId: number,
  objectId: number,
  attachmentId: number,
): Promise<StoredAttachment | undefined> {
  const row = await q
    .selectFrom("feature_attachments")
    .select(COLUMNS)
    .where("item_id", "=", itemId)
    .where("layer_id", "=", layerId)
    .where("attachment_id", "=", attachmentId)
    .where("object_id", "=", objectId)
    .executeTakeFirst();
  return row ? fromRow(row) : undefined;
}

/** Takes the layer's next attachment id; undefined when the layer has no storage. */
export async function takeAttachmentId(
  q: Queryable,
  itemId: string,
  layerId: number,
): Promise<number | undefined> {
  const row = await q
    .updateTable("feature_layers")
    .set((eb) => ({ next_attachment_id: eb("next_attachment_id", "+", 1) }))
    .where("item_id", "=", itemId)
    .where("layer_id", "=", layerId)
    .returning("next_attachment_id")
    .executeTakeFirst();
  return row === undefined ? undefined : Number(row.next_attachment_id) - 1;
}

/** Writes an attachment's row and its chunks; its size is what was actually written. */
export async function insertAttachment(
  trx: Queryable,
  a: Omit<StoredAttachment, "fileId" | "size">,
  source: FileSource,
): Promise<StoredAttachment> {
  const fileId = newId();
  await trx
    .insertInto("feature_attachments")
    .values({
      item_id: a.itemId,
      layer_id: a.layerId,
      object_id: a.objectId,
      attachment_id: a.attachmentId,
      global_id: a.globalId,
      name: a.name,
      content_type: a.contentType,
      keywords: a.keywords,
      file_id: fileId,
      size: 0,
    })
    .execute();
  const size = await writeChunks(trx, "feature_attachment_chunks", fileId, source);
  await trx.updateTable("feature_attachments").set({ size }).where("file_id", "=", fileId).execute();
  return { ...a, fileId, size };
}

/**
 * Replaces the file of an attachment: a new version (new file id, its old chunks gone), the same
 * attachment id and GlobalID.
 */
export async function replaceAttachment(
  trx: Queryable,
  existing: StoredAttachment,
  meta: AttachmentMeta,
  source: FileSource,
): Promise<StoredAttachment> {
  await deleteAttachmentRows(trx, existing.itemId, existing.layerId, existing.objectId, [
    existing.attachmentId,
  ]);
  const { fileId: _old, size: _size, ...kept } = existing;
  return insertAttachment(trx, { ...kept, ...meta }, source);
}

/** Deletes attachments of a feature by id; answers the GlobalIDs of those that existed, by id. */
export async function deleteAttachmentRows(
  trx: Queryable,
  itemId: string,
  layerId: number,
  objectId: number,
  attachmentIds: readonly number[],
): Promise<Map<number, string>> {
  if (attachmentIds.length === 0) return new Map();
  const rows = await trx
    .deleteFrom("feature_attachments")
    .where("item_id", "=", itemId)
    .where("layer_id", "=", layerId)
    .where("object_id", "=", objectId)
    .where("attachment_id", "in", attachmentIds)
    .returning(["attachment_id", "global_id"])
    .execute();
  return new Map(rows.map((r) => [Number(r.attachment_id), r.global_id]));
}

/** Deletes every attachment of these features (deleted in the same transaction). */
export async function deleteFeatureAttachments(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
  objectIds: readonly number[],
): Promise<void> {
  if (objectIds.length === 0) return;
  await sql`
    DELETE FROM feature_attachments
    WHERE item_id = ${itemId} AND layer_id = ${layerId} AND object_id IN (${sql.join(objectIds)})
  `.execute(q);
}

/** Deletes every attachment of a layer (its storage dropped in the same transaction). */
export async function deleteLayerAttachments(
  q: AnyQueryable,
  itemId: string,
  layerId: number,
): Promise<void> {
  await sql`DELETE FROM feature_attachments WHERE item_id = ${itemId} AND layer_id = ${layerId}`.execute(q);
}
