import { sql } from "kysely";
import { actorOf, type Caller, isCaller, requirePrivilege, unseen } from "../auth/caller.js";
import { canViewItem } from "../content/access.js";
import { findItem, sharedGroupIds, updateItem } from "../content/item.repository.js";
import type { ItemService } from "../content/item.service.js";
import { FeedCache } from "../db/cache.js";
import { noteChange } from "../db/change-feed.js";
import { type Db, isUniqueViolation, type Queryable } from "../db/database.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import { newGlobalId } from "./edits/values.js";
import {
  findService,
  findServiceOfItem,
  insertService,
  type ServiceRow,
} from "./feature-service.repository.js";
import { completedDefinition, type LayerSchema, layerSchema, SchemaError } from "./layer-schema.js";
import {
  addFieldColumns,
  createLayerStorage,
  dropFieldColumns,
  dropLayerStorage,
  fieldHasNull,
  fillGlobalIds,
  hasLayerStorage,
  layerHasRows,
  touchLayerSchema,
} from "./layer-store.js";
import {
  type AddToDefinition,
  addLayerFields,
  addToDefinition,
  buildDefinition,
  type CreateParameters,
  type DeleteFromDefinition,
  deleteFromDefinition,
  deleteLayerFields,
  type LayerAddToDefinition,
  type LayerDefinition,
  type LayerDeleteFromDefinition,
  type LayerUpdateDefinition,
  layerJson,
  SERVER_VERSION,
  type ServiceProperties,
  type StoredService,
  serviceJson,
  updateDefinition,
  updateLayerDefinition,
} from "./service-definition.js";

/**
 * The service after `next` added layers, with each new layer's definition completed as ArcGIS
 * completes it (the object id field, editor-tracking fields, lengths and nullability spelled out),
 * so that the layer resource shows what is stored. A definition that cannot be stored is refused,
 * naming `parameter`.
 */
function withStorableLayers(before: StoredService, next: StoredService, parameter: string): StoredService {
  const old = new Set([...before.layers, ...before.tables].map((l) => l.id));
  const complete = (layer: LayerDefinition, kind: "layer" | "table"): LayerDefinition => {
    if (old.has(layer.id)) return layer;
    let schema: LayerSchema;
    try {
      schema = layerSchema(layer, kind, next.definition);
    } catch (err) {
      if (err instanceof SchemaError) throw errors.invalidParameter(parameter, err.message);
      throw err;
    }
    return completedDefinition(layer, schema);
  };
  return {
    ...next,
    layers: next.layers.map((l) => complete(l, "layer")),
    tables: next.tables.map((t) => complete(t, "table")),
  };
}

/** Where a definition change runs: its transaction, the service's item and the change's time. */
interface ChangeContext {
  trx: Queryable;
  itemId: string;
  now: number;
}

export const FEATURE_SERVICE_TYPE = "Feature Service";
const TYPE_KEYWORDS = [
  "ArcGIS Server",
  "Data",
  "Feature Access",
  "Feature Service",
  "Service",
  "Hosted Service",
];

export interface CreateServiceRequest {
  createParameters: CreateParameters;
  description?: string | undefined;
  tags?: string[] | undefined;
  snippet?: string | undefined;
  /** Public base of the hosted services, e.g. `https://gis.example.com/portal/rest/services`. */
  servicesBase: string;
}

/** A service `create` made: its item, name and URL, and the item's fields as stored. */
export interface CreatedService {
  itemId: string;
  name: string;
  serviceurl: string;
  description: string;
  tags: string[];
  snippet: string;
}

function stored(row: ServiceRow): StoredService {
  return {
    name: row.name,
    definition: JSON.parse(row.definition) as ServiceProperties,
    layers: JSON.parse(row.layers) as LayerDefinition[],
    tables: JSON.parse(row.tables) as LayerDefinition[],
  };
}

/**
 * What deciding whether a caller sees a service takes, besides the caller: the service, its
 * item's owner and access, and the groups the item is shared with. Frozen: it is shared by
 * every request until the item changes.
 */
interface ServiceEntry {
  row: ServiceRow;
  service: StoredService;
  item: { owner_id: string; owner: string; access: string };
  shared: readonly string[];
}

/** Services whose entry is cached; a definition can be large, so fewer than the cache's default. */
const SERVICE_CACHE_LIMIT = 1_000;

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/**
 * Hosted feature services (`wire.md` §6): an item of type Feature Service and its definition,
 * written together. Reading a service follows the sharing of its item; changing its definition
 * is for the owner and administrators.
 */
