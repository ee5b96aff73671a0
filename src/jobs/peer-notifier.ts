import { findParticipant } from "../collaboration/collaboration.repository.js";
import type { NoticeRecipient, Notifier } from "../collaboration/collaboration-types.js";
import {
  claimNotices,
  deleteNotice,
  queueNotice,
  releaseNoticeLeases,
  retryNotice,
} from "../collaboration/notice.repository.js";
import {
  acceptedKeys,
  PARTICIPATION_ENDED,
  PeerCallFailed,
  type PeerClient,
  REVOKED_KEY,
  revokedKeys,
} from "../collaboration/peer.js";
import type { Db, Queryable } from "../db/database.js";
import type { PeerNoticeTable } from "../db/schema.js";

export interface PeerNotifierOptions {
  db: Db;
  peers: PeerClient;
  /** This portal's organization id: the sender of every notice. */
  selfId: () => Promise<string>;
  onError: (err: unknown, what: string) => void;
  /** Backstop for notices queued by another node, and for retries coming due. */
  pollMs?: number;
}

/** Time one attempt may take (connection and answer), and the lease that covers it. */
const ATTEMPT_MS = 10_000;
const LEASE_MS = ATTEMPT_MS + 5_000;
/** Notices sent side by side, per process. */
const IN_FLIGHT = 8;
/** Retries wait 1 s, 2 s, 4 s … up to 10 minutes between attempts, for 3 days. */
const MAX_BACKOFF_MS = 10 * 60 * 1000;
const GIVE_UP_MS = 3 * 24 * 3600 * 1000;

/**
 * Notices to other portals of a collaboration: a host telling its guests that a workspace or the
 * collaboration ended, or that a realtime link has something new; a guest telling its host that
 * it left; either telling the others that its key changed. Each is queued in the transaction of
 * the change that causes it (`tell`) and delivered at least once, as webhooks are: claimed with a
 * lease (one node sends it; a node that dies mid-attempt leaves it to be claimed again when the
 * lease ends), deleted once the recipient answered with a verified signature, and retried with
 * backoff while the recipient cannot be reached, answers unsigned, or refuses it (it may not have
 * taken this portal's new key yet). A notice is dropped after 3 days, and when the recipient says
 * this portal no longer takes part (`COLLAB_0410`) or that the notice is malformed.
 */
export class PeerNotifier implements Notifier {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private again = false;
  private stopped = true;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly options: PeerNotifierOptions) {}

  async tell(
    trx: Queryable,
    to: NoticeRecipient,
    collaborationId: string,
    op: string,
    body: Record<string, unknown>,
    options: { signWith?: string } = {},
  ): Promise<void> {
    await queueNotice(trx, { to, collaborationId, op, body, signWith: options.signWith }, Date.now());
    // After the caller's commit, in all likelihood; the poll catches it otherwise.
    setTimeout(() => this.wake(), 20).unref();
  }

  async start(): Promise<void> {
    const { db } = this.options;
    if (db.engine === "sqlite") await db.transaction((trx) => releaseNoticeLeases(trx));
    this.stopped = false;
    this.timer = setInterval(() => this.wake(), this.options.pollMs ?? 1000);
    this.timer.unref();
    this.wake();
  }

  /** Stops claiming; attempts in flight end within their timeout and are recorded. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    while (this.running || this.inFlight.size > 0) {
      await Promise.allSettled([...this.inFlight]);
      if (this.running) await new Promise((r) => setTimeout(r, 10));
    }
  }

  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.pass());
  }

  private async pass(): Promise<void> {
    try {
      do {
        this.again = false;
        const free = IN_FLIGHT - this.inFlight.size;
        if (free <= 0 || this.stopped) break;
        const { db } = this.options;
        const claimed = await db.transaction((trx) =>
          claimNotices(trx, db.engine, Date.now(), LEASE_MS, free),
        );
        for (const notice of claimed) {
          const attempt = this.attempt(notice).finally(() => {
            this.inFlight.delete(attempt);
            this.wake();
          });
          this.inFlight.add(attempt);
        }
      } while (this.again && !this.stopped);
    } catch (err) {
      this.options.onError(err, "peer notice pass failed");
    } finally {
      this.running = false;
    }
  }

  private async attempt(notice: PeerNoticeTable): Promise<void> {
    const { db, peers } = this.options;
    let failure: string | undefined;
    try {
      // The recipient may have rotated its key since the notice was queued: its row says so, as
      // long as it is still a participant here.
      const participant = await findParticipant(db.kysely, notice.collaboration_id, notice.to_portal_id);
      const calleeKeys = participant
        ? acceptedKeys(participant)
        : (JSON.parse(notice.callee_keys) as string[]);
      await peers.call(
        notice.portal_url,
        {
          collaborationId: notice.collaboration_id,
          from: await this.options.selfId(),
          to: notice.to_portal_id,
          op: notice.op,
          body: JSON.parse(notice.body) as Record<string, unknown>,
        },
        calleeKeys,
        {
          timeoutMs: ATTEMPT_MS,
          revokedKeys: participant ? revokedKeys(participant) : [],
          ...(notice.sign_with ? { signWith: notice.sign_with } : {}),
        },
      );
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err);
      // A verified answer that no retry can change: the recipient no longer counts this portal,
      // or the notice itself is malformed.
      // A `rekey` signed with the key it revokes, delivered again after the recipient took it.
      const final =
        err instanceof PeerCallFailed &&
        (err.messageCode === PARTICIPATION_ENDED ||
          err.code === 400 ||
          err.code === 404 ||
          (notice.op === "rekey" && err.message.includes(REVOKED_KEY)));
      if (final) {
        this.options.onError(err, `notice '${notice.op}' to ${notice.portal_url} refused; dropped`);
        failure = undefined;
      }
    }
    try {
      const now = Date.now();
      if (failure === undefined) {
        await db.transaction((trx) => deleteNotice(trx, notice.id));
      } else if (now - Number(notice.created) > GIVE_UP_MS) {
        this.options.onError(
          new Error(failure),
          `notice '${notice.op}' to ${notice.portal_url} failed for 3 days; dropped (the recipient learns what it can at its next sync)`,
        );
        await db.transaction((trx) => deleteNotice(trx, notice.id));
      } else {
        const attempts = notice.attempts + 1;
        const wait = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(attempts - 1, 20));
        await db.transaction((trx) => retryNotice(trx, notice.id, attempts, now + wait, failure));
      }
    } catch (err) {
      // Unrecorded: the lease runs out and the notice is sent again.
      this.options.onError(err, "recording a peer notice attempt failed");
    }
  }
}
