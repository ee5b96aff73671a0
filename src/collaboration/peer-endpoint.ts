import type { Db, Queryable } from "../db/database.js";
import type { ParticipantTable, WorkspaceLinkTable, WorkspaceTable } from "../db/schema.js";
import { errors } from "../errors.js";
import {
  findCollaboration,
  findParticipant,
  isParticipant,
  setParticipantKeys,
  wasAccepted,
} from "./collaboration.repository.js";
import { receives, type SyncStarter, sends } from "./collaboration-types.js";
import { heldVersions } from "./copy.repository.js";
import { dropCollaboration, dropGuest, dropWorkspaces } from "./drop-cascade.js";
import { hostState } from "./host-state.js";
import { rekeyProof } from "./key.service.js";
import {
  copyDefine,
  copyEdits,
  copyEditsDone,
  copyPage,
  copyState,
  type PeerCopyContext,
  takeGuestEdits,
} from "./layer-copy-peer.js";
import { layerChanges, offeredIds, type ServiceState, serviceStates } from "./layer-copy-source.js";
import {
  ANSWER_SIGNATURE_HEADER,
  answerDocument,
  type PeerEnvelope,
  type PortalKeys,
  peerRefusal,
  RETIRED_KEY_GRACE_MS,
  type RetiredKey,
  retiredKeysOf,
  SIGNATURE_MISMATCH,
} from "./peer.js";
import { admitApply, itemLimits, MB, requestProblem } from "./peer-messages.js";
import { applyItems, exportItems, offer, withdrawItems } from "./replication.js";
import { fingerprint, signDocument, verifyDocument } from "./signing.js";
import { findLink, findWorkspace, modesOf, workspaceConfig } from "./workspace.repository.js";

export interface PeerEndpointOptions {
  db: Db;
  /** This portal's signing key: every answer is signed with it. */
  keys: Pick<PortalKeys, "get">;
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
  private readonly keys: PeerEndpointOptions["keys"];
  private readonly selfId: () => Promise<string>;
  private readonly syncs: PeerEndpointOptions["syncs"];
  private readonly onError: PeerEndpointOptions["onError"];

