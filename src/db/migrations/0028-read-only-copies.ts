import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * `feature_services.read_only`: a hosted service that refuses every edit, its owner's and
 * administrators' included. It marks a copy of another portal's layer received through a
 * collaboration whose workspace is not `bidirectionalSyncCapable` (edits there would not reach the
 * origin, and the origin's next change would overwrite them). Copies made before this migration
 * were all such copies.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .alterTable("feature_services")
    .addColumn("read_only", "integer", (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`
    UPDATE feature_services SET read_only = 1
    WHERE item_id IN (SELECT item_id FROM collaboration_data_copies WHERE mode = 'copy')
  `.execute(db);
}
