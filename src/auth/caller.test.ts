import { describe, expect, it } from "vitest";
import { PorticoError } from "../errors.js";
import {
  type Caller,
  isCaller,
  type ManagedAccount,
  privilegesOf,
  requireMayManageAccountOf,
} from "./caller.js";
import { ALL_PRIVILEGES, BUILT_IN_PRIVILEGES } from "./privileges.js";

const caller = (
  privileges: readonly string[],
  role: Caller["role"] = "org_admin",
  roleId: string | null = "r1",
) => ({
  userId: "u-caller",
  username: "caller",
  role,
  roleId,
  privileges: new Set(privileges),
});
const DEFAULT_ADMIN = caller(ALL_PRIVILEGES, "org_admin", null);

const builtIn = (role: string): ManagedAccount => ({
  username: `a_${role}`,
  role,
  role_id: null,
  role_privileges: null,
});
const custom = (privileges: readonly string[]): ManagedAccount => ({
  username: "a_custom",
  role: "org_admin",
  role_id: "r2",
  role_privileges: JSON.stringify(privileges),
});

/** The 403 a refusal throws, or "allowed". */
function decide(who: Caller, target: ManagedAccount): string {
  try {
    requireMayManageAccountOf(who, target, "update");
    return "allowed";
  } catch (err) {
    if (!(err instanceof PorticoError)) throw err;
    return `${err.code} ${err.details.join(" ")}`;
  }
}

describe("isCaller", () => {
  it("matches the caller's username in any case, and no other", () => {
    expect(isCaller(DEFAULT_ADMIN, "caller")).toBe(true);
    expect(isCaller(DEFAULT_ADMIN, "CaLLer")).toBe(true);
    expect(isCaller(DEFAULT_ADMIN, "caller2")).toBe(false);
    expect(isCaller(DEFAULT_ADMIN, "calle")).toBe(false);
  });
});

describe("privilegesOf", () => {
  it("reads a custom role's privileges and falls back to the built-in role's", () => {
    expect(
      privilegesOf({ role: "org_admin", roleId: "r", rolePrivileges: '["portal:user:joinGroup"]' }),
    ).toEqual(["portal:user:joinGroup"]);
    expect(privilegesOf({ role: "org_publisher", roleId: null, rolePrivileges: null })).toEqual(
      BUILT_IN_PRIVILEGES.org_publisher,
    );
    // A custom role whose row is gone grants nothing rather than its base role's privileges.
    expect(privilegesOf({ role: "org_admin", roleId: "gone", rolePrivileges: null })).toEqual([]);
  });
});

describe("requireMayManageAccountOf", () => {
  const updateUsers = ["portal:admin:viewUsers", "portal:admin:updateUsers"];

  it("refuses an administrator an account holding a privilege it lacks, naming the account and the privilege", () => {
    const narrow = caller(updateUsers);
    const answer = decide(narrow, custom([...updateUsers, "portal:admin:changeUserRoles"]));
    expect(answer).toMatch(/^403 /);
    expect(answer).toContain("'a_custom'");
    expect(answer).toContain("portal:admin:changeUserRoles");
    expect(answer).not.toContain("portal:admin:updateUsers");
    // A User account is broader than a role holding only administrative privileges.
    expect(decide(narrow, builtIn("org_user"))).toMatch(/^403 /);
  });

  it("allows an account whose privileges are a subset of the caller's, equal ones included", () => {
    const withUser = caller([...updateUsers, ...BUILT_IN_PRIVILEGES.org_user]);
    expect(decide(withUser, builtIn("org_user"))).toBe("allowed");
    expect(decide(withUser, custom(updateUsers))).toBe("allowed");
    expect(decide(withUser, custom([...updateUsers, ...BUILT_IN_PRIVILEGES.org_user]))).toBe("allowed");
    expect(decide(withUser, custom([]))).toBe("allowed");
    expect(decide(withUser, builtIn("org_publisher"))).toMatch(/^403 /);
  });

  it("keeps default administrators' accounts to default administrators, even from a role holding everything", () => {
    expect(decide(caller(ALL_PRIVILEGES), builtIn("org_admin"))).toBe(
      "403 Only a default administrator may update a default administrator.",
    );
    expect(decide(caller(ALL_PRIVILEGES), custom(ALL_PRIVILEGES))).toBe("allowed");
    expect(decide(DEFAULT_ADMIN, builtIn("org_admin"))).toBe("allowed");
    expect(decide(DEFAULT_ADMIN, custom(ALL_PRIVILEGES))).toBe("allowed");
  });

  it("lists at most five missing privileges", () => {
    const answer = decide(caller([]), builtIn("org_publisher"));
    expect(answer.match(/portal:|premium:|features:/g)).toHaveLength(5);
    expect(answer).toContain("…");
  });
});
