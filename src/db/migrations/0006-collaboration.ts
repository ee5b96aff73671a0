import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * Distributed collaboration (`interface.md` §2.3, §3, §4.3–4.10, `wire.md` §8).
 *
 * - `portal_keys`: this portal's Ed25519 key pair; invitations, responses and every peer call are
 *   signed with it. One row, made on first use.
 * - `collaborations`, `collaboration_participants`: what this portal knows of each collaboration
 *   it hosts or joined. A participant's id is its organization id; its public key is what its
 *   peer calls are checked against.
 * - `collaboration_invitations`: invitations a host issued, with their state (a response is
 *   imported once: a replayed file finds the invitation no longer pending).
 * - `workspaces`, `workspace_modes` (each participant's access mode), `workspace_links` (this
 *   portal's group linked to a workspace; one per workspace).
 * - `collaboration_copies`: items this portal received, by origin; what a later sync compares,
 *   and why a received copy is never sent on.
 * - `sync_jobs`: one row per sync; a unique index over running jobs is the one-at-a-time rule,
 *   and `heartbeat` is how a job whose process died is found.
 * - `sync_schedules`: scheduled syncs; kept here so they survive restarts.
 * - `peer_nonces`: nonces of signed peer calls seen recently (a replayed call is refused).
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .createTable("portal_keys")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("public_key", "text", (c) => c.notNull())
    .addColumn("private_key", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("collaborations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("description", "text", (c) => c.notNull())
    /** host | guest: this portal's part. */
    .addColumn("role", "text", (c) => c.notNull())
    .addColumn("host_portal_id", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("collaboration_participants")
    .addColumn("collaboration_id", "text", (c) =>
      c.notNull().references("collaborations.id").onDelete("cascade"),
    )
    .addColumn("portal_id", "text", (c) => c.notNull())
    /** host | guest */
    .addColumn("role", "text", (c) => c.notNull())
    .addColumn("portal_url", "text", (c) => c.notNull())
    .addColumn("portal_name", "text", (c) => c.notNull())
    .addColumn("public_key", "text", (c) => c.notNull())
    /** JSON: firstName, lastName, email. */
    .addColumn("contact", "text", (c) => c.notNull())
    .addColumn("delete_contributed", "integer", (c) => c.notNull())
    .addColumn("delete_received", "integer", (c) => c.notNull())
    /** active | pending (a guest before the host imported its response) */
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("collaboration_participants_pk", ["collaboration_id", "portal_id"])
    .execute();

  await db.schema
    .createTable("collaboration_invitations")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("collaboration_id", "text", (c) =>
      c.notNull().references("collaborations.id").onDelete("cascade"),
    )
    .addColumn("guest_portal_url", "text", (c) => c.notNull())
    /** JSON object: workspace id -> the guest's access mode. */
    .addColumn("workspaces", "text", (c) => c.notNull())
    .addColumn("expires", "bigint", (c) => c.notNull())
    /** pending | accepted | invalidated */
    .addColumn("status", "text", (c) => c.notNull())
    /** SHA-256 of the signed invitation as last issued; a response must answer that one. */
    .addColumn("digest", "text", (c) => c.notNull())
    .addColumn("file", "text", (c) => c.notNull())
    .addColumn("guest_portal_id", "text")
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("workspaces")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("collaboration_id", "text", (c) =>
      c.notNull().references("collaborations.id").onDelete("cascade"),
    )
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("description", "text", (c) => c.notNull())
    .addColumn("config", "text", (c) => c.notNull())
    .addColumn("last_sync_success", "bigint", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("workspaces_collaboration")
    .on("workspaces")
    .column("collaboration_id")
    .execute();

  await db.schema
    .createTable("workspace_modes")
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("portal_id", "text", (c) => c.notNull())
    /** send | receive | sendAndReceive */
    .addColumn("access_mode", "text", (c) => c.notNull())
    .addPrimaryKeyConstraint("workspace_modes_pk", ["workspace_id", "portal_id"])
    .execute();

  await db.schema
    .createTable("workspace_links")
    .addColumn("workspace_id", "text", (c) => c.primaryKey().references("workspaces.id").onDelete("cascade"))
    .addColumn("group_id", "text", (c) => c.notNull())
    .addColumn("realtime", "integer", (c) => c.notNull())
    .addColumn("copy_feature_data", "integer", (c) => c.notNull())
    .addColumn("copy_by_ref_if_copy_fail", "integer", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("collaboration_copies")
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("origin_portal_id", "text", (c) => c.notNull())
    .addColumn("origin_item_id", "text", (c) => c.notNull())
    .addColumn("item_id", "text", (c) => c.notNull())
    /** The origin's version (its `modified`) that the copy holds. */
    .addColumn("origin_version", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("collaboration_copies_pk", [
      "workspace_id",
      "origin_portal_id",
      "origin_item_id",
    ])
    .execute();
  await db.schema
    .createIndex("collaboration_copies_item")
    .on("collaboration_copies")
    .column("item_id")
    .execute();

  await db.schema
    .createTable("sync_jobs")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull())
    .addColumn("collaboration_id", "text", (c) => c.notNull())
    /** manual | scheduled | realtime */
    .addColumn("exec_type", "text", (c) => c.notNull())
    /** submitted | started | in_progress | failed | completed_with_failures | completed */
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .addColumn("start_time", "bigint", (c) => c.notNull())
    .addColumn("end_time", "bigint", (c) => c.notNull())
    .addColumn("heartbeat", "bigint", (c) => c.notNull())
    .addColumn("summary", "text", (c) => c.notNull())
    /** JSON array of per-participant task results. */
    .addColumn("results", "text", (c) => c.notNull())
    .execute();
  // The one-at-a-time rule (`interface.md` §3), kept by the database on every node.
  await sql`CREATE UNIQUE INDEX sync_jobs_running ON sync_jobs (workspace_id) WHERE status IN ('submitted', 'started', 'in_progress')`.execute(
    db,
  );
  await db.schema
    .createIndex("sync_jobs_workspace")
    .on("sync_jobs")
    .columns(["workspace_id", "created"])
    .execute();

  await db.schema
    .createTable("sync_schedules")
    .addColumn("workspace_id", "text", (c) => c.primaryKey().references("workspaces.id").onDelete("cascade"))
    .addColumn("start_time", "bigint", (c) => c.notNull())
    .addColumn("interval_ms", "bigint", (c) => c.notNull())
    /** -1: forever. */
    .addColumn("repeat_count", "integer", (c) => c.notNull())
    .addColumn("fired", "integer", (c) => c.notNull())
    /** -1 once the schedule has fired its last time. */
    .addColumn("next_fire", "bigint", (c) => c.notNull())
    /** active | paused | completed */
    .addColumn("state", "text", (c) => c.notNull())
    .addColumn("modified", "bigint", (c) => c.notNull())
    .execute();

  await db.schema
    .createTable("peer_nonces")
    .addColumn("nonce", "text", (c) => c.primaryKey())
    .addColumn("expires", "bigint", (c) => c.notNull())
    .execute();
}
