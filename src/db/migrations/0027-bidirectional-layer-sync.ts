import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * What bidirectional sync of hosted layer data needs (edits made on a copy travel back to its
 * origin, `layer-edits.ts`).
 *
 * - `feature_deletes.global_id`: a tombstone keeps its feature's GlobalID, so that the other side
 *   can tell its own feature from another one that got the same object id there.
 * - `collaboration_layer_sends`: how far a copy's own edits have been sent to its origin, in the
 *   copy's moments (the counterpart of `collaboration_layer_cursors`). A copy made before this
 *   migration was read-only, so its cursor starts at its layer's current moment.
 * - `collaboration_applied_moments`: the moments at which a layer stored what a sync brought from
 *   peer `portal_id`. Reading changes for that peer leaves them out, so nothing is sent back to
 *   where it came from (no echo).
 * - `collaboration_feature_moments`: a feature written by a sync keeps the moment of the edit at
 *   its source (`edit_moment`), as long as its row still has the moment it was written at
 *   (`row_moment`); conflicts compare edits by it, not by when a sync happened to store them.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema.alterTable("feature_deletes").addColumn("global_id", "text").execute();

  await db.schema
    .createTable("collaboration_layer_sends")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    .addColumn("rows_moment", "bigint", (c) => c.notNull())
    .addColumn("rows_oid", "bigint", (c) => c.notNull())
    .addColumn("deletes_moment", "bigint", (c) => c.notNull())
    .addColumn("deletes_oid", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("collaboration_layer_sends_pk", ["item_id", "layer_id"])
    .execute();
  await sql`
    INSERT INTO collaboration_layer_sends (item_id, layer_id, rows_moment, rows_oid, deletes_moment, deletes_oid)
    SELECT c.item_id, c.layer_id, l.data_last_edit_date, ${Number.MAX_SAFE_INTEGER}, l.data_last_edit_date, ${Number.MAX_SAFE_INTEGER}
    FROM collaboration_layer_cursors c
    JOIN feature_layers l ON l.item_id = c.item_id AND l.layer_id = c.layer_id
  `.execute(db);

  await db.schema
    .createTable("collaboration_applied_moments")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    .addColumn("moment", "bigint", (c) => c.notNull())
    .addColumn("portal_id", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("collaboration_applied_moments_pk", ["item_id", "layer_id", "moment"])
    .execute();

  await db.schema
    .createTable("collaboration_feature_moments")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    .addColumn("object_id", "bigint", (c) => c.notNull())
    .addColumn("row_moment", "bigint", (c) => c.notNull())
    .addColumn("edit_moment", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("collaboration_feature_moments_pk", ["item_id", "layer_id", "object_id"])
    .execute();
}