export class FeatureServices {
  /**
   * Services by name, for `open`, which every feature request goes through: without it a query
   * reads the service row, the item and its sharing before its own rows. Every change of those
   * notes `content:<itemId>` in its transaction (the item repository's writes, a definition
   * change here), which drops the entry on this node after the commit and on the others when
   * PostgreSQL delivers the notification; while a node cannot hear them, the cache reads through.
   */
  private readonly entries: FeedCache<string, ServiceEntry>;

  constructor(
    private readonly db: Db,
    private readonly items: ItemService,
  ) {
    this.entries = new FeedCache(db.feed, ["content"], (entry) => entry.row.item_id, SERVICE_CACHE_LIMIT);
  }

  async create(
    caller: Caller | null,
    username: string,
    folder: string | undefined,
    request: CreateServiceRequest,
  ): Promise<CreatedService> {
    requirePrivilege(caller, "portal:publisher:publishFeatures");
    requirePrivilege(caller, "portal:user:createItem");
    if (!isCaller(caller, username)) {
      throw errors.forbidden("Services can only be created in your own account.");
    }
    const { name } = request.createParameters;
    const definition = buildDefinition(request.createParameters);
    const serviceurl = `${request.servicesBase}/${name}/FeatureServer`;
    const tags = request.tags ?? [];
    const description = request.description ?? "";
    const snippet = request.snippet ?? "";
    try {
      const itemId = await this.db.transaction(async (trx) => {
        const existing = await findService(trx, name);
        if (existing) throw errors.serviceNameTaken(existing.name);
        const item = await this.items.insertIn(trx, caller, username, folder, {
          title: name,
          type: FEATURE_SERVICE_TYPE,
          typeKeywords: TYPE_KEYWORDS,
          description,
          snippet,
          tags,
          url: serviceurl,
        });
        const now = Date.now();
        await insertService(trx, {
          item_id: item.id,
          name,
          definition: JSON.stringify(definition),
          layers: "[]",
          tables: "[]",
          is_view: 0,
          created: now,
          modified: now,
        });
        await recordEvent(
          trx,
          { source: "item", operation: "publish", objectId: item.id, actor: actorOf(caller) },
          now,
        );
        return item.id;
      });
      return { itemId, name, serviceurl, description, tags, snippet };
    } catch (err) {
      // Two requests for one name at once: the unique index decides, the loser hears the same answer.
      if (isUniqueViolation(err)) throw errors.serviceNameTaken(name);
      throw err;
    }
  }

  /** The service resource, if the caller may see the service's item. */
  /**
   * `portals/self/isServiceNameAvailable`: whether no hosted service of this name and type exists
   * in the organization (names compare without case, as createService does). portico hosts
   * feature services only, so every `Map Service` name is available. Esri's `getUniqueServiceName`
   * asks with `name`, `name_1`, `name_2`, ... until this says true.
   */
  async nameAvailable(caller: Caller | null, name: string, type: "Feature Service" | "Map Service") {
    requirePrivilege(caller, "portal:publisher:publishFeatures");
    if (type === "Map Service") return true;
    return (await findService(this.db.kysely, name)) === undefined;
  }

  async service(caller: Caller | null, name: string): Promise<Record<string, unknown>> {
    const row = await this.visible(caller, name);
    return serviceJson(stored(row), row.item_id);
  }

  /** One layer or table of the service. */
  async layer(caller: Caller | null, name: string, layerId: string): Promise<Record<string, unknown>> {
    const row = await this.visible(caller, name);
    const layer = /^\d{1,9}$/.test(layerId)
      ? layerJson(stored(row), Number(layerId), row.item_id)
      : undefined;
    if (!layer) throw errors.layerNotFound(row.name, layerId);
    return layer;
  }

  /**
   * The admin resource, `/rest/admin/services/<name>/FeatureServer`: the service resource with
   * `adminServiceInfo`, read by the owner or an administrator (as they alone may change it).
   */
  async adminService(caller: Caller | null, name: string): Promise<Record<string, unknown>> {
    if (caller === null) throw errors.tokenRequired();
    const { row, owner } = await this.open(caller, name);
    if (owner.id !== caller.userId && !caller.privileges.has("portal:admin:updateItems")) {
      throw errors.forbidden(`Only the owner or an administrator may administer service '${row.name}'.`);
    }
    return {
      adminServiceInfo: { name: row.name, type: "FeatureServer", status: "Started" },
      ...serviceJson(stored(row), row.item_id),
    };
  }

