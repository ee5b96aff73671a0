import { beforeAll, describe, expect, it } from "vitest";
import { baseRoleOf } from "../../../src/auth/privileges.js";
import { allRoutes } from "../../../src/http/routes/index.js";
import { communityArea } from "./community.matrix.js";
import {
  type Account,
  type ActingAdmin,
  asAdmin,
  bootstrap,
  type Call,
  CUSTOM_ROLES,
  type CustomRole,
  describeMatrix,
  E403,
  judge,
  NO_CREDENTIALS,
  newItem,
  newRole,
  newUser,
  OK,
  type Outcome,
  portal,
  routeNamed,
  send,
  uid,
  urlOf,
  usePortal,
} from "./harness.js";

// The community's security matrix (community.matrix.ts); then who may manage whose account, and
// what the tokens of disabled users can still do.
usePortal(communityArea);
describeMatrix(communityArea);

/** Values for any route's `:params`: enough to reach authentication, which comes first. */
/**
 * Every path parameter of every route, filled with a value that names nothing, so that a new
 * route's parameters need no entry here: ids are 32 hexadecimal digits, the rest a plain name.
 */
const PROBE_PATH: Record<string, string> = Object.fromEntries(
  allRoutes
    .flatMap((route) => (Array.isArray(route.path) ? route.path : [route.path]))
    .flatMap((template) => [...template.matchAll(/:(\w+)/g)].map((m) => m[1] as string))
    .map((name) => [name, /Id$/.test(name) ? "0123456789abcdef0123456789abcdef" : "nothing_here"]),
);

function probeCall(username: string, variant: number): Call {
  return {
    variant,
    path: {
      ...PROBE_PATH,
      portalId: "self",
      username,
      applicant: username,
      layerId: "0",
      objectId: "1",
      attachmentId: "1",
      op: "state",
    },
  };
}

/**
 * Account actions between administrators, custom roles on both sides. An administrator may act on
 * another account only when that account's privileges are a subset of its own, and on a default
 * administrator's account only as a default administrator (README, Security): otherwise a role
 * with updateUsers could reset the password of a broader account and sign in as it.
 *
 * The custom roles (`CUSTOM_ROLES`, harness.ts) all hold the administrative privileges of the
 * actions; they differ in the rest.
 */
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

describe("tokens of disabled users", () => {
  const kinds = ["member", "publisher", "admin", "custom"] as const;
  const users = {} as Record<(typeof kinds)[number], Account>;

  beforeAll(async () => {
    const customRole = await newRole();
    const roles = { member: "org_user", publisher: "org_publisher", admin: "org_admin", custom: customRole };
    for (const kind of kinds) users[kind] = await portal.addUser(`disabled_${kind}`, roles[kind]);
  }, 30_000);

  // About 600 requests (every route that reads credentials, for four kinds of user, with each
  // transport): the default 30 s is too little when the suite shares two cores with others.
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
  }, 120_000);
});
