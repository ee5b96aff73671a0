import { expect } from "vitest";
import {
  type Account,
  ADMINS,
  type Area,
  acct,
  addLayer,
  as,
  type CallContext,
  type Case,
  c,
  E499,
  EVERYONE,
  holder,
  ITEM_HIDDEN,
  NOBODY_ELSE,
  newApp,
  newGroup,
  newItem,
  newOwnGroups,
  OK,
  OWNER_OR_ADMIN,
  ownGroup,
  ownGroupOf,
  PUBLISHERS,
  portal,
  row,
  type Setup,
  SIGNED_IN,
  uid,
} from "./harness.js";

/*
 * The security matrix of content (content-items, content-users, content-groups and search
 * routes): items and their comments, users' content and folders, a group's content, and search.
 */

/**
 * The same as `OWNER_OR_ADMIN` for changes of an item: another member who sees the item is
 * refused (403); one who does not even see it (`private`) hears that it does not exist, as for a
 * missing item (issue 12: this was 403, which told members that a private item of that id existed).
 */
const ITEM_OWNER_OR_ADMIN = [...OWNER_OR_ADMIN, c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK))];

const EXPECTED: Record<string, readonly Case[]> = {
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
  // ArcGIS's user item: the owner, and administrators who view every item.
  "items.userItem": ITEM_OWNER_OR_ADMIN,
  "items.protect": ITEM_OWNER_OR_ADMIN,
  // ArcGIS: the app's owner, and administrators (who view items).
  "items.registeredAppInfo": ITEM_OWNER_OR_ADMIN,
  "items.unprotect": ITEM_OWNER_OR_ADMIN,
  "items.move": ITEM_OWNER_OR_ADMIN,
  // ArcGIS reassign: "allows the administrator of an organization to reassign a member's item".
  "items.reassign": [c("own", ADMINS), c("other", ADMINS)],
  "items.share": ITEM_OWNER_OR_ADMIN,
  "items.unshare": ITEM_OWNER_OR_ADMIN,
  // ArcGIS "share item as group admin": a group's owner or manager shares an item they see into
  // that group; administrators with the share privileges any item into any group. Another
  // member's private item is hidden from the rest.
  "items.shareAsGroupManager": [
    c("manager", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.unshareAsGroupManager": [
    c("manager", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "content.shareItems": OWNER_OR_ADMIN,
  "content.unshareItems": OWNER_OR_ADMIN,
  "content.deleteItems": OWNER_OR_ADMIN,
  "content.moveItems": OWNER_OR_ADMIN,
  "folders.create": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "folders.delete": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  // Comments: anyone signed in who sees the item; ArcGIS updateComment is for the comment's owner
  // only; deleteComment for its owner, the item's owner or an administrator.
  "comments.add": [c("other", SIGNED_IN)],
  "comments.list": [c("other", SIGNED_IN)],
  "comments.update": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "comments.delete": [c("own", SIGNED_IN), c("ownItem", SIGNED_IN), c("other", ADMINS)],

  // The info folder is read as the item is; iteminfo.xml is made from the item, metadata stored.
  "items.info": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.metadata": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  // ArcGIS: "Only shows the groups that the calling user can access", of an item the caller sees.
  "items.groups": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.relatedItems": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  // updateinfo and deleteThumbnail change the item: its owner or an administrator.
  "items.updateInfo": ITEM_OWNER_OR_ADMIN,
  "items.deleteThumbnail": ITEM_OWNER_OR_ADMIN,
  // Resources are read as the item is (private ones aside, test/api/item-resources.test.ts);
  // changing them changes the item: its owner or an administrator.
  "items.resources": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.resource": [
    c("own", SIGNED_IN),
    c("other", SIGNED_IN),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
  "items.addResources": ITEM_OWNER_OR_ADMIN,
  "items.updateResources": ITEM_OWNER_OR_ADMIN,
  "items.removeResources": ITEM_OWNER_OR_ADMIN,
  // An upload in parts is the item's owner's or an administrator's, status included (ArcGIS).
  "items.addPart": ITEM_OWNER_OR_ADMIN,
  "items.parts": ITEM_OWNER_OR_ADMIN,
  "items.commit": ITEM_OWNER_OR_ADMIN,
  "items.cancel": ITEM_OWNER_OR_ADMIN,
  "items.status": ITEM_OWNER_OR_ADMIN,
  // Relationships are added in one's own content, from an item one owns, and deleted by whoever
  // added them (ArcGIS: "Users can only delete relationships they create").
  "relationships.add": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],
  "relationships.delete": [c("own", SIGNED_IN), c("other", NOBODY_ELSE)],

  // Searches narrow what they return; they refuse no one (README).
  "search.items": [c("org", EVERYONE)],

  // Anonymous callers: E499 (was GROUP_HIDDEN; see users.get in community.matrix.ts).
  "groups.content": [c("own", SIGNED_IN), c("other", SIGNED_IN)],
  // A group's content search: as its listing, whoever may see the group (README, Search).
  "groups.content.search": [c("own", SIGNED_IN), c("other", SIGNED_IN)],

  // createService publishes: portal:publisher:publishFeatures, in one's own account.
  "content.createService": [c("own", PUBLISHERS), c("other", NOBODY_ELSE)],
  // Export (ArcGIS): the service's owner and administrators export it; others only a service whose
  // capabilities include Extract ("own": such a service, exported into the caller's own account)
  // and that they see ("private": another member's private service is hidden). "other": another
  // member's org-shared service without Extract.
  "content.export": [
    c("own", SIGNED_IN),
    c("other", ADMINS),
    c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK)),
  ],
};

