import { randomBytes } from "node:crypto";
import { sql } from "kysely";
import { hashToken } from "../../../src/auth/auth.service.js";
import type { Caller } from "../../../src/auth/caller.js";
import { BUILT_IN_PRIVILEGES } from "../../../src/auth/privileges.js";
import { insertToken } from "../../../src/auth/token.repository.js";
import { ADMIN, type TestPortal } from "../../helpers/portico.js";

/** The fixtures real ids come from; recreated when a request deleted one. */
export interface Fixtures {
  orgId: string;
  adminToken: string;
  memberToken: string;
  groupId?: string | undefined;
  inviteGroupId?: string | undefined;
  folderId?: string | undefined;
  folderTitle?: string | undefined;
  itemId?: string | undefined;
  itemOwner?: string | undefined;
  commentId?: string | undefined;
  roleId?: string | undefined;
  webhookId?: string | undefined;
  notificationId?: string | undefined;
  serviceName?: string | undefined;
  serviceItemId?: string | undefined;
  collaborationId?: string | undefined;
  workspaceId?: string | undefined;
  collabInvitationId?: string | undefined;
  invitationText?: string | undefined;
  groupInvitationId?: string | undefined;
  syncId?: string | undefined;
  /** Workspaces made last, in any collaboration. */
  workspaceIds: string[];
  /** Titles and names in use (groups, folders, roles, services, collaborations, workspaces). */
  takenNames: string[];
  /** The item and group changed last, whoever made them: often one a fuzzed request made. */
  latestItemId?: string | undefined;
  latestGroupId?: string | undefined;
}

/** A 1x1 transparent PNG. */
const PNG_1X1 = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
/** `portal.addUser` gives its users this password. */
export const MEMBER = { username: "fuzz_member", password: "pw-fuzz_member-secret" } as const;

/** Who repairs the callers: an administrator that exists only in this test. */
const system: Caller = {
  userId: "fuzz-system",
  username: "fuzz-system",
  role: "org_admin",
  roleId: null,
  privileges: new Set(BUILT_IN_PRIVILEGES.org_admin),
};

/**
 * The fixtures of one portal under fuzzing, and what keeps them there: callers and fixtures that
 * requests destroy are put back before the next route.
 */
export class FuzzFixtures {
  /** Numbers the names of recreated fixtures, so that a new one never clashes with an old one. */
  private counter = 0;
  private ensuredAtWrites = -1;

  private constructor(
    private readonly portal: TestPortal,
    readonly fx: Fixtures,
    /** `http://127.0.0.1:<port>` plus the context path: where the three API roots live. */
    readonly base: string,
    /** A loopback receiver the portal may deliver webhooks to (the fixture webhook's). */
    readonly receiverUrl: string,
    /** Transactions the portal has begun so far: every write is one. */
    private readonly writes: () => number,
  ) {}

  /** Adds the member caller and one of each fixture to a fresh portal. */
  static async create(portal: TestPortal, receiverUrl: string, writes: () => number): Promise<FuzzFixtures> {
    const base = portal.api.replace(/\/sharing\/rest$/, "");
    const member = await portal.addUser(MEMBER.username);
    const org = await portal.get("/portals/self", {}, portal.adminToken);
    const fx: Fixtures = {
      orgId: org.id,
      adminToken: portal.adminToken,
      memberToken: member.token,
      takenNames: [],
      workspaceIds: [],
    };
    const fixtures = new FuzzFixtures(portal, fx, base, receiverUrl, writes);
    await fixtures.ensure();
    return fixtures;
  }

  /** A call through the API as the administrator, to make a fixture as a client would. */
  private async api(path: string, params: Record<string, unknown>, token = this.fx.adminToken): Promise<any> {
    const url =
      path.startsWith("/rest") || path.startsWith("/portaladmin")
        ? `${this.base}${path}`
        : `${this.base}/sharing/rest${path}`;
    return this.portal.post(url, params, token);
  }

  private async exists(
    table: "groups" | "folders" | "items" | "roles" | "webhooks" | "comments",
    id?: string,
  ): Promise<boolean> {
    return (
      id !== undefined &&
      (await this.portal.portico.db.kysely
        .selectFrom(table)
        .select("id")
        .where("id", "=", id)
        .executeTakeFirst()) !== undefined
    );
  }

  /**
   * Signs a user in again without its password, which fuzzed requests may have changed: a token row
   * as `generateToken` writes it. (Sign-in also costs a scrypt verification, a few hundred ms.)
   */
  private async mintToken(userId: string): Promise<string> {
    const token = randomBytes(32).toString("base64url");
    const now = Date.now();
    await this.portal.portico.db.transaction((trx) =>
      insertToken(trx, {
        token_hash: hashToken(token),
        user_id: userId,
        created: now,
        expires: now + 3600_000,
        client: "requestip",
        referer: "127.0.0.1",
      }),
    );
    return token;
  }

