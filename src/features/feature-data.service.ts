import type { Caller } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import {
  applyLayerEdits,
  type EditOptions,
  type LayerEditResults,
  RolledBack,
  rolledBackResults,
} from "./edits/apply-edits.js";
import { type DeleteIds, MAX_EDIT_FEATURES, parseDeletes, parseFeatureList } from "./edits/values.js";
import type { ServiceRow } from "./feature-service.repository.js";
import type { FeatureServices } from "./feature-services.service.js";

/** What `FeatureServices.open` answers: the service, its row and its item's owner. */
type OpenedService = Awaited<ReturnType<FeatureServices["open"]>>;

import type { Bounds } from "./geometry/esri-json.js";
import { layerResource } from "./layer-resource.js";
import { fieldNamed, type LayerField, type LayerSchema, layerSchema, SchemaError } from "./layer-schema.js";
import { layerStates } from "./layer-store.js";
import { type AnswerFormat, queryAnswer } from "./query/answer.js";
import { type LayerQuery, type QueryParams, readLayerQuery, readObjectIds } from "./query/layer-query.js";
import { type QueryContext, runQuery, whereFields } from "./query/run-query.js";
import { compileWhere, describeWhereError } from "./query/where.js";
import type { LayerDefinition, StoredService } from "./service-definition.js";

/**
 * The data of hosted feature layers: queries and edits, with ArcGIS's rules of who may do what.
 *
 * - Reading follows the service item's sharing (a layer the caller may not see answers as missing:
 *   499 to anonymous callers, 400 to others).
 * - The owner and administrators may always query and edit. Others need the capability (`Query`;
 *   `Create`, `Update`, `Delete`, with `Editing`), and with ownership-based access control
 *   (`editorTrackingInfo.enableOwnershipAccessControl`) reach only the features they created
 *   unless `allowOthersToQuery/Update/Delete` say otherwise; anonymous callers as
 *   `allowAnonymousToQuery/Update/Delete` say.
 */

/** A job's service or layer was deleted or changed since the export was asked for. */
export class ExportSourceGone extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ExportSourceGone";
  }
}

export type Operation = "query" | "create" | "update" | "delete";

/**
 * Ownership-based access control for one operation: the caller reaches only the features whose
 * creator field holds `username` (null: an anonymous caller, who reaches none).
 */
export type OwnershipRestriction = { field: LayerField; username: string | null };

export interface OpenLayer {
  row: ServiceRow;
  service: StoredService;
  definition: LayerDefinition;
  schema: LayerSchema;
  /** Owner or administrator: every operation, every feature. */
  privileged: boolean;
  caller: Caller | null;
}

/** Layer schemas by service item, layer and definition version: a definition is read once per change. */
const SCHEMA_CACHE_LIMIT = 500;