  /**
   * `<layer>/queryRelatedRecords`. Hosted layers here take part in no relationship (their
   * resources list `relationships: []`), so every `relationshipId` is one the layer does not have,
   * which ArcGIS refuses as a bad parameter; a missing service or layer answers as for a query.
   */
  async queryRelatedRecords(
    caller: Caller | null,
    name: string,
    layerId: string,
    relationshipId: number,
  ): Promise<never> {
    await this.layer(caller, name, layerId);
    throw errors.invalidParameter(
      "relationshipId",
      `${relationshipId} is not a relationship of layer ${layerId}`,
    );
  }

  /** `FeatureServer/layers`: every layer and table resource of the service. */
  async allLayers(caller: Caller | null, name: string): Promise<Record<string, unknown>> {
    const row = await this.visible(caller, name);
    const service = stored(row);
    const all = (list: LayerDefinition[]) =>
      list.map((l) => layerJson(service, l.id, row.item_id) as Record<string, unknown>);
    return { layers: all(service.layers), tables: all(service.tables) };
  }

  /**
   * `FeatureServer/sources`: the services a view is made from. Portico makes no views
   * (`createService` refuses `isView`), so every service answers that it has none, as ArcGIS
   * answers for a service that is not a view.
   */
  async sources(caller: Caller | null, name: string): Promise<{ currentVersion: number; services: [] }> {
    await this.visible(caller, name);
    return { currentVersion: SERVER_VERSION, services: [] };
  }

  /** Adds layers and tables to the service; answers the ones added, with their ids. */
  async addToDefinition(caller: Caller | null, name: string, add: AddToDefinition) {
    return this.change(caller, name, (service) => {
      const result = addToDefinition(service, add);
      return {
        service: withStorableLayers(service, result.service, "addToDefinition"),
        answer: result.added,
      };
    });
  }

  async updateDefinition(caller: Caller | null, name: string, props: ServiceProperties): Promise<void> {
    await this.change(caller, name, async (service, at) => {
      const definition = updateDefinition(service, props);
      // Editor tracking turned on adds its fields to every stored layer: written into their
      // definitions, with their columns, in this transaction (rows already there keep nulls).
      const complete = async (layer: LayerDefinition, kind: "layer" | "table") => {
        if (!(await hasLayerStorage(at.trx, at.itemId, layer.id))) return layer;
        let before: LayerSchema;
        let after: LayerSchema;
        try {
          before = layerSchema(layer, kind, service.definition);
          after = layerSchema(layer, kind, definition);
        } catch (err) {
          if (err instanceof SchemaError) return layer;
          throw err;
        }
        const known = new Set(before.fields.map((f) => f.column));
        const added = after.fields.filter((f) => !known.has(f.column));
        if (added.length === 0) return layer;
        await addFieldColumns(at.trx, this.db.engine, at.itemId, layer.id, added);
        await touchLayerSchema(at.trx, at.itemId, layer.id, at.now);
        return completedDefinition(layer, after);
      };
      const layers = [];
      for (const l of service.layers) layers.push(await complete(l, "layer"));
      const tables = [];
      for (const t of service.tables) tables.push(await complete(t, "table"));
      return { service: { ...service, definition, layers, tables }, answer: undefined };
    });
  }

  async deleteFromDefinition(caller: Caller | null, name: string, del: DeleteFromDefinition): Promise<void> {
    await this.change(caller, name, (service) => ({
      service: deleteFromDefinition(service, del),
      answer: undefined,
    }));
  }

  /**
   * `addToDefinition` of one layer: its new fields, and their columns. Rows already there get the
   * field's default, or null; a GlobalID field gives each its own GlobalID.
   *
   * In these three layer operations, a layer without storage (one whose definition an earlier
   * version accepted but could not store, see migration 0010) gets it once its definition can hold
   * data, with the fields the change leaves.
   */
  async addLayerFields(
    caller: Caller | null,
    name: string,
    layerId: string,
    add: LayerAddToDefinition,
  ): Promise<void> {
    await this.changeLayer(caller, name, layerId, async (service, id, at) => {
      const storage = await hasLayerStorage(at.trx, at.itemId, id);
      const hasRows = storage && (await layerHasRows(at.trx, at.itemId, id));
      const result = addLayerFields(service, id, add, { hasRows });
      if (result.added.length === 0) return result.service;
      if (!storage) {
        await createLayerStorage(at.trx, this.db, at.itemId, result.schema, at.now);
        return result.service;
      }
      await addFieldColumns(at.trx, this.db.engine, at.itemId, id, result.added);
      for (const field of result.added) {
        if (field.type === "esriFieldTypeGlobalID") {
          await fillGlobalIds(at.trx, at.itemId, id, field, newGlobalId);
        }
      }
      await touchLayerSchema(at.trx, at.itemId, id, at.now);
      return result.service;
    });
  }

