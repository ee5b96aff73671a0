import { expect } from "vitest";
import { type Receiver, startReceiver } from "../../helpers/receiver.js";
import {
  ADMINS,
  type Area,
  acct,
  as,
  asAdmin,
  bootstrap,
  type Case,
  c,
  E499,
  EVERYONE,
  holder,
  ITEM_HIDDEN,
  mainId,
  newApp,
  newRole,
  newUser,
  OK,
  OWNER_OR_ADMIN,
  PUBLISHERS,
  portal,
  row,
  type Setup,
  SIGNED_IN,
  uid,
  unexpected,
} from "./harness.js";

/*
 * The security matrix of the portal itself (the sharing, oauth2, portals, portals-roles,
 * portals-webhooks and portaladmin routes): signing in and out, the organization and its settings,
 * roles, webhooks, and creating users.
 */

/**
 * `platformSelf` as the matrix calls it (a token, no app headers, no sign-in cookie): refused for
 * everyone; test/api/oauth2.test.ts calls it with the headers and the cookie.
 */
const NOT_SIGNED_IN = { code: 400, messageCode: "PARAM_0001" };

const EXPECTED: Record<string, readonly Case[]> = {
  // Sign-in reads no token (`wire.md` §3).
  root: [c("org", EVERYONE)],
  info: [c("org", EVERYONE)],
  generateToken: [c("own", EVERYONE)],
  // Possession of a token is what lets one end it.
  "oauth2.revokeToken": [c("own", EVERYONE)],
  // OAuth 2.0 (README, OAuth 2.0): the sign-in page and the token endpoint read no token; what
  // they grant depends on the password, code, refresh token or client secret sent.
  "oauth2.authorize": [c("org", EVERYONE)],
  "oauth2.authorize.signIn": [c("own", EVERYONE)],
  "oauth2.token": [c("own", EVERYONE)],
  // The API directory's sign-in (README, The API directory): pages that read no token; what they
  // grant depends on the password and the form's secret and cookie, which the matrix does not send.
  "directory.signInPage": [c("org", EVERYONE)],
  "directory.signIn": [c("own", EVERYONE)],
  "directory.signOutPage": [c("org", EVERYONE)],
  "directory.signOut": [c("own", EVERYONE)],
  "oauth2.exchangeToken": [c("own", EVERYONE)],
  "oauth2.validateAppAccess": [c("own", EVERYONE)],
  // Only the portal's sign-in cookie answers: no token, whoever holds it, gets anything.
  "oauth2.platformSelf": [c("own", row(NOT_SIGNED_IN, NOT_SIGNED_IN, NOT_SIGNED_IN, NOT_SIGNED_IN))],
  // ArcGIS registerApp: "the item must be owned by the user invoking this operation".
  "oauth2.registerApp": [c("own", SIGNED_IN), c("other", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, ITEM_HIDDEN))],
  // "The app owner has access to the registered app resource. This would include the
  // organization administrator as well."
  "oauth2.apps.get": [...OWNER_OR_ADMIN, c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK))],
  "oauth2.apps.update": [...OWNER_OR_ADMIN, c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK))],
  "oauth2.apps.unregister": [...OWNER_OR_ADMIN, c("private", row(E499, ITEM_HIDDEN, ITEM_HIDDEN, OK))],

  // `portals/self` answers everyone; anonymous callers see less (`wire.md` §3, §5).
  "portals.get": [c("org", EVERYONE)],
  // interface.md §5: organization update and updateUserRole are for administrators.
  "portals.update": [c("website", ADMINS), c("security", ADMINS), c("utility", ADMINS)],
  // Nobody promotes themselves: `own` asks for org_admin.
  "portals.updateUserRole": [c("own", ADMINS), c("other", ADMINS)],
  "portals.users": [c("org", ADMINS)],
  // The organization's user search: administrators who view users (README, Search).
  "portals.users.search": [c("org", ADMINS)],
  // The settings view, like portals/self, answers anonymous callers too (narrowed).
  "portals.settings": [c("org", EVERYONE)],
  // Service names matter to those who publish hosted services.
  "portals.isServiceNameAvailable": [c("org", PUBLISHERS)],
  // Notifying members by username: administrators who view users (it changes no account).
  "portals.createNotification": [c("org", ADMINS)],
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

  "portaladmin.createUser": [c("org", ADMINS)],

  // interface.md §4.2, §5: webhooks are for portal administrators (portal:admin:manageWebhooks).
  // README "Signing keys": administrators only (manageCollaborations and manageSecurity).
  "collaborations.key": [c("org", ADMINS)],
  "collaborations.key.rotate": [c("org", ADMINS)],
  "collaborations.key.revoke": [c("org", ADMINS)],
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
};

let receiver: Receiver;
let customRole: string;
let hook: string;

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

