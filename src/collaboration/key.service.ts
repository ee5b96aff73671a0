import { type Caller, requirePrivilege } from "../auth/caller.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import { newId } from "../ids.js";
import type { PortalService } from "../portal/portal.service.js";
import { COLLABORATION_PRIVILEGE, type Notifier } from "./collaboration-types.js";
import type { PortalKeys } from "./peer.js";
import { fingerprint, generateKeyPair, signDocument } from "./signing.js";

/** Rotating or revoking the key that speaks for the portal is a security decision as well. */
const KEY_PRIVILEGE = "portal:admin:manageSecurity" as const;

/** What a `rekey` notice's new key signs: proof that the sender holds it, for this collaboration. */
export function rekeyProof(collaborationId: string, portalId: string, publicKey: string) {
  return { collaborationId, portalId, publicKey, purpose: "rekey" };
}

/**
 * This portal's signing key (`portals/self/collaborationKey`): shown, rotated, and a retired key
 * revoked. A rotation makes a new pair current at once and tells every other participant of every
 * collaboration (`rekey`, through the notice outbox), signed with the old key, which the
 * participant trusts, and carrying the new key's own signature as proof that this portal holds it.
 * A revocation tells them (`revoke`, signed with the current key) the revoked key's fingerprint.
 */
export class KeyService {
  constructor(
    private readonly db: Db,
    private readonly portal: PortalService,
    private readonly keys: PortalKeys,
    private readonly notifier: Notifier,
  ) {}

  async show(caller: Caller | null) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    const current = await this.keys.get();
    const rows = await this.db.kysely
      .selectFrom("portal_keys")
      .select(["id", "public_key", "created", "retired", "revoked"])
      .orderBy("created")
      .execute();
    const now = rows.find((r) => r.id === "portal");
    return {
      keyFingerprint: fingerprint(current.publicKey),
      publicKey: current.publicKey,
      created: Number(now?.created ?? 0),
      retiredKeys: rows
        .filter((r) => r.id !== "portal")
        .map((r) => ({
          keyFingerprint: fingerprint(r.public_key),
          created: Number(r.created),
          retired: Number(r.retired),
          revoked: Number(r.revoked) > 0,
        })),
    };
  }

  /** Makes a new key current and queues a `rekey` to every other participant, in one transaction. */
  async rotate(caller: Caller | null, revokePrevious: boolean) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    requirePrivilege(caller, KEY_PRIVILEGE);
    await this.keys.get(); // made on first use
    const selfId = (await this.portal.get()).id;
    const next = generateKeyPair();
    const now = Date.now();
    const { told, old } = await this.db.transaction(async (trx) => {
      // Read in the transaction, not from the cache: another node may have rotated it already.
      const row = await trx
        .selectFrom("portal_keys")
        .selectAll()
        .where("id", "=", "portal")
        .executeTakeFirstOrThrow();
      await trx
        .insertInto("portal_keys")
        .values({
          id: `retired-${newId()}`,
          public_key: row.public_key,
          private_key: row.private_key,
          created: row.created,
          retired: now,
          revoked: revokePrevious ? now : 0,
        })
        .execute();
      await trx
        .updateTable("portal_keys")
        .set({
          public_key: next.publicKey,
          private_key: next.privateKey,
          created: now,
          retired: 0,
          revoked: 0,
        })
        .where("id", "=", "portal")
        .execute();
      // What this portal lists as its own key in each collaboration.
      await trx
        .updateTable("collaboration_participants")
        .set({ public_key: next.publicKey, modified: now })
        .where("portal_id", "=", selfId)
        .execute();
      const others = await trx
        .selectFrom("collaboration_participants")
        .selectAll()
        .where("portal_id", "!=", selfId)
        .execute();
      for (const p of others) {
        const proof = signDocument(rekeyProof(p.collaboration_id, selfId, next.publicKey), next.privateKey);
        await this.notifier.tell(
          trx,
          p,
          p.collaboration_id,
          "rekey",
          { publicKey: next.publicKey, proof, revokePrevious },
          { signWith: row.public_key },
        );
      }
      return { told: others.length, old: row.public_key };
    });
    this.keys.forget();
    return {
      keyFingerprint: fingerprint(next.publicKey),
      previousKeyFingerprint: fingerprint(old),
      previousKeyRevoked: revokePrevious,
      participantsTold: told,
    };
  }

  /** Revokes a retired key of this portal and queues a `revoke` to every other participant. */
  async revoke(caller: Caller | null, keyFingerprint: string) {
    requirePrivilege(caller, COLLABORATION_PRIVILEGE);
    requirePrivilege(caller, KEY_PRIVILEGE);
    const selfId = (await this.portal.get()).id;
    const now = Date.now();
    const told = await this.db.transaction(async (trx) => {
      const rows = await trx.selectFrom("portal_keys").selectAll().execute();
      const row = rows.find((r) => fingerprint(r.public_key) === keyFingerprint);
      if (!row) throw errors.invalidParameter("keyFingerprint", "names no key of this portal");
      if (row.id === "portal")
        throw errors.invalidParameter(
          "keyFingerprint",
          "names the current key; rotate it with revokePrevious=true instead",
        );
      if (Number(row.revoked) === 0)
        await trx.updateTable("portal_keys").set({ revoked: now }).where("id", "=", row.id).execute();
      const others = await trx
        .selectFrom("collaboration_participants")
        .selectAll()
        .where("portal_id", "!=", selfId)
        .execute();
      for (const p of others)
        await this.notifier.tell(trx, p, p.collaboration_id, "revoke", { fingerprint: keyFingerprint });
      return others.length;
    });
    return { keyFingerprint, participantsTold: told };
  }
}