  /** `deleteFromDefinition` of one layer: the fields go, with their columns and values. */
  async deleteLayerFields(
    caller: Caller | null,
    name: string,
    layerId: string,
    del: LayerDeleteFromDefinition,
  ): Promise<void> {
    await this.changeLayer(caller, name, layerId, async (service, id, at) => {
      const result = deleteLayerFields(service, id, del);
      if (result.dropped.length === 0) return result.service;
      if (!(await hasLayerStorage(at.trx, at.itemId, id))) {
        await createLayerStorage(at.trx, this.db, at.itemId, result.schema, at.now);
        return result.service;
      }
      await dropFieldColumns(at.trx, at.itemId, id, result.dropped);
      await touchLayerSchema(at.trx, at.itemId, id, at.now);
      return result.service;
    });
  }

  /** `updateDefinition` of one layer. A field made not nullable must hold a value in every row. */
  async updateLayerDefinition(
    caller: Caller | null,
    name: string,
    layerId: string,
    update: LayerUpdateDefinition,
  ): Promise<void> {
    await this.changeLayer(caller, name, layerId, async (service, id, at) => {
      const storage = await hasLayerStorage(at.trx, at.itemId, id);
      const hasRows = storage && (await layerHasRows(at.trx, at.itemId, id));
      const result = updateLayerDefinition(service, id, update, { hasRows });
      if (!storage) {
        await createLayerStorage(at.trx, this.db, at.itemId, result.schema, at.now);
        return result.service;
      }
      for (const field of result.required) {
        if (await fieldHasNull(at.trx, at.itemId, id, field)) {
          throw errors.invalidParameter(
            "updateDefinition",
            `cannot make field '${field.name}' not nullable: features of layer ${id} hold no value in it`,
          );
        }
      }
      if (result.schemaChanged) await touchLayerSchema(at.trx, at.itemId, id, at.now);
      return result.service;
    });
  }

  /**
   * A change of one layer's definition with the storage work it needs, in the transaction of the
   * definition's change. The layer id is checked after the caller's right to change the service,
   * so that others learn nothing of its layers.
   */
  private async changeLayer(
    caller: Caller | null,
    name: string,
    layerId: string,
    apply: (service: StoredService, id: number, at: ChangeContext) => Promise<StoredService>,
  ): Promise<void> {
    await this.change(caller, name, async (service, at) => {
      const id = /^\d{1,9}$/.test(layerId) ? Number(layerId) : undefined;
      const exists = [...service.layers, ...service.tables].some((l) => l.id === id);
      if (id === undefined || !exists) throw errors.layerNotFound(service.name, layerId);
      return { service: await apply(service, id, at), answer: undefined };
    });
  }

  /**
   * Creates the tables of layers the change added and drops those of layers it removed, in the
   * transaction of the change: a definition never names a layer without its storage.
   */
  private async syncStorage(
    trx: Queryable,
    itemId: string,
    before: StoredService,
    after: StoredService,
    now: number,
  ): Promise<void> {
    const ids = (s: StoredService) => new Set([...s.layers, ...s.tables].map((l) => l.id));
    const had = ids(before);
    const has = ids(after);
    for (const layerId of had) if (!has.has(layerId)) await dropLayerStorage(trx, itemId, layerId);
    for (const [list, kind] of [
      [after.layers, "layer"],
      [after.tables, "table"],
    ] as const) {
      for (const layer of list) {
        if (had.has(layer.id)) continue;
        await createLayerStorage(trx, this.db, itemId, layerSchema(layer, kind, after.definition), now);
      }
    }
  }

  /**
   * A missing service and one the caller may not see give the same answer (`unseen`: 499 to
   * anonymous callers, 400 to signed-in ones), so names of private services do not leak.
   */
  private async visible(caller: Caller | null, name: string): Promise<ServiceRow> {
    return (await this.open(caller, name)).row;
  }