/** Services of `acct.owner` to export: org-shared with and without Extract, and a private one. */
let exportable: Promise<Record<"extract" | "plain" | "hidden", string>> | undefined;
function exportServices() {
  const make = async (capabilities: string, access: "org" | "private") => {
    const name = `svc_${uid()}`;
    const created = await as(acct.owner, `/content/users/${acct.owner.username}/createService`, {
      createParameters: { name, capabilities },
      outputType: "featureService",
    });
    await addLayer(name);
    if (access === "org") {
      await as(acct.owner, `/content/users/${acct.owner.username}/items/${created.itemId}/share`, {
        org: true,
      });
    }
    return created.itemId as string;
  };
  exportable ??= (async () => ({
    extract: await make("Query,Extract", "org"),
    plain: await make("Query", "org"),
    hidden: await make("Query,Extract", "private"),
  }))();
  return exportable;
}

/** Items with data and a thumbnail: each caller's own (private), and one of `owner` shared with the org. */
const ownItem = {} as Record<"member" | "publisher" | "admin" | "owner", string>;
let orgItem: string;

async function newFolder(owner: Account): Promise<string> {
  const r = await as(owner, `/content/users/${owner.username}/createFolder`, { title: `Folder ${uid()}` });
  return r.folder.id as string;
}

/** Metadata of an item, uploaded by its owner as clients do (`updateinfo`, multipart). */
async function addMetadata(owner: Account, itemId: string): Promise<void> {
  const body = new FormData();
  body.append("f", "json");
  body.append("token", owner.token);
  body.append("folderName", "metadata");
  body.append("file", new Blob(["<metadata/>"]), "metadata.xml");
  const res = await fetch(`${portal.api}/content/users/${owner.username}/items/${itemId}/updateinfo`, {
    method: "POST",
    body,
  });
  const r = (await res.json()) as any;
  if (!r.success) throw new Error(`updateinfo: ${JSON.stringify(r)}`);
}

/** A resource of an item, added by its owner as Esri's client does (text with a fileName). */
async function addResource(owner: Account, itemId: string): Promise<void> {
  const r = await as(owner, `/content/users/${owner.username}/items/${itemId}/addResources`, {
    text: "read me",
    fileName: "readme.txt",
    resourcesPrefix: "notes",
  });
  if (!r.success) throw new Error(`addResources: ${JSON.stringify(r)}`);
}

/** A fresh item (see `onFreshItem`) with a resource, `notes/readme.txt`. */
const onItemWithResource =
  (params: Record<string, unknown>): Setup =>
  async (ctx) => {
    const setup = await onFreshItem(async () => params)(ctx);
    const owner = holder(ctx);
    await addResource(owner, (setup.path as { itemId: string }).itemId);
    return setup;
  };

/**
 * A fresh item of the target's owner added with `multipart=true` (shared as `freshItem` says),
 * with part 1 stored when `withPart`, and the parameters of the call on it.
 */
