import type { Kysely } from "kysely";

/**
 * Joining groups and what members keep for themselves:
 * - `groups.auto_join`: ArcGIS's `autoJoin`, a group members of the organization join without a
 *   manager's approval (when it is not invitation-only);
 * - `group_applications`: requests to join a group that needs approval, which its managers accept
 *   or decline. One per user and group; they go with the group and with the user;
 * - `users.properties`: the JSON object a user stores with `setProperties` (null: none yet).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("groups")
    .addColumn("auto_join", "integer", (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable("users").addColumn("properties", "text").execute();

  await db.schema
    .createTable("group_applications")
    .addColumn("group_id", "text", (c) => c.notNull().references("groups.id").onDelete("cascade"))
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("username", "text", (c) => c.notNull())
    .addColumn("received", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("group_applications_pk", ["group_id", "user_id"])
    .execute();
  // A user's applications go with the account: the cascade looks them up by user.
  await db.schema.createIndex("group_applications_user").on("group_applications").column("user_id").execute();
}
