import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Exports of hosted feature layers (`content/users/<u>/export`): the item is made at once, its data
 * is written by a background job that any node may run. A job row says what to export and how far
 * it got (`processing`, then `completed` or `failed` with a message); `lease_until` is the claim
 * of the node running it, renewed as it goes, so that a job whose node died is taken up again by
 * another (or by the same after a restart). The row goes with its item.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createTable("export_jobs")
    .addColumn("job_id", "text", (c) => c.primaryKey())
    .addColumn("item_id", "text", (c) => c.notNull().unique().references("items.id").onDelete("cascade"))
    /** The hosted feature service's item (no foreign key: a deleted service fails the job). */
    .addColumn("service_item_id", "text", (c) => c.notNull())
    .addColumn("format", "text", (c) => c.notNull())
    /** The checked export parameters (layers, where clauses, spatial reference), as JSON. */
    .addColumn("parameters", "text", (c) => c.notNull())
    /** Ownership-based access control: only the features this user created (null: all). */
    .addColumn("only_created_by", "text")
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("message", "text", (c) => c.notNull())
    .addColumn("attempts", "integer", (c) => c.notNull())
    .addColumn("lease_until", "bigint", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("export_jobs_due")
    .on("export_jobs")
    .columns(["status", "lease_until"])
    .execute();
}
