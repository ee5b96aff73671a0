import { randomUUID } from "node:crypto";
import type { Readable } from "node:stream";
import type { Caller } from "../auth/caller.js";
import type { FileSource } from "../content/file-store.js";
import { streamChunks } from "../content/file-store.js";
import type { Db, Queryable } from "../db/database.js";
import { errors, PorticoError } from "../errors.js";
import {
  type AttachmentMeta,
  attachmentChunks,
  deleteAttachmentRows,
  findAttachment,
  insertAttachment,
  listAttachments,
  replaceAttachment,
  type StoredAttachment,
  takeAttachmentId,
} from "./attachment-store.js";
import { EDIT_ERRORS, type EditError } from "./edits/values.js";
import type { FeatureDataService, OpenLayer, OwnershipRestriction } from "./feature-data.service.js";
import { beginLayerEdit, existingRows, touchRows } from "./layer-store.js";

/**
 * The attachments of features of hosted layers whose definition says `hasAttachments: true`
 * (Attachment Infos, Attachment, Add Attachment, Update Attachment, Delete Attachments).
 *
 * Access follows the layer's rules for its features (`FeatureDataService`): reading attachments
 * is querying the layer, changing them is updating features (adding is also allowed by the
 * `Create` capability alone, as ArcGIS documents it); the owner and administrators always may.
 * With ownership-based access control a caller reaches the attachments of the features it
 * reaches, and a feature out of reach is answered as missing.
 *
 * Every change runs in one transaction with the layer's edit dates, which move only when the
 * change succeeds; the layer's row is locked first (`beginLayerEdit`), so a feature deleted
 * meanwhile (with its attachments, `layer-store.ts` deleteRows) is seen as deleted.
 */

/** One attachment as `attachmentInfos` lists it. */
export interface AttachmentInfo {
  id: number;
  globalId: string;
  parentGlobalId?: string;
  name: string;
  contentType: string;
  size: number;
  keywords: string;
}

/** The result of one attachment edit, as ArcGIS reports edits: the attachment's id when it worked. */
export interface AttachmentEditResult {
  objectId: number | null;
  globalId: string | null;
  success: boolean;
  error?: EditError;
}

/** An uploaded file to attach: its name and declared type, its bytes on disk. */
export type AttachmentFile = { filename: string; contentType: string } & FileSource;

/** An attachment to answer with; `open` streams its bytes a chunk at a time. */
export interface AttachmentDownload {
  filename: string;
  contentType: string;
  size: number;
  open(): Readable;
}

/** Ends a change's transaction without writing (nothing to do, or a failure to roll back). */
class NoChange<T> extends Error {
  constructor(readonly results: T) {
    super("no change");
  }
}

const failed = (code: number, description: string, objectId: number | null = null): AttachmentEditResult => ({
  objectId,
  globalId: null,
  success: false,
  error: { code, description },
});
const featureMissing = (attachmentId: number | null = null) =>
  failed(EDIT_ERRORS.objectMissing, "Object is missing.", attachmentId);
const attachmentMissing = (id: number) =>
  failed(EDIT_ERRORS.objectMissing, `Attachment ${id} is missing.`, id);
const succeeded = (a: StoredAttachment): AttachmentEditResult => ({
  objectId: a.attachmentId,
  globalId: a.globalId,
  success: true,
});
/** A success undone because another edit of the request failed (`rollbackOnFailure`). */
const rolledBack = (r: AttachmentEditResult): AttachmentEditResult =>
  r.success ? { ...failed(1003, "Operation rolled back.", r.objectId), globalId: r.globalId } : r;

/** GlobalIDs as ArcGIS writes them (and `edits/values.ts` gives features): `{UPPER-CASE}`. */
const newGlobalId = () => `{${randomUUID().toUpperCase()}}`;

export class FeatureAttachmentService {
  constructor(
    private readonly db: Db,
    private readonly data: Pick<FeatureDataService, "open" | "authorize">,
  ) {}

  /** `<feature>/attachments`: the feature's attachments, by id. */
  async list(
    caller: Caller | null,
    name: string,
    layerId: string,
    objectId: string,
  ): Promise<{ attachmentInfos: AttachmentInfo[] }> {
    const { open, oid, feature } = await this.readable(caller, name, layerId, objectId);
    const attachments = await listAttachments(this.db.kysely, open.row.item_id, open.schema.id, oid);
    return {
      attachmentInfos: attachments.map((a) => ({
        id: a.attachmentId,
        globalId: a.globalId,
        ...(feature.globalId ? { parentGlobalId: feature.globalId } : {}),
        name: a.name,
        contentType: a.contentType,
        size: a.size,
        keywords: a.keywords,
      })),
    };
  }