  /**
   * The service named `name` with its item, when the caller may see it (the answer of a missing
   * service otherwise, as for `visible`).
   */
  async open(
    caller: Caller | null,
    name: string,
  ): Promise<{ row: ServiceRow; service: StoredService; owner: { id: string; username: string } }> {
    const entry = await this.entries.get(name.toLowerCase(), () => this.load(name));
    // A hidden service answers as a missing one, whatever the item's own answer would say.
    if (!entry || !canViewItem(await this.items.viewer(caller), entry.item, entry.shared)) {
      throw unseen(caller, () => errors.serviceNotFound(name));
    }
    const { row, service, item } = entry;
    return { row, service, owner: { id: item.owner_id, username: item.owner } };
  }

  /**
   * The hosted service of item `itemId`, whoever asks: for work that checked its caller when it
   * was asked for (an export's background job). Undefined when the item is not a hosted service.
   */
  async openItem(
    itemId: string,
  ): Promise<
    { row: ServiceRow; service: StoredService; owner: { id: string; username: string } } | undefined
  > {
    const found = await findServiceOfItem(this.db.kysely, itemId);
    if (!found) return undefined;
    const entry = await this.entries.get(found.name.toLowerCase(), () => this.load(found.name));
    if (!entry || entry.row.item_id !== itemId) return undefined;
    const { row, service, item } = entry;
    return { row, service, owner: { id: item.owner_id, username: item.owner } };
  }

  private async load(name: string): Promise<ServiceEntry | undefined> {
    const row = await findService(this.db.kysely, name);
    if (!row) return undefined;
    const item = await findItem(this.db.kysely, row.item_id);
    if (!item) return undefined;
    const shared = await sharedGroupIds(this.db.kysely, row.item_id);
    return deepFreeze({
      row,
      service: stored(row),
      item: { owner_id: item.owner_id, owner: item.owner, access: item.access },
      shared,
    });
  }

  /**
   * Read-modify-write of a definition by its owner or an administrator, with the item's update
   * event in the same transaction.
   */
  private async change<T>(
    caller: Caller | null,
    name: string,
    apply: (
      service: StoredService,
      at: ChangeContext,
    ) => { service: StoredService; answer: T } | Promise<{ service: StoredService; answer: T }>,
  ): Promise<T> {
    if (caller === null) throw errors.tokenRequired();
    const { item_id: itemId } = await this.visible(caller, name);
    return this.db.transaction(async (trx) => {
      // updateItem below notes it too; the definition is what this change is about.
      noteChange(trx, `content:${itemId}`);
      const now = Date.now();
      // Touching the row first takes its lock on PostgreSQL, so the read below sees any
      // concurrent change to the definition committed and none is lost; SQLite writes one at a time.
      // `modified` only grows: it versions the layer schemas that FeatureDataService caches, and
      // two changes within one millisecond must not share a version.
      await trx
        .updateTable("feature_services")
        .set({ modified: sql<number>`CASE WHEN modified >= ${now} THEN modified + 1 ELSE ${now} END` })
        .where("item_id", "=", itemId)
        .execute();
      const row = await trx
        .selectFrom("feature_services")
        .select(["item_id", "name", "definition", "layers", "tables", "modified", "read_only"])
        .where("item_id", "=", itemId)
        .executeTakeFirst();
      const item = await findItem(trx, itemId);
      if (!row || !item) throw errors.serviceNotFound(name);
      if (item.owner_id !== caller.userId && !caller.privileges.has("portal:admin:updateItems")) {
        throw errors.forbidden(`Only the owner or an administrator may change service '${row.name}'.`);
      }
      const before = stored(row);
      const { service: next, answer } = await apply(before, { trx, itemId, now });
      await this.syncStorage(trx, itemId, before, next, now);
      await trx
        .updateTable("feature_services")
        .set({
          definition: JSON.stringify(next.definition),
          layers: JSON.stringify(next.layers),
          tables: JSON.stringify(next.tables),
        })
        .where("item_id", "=", itemId)
        .execute();
      await updateItem(trx, itemId, { modified: Math.max(now, item.modified + 1) });
      await recordEvent(
        trx,
        { source: "item", operation: "update", objectId: itemId, actor: actorOf(caller) },
        now,
      );
      return answer;
    });
  }
}
