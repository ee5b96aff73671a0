import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Attachments of features of hosted layers (`hasAttachments: true`). Each attachment is a row
 * naming its feature, with its bytes in chunks of 1 MiB as item files have them (0007), so that
 * an upload or a download holds one chunk in memory whatever the file's size, on every node.
 *
 * A replaced file gets a new `file_id`: a download that started before finds its chunks gone and
 * stops, rather than mixing two versions. Deleting the row deletes the chunks (cascade); the rows
 * themselves go with their feature, their layer and their service's item, deleted in the
 * transaction that deletes those (`features/attachment-store.ts`), and with the item through the
 * cascade as well.
 *
 * Attachment ids are unique in a layer and never reused, as ArcGIS gives them: the layer's row in
 * `feature_layers` counts them, as it counts object ids.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  const blob = engine === "postgres" ? "bytea" : "blob";
  await db.schema
    .alterTable("feature_layers")
    .addColumn("next_attachment_id", "bigint", (c) => c.notNull().defaultTo(1))
    .execute();

  await db.schema
    .createTable("feature_attachments")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("layer_id", "integer", (c) => c.notNull())
    .addColumn("object_id", "bigint", (c) => c.notNull())
    .addColumn("attachment_id", "bigint", (c) => c.notNull())
    .addColumn("global_id", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("content_type", "text", (c) => c.notNull())
    .addColumn("keywords", "text", (c) => c.notNull().defaultTo(""))
    .addColumn("file_id", "text", (c) => c.notNull().unique())
    .addColumn("size", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("feature_attachments_pk", ["item_id", "layer_id", "attachment_id"])
    .execute();
  // A feature's attachments are listed, and deleted with it, by its object id.
  await db.schema
    .createIndex("feature_attachments_feature")
    .on("feature_attachments")
    .columns(["item_id", "layer_id", "object_id"])
    .execute();

  await db.schema
    .createTable("feature_attachment_chunks")
    .addColumn("file_id", "text", (c) =>
      c.notNull().references("feature_attachments.file_id").onDelete("cascade"),
    )
    .addColumn("seq", "integer", (c) => c.notNull())
    .addColumn("data", blob, (c) => c.notNull())
    .addPrimaryKeyConstraint("feature_attachment_chunks_pk", ["file_id", "seq"])
    .execute();
}