  /** `<feature>/attachments/<id>`: the file, streamed from its chunks. */
  async download(
    caller: Caller | null,
    name: string,
    layerId: string,
    objectId: string,
    attachmentId: string,
  ): Promise<AttachmentDownload> {
    const id = parseId("attachmentId", attachmentId);
    const { open, oid } = await this.readable(caller, name, layerId, objectId);
    const a = await findAttachment(this.db.kysely, open.row.item_id, open.schema.id, oid, id);
    if (!a) throw errors.notFound(`Attachment ${id} of feature ${oid} in layer ${open.schema.id}`);
    return {
      filename: a.name,
      contentType: a.contentType,
      size: a.size,
      open: () => streamChunks(this.db.kysely, attachmentChunks(a)),
    };
  }

  /** `addAttachment`: a new attachment of the feature. */
  async add(
    caller: Caller | null,
    name: string,
    layerId: string,
    objectId: string,
    file: AttachmentFile,
    options: { keywords?: string | undefined } = {},
  ): Promise<{ result: AttachmentEditResult; editMoment: number }> {
    const open = await this.openWithAttachments(caller, name, layerId);
    const oid = parseId("objectId", objectId);
    const restriction = this.mayAdd(open);
    return this.change(open, oid, restriction, async (trx) => {
      const attachmentId = await takeAttachmentId(trx, open.row.item_id, open.schema.id);
      if (attachmentId === undefined) throw noStorage(open);
      const stored = await insertAttachment(
        trx,
        {
          itemId: open.row.item_id,
          layerId: open.schema.id,
          objectId: oid,
          attachmentId,
          globalId: newGlobalId(),
          ...metaOf(file, options.keywords ?? ""),
        },
        file,
      );
      return succeeded(stored);
    });
  }

  /** `updateAttachment`: a new file (and keywords, if sent) for an attachment of the feature. */
  async update(
    caller: Caller | null,
    name: string,
    layerId: string,
    objectId: string,
    attachmentId: number,
    file: AttachmentFile,
    options: { keywords?: string | undefined } = {},
  ): Promise<{ result: AttachmentEditResult; editMoment: number }> {
    const open = await this.openWithAttachments(caller, name, layerId);
    const oid = parseId("objectId", objectId);
    const restriction = this.data.authorize(open, "update");
    return this.change(open, oid, restriction, async (trx) => {
      const existing = await findAttachment(trx, open.row.item_id, open.schema.id, oid, attachmentId);
      if (!existing) throw new NoChange(attachmentMissing(attachmentId));
      const stored = await replaceAttachment(
        trx,
        existing,
        metaOf(file, options.keywords ?? existing.keywords),
        file,
      );
      return succeeded(stored);
    });
  }

  /**
   * `deleteAttachments`: attachments of the feature by id. With `rollbackOnFailure` (the default)
   * an id that is not one of the feature's undoes the others; without, the rest are deleted.
   */
  async delete(
    caller: Caller | null,
    name: string,
    layerId: string,
    objectId: string,
    attachmentIds: readonly number[],
    options: { rollbackOnFailure?: boolean | undefined } = {},
  ): Promise<{ results: AttachmentEditResult[]; editMoment: number }> {
    const open = await this.openWithAttachments(caller, name, layerId);
    const oid = parseId("objectId", objectId);
    const restriction = this.data.authorize(open, "update");
    const rollback = options.rollbackOnFailure !== false;
    // A feature out of reach: each id is reported, as ArcGIS reports every edit of a request.
    const missingFeature = attachmentIds.map((id) => featureMissing(id));
    const { result, editMoment } = await this.change(
      open,
      oid,
      restriction,
      async (trx) => {
        const gone = await deleteAttachmentRows(trx, open.row.item_id, open.schema.id, oid, attachmentIds);
        const reported = new Set<number>();
        const results = attachmentIds.map((id) => {
          // A repeated id is deleted once: the first mention succeeds, the others find it missing.
          const globalId = gone.get(id);
          if (globalId === undefined || reported.has(id)) return attachmentMissing(id);
          reported.add(id);
          return { objectId: id, globalId, success: true } satisfies AttachmentEditResult;
        });
        const anyFailed = results.some((r) => !r.success);
        if (gone.size === 0) throw new NoChange(results);
        if (rollback && anyFailed) throw new NoChange(results.map(rolledBack));
        return results;
      },
      missingFeature,
    );
    return { results: result, editMoment };
  }

