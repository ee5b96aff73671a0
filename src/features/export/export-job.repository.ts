import { type Selectable, sql } from "kysely";
import type { Engine, Queryable } from "../../db/database.js";
import type { ExportJobTable } from "../../db/schema.js";

/**
 * Export jobs (0017) and their named transitions: `insertExportJob` (processing, unclaimed),
 * `claimExportJob` (a node takes it for a lease, counting the attempt), `renewExportLease`,
 * `finishExportJob` (completed or failed, only by the node that holds it) and
 * `releaseExportJob` (handed back at shutdown).
 */

export type ExportJobRow = Selectable<ExportJobTable>;
export type ExportJobStatus = "processing" | "completed" | "failed";

export async function insertExportJob(
  q: Queryable,
  job: Pick<
    ExportJobRow,
    "job_id" | "item_id" | "service_item_id" | "format" | "parameters" | "only_created_by"
  >,
  now: number,
): Promise<void> {
  await q
    .insertInto("export_jobs")
    .values({
      ...job,
      status: "processing",
      message: "processing",
      attempts: 0,
      lease_until: 0,
      created: now,
      modified: now,
    })
    .execute();
}

export function findExportJobOfItem(q: Queryable, itemId: string): Promise<ExportJobRow | undefined> {
  return q.selectFrom("export_jobs").selectAll().where("item_id", "=", itemId).executeTakeFirst();
}

/**
 * How many export jobs of user `username`'s items are processing (queued or running). On
 * PostgreSQL it first locks the user's row until the transaction ends, so that two requests of
 * the same user count one after the other and cannot both pass a cap (SQLite transactions are
 * already serialised).
 */
export async function countProcessingExportsOf(
  q: Queryable,
  engine: Engine,
  username: string,
): Promise<number> {
  const user = q.selectFrom("users").select("id").where("username_key", "=", username.toLowerCase());
  const owner = await (engine === "postgres" ? user.forUpdate() : user).executeTakeFirst();
  if (!owner) return 0;
  const row = await q
    .selectFrom("export_jobs")
    .innerJoin("items", "items.id", "export_jobs.item_id")
    .select((eb) => eb.fn.countAll<number | string>().as("n"))
    .where("items.owner_id", "=", owner.id)
    .where("export_jobs.status", "=", "processing")
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The next job in processing that no node holds (never claimed, or its lease ran out), taking
 * owners in turn: each processing job is ranked among its owner's (oldest first, a running one
 * counted too), and the due job of the lowest rank goes first, the oldest among equals. A user
 * with several exports queued thus has one run, then every other user's next one, and so on,
 * instead of all of theirs before a later user's.
 */
export async function nextDueExportJob(q: Queryable, now: number): Promise<string | undefined> {
  const ranked = q
    .selectFrom("export_jobs")
    .innerJoin("items", "items.id", "export_jobs.item_id")
    .select([
      "export_jobs.job_id as job_id",
      "export_jobs.lease_until as lease_until",
      "export_jobs.created as created",
      sql<number>`row_number() over (partition by items.owner_id order by export_jobs.created, export_jobs.job_id)`.as(
        "turn",
      ),
    ])
    .where("export_jobs.status", "=", "processing");
  const row = await q
    .selectFrom(ranked.as("ranked"))
    .select("job_id")
    .where("lease_until", "<", now)
    .orderBy("turn")
    .orderBy("created")
    .orderBy("job_id")
    .limit(1)
    .executeTakeFirst();
  return row?.job_id;
}

/**
 * Takes a due job until `leaseUntil`; answers it with the attempt counted, or undefined when
 * another node took it first (the update matches only a lease that has run out).
 */
export async function claimExportJob(
  q: Queryable,
  jobId: string,
  now: number,
  leaseUntil: number,
): Promise<ExportJobRow | undefined> {
  const result = await q
    .updateTable("export_jobs")
    .set((eb) => ({ lease_until: leaseUntil, attempts: eb("attempts", "+", 1), modified: now }))
    .where("job_id", "=", jobId)
    .where("status", "=", "processing")
    .where("lease_until", "<", now)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return undefined;
  return q.selectFrom("export_jobs").selectAll().where("job_id", "=", jobId).executeTakeFirst();
}

/** Extends the lease the node holds (`held`); false when it no longer holds the job. */
export async function renewExportLease(
  q: Queryable,
  jobId: string,
  held: number,
  leaseUntil: number,
): Promise<boolean> {
  const result = await q
    .updateTable("export_jobs")
    .set({ lease_until: leaseUntil })
    .where("job_id", "=", jobId)
    .where("status", "=", "processing")
    .where("lease_until", "=", held)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Ends the job the node holds with `held`; false when it no longer holds it (nothing changes). */
export async function finishExportJob(
  q: Queryable,
  jobId: string,
  held: number,
  outcome: { status: Exclude<ExportJobStatus, "processing">; message: string },
  now: number,
): Promise<boolean> {
  const result = await q
    .updateTable("export_jobs")
    .set({ status: outcome.status, message: outcome.message, lease_until: 0, modified: now })
    .where("job_id", "=", jobId)
    .where("status", "=", "processing")
    .where("lease_until", "=", held)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Hands a job back undone (this node stops): another node, or this one after a restart, takes it. */
export async function releaseExportJob(q: Queryable, jobId: string, held: number): Promise<void> {
  await q
    .updateTable("export_jobs")
    .set((eb) => ({ lease_until: 0, attempts: eb("attempts", "-", 1) }))
    .where("job_id", "=", jobId)
    .where("status", "=", "processing")
    .where("lease_until", "=", held)
    .execute();
}
