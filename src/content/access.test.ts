import { describe, expect, it } from "vitest";
import { type Caller, makeCaller, unseen } from "../auth/caller.js";
import { errors } from "../errors.js";
import { canViewGroup, canViewItem, type Viewer } from "./access.js";

const caller = (userId: string, role = "org_user"): Caller =>
  makeCaller({ userId, username: userId, role, roleId: null, rolePrivileges: null });

const viewer = (who: Caller | null, groupIds: string[] = [], orgIsPublic = false): Viewer => ({
  caller: who,
  groupIds: new Set(groupIds),
  orgIsPublic,
});

describe("unseen", () => {
  it("asks an anonymous caller for a token and tells a signed-in one that it does not exist", () => {
    expect(unseen(null, () => errors.itemNotFound("x"))).toMatchObject({
      code: 499,
      messageCode: "GWM_0002",
    });
    expect(unseen(caller("u1"), () => errors.itemNotFound("x"))).toMatchObject({
      code: 400,
      messageCode: "CONT_0001",
    });
    expect(unseen(caller("u1"), () => errors.groupNotFound("g"))).toMatchObject({
      code: 400,
      messageCode: "COM_0036",
    });
  });

  it("gives an anonymous caller the same answer whatever the resource", () => {
    const item = unseen(null, () => errors.itemNotFound("a"));
    const user = unseen(null, () => errors.userNotFound("b"));
    const service = unseen(null, () => errors.serviceNotFound("c"));
    expect(JSON.stringify([item.code, item.message, item.details])).toBe(
      JSON.stringify([user.code, user.message, user.details]),
    );
    expect(service.code).toBe(499);
  });
});

describe("canViewItem", () => {
  const item = (access: string) => ({ owner_id: "owner", access });

  it("shows public items to anonymous callers only in a public organization", () => {
    expect(canViewItem(viewer(null, [], true), item("public"), [])).toBe(true);
    expect(canViewItem(viewer(null, [], false), item("public"), [])).toBe(false);
    for (const access of ["org", "shared", "private"]) {
      expect(canViewItem(viewer(null, [], true), item(access), ["g1"]), access).toBe(false);
    }
  });

  it("shows org items to every member, shared ones to the groups they are shared with", () => {
    const member = caller("m");
    expect(canViewItem(viewer(member), item("org"), [])).toBe(true);
    expect(canViewItem(viewer(member), item("public"), [])).toBe(true);
    expect(canViewItem(viewer(member, ["g1"]), item("shared"), ["g1"])).toBe(true);
    expect(canViewItem(viewer(member, ["g2"]), item("shared"), ["g1"])).toBe(false);
    expect(canViewItem(viewer(member), item("private"), [])).toBe(false);
  });

  it("shows everything to the owner and to administrators who view items", () => {
    expect(canViewItem(viewer(caller("owner")), item("private"), [])).toBe(true);
    expect(canViewItem(viewer(caller("admin", "org_admin")), item("private"), [])).toBe(true);
  });
});

describe("canViewGroup", () => {
  const group = (access: string) => ({ id: "g1", owner_id: "owner", access });

  it("shows public groups to anonymous callers only in a public organization", () => {
    expect(canViewGroup(viewer(null, [], true), group("public"))).toBe(true);
    expect(canViewGroup(viewer(null, [], false), group("public"))).toBe(false);
    expect(canViewGroup(viewer(null, [], true), group("org"))).toBe(false);
  });

  it("shows private groups to their members and to administrators who view groups", () => {
    expect(canViewGroup(viewer(caller("m")), group("private"))).toBe(false);
    expect(canViewGroup(viewer(caller("m"), ["g1"]), group("private"))).toBe(true);
    expect(canViewGroup(viewer(caller("a", "org_admin")), group("private"))).toBe(true);
    expect(canViewGroup(viewer(caller("m")), group("org"))).toBe(true);
  });
});
