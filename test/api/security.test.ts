import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ALL_PRIVILEGES,
  baseRoleOf,
  PUBLISHER_PRIVILEGES,
  USER_PRIVILEGES,
} from "../../src/auth/privileges.js";
import type { RouteDef } from "../../src/http/pipeline.js";
import { allRoutes } from "../../src/http/routes/index.js";
import { newId } from "../../src/ids.js";
import { collaborate, type Linked, PEER_ENV, self } from "../helpers/collaboration.js";
import { ADMIN, form, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";

/**
 * The security matrix: every operation, called by an anonymous caller, a member (org_user), a
 * publisher (org_publisher) and an administrator (org_admin), gets exactly the answer its privilege
 * allows; a denied call writes nothing; tokens of disabled users fail everywhere.
 *
 * The expectations below are written from the specification (`interface.md` §5, `wire.md` §2-§8),
 * the README and what ArcGIS does, never read from the routes' `privilege` at run time: a table
 * derived from the code under test could not fail. Every route of `allRoutes` must have an entry.
 */

// ------------------------------------------------------------------------------------------ table

const CALLERS = ["anonymous", "member", "publisher", "admin"] as const;
type CallerClass = (typeof CALLERS)[number];

/** A success (no `error`, and `success` not false), or exactly this error. */
type Outcome = "ok" | { code: number; messageCode: string };
type Expectation = Record<CallerClass, Outcome>;

/**
 * What each caller acts on. `org`: the organization, or a resource nobody owns; `own`: the caller's
 * own account or resource (an anonymous caller: another member's); `other`: a resource of another
 * member that the caller can see (org-shared) but does not own or manage; `private`: another
 * member's private resource; `manager`: a group of another member in which the caller is a group
 * manager; `ownItem`: somebody else's comment on the caller's own item; `website`, `security`,
 * `utility`: the organization settings of that privilege group; `host`, `guest`: a collaboration
 * in which this portal is the host, or a guest.
 */
type Target =
  | "org"
  | "own"
  | "other"
  | "private"
  | "manager"
  | "ownItem"
  | "website"
  | "security"
  | "utility"
  | "host"
  | "guest";

interface Case {
  on: Target;
  expect: Expectation;
}

const OK = "ok" as const;
/** `wire.md` §2: an anonymous caller of an operation that needs a token. */
const E499 = { code: 499, messageCode: "GWM_0002" };
/** `wire.md` §2: a signed-in caller without the privilege. */
const E403 = { code: 403, messageCode: "GWM_0004" };
/**
 * Reads of what the caller may not see answer as if it did not exist, so ids and names cannot be
 * probed (a missing and a hidden item give the same answer; test/api/existence.test.ts compares them).
 * Anonymous callers are asked for a token (E499) for anything they may not see, existing or not,
 * so that clients offer to sign in; signed-in callers get these "does not exist or is
 * inaccessible" answers.
 */
const USER_HIDDEN = { code: 400, messageCode: "COM_0003" };
const ITEM_HIDDEN = { code: 400, messageCode: "CONT_0001" };
const GROUP_HIDDEN = { code: 400, messageCode: "COM_0036" };
const SERVICE_HIDDEN = { code: 400, messageCode: "SVC_0002" };
/** A peer call is authenticated by its signature, never by a token: any token is no help. */
const PEER_REFUSED = { code: 498, messageCode: "COLLAB_0498" };

const row = (anonymous: Outcome, member: Outcome, publisher: Outcome, admin: Outcome): Expectation => ({
  anonymous,
  member,
  publisher,
  admin,
});
const EVERYONE = row(OK, OK, OK, OK);
const SIGNED_IN = row(E499, OK, OK, OK);
const PUBLISHERS = row(E499, E403, OK, OK);
const ADMINS = row(E499, E403, E403, OK);
/** Only the user whose account it is; administrators neither. */
const NOBODY_ELSE = row(E499, E403, E403, E403);
const c = (on: Target, expect: Expectation): Case => ({ on, expect });

/** Edits of a hosted layer whose service allows queries only. */
const FEATURE_EDITS = [
  c("own", row(E499, OK, OK, OK)),
  c("other", row(E499, E403, E403, OK)),
  c("private", row(E499, { code: 400, messageCode: "SVC_0002" }, { code: 400, messageCode: "SVC_0002" }, OK)),
];
/** Owner or administrator: the owner may, another member may not. */
const OWNER_OR_ADMIN = [c("own", SIGNED_IN), c("other", ADMINS)];
/**
 * The same for changes of an item: another member who sees the item is refused (403); one who does
 * not even see it (`private`) hears that it does not exist, as for a missing item (issue 12: this
 * was 403, which told members that a private item of that id existed).
 */
const ITEM_OWNER_OR_ADMIN = [...OWNER_OR_ADMIN, c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK))];
/** Group owner, group manager or administrator (update, invite, addUsers, removeUsers). */
const GROUP_MANAGERS = [c("own", SIGNED_IN), c("manager", SIGNED_IN), c("other", ADMINS)];
/** Group owner or administrator; group managers may not (delete, protect, updateUsers). */
const GROUP_OWNER = [c("own", SIGNED_IN), c("manager", ADMINS), c("other", ADMINS)];
/** Every collaboration operation needs portal:admin:manageCollaborations (README). */
const HOST = [c("host", ADMINS)];
const GUEST = [c("guest", ADMINS)];
/**
 * interface.md §5 names the side: an administrator on the other side is refused with the reason
 * (README: `COLLAB_0002`, `COLLAB_0003` for sync, `COLLAB_0004` for schedules), writing nothing.
 */
const wrongSide = (messageCode: string) => row(E499, E403, E403, { code: 400, messageCode });

