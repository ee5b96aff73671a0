import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Content: folders, items (with their files), groups and membership, sharing, comments, and the
 * definitions of hosted feature services.
 */
export async function up(db: Kysely<unknown>, engine: Engine): Promise<void> {
  const blob = engine === "postgres" ? "bytea" : "blob";

  await db.schema
    .createTable("folders")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("owner_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("title", "text", (c) => c.notNull())
    .addColumn("title_key", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addUniqueConstraint("folders_owner_title", ["owner_id", "title_key"])
    .execute();

  await db.schema
    .createTable("items")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("owner_id", "text", (c) => c.notNull().references("users.id"))
    .addColumn("owner", "text", (c) => c.notNull())
    /** Lower-case owner, for `owner:` searches. */
    .addColumn("owner_key", "text", (c) => c.notNull())
    .addColumn("folder_id", "text", (c) => c.references("folders.id"))
    .addColumn("title", "text", (c) => c.notNull())
    .addColumn("title_key", "text", (c) => c.notNull())
    .addColumn("type", "text", (c) => c.notNull())
    .addColumn("type_key", "text", (c) => c.notNull())
    .addColumn("type_keywords", "text", (c) => c.notNull())
    .addColumn("description", "text", (c) => c.notNull())
    .addColumn("snippet", "text", (c) => c.notNull())
    .addColumn("tags", "text", (c) => c.notNull())
    .addColumn("url", "text")
    .addColumn("properties", "text")
    /** private | shared | org | public (shared: private but shared with groups). */
    .addColumn("access", "text", (c) => c.notNull())
    .addColumn("protected", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("size", "bigint", (c) => c.notNull().defaultTo(0))
    .addColumn("thumbnail", "text")
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("items_owner").on("items").columns(["owner_key", "modified"]).execute();
  await db.schema.createIndex("items_type").on("items").columns(["type_key", "modified"]).execute();
  await db.schema.createIndex("items_access").on("items").columns(["access", "modified"]).execute();
  await db.schema.createIndex("items_folder").on("items").column("folder_id").execute();
  await db.schema.createIndex("items_modified").on("items").column("modified").execute();

  /** One row per tag, lower-cased: `tags:` searches use the index instead of scanning items. */
  await db.schema
    .createTable("item_tags")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("tag_key", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("item_tags_pk", ["item_id", "tag_key"])
    .execute();
  await db.schema.createIndex("item_tags_tag").on("item_tags").columns(["tag_key", "item_id"]).execute();

  /** The item's data (`text` or an uploaded file) and its thumbnail. */
  await db.schema
    .createTable("item_files")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    /** data | thumbnail */
    .addColumn("kind", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("content_type", "text", (c) => c.notNull())
    .addColumn("content", blob, (c) => c.notNull())
    .addPrimaryKeyConstraint("item_files_pk", ["item_id", "kind"])
    .execute();

  await db.schema
    .createTable("groups")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("owner_id", "text", (c) => c.notNull().references("users.id"))
    .addColumn("owner", "text", (c) => c.notNull())
    .addColumn("title", "text", (c) => c.notNull())
    .addColumn("title_key", "text", (c) => c.notNull())
    .addColumn("description", "text", (c) => c.notNull())
    .addColumn("snippet", "text", (c) => c.notNull())
    .addColumn("tags", "text", (c) => c.notNull())
    /** private | org | public */
    .addColumn("access", "text", (c) => c.notNull())
    .addColumn("is_invitation_only", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("is_view_only", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("protected", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("sort_field", "text", (c) => c.notNull())
    .addColumn("sort_order", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .addUniqueConstraint("groups_title", ["title_key"])
    .execute();

  await db.schema
    .createTable("group_members")
    .addColumn("group_id", "text", (c) => c.notNull().references("groups.id").onDelete("cascade"))
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("username", "text", (c) => c.notNull())
    /** owner | admin | member */
    .addColumn("member_type", "text", (c) => c.notNull())
    .addColumn("joined", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("group_members_pk", ["group_id", "user_id"])
    .execute();
  await db.schema
    .createIndex("group_members_user")
    .on("group_members")
    .columns(["user_id", "group_id"])
    .execute();

  await db.schema
    .createTable("group_invitations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("group_id", "text", (c) => c.notNull().references("groups.id").onDelete("cascade"))
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("username", "text", (c) => c.notNull())
    .addColumn("invited_by", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addUniqueConstraint("group_invitations_once", ["group_id", "user_id"])
    .execute();

  await db.schema
    .createTable("item_shares")
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("group_id", "text", (c) => c.notNull().references("groups.id").onDelete("cascade"))
    .addPrimaryKeyConstraint("item_shares_pk", ["item_id", "group_id"])
    .execute();
  await db.schema
    .createIndex("item_shares_group")
    .on("item_shares")
    .columns(["group_id", "item_id"])
    .execute();

  await db.schema
    .createTable("comments")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("item_id", "text", (c) => c.notNull().references("items.id").onDelete("cascade"))
    .addColumn("owner", "text", (c) => c.notNull())
    .addColumn("comment", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("comments_item").on("comments").columns(["item_id", "created"]).execute();

  /** A hosted feature service: its name (unique, case-insensitive) and definition. */
  await db.schema
    .createTable("feature_services")
    .addColumn("item_id", "text", (c) => c.primaryKey().references("items.id").onDelete("cascade"))
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("name_key", "text", (c) => c.notNull().unique())
    /** JSON: the service-level definition (createParameters, normalised). */
    .addColumn("definition", "text", (c) => c.notNull())
    /** JSON arrays of layer and table definitions. */
    .addColumn("layers", "text", (c) => c.notNull())
    .addColumn("tables", "text", (c) => c.notNull())
    .addColumn("is_view", "integer", (c) => c.notNull().defaultTo(0))
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
}
