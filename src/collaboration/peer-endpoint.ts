import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import {
  findCollaboration,
  findParticipant,
  isParticipant,
  wasAccepted,
} from "./collaboration.repository.js";
import { receives, type SyncStarter, sends } from "./collaboration-types.js";
import { heldVersions } from "./copy.repository.js";
import { dropCollaboration, dropGuest, dropWorkspaces } from "./drop-cascade.js";
import { hostState } from "./host-state.js";
import { layerChanges, serviceStates } from "./layer-copy-source.js";
import { type PeerEnvelope, peerRefusal, SIGNATURE_MISMATCH } from "./peer.js";
import { admitApply, itemLimits, MB, requestProblem } from "./peer-messages.js";
import { applyItems, exportItems, offer, withdrawItems } from "./replication.js";
import { findLink, findWorkspace, modesOf, workspaceConfig } from "./workspace.repository.js";

export interface PeerEndpointOptions {
  db: Db;
  /** This portal's organization id: whom calls must be addressed to. */
  selfId: () => Promise<string>;
  /** Starts the sync a host's `nudge` asks for. */
  syncs: Pick<SyncStarter, "startBackground">;
  onError: (err: unknown, what: string) => void;
}

/**
 * `/portico/peer/<op>`: where the other portals of a collaboration call this one, with signed
 * envelopes instead of tokens (`peer.ts`). A guest asks its host for the collaboration's state,
 * for items and for what the host holds, and sends it items; a host tells its guest that
 * replication ended or that there is something new to sync.
 *
 * This class is the handler of that route (portico.routes.ts hands it the call once its envelope
 * is parsed), so it builds the answers, as a route builds ArcGIS's (`src/http/answers.ts`): the
 * acknowledgements `{ success: true }` of `ended`, `nudge` and `left`, and the names around
 * results. What it calls (the drop cascade, `hostState`, replication) returns domain results only;
 * the per-item `results` of `apply` and `withdraw` are outcomes, built by replication. These are
 * answers of portico's own peer protocol, not ArcGIS's: the calling portal checks those it reads
 * against the shapes in `peer-messages.ts` (`answerProblem`), and the notices' acknowledgements
 * are read for their status only. `ok()` is not used here because `collaboration` sits below
 * `http` in the layers.
 */
export class PeerEndpoint {
  private readonly db: Db;
  private readonly selfId: () => Promise<string>;
  private readonly syncs: PeerEndpointOptions["syncs"];
  private readonly onError: PeerEndpointOptions["onError"];

  constructor(options: PeerEndpointOptions) {
    this.db = options.db;
    this.selfId = options.selfId;
    this.syncs = options.syncs;
    this.onError = options.onError;
  }

  /**
   * Whether `portalId` is another participant of collaboration `collaborationId` here: what a peer
   * call names in its headers (`PEER_HEADERS`) before a large body of it is read.
   */
  async knowsPeer(collaborationId: string, portalId: string): Promise<boolean> {
    if (portalId === (await this.selfId())) return false;
    return isParticipant(this.db.kysely, collaborationId, portalId);
  }

