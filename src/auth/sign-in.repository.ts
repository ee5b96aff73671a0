import { sql } from "kysely";
import type { Queryable } from "../db/database.js";
import { MAX_HISTORY } from "./security-policy.js";

/**
 * Failures are counted by lower-case username (sign-in names are case-insensitive), whether an
 * account has the name or not. Callers give the name as typed; only this repository makes the key.
 */
function failureKey(username: string): string {
  return username.toLowerCase();
}

/** Failed sign-ins of a username (known or not), if any are counted. */
export function findSignInFailures(q: Queryable, username: string) {
  const usernameKey = failureKey(username);
  return q
    .selectFrom("sign_in_failures")
    .selectAll()
    .where("username_key", "=", usernameKey)
    .executeTakeFirst();
}

/** The lockout policy as it applies at one moment. */
export interface LockoutRule {
  /** Runs whose first attempt is older than this are over: the next attempt starts a new one. */
  windowStart: number;
  maxAttempts: number;
  /** When a lock set now ends. */
  lockUntil: number;
}

/** The run restarts: its window passed, or its lock ran out (only meaningful when not locked now). */
function runOver(rule: LockoutRule) {
  return sql<boolean>`(sign_in_failures.locked_until <> 0 OR sign_in_failures.first_failure < ${rule.windowStart})`;
}

/**
 * Counts a sign-in attempt before its password is checked, in one statement on both engines, so
 * that parallel attempts cannot all pass a check made before any of them is counted. The attempt
 * is admitted when the name is not locked and its run has fewer than `maxAttempts` attempts; it
 * then counts as a failure until it succeeds (`endSignInFailures`) or is given back
 * (`releaseSignInAttempt`). Answers the run it counts in (its `first_failure`), or `undefined`
 * when refused: the name is locked, or the run is full, which locks it now (more attempts than the
 * policy allows were made at once; the ones admitted may still include the right password, and it
 * is refused too).
 */
export async function reserveSignInAttempt(
  q: Queryable,
  username: string,
  now: number,
  rule: LockoutRule,
): Promise<number | undefined> {
  const usernameKey = failureKey(username);
  const over = runOver(rule);
  const admitted = await q
    .insertInto("sign_in_failures")
    .values({ username_key: usernameKey, failures: 1, first_failure: now, locked_until: 0 })
    .onConflict((oc) =>
      oc
        .column("username_key")
        .doUpdateSet({
          failures: sql`CASE WHEN ${over} THEN 1 ELSE sign_in_failures.failures + 1 END`,
          first_failure: sql`CASE WHEN ${over} THEN ${now} ELSE sign_in_failures.first_failure END`,
          locked_until: 0,
        })
        .where(
          sql<boolean>`sign_in_failures.locked_until <= ${now} AND (${over} OR sign_in_failures.failures < ${rule.maxAttempts})`,
        ),
    )
    .returning("first_failure")
    .executeTakeFirst();
  if (admitted) return Number(admitted.first_failure);
  await lockFullRun(q, usernameKey, rule);
  return undefined;
}

/** Locks the name when its current run has `maxAttempts` attempts and no lock yet. */
async function lockFullRun(
  q: Queryable,
  usernameKey: string,
  rule: LockoutRule,
  run?: number,
): Promise<void> {
  let update = q
    .updateTable("sign_in_failures")
    .set({ locked_until: rule.lockUntil })
    .where("username_key", "=", usernameKey)
    .where("failures", ">=", rule.maxAttempts)
    .where("locked_until", "=", 0);
  if (run !== undefined) update = update.where("first_failure", "=", run);
  await update.execute();
}

/**
 * A reserved attempt gave the wrong password. It was counted when reserved: the run is locked if
 * it reached the limit. When its run is over (a success ended it meanwhile, or it restarted), the
 * failure counts in the current run instead, so that guesses checked after another client's
 * success are not forgotten.
 */
export async function recordFailedAttempt(
  q: Queryable,
  username: string,
  run: number,
  now: number,
  rule: LockoutRule,
): Promise<void> {
  const usernameKey = failureKey(username);
  const current = await findSignInFailures(q, usernameKey);
  if (current && Number(current.first_failure) === run) {
    await lockFullRun(q, usernameKey, rule, run);
    return;
  }
  await recordSignInFailure(q, usernameKey, now, rule);
}

/**
 * Gives back a reserved attempt whose password was never found wrong (the hashing queue was full,
 * or the right password was given for a disabled account or with a refused new password). Nothing
 * is given back to a locked name or to a run that is over.
 */
export async function releaseSignInAttempt(q: Queryable, username: string, run: number): Promise<void> {
  const usernameKey = failureKey(username);
  await q
    .updateTable("sign_in_failures")
    .set({ failures: sql`failures - 1` })
    .where("username_key", "=", usernameKey)
    .where("first_failure", "=", run)
    .where("locked_until", "=", 0)
    .where("failures", ">", 0)
    .execute();
}

