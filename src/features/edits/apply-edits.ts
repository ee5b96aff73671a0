import type { Queryable } from "../../db/database.js";
import { errors } from "../../errors.js";
import { boundsOf, type Geometry } from "../geometry/esri-json.js";
import { projectGeometry, resolveSpatialReference } from "../geometry/projection.js";
import type { LayerField, LayerSchema } from "../layer-schema.js";
import {
  beginLayerEdit,
  deleteRows,
  existingRows,
  insertRows,
  type LayerStore,
  objectIdsByGlobalId,
  type RowWrite,
  updateRow,
} from "../layer-store.js";
import { layerReference } from "../query/layer-query.js";
import {
  type CheckedAdd,
  type CheckedUpdate,
  checkAdd,
  checkUpdate,
  type DeleteIds,
  EDIT_ERRORS,
  type EditError,
} from "./values.js";

/**
 * One layer's part of an edit (`applyEdits`, `addFeatures`, `updateFeatures`, `deleteFeatures`),
 * applied inside the caller's transaction: values checked, geometries projected into the layer's
 * spatial reference, object ids taken from the layer's counter, rows written, and the layer's edit
 * dates moved. What fails is reported per feature with ArcGIS's edit error codes; with
 * `rollbackOnFailure` one failure undoes the whole request (`RolledBack`).
 */

export interface LayerEdits {
  adds: unknown[];
  updates: unknown[];
  deletes: DeleteIds;
}

export interface EditResult {
  objectId: number | null;
  uniqueId: number | null;
  globalId: string | null;
  success: boolean;
  error?: EditError;
}

export interface LayerEditResults {
  id: number;
  addResults: EditResult[];
  updateResults: EditResult[];
  deleteResults: EditResult[];
}

export interface EditOptions {
  store: LayerStore;
  itemId: string;
  now: number;
  /** The editing user, for editor tracking; undefined for anonymous edits. */
  editor?: string;
  useGlobalIds: boolean;
  allowGeometryUpdates: boolean;
  /**
   * Ownership-based access control: updates and deletes reach only rows whose creator field holds
   * this user (undefined: every row).
   */
  onlyCreatedBy?: { field: LayerField; username: string | null };
}

/** Thrown inside the transaction to undo it, carrying the results to answer. */
export class RolledBack extends Error {
  constructor(readonly results: LayerEditResults[]) {
    super("rolled back");
  }
}

const failed = (
  error: EditError,
  objectId: number | null = null,
  globalId: string | null = null,
): EditResult => ({
  objectId,
  uniqueId: objectId,
  globalId,
  success: false,
  error,
});

const succeeded = (objectId: number, globalId: string | null): EditResult => ({
  objectId,
  uniqueId: objectId,
  globalId,
  success: true,
});

/** A feature's geometry in the layer's spatial reference (it may name its own). */
export function inLayerReference(
  schema: LayerSchema,
  geometry: Geometry | null | undefined,
): Geometry | null | undefined | EditError {
  const placed = projected(schema, geometry);
  if (placed && !isError(placed)) {
    // Coordinates no spatial reference reaches (a point at 1e300) would be stored, and then break
    // every answer that quantizes them (the Maps SDK's PBF tiles): refused here instead.
    const b = boundsOf(placed);
    const limit = layerReference(schema).reference.geographic ? MAX_GEOGRAPHIC : MAX_PROJECTED;
    if (![b.xmin, b.ymin, b.xmax, b.ymax].every((v) => Number.isFinite(v) && Math.abs(v) <= limit)) {
      return {
        code: EDIT_ERRORS.geometryNotSet,
        description: `Geometry could not be set: its coordinates must lie within ±${limit} in the layer's spatial reference.`,
      };
    }
  }
  return placed;
}

/** Largest coordinate stored: degrees (with room for features drawn across the antimeridian)... */
const MAX_GEOGRAPHIC = 1_000;
/** ...and projected units (a trillion meters is far beyond any projection's domain). */
const MAX_PROJECTED = 1e12;