const EXPECTED: Record<string, readonly Case[]> = {
  // Sign-in reads no token (`wire.md` §3).
  root: [c("org", EVERYONE)],
  info: [c("org", EVERYONE)],
  generateToken: [c("own", EVERYONE)],
  // Possession of a token is what lets one end it.
  "oauth2.revokeToken": [c("own", EVERYONE)],

  // `portals/self` answers everyone; anonymous callers see less (`wire.md` §3, §5).
  "portals.get": [c("org", EVERYONE)],
  // interface.md §5: organization update and updateUserRole are for administrators.
  "portals.update": [c("website", ADMINS), c("security", ADMINS), c("utility", ADMINS)],
  // Nobody promotes themselves: `own` asks for org_admin.
  "portals.updateUserRole": [c("own", ADMINS), c("other", ADMINS)],
  "portals.users": [c("org", ADMINS)],
  // Members read the password rules (they choose passwords under them); changing them takes the
  // security administration privilege, as every security setting does (README "Security").
  "portals.securityPolicy": [c("org", SIGNED_IN)],
  "portals.securityPolicy.update": [c("security", ADMINS)],
  "portals.securityPolicy.reset": [c("security", ADMINS)],

  // Roles are administered (`wire.md` §4; README: roles need manageRoles); ArcGIS lists them to
  // administrators only.
  "roles.list": [c("org", ADMINS)],
  "roles.create": [c("org", ADMINS)],
  "roles.get": [c("org", ADMINS)],
  "roles.update": [c("org", ADMINS)],
  "roles.delete": [c("org", ADMINS)],
  "roles.privileges": [c("org", ADMINS)],
  "roles.setPrivileges": [c("org", ADMINS)],

  "community.self": [c("own", SIGNED_IN)],
  // A private organization shows no user to anonymous callers; a private profile only to its
  // owner and administrators. Anonymous callers are asked for a token (was USER_HIDDEN, as for
  // signed-in callers: issue 12 makes anonymous answers E499 for items, groups, users and services
  // alike, missing or hidden).
  "users.get": [
    c("own", row(E499, OK, OK, OK)),
    c("other", row(E499, OK, OK, OK)),
    c("private", row(E499, USER_HIDDEN, USER_HIDDEN, OK)),
  ],
  // Self or administrator (ArcGIS: a user updates their own profile; admins anyone's).
  "users.update": OWNER_OR_ADMIN,
  "users.delete": [c("other", ADMINS)],
  "users.disable": [c("other", ADMINS)],
  "users.enable": [c("other", ADMINS)],
  "portaladmin.createUser": [c("org", ADMINS)],

  // Items are read as shared (`wire.md` §6); a private organization answers anonymous callers
  // with "token required", so clients offer to sign in.
  "items.get": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.data": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.thumbnail": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  // ArcGIS: user content "is available only to the user and to administrators".
  "content.user": OWNER_OR_ADMIN,
  // Content is created in one's own account only: the caller becomes the owner (ArcGIS addItem,
  // createFolder); portico lets no one, administrators included, create content for someone else.
  "items.add": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "items.update": ITEM_OWNER_OR_ADMIN,
  "items.delete": ITEM_OWNER_OR_ADMIN,
  "items.protect": ITEM_OWNER_OR_ADMIN,
  "items.unprotect": ITEM_OWNER_OR_ADMIN,
  "items.move": ITEM_OWNER_OR_ADMIN,
  // ArcGIS reassign: "allows the administrator of an organization to reassign a member's item".
  "items.reassign": [c("own", ADMINS), c("other", ADMINS)],
  "items.share": ITEM_OWNER_OR_ADMIN,
  "items.unshare": ITEM_OWNER_OR_ADMIN,
  "content.shareItems": OWNER_OR_ADMIN,
  "content.unshareItems": OWNER_OR_ADMIN,
  "folders.create": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "folders.delete": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  // Comments: anyone signed in who sees the item; ArcGIS updateComment is for the comment's owner
  // only; deleteComment for its owner, the item's owner or an administrator.
  "comments.add": [c("other", SIGNED_IN)],
  "comments.list": [c("other", SIGNED_IN)],
  "comments.update": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "comments.delete": [c("own", SIGNED_IN), c("ownItem", SIGNED_IN), c("other", ADMINS)],

  // Searches narrow what they return; they refuse no one (README).
  "search.items": [c("org", EVERYONE)],
  "search.groups": [c("org", EVERYONE)],

  // Every built-in role may create groups (portal:user:createGroup).
  "groups.create": [c("org", SIGNED_IN)],
  // Anonymous callers: E499 (was GROUP_HIDDEN; see users.get).
  "groups.get": [
    c("own", row(E499, OK, OK, OK)),
    c("other", row(E499, OK, OK, OK)),
    c("private", row(E499, GROUP_HIDDEN, GROUP_HIDDEN, OK)),
  ],
  "groups.update": GROUP_MANAGERS,
  "groups.delete": GROUP_OWNER,
  "groups.protect": GROUP_OWNER,
  "groups.unprotect": GROUP_OWNER,
  "groups.invite": GROUP_MANAGERS,
  "groups.addUsers": GROUP_MANAGERS,
  "groups.removeUsers": GROUP_MANAGERS,
  "groups.updateUsers": GROUP_OWNER,
  // ArcGIS group users: members of the group and administrators.
  "groups.users": [c("own", SIGNED_IN), c("manager", SIGNED_IN), c("other", ADMINS)],
  // Anonymous callers: E499 (was GROUP_HIDDEN; see users.get).
  "groups.content": [c("own", SIGNED_IN), c("other", SIGNED_IN)],
  // A user's invitations: theirs, or an administrator's; only the invited user answers one.
  "users.invitations": OWNER_OR_ADMIN,
  "users.invitations.accept": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "users.invitations.decline": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],

  // createService publishes: portal:publisher:publishFeatures, in one's own account.
  "content.createService": [c("own", PUBLISHERS), c("other", NOBODY_ELSE)],
  "server.info": [c("org", EVERYONE)],
  // Hosted services are read as their items are shared; changed by the owner or administrators.
  "featureServer.service": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.layer": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.addToDefinition": OWNER_OR_ADMIN,
  "featureServer.updateDefinition": OWNER_OR_ADMIN,
  "featureServer.deleteFromDefinition": OWNER_OR_ADMIN,
  "featureServer.layerAddToDefinition": OWNER_OR_ADMIN,
  "featureServer.layerUpdateDefinition": OWNER_OR_ADMIN,
  "featureServer.layerDeleteFromDefinition": OWNER_OR_ADMIN,
  "featureServer.layers": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  // Layer data is read as the service's item is shared (the services here allow Query)...
  "featureServer.query": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.serviceQuery": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.feature": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  // ...and edited by the owner and administrators always, others only where the capabilities
  // allow editing (not here): members who see the service are refused, others hear it is missing.
  "featureServer.applyEdits": FEATURE_EDITS,
  "featureServer.addFeatures": FEATURE_EDITS,
  "featureServer.updateFeatures": FEATURE_EDITS,
  "featureServer.deleteFeatures": FEATURE_EDITS,
  "featureServer.serviceApplyEdits": FEATURE_EDITS,
  // Attachments are read as the layer is queried, and changed as its features are updated.
  "featureServer.attachments": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.attachment": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, SERVICE_HIDDEN, SERVICE_HIDDEN, OK)),
  ],
  "featureServer.addAttachment": FEATURE_EDITS,
  "featureServer.updateAttachment": FEATURE_EDITS,
  "featureServer.deleteAttachments": FEATURE_EDITS,

  // interface.md §4.2, §5: webhooks are for portal administrators (portal:admin:manageWebhooks).
  "webhooks.list": [c("org", ADMINS)],
  "webhooks.create": [c("org", ADMINS)],
  "webhooks.settings": [c("org", ADMINS)],
  "webhooks.settings.update": [c("org", ADMINS)],
  "webhooks.get": [c("org", ADMINS)],
  "webhooks.update": [c("org", ADMINS)],
  "webhooks.delete": [c("org", ADMINS)],
  "webhooks.activate": [c("org", ADMINS)],
  "webhooks.deactivate": [c("org", ADMINS)],
  "webhooks.notificationStatus": [c("org", ADMINS)],
  "webhooks.redeliver": [c("org", ADMINS)],
  "webhooks.ping": [c("org", ADMINS)],

  // interface.md §5: administrators of the host, or of the guest, depending on the operation.
  "collaborations.create": HOST,
  "collaborations.list": HOST,
  "collaborations.validateCollaborationInvitation": GUEST,
  "collaborations.acceptCollaborationInvitation": GUEST,
  "collaborations.get": HOST,
  "collaborations.updateInfo": HOST,
  "collaborations.delete": HOST,
  "collaborations.removeParticipation": [c("guest", ADMINS), c("host", wrongSide("COLLAB_0002"))],
  "collaborations.inviteParticipant": HOST,
  "collaborations.invitations": HOST,
  "collaborations.invitations.invalidate": HOST,
  "collaborations.invitations.refresh": HOST,
  "collaborations.exportInvitationResponse": GUEST,
  "collaborations.validateInvitationResponse": HOST,
  "collaborations.importInvitationResponse": HOST,
  "collaborations.participants": HOST,
  "collaborations.participant": HOST,
  "collaborations.participant.updateAccessModes": HOST,
  "collaborations.participant.updateItemDeletePolicy": HOST,
  "collaborations.participant.remove": HOST,
  "collaborations.addWorkspace": [c("host", ADMINS), c("guest", wrongSide("COLLAB_0002"))],
  "collaborations.workspaces": HOST,
  "collaborations.workspace": HOST,
  "collaborations.workspace.updateInfo": HOST,
  "collaborations.workspace.updatePortalGroupLink": [c("host", ADMINS), c("guest", ADMINS)],
  "collaborations.workspace.removePortalGroupLink": HOST,
  "collaborations.workspace.delete": [c("host", ADMINS), c("guest", wrongSide("COLLAB_0002"))],
  "collaborations.workspace.sync": [c("guest", ADMINS), c("host", wrongSide("COLLAB_0003"))],
  "collaborations.workspace.syncStatus": GUEST,
  "collaborations.workspace.syncStatus.one": GUEST,
  "collaborations.workspace.schedule": GUEST,
  "collaborations.workspace.schedule.update": GUEST,
  "collaborations.workspace.schedule.delete": [c("guest", ADMINS), c("host", wrongSide("COLLAB_0004"))],
  "collaborations.workspace.schedule.pause": GUEST,
  "collaborations.workspace.schedule.resume": GUEST,
  "collaborations.peer": [c("org", row(PEER_REFUSED, PEER_REFUSED, PEER_REFUSED, PEER_REFUSED))],
};

/** Routes that read no credentials: sign-in itself, static answers, and signed peer calls. */
const NO_CREDENTIALS = new Set([
  "root",
  "info",
  "generateToken",
  "oauth2.revokeToken",
  "server.info",
  "collaborations.peer",
]);

// --------------------------------------------------------------------------------------- fixtures

/** A 1x1 transparent PNG. */
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
  "base64",
);

interface Account {
  username: string;
  password: string;
  token: string;
}

/** The three signed-in caller classes, another member who owns what `other` targets, and helpers. */
const ACCOUNTS = {
  member: "org_user",
  publisher: "org_publisher",
  admin: "org_admin",
  owner: "org_publisher",
  invitee: "org_user",
  hermit: "org_user",
} as const;
type AccountName = keyof typeof ACCOUNTS;

let portal: TestPortal;
let peer: TestPortal;
let receiver: Receiver;
const acct = {} as Record<AccountName, Account>;
let bootstrap: Account;

/** Items with data and a thumbnail: each account's own (private), and one of `owner` shared with the org. */
const ownItem = {} as Record<AccountName, string>;
let orgItem: string;
/** Each account's own org-access group; `owner`'s private group; a group `owner` lets the callers manage. */
const ownGroup = {} as Record<AccountName, string>;
let privateGroup: string;
let managedGroup: string;
/** Hosted feature services (by name), each with layer 0. */
const ownService = {} as Record<"member" | "publisher" | "admin", string>;
let orgService: string;
let privateService: string;
let customRole: string;
let hook: string;
let mainId: string;
let peerId: string;
/** This portal hosts `hosted` (the peer is its guest) and is a guest in `guestIn`. */
let hosted: Linked;
let guestIn: Linked;
let pending: { collaborationId: string; response: unknown };
let peerInvitation: unknown;
let syncId: string;

let counter = 0;
const uid = () => `${Date.now().toString(36)}${(counter++).toString(36)}`;
const FAR = Date.now() + 365 * 24 * 3600_000;

async function must(promise: Promise<any>, what: string): Promise<any> {
  const r = await promise;
  if (r?.error) throw new Error(`${what}: ${JSON.stringify(r.error)}`);
  return r;
}

const asAdmin = (path: string, params: Record<string, unknown> = {}) =>
  must(portal.post(path, params, bootstrap.token), path);
const as = (who: Account, path: string, params: Record<string, unknown> = {}) =>
  must(portal.post(path, params, who.token), `${path} as ${who.username}`);

/** An item of `owner`, private, with JSON data and a thumbnail, sent as clients upload files. */
async function newItem(owner: Account, access: "private" | "org" = "private"): Promise<string> {
  const body = new FormData();
  body.append("f", "json");
  body.append("token", owner.token);
  body.append("title", `Item ${uid()}`);
  body.append("type", "GeoJson");
  body.append("text", JSON.stringify({ type: "FeatureCollection", features: [] }));
  body.append("thumbnail", new Blob([PNG]), "thumb.png");
  const res = await fetch(`${portal.api}/content/users/${owner.username}/addItem`, { method: "POST", body });
  const r = (await res.json()) as any;
  if (!r.success) throw new Error(`addItem: ${JSON.stringify(r)}`);
  if (access === "org")
    await as(owner, `/content/users/${owner.username}/items/${r.id}/share`, { org: true });
  return r.id as string;
}

async function newGroup(owner: Account, access: "private" | "org" = "org"): Promise<string> {
  const r = await as(owner, "/community/createGroup", { title: `Group ${uid()}`, access });
  return r.group.id as string;
}

async function newFolder(owner: Account): Promise<string> {
  const r = await as(owner, `/content/users/${owner.username}/createFolder`, { title: `Folder ${uid()}` });
  return r.folder.id as string;
}

async function newComment(author: Account, itemId: string): Promise<string> {
  const r = await as(author, `/content/items/${itemId}/addComment`, { comment: `note ${uid()}` });
  return r.commentId as string;
}

/**
 * A throwaway account to act on (delete, disable, change the role of). It never signs in, so it is
 * written straight to the store with a copy of another account's password hash: creating it through
 * the API costs a 64 MiB scrypt, and the matrix needs a dozen of them.
 */
async function newUser(): Promise<string> {
  const db = portal.portico.db.kysely;
  const template = await db
    .selectFrom("users")
    .selectAll()
    .where("username", "=", acct.invitee.username)
    .executeTakeFirstOrThrow();
  const username = `tmp_${uid()}`;
  await db
    .insertInto("users")
    .values({
      ...template,
      id: newId(),
      username,
      username_key: username.toLowerCase(),
      email: `${username}@example.com`,
      created: Date.now(),
      modified: Date.now(),
    })
    .execute();
  return username;
}