  /** Answers a signed call from another portal of a collaboration. */
  async answer(envelope: PeerEnvelope, signature: string): Promise<Record<string, unknown>> {
    const selfId = await this.selfId();
    const from = await findParticipant(
      this.db.kysely,
      String(envelope.collaborationId),
      String(envelope.from),
    );
    const collab = await findCollaboration(this.db.kysely, String(envelope.collaborationId));
    // Before the signature is checked, every refusal reads the same (`peerCallRefused`), so that
    // nobody learns from this endpoint which collaborations exist; the log says which it was.
    const refuse = (why: string) => {
      this.onError(
        new Error(
          `${why} (collaboration '${String(envelope.collaborationId).slice(0, 64)}', caller '${String(envelope.from).slice(0, 64)}', operation '${String(envelope.op).slice(0, 32)}')`,
        ),
        "peer call refused",
      );
      return errors.peerCallRefused();
    };
    if (!collab) throw refuse("no collaboration with this id exists here");
    if (!from || from.portal_id === selfId) {
      // Accepted once and gone now: removed, or it left. Its key went with it, so this answer is
      // unsigned; it tells only a caller that names such a former guest that the collaboration
      // exists, and lets a guest whose removal notice was lost learn it on its next sync.
      if ((await wasAccepted(this.db.kysely, collab.id, String(envelope.from))) && collab.role === "host") {
        throw errors.participationEnded();
      }
      throw refuse(
        "the caller is not a participant of the collaboration (or its response is not imported yet)",
      );
    }
    const refusal = await peerRefusal(this.db, envelope, signature, from.public_key, selfId);
    if (refusal === SIGNATURE_MISMATCH) throw refuse(refusal);
    if (refusal) throw errors.peerCallRefusedBecause(refusal);
    const body = envelope.body ?? {};
    const malformed = requestProblem(envelope.op, body);
    if (malformed) throw errors.invalidParameter("envelope", `has a body that ${malformed}`);
    const workspaceId = typeof body.workspaceId === "string" ? body.workspaceId : "";
    const cid = envelope.collaborationId;

    if (collab.role === "guest") {
      // What a host tells its guest.
      if (from.role !== "host") throw errors.noticeNotFromHost();
      if (envelope.op === "ended") {
        await this.db.transaction(async (trx) => {
          if (workspaceId) {
            if (await findWorkspace(trx, cid, workspaceId))
              await dropWorkspaces(trx, selfId, cid, [workspaceId]);
          } else {
            await dropCollaboration(trx, selfId, cid);
          }
        });
        return { success: true };
      }
      if (envelope.op === "nudge") {
        const ws = await findLink(this.db.kysely, workspaceId);
        if (ws)
          void this.syncs
            .startBackground(cid, workspaceId, "realtime")
            .catch((err: unknown) => this.onError(err, "realtime sync failed"));
        return { success: true, started: ws !== undefined };
      }
      throw errors.invalidParameter("op", `'${envelope.op}' is not an operation a guest answers`);
    }

    // What a guest asks its host.
    if (envelope.op === "state")
      return (await hostState(this.db.kysely, cid, from.portal_id)) as unknown as Record<string, unknown>;
    if (envelope.op === "left") {
      await this.db.transaction((trx) => dropGuest(trx, selfId, cid, from));
      return { success: true };
    }
    const ws = await findWorkspace(this.db.kysely, cid, workspaceId);
    if (!ws) throw errors.workspaceNotFound(workspaceId);
    const modes = (await modesOf(this.db.kysely, [workspaceId])).get(workspaceId);
    const link = await findLink(this.db.kysely, workspaceId);
    if (!link) throw errors.hostGroupNotLinked();
    const hostToGuest = sends(modes?.get(selfId)) && receives(modes?.get(from.portal_id));
    const guestToHost = sends(modes?.get(from.portal_id)) && receives(modes?.get(selfId));
    const target = { workspaceId, originPortalId: from.portal_id, groupId: link.group_id };
    const ids = (body.ids as string[] | undefined) ?? [];
    switch (envelope.op) {
      case "offer":
        if (!hostToGuest) throw errors.accessModeRefused("receive from");
        return { items: await offer(this.db.kysely, link.group_id) };
      case "export":
        if (!hostToGuest) throw errors.accessModeRefused("receive from");
        return { items: await exportItems(this.db.kysely, link.group_id, ids) };
      case "layerServices":
        if (!hostToGuest) throw errors.accessModeRefused("receive from");
        return { services: await serviceStates(this.db.kysely, link.group_id, ids) };
      case "layerChanges": {
        if (!hostToGuest) throw errors.accessModeRefused("receive from");
        const page = await layerChanges(
          this.db.kysely,
          link.group_id,
          body as unknown as Parameters<typeof layerChanges>[2],
        );
        if (!page) throw errors.itemNotFound(String(body.id));
        return page as unknown as Record<string, unknown>;
      }
      case "holdings":
        if (!guestToHost) throw errors.accessModeRefused("send to");
        return { holdings: await heldVersions(this.db.kysely, workspaceId, from.portal_id) };
      case "apply": {
        if (!guestToHost) throw errors.accessModeRefused("send to");
        const config = workspaceConfig(ws);
        // The guest's sync tracks its package budget; one call may not exceed it either.
        const { accepted, refused } = admitApply(
          body.items as unknown[],
          itemLimits(config, { bytes: config.maxReplicationPackageSizeInMB * MB }),
        );
        return { results: [...(await applyItems(this.db, target, accepted)), ...refused] };
      }
      case "withdraw": {
        if (!guestToHost) throw errors.accessModeRefused("send to");
        const gone = body.gone as { id: string; state: "deleted" | "unshared" }[];
        return {
          results: await withdrawItems(this.db, target, gone, from.delete_contributed === 1),
        };
      }
      default:
        throw errors.invalidParameter("op", `'${envelope.op}' is not an operation a host answers`);
    }
  }
}