function projected(
  schema: LayerSchema,
  geometry: Geometry | null | undefined,
): Geometry | null | undefined | EditError {
  if (!geometry?.spatialReference) return geometry;
  const from = resolveSpatialReference(geometry.spatialReference);
  if (!from.ok)
    return {
      code: EDIT_ERRORS.geometryNotSet,
      description: `Geometry could not be set: ${from.error.message}`,
    };
  const to = layerReference(schema).reference;
  if (from.value.key === to.key) return geometry;
  const projected = projectGeometry(geometry, from.value, to);
  if (!projected.ok)
    return {
      code: EDIT_ERRORS.geometryNotSet,
      description: `Geometry could not be set: ${projected.error.message}`,
    };
  return projected.value;
}

export const isError = (v: unknown): v is EditError =>
  typeof v === "object" && v !== null && "code" in v && "description" in v;

/** Applies one layer's edits in `trx`; answers the per-feature results and whether any failed. */
export async function applyLayerEdits(
  trx: Queryable,
  schema: LayerSchema,
  edits: LayerEdits,
  options: EditOptions,
): Promise<{ results: LayerEditResults; anyFailed: boolean }> {
  const { itemId, now } = options;
  const editor = options.editor;
  const addResults: EditResult[] = [];
  const updateResults: EditResult[] = [];
  const deleteResults: EditResult[] = [];
  // Nothing to do is no edit: the layer's edit dates stay, so that a caller without any edit
  // capability (none is checked for an empty list) cannot move them.
  const deleteCount =
    "objectIds" in edits.deletes ? edits.deletes.objectIds.length : edits.deletes.globalIds.length;
  if (edits.adds.length === 0 && edits.updates.length === 0 && deleteCount === 0) {
    return { results: { id: schema.id, addResults, updateResults, deleteResults }, anyFailed: false };
  }

  // Adds: checked first, then one range of ids for those that passed, then one insert.
  const adds: (CheckedAdd | EditError)[] = edits.adds.map((feature) => {
    const checked = checkAdd(schema, feature, {
      useGlobalIds: options.useGlobalIds,
      now,
      ...(editor !== undefined ? { editor } : {}),
    });
    if (!checked.ok) return checked.error;
    const geometry = inLayerReference(schema, checked.value.geometry);
    if (isError(geometry)) return geometry;
    return { ...checked.value, geometry: geometry ?? null };
  });
  const good = adds.filter((a): a is CheckedAdd => !isError(a));
  const edit = await beginLayerEdit(trx, itemId, schema.id, now, good.length);
  if (edit === undefined)
    throw errors.invalidParameter(
      "layer",
      `layer ${schema.id} holds no data: its definition could not be stored`,
    );
  const { moment } = edit;
  let next = edit.firstObjectId;
  const rows: RowWrite[] = [];
  for (const add of adds) {
    if (isError(add)) {
      addResults.push(failed(add));
      continue;
    }
    const objectId = next++;
    rows.push({ objectId, columns: add.columns, geometry: add.geometry });
    addResults.push(succeeded(objectId, add.globalId ?? null));
  }
  await insertRows(trx, options.store, itemId, schema, rows, moment);

  // Updates: one at a time (each names its own columns), after resolving GlobalIDs in one query.
  const updates: (CheckedUpdate | EditError)[] = edits.updates.map((feature) => {
    const checked = checkUpdate(schema, feature, {
      useGlobalIds: options.useGlobalIds,
      allowGeometryUpdates: options.allowGeometryUpdates,
      now,
      ...(editor !== undefined ? { editor } : {}),
    });
    if (!checked.ok) return checked.error;
    const geometry = inLayerReference(schema, checked.value.geometry);
    if (isError(geometry)) return geometry;
    return geometry === undefined ? checked.value : { ...checked.value, geometry };
  });
  const byGlobalId = await objectIdsByGlobalId(
    trx,
    itemId,
    schema,
    updates.flatMap((u) => (!isError(u) && u.globalId !== undefined ? [u.globalId] : [])),
  );
  const allowed = await allowedRows(
    trx,
    schema,
    itemId,
    options,
    updates.flatMap((u) => {
      if (isError(u)) return [];
      const id = u.objectId ?? (u.globalId !== undefined ? byGlobalId.get(u.globalId) : undefined);
      return id === undefined ? [] : [id];
    }),
  );
  for (const update of updates) {
    if (isError(update)) {
      updateResults.push(failed(update));
      continue;
    }
    const objectId =
      update.objectId ?? (update.globalId !== undefined ? byGlobalId.get(update.globalId) : undefined);
    const missing = failed(
      { code: EDIT_ERRORS.objectMissing, description: "Object is missing." },
      objectId ?? null,
      update.globalId ?? null,
    );
    if (objectId === undefined || !allowed(objectId)) {
      updateResults.push(missing);
      continue;
    }
    const written = await updateRow(
      trx,
      options.store,
      itemId,
      schema,
      {
        objectId,
        columns: update.columns,
        ...(update.geometry !== undefined ? { geometry: update.geometry } : {}),
      },
      moment,
    );
    updateResults.push(written ? succeeded(objectId, update.globalId ?? null) : missing);
  }

  // Deletes: ids resolved, then one statement; ids that were not there are reported missing.
  let ids: { objectId?: number; globalId?: string }[];
  if ("globalIds" in edits.deletes) {
    const found = await objectIdsByGlobalId(trx, itemId, schema, edits.deletes.globalIds);
    ids = edits.deletes.globalIds.map((g) => {
      const objectId = found.get(g);
      return objectId === undefined ? { globalId: g } : { objectId, globalId: g };
    });
  } else ids = edits.deletes.objectIds.map((objectId) => ({ objectId }));
  const mayDelete = await allowedRows(
    trx,
    schema,
    itemId,
    options,
    ids.flatMap((i) => (i.objectId === undefined ? [] : [i.objectId])),
  );
  const toDelete = ids.flatMap((i) =>
    i.objectId !== undefined && mayDelete(i.objectId) ? [i.objectId] : [],
  );
  const globalIds =
    schema.globalIdField && toDelete.length > 0
      ? await existingRows(trx, itemId, schema, toDelete)
      : new Map<number, string | null>();
  const gone = await deleteRows(trx, itemId, schema, toDelete, moment);
  const reported = new Set<number>();
  for (const i of ids) {
    const objectId = i.objectId;
    // A repeated id is deleted once: the first mention succeeds, the others find it missing.
    if (objectId !== undefined && gone.has(objectId) && !reported.has(objectId)) {
      reported.add(objectId);
      deleteResults.push(succeeded(objectId, i.globalId ?? globalIds.get(objectId) ?? null));
    } else {
      deleteResults.push(
        failed(
          { code: EDIT_ERRORS.objectMissing, description: "Object is missing." },
          objectId ?? null,
          i.globalId ?? null,
        ),
      );
    }
  }

  const anyFailed = [...addResults, ...updateResults, ...deleteResults].some((r) => !r.success);
  return { results: { id: schema.id, addResults, updateResults, deleteResults }, anyFailed };
}