const adminPath = (name: string, op: string) =>
  `${portal.portico.address}/rest/admin/services/${name}/FeatureServer/${op}`;

async function addLayer(name: string): Promise<number> {
  const r = await asAdmin(adminPath(name, "addToDefinition"), {
    addToDefinition: {
      layers: [{ name: `Layer ${uid()}`, geometryType: "esriGeometryPoint", hasAttachments: true }],
    },
  });
  return r.layers[0].id as number;
}

/** A file to attach, and the bytes a download of it answers. */
const ATTACHMENT = { name: "note.txt", type: "text/plain", bytes: Buffer.from("attached note") };

/** A new feature of layer 0 of service `name` with one attachment, added by the administrator. */
async function featureWithAttachment(name: string): Promise<{ objectId: string; attachmentId: string }> {
  const layer = `${portal.portico.address}/rest/services/${name}/FeatureServer/0`;
  const added = await asAdmin(`${layer}/addFeatures`, {
    features: [{ attributes: {}, geometry: { x: 1, y: 2 } }],
  });
  const objectId = String(added.addResults[0].objectId);
  const body = new FormData();
  body.append("f", "json");
  body.append("token", bootstrap.token);
  body.append("attachment", new Blob([ATTACHMENT.bytes], { type: ATTACHMENT.type }), ATTACHMENT.name);
  const r = (await (
    await fetch(`${layer}/${objectId}/addAttachment`, { method: "POST", body })
  ).json()) as any;
  if (!r.addAttachmentResult?.success) throw new Error(`addAttachment: ${JSON.stringify(r)}`);
  return { objectId, attachmentId: String(r.addAttachmentResult.objectId) };
}

async function newService(owner: Account, access: "private" | "org" = "private"): Promise<string> {
  const name = `svc_${uid()}`;
  const r = await as(owner, `/content/users/${owner.username}/createService`, {
    createParameters: { name },
    outputType: "featureService",
  });
  await addLayer(name);
  if (access === "org") {
    await as(owner, `/content/users/${owner.username}/items/${r.itemId}/share`, { org: true });
  }
  return name;
}

async function newWebhook(): Promise<string> {
  const r = await asAdmin("/portals/self/webhooks/createWebhook", {
    name: `hook ${uid()}`,
    url: receiver.url,
    // A subscription nothing in this test triggers: deliveries would be noise.
    changes: "manualChanges",
    events: "/users/nobody_listens",
  });
  return r.webhook.id as string;
}

async function newRole(): Promise<string> {
  const r = await asAdmin("/portals/self/createRole", { name: `Role ${uid()}`, description: "throwaway" });
  return r.id as string;
}

const collab = (cid: string, op = "") => `${self}/collaborations/${cid}${op ? `/${op}` : ""}`;
const ws = (linked: Linked, op = "") =>
  collab(linked.collaborationId, `workspaces/${linked.workspaceId}${op ? `/${op}` : ""}`);

/** A collaboration hosted by this portal, with one workspace and no guest. */
async function newHostedCollaboration(): Promise<{ collaborationId: string; workspaceId: string }> {
  const r = await asAdmin(`${self}/createCollaboration`, { name: `collab ${uid()}`, workspaceName: "ws" });
  return { collaborationId: r.collaboration.id, workspaceId: r.collaboration.workspaceIds[0] };
}

/** An invitation of this portal into a new collaboration of the peer. */
async function invitationFromPeer(): Promise<{ collaborationId: string; invitation: unknown }> {
  const created = await must(
    peer.post(
      `${self}/createCollaboration`,
      { name: `peer collab ${uid()}`, workspaceName: "ws" },
      peer.adminToken,
    ),
    "peer createCollaboration",
  );
  const cid = created.collaboration.id as string;
  const invitation = await must(
    peer.post(
      collab(cid, "inviteParticipant"),
      {
        guestPortalUrl: portal.portico.address,
        collaborationWorkspacesParticipantConfigJSON: [
          { [created.collaboration.workspaceIds[0]]: "sendAndReceive" },
        ],
      },
      peer.adminToken,
    ),
    "peer inviteParticipant",
  );
  return { collaborationId: cid, invitation };
}

/** A collaboration hosted here that the peer accepted, with its response not imported yet. */
async function pendingResponse(): Promise<{ collaborationId: string; response: unknown }> {
  const { collaborationId, workspaceId } = await newHostedCollaboration();
  const invitation = await asAdmin(collab(collaborationId, "inviteParticipant"), {
    guestPortalUrl: peer.portico.address,
    collaborationWorkspacesParticipantConfigJSON: [{ [workspaceId]: "sendAndReceive" }],
  });
  await must(
    peer.post(
      `${self}/acceptCollaborationInvitation`,
      { invitationJSON: JSON.stringify(invitation) },
      peer.adminToken,
    ),
    "peer accept",
  );
  const response = await must(
    peer.get(collab(collaborationId, "exportInvitationResponse"), {}, peer.adminToken),
    "peer exportInvitationResponse",
  );
  return { collaborationId, response };
}

async function ensureSchedule(state: "active" | "paused") {
  await asAdmin(ws(guestIn, "schedule/update"), { startTime: FAR, interval: 24, repeatCount: -1 });
  await asAdmin(ws(guestIn, state === "active" ? "schedule/resume" : "schedule/pause"));
}

async function invitationOf(username: string, groupId: string): Promise<string> {
  const r = await asAdmin(`/community/users/${username}/invitations`);
  const found = (r.userInvitations as any[]).find((i) => i.targetId === groupId);
  if (!found) throw new Error(`no invitation of ${username} to ${groupId}`);
  return found.id as string;
}

// ------------------------------------------------------------------------------------------ calls

/** One request of the matrix: the values of the route's `:params`, its parameters, and checks. */
interface Call {
  path?: Record<string, string>;
  params?: Record<string, unknown>;
  /** Which of the route's paths (with or without a folder) to call. */
  variant?: number;
  /** Files to send (as multipart/form-data, after the parameters). */
  files?: Record<string, { name: string; type: string; bytes: Buffer }>;
  /** Checks of a successful answer beyond "no error". */
  check?: (r: any) => void | Promise<void>;
}

interface CallContext {
  who: CallerClass;
  on: Target;
  /** The caller's account; for an anonymous caller, `owner`'s. */
  me: Account;
}

type Setup = (ctx: CallContext) => Promise<Call>;

/** The account whose resource the call targets: the caller's own, or `owner`'s. */
const holder = ({ on, me }: CallContext): Account => (on === "own" ? me : acct.owner);

function unexpected(on: Target): never {
  throw new Error(`no set-up for target '${on}'`);
}

/**
 * A fresh item of the target's owner: shared with the organization for `other` (an item the caller
 * sees but does not own), private otherwise.
 */
const freshItem = (ctx: CallContext, owner: Account) =>
  newItem(owner, ctx.on === "other" ? "org" : "private");

/** A fresh item of the target's owner (see `freshItem`), and the parameters of the call on it. */
const onFreshItem =
  (params: (owner: Account) => Promise<Record<string, unknown>> = async () => ({})): Setup =>
  async (ctx) => {
    const owner = holder(ctx);
    const id = await freshItem(ctx, owner);
    return { path: { username: owner.username, itemId: id }, params: await params(owner) };
  };

/** A fresh group of the target's owner; for `manager`, with the caller made a group manager. */
async function targetGroup(ctx: CallContext): Promise<{ id: string; owner: Account }> {
  const owner = holder(ctx);
  const id = await newGroup(owner);
  if (ctx.on === "manager" && ctx.who !== "anonymous") {
    await as(owner, `/community/groups/${id}/addUsers`, { admins: ctx.me.username });
  }
  return { id, owner };
}

const readItem =
  (extra: Record<string, string> = {}): Setup =>
  async (ctx) => {
    const id =
      ctx.on === "own"
        ? ownItem[ctx.who === "anonymous" ? "owner" : ctx.who]
        : ctx.on === "other"
          ? orgItem
          : ownItem.owner;
    return { path: { itemId: id, ...extra } };
  };

const readService =
  (extra: Record<string, string> = {}): Setup =>
  async (ctx) => {
    const name =
      ctx.on === "own"
        ? ctx.who === "anonymous"
          ? orgService
          : ownService[ctx.who]
        : ctx.on === "other"
          ? orgService
          : privateService;
    return { path: { name, ...extra } };
  };

/** The service whose definition a call changes: the caller's own, or `owner`'s org-shared one. */
const changedService = (ctx: CallContext) =>
  ctx.on === "own" && ctx.who !== "anonymous" ? ownService[ctx.who] : orgService;

