import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { type Caller, isCaller, requirePrivilege } from "../../auth/caller.js";
import { writeFile } from "../../content/file-store.js";
import { findItem, updateItem } from "../../content/item.repository.js";
import type { ItemService } from "../../content/item.service.js";
import { MAX_MULTIPART_BYTES } from "../../content/upload.service.js";
import type { Db } from "../../db/database.js";
import { errors, PorticoError } from "../../errors.js";
import { recordEvent } from "../../events/outbox.js";
import { newId } from "../../ids.js";
import { ExportSourceGone, type FeatureDataService } from "../feature-data.service.js";
import { FEATURE_SERVICE_TYPE } from "../feature-services.service.js";
import {
  type ResolvedReference,
  resolveSpatialReference,
  spatialReferenceOf,
} from "../geometry/projection.js";
import { DbfTooWide } from "../output/shapefile.js";
import { readSpatialReferenceParam } from "../query/layer-query.js";
import { type ExportLayerSource, ExportTooLarge, exportItemType, writeExport } from "./export-files.js";
import {
  claimExportJob,
  countProcessingExportsOf,
  type ExportJobRow,
  findExportJobOfItem,
  finishExportJob,
  insertExportJob,
  nextDueExportJob,
  releaseExportJob,
  renewExportLease,
} from "./export-job.repository.js";
import type { ExportFormat, ExportLayerInfo, ExportParameters } from "./export-parameters.js";

/**
 * `content/users/<u>/export`: a hosted feature layer's features written as a file, in a new item
 * of the caller's. The request checks everything (the caller's rights, the format, each layer and
 * its `where`) and makes the item and its job in one transaction, with the item's `add` event;
 * the item then reports `processing` on `items/<id>/status` until a background job
 * (`jobs/export-runner.ts`, on any node) has written the file and stored it as the item's data
 * (`completed`, with an `update` event) or given up (`failed`, with a message). The job reads the
 * layer a page at a time into a file on disk, so neither the request nor the job holds a layer
 * in memory; the file is stored in one transaction, so an item is never left half-written.
 */

/** The most an export's file may be: as much as any item's data (an upload in parts). */
export const MAX_EXPORT_BYTES = MAX_MULTIPART_BYTES;
/** Features read per page. */
const PAGE_SIZE = 1_000;
/** How long a node holds a job between renewals (one per page); a dead node's job waits this long. */
export const EXPORT_LEASE_MS = 60_000;
/**
 * The most exports one user may have processing (queued or running) at once: a node runs one job
 * at a time, so this bounds how long one user's exports keep others' waiting (the runner also
 * takes owners in turn, see `nextDueExportJob`).
 */
export const MAX_PROCESSING_EXPORTS_PER_USER = 5;
/** A job whose node died this many times is failed rather than tried again. */
const MAX_ATTEMPTS = 3;

/** What the export route hands the service, checked as far as the route can. */
export interface ExportRequest {
  itemId: string;
  format: ExportFormat;
  parameters: ExportParameters;
  title?: string | undefined;
  tags?: string[] | undefined;
  snippet?: string | undefined;
  description?: string | undefined;
}

/** The job as it is stored: what the request checked, for the job to run. */
interface StoredParameters {
  title: string;
  layers: ExportLayerInfo[];
  /** targetSR as given (resolved again when the job runs). */
  targetSR?: unknown;
}

export interface ExportStarted {
  type: string;
  jobId: string;
  exportItemId: string;
  serviceItemId: string;
  exportFormat: ExportFormat;
}

export interface ExportStatus {
  itemId: string;
  status: "processing" | "completed" | "failed";
  statusMessage: string;
}

/** The job was handed back because this node stops. */
class Stopped extends Error {}

export class ExportService {
  constructor(
    private readonly db: Db,
    private readonly items: ItemService,
    private readonly featureData: FeatureDataService,
    private readonly options: {
      /** Where jobs write their files (a directory of portico's own, on the data disk). */
      workDir: string;
      /** Woken when a job is queued: the export runner listens. */
      wakeUp: { wake(): void };
      maxBytes?: number;
    },
  ) {}

