import type { Insertable, Updateable } from "kysely";
import { noteChange } from "../db/change-feed.js";
import type { Queryable } from "../db/database.js";
import type {
  OAuthAppTable,
  OAuthAppTokenTable,
  OAuthCodeTable,
  OAuthRefreshTokenTable,
} from "../db/schema.js";

/** The registered app of a client id, with its item's owner. */
export function findApp(q: Queryable, clientId: string) {
  return q
    .selectFrom("oauth_apps")
    .innerJoin("items", "items.id", "oauth_apps.item_id")
    .selectAll("oauth_apps")
    .select(["items.owner", "items.owner_id", "items.title"])
    .where("oauth_apps.client_id", "=", clientId)
    .executeTakeFirst();
}

export type AppRow = NonNullable<Awaited<ReturnType<typeof findApp>>>;

/** The registered app of an item, if it is registered. */
export function findAppOfItem(q: Queryable, itemId: string) {
  return q
    .selectFrom("oauth_apps")
    .innerJoin("items", "items.id", "oauth_apps.item_id")
    .selectAll("oauth_apps")
    .select(["items.owner", "items.owner_id", "items.title"])
    .where("oauth_apps.item_id", "=", itemId)
    .executeTakeFirst();
}

export async function insertApp(q: Queryable, row: Insertable<OAuthAppTable>): Promise<void> {
  await q.insertInto("oauth_apps").values(row).execute();
}

export async function updateApp(
  q: Queryable,
  clientId: string,
  change: Updateable<OAuthAppTable>,
): Promise<void> {
  await q.updateTable("oauth_apps").set(change).where("client_id", "=", clientId).execute();
}

/** Unregisters an app; its codes, refresh tokens and tokens go with it (the cascade). */
export async function deleteApp(q: Queryable, clientId: string): Promise<void> {
  // Every user's token made for it goes too: any node's cache of token holders may hold one.
  noteChange(q, "auth");
  await q.deleteFrom("oauth_apps").where("client_id", "=", clientId).execute();
}

/** Ends every grant of an app (a new secret): codes, refresh tokens, app and user tokens. */
export async function deleteGrantsOfApp(q: Queryable, clientId: string): Promise<void> {
  noteChange(q, "auth");
  await q.deleteFrom("oauth_codes").where("client_id", "=", clientId).execute();
  await q.deleteFrom("oauth_refresh_tokens").where("client_id", "=", clientId).execute();
  await q.deleteFrom("oauth_app_tokens").where("client_id", "=", clientId).execute();
  await q.deleteFrom("tokens").where("client_id", "=", clientId).execute();
}

export async function insertCode(q: Queryable, row: Insertable<OAuthCodeTable>): Promise<void> {
  await q.insertInto("oauth_codes").values(row).execute();
}

/**
 * Takes an authorization code: reads and deletes it in one transaction, so that it is used once
 * whatever the outcome of the exchange (a code tried with a wrong verifier is spent too).
 */
export async function takeCode(q: Queryable, codeHash: string) {
  const row = await q
    .selectFrom("oauth_codes")
    .selectAll()
    .where("code_hash", "=", codeHash)
    .executeTakeFirst();
  if (!row) return undefined;
  // Concurrent exchanges of one code (PostgreSQL, READ COMMITTED) all read the row; only the one
  // whose DELETE removed it gets it: the others' DELETE waits for that commit and removes nothing.
  const deleted = await q.deleteFrom("oauth_codes").where("code_hash", "=", codeHash).executeTakeFirst();
  return Number(deleted.numDeletedRows) > 0 ? row : undefined;
}

export async function insertRefreshToken(
  q: Queryable,
  row: Insertable<OAuthRefreshTokenTable>,
): Promise<void> {
  await q.insertInto("oauth_refresh_tokens").values(row).execute();
}

/** A refresh token with its user's state (a disabled user's refresh tokens do nothing). */
export function findRefreshToken(q: Queryable, tokenHash: string) {
  return q
    .selectFrom("oauth_refresh_tokens")
    .innerJoin("users", "users.id", "oauth_refresh_tokens.user_id")
    .selectAll("oauth_refresh_tokens")
    .select(["users.username", "users.disabled"])
    .where("oauth_refresh_tokens.token_hash", "=", tokenHash)
    .executeTakeFirst();
}

export async function deleteRefreshToken(q: Queryable, tokenHash: string): Promise<number> {
  const r = await q.deleteFrom("oauth_refresh_tokens").where("token_hash", "=", tokenHash).executeTakeFirst();
  return Number(r.numDeletedRows);
}

export async function insertAppToken(q: Queryable, row: Insertable<OAuthAppTokenTable>): Promise<void> {
  await q.insertInto("oauth_app_tokens").values(row).execute();
}

export function findAppToken(q: Queryable, tokenHash: string) {
  return q.selectFrom("oauth_app_tokens").selectAll().where("token_hash", "=", tokenHash).executeTakeFirst();
}

export async function deleteAppToken(q: Queryable, tokenHash: string): Promise<number> {
  const r = await q.deleteFrom("oauth_app_tokens").where("token_hash", "=", tokenHash).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Ends the OAuth grants of a user (with its tokens, on disable, delete and password change). */
export async function deleteGrantsOfUser(q: Queryable, userId: string): Promise<void> {
  await q.deleteFrom("oauth_codes").where("user_id", "=", userId).execute();
  await q.deleteFrom("oauth_refresh_tokens").where("user_id", "=", userId).execute();
}

/** Removes expired codes, refresh tokens and app tokens; answers how many. */
export async function deleteExpiredGrants(q: Queryable, now: number): Promise<number> {
  let n = 0;
  for (const table of ["oauth_codes", "oauth_refresh_tokens", "oauth_app_tokens"] as const) {
    const r = await q.deleteFrom(table).where("expires", "<", now).executeTakeFirst();
    n += Number(r.numDeletedRows);
  }
  return n;
}