const SETUP: Record<string, Setup> = {
  root: async () => ({}),
  info: async () => ({ check: (r) => expect(r.authInfo.isTokenBasedSecurity).toBe(true) }),
  generateToken: async ({ me }) => ({
    params: { username: me.username, password: me.password, client: "requestip" },
    check: (r) => expect(typeof r.token).toBe("string"),
  }),
  "oauth2.revokeToken": async ({ me }) => {
    const token = await portal.signIn(me.username, me.password);
    return {
      params: { auth_token: token },
      check: async () => expect((await portal.get("/community/self", {}, token)).error.code).toBe(498),
    };
  },

  "portals.get": async ({ who }) => ({
    path: { portalId: "self" },
    check: (r) => {
      expect(r.id).toBe(mainId);
      expect(r.user === undefined).toBe(who === "anonymous");
    },
  }),
  "portals.update": async ({ on }) => {
    const value = `value ${uid()}`;
    if (on === "website") {
      return {
        params: { description: value },
        check: async () =>
          expect((await portal.get("/portals/self", {}, bootstrap.token)).description).toBe(value),
      };
    }
    if (on === "security") return { params: { updateUserProfileDisabled: false } };
    if (on === "utility") {
      return {
        params: {
          geometryService: {
            url: `https://geometry.example.com/${uid()}/arcgis/rest/services/Geometry/GeometryServer`,
          },
        },
      };
    }
    return unexpected(on);
  },
  "portals.updateUserRole": async (ctx) => {
    if (ctx.on === "own") return { params: { user: ctx.me.username, role: "org_admin" } };
    const user = await newUser();
    return {
      params: { user, role: "org_publisher" },
      check: async () =>
        expect((await portal.get(`/community/users/${user}`, {}, bootstrap.token)).role).toBe(
          "org_publisher",
        ),
    };
  },
  "portals.users": async () => ({ check: (r) => expect(r.users.length).toBeGreaterThan(3) }),
  "portals.securityPolicy": async () => ({
    path: { portalId: "self" },
    check: (r) => expect(r.passwordPolicy.minLength).toBeGreaterThanOrEqual(8),
  }),
  // The defaults again, so that the users other cases create still meet the policy.
  "portals.securityPolicy.update": async () => ({
    path: { portalId: "self" },
    params: { minLength: 8, maxFailedAttempts: 5 },
    check: async () =>
      expect(
        (await portal.get("/portals/self/securityPolicy", {}, bootstrap.token)).passwordPolicy.type,
      ).toBe("custom"),
  }),
  "portals.securityPolicy.reset": async () => ({
    path: { portalId: "self" },
    check: async () =>
      expect(
        (await portal.get("/portals/self/securityPolicy", {}, bootstrap.token)).passwordPolicy.type,
      ).toBe("default"),
  }),

  "roles.list": async () => ({
    check: (r) => expect(r.roles.some((x: any) => x.id === customRole)).toBe(true),
  }),
  "roles.create": async () => ({ params: { name: `Role ${uid()}`, description: "made in the matrix" } }),
  "roles.get": async () => ({ path: { roleId: customRole } }),
  "roles.update": async () => ({
    path: { roleId: await newRole() },
    params: { description: `changed ${uid()}` },
  }),
  "roles.delete": async () => ({ path: { roleId: await newRole() } }),
  "roles.privileges": async () => ({ path: { roleId: customRole } }),
  "roles.setPrivileges": async () => ({
    path: { roleId: await newRole() },
    params: { privileges: { privileges: ["portal:user:createItem", "portal:admin:viewUsers"] } },
  }),

  "community.self": async ({ me }) => ({ check: (r) => expect(r.username).toBe(me.username) }),
  "users.get": async (ctx) => {
    const username =
      ctx.on === "own" ? ctx.me.username : ctx.on === "other" ? acct.owner.username : acct.hermit.username;
    return { path: { username }, check: (r) => expect(r.username).toBe(username) };
  },
  "users.update": async (ctx) => ({
    path: { username: holder(ctx).username },
    params: { description: `profile ${uid()}` },
  }),
  "users.delete": async () => {
    const username = await newUser();
    return {
      path: { username },
      check: async () =>
        expect((await portal.get(`/community/users/${username}`, {}, bootstrap.token)).error.code).toBe(400),
    };
  },
  "users.disable": async () => {
    const username = await newUser();
    return {
      path: { username },
      check: async () =>
        expect((await portal.get(`/community/users/${username}`, {}, bootstrap.token)).disabled).toBe(true),
    };
  },
  "users.enable": async () => {
    const username = await newUser();
    await asAdmin(`/community/users/${username}/disable`);
    return {
      path: { username },
      check: async () =>
        expect((await portal.get(`/community/users/${username}`, {}, bootstrap.token)).disabled).toBe(false),
    };
  },
  "portaladmin.createUser": async () => {
    const username = `new_${uid()}`;
    return {
      params: {
        username,
        password: "a-long-password",
        firstname: "New",
        lastname: "Person",
        email: `${username}@example.com`,
        role: "org_admin",
      },
    };
  },

  "items.get": readItem(),
  "items.data": readItem(),
  "items.thumbnail": readItem({ name: "thumb.png" }),
  "content.user": async (ctx) => {
    const owner = holder(ctx);
    return { path: { username: owner.username }, check: (r) => expect(r.username).toBe(owner.username) };
  },
  "items.add": async (ctx) => ({
    path: { username: holder(ctx).username },
    params: { title: `Added ${uid()}`, type: "Web Map", text: "{}" },
  }),
  "items.update": onFreshItem(async () => ({ snippet: `changed ${uid()}` })),
  "items.delete": onFreshItem(),
  "items.protect": onFreshItem(),
  "items.unprotect": async (ctx) => {
    const owner = holder(ctx);
    const id = await freshItem(ctx, owner);
    await as(owner, `/content/users/${owner.username}/items/${id}/protect`);
    return { path: { username: owner.username, itemId: id } };
  },
  "items.move": onFreshItem(async (owner) => ({ folder: await newFolder(owner) })),
  "items.reassign": onFreshItem(async () => ({ targetUsername: acct.invitee.username })),
  "items.share": onFreshItem(async () => ({ org: true })),
  "items.unshare": async (ctx) => {
    const owner = holder(ctx);
    const id = await freshItem(ctx, owner);
    await as(owner, `/content/users/${owner.username}/items/${id}/share`, { groups: ownGroupOf(owner) });
    return {
      path: { username: owner.username, itemId: id },
      params: { groups: ownGroupOf(owner) },
      check: (r) => expect(r.notUnsharedFrom).toEqual([]),
    };
  },
  "content.shareItems": async (ctx) => {
    const owner = holder(ctx);
    const id = await newItem(owner);
    return {
      path: { username: owner.username },
      params: { items: id, org: true },
      check: (r) => expect(r.results).toEqual([expect.objectContaining({ itemId: id, success: true })]),
    };
  },
  "content.unshareItems": async (ctx) => {
    const owner = holder(ctx);
    const id = await newItem(owner);
    await as(owner, `/content/users/${owner.username}/items/${id}/share`, { groups: ownGroupOf(owner) });
    return {
      path: { username: owner.username },
      params: { items: id, groups: ownGroupOf(owner) },
      check: (r) =>
        expect(r.results).toEqual([
          expect.objectContaining({ itemId: id, success: true, notUnsharedFrom: [] }),
        ]),
    };
  },
  "folders.create": async (ctx) => ({
    path: { username: holder(ctx).username },
    params: { title: `Folder ${uid()}` },
  }),
  "folders.delete": async (ctx) => {
    const owner = holder(ctx);
    return { path: { username: owner.username, folderId: await newFolder(owner) } };
  },
  "comments.add": async () => ({ path: { itemId: orgItem }, params: { comment: `hello ${uid()}` } }),
  "comments.list": async () => ({
    path: { itemId: orgItem },
    check: (r) => expect(Array.isArray(r.comments)).toBe(true),
  }),
  "comments.update": async (ctx) => ({
    path: { itemId: orgItem, commentId: await newComment(holder(ctx), orgItem) },
    params: { comment: `edited ${uid()}` },
  }),
  "comments.delete": async (ctx) => {
    if (ctx.on === "ownItem") {
      const itemId = await newItem(ctx.me, "org");
      return { path: { itemId, commentId: await newComment(acct.owner, itemId) } };
    }
    return { path: { itemId: orgItem, commentId: await newComment(holder(ctx), orgItem) } };
  },

  "search.items": async () => ({
    params: { q: "Item" },
    check: (r) => expect(Array.isArray(r.results)).toBe(true),
  }),
  "search.groups": async () => ({
    params: { q: "Group" },
    check: (r) => expect(Array.isArray(r.results)).toBe(true),
  }),

  "groups.create": async () => ({ params: { title: `Group ${uid()}`, access: "org" } }),
  "groups.get": async (ctx) => {
    const id =
      ctx.on === "own" ? ownGroupOf(holder(ctx)) : ctx.on === "other" ? ownGroup.owner : privateGroup;
    return { path: { groupId: id }, check: (r) => expect(r.id).toBe(id) };
  },
  "groups.update": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { snippet: `new ${uid()}` },
  }),
  "groups.delete": async (ctx) => ({ path: { groupId: (await targetGroup(ctx)).id } }),
  "groups.protect": async (ctx) => ({ path: { groupId: (await targetGroup(ctx)).id } }),
  "groups.unprotect": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/protect`);
    return { path: { groupId: id } };
  },
  "groups.invite": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { users: acct.invitee.username },
    check: (r) => expect(r.notInvited).toEqual([]),
  }),
  "groups.addUsers": async (ctx) => ({
    path: { groupId: (await targetGroup(ctx)).id },
    params: { users: acct.invitee.username },
    check: (r) => expect(r.notAdded).toEqual([]),
  }),
  "groups.removeUsers": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/addUsers`, { users: acct.invitee.username });
    return {
      path: { groupId: id },
      params: { users: acct.invitee.username },
      check: (r) => expect(r.notRemoved).toEqual([]),
    };
  },
  "groups.updateUsers": async (ctx) => {
    const { id, owner } = await targetGroup(ctx);
    await as(owner, `/community/groups/${id}/addUsers`, { users: acct.invitee.username });
    return {
      path: { groupId: id },
      params: { admins: acct.invitee.username },
      check: (r) => expect(r.results).toEqual([{ username: acct.invitee.username, success: true }]),
    };
  },
  "groups.users": async (ctx) => {
    const id =
      ctx.on === "own" ? ownGroupOf(holder(ctx)) : ctx.on === "manager" ? managedGroup : ownGroup.owner;
    return { path: { groupId: id } };
  },
  "groups.content": async (ctx) => {
    const id = ctx.on === "own" ? ownGroupOf(holder(ctx)) : ownGroup.owner;
    return { path: { groupId: id }, check: (r) => expect(Array.isArray(r.items)).toBe(true) };
  },
  "users.invitations": async (ctx) => ({
    path: { username: ctx.on === "own" ? ctx.me.username : acct.invitee.username },
    check: (r) => expect(Array.isArray(r.userInvitations)).toBe(true),
  }),
  "users.invitations.accept": invitationAnswer,
  "users.invitations.decline": invitationAnswer,

  "content.createService": async (ctx) => ({
    path: { username: holder(ctx).username },
    params: { createParameters: { name: `svc_${uid()}` }, outputType: "featureService" },
  }),
  "server.info": async () => ({}),
  "featureServer.service": readService(),
  "featureServer.layer": readService({ layerId: "0" }),
  "featureServer.addToDefinition": async (ctx) => ({
    path: { name: changedService(ctx) },
    params: { addToDefinition: { layers: [{ name: `Layer ${uid()}`, geometryType: "esriGeometryPoint" }] } },
  }),
  "featureServer.layers": readService(),
  "featureServer.query": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { where: "1=1", returnCountOnly: true },
    check: (r) => expect(typeof r.count).toBe("number"),
  }),
  "featureServer.serviceQuery": async (ctx) => ({
    ...(await readService()(ctx)),
    params: { layerDefs: { "0": "1=1" }, returnCountOnly: true },
    check: (r) => expect(r.layers[0].id).toBe(0),
  }),
  "featureServer.feature": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const name = (setup.path as { name: string }).name;
    const added = await asAdmin(
      `${portal.portico.address}/rest/services/${name}/FeatureServer/0/addFeatures`,
      {
        features: [{ attributes: {}, geometry: { x: 1, y: 2 } }],
      },
    );
    return { path: { ...setup.path, objectId: String(added.addResults[0].objectId) } };
  },
  "featureServer.applyEdits": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { adds: [{ attributes: {}, geometry: { x: 1, y: 2 } }] },
    check: (r) => expect(r.addResults[0].success).toBe(true),
  }),
  "featureServer.addFeatures": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { features: [{ attributes: {}, geometry: { x: 1, y: 2 } }] },
    check: (r) => expect(r.addResults[0].success).toBe(true),
  }),
  "featureServer.updateFeatures": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { features: [{ attributes: { OBJECTID: 999999 } }] },
    check: (r) => expect(r.updateResults).toHaveLength(1),
  }),
  "featureServer.deleteFeatures": async (ctx) => ({
    ...(await readService({ layerId: "0" })(ctx)),
    params: { objectIds: "999999" },
    check: (r) => expect(r.deleteResults).toHaveLength(1),
  }),
  "featureServer.serviceApplyEdits": async (ctx) => ({
    ...(await readService()(ctx)),
    params: { edits: [{ id: 0, adds: [{ attributes: {}, geometry: { x: 1, y: 2 } }] }] },
    check: (r) => expect(r[0].addResults[0].success).toBe(true),
  }),
  "featureServer.attachments": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      check: (r) => expect(r.attachmentInfos).toMatchObject([{ id: Number(attachmentId) }]),
    };
  },
  "featureServer.attachment": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId, attachmentId },
      check: (r) => expect(r).toEqual({ contentType: ATTACHMENT.type, bytes: ATTACHMENT.bytes.length }),
    };
  },
  "featureServer.addAttachment": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      files: { attachment: ATTACHMENT },
      check: (r) => expect(r.addAttachmentResult.success).toBe(true),
    };
  },
  "featureServer.updateAttachment": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      params: { attachmentId },
      files: { attachment: ATTACHMENT },
      check: (r) => expect(r.updateAttachmentResult.success).toBe(true),
    };
  },
  "featureServer.deleteAttachments": async (ctx) => {
    const setup = await readService({ layerId: "0" })(ctx);
    const { objectId, attachmentId } = await featureWithAttachment((setup.path as { name: string }).name);
    return {
      path: { ...setup.path, objectId },
      params: { attachmentIds: attachmentId },
      check: (r) => expect(r.deleteAttachmentResults).toMatchObject([{ success: true }]),
    };
  },
  "featureServer.updateDefinition": async (ctx) => ({
    path: { name: changedService(ctx) },
    params: { updateDefinition: { description: `described ${uid()}` } },
  }),
  "featureServer.deleteFromDefinition": async (ctx) => {
    const name = changedService(ctx);
    return { path: { name }, params: { deleteFromDefinition: { layers: [{ id: await addLayer(name) }] } } };
  },
  "featureServer.layerAddToDefinition": async (ctx) => ({
    path: { name: changedService(ctx), layerId: "0" },
    params: { addToDefinition: { fields: [{ name: `f_${uid()}`, type: "esriFieldTypeInteger" }] } },
  }),
  "featureServer.layerUpdateDefinition": async (ctx) => ({
    path: { name: changedService(ctx), layerId: "0" },
    params: { updateDefinition: { description: `described ${uid()}` } },
  }),
  "featureServer.layerDeleteFromDefinition": async (ctx) => {
    const name = changedService(ctx);
    const field = `f_${uid()}`;
    await asAdmin(adminPath(name, "0/addToDefinition"), {
      addToDefinition: { fields: [{ name: field, type: "esriFieldTypeString" }] },
    });
    return { path: { name, layerId: "0" }, params: { deleteFromDefinition: { fields: [{ name: field }] } } };
  },

  "webhooks.list": async () => ({
    check: (r) => expect(r.webhooks.some((w: any) => w.id === hook)).toBe(true),
  }),
  "webhooks.create": async () => ({
    params: {
      name: `hook ${uid()}`,
      url: receiver.url,
      changes: "manualChanges",
      events: "/users/nobody_listens",
    },
  }),
  "webhooks.settings": async () => ({}),
  "webhooks.settings.update": async () => ({ params: { notificationAttempts: 3 } }),
  "webhooks.get": async () => ({ path: { webhookId: hook } }),
  "webhooks.update": async () => ({ path: { webhookId: hook }, params: { name: `renamed ${uid()}` } }),
  "webhooks.delete": async () => ({ path: { webhookId: await newWebhook() } }),
  "webhooks.activate": async () => {
    const id = await newWebhook();
    await asAdmin(`/portals/self/webhooks/${id}/deactivate`);
    return { path: { webhookId: id } };
  },
  "webhooks.deactivate": async () => ({ path: { webhookId: await newWebhook() } }),
  "webhooks.notificationStatus": async () => ({ path: { webhookId: hook } }),
  "webhooks.redeliver": async () => ({ path: { webhookId: hook }, params: { since: 0 } }),
  "webhooks.ping": async () => ({ path: { webhookId: hook } }),

  "collaborations.create": async () => ({ params: { name: `collab ${uid()}`, workspaceName: "ws" } }),
  "collaborations.list": async () => ({
    check: (r) => expect(JSON.stringify(r)).toContain(hosted.collaborationId),
  }),
  "collaborations.validateCollaborationInvitation": async () => ({
    params: { invitationJSON: JSON.stringify(peerInvitation) },
    check: (r) => expect(r.valid).toBe(true),
  }),
  "collaborations.acceptCollaborationInvitation": async () => ({
    params: { invitationJSON: JSON.stringify((await invitationFromPeer()).invitation) },
  }),
  "collaborations.get": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.updateInfo": async () => ({
    path: { collaborationId: hosted.collaborationId },
    params: { description: `about ${uid()}` },
  }),
  "collaborations.delete": async () => ({
    path: { collaborationId: (await newHostedCollaboration()).collaborationId },
  }),
  "collaborations.removeParticipation": async ({ on }) => {
    if (on === "host") return { path: { collaborationId: (await newHostedCollaboration()).collaborationId } };
    const { invitation } = await invitationFromPeer();
    const r = await asAdmin(`${self}/acceptCollaborationInvitation`, {
      invitationJSON: JSON.stringify(invitation),
    });
    return { path: { collaborationId: r.collaborationId } };
  },
  "collaborations.inviteParticipant": async () => ({
    path: { collaborationId: hosted.collaborationId },
    params: {
      guestPortalUrl: `https://guest-${uid()}.example.org`,
      collaborationWorkspacesParticipantConfigJSON: [{ [hosted.workspaceId]: "receive" }],
    },
    check: (r) => expect(r.invitation.collaborationId).toBe(hosted.collaborationId),
  }),
  "collaborations.invitations": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.invitations.invalidate": invitationOnHost,
  "collaborations.invitations.refresh": invitationOnHost,
  "collaborations.exportInvitationResponse": async () => ({
    path: { collaborationId: guestIn.collaborationId },
    check: (r) => expect(r.response.collaborationId).toBe(guestIn.collaborationId),
  }),
  "collaborations.validateInvitationResponse": async () => ({
    path: { collaborationId: pending.collaborationId },
    params: { invitationResponseJSON: JSON.stringify(pending.response) },
    check: (r) => expect(r.valid).toBe(true),
  }),
  "collaborations.importInvitationResponse": async () => {
    const { collaborationId, response } = await pendingResponse();
    return { path: { collaborationId }, params: { invitationResponseJSON: JSON.stringify(response) } };
  },
  "collaborations.participants": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.participant": async () => ({
    path: { collaborationId: hosted.collaborationId, participantId: peerId },
  }),
  "collaborations.participant.updateAccessModes": async () => ({
    path: { collaborationId: hosted.collaborationId, participantId: peerId },
    params: { collaborationWorkspacesParticipantConfigJSON: [{ [hosted.workspaceId]: "sendAndReceive" }] },
  }),
  "collaborations.participant.updateItemDeletePolicy": async () => ({
    path: { collaborationId: hosted.collaborationId, participantId: peerId },
    params: { deleteReceivedItems: false },
  }),
  "collaborations.participant.remove": async () => {
    const linked = await collaborate(portal, [{ portal: peer, mode: "sendAndReceive" }]);
    return { path: { collaborationId: linked.collaborationId, participantId: peerId } };
  },
  "collaborations.addWorkspace": async ({ on }) => ({
    path: { collaborationId: (on === "host" ? hosted : guestIn).collaborationId },
    params: { collaborationWorkspaceName: `ws ${uid()}` },
  }),
  "collaborations.workspaces": async () => ({ path: { collaborationId: hosted.collaborationId } }),
  "collaborations.workspace": async () => ({
    path: { collaborationId: hosted.collaborationId, workspaceId: hosted.workspaceId },
  }),
  "collaborations.workspace.updateInfo": async () => ({
    path: { collaborationId: hosted.collaborationId, workspaceId: hosted.workspaceId },
    params: { collaborationWorkspaceDescription: `about ${uid()}` },
  }),
  "collaborations.workspace.updatePortalGroupLink": async ({ on }) => {
    const linked = on === "host" ? hosted : guestIn;
    return {
      path: { collaborationId: linked.collaborationId, workspaceId: linked.workspaceId },
      params: { enableRealtimeSync: false },
    };
  },
  "collaborations.workspace.removePortalGroupLink": async () => {
    const r = await asAdmin(collab(hosted.collaborationId, "addWorkspace"), {
      collaborationWorkspaceName: `ws ${uid()}`,
      portalGroupId: await newGroup(bootstrap),
    });
    return { path: { collaborationId: hosted.collaborationId, workspaceId: r.workspace.id } };
  },
  "collaborations.workspace.delete": async ({ on }) => {
    if (on === "guest") return { path: guestPath() };
    const r = await asAdmin(collab(hosted.collaborationId, "addWorkspace"), {
      collaborationWorkspaceName: `ws ${uid()}`,
    });
    return { path: { collaborationId: hosted.collaborationId, workspaceId: r.workspace.id } };
  },
  "collaborations.workspace.sync": async ({ on }) => ({
    path: on === "guest" ? guestPath() : hostPath(),
    params: { async: false },
    check: (r) => expect(r.status).toBe("completed"),
  }),
  "collaborations.workspace.syncStatus": async () => ({ path: guestPath() }),
  "collaborations.workspace.syncStatus.one": async () => ({ path: { ...guestPath(), syncId } }),
  "collaborations.workspace.schedule": async () => {
    await ensureSchedule("active");
    return { path: guestPath(), check: (r) => expect(r.startTime).toBe(FAR) };
  },
  "collaborations.workspace.schedule.update": async () => ({
    path: guestPath(),
    params: { startTime: FAR, interval: 24, repeatCount: -1 },
  }),
  "collaborations.workspace.schedule.delete": async ({ on }) => {
    if (on === "host") return { path: hostPath() };
    await ensureSchedule("active");
    return { path: guestPath() };
  },
  "collaborations.workspace.schedule.pause": async () => {
    await ensureSchedule("active");
    return { path: guestPath() };
  },
  "collaborations.workspace.schedule.resume": async () => {
    await ensureSchedule("paused");
    return { path: guestPath() };
  },
  "collaborations.peer": async () => ({
    path: { op: "state" },
    params: {
      envelope: {
        collaborationId: hosted.collaborationId,
        from: peerId,
        to: mainId,
        op: "state",
        issued: Date.now(),
        nonce: uid(),
        body: {},
      },
      signature: Buffer.alloc(64).toString("base64"),
    },
  }),
};

