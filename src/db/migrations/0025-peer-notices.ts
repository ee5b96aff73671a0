import type { Kysely } from "kysely";
import type { Engine } from "../database.js";

/**
 * Collaboration state that must outlive a process and be shared by every node.
 *
 * - `peer_notices`: the outbox of notices to other portals (`ended`, `left`, `nudge`, and the key
 *   messages `rekey` and `revoke`), written in the transaction of the change that causes them and
 *   delivered at least once by the peer notifier (`src/jobs/peer-notifier.ts`), with a lease per
 *   attempt and retries with backoff, as webhooks are. A notice carries what it needs to be sent
 *   after its collaboration is gone here: the recipient's address and the keys its answer may be
 *   signed with; `sign_with` names the key that signs it ('' for the current one).
 * - `realtime_prints`: the last offer fingerprint acted on per realtime workspace link. A node
 *   acts on a change only when its conditional update of the row wins, so a host nudges once per
 *   change however many nodes see it, and a change made while every node was down is seen at the
 *   next start.
 * - `sync_deferred`: scheduled or realtime syncs that came due while a sync of their workspace
 *   ran; whichever node sees the workspace free first claims the row and starts the sync.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createTable("peer_notices")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("collaboration_id", "text", (c) => c.notNull())
    .addColumn("to_portal_id", "text", (c) => c.notNull())
    .addColumn("portal_url", "text", (c) => c.notNull())
    /** JSON array of the recipient's public keys its answer may be signed with. */
    .addColumn("callee_keys", "text", (c) => c.notNull())
    .addColumn("op", "text", (c) => c.notNull())
    /** JSON object. */
    .addColumn("body", "text", (c) => c.notNull())
    .addColumn("sign_with", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("attempts", "integer", (c) => c.notNull())
    .addColumn("next_attempt", "bigint", (c) => c.notNull())
    .addColumn("lease_until", "bigint", (c) => c.notNull())
    .addColumn("last_error", "text", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("peer_notices_due").on("peer_notices").column("next_attempt").execute();

  await db.schema
    .createTable("realtime_prints")
    .addColumn("workspace_id", "text", (c) => c.primaryKey().references("workspaces.id").onDelete("cascade"))
    .addColumn("print", "text", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("sync_deferred")
    .addColumn("workspace_id", "text", (c) => c.primaryKey().references("workspaces.id").onDelete("cascade"))
    .addColumn("collaboration_id", "text", (c) => c.notNull())
    /** scheduled | realtime */
    .addColumn("exec_type", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .execute();
}