  constructor(options: PeerEndpointOptions) {
    this.db = options.db;
    this.keys = options.keys;
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

  /**
   * The signature header of an answer (`answerDocument`), whatever it says, refusals included:
   * the caller believes nothing unsigned. A body that was not a call (unreadable, no envelope) is
   * answered unsigned, and its sender refuses the answer.
   */
  async answerHeaders(body: unknown, status: number, payload: string): Promise<Record<string, string>> {
    const call = body as { envelope?: unknown; signature?: unknown } | undefined;
    if (typeof call !== "object" || call === null || typeof call.envelope !== "object" || !call.envelope)
      return {};
    const { privateKey } = await this.keys.get();
    const document = answerDocument({ envelope: call.envelope, signature: call.signature }, status, payload);
    return { [ANSWER_SIGNATURE_HEADER]: signDocument(document, privateKey) };
  }

  /** Answers a signed call from another portal of a collaboration. */
  async answer(envelope: PeerEnvelope, signature: string): Promise<Record<string, unknown>> {
    const selfId = await this.selfId();
    // One after the other, not side by side: the signature is not checked yet, and an unsigned
    // caller must not hold two pooled connections at once.
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
    const refusal = await peerRefusal(this.db, envelope, signature, from, selfId);
    if (refusal === SIGNATURE_MISMATCH) throw refuse(refusal);
    if (refusal) throw errors.peerCallRefusedBecause(refusal);
    const body = envelope.body ?? {};
    const malformed = requestProblem(envelope.op, body);
    if (malformed) throw errors.invalidParameter("envelope", `has a body that ${malformed}`);
    const workspaceId = typeof body.workspaceId === "string" ? body.workspaceId : "";
    const cid = envelope.collaborationId;

    // What either side tells the other of its own key.
    if (envelope.op === "rekey" || envelope.op === "revoke") {
      await this.db.transaction((trx) =>
        envelope.op === "rekey"
          ? takeNewKey(trx, cid, from, body as { publicKey: string; proof: string; revokePrevious: boolean })
          : takeRevocation(trx, cid, from, String(body.fingerprint)),
      );
      return { success: true };
    }

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
    const [ws, allModes, link] = await Promise.all([
      findWorkspace(this.db.kysely, cid, workspaceId),
      modesOf(this.db.kysely, [workspaceId]),
      findLink(this.db.kysely, workspaceId),
    ]);
    if (!ws) throw errors.workspaceNotFound(workspaceId);
    const modes = allModes.get(workspaceId);
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
          from.portal_id,
        );
        if (!page) throw errors.itemNotFound(String(body.id));
        return page as unknown as Record<string, unknown>;
      }
      case "layerEdits": {
        if (!hostToGuest) throw errors.accessModeRefused("receive from");
        if (!(await offeredIds(this.db.kysely, link.group_id, [String(body.id)])).has(String(body.id)))
          throw errors.itemNotFound(String(body.id));
        const ctx = await this.copyContext(workspaceId, link, ws, from.portal_id, selfId);
        return takeGuestEdits(ctx, body as unknown as Parameters<typeof takeGuestEdits>[1]);
      }
      case "copyState":
      case "copyDefine":
      case "copyPage":
      case "copyEdits":
      case "copyEditsDone": {
        if (!guestToHost) throw errors.accessModeRefused("send to");
        const ctx = await this.copyContext(workspaceId, link, ws, from.portal_id, selfId);
        const b = body as never;
        if (envelope.op === "copyState") return copyState(ctx, ids);
        if (envelope.op === "copyDefine") return copyDefine(ctx, (body as { service: ServiceState }).service);
        if (envelope.op === "copyPage") return copyPage(ctx, b);
        if (envelope.op === "copyEdits") return copyEdits(ctx, b);
        return copyEditsDone(ctx, b);
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

  /** What the host's answers about layer data need: the workspace, its link and config, this portal's address. */
  private async copyContext(
    workspaceId: string,
    link: WorkspaceLinkTable,
    ws: WorkspaceTable,
    guest: string,
    selfId: string,
  ): Promise<PeerCopyContext> {
    const self = await findParticipant(this.db.kysely, ws.collaboration_id, selfId);
    if (!self) throw errors.workspaceNotFound(workspaceId);
    return { db: this.db, workspaceId, link, config: workspaceConfig(ws), guest, selfUrl: self.portal_url };
  }
}

/**
 * A participant's `rekey`: its call was verified with a key this portal holds for it, and the new
 * key proves itself by signing `rekeyProof`. The key it replaces stays accepted for an hour
 * (calls already signed with it), or never again when the participant revoked it.
 */
async function takeNewKey(
  trx: Queryable,
  collaborationId: string,
  from: ParticipantTable,
  body: { publicKey: string; proof: string; revokePrevious: boolean },
) {
  const now = Date.now();
  const retired = retiredKeysOf(from);
  const print = fingerprint(body.publicKey);
  if (body.publicKey === from.public_key) return; // delivered again: already taken
  if (retired.some((k) => k.fingerprint === print))
    throw errors.invalidParameter("envelope", "has a body whose publicKey is a key this participant retired");
  if (
    !verifyDocument(rekeyProof(collaborationId, from.portal_id, body.publicKey), body.proof, body.publicKey)
  )
    throw errors.invalidParameter("envelope", "has a body whose proof is not the new key's signature");
  const previous: RetiredKey = {
    publicKey: from.public_key,
    fingerprint: fingerprint(from.public_key),
    until: body.revokePrevious ? 0 : now + RETIRED_KEY_GRACE_MS,
    revoked: body.revokePrevious,
  };
  await setParticipantKeys(trx, collaborationId, from.portal_id, body.publicKey, [...retired, previous], now);
}

/** A participant's `revoke` of one of its retired keys, by fingerprint, signed with its current key. */
async function takeRevocation(
  trx: Queryable,
  collaborationId: string,
  from: ParticipantTable,
  print: string,
) {
  if (fingerprint(from.public_key) === print)
    throw errors.invalidParameter("envelope", "revokes the key it is signed with");
  const retired = retiredKeysOf(from);
  const known = retired.find((k) => k.fingerprint === print);
  const keys = known
    ? retired.map((k) => (k === known ? { ...k, until: 0, revoked: true } : k))
    : [...retired, { fingerprint: print, until: 0, revoked: true }];
  await setParticipantKeys(trx, collaborationId, from.portal_id, from.public_key, keys, Date.now());
}
