import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/** Organization, users, custom roles, tokens and the event outbox. */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  await db.schema
    .createTable("organizations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("singleton", "integer", (c) => c.notNull().unique().defaultTo(1))
    .addColumn("settings", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("roles")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("name_key", "text", (c) => c.notNull().unique())
    .addColumn("description", "text", (c) => c.notNull())
    .addColumn("privileges", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("users")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("username", "text", (c) => c.notNull())
    .addColumn("username_key", "text", (c) => c.notNull().unique())
    .addColumn("full_name", "text", (c) => c.notNull())
    .addColumn("first_name", "text", (c) => c.notNull())
    .addColumn("last_name", "text", (c) => c.notNull())
    .addColumn("email", "text", (c) => c.notNull())
    .addColumn("description", "text", (c) => c.notNull())
    .addColumn("password_hash", "text", (c) => c.notNull())
    .addColumn("role", "text", (c) => c.notNull())
    .addColumn("role_id", "text", (c) => c.references("roles.id"))
    .addColumn("disabled", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("provider", "text", (c) => c.notNull())
    .addColumn("user_type", "text", (c) => c.notNull())
    .addColumn("access", "text", (c) => c.notNull())
    .addColumn("culture", "text")
    .addColumn("region", "text")
    .addColumn("units", "text")
    .addColumn("tags", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .addColumn("last_login", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("users_role_id").on("users").column("role_id").execute();
  await db.schema.createIndex("users_created").on("users").columns(["created", "id"]).execute();

  await db.schema
    .createTable("tokens")
    .addColumn("token_hash", "text", (c) => c.primaryKey())
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("expires", "bigint", (c) => c.notNull())
    .addColumn("client", "text", (c) => c.notNull())
    .addColumn("referer", "text", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("tokens_user_id").on("tokens").column("user_id").execute();
  await db.schema.createIndex("tokens_expires").on("tokens").column("expires").execute();

  await db.schema
    .createTable("events")
    .addColumn("seq", engine === "postgres" ? "bigserial" : "integer", (c) =>
      engine === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn("id", "text", (c) => c.notNull().unique())
    .addColumn("occurred", "bigint", (c) => c.notNull())
    .addColumn("source", "text", (c) => c.notNull())
    .addColumn("operation", "text", (c) => c.notNull())
    .addColumn("object_id", "text", (c) => c.notNull())
    .addColumn("actor_id", "text", (c) => c.notNull())
    .addColumn("actor_username", "text", (c) => c.notNull())
    .addColumn("properties", "text", (c) => c.notNull())
    .addColumn("uri", "text", (c) => c.notNull())
    .execute();
}
