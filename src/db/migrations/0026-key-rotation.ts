import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Rotation and revocation of a portal's signing key.
 *
 * - `portal_keys`: besides the current pair (`id` 'portal'), the pairs it replaced, with when
 *   (`retired`) and whether they were revoked (`revoked`, 0 when not). A retired private key is
 *   kept to sign the message that announces its successor.
 * - `collaboration_participants.retired_keys`: JSON array of a participant's earlier keys as this
 *   portal learned them (`{publicKey?, fingerprint, until, revoked}`): a retired key is still
 *   accepted until `until` (calls signed just before the rotation, nodes that have not reloaded
 *   it), a revoked one never, and messages signed with it are refused naming the revocation.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .alterTable("portal_keys")
    .addColumn("retired", "bigint", (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable("portal_keys")
    .addColumn("revoked", "bigint", (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable("collaboration_participants")
    .addColumn("retired_keys", "text", (c) => c.notNull().defaultTo("[]"))
    .execute();
}