/**
 * With ownership-based access control, which of `objectIds` the editor may change: those it
 * created. Others are answered as missing, as if the editor could not see them.
 */
async function allowedRows(
  trx: Queryable,
  schema: LayerSchema,
  itemId: string,
  options: EditOptions,
  objectIds: number[],
): Promise<(objectId: number) => boolean> {
  const only = options.onlyCreatedBy;
  if (!only || objectIds.length === 0) return () => true;
  if (only.username === null) return () => false;
  const creators = await creatorsOf(trx, schema, itemId, only.field, objectIds);
  const mine = only.username.toLowerCase();
  return (objectId) => creators.get(objectId)?.toLowerCase() === mine;
}

async function creatorsOf(
  trx: Queryable,
  schema: LayerSchema,
  itemId: string,
  field: LayerField,
  objectIds: number[],
): Promise<Map<number, string | null>> {
  // The GlobalID lookup reads one column by id; the creator is read the same way.
  return existingRows(trx, itemId, { ...schema, globalIdField: field }, objectIds);
}

/** Results with every success undone: the failures keep their error, the rest say they were rolled back. */
export function rolledBackResults(results: LayerEditResults[]): LayerEditResults[] {
  const undo = (r: EditResult): EditResult =>
    r.success ? failed({ code: 1003, description: "Operation rolled back." }, r.objectId, r.globalId) : r;
  return results.map((l) => ({
    id: l.id,
    addResults: l.addResults.map(undo),
    updateResults: l.updateResults.map(undo),
    deleteResults: l.deleteResults.map(undo),
  }));
}
