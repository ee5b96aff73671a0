import { beforeAll, describe, expect, it } from "vitest";
import { allRoutes } from "../../../src/http/routes/index.js";
import {
  type Account,
  type ActingAdmin,
  acct,
  asAdmin,
  bootstrap,
  type Call,
  CUSTOM_ROLES,
  type CustomRole,
  describeMatrix,
  E403,
  ITEM_HIDDEN,
  judge,
  newItem,
  newRole,
  newService,
  OK,
  type Outcome,
  portal,
  routeNamed,
  send,
  uid,
  usePortal,
} from "./harness.js";
import { portalArea } from "./portal.matrix.js";

// The security matrix of the portal itself (portal.matrix.ts); then who may change which role, and
// the three ways a token is sent.
usePortal(portalArea);
describeMatrix(portalArea);

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

describe("token transports", () => {
  /** A private item of `member`, and a private service of `owner`. */
  let memberItem: string;
  let privateService: string;

  beforeAll(async () => {
    memberItem = await newItem(acct.member);
    privateService = await newService(acct.owner);
  }, 30_000);

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
      ["items.get", { path: { itemId: memberItem } }, acct.member, OK],
      ["items.get", { path: { itemId: memberItem } }, acct.publisher, ITEM_HIDDEN],
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