function ownGroupOf(account: Account): string {
  const name = (Object.keys(acct) as AccountName[]).find((n) => acct[n] === account);
  const id = name && ownGroup[name];
  if (!id) throw new Error(`no group of ${account.username}`);
  return id;
}

function hostPath() {
  return { collaborationId: hosted.collaborationId, workspaceId: hosted.workspaceId };
}

function guestPath() {
  return { collaborationId: guestIn.collaborationId, workspaceId: guestIn.workspaceId };
}

/** An invitation of this portal's host collaboration to some other portal. */
async function invitationOnHost(): Promise<Call> {
  const file = await asAdmin(collab(hosted.collaborationId, "inviteParticipant"), {
    guestPortalUrl: `https://guest-${uid()}.example.org`,
    collaborationWorkspacesParticipantConfigJSON: [{ [hosted.workspaceId]: "receive" }],
  });
  return { path: { collaborationId: hosted.collaborationId, invitationId: file.invitation.id } };
}

/** An invitation to a fresh group of `owner`: for the caller (`own`) or for `invitee` (`other`). */
async function invitationAnswer(ctx: CallContext): Promise<Call> {
  const invited = ctx.on === "own" && ctx.who !== "anonymous" ? ctx.me : acct.invitee;
  const groupId = await newGroup(acct.owner);
  await as(acct.owner, `/community/groups/${groupId}/invite`, { users: invited.username });
  return {
    path: { username: invited.username, invitationId: await invitationOf(invited.username, groupId) },
    check: (r) => expect(r.groupId).toBe(groupId),
  };
}