  /**
   * Puts back what the fuzzing took away: both callers (enabled, with their role, signed in) and
   * one of each fixture. Callers are repaired through the services as a system administrator, since
   * no caller may be left able to do it; fixtures are recreated through the API.
   */
  async ensure(): Promise<void> {
    // Nothing was written since the fixtures were last seen complete: they still are.
    if (this.writes() === this.ensuredAtWrites) return;
    await this.repair();
    this.ensuredAtWrites = this.writes();
  }

  private async repair(): Promise<void> {
    const { portal, fx, base, receiverUrl } = this;
    const db = portal.portico.db.kysely;
    const users = portal.portico.services.users;
    for (const [who, role, password] of [
      [ADMIN.username, "org_admin", ADMIN.password],
      [MEMBER.username, "org_user", MEMBER.password],
    ] as const) {
      let row = await db.selectFrom("users").selectAll().where("username", "=", who).executeTakeFirst();
      if (!row) {
        await users.create(system, {
          username: who,
          password,
          firstName: "Fuzz",
          lastName: who,
          email: `${who}@example.com`,
          role,
        });
        row = await db.selectFrom("users").selectAll().where("username", "=", who).executeTakeFirstOrThrow();
      }
      if (row.disabled) await users.setDisabled(system, who, false);
      if (row.role !== role || row.role_id !== null) await users.updateRole(system, who, role);
      const key = who === ADMIN.username ? "adminToken" : "memberToken";
      const valid = await portal.portico.services.auth
        .authenticate(fx[key], { referer: undefined, ip: "127.0.0.1" })
        .then(
          () => true,
          () => false,
        );
      if (!valid) fx[key] = await this.mintToken(row.id);
    }

    const n = ++this.counter;
    if (!(await this.exists("groups", fx.groupId))) {
      const r = await this.api("/community/createGroup", { title: `Fuzz group ${n}`, access: "org" });
      fx.groupId = r.group?.id;
      if (fx.groupId) await this.api(`/community/groups/${fx.groupId}/addUsers`, { users: MEMBER.username });
    }
    if (!(await this.exists("folders", fx.folderId))) {
      const r = await this.api(`/content/users/${ADMIN.username}/createFolder`, {
        title: `fuzz folder ${n}`,
      });
      fx.folderId = r.folder?.id;
      fx.folderTitle = r.folder?.title;
    }
    if (!(await this.exists("items", fx.itemId))) {
      // Multipart, for a thumbnail besides the data.
      const form = new FormData();
      for (const [k, v] of Object.entries({
        f: "json",
        token: fx.adminToken,
        title: `Fuzz item ${n}`,
        type: "GeoJson",
        tags: "fuzz,Fixture",
        text: JSON.stringify({ type: "FeatureCollection", features: [] }),
      })) {
        form.append(k, v);
      }
      form.append("thumbnail", new Blob([PNG_1X1], { type: "image/png" }), "thumbnail.png");
      // The data as a file whose name is no plain ASCII: downloads must still answer.
      const name = ["données 😀.json", "ctl\u0001.json", 'quo"te\\.json', "plain.json"][n % 4] as string;
      form.append(
        "file",
        new Blob(['{"type":"FeatureCollection","features":[]}'], { type: "application/json" }),
        name,
      );
      const res = await fetch(`${base}/sharing/rest/content/users/${ADMIN.username}/addItem`, {
        method: "POST",
        body: form,
      });
      const r = (await res.json()) as any;
      fx.itemId = r.id;
      if (fx.itemId && fx.groupId) {
        await this.api(`/content/users/${ADMIN.username}/items/${fx.itemId}/share`, {
          groups: fx.groupId,
          org: true,
        });
      }
    }
    const item = fx.itemId
      ? await db.selectFrom("items").select("owner").where("id", "=", fx.itemId).executeTakeFirst()
      : undefined;
    fx.itemOwner = item?.owner;
    if (!(await this.exists("comments", fx.commentId)) && fx.itemId) {
      const comment = () =>
        this.api(`/content/items/${fx.itemId}/addComment`, { comment: `fuzz comment ${n}` });
      let r = await comment();
      if (r.error) {
        // A fuzzed organization update may have turned comments off.
        await this.api("/portals/self/update", { commentsEnabled: true });
        r = await comment();
      }
      fx.commentId = r.commentId;
    }
    if (!(await this.exists("roles", fx.roleId))) {
      fx.roleId = (await this.api("/portals/self/createRole", { name: `Fuzz role ${n}` })).id;
      if (fx.roleId) {
        await this.api(`/portals/self/roles/${fx.roleId}/setPrivileges`, {
          privileges: { privileges: ["portal:user:createItem", "portal:user:joinGroup"] },
        });
      }
    }
    if (!(await this.exists("webhooks", fx.webhookId))) {
      const r = await this.api("/portals/self/webhooks/createWebhook", {
        name: `fuzz hook ${n}`,
        url: receiverUrl,
        changes: "manualChanges",
        events: "/roles/delete",
      });
      fx.webhookId = r.webhook?.id;
      fx.notificationId = undefined;
    }
    if (fx.webhookId) {
      const notification = await db
        .selectFrom("notifications")
        .select("id")
        .where("webhook_id", "=", fx.webhookId)
        .executeTakeFirst();
      if (!notification) await this.api(`/portals/self/webhooks/${fx.webhookId}/ping`, {});
      fx.notificationId = (
        await db
          .selectFrom("notifications")
          .select("id")
          .where("webhook_id", "=", fx.webhookId)
          .executeTakeFirst()
      )?.id;
    }
    const service = fx.serviceItemId
      ? await db
          .selectFrom("feature_services")
          .select("name")
          .where("item_id", "=", fx.serviceItemId)
          .executeTakeFirst()
      : undefined;
    if (!service) {
      const r = await this.api(`/content/users/${ADMIN.username}/createService`, {
        createParameters: { name: `Fuzz_service_${n}` },
        outputType: "featureService",
      });
      fx.serviceItemId = r.itemId;
      fx.serviceName = r.name;
      if (fx.serviceName) {
        await this.api(`/rest/admin/services/${fx.serviceName}/FeatureServer/addToDefinition`, {
          addToDefinition: { layers: [{ name: "Points", geometryType: "esriGeometryPoint" }] },
        });
      }
    }
    const workspace = fx.workspaceId
      ? await db.selectFrom("workspaces").select("id").where("id", "=", fx.workspaceId).executeTakeFirst()
      : undefined;
    if (!workspace) {
      // A group of its own: a group is linked to one workspace at most.
      const group = (
        await this.api("/community/createGroup", { title: `Fuzz link group ${n}`, access: "org" })
      ).group?.id;
      const r = await this.api("/portals/self/createCollaboration", {
        name: `Fuzz collaboration ${n}`,
        workspaceName: "fuzz workspace",
        portalGroupId: group,
        accessMode: "sendAndReceive",
        hostContactEmailAddress: "host@example.com",
      });
      fx.collaborationId = r.collaboration?.id;
      fx.workspaceId = r.collaboration?.workspaceIds?.[0];
      fx.collabInvitationId = undefined;
    }
    const invitation = fx.collabInvitationId
      ? await db
          .selectFrom("collaboration_invitations")
          .select("status")
          .where("id", "=", fx.collabInvitationId)
          .executeTakeFirst()
      : undefined;
    if (invitation?.status !== "pending" && fx.collaborationId && fx.workspaceId) {
      const r = await this.api(`/portals/self/collaborations/${fx.collaborationId}/inviteParticipant`, {
        guestPortalUrl: `https://guest${n}.invalid/portal`,
        collaborationWorkspacesParticipantConfigJSON: [{ [fx.workspaceId]: "receive" }],
      });
      fx.collabInvitationId = r.invitation?.id;
      fx.invitationText = r.invitation ? JSON.stringify(r, null, 2) : undefined;
    }
    const groupInvitation = await db
      .selectFrom("group_invitations")
      .select("id")
      .where("username", "=", MEMBER.username)
      .executeTakeFirst();
    if (!groupInvitation) {
      if (!(await this.exists("groups", fx.inviteGroupId))) {
        fx.inviteGroupId = (
          await this.api("/community/createGroup", { title: `Fuzz invitations ${n}`, isInvitationOnly: true })
        ).group?.id;
      }
      if (fx.inviteGroupId) {
        await this.api(`/community/groups/${fx.inviteGroupId}/removeUsers`, { users: MEMBER.username });
        await this.api(`/community/groups/${fx.inviteGroupId}/invite`, { users: MEMBER.username });
      }
    }
    fx.groupInvitationId = (
      await db
        .selectFrom("group_invitations")
        .select("id")
        .where("username", "=", MEMBER.username)
        .executeTakeFirst()
    )?.id;
    fx.syncId = (await db.selectFrom("sync_jobs").select("id").executeTakeFirst())?.id;
    const newest = async (
      table: "groups" | "folders" | "roles" | "collaborations" | "workspaces",
      column: "title" | "name",
    ) =>
      (
        await sql<{
          v: string;
        }>`SELECT ${sql.ref(column)} AS v FROM ${sql.table(table)} ORDER BY created DESC LIMIT 2`.execute(db)
      ).rows.map((r) => r.v);
    fx.takenNames = [
      ...(await newest("groups", "title")),
      ...(await newest("folders", "title")),
      ...(await newest("roles", "name")),
      ...(await newest("collaborations", "name")),
      ...(await newest("workspaces", "name")),
      ...(fx.serviceName ? [fx.serviceName] : []),
    ];
    fx.workspaceIds = (
      await db.selectFrom("workspaces").select("id").orderBy("created", "desc").limit(3).execute()
    ).map((w) => w.id);
    fx.latestItemId = (
      await db.selectFrom("items").select("id").orderBy("modified", "desc").executeTakeFirst()
    )?.id;
    fx.latestGroupId = (
      await db.selectFrom("groups").select("id").orderBy("modified", "desc").executeTakeFirst()
    )?.id;
  }
}
