import type { Notifier } from "../collaboration/collaboration-types.js";
import type { PeerClient } from "../collaboration/peer.js";

export interface PeerNotifierOptions {
  peers: PeerClient;
  /** This portal's organization id: the sender of every notice. */
  selfId: () => Promise<string>;
  onError: (err: unknown, what: string) => void;
}

/**
 * Notices to other portals of a collaboration: a host telling its guests that a workspace or the
 * collaboration ended, or that a realtime link has something new; a guest telling its host that
 * it left. Sent in the background, once; a notice that is lost changes nothing a sync does not
 * also learn, so a failure is only reported.
 */
export class PeerNotifier implements Notifier {
  constructor(private readonly options: PeerNotifierOptions) {}

  tell(url: string, collaborationId: string, to: string, op: string, body: Record<string, unknown>): void {
    void this.send(url, collaborationId, to, op, body);
  }

  private async send(
    url: string,
    collaborationId: string,
    to: string,
    op: string,
    body: Record<string, unknown>,
  ) {
    try {
      await this.options.peers.call(
        url,
        { collaborationId, from: await this.options.selfId(), to, op, body },
        10_000,
      );
    } catch (err) {
      this.options.onError(err, `telling ${url} '${op}' failed; it learns on its next sync`);
    }
  }
}