export class FeatureDataService {
  private readonly schemas = new Map<string, LayerSchema>();
  /** Layer extents by the data version they were computed for. */
  private readonly extents = new Map<string, Bounds | null>();
  /** Counts of every feature of a layer, by the definition and data version they were taken at. */
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly db: Db,
    private readonly services: FeatureServices,
  ) {}

  /** The layer `layerId` of service `name`, if the caller may see it. */
  async open(caller: Caller | null, name: string, layerId: string): Promise<OpenLayer> {
    return this.layerOf(caller, await this.services.open(caller, name), layerId);
  }

  /**
   * A layer of a service already opened for the caller: the service-level operations open the
   * service once (its row, item and sharing) and find each of their layers here.
   */
  private layerOf(caller: Caller | null, opened: OpenedService, layerId: string): OpenLayer {
    const { row, service, owner } = opened;
    const id = /^\d{1,9}$/.test(layerId) ? Number(layerId) : undefined;
    const layer = service.layers.find((l) => l.id === id);
    const table = layer ? undefined : service.tables.find((t) => t.id === id);
    const definition = layer ?? table;
    if (!definition || id === undefined) throw errors.layerNotFound(row.name, layerId);
    const key = `${row.item_id}/${id}/${row.modified}`;
    let schema = this.schemas.get(key);
    if (!schema) {
      try {
        schema = layerSchema(definition, layer ? "layer" : "table", service.definition);
      } catch (err) {
        if (err instanceof SchemaError) {
          throw errors.invalidParameter(
            "layer",
            `${err.message.replace(/^has /, "")}: its definition cannot hold data; fix it with updateDefinition`,
          );
        }
        throw err;
      }
      if (this.schemas.size >= SCHEMA_CACHE_LIMIT) this.schemas.clear();
      this.schemas.set(key, schema);
    }
    const privileged =
      caller !== null && (caller.userId === owner.id || caller.privileges.has("portal:admin:updateItems"));
    return { row, service, definition, schema, privileged, caller };
  }

  /**
   * The layer or table resource, telling the truth about what it stores and answers: its fields,
   * the query formats and capabilities, the current extent of its features, its edit dates.
   */
  async layerResource(
    caller: Caller | null,
    name: string,
    layerId: string,
  ): Promise<Record<string, unknown>> {
    const open = await this.open(caller, name, layerId);
    const state = (await layerStates(this.db.kysely, open.row.item_id)).get(open.schema.id);
    const lastEdit = state?.lastEditDate ?? open.row.modified;
    let extent: Bounds | null = null;
    if (open.schema.geometryType && state) {
      const key = `${open.row.item_id}/${open.schema.id}/${state.dataLastEditDate}`;
      const cached = this.extents.get(key);
      if (cached !== undefined) extent = cached;
      else {
        const query = readLayerQuery({ returnExtentOnly: true }, open.schema, this.limits(open));
        const result = await runQuery(this.context(open, undefined), query);
        extent = result.mode === "extent" ? result.extent : null;
        if (this.extents.size >= SCHEMA_CACHE_LIMIT) this.extents.clear();
        this.extents.set(key, extent);
      }
    }
    return layerResource({
      service: open.service,
      definition: open.definition,
      schema: open.schema,
      serviceItemId: open.row.item_id,
      limits: this.limits(open),
      lastEditDate: lastEdit,
      dataLastEditDate: state?.dataLastEditDate ?? lastEdit,
      extent,
    });
  }

  private capabilities(open: OpenLayer): Set<string> {
    const text =
      (open.definition.capabilities as string | undefined) ?? open.service.definition.capabilities ?? "Query";
    return new Set(text.split(",").map((c) => c.trim().toLowerCase()));
  }

  private tracking(open: OpenLayer): Record<string, boolean> {
    return open.service.definition.editorTrackingInfo ?? {};
  }

  /**
   * Refuses an operation the layer does not allow the caller; answers the ownership restriction.
   * Public for the attachments of the layer's features, which follow the same rules.
   */
  authorize(open: OpenLayer, operation: Operation): OwnershipRestriction | undefined {
    if (operation !== "query" && Number(open.row.read_only) === 1) {
      throw errors.forbidden(
        `Service '${open.row.name}' is a copy received through a distributed collaboration whose workspace is not bidirectionalSyncCapable: it is read-only; edit its origin.`,
      );
    }
    if (open.privileged) return undefined;
    const caps = this.capabilities(open);
    const named = { query: "query", create: "create", update: "update", delete: "delete" }[operation];
    const editing = operation !== "query";
    // "Editing" alone (older services) allows every edit; with Create/Update/Delete listed, each names one.
    const listsEdits = caps.has("create") || caps.has("update") || caps.has("delete");
    const allowed = editing ? caps.has("editing") && (!listsEdits || caps.has(named)) : caps.has("query");
    if (!allowed) {
      throw errors.forbidden(
        `Layer ${open.schema.id} of service '${open.row.name}' does not allow ${operation === "query" ? "queries" : `${operation}s`} (capabilities: ${[...caps].join(",")}).`,
      );
    }
    const suffix =
      operation === "query"
        ? "Query"
        : operation === "update"
          ? "Update"
          : operation === "delete"
            ? "Delete"
            : undefined;
    return suffix ? this.ownership(open, suffix) : undefined;
  }

  /** Anonymous access and ownership-based access control of one operation, for a caller who is neither owner nor administrator. */
  private ownership(
    open: OpenLayer,
    suffix: "Query" | "Update" | "Delete",
  ): OwnershipRestriction | undefined {
    const tracking = this.tracking(open);
    if (open.caller === null && tracking[`allowAnonymousTo${suffix}`] === false) {
      throw errors.tokenRequired();
    }
    const creator = open.schema.editFields
      ? fieldNamed(open.schema, open.schema.editFields.creatorField)
      : undefined;
    if (tracking.enableOwnershipAccessControl === true && creator) {
      const others = tracking[`allowOthersTo${suffix}`] !== false;
      if (!others) return { field: creator, username: open.caller?.username ?? null };
    }
    return undefined;
  }

  /**
   * What an export of service item `serviceItemId` may read, checked for the caller when it is
   * asked for (ArcGIS's rule): the owner and administrators export any layer; others only when the
   * service's capabilities include `Extract` ("allow others to export"), and then only the
   * features a query of theirs would see (ownership-based access control). Each layer's `where`
   * is checked by the parser and compiler the query uses. Answers the layers in the order asked
   * (every layer and table when none is named) and the user whose features alone are exported.
   */
  async exportSource(
    caller: Caller,
    serviceItemId: string,
    layers: readonly { id: number; where: string }[] | undefined,
  ): Promise<{ layers: { id: number; name: string; where: string }[]; onlyCreatedBy: string | null }> {
    const found = await this.services.openItem(serviceItemId);
    if (!found) throw errors.invalidParameter("itemId", `'${serviceItemId}' is not a hosted feature service`);
    const opened = await this.services.open(caller, found.row.name);
    const asked =
      layers ?? [...opened.service.layers, ...opened.service.tables].map((l) => ({ id: l.id, where: "" }));
    if (asked.length === 0) {
      throw errors.invalidParameter(
        "exportParameters",
        `service '${found.row.name}' has no layers to export`,
      );
    }
    let onlyCreatedBy: string | null = null;
    const out: { id: number; name: string; where: string }[] = [];
    for (const [i, layer] of asked.entries()) {
      let open: OpenLayer;
      try {
        open = this.layerOf(caller, opened, String(layer.id));
      } catch {
        throw errors.invalidParameter(
          "exportParameters",
          `layers[${i}] names layer ${layer.id}, which service '${found.row.name}' does not have`,
        );
      }
      if (!open.privileged) {
        const caps = this.capabilities(open);
        if (!caps.has("extract")) {
          throw errors.forbidden(
            `Only the owner of service '${found.row.name}' or an administrator may export it: its capabilities do not include Extract (capabilities: ${[...caps].join(",")}).`,
          );
        }
        const restriction = this.ownership(open, "Query");
        if (restriction) onlyCreatedBy = restriction.username;
      }
      if (layer.where.trim() !== "") {
        const compiled = compileWhere(layer.where, {
          engine: this.db.engine,
          fields: whereFields(open.schema),
          now: Date.now(),
          firstParameter: 1,
        });
        if (!compiled.ok) {
          throw errors.invalidParameter(
            "exportParameters",
            `layers[${i}].where: ${describeWhereError(compiled.error)}`,
          );
        }
      }
      out.push({
        id: open.schema.id,
        name: String(open.definition.name ?? `layer ${open.schema.id}`),
        where: layer.where,
      });
    }
    return { layers: out, onlyCreatedBy };
  }

  /** A layer of service item `serviceItemId` as an export's job reads it, whoever runs the job. */
  async exportLayer(serviceItemId: string, layerId: number): Promise<OpenLayer> {
    const opened = await this.services.openItem(serviceItemId);
    if (!opened)
      throw new ExportSourceGone(`the service this export reads (item ${serviceItemId}) no longer exists`);
    try {
      return this.layerOf(null, opened, String(layerId));
    } catch {
      throw new ExportSourceGone(`layer ${layerId} no longer exists in service '${opened.row.name}'`);
    }
  }

  /**
   * One page of an export: at most `size` features of greater object id than `after`, in object
   * id order, with every field, answered as the query answers `format` (geometries in `outSR`,
   * or WGS 84 for GeoJSON). `lastObjectId` is where the next page starts; undefined at the end.
   */
  async exportPage(
    open: OpenLayer,
    page: {
      where: string;
      outSR?: string | undefined;
      returnGeometry: boolean;
      onlyCreatedBy: string | null;
      after: number;
      size: number;
      format: "json" | "geojson";
    },
  ): Promise<{ answer: Record<string, unknown>; count: number; lastObjectId: number | undefined }> {
    const query: LayerQuery = {
      ...readLayerQuery(
        { where: page.where, outFields: "*", returnGeometry: page.returnGeometry, outSR: page.outSR },
        open.schema,
        this.limits(open),
      ),
      limit: page.size,
      offset: 0,
      afterObjectId: page.after,
    };
    const creator =
      page.onlyCreatedBy !== null && open.schema.editFields
        ? fieldNamed(open.schema, open.schema.editFields.creatorField)
        : undefined;
    const result = await runQuery(
      this.context(open, creator ? { field: creator, username: page.onlyCreatedBy as string } : undefined),
      query,
    );
    const rows = result.mode === "features" ? result.rows : [];
    const last = rows[rows.length - 1];
    const answer = queryAnswer(
      open,
      query,
      { mode: "features", rows, exceeded: false },
      page.format,
    ) as Record<string, unknown>;
    return {
      answer,
      count: rows.length,
      lastObjectId:
        rows.length === page.size && last
          ? Number(last.attributes[open.schema.objectIdField.name])
          : undefined,
    };
  }

  private limits(open: OpenLayer) {
    const max = open.service.definition.maxRecordCount ?? 2000;
    const n = (v: unknown, fallback: number) => (typeof v === "number" && v > 0 ? v : fallback);
    return {
      maxRecordCount: n(open.definition.maxRecordCount, max),
      standardMaxRecordCount: n(open.definition.standardMaxRecordCount, Math.max(max, 32000)),
      tileMaxRecordCount: n(open.definition.tileMaxRecordCount, Math.max(max, 8000)),
    };
  }

  private context(open: OpenLayer, restriction: ReturnType<FeatureDataService["authorize"]>): QueryContext {
    return {
      q: this.db.kysely,
      engine: this.db.engine,
      postgis: this.db.postgis,
      itemId: open.row.item_id,
      schema: open.schema,
      now: Date.now(),
      ...(restriction && restriction.username !== null
        ? { creator: { field: restriction.field, username: restriction.username } }
        : {}),
    };
  }

  async query(
    caller: Caller | null,
    name: string,
    layerId: string,
    params: QueryParams,
    format: AnswerFormat,
  ): Promise<unknown> {
    return this.queryLayer(await this.open(caller, name, layerId), params, format);
  }

  private async queryLayer(open: OpenLayer, params: QueryParams, format: AnswerFormat): Promise<unknown> {
    const restriction = this.authorize(open, "query");
    this.checkFormat(open, format);
    const query = readLayerQuery(params, open.schema, this.limits(open));
    // Anonymous callers under ownership control see nothing of others' features.
    if (restriction && restriction.username === null)
      return queryAnswer(open, query, emptyResult(query), format);
    if (!restriction && countsEverything(query)) {
      return queryAnswer(open, query, { mode: "count", count: await this.layerCount(open, query) }, format);
    }
    const result = await runQuery(this.context(open, restriction), query);
    return queryAnswer(open, query, result, format);
  }

  /**
   * Service-level `query`: the same query on several layers, each with its own `where` and
   * `outFields` from `layerDefs` (`{"0": "pop > 10"}` or `[{"layerId": 0, "where": …, "outFields": …}]`),
   * all of them when `layerDefs` is absent. Answers `{layers: [{id, …the layer's answer}]}`.
   */
  async serviceQuery(
    caller: Caller | null,
    name: string,
    params: QueryParams & { layerDefs?: string | undefined },
  ): Promise<unknown> {
    const opened = await this.services.open(caller, name);
    const { service } = opened;
    let defs: { layerId: number; where?: string; outFields?: string }[];
    const text = params.layerDefs?.trim() ?? "";
    if (text === "") defs = [...service.layers, ...service.tables].map((l) => ({ layerId: l.id }));
    else {
      let decoded: unknown;
      try {
        decoded = JSON.parse(text);
      } catch (err) {
        throw errors.invalidParameter("layerDefs", `is not valid JSON (${(err as Error).message})`);
      }
      if (Array.isArray(decoded)) {
        defs = decoded.map((d: unknown, i) => {
          const e = d as { layerId?: unknown; where?: unknown; outFields?: unknown };
          if (typeof e !== "object" || e === null || typeof e.layerId !== "number") {
            throw errors.invalidParameter("layerDefs", `entry ${i} must be an object with a numeric layerId`);
          }
          return {
            layerId: e.layerId,
            ...(typeof e.where === "string" ? { where: e.where } : {}),
            ...(typeof e.outFields === "string" ? { outFields: e.outFields } : {}),
          };
        });
      } else if (typeof decoded === "object" && decoded !== null) {
        defs = Object.entries(decoded as Record<string, unknown>).map(([id, where]) => {
          if (!/^\d{1,9}$/.test(id) || typeof where !== "string") {
            throw errors.invalidParameter(
              "layerDefs",
              'maps layer ids to where clauses, as {"0": "pop > 10"}',
            );
          }
          return { layerId: Number(id), where };
        });
      } else throw errors.invalidParameter("layerDefs", "must be a JSON object or array");
    }
    if (defs.length > 100) throw errors.invalidParameter("layerDefs", "names more than 100 layers");
    // Each layer once: repeating one would multiply the work (and the answer) of a single query.
    const named = new Set<number>();
    for (const def of defs) {
      if (named.has(def.layerId))
        throw errors.invalidParameter("layerDefs", `names layer ${def.layerId} twice`);
      named.add(def.layerId);
    }
    const layers = [];
    for (const def of defs) {
      const answer = (await this.queryLayer(
        this.layerOf(caller, opened, String(def.layerId)),
        { ...params, where: def.where ?? params.where, outFields: def.outFields ?? params.outFields },
        "json",
      )) as Record<string, unknown>;
      layers.push({ id: def.layerId, ...answer });
    }
    return { layers };
  }

  /**
   * How many features a layer holds. Clients ask it all the time (the Maps SDK and QGIS on opening
   * a layer, paging clients before each download), and counting a large table scans it on both
   * engines; so the count is kept by the layer's data version, which every edit moves (in the
   * edit's transaction) and which is read here first: a count taken after that read sees at least
   * that version, and one that saw a later edit is filed under a version nobody reads again.
   */
  private async layerCount(open: OpenLayer, query: LayerQuery): Promise<number> {
    const state = (await layerStates(this.db.kysely, open.row.item_id)).get(open.schema.id);
    // The definition's version too: a layer dropped and added again restarts its data version.
    const key =
      state && `${open.row.item_id}/${open.schema.id}/${open.row.modified}/${state.dataLastEditDate}`;
    const cached = key === undefined ? undefined : this.counts.get(key);
    if (cached !== undefined) return cached;
    const result = await runQuery(this.context(open, undefined), query);
    const count = result.mode === "count" ? result.count : 0;
    if (key !== undefined) {
      if (this.counts.size >= SCHEMA_CACHE_LIMIT) this.counts.clear();
      this.counts.set(key, count);
    }
    return count;
  }

  /** `<layer>/<objectId>`: one feature, every field. */
  async feature(caller: Caller | null, name: string, layerId: string, objectId: string): Promise<unknown> {
    const open = await this.open(caller, name, layerId);
    const restriction = this.authorize(open, "query");
    const ids = /^\d{1,15}$/.test(objectId) ? readObjectIds("objectId", objectId) : undefined;
    if (!ids) throw errors.invalidParameter("objectId", `'${objectId.slice(0, 40)}' is not an object id`);
    const query = readLayerQuery({ objectIds: objectId, outFields: "*" }, open.schema, this.limits(open));
    const result =
      restriction?.username === null
        ? emptyResult(query)
        : await runQuery(this.context(open, restriction), query);
    const answer = queryAnswer(open, query, result, "json") as { features: unknown[] };
    const feature = answer.features[0];
    if (!feature)
      throw errors.invalidParameter(
        "objectId",
        `feature ${objectId} does not exist in layer ${open.schema.id}`,
      );
    return { feature };
  }

  private checkFormat(open: OpenLayer, format: AnswerFormat): void {
    if (format === "json" || format === "pjson" || format === "html") return;
    const formats = (open.service.definition.supportedQueryFormats ?? "JSON")
      .toLowerCase()
      .split(",")
      .map((f) => f.trim());
    if (!formats.includes(format)) {
      throw errors.invalidParameter(
        "f",
        `'${format}' is not among the layer's supportedQueryFormats (${formats.join(", ")})`,
      );
    }
  }

  /**
   * `applyEdits` of one layer, or `addFeatures`/`updateFeatures`/`deleteFeatures` (which name only
   * their part). All of it in one transaction: with `rollbackOnFailure` (the default) one failed
   * feature undoes every other; without, the failures are reported and the rest stays.
   */
  async applyEdits(
    caller: Caller | null,
    name: string,
    layerId: string,
    raw: {
      adds?: string | undefined;
      updates?: string | undefined;
      deletes?: string | undefined;
      /** `deleteFeatures` by where or geometry: the ids are found first, with the query's rules. */
      deleteQuery?: QueryParams | undefined;
      rollbackOnFailure?: boolean | undefined;
      useGlobalIds?: boolean | undefined;
      returnEditMoment?: boolean | undefined;
      addsParameter?: "adds" | "features";
      updatesParameter?: "updates" | "features";
      deletesParameter?: "deletes" | "objectIds";
    },
  ): Promise<LayerEditResults & { editMoment?: number }> {
    const open = await this.open(caller, name, layerId);
    const useGlobalIds = raw.useGlobalIds === true;
    if (useGlobalIds && !open.schema.globalIdField) {
      throw errors.invalidParameter(
        "useGlobalIds",
        `cannot be true: layer ${open.schema.id} has no GlobalID field`,
      );
    }
    const adds = parseFeatureList(raw.adds, raw.addsParameter ?? "adds");
    if (!adds.ok) throw errors.invalidParameter(raw.addsParameter ?? "adds", adds.reason);
    const updates = parseFeatureList(raw.updates, raw.updatesParameter ?? "updates");
    if (!updates.ok) throw errors.invalidParameter(raw.updatesParameter ?? "updates", updates.reason);
    const deletes = parseDeletes(raw.deletes, { useGlobalIds });
    if (!deletes.ok) throw errors.invalidParameter(raw.deletesParameter ?? "deletes", deletes.reason);

    const restrictions: Partial<Record<Operation, ReturnType<FeatureDataService["authorize"]>>> = {};
    if (adds.value.length > 0) restrictions.create = this.authorize(open, "create");
    if (updates.value.length > 0) restrictions.update = this.authorize(open, "update");
    let deleteIds: DeleteIds = deletes.value;
    if (raw.deleteQuery) {
      restrictions.delete = this.authorize(open, "delete");
      const query: LayerQuery = {
        ...readLayerQuery(raw.deleteQuery, open.schema, this.limits(open)),
        mode: "ids",
        // One past the most one request deletes: enough to know the where matches too many,
        // without reading a million ids to say so.
        idsLimit: MAX_EDIT_FEATURES + 1,
      };
      const found = await runQuery(this.context(open, restrictions.delete), query);
      const ids = found.mode === "ids" ? found.objectIds : [];
      // One request deletes at most what one request may name: a where of 1=1 over a million
      // features would be one transaction and a million results.
      if (ids.length > MAX_EDIT_FEATURES) {
        throw errors.invalidParameter(
          raw.deleteQuery.where?.trim() ? "where" : "geometry",
          `matches at least ${ids.length} features; one request deletes at most ${MAX_EDIT_FEATURES}: narrow it, or delete in several requests`,
        );
      }
      deleteIds = { objectIds: ids };
    } else if (("objectIds" in deleteIds ? deleteIds.objectIds : deleteIds.globalIds).length > 0) {
      restrictions.delete = this.authorize(open, "delete");
    }
    // Ownership control differs between updates and deletes; both come from the same rule.
    const only = restrictions.update ?? restrictions.delete;
    const now = Date.now();
    const options: EditOptions = {
      store: this.db,
      itemId: open.row.item_id,
      now,
      ...(caller ? { editor: caller.username } : {}),
      useGlobalIds,
      allowGeometryUpdates:
        open.privileged ||
        ((open.definition.allowGeometryUpdates as boolean | undefined) ??
          open.service.definition.allowGeometryUpdates) !== false,
      ...(only ? { onlyCreatedBy: only } : {}),
    };
    const rollback = raw.rollbackOnFailure !== false;
    let results: LayerEditResults;
    try {
      results = await this.db.transaction(async (trx) => {
        const applied = await applyLayerEdits(
          trx,
          open.schema,
          { adds: adds.value, updates: updates.value, deletes: deleteIds },
          options,
        );
        if (rollback && applied.anyFailed) throw new RolledBack([applied.results]);
        return applied.results;
      });
    } catch (err) {
      if (err instanceof RolledBack) results = rolledBackResults(err.results)[0] as LayerEditResults;
      else throw err;
    }
    return { ...results, ...(raw.returnEditMoment ? { editMoment: now } : {}) };
  }

  /** Service-level `applyEdits`: `edits=[{id, adds, updates, deletes}]`, every layer in one transaction. */
  async applyServiceEdits(
    caller: Caller | null,
    name: string,
    raw: {
      edits: string;
      rollbackOnFailure?: boolean | undefined;
      useGlobalIds?: boolean | undefined;
      returnEditMoment?: boolean | undefined;
    },
  ): Promise<unknown> {
    let decoded: unknown;
    try {
      decoded = JSON.parse(raw.edits);
    } catch (err) {
      throw errors.invalidParameter("edits", `is not valid JSON (${(err as Error).message})`);
    }
    if (!Array.isArray(decoded) || decoded.length === 0 || decoded.length > 1000) {
      throw errors.invalidParameter(
        "edits",
        'must be a JSON array of 1 to 1000 layer edits, as [{"id": 0, "adds": [...]}]',
      );
    }
    const useGlobalIds = raw.useGlobalIds === true;
    const now = Date.now();
    const plans: {
      open: OpenLayer;
      edits: { adds: unknown[]; updates: unknown[]; deletes: DeleteIds };
      only: ReturnType<FeatureDataService["authorize"]>;
    }[] = [];
    let total = 0;
    const opened = await this.services.open(caller, name);
    for (const [i, entry] of decoded.entries()) {
      const e = entry as { id?: unknown; adds?: unknown; updates?: unknown; deletes?: unknown };
      if (typeof e !== "object" || e === null || typeof e.id !== "number") {
        throw errors.invalidParameter("edits", `entry ${i} must be an object with a layer id`);
      }
      const open = this.layerOf(caller, opened, String(e.id));
      if (useGlobalIds && !open.schema.globalIdField) {
        throw errors.invalidParameter(
          "useGlobalIds",
          `cannot be true: layer ${open.schema.id} has no GlobalID field`,
        );
      }
      const list = (v: unknown, what: string) => {
        if (v === undefined || v === null) return [];
        if (!Array.isArray(v))
          throw errors.invalidParameter("edits", `entry ${i} has ${what} that are not an array`);
        return v as unknown[];
      };
      const adds = list(e.adds, "adds");
      const updates = list(e.updates, "updates");
      const deletesRaw =
        e.deletes === undefined || e.deletes === null
          ? undefined
          : typeof e.deletes === "string"
            ? e.deletes
            : JSON.stringify(e.deletes);
      const deletes = parseDeletes(deletesRaw, { useGlobalIds });
      if (!deletes.ok)
        throw errors.invalidParameter("edits", `entry ${i} has deletes that ${deletes.reason}`);
      const nDeletes =
        "objectIds" in deletes.value ? deletes.value.objectIds.length : deletes.value.globalIds.length;
      // Deletes count too: each is a result to write and a row to find.
      total += adds.length + updates.length + nDeletes;
      const restrictions: ReturnType<FeatureDataService["authorize"]>[] = [];
      if (adds.length > 0) restrictions.push(this.authorize(open, "create"));
      if (updates.length > 0) restrictions.push(this.authorize(open, "update"));
      if (nDeletes > 0) restrictions.push(this.authorize(open, "delete"));
      const only = restrictions.find((r) => r !== undefined);
      plans.push({ open, edits: { adds, updates, deletes: deletes.value }, only });
    }
    if (total > 10_000)
      throw errors.invalidParameter("edits", `has ${total} features; one request takes at most 10000`);
    const rollback = raw.rollbackOnFailure !== false;
    let results: LayerEditResults[];
    try {
      results = await this.db.transaction(async (trx) => {
        const out: LayerEditResults[] = [];
        let anyFailed = false;
        for (const plan of plans) {
          const applied = await applyLayerEdits(trx, plan.open.schema, plan.edits, {
            store: this.db,
            itemId: plan.open.row.item_id,
            now,
            ...(caller ? { editor: caller.username } : {}),
            useGlobalIds,
            allowGeometryUpdates:
              plan.open.privileged ||
              ((plan.open.definition.allowGeometryUpdates as boolean | undefined) ??
                plan.open.service.definition.allowGeometryUpdates) !== false,
            ...(plan.only ? { onlyCreatedBy: plan.only } : {}),
          });
          anyFailed ||= applied.anyFailed;
          out.push(applied.results);
        }
        if (rollback && anyFailed) throw new RolledBack(out);
        return out;
      });
    } catch (err) {
      if (err instanceof RolledBack) results = rolledBackResults(err.results);
      else throw err;
    }
    return raw.returnEditMoment ? results.map((r) => ({ ...r, editMoment: now })) : results;
  }
}

/** A count of every feature: no filter but a `where` that is empty or `1=1`, as clients write "all". */
function countsEverything(query: LayerQuery): boolean {
  return (
    query.mode === "count" &&
    query.spatial === undefined &&
    query.objectIds === undefined &&
    /^\s*(1\s*=\s*1)?\s*$/.test(query.where)
  );
}

function emptyResult(query: LayerQuery) {
  switch (query.mode) {
    case "count":
      return { mode: "count" as const, count: 0 };
    case "ids":
      return { mode: "ids" as const, objectIds: [] };
    case "extent":
      return { mode: "extent" as const, extent: null, count: 0 };
    case "statistics":
      return { mode: "statistics" as const, rows: [] };
    default:
      return { mode: query.mode, rows: [], exceeded: false };
  }
}