/**
 * The right password was given: ends the run of failures, unless the name is locked (then the
 * right password does not sign in either). Answers when the lock ends, or `undefined` when the
 * run was ended. One conditional DELETE: a lock set by a concurrent failure either commits first
 * (and the DELETE leaves the row) or waits for this transaction and then finds no row.
 */
export async function endSignInFailures(
  q: Queryable,
  username: string,
  now: number,
): Promise<number | undefined> {
  const usernameKey = failureKey(username);
  await q
    .deleteFrom("sign_in_failures")
    .where("username_key", "=", usernameKey)
    .where("locked_until", "<=", now)
    .execute();
  const left = await findSignInFailures(q, usernameKey);
  return left && Number(left.locked_until) > now ? Number(left.locked_until) : undefined;
}

/**
 * Counts one failed sign-in that was not reserved in the current run, atomically on both engines
 * (concurrent failures each count): a run restarts when its first failure is older than the window
 * or its lock has run out; the failure that reaches `maxAttempts` locks the name until `lockUntil`.
 */
async function recordSignInFailure(
  q: Queryable,
  usernameKey: string,
  now: number,
  rule: LockoutRule,
): Promise<void> {
  const restart = sql<boolean>`(sign_in_failures.locked_until <= ${now} AND ${runOver(rule)})`;
  await q
    .insertInto("sign_in_failures")
    .values({ username_key: usernameKey, failures: 1, first_failure: now, locked_until: 0 })
    .onConflict((oc) =>
      oc.column("username_key").doUpdateSet({
        failures: sql`CASE WHEN ${restart} THEN 1 ELSE sign_in_failures.failures + 1 END`,
        first_failure: sql`CASE WHEN ${restart} THEN ${now} ELSE sign_in_failures.first_failure END`,
        locked_until: sql`CASE WHEN ${restart} THEN 0 ELSE sign_in_failures.locked_until END`,
      }),
    )
    .execute();
  await lockFullRun(q, usernameKey, rule);
}

/** A successful sign-in, or an administrator unlocking the account, ends the run of failures. */
export async function clearSignInFailures(q: Queryable, username: string): Promise<void> {
  const usernameKey = failureKey(username);
  await q.deleteFrom("sign_in_failures").where("username_key", "=", usernameKey).execute();
}

/** Failure runs over and unlocked before `before` say nothing any more; run periodically. */
export async function deleteStaleSignInFailures(q: Queryable, before: number): Promise<number> {
  const r = await q
    .deleteFrom("sign_in_failures")
    .where("first_failure", "<", before)
    .where("locked_until", "<", before)
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Records a password the user now has, keeping the most recent `MAX_HISTORY` only. */
export async function recordPassword(q: Queryable, userId: string, hash: string, now: number): Promise<void> {
  // Strictly increasing per user, so that "newest" is never a tie.
  const last = await passwordSetAt(q, userId);
  const created = last !== undefined && last >= now ? last + 1 : now;
  await q.insertInto("password_history").values({ user_id: userId, password_hash: hash, created }).execute();
  const keep = await q
    .selectFrom("password_history")
    .select("created")
    .where("user_id", "=", userId)
    .orderBy("created", "desc")
    .offset(MAX_HISTORY - 1)
    .limit(1)
    .executeTakeFirst();
  if (keep) {
    await q
      .deleteFrom("password_history")
      .where("user_id", "=", userId)
      .where("created", "<", keep.created)
      .execute();
  }
}

/** The user's most recent password hashes, newest first. */
export async function recentPasswords(q: Queryable, userId: string, count: number): Promise<string[]> {
  const rows = await q
    .selectFrom("password_history")
    .select("password_hash")
    .where("user_id", "=", userId)
    .orderBy("created", "desc")
    .limit(count)
    .execute();
  return rows.map((r) => r.password_hash);
}

/** When the user's current password was set: the newest history row, if any. */
export async function passwordSetAt(q: Queryable, userId: string): Promise<number | undefined> {
  const row = await q
    .selectFrom("password_history")
    .select((eb) => eb.fn.max("created").as("at"))
    .where("user_id", "=", userId)
    .executeTakeFirst();
  return row?.at === null || row?.at === undefined ? undefined : Number(row.at);
}

/** Failed sign-ins of several usernames (a page of users). */
export function findSignInFailuresOf(q: Queryable, usernames: string[]) {
  if (usernames.length === 0) return Promise.resolve([]);
  const usernameKeys = usernames.map(failureKey);
  return q.selectFrom("sign_in_failures").selectAll().where("username_key", "in", usernameKeys).execute();
}