  /** Checks the export, makes its item and job, and wakes the runner. */
  async start(
    caller: Caller | null,
    username: string,
    folder: string | undefined,
    request: ExportRequest,
  ): Promise<ExportStarted> {
    requirePrivilege(caller, "portal:user:createItem");
    if (!isCaller(caller, username)) throw errors.forbidden("Content can only be added to your own account.");
    const { row } = await this.items.visible(caller, request.itemId);
    if (row.type !== FEATURE_SERVICE_TYPE) {
      throw errors.invalidParameter(
        "itemId",
        `'${request.itemId}' is a ${row.type}, not a hosted feature service`,
      );
    }
    const asked = request.parameters.layers;
    const source = await this.featureData.exportSource(
      caller,
      request.itemId,
      asked?.map((l) => ({ id: l.id, where: l.where })),
    );
    if (request.format === "GeoJson" && source.layers.length > 1) {
      throw errors.invalidParameter(
        "exportParameters",
        `names ${source.layers.length} layers; a GeoJson export holds one: name it in 'layers'`,
      );
    }
    if (request.parameters.targetSR !== undefined) {
      readSpatialReferenceParam("exportParameters", JSON.stringify(request.parameters.targetSR));
    }
    const layers: ExportLayerInfo[] = source.layers.map(
      (l) =>
        asked?.find((a) => a.id === l.id) ?? {
          id: l.id,
          where: "",
          includeGeometry: true,
          xColumnName: "x",
          yColumnName: "y",
        },
    );
    const title = request.title?.trim() || row.title;
    const type = exportItemType(request.format, layers.length);
    const jobId = newId();
    const stored: StoredParameters = {
      title,
      layers,
      ...(request.parameters.targetSR !== undefined ? { targetSR: request.parameters.targetSR } : {}),
    };
    const now = Date.now();
    const created = await this.db.transaction(async (trx) => {
      // Counted under the user's lock, so that concurrent requests cannot all pass the cap.
      const processing = await countProcessingExportsOf(trx, this.db.engine, username);
      if (processing >= MAX_PROCESSING_EXPORTS_PER_USER) {
        throw errors.conflict(
          `User '${username}' has ${processing} exports processing; a user may have at most ${MAX_PROCESSING_EXPORTS_PER_USER} at once.`,
          "Wait until one of them has completed or failed (items/<exportItemId>/status), then export again.",
        );
      }
      const item = await this.items.insertIn(trx, caller, username, folder, {
        title,
        type,
        typeKeywords: ["Data", "exportItem"],
        tags: request.tags ?? [],
        snippet: request.snippet,
        description: request.description,
      });
      await insertExportJob(
        trx,
        {
          job_id: jobId,
          item_id: item.id,
          service_item_id: request.itemId,
          format: request.format,
          parameters: JSON.stringify(stored),
          only_created_by: source.onlyCreatedBy,
        },
        now,
      );
      return item;
    });
    this.options.wakeUp.wake();
    return {
      type,
      jobId,
      exportItemId: created.id,
      serviceItemId: request.itemId,
      exportFormat: request.format,
    };
  }

  /**
   * The export status of item `id` (`items/<id>/status`), for its owner and administrators;
   * undefined when the item is not an export's. A `jobId` that is not the item's export is refused.
   */
  async status(
    caller: Caller | null,
    username: string,
    id: string,
    jobId: string | undefined,
  ): Promise<ExportStatus | undefined> {
    const job = await this.db.transaction(async (trx) => {
      await this.items.mustOwnOrAdminister(trx, caller, username, id, "portal:admin:updateItems");
      return findExportJobOfItem(trx, id);
    });
    if (!job) return undefined;
    if (jobId !== undefined && jobId !== "" && jobId !== job.job_id) {
      throw errors.invalidParameter("jobId", `is not the export job of item '${id}'`);
    }
    return {
      itemId: id,
      status: job.status as ExportStatus["status"],
      statusMessage: job.message,
    };
  }

  /** A job that is due (never taken, or its node stopped renewing), if any. */
  async nextDue(): Promise<string | undefined> {
    return nextDueExportJob(this.db.kysely, Date.now());
  }

