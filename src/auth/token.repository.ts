import type { Insertable } from "kysely";
import type { Queryable } from "../db/database.js";
import type { TokenTable } from "../db/schema.js";
import { deleteGrantsOfUser } from "./oauth.repository.js";

export async function insertToken(q: Queryable, row: Insertable<TokenTable>): Promise<void> {
  await q.insertInto("tokens").values(row).execute();
}

/** The token's holder with everything authorization needs, in one query. */
export function findTokenHolder(q: Queryable, tokenHash: string) {
  return q
    .selectFrom("tokens")
    .innerJoin("users", "users.id", "tokens.user_id")
    .leftJoin("roles", "roles.id", "users.role_id")
    .select([
      "tokens.expires",
      "tokens.client",
      "tokens.referer",
      "tokens.client_id as clientId",
      "users.id as userId",
      "users.username",
      "users.role",
      "users.role_id as roleId",
      "users.disabled",
      "roles.privileges as rolePrivileges",
    ])
    .where("tokens.token_hash", "=", tokenHash)
    .executeTakeFirst();
}

export async function deleteToken(q: Queryable, tokenHash: string): Promise<number> {
  const r = await q.deleteFrom("tokens").where("token_hash", "=", tokenHash).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/**
 * Ends every session of a user, and its OAuth 2.0 grants (codes, refresh tokens): used on
 * disable, delete and password change.
 */
export async function deleteTokensOfUser(q: Queryable, userId: string): Promise<void> {
  await q.deleteFrom("tokens").where("user_id", "=", userId).execute();
  await deleteGrantsOfUser(q, userId);
}

export async function deleteExpiredTokens(q: Queryable, now: number): Promise<number> {
  const r = await q.deleteFrom("tokens").where("expires", "<", now).executeTakeFirst();
  return Number(r.numDeletedRows);
}