const SETUP: Record<string, Setup> = {
  root: async () => ({}),
  "collaborations.key": async () => ({
    check: (r) => expect(r.keyFingerprint).toMatch(/^[0-9a-f]{2}(:[0-9a-f]{2}){15}$/),
  }),
  "collaborations.key.rotate": async () => ({
    params: { revokePrevious: false },
    check: (r) => expect(r.previousKeyFingerprint).not.toBe(r.keyFingerprint),
  }),
  // A key this portal retired: the one a rotation just replaced.
  "collaborations.key.revoke": async () => {
    const rotated = await asAdmin("/portals/self/collaborationKey/rotate", {});
    return {
      params: { keyFingerprint: rotated.previousKeyFingerprint },
      check: (r) => expect(r.keyFingerprint).toBe(rotated.previousKeyFingerprint),
    };
  },

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
  "oauth2.authorize": async () => {
    const app = await newApp(acct.owner);
    return {
      params: { client_id: app.clientId, redirect_uri: "urn:ietf:wg:oauth:2.0:oob", response_type: "code" },
    };
  },
  // Without the form's secret and its cookie the post signs nobody in: the form is shown again.
  "oauth2.authorize.signIn": async ({ me }) => {
    const app = await newApp(acct.owner);
    return {
      params: {
        client_id: app.clientId,
        redirect_uri: "urn:ietf:wg:oauth:2.0:oob",
        response_type: "code",
        username: me.username,
        password: me.password,
      },
      check: (r) => expect(r.contentType).toMatch(/text\/html/),
    };
  },
  "directory.signInPage": async () => ({
    check: (r) => expect(r.contentType).toMatch(/text\/html/),
  }),
  // Without the form's secret and its cookie the post signs nobody in: the form is shown again.
  "directory.signIn": async ({ me }) => ({
    params: { username: me.username, password: me.password },
    check: (r) => expect(r.contentType).toMatch(/text\/html/),
  }),
  "directory.signOutPage": async () => ({
    check: (r) => expect(r.contentType).toMatch(/text\/html/),
  }),
  // Without a cookie there is nothing to end: the browser is sent to the directory's root.
  "directory.signOut": async () => ({
    check: (r) => expect(r.contentType).toMatch(/text\/html/),
  }),
  "oauth2.token": async () => {
    const app = await newApp(acct.owner);
    return {
      params: { grant_type: "client_credentials", client_id: app.clientId, client_secret: app.clientSecret },
      check: (r) => expect(typeof r.access_token).toBe("string"),
    };
  },
  "oauth2.exchangeToken": async ({ me }) => {
    const app = await newApp(acct.owner);
    return {
      params: { token: me.token, client_id: app.clientId },
      check: async (r) =>
        expect((await portal.get("/community/self", {}, r.token)).username).toBe(me.username),
    };
  },
  "oauth2.validateAppAccess": async ({ me }) => {
    const app = await newApp(acct.owner);
    return { params: { token: me.token, client_id: app.clientId }, check: (r) => expect(r.valid).toBe(true) };
  },
  "oauth2.platformSelf": async () => ({}),
  "oauth2.registerApp": async (ctx) => {
    const owner = holder(ctx);
    const item = await as(owner, `/content/users/${owner.username}/addItem`, {
      title: `App ${uid()}`,
      type: "Application",
    });
    return {
      params: { itemId: item.id, appType: "browser", redirect_uris: '["https://app.example.com/cb"]' },
      check: (r) => expect(r.client_id).toMatch(/^[A-Za-z0-9]{16}$/),
    };
  },
  "oauth2.apps.get": async (ctx) => {
    const app = await newApp(holder(ctx), ctx.on === "other" ? "org" : "private");
    return { path: { clientId: app.clientId }, check: (r) => expect(r.itemId).toBe(app.itemId) };
  },
  "oauth2.apps.update": async (ctx) => {
    const app = await newApp(holder(ctx), ctx.on === "other" ? "org" : "private");
    return {
      path: { clientId: app.clientId },
      params: { redirect_uris: '["https://app.example.com/cb"]' },
      check: (r) => expect(r.redirect_uris).toEqual(["https://app.example.com/cb"]),
    };
  },
  "oauth2.apps.unregister": async (ctx) => {
    const app = await newApp(holder(ctx), ctx.on === "other" ? "org" : "private");
    return { path: { clientId: app.clientId }, check: (r) => expect(r.itemId).toBe(app.itemId) };
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
  "portals.users.search": async () => ({
    params: { q: "username:sec_*" },
    check: (r) => expect(r.total).toBeGreaterThan(3),
  }),
  "portals.settings": async ({ who }) => ({
    check: (r) => expect(r.helperServices).toEqual(who === "anonymous" ? {} : expect.any(Object)),
  }),
  "portals.isServiceNameAvailable": async () => ({
    params: { name: `free_${uid()}`, type: "Feature Service" },
    check: (r) => expect(r).toEqual({ available: true }),
  }),
  "portals.createNotification": async () => ({
    params: { users: acct.invitee.username, subject: "s", message: `m ${uid()}` },
  }),
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
};

export const portalArea: Area = {
  files: [
    "sharing.routes.ts",
    "directory.routes.ts",
    "oauth2.routes.ts",
    "portals.routes.ts",
    "portals-roles.routes.ts",
    "portals-webhooks.routes.ts",
    "portaladmin.routes.ts",
  ],
  expected: EXPECTED,
  setup: SETUP,
  helpers: ["invitee"],
  async prepare() {
    receiver = await startReceiver();
    customRole = await newRole();
    hook = await newWebhook();
  },
  async release() {
    await receiver?.close();
  },
};