  /**
   * Runs job `jobId` if this node can take it: writes the file, stores it as the item's data and
   * marks the job completed, or failed with a message. `stopping` says this node is stopping: the
   * job is then handed back at its next page, for another node or the next start.
   */
  async run(
    jobId: string,
    stopping: () => boolean,
    onError: (err: unknown, what: string) => void,
  ): Promise<void> {
    const now = Date.now();
    let held = leaseFrom(now);
    const job = await this.db.transaction((trx) => claimExportJob(trx, jobId, now, held));
    if (!job) return;
    const finish = (status: "completed" | "failed", message: string) =>
      this.db.transaction((trx) => finishExportJob(trx, job.job_id, held, { status, message }, Date.now()));
    if (job.attempts > MAX_ATTEMPTS) {
      await finish("failed", `The export was interrupted ${MAX_ATTEMPTS} times; export again.`);
      return;
    }
    const dir = path.join(this.options.workDir, `${job.job_id}-${randomBytes(6).toString("hex")}`);
    try {
      await fs.promises.mkdir(dir, { recursive: true });
      const heartbeat = async () => {
        if (stopping()) throw new Stopped();
        const next = leaseFrom(Date.now());
        const renewed = await this.db.transaction((trx) => renewExportLease(trx, job.job_id, held, next));
        // Another node took it (this one stalled past its lease), or the item was deleted.
        if (!renewed) throw new Stopped();
        held = next;
      };
      const file = await this.write(job, dir, heartbeat);
      await heartbeat();
      // Only while the node still holds the job: otherwise another node runs it, or the item is gone.
      // The job's row is the transaction's first write: while the file is stored (a long copy for
      // a large file) the row stays locked on PostgreSQL and writes wait on SQLite, so another
      // node's claim waits for the commit and then finds the job completed, however long it took.
      await this.db.transaction(async (trx) => {
        const item = await findItem(trx, job.item_id);
        if (!item) return;
        const at = Date.now();
        if (
          !(await finishExportJob(trx, job.job_id, held, { status: "completed", message: "completed" }, at))
        )
          return;
        const data = await writeFile(
          trx,
          job.item_id,
          "data",
          { name: file.name, contentType: file.contentType },
          { path: file.path },
        );
        await updateItem(trx, job.item_id, { size: data.size, modified: Math.max(at, item.modified + 1) });
        await recordEvent(
          trx,
          {
            source: "item",
            operation: "update",
            objectId: job.item_id,
            actor: { id: item.owner_id, username: item.owner },
          },
          at,
        );
      });
    } catch (err) {
      if (err instanceof Stopped) {
        if (stopping()) await this.db.transaction((trx) => releaseExportJob(trx, job.job_id, held));
        return;
      }
      // A query that failed because the service or a layer was deleted while the job read it.
      const message = failureMessage(err) ?? (await this.sourceGone(job));
      if (message === undefined) onError(err, `export job ${job.job_id}`);
      await finish("failed", message ?? "The export failed on an internal error; export again.");
    } finally {
      await fs.promises.rm(dir, { recursive: true, force: true });
    }
  }

  /** What the item's status says when the job's service or one of its layers no longer exists. */
  private async sourceGone(job: ExportJobRow): Promise<string | undefined> {
    const stored = JSON.parse(job.parameters) as StoredParameters;
    try {
      for (const info of stored.layers) await this.featureData.exportLayer(job.service_item_id, info.id);
    } catch (err) {
      if (err instanceof ExportSourceGone) return failureMessage(err);
    }
    return undefined;
  }

  private async write(job: ExportJobRow, dir: string, heartbeat: () => Promise<void>) {
    const stored = JSON.parse(job.parameters) as StoredParameters;
    let targetSR: ResolvedReference | undefined;
    if (stored.targetSR !== undefined) {
      const resolved = resolveSpatialReference(
        readSpatialReferenceParam("exportParameters", JSON.stringify(stored.targetSR)).spatialReference,
      );
      if (resolved.ok) targetSR = resolved.value;
    }
    const sources: ExportLayerSource[] = [];
    for (const info of stored.layers) {
      const open = await this.featureData.exportLayer(job.service_item_id, info.id);
      const featureData = this.featureData;
      sources.push({
        info,
        name: String(open.definition.name ?? `layer ${info.id}`),
        schema: open.schema,
        definition: open.definition,
        async *pages(format, outSR, returnGeometry) {
          let after = 0;
          for (;;) {
            const page = await featureData.exportPage(open, {
              where: info.where,
              outSR: outSR ? JSON.stringify(spatialReferenceOf(outSR)) : undefined,
              returnGeometry,
              onlyCreatedBy: job.only_created_by,
              after,
              size: PAGE_SIZE,
              format,
            });
            yield page.answer;
            await heartbeat();
            if (page.lastObjectId === undefined) return;
            after = page.lastObjectId;
          }
        },
      });
    }
    return writeExport({
      format: job.format as ExportFormat,
      layers: sources,
      title: stored.title,
      ...(targetSR ? { targetSR } : {}),
      maxBytes: this.options.maxBytes ?? MAX_EXPORT_BYTES,
      dir,
      progress: heartbeat,
    });
  }
}

/** A lease from `now`; the jitter keeps two nodes' leases apart, since the value is the holder's token. */
function leaseFrom(now: number): number {
  return now + EXPORT_LEASE_MS + Math.floor(Math.random() * 1000);
}

/** What the item's status says of a failure the caller can act on; undefined for an internal one. */
function failureMessage(err: unknown): string | undefined {
  if (err instanceof ExportTooLarge) return `The export failed: ${err.message}.`;
  if (err instanceof ExportSourceGone || err instanceof DbfTooWide)
    return `The export failed: ${err.message}.`;
  if (err instanceof PorticoError) return `The export failed: ${[err.message, ...err.details].join(" ")}`;
  return undefined;
}
