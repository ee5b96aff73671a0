import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * OAuth 2.0 (`/sharing/rest/oauth2`):
 * - `oauth_apps`: the registration of an item of type Application (`registerApp`): its client id,
 *   the SHA-256 of its secret (the secret itself is shown once, when made), its type, redirect
 *   URIs and referrers. It goes with its item.
 * - `oauth_codes`: authorization codes, by their SHA-256: single use, short lived, bound to the
 *   app, the redirect URI and the PKCE challenge.
 * - `oauth_refresh_tokens`: refresh tokens, by their SHA-256, for one user and one app.
 * - `oauth_app_tokens`: tokens of `client_credentials`, which act for no user.
 * - `tokens.client_id`: the app a user's token was made for (null: `generateToken`'s). Every
 *   grant goes with its app (the item's deletion unregisters it) and with its user.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createTable("oauth_apps")
    .addColumn("client_id", "text", (c) => c.primaryKey())
    .addColumn("item_id", "text", (c) => c.notNull().unique().references("items.id").onDelete("cascade"))
    .addColumn("app_type", "text", (c) => c.notNull())
    .addColumn("redirect_uris", "text", (c) => c.notNull())
    .addColumn("http_referrers", "text", (c) => c.notNull())
    .addColumn("privileges", "text", (c) => c.notNull())
    .addColumn("secret_hash", "text", (c) => c.notNull())
    .addColumn("registered", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("oauth_codes")
    .addColumn("code_hash", "text", (c) => c.primaryKey())
    .addColumn("client_id", "text", (c) => c.notNull().references("oauth_apps.client_id").onDelete("cascade"))
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("redirect_uri", "text", (c) => c.notNull())
    .addColumn("code_challenge", "text")
    .addColumn("code_challenge_method", "text")
    .addColumn("refresh_minutes", "integer", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("expires", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("oauth_codes_client").on("oauth_codes").column("client_id").execute();
  await db.schema.createIndex("oauth_codes_user").on("oauth_codes").column("user_id").execute();

  await db.schema
    .createTable("oauth_refresh_tokens")
    .addColumn("token_hash", "text", (c) => c.primaryKey())
    .addColumn("client_id", "text", (c) => c.notNull().references("oauth_apps.client_id").onDelete("cascade"))
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("expires", "bigint", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("oauth_refresh_tokens_client")
    .on("oauth_refresh_tokens")
    .column("client_id")
    .execute();
  await db.schema
    .createIndex("oauth_refresh_tokens_user")
    .on("oauth_refresh_tokens")
    .column("user_id")
    .execute();

  await db.schema
    .createTable("oauth_app_tokens")
    .addColumn("token_hash", "text", (c) => c.primaryKey())
    .addColumn("client_id", "text", (c) => c.notNull().references("oauth_apps.client_id").onDelete("cascade"))
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("expires", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("oauth_app_tokens_client").on("oauth_app_tokens").column("client_id").execute();

  await db.schema
    .alterTable("tokens")
    .addColumn("client_id", "text", (c) => c.references("oauth_apps.client_id").onDelete("cascade"))
    .execute();
  await db.schema.createIndex("tokens_client").on("tokens").column("client_id").execute();
}