  /** The layer, refused unless its definition says it has attachments. */
  private async openWithAttachments(
    caller: Caller | null,
    name: string,
    layerId: string,
  ): Promise<OpenLayer> {
    const open = await this.data.open(caller, name, layerId);
    if (open.definition.hasAttachments !== true) {
      throw errors.attachmentsNotSupported(open.row.name, open.schema.id);
    }
    return open;
  }

  /** The layer and the feature, when the caller may query them; a feature out of reach is missing. */
  private async readable(
    caller: Caller | null,
    name: string,
    layerId: string,
    objectId: string,
  ): Promise<{ open: OpenLayer; oid: number; feature: { globalId: string | null } }> {
    const open = await this.openWithAttachments(caller, name, layerId);
    const oid = parseId("objectId", objectId);
    const restriction = this.data.authorize(open, "query");
    const feature = await featureOf(this.db.kysely, open, oid, restriction);
    if (!feature) {
      throw errors.invalidParameter("objectId", `feature ${oid} does not exist in layer ${open.schema.id}`);
    }
    return { open, oid, feature };
  }

  /**
   * Adding an attachment takes `Update` or `Create` (ArcGIS: "supported with either"). Through
   * `Update` the caller reaches the features updates reach; through `Create` alone (a layer that
   * only takes new features, such as a public survey's), every feature.
   */
  private mayAdd(open: OpenLayer): OwnershipRestriction | undefined {
    try {
      return this.data.authorize(open, "update");
    } catch (err) {
      if (!(err instanceof PorticoError) || (err.code !== 403 && err.code !== 499)) throw err;
      try {
        this.data.authorize(open, "create");
      } catch {
        // Neither: the refusal of updates says why.
        throw err;
      }
      return undefined;
    }
  }

  /**
   * Runs one attachment change in a transaction: the layer's edit dates moved (its row locked),
   * the feature checked, then `work`. A `NoChange` thrown by `work` rolls it all back and answers
   * its results; a feature out of reach answers `missing` (or a failure saying so).
   */
  private async change<T>(
    open: OpenLayer,
    oid: number,
    restriction: OwnershipRestriction | undefined,
    work: (trx: Queryable) => Promise<T>,
    missing?: T,
  ): Promise<{ result: T; editMoment: number }> {
    const now = Date.now();
    try {
      const result = await this.db.transaction(async (trx) => {
        const edit = await beginLayerEdit(trx, open.row.item_id, open.schema.id, now, 0);
        if (edit === undefined) throw noStorage(open);
        if (!(await featureOf(trx, open, oid, restriction))) {
          throw new NoChange(missing ?? featureMissing());
        }
        // The feature's attachments are part of it for a collaboration copying the layer.
        await touchRows(trx, open.row.item_id, open.schema.id, [oid], edit.moment);
        return work(trx);
      });
      return { result, editMoment: now };
    } catch (err) {
      if (err instanceof NoChange) return { result: err.results as T, editMoment: now };
      throw err;
    }
  }
}

/** The feature's GlobalID (null without a GlobalID field), or undefined when it is out of reach. */
async function featureOf(
  q: Queryable,
  open: OpenLayer,
  oid: number,
  restriction: OwnershipRestriction | undefined,
): Promise<{ globalId: string | null } | undefined> {
  if (restriction?.username === null) return undefined;
  const itemId = open.row.item_id;
  const found = await existingRows(q, itemId, open.schema, [oid]);
  if (!found.has(oid)) return undefined;
  if (restriction) {
    // The creator field is read as the GlobalID is, by object id.
    const creators = await existingRows(q, itemId, { ...open.schema, globalIdField: restriction.field }, [
      oid,
    ]);
    if (creators.get(oid)?.toLowerCase() !== restriction.username.toLowerCase()) return undefined;
  }
  return { globalId: found.get(oid) ?? null };
}

/** An object or attachment id of the path or a parameter. */
function parseId(name: string, raw: string): number {
  if (!/^\d{1,15}$/.test(raw)) throw errors.invalidParameter(name, `'${raw.slice(0, 40)}' is not an id`);
  return Number(raw);
}

/** A declared content type kept as sent when it is a plausible one; answers check it again. */
const CONTENT_TYPE = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;

function metaOf(file: AttachmentFile, keywords: string): AttachmentMeta {
  return {
    name: file.filename,
    contentType: CONTENT_TYPE.test(file.contentType) ? file.contentType : "application/octet-stream",
    keywords,
  };
}

function noStorage(open: OpenLayer): PorticoError {
  return errors.invalidParameter(
    "layer",
    `layer ${open.schema.id} holds no data: its definition could not be stored`,
  );
}