const onUploadingItem =
  (withPart: boolean, params: Record<string, unknown> = {}): Setup =>
  async (ctx) => {
    const owner = holder(ctx);
    const r = await as(owner, `/content/users/${owner.username}/addItem`, {
      title: `Uploading ${uid()}`,
      type: "CSV",
      multipart: true,
      filename: "data.csv",
    });
    if (!r.success) throw new Error(`addItem: ${JSON.stringify(r)}`);
    if (ctx.on === "other")
      await as(owner, `/content/users/${owner.username}/items/${r.id}/share`, { org: true });
    if (withPart) {
      const body = new FormData();
      body.append("f", "json");
      body.append("token", owner.token);
      body.append("file", new Blob(["a,b\n"]), "part");
      const res = await fetch(
        `${portal.api}/content/users/${owner.username}/items/${r.id}/addPart?partNum=1`,
        {
          method: "POST",
          body,
        },
      );
      const added = (await res.json()) as any;
      if (!added.success) throw new Error(`addPart: ${JSON.stringify(added)}`);
    }
    return { path: { username: owner.username, itemId: r.id as string }, params };
  };

/** Two items of `owner` related by Map2Service, added by the owner. */
async function newRelationship(owner: Account) {
  const originItemId = await newItem(owner);
  const destinationItemId = await newItem(owner);
  const relationship = { originItemId, destinationItemId, relationshipType: "Map2Service" };
  await as(owner, `/content/users/${owner.username}/addRelationship`, relationship);
  return relationship;
}

