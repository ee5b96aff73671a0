import type { Engine, Queryable } from "../db/database.js";
import type { PeerNoticeTable } from "../db/schema.js";
import { newId } from "../ids.js";
import type { NoticeRecipient } from "./collaboration-types.js";
import { acceptedKeys } from "./peer.js";

/**
 * The outbox of notices to other portals (`peer_notices`, migration 0025): queued with the change
 * that causes them, claimed with a lease by one node at a time, deleted once the recipient
 * answered, retried with backoff otherwise.
 */

export interface NoticeFields {
  to: NoticeRecipient;
  collaborationId: string;
  op: string;
  body: Record<string, unknown>;
  /** The public key of the key that signs the notice; the current one when absent. */
  signWith?: string;
}

export async function queueNotice(q: Queryable, notice: NoticeFields, now: number): Promise<void> {
  const body = JSON.stringify(notice.body);
  if (notice.op === "nudge") {
    // A nudge still waiting says all a second one would: the recipient syncs once.
    const waiting = await q
      .selectFrom("peer_notices")
      .select("id")
      .where("collaboration_id", "=", notice.collaborationId)
      .where("to_portal_id", "=", notice.to.portal_id)
      .where("op", "=", "nudge")
      .where("body", "=", body)
      .where("lease_until", "<=", now)
      .executeTakeFirst();
    if (waiting) return;
  }
  await q
    .insertInto("peer_notices")
    .values({
      id: newId(),
      collaboration_id: notice.collaborationId,
      to_portal_id: notice.to.portal_id,
      portal_url: notice.to.portal_url,
      callee_keys: JSON.stringify(acceptedKeys(notice.to)),
      op: notice.op,
      body,
      sign_with: notice.signWith ?? "",
      created: now,
      attempts: 0,
      next_attempt: now,
      lease_until: 0,
      last_error: "",
    })
    .execute();
}

/** Claims up to `max` due notices for `leaseMs`: no other node sends them meanwhile. */
export async function claimNotices(
  q: Queryable,
  engine: Engine,
  now: number,
  leaseMs: number,
  max: number,
): Promise<PeerNoticeTable[]> {
  let query = q
    .selectFrom("peer_notices")
    .selectAll()
    .where("next_attempt", "<=", now)
    .where("lease_until", "<=", now)
    .orderBy("next_attempt")
    .orderBy("id")
    .limit(max);
  if (engine === "postgres") query = query.forUpdate().skipLocked();
  const due = await query.execute();
  if (due.length === 0) return [];
  await q
    .updateTable("peer_notices")
    .set({ lease_until: now + leaseMs })
    .where(
      "id",
      "in",
      due.map((n) => n.id),
    )
    .execute();
  return due;
}

export async function deleteNotice(q: Queryable, id: string): Promise<void> {
  await q.deleteFrom("peer_notices").where("id", "=", id).execute();
}

export async function retryNotice(
  q: Queryable,
  id: string,
  attempts: number,
  nextAttempt: number,
  error: string,
): Promise<void> {
  await q
    .updateTable("peer_notices")
    .set({ attempts, next_attempt: nextAttempt, lease_until: 0, last_error: error.slice(0, 2000) })
    .where("id", "=", id)
    .execute();
}

/** One process owns an SQLite store: a lease still running at start-up was held by a dead one. */
export async function releaseNoticeLeases(q: Queryable): Promise<void> {
  await q.updateTable("peer_notices").set({ lease_until: 0 }).where("lease_until", ">", 0).execute();
}