// ------------------------------------------------------------------------------------- requests

type Transport = "param" | "bearer" | "esri";

function urlOf(route: RouteDef, call: Call): string {
  const paths = typeof route.path === "string" ? [route.path] : route.path;
  const template = paths[call.variant ?? 0];
  if (template === undefined) throw new Error(`${route.name} has no path ${call.variant}`);
  const values: Record<string, string> = { portalId: "self", ...call.path };
  const path = template.replace(/:(\w+)/g, (_m, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for :${name} of ${route.name}`);
    return encodeURIComponent(value);
  });
  const root =
    route.root === "portaladmin" ? "/portaladmin" : route.root === "server" ? "/rest" : "/sharing/rest";
  return `${portal.portico.address}${root}${path}`;
}

/** Calls a route as clients do; answers the parsed JSON, or a description of a binary answer. */
async function send(
  route: RouteDef,
  call: Call,
  token: string | undefined,
  transport: Transport = "param",
  method: "GET" | "POST" = route.methods.includes("POST") ? "POST" : "GET",
): Promise<any> {
  const params: Record<string, unknown> = { f: "json", ...call.params };
  const headers: Record<string, string> = {};
  if (token !== undefined) {
    if (transport === "param") params.token = token;
    else headers[transport === "bearer" ? "authorization" : "x-esri-authorization"] = `Bearer ${token}`;
  }
  const url = urlOf(route, call);
  const res =
    method === "GET"
      ? await fetch(`${url}?${form(params)}`, { headers })
      : await fetch(url, {
          method: "POST",
          body: call.files ? multipartOf(form(params), call.files) : form(params),
          headers,
        });
  const type = res.headers.get("content-type") ?? "";
  if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${route.name}: ${await res.text()}`);
  if (type.includes("json")) return res.json();
  return { contentType: type, bytes: (await res.arrayBuffer()).byteLength };
}

/** Parameters and files as one multipart body, as clients upload files. */
function multipartOf(params: URLSearchParams, files: NonNullable<Call["files"]>): FormData {
  const body = new FormData();
  for (const [key, value] of params) body.append(key, value);
  for (const [key, file] of Object.entries(files)) {
    body.append(key, new Blob([file.bytes], { type: file.type }), file.name);
  }
  return body;
}

const routeNamed = (name: string): RouteDef => {
  const route = allRoutes.find((r) => r.name === name);
  if (!route) throw new Error(`no route ${name}`);
  return route;
};

/**
 * Every table a caller's request can change, read in full; the outbox by its length, since the
 * delivery engine marks events dispatched in the background, and notifications by their number for
 * the same reason. Peer nonces and delivery attempts are written by other portals and the engine.
 */
const WATCHED = [
  "organizations",
  "users",
  "roles",
  "tokens",
  "folders",
  "items",
  "item_tags",
  "item_files",
  "item_file_chunks",
  "groups",
  "group_members",
  "group_invitations",
  "item_shares",
  "comments",
  "feature_services",
  "feature_layers",
  "feature_attachments",
  "feature_attachment_chunks",
  "webhooks",
  "webhook_settings",
  "portal_keys",
  "collaborations",
  "collaboration_participants",
  "collaboration_invitations",
  "workspaces",
  "workspace_modes",
  "workspace_links",
  "collaboration_copies",
  "sync_jobs",
  "sync_schedules",
] as const;

async function snapshot(): Promise<Record<string, string>> {
  const db = portal.portico.db.kysely;
  const tables = await Promise.all(
    WATCHED.map(async (table) => {
      const rows = await db.selectFrom(table).selectAll().execute();
      return [
        table,
        rows
          .map((r) => JSON.stringify(r))
          .sort()
          .join("\n"),
      ] as const;
    }),
  );
  const events = await db
    .selectFrom("events")
    .select((eb) => [eb.fn.countAll().as("n"), eb.fn.max("seq").as("last")])
    .executeTakeFirstOrThrow();
  const notifications = await db
    .selectFrom("notifications")
    .select((eb) => eb.fn.countAll().as("n"))
    .executeTakeFirstOrThrow();
  return {
    ...Object.fromEntries(tables),
    events: `${events.n}/${events.last}`,
    notifications: String(notifications.n),
  };
}

function changedTables(before: Record<string, string>, after: Record<string, string>): string[] {
  return Object.keys(before).filter((t) => before[t] !== after[t]);
}

const describeOutcome = (o: Outcome) => (o === OK ? "success" : `${o.code} ${o.messageCode}`);

/**
 * Sends `call` as `token` and records in `problems` what is wrong with the answer against `want`:
 * a success that is not one or whose check fails, or a refusal with another code, or one that
 * wrote to a watched table.
 */
async function judge(
  problems: string[],
  label: string,
  want: Outcome,
  route: RouteDef,
  call: Call,
  token: string | undefined,
): Promise<void> {
  const before = want === OK ? undefined : await snapshot();
  const r = await send(route, call, token);
  if (want === OK) {
    if (r.error !== undefined || r.success === false) {
      problems.push(`${label}: expected success, got ${JSON.stringify(r.error ?? r)}`);
      return;
    }
    try {
      await call.check?.(r);
    } catch (err) {
      problems.push(`${label}: ${(err as Error).message}`);
    }
    return;
  }
  if (r.error?.code !== want.code || r.error?.messageCode !== want.messageCode) {
    problems.push(`${label}: expected ${describeOutcome(want)}, got ${JSON.stringify(r.error ?? r)}`);
  }
  const changed = changedTables(before as Record<string, string>, await snapshot());
  if (changed.length > 0) problems.push(`${label}: a refused call wrote to ${changed.join(", ")}`);
}

// -------------------------------------------------------------------------------------- lifecycle

beforeAll(async () => {
  receiver = await startReceiver();
  [portal, peer] = await Promise.all([
    startTestPortal({ env: PEER_ENV }),
    startTestPortal({ env: PEER_ENV }),
  ]);
  bootstrap = { ...ADMIN, token: portal.adminToken };
  const names = Object.keys(ACCOUNTS) as AccountName[];
  const made = await Promise.all(names.map((n) => portal.addUser(`sec_${n}`, ACCOUNTS[n])));
  names.forEach((n, i) => {
    acct[n] = made[i]!;
  });
  await as(acct.hermit, `/community/users/${acct.hermit.username}/update`, { access: "private" });
  mainId = (await portal.get("/portals/self", {}, bootstrap.token)).id;
  peerId = (await peer.get("/portals/self", {}, peer.adminToken)).id;

  for (const n of ["member", "publisher", "admin", "owner"] as const) {
    ownItem[n] = await newItem(acct[n]);
    ownGroup[n] = await newGroup(acct[n]);
  }
  orgItem = await newItem(acct.owner, "org");
  privateGroup = await newGroup(acct.owner, "private");
  managedGroup = await newGroup(acct.owner);
  await as(acct.owner, `/community/groups/${managedGroup}/addUsers`, {
    admins: `${acct.member.username},${acct.publisher.username},${acct.admin.username}`,
  });

  orgService = await newService(acct.owner, "org");
  privateService = await newService(acct.owner);
  ownService.publisher = await newService(acct.publisher);
  ownService.admin = await newService(acct.admin);
  // A member cannot publish; an administrator gives them a service, which they then own.
  ownService.member = await newService(acct.owner);
  const svcItem = (
    await must(
      portal.get(
        `${portal.portico.address}/rest/services/${ownService.member}/FeatureServer`,
        {},
        bootstrap.token,
      ),
      "service",
    )
  ).serviceItemId as string;
  await asAdmin(`/content/users/${acct.owner.username}/items/${svcItem}/reassign`, {
    targetUsername: acct.member.username,
  });

  customRole = await newRole();
  hook = await newWebhook();

  hosted = await collaborate(portal, [{ portal: peer, mode: "sendAndReceive" }]);
  guestIn = await collaborate(peer, [{ portal, mode: "sendAndReceive" }]);
  pending = await pendingResponse();
  peerInvitation = (await invitationFromPeer()).invitation;
  const synced = await asAdmin(ws(guestIn, "sync"), { async: false });
  syncId = synced.jobId as string;
}, 60_000);

afterAll(async () => {
  await Promise.all([portal?.stop(), peer?.stop()]);
  await receiver?.close();
});

// ----------------------------------------------------------------------------------------- tests

describe("the expectation table", () => {
  it("covers every route, with a set-up for each, and names no route that does not exist", () => {
    const names = allRoutes.map((r) => r.name);
    expect(new Set(names).size).toBe(names.length);
    expect(Object.keys(EXPECTED).sort()).toEqual([...names].sort());
    expect(Object.keys(SETUP).sort()).toEqual([...names].sort());
    for (const name of NO_CREDENTIALS) expect(names).toContain(name);
  });
});

describe("every operation answers each caller as its privilege allows", () => {
  for (const route of allRoutes) {
    it(route.name, async () => {
      const cases = EXPECTED[route.name];
      const setup = SETUP[route.name];
      if (!cases || !setup) throw new Error(`${route.name} has no security expectation`);
      const problems: string[] = [];
      for (const { on, expect: expected } of cases) {
        for (const who of CALLERS) {
          const ctx: CallContext = { who, on, me: who === "anonymous" ? acct.owner : acct[who] };
          const call = await setup(ctx);
          const want = expected[who];
          const label = `${route.name} on ${on} as ${who}`;
          await judge(problems, label, want, route, call, who === "anonymous" ? undefined : ctx.me.token);
        }
      }
      expect(problems).toEqual([]);
    });
  }
});

/** Values for any route's `:params`: enough to reach authentication, which comes first. */
function probeCall(username: string, variant: number): Call {
  const id = "0123456789abcdef0123456789abcdef";
  return {
    variant,
    path: {
      portalId: "self",
      username,
      folderId: id,
      itemId: id,
      name: "nothing_here",
      layerId: "0",
      objectId: "1",
      attachmentId: "1",
      commentId: id,
      groupId: id,
      invitationId: id,
      roleId: id,
      webhookId: id,
      collaborationId: id,
      participantId: id,
      workspaceId: id,
      syncId: id,
      op: "state",
    },
  };
}

// ------------------------------------------------------------------ custom-role administrators

/**
 * Account actions between administrators, custom roles on both sides. An administrator may act on
 * another account only when that account's privileges are a subset of its own, and on a default
 * administrator's account only as a default administrator (README, Security): otherwise a role
 * with updateUsers could reset the password of a broader account and sign in as it.
 *
 * Every role below holds the administrative privileges of the actions; they differ in the rest.
 */
const ACCOUNT_PRIVILEGES = [
  "portal:admin:viewUsers",
  "portal:admin:updateUsers",
  "portal:admin:changeUserRoles",
  "portal:admin:disableUsers",
  "portal:admin:deleteUsers",
  "portal:admin:reassignItems",
  "portal:admin:viewItems",
];
const CUSTOM_ROLES = {
  /** The account privileges and every member privilege. */
  narrow: [...ACCOUNT_PRIVILEGES, ...USER_PRIVILEGES],
  /** That and publishing. */
  broad: [...ACCOUNT_PRIVILEGES, ...USER_PRIVILEGES, ...PUBLISHER_PRIVILEGES],
  /** Every privilege there is: still not a default administrator. */
  full: ALL_PRIVILEGES,
};
type CustomRole = keyof typeof CUSTOM_ROLES;
/** Who acts: a holder of a custom role, or the default administrator. */
type ActingAdmin = CustomRole | "default";
/** Whose account: a holder of a custom role, or of a built-in role. */
type AccountHolder = CustomRole | "org_user" | "org_publisher" | "org_admin";

/** Each pair, with the outcome of every account action: one rule for all of them. */
const ACCOUNT_PAIRS: [ActingAdmin, AccountHolder, Outcome][] = [
  ["narrow", "broad", E403],
  ["narrow", "full", E403],
  ["narrow", "org_publisher", E403],
  ["narrow", "narrow", OK],
  ["narrow", "org_user", OK],
  ["broad", "narrow", OK],
  ["broad", "broad", OK],
  ["broad", "org_publisher", OK],
  ["broad", "full", E403],
  ["broad", "org_admin", E403],
  ["full", "broad", OK],
  ["full", "full", OK],
  ["full", "org_admin", E403],
  ["default", "full", OK],
  ["default", "org_admin", OK],
];

/** An account action: the route, and the call on `target` made by `actor`. */
interface AccountAction {
  route: string;
  setup: (actor: Account, target: string) => Promise<Call>;
}

const ACCOUNT_ACTIONS: Record<string, AccountAction> = {
  "update the profile": {
    route: "users.update",
    setup: async (_actor, target) => {
      const description = `managed ${uid()}`;
      return {
        path: { username: target },
        params: { description },
        check: async () =>
          expect((await portal.get(`/community/users/${target}`, {}, bootstrap.token)).description).toBe(
            description,
          ),
      };
    },
  },
  "reset the password": {
    route: "users.update",
    setup: async (_actor, target) => {
      // The new hash is compared rather than signed in with: each sign-in costs a 64 MiB scrypt.
      const hashOf = async () =>
        (
          await portal.portico.db.kysely
            .selectFrom("users")
            .select("password_hash")
            .where("username", "=", target)
            .executeTakeFirstOrThrow()
        ).password_hash;
      const before = await hashOf();
      return {
        path: { username: target },
        params: { password: `reset-${uid()}-password` },
        check: async () => expect(await hashOf()).not.toBe(before),
      };
    },
  },
  // org_user is within every acting role, so only the target decides.
  "change the role": {
    route: "portals.updateUserRole",
    setup: async (_actor, target) => ({
      params: { user: target, role: "org_user" },
      check: async () =>
        expect((await portal.get(`/community/users/${target}`, {}, bootstrap.token)).role).toBe("org_user"),
    }),
  },
  disable: {
    route: "users.disable",
    setup: async (_actor, target) => ({
      path: { username: target },
      check: async () =>
        expect((await portal.get(`/community/users/${target}`, {}, bootstrap.token)).disabled).toBe(true),
    }),
  },
  enable: {
    route: "users.enable",
    setup: async (_actor, target) => {
      await asAdmin(`/community/users/${target}/disable`);
      return {
        path: { username: target },
        check: async () =>
          expect((await portal.get(`/community/users/${target}`, {}, bootstrap.token)).disabled).toBe(false),
      };
    },
  },
  delete: {
    route: "users.delete",
    setup: async (_actor, target) => ({
      path: { username: target },
      check: async () =>
        expect((await portal.get(`/community/users/${target}`, {}, bootstrap.token)).error.code).toBe(400),
    }),
  },
  "reassign an item out of the account": {
    route: "items.reassign",
    setup: async (actor, target) => {
      const id = await newItem(actor);
      await asAdmin(`/content/users/${actor.username}/items/${id}/reassign`, { targetUsername: target });
      return {
        path: { username: target, itemId: id },
        params: { targetUsername: actor.username },
        check: async () =>
          expect((await portal.get(`/content/items/${id}`, {}, bootstrap.token)).owner).toBe(actor.username),
      };
    },
  },
  "reassign an item into the account": {
    route: "items.reassign",
    setup: async (actor, target) => {
      const id = await newItem(actor);
      return {
        path: { username: actor.username, itemId: id },
        params: { targetUsername: target },
        check: async () =>
          expect((await portal.get(`/content/items/${id}`, {}, bootstrap.token)).owner).toBe(target),
      };
    },
  },
};

/** Route privileges that manage members' accounts: a route needing one is an account action. */
const ACCOUNT_ROUTE_PRIVILEGES = new Set([
  "portal:admin:updateUsers",
  "portal:admin:changeUserRoles",
  "portal:admin:disableUsers",
  "portal:admin:deleteUsers",
  "portal:admin:reassignItems",
]);

describe("custom-role administrators manage only accounts within their privileges", () => {
  const roleIds = {} as Record<CustomRole, string>;
  const actors = {} as Record<ActingAdmin, Account>;

  /** A fresh account holding `holder`, written to the store as `newUser` does. */
  async function newHolder(holder: AccountHolder): Promise<string> {
    const username = await newUser();
    const custom = holder in CUSTOM_ROLES ? (holder as CustomRole) : undefined;
    await portal.portico.db.kysely
      .updateTable("users")
      .set(
        custom
          ? { role: baseRoleOf(CUSTOM_ROLES[custom]), role_id: roleIds[custom] }
          : { role: holder, role_id: null },
      )
      .where("username", "=", username)
      .execute();
    return username;
  }

  beforeAll(async () => {
    for (const role of Object.keys(CUSTOM_ROLES) as CustomRole[]) {
      roleIds[role] = await newRole();
      await asAdmin(`/portals/self/roles/${roleIds[role]}/setPrivileges`, {
        privileges: { privileges: CUSTOM_ROLES[role] },
      });
      actors[role] = await portal.addUser(`mgr_${role}`, roleIds[role]);
    }
    actors.default = bootstrap;
  }, 30_000);

  it("covers every route that manages an account", () => {
    const names = new Set(allRoutes.map((r) => r.name));
    const covered = new Set(Object.values(ACCOUNT_ACTIONS).map((a) => a.route));
    for (const route of covered) expect(names).toContain(route);
    const managing = allRoutes
      .filter((r) => r.privilege !== undefined && ACCOUNT_ROUTE_PRIVILEGES.has(r.privilege))
      .map((r) => r.name);
    for (const route of managing) expect(covered).toContain(route);
    // users.update takes no privilege at the route (members update themselves): listed by hand.
    expect(covered).toContain("users.update");
  });

  for (const [action, { route: routeName, setup }] of Object.entries(ACCOUNT_ACTIONS)) {
    it(`${action}: refused on a broader account or a default administrator's, and writes nothing`, async () => {
      const route = routeNamed(routeName);
      const problems: string[] = [];
      for (const [acting, holder, want] of ACCOUNT_PAIRS) {
        const actor = actors[acting];
        const target = await newHolder(holder);
        const call = await setup(actor, target);
        const label = `${action} of a ${holder} account by a ${acting} administrator`;
        await judge(problems, label, want, route, call, actor.token);
      }
      expect(problems).toEqual([]);
    });
  }
});

/**
 * Role changes between administrators. Setting a role's privileges needs every privilege the role
 * has now as well as the new ones (README, Security): narrowing a broader role to what the caller
 * holds would bring its holders within the account rule above, and the caller could reset their
 * passwords. Renaming and deleting (a role nobody holds) change what no one may do.
 */
const VIEW_ONLY = ["portal:admin:viewUsers"];
/** Each acting role with manageRoles added; the roles acted on are fresh, with exactly these privileges. */
type RoleTarget = CustomRole | "empty";
const ROLE_TARGETS: Record<RoleTarget, readonly string[]> = { ...CUSTOM_ROLES, empty: [] };

const ROLE_PAIRS: [ActingAdmin, RoleTarget, Outcome][] = [
  ["narrow", "broad", E403],
  ["narrow", "full", E403],
  ["narrow", "narrow", OK],
  ["narrow", "empty", OK],
  ["broad", "narrow", OK],
  ["broad", "broad", OK],
  ["broad", "full", E403],
  ["full", "full", OK],
  ["default", "full", OK],
];

/** A role action on `roleId` (which holds `held`) by a holder of `acting`, and its outcome per pair. */
interface RoleAction {
  route: string;
  /** The outcome when the pair's is a refusal: actions that change no one's privileges pass. */
  refused: (pairOutcome: Outcome) => Outcome;
  setup: (roleId: string, held: readonly string[]) => Promise<Call>;
}

const privilegesOfRole = async (roleId: string) =>
  [...(await asAdmin(`/portals/self/roles/${roleId}/privileges`)).privileges].sort();

const ROLE_ACTIONS: Record<string, RoleAction> = {
  "narrow its privileges to viewUsers": {
    route: "roles.setPrivileges",
    refused: (o) => o,
    setup: async (roleId) => ({
      path: { roleId },
      params: { privileges: { privileges: VIEW_ONLY } },
      check: async () => expect(await privilegesOfRole(roleId)).toEqual(VIEW_ONLY),
    }),
  },
  "keep its privileges as they are": {
    route: "roles.setPrivileges",
    refused: (o) => o,
    setup: async (roleId, held) => ({
      path: { roleId },
      params: { privileges: { privileges: held } },
      check: async () => expect(await privilegesOfRole(roleId)).toEqual([...held].sort()),
    }),
  },
  rename: {
    route: "roles.update",
    refused: () => OK,
    setup: async (roleId) => {
      const name = `Renamed ${uid()}`;
      return {
        path: { roleId },
        params: { name },
        check: async () => expect((await asAdmin(`/portals/self/roles/${roleId}`)).name).toBe(name),
      };
    },
  },
  "delete (nobody holds it)": {
    route: "roles.delete",
    refused: () => OK,
    setup: async (roleId) => ({
      path: { roleId },
      check: async () =>
        expect((await portal.get(`/portals/self/roles/${roleId}`, {}, bootstrap.token)).error.code).toBe(400),
    }),
  },
};

describe("custom-role administrators change only roles within their privileges", () => {
  const actors = {} as Record<ActingAdmin, Account>;

  beforeAll(async () => {
    for (const role of Object.keys(CUSTOM_ROLES) as CustomRole[]) {
      const roleId = await newRole();
      await asAdmin(`/portals/self/roles/${roleId}/setPrivileges`, {
        privileges: { privileges: [...new Set([...CUSTOM_ROLES[role], "portal:admin:manageRoles"])] },
      });
      actors[role] = await portal.addUser(`roles_${role}`, roleId);
    }
    actors.default = bootstrap;
  }, 30_000);

  it("covers every route that changes a role someone may hold", () => {
    const covered = new Set(Object.values(ROLE_ACTIONS).map((a) => a.route));
    const changing = allRoutes
      .filter((r) => r.privilege === "portal:admin:manageRoles" && r.name !== "roles.create")
      .map((r) => r.name);
    expect([...covered].sort()).toEqual(changing.sort());
  });

  for (const [action, { route: routeName, refused, setup }] of Object.entries(ROLE_ACTIONS)) {
    it(`${action}: refused on a role broader than the caller, and writes nothing`, async () => {
      const route = routeNamed(routeName);
      const problems: string[] = [];
      for (const [acting, target, pairOutcome] of ROLE_PAIRS) {
        const want = pairOutcome === OK ? OK : refused(pairOutcome);
        const held = ROLE_TARGETS[target];
        const roleId = await newRole();
        if (held.length > 0)
          await asAdmin(`/portals/self/roles/${roleId}/setPrivileges`, { privileges: { privileges: held } });
        const call = await setup(roleId, held);
        const label = `${action} of a ${target} role by a ${acting} administrator`;
        await judge(problems, label, want, route, call, actors[acting].token);
      }
      expect(problems).toEqual([]);
    });
  }
});

describe("tokens of disabled users", () => {
  const kinds = ["member", "publisher", "admin", "custom"] as const;
  const users = {} as Record<(typeof kinds)[number], Account>;

  beforeAll(async () => {
    const roles = { member: "org_user", publisher: "org_publisher", admin: "org_admin", custom: customRole };
    for (const kind of kinds) users[kind] = await portal.addUser(`disabled_${kind}`, roles[kind]);
  }, 30_000);

  it("fail with 498 on every route that reads credentials, and sign-in is refused, until re-enabled", async () => {
    const problems: string[] = [];
    for (const kind of kinds) {
      const user = users[kind];
      expect((await portal.get("/community/self", {}, user.token)).username).toBe(user.username);
      // Administrators are not exempt: this one is not the last, so the disable is accepted.
      await asAdmin(`/community/users/${user.username}/disable`);
      for (const route of allRoutes) {
        if (NO_CREDENTIALS.has(route.name)) continue;
        const paths = typeof route.path === "string" ? 1 : route.path.length;
        for (let variant = 0; variant < paths; variant++) {
          for (const method of route.methods) {
            const r = await send(route, probeCall(user.username, variant), user.token, "param", method);
            if (r.error?.code !== 498 || r.error?.messageCode !== "GWM_0003") {
              problems.push(
                `${kind} ${method} ${urlOf(route, probeCall(user.username, variant))}: ${JSON.stringify(r.error ?? r)}`,
              );
            }
          }
        }
      }
      // The routes that read no token still refuse it where a token is their subject.
      const revoke = await send(
        routeNamed("oauth2.revokeToken"),
        { params: { auth_token: user.token } },
        undefined,
      );
      expect(revoke.error?.code, `${kind} revokeToken`).toBe(498);
      const exchange = await send(
        routeNamed("generateToken"),
        { params: { serverUrl: `${portal.portico.address}/rest/services`, token: user.token } },
        undefined,
      );
      expect(exchange.error?.code, `${kind} server token`).toBe(498);
      for (const transport of ["bearer", "esri"] as const) {
        const r = await send(routeNamed("community.self"), {}, user.token, transport);
        expect(r.error?.code, `${kind} ${transport}`).toBe(498);
      }
      const signIn = await portal.post("/generateToken", {
        username: user.username,
        password: user.password,
      });
      expect(signIn.error, `${kind} sign-in while disabled`).toMatchObject({
        code: 400,
        messageCode: "GWM_0008",
      });
      expect(signIn.token).toBeUndefined();
    }
    expect(problems).toEqual([]);

    for (const kind of kinds) {
      const user = users[kind];
      await asAdmin(`/community/users/${user.username}/enable`);
      // Disabling ended the old token for good; a new sign-in works everywhere again.
      expect((await portal.get("/community/self", {}, user.token)).error.code).toBe(498);
      const token = await portal.signIn(user.username, user.password);
      expect((await portal.get("/community/self", {}, token)).username).toBe(user.username);
      expect((await portal.get("/portals/self", {}, token)).user.username).toBe(user.username);
      const listing = await portal.get("/portals/self/users", {}, token);
      if (kind === "admin") expect(listing.error).toBeUndefined();
      else expect(listing.error.code).toBe(403);
    }
  });
});

describe("token transports", () => {
  it("a token as a parameter, as Authorization: Bearer and as X-Esri-Authorization: Bearer is one and the same", async () => {
    const cases: [string, Call, Account | "bogus", Outcome][] = [
      ["community.self", {}, acct.member, OK],
      ["community.self", {}, "bogus", { code: 498, messageCode: "GWM_0003" }],
      ["portals.get", {}, acct.publisher, OK],
      ["portals.get", {}, "bogus", { code: 498, messageCode: "GWM_0003" }],
      ["portals.users", {}, acct.member, E403],
      ["portals.users", {}, acct.admin, OK],
      ["webhooks.list", {}, acct.publisher, E403],
      ["webhooks.list", {}, acct.admin, OK],
      ["items.get", { path: { itemId: ownItem.member } }, acct.member, OK],
      ["items.get", { path: { itemId: ownItem.member } }, acct.publisher, ITEM_HIDDEN],
      ["content.user", { path: { username: acct.owner.username } }, acct.member, E403],
      ["featureServer.service", { path: { name: privateService } }, acct.admin, OK],
    ];
    for (const [name, call, who, want] of cases) {
      const route = routeNamed(name);
      const token = who === "bogus" ? "bogus-token" : who.token;
      const label = `${name} as ${who === "bogus" ? "bogus" : who.username}`;
      for (const method of route.methods) {
        const answers = [];
        for (const transport of ["param", "bearer", "esri"] as const) {
          answers.push(await send(route, call, token, transport, method));
        }
        const [first, ...rest] = answers;
        for (const other of rest) expect(other, `${label} ${method}`).toEqual(first);
        if (want === OK) expect(first.error, `${label} ${method}`).toBeUndefined();
        else expect(first.error, `${label} ${method}`).toMatchObject(want);
      }
    }
  });
});