async function newComment(author: Account, itemId: string): Promise<string> {
  const r = await as(author, `/content/items/${itemId}/addComment`, { comment: `note ${uid()}` });
  return r.commentId as string;
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

/**
 * For sharing by group managers: a fresh item of `owner` (shared with the organization for
 * `manager`, private for `private`) and a fresh group of `owner`, which the caller manages for
 * `manager` and is no member of for `private`.
 */
async function managedShare(ctx: CallContext): Promise<{ itemId: string; groupId: string }> {
  const itemId = await newItem(acct.owner, ctx.on === "manager" ? "org" : "private");
  const groupId = await newGroup(acct.owner);
  if (ctx.on === "manager" && ctx.who !== "anonymous") {
    await as(acct.owner, `/community/groups/${groupId}/addUsers`, { admins: ctx.me.username });
  }
  return { itemId, groupId };
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

const SETUP: Record<string, Setup> = {
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
  "items.userItem": onFreshItem(),
  "items.protect": onFreshItem(),
  "items.registeredAppInfo": async (ctx) => {
    const owner = holder(ctx);
    const app = await newApp(owner, ctx.on === "other" ? "org" : "private");
    return {
      path: { username: owner.username, itemId: app.itemId },
      check: (r) => expect(r.client_id).toBe(app.clientId),
    };
  },
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
  "items.shareAsGroupManager": async (ctx) => {
    const { itemId, groupId } = await managedShare(ctx);
    return {
      path: { itemId },
      params: { groups: groupId },
      check: (r) => expect(r).toMatchObject({ itemId, notSharedWith: [] }),
    };
  },
  "items.unshareAsGroupManager": async (ctx) => {
    const { itemId, groupId } = await managedShare(ctx);
    await as(acct.owner, `/content/users/${acct.owner.username}/items/${itemId}/share`, { groups: groupId });
    return {
      path: { itemId },
      params: { groups: groupId },
      check: (r) => expect(r).toMatchObject({ itemId, notUnsharedFrom: [] }),
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
  "content.deleteItems": async (ctx) => {
    const owner = holder(ctx);
    const id = await newItem(owner);
    return {
      path: { username: owner.username },
      params: { items: id },
      check: (r) => expect(r.results).toEqual([{ itemId: id, success: true }]),
    };
  },
  "content.moveItems": async (ctx) => {
    const owner = holder(ctx);
    const id = await newItem(owner);
    return {
      path: { username: owner.username },
      params: { items: id, folder: await newFolder(owner) },
      check: (r) => expect(r.results).toEqual([{ itemId: id, success: true }]),
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
  "items.info": readItem({ fileName: "iteminfo.xml" }),
  "items.metadata": readItem(),
  "items.groups": async (ctx) => ({
    ...(await readItem()(ctx)),
    check: (r) => expect(Array.isArray(r.other)).toBe(true),
  }),
  "items.relatedItems": async (ctx) => ({
    ...(await readItem()(ctx)),
    params: { relationshipTypes: "Map2Service", direction: "forward" },
    check: (r) => expect(r.relatedItems).toEqual([]),
  }),
  "items.updateInfo": async (ctx) => ({
    ...(await onFreshItem()(ctx)),
    files: { file: { name: "config.json", type: "application/json", bytes: Buffer.from("{}") } },
    check: (r) => expect(r.itemId).toBeTruthy(),
  }),
  "items.deleteThumbnail": onFreshItem(),
  "items.resources": async (ctx) => ({
    ...(await readItem()(ctx)),
    check: (r) => expect(r.resources).toEqual([expect.objectContaining({ resource: "notes/readme.txt" })]),
  }),
  // The template with one folder: `resources/:s1/:s2`.
  "items.resource": async (ctx) => ({
    ...(await readItem({ s1: "notes", s2: "readme.txt" })(ctx)),
    variant: 1,
  }),
  "items.addResources": onFreshItem(async () => ({ text: "{}", fileName: "config.json" })),
  "items.updateResources": onItemWithResource({
    text: "changed",
    fileName: "readme.txt",
    resourcesPrefix: "notes",
  }),
  "items.removeResources": onItemWithResource({ resource: "notes/readme.txt" }),
  "items.addPart": async (ctx) => ({
    ...(await onUploadingItem(false, { partNum: 1 })(ctx)),
    files: { file: { name: "part", type: "application/octet-stream", bytes: Buffer.from("a,b\n") } },
    check: (r) => expect(r.id).toBeTruthy(),
  }),
  "items.parts": async (ctx) => ({
    ...(await onUploadingItem(true)(ctx)),
    check: (r) => expect(r.parts).toEqual([1]),
  }),
  "items.commit": onUploadingItem(true),
  "items.cancel": onUploadingItem(true),
  "items.status": async (ctx) => ({
    ...(await onUploadingItem(false)(ctx)),
    check: (r) => expect(r.status).toBe("partial"),
  }),
  "relationships.add": async (ctx) => {
    const owner = holder(ctx);
    return {
      path: { username: owner.username },
      params: {
        originItemId: await newItem(owner),
        destinationItemId: await newItem(owner),
        relationshipType: "Map2Service",
      },
    };
  },
  "relationships.delete": async (ctx) => {
    const owner = holder(ctx);
    return { path: { username: owner.username }, params: await newRelationship(owner) };
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

  "groups.content": async (ctx) => {
    const id = ctx.on === "own" ? ownGroupOf(holder(ctx)) : ownGroup.owner;
    return { path: { groupId: id }, check: (r) => expect(Array.isArray(r.items)).toBe(true) };
  },

  "groups.content.search": async (ctx) => {
    const id = ctx.on === "own" ? ownGroupOf(holder(ctx)) : ownGroup.owner;
    return {
      path: { groupId: id },
      params: { q: "Item", countFields: "type" },
      check: (r) => expect(r.aggregations.counts[0].fieldName).toBe("type"),
    };
  },

  "content.createService": async (ctx) => ({
    path: { username: holder(ctx).username },
    params: { createParameters: { name: `svc_${uid()}` }, outputType: "featureService" },
  }),
  "content.export": async (ctx) => {
    const services = await exportServices();
    const itemId =
      ctx.on === "own" ? services.extract : ctx.on === "other" ? services.plain : services.hidden;
    return {
      // Into the caller's own account (an anonymous caller names the owner's).
      path: { username: ctx.me.username },
      params: { itemId, exportFormat: "CSV", exportParameters: { layers: [{ id: 0 }] } },
      // The job finishes before the next call, whose refusal must write nothing.
      check: async (r) => {
        expect(r.exportItemId).toBeTruthy();
        for (let i = 0; ; i++) {
          const status = await as(ctx.me, `/content/users/${ctx.me.username}/items/${r.exportItemId}/status`);
          if (status.status !== "processing") {
            expect(status.status).toBe("completed");
            return;
          }
          if (i > 400) throw new Error(`export ${r.exportItemId} still processing`);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      },
    };
  },
};

export const contentArea: Area = {
  files: [
    "content-items.routes.ts",
    "content-users.routes.ts",
    "content-groups.routes.ts",
    "search.routes.ts",
  ],
  expected: EXPECTED,
  setup: SETUP,
  helpers: ["invitee"],
  async prepare() {
    for (const n of ["member", "publisher", "admin", "owner"] as const) ownItem[n] = await newItem(acct[n]);
    orgItem = await newItem(acct.owner, "org");
    for (const n of ["member", "publisher", "admin", "owner"] as const)
      await addMetadata(acct[n], ownItem[n]);
    await addMetadata(acct.owner, orgItem);
    for (const n of ["member", "publisher", "admin", "owner"] as const)
      await addResource(acct[n], ownItem[n]);
    await addResource(acct.owner, orgItem);
    // Sharing and unsharing use the callers' groups; a group's content is read from them.
    await newOwnGroups();
  },
};
