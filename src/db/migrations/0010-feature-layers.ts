import { type Kysely, sql } from "kysely";
import { layerSchema, SchemaError } from "../../features/layer-schema.js";
import { createLayerStorage } from "../../features/layer-store.js";
import type { LayerDefinition, ServiceProperties } from "../../features/service-definition.js";
import type { Engine } from "../database.js";

/**
 * The data of hosted feature layers. Each layer or table gets a table of its own with its fields as
 * typed columns (`features/layer-store.ts` builds them); `feature_layers` lists those tables, so
 * that deleting a service's item drops them, and holds what changes with every edit (the last edit
 * date) outside the service's definition row, which edits of different layers would otherwise all
 * contend for.
 *
 * Services created before this migration have layers without storage: each gets its table here.
 * A layer whose definition cannot hold data (one the earlier versions accepted without a geometry
 * type, say) gets none, and answers queries and edits with the reason until its definition is fixed.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  await db.schema
    .createTable("feature_layers")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    .addColumn("table_name", "text", (c) => c.notNull().unique())
    /** Epoch ms of the last change to the layer's rows or schema (`editingInfo.lastEditDate`). */
    .addColumn("last_edit_date", "bigint", (c) => c.notNull())
    /** Epoch ms of the last change to its rows alone (`editingInfo.dataLastEditDate`). */
    .addColumn("data_last_edit_date", "bigint", (c) => c.notNull())
    /**
     * The next object id to give. Ids are handed out here, in ranges, rather than by each engine's
     * sequence: the same on both engines, never reused after a delete (as ArcGIS), and an add of
     * 2,000 features knows its ids before it inserts them. Taking a range locks the row, so edits
     * of one layer queue on PostgreSQL; SQLite writes one transaction at a time anyway.
     */
    .addColumn("next_object_id", "bigint", (c) => c.notNull().defaultTo(1))
    .addPrimaryKeyConstraint("feature_layers_pk", ["item_id", "layer_id"])
    .execute();

  const services = await sql<{ item_id: string; definition: string; layers: string; tables: string }>`
    SELECT item_id, definition, layers, tables FROM feature_services
  `.execute(db);
  const now = Date.now();
  for (const service of services.rows) {
    const definition = JSON.parse(service.definition) as ServiceProperties;
    const entries = [
      ...(JSON.parse(service.layers) as LayerDefinition[]).map((l) => ({ l, kind: "layer" as const })),
      ...(JSON.parse(service.tables) as LayerDefinition[]).map((l) => ({ l, kind: "table" as const })),
    ];
    for (const { l, kind } of entries) {
      let schema: ReturnType<typeof layerSchema>;
      try {
        schema = layerSchema(l, kind, definition);
      } catch (err) {
        if (err instanceof SchemaError) continue;
        throw err;
      }
      // Without PostGIS here: the start-up's syncSpatialStorage, after the migrations, adds it.
      await createLayerStorage(db, { engine, postgis: undefined }, service.item_id, schema, now);
    }
  }
}
