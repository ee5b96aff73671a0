import type { Caller } from "../auth/caller.js";
import type { Queryable } from "../db/database.js";

/**
 * Who may read what (`wire.md` §6): the owner always; administrators with `portal:admin:viewItems`
 * (items) or `portal:admin:viewGroups` (groups); `public` content anyone when the organization is
 * public (signed-in members otherwise); `org` content every signed-in member; `shared` and
 * `private` content the members of a group it is shared with.
 */
export interface Viewer {
  caller: Caller | null;
  /** Ids of the groups the caller belongs to. */
  groupIds: ReadonlySet<string>;
  /** Whether anonymous callers may read public content (`access` of the organization). */
  orgIsPublic: boolean;
}

export async function viewerOf(q: Queryable, caller: Caller | null, orgIsPublic: boolean): Promise<Viewer> {
  if (!caller) return { caller, groupIds: new Set(), orgIsPublic };
  const rows = await q
    .selectFrom("group_members")
    .select("group_id")
    .where("user_id", "=", caller.userId)
    .execute();
  return { caller, groupIds: new Set(rows.map((r) => r.group_id)), orgIsPublic };
}

/** Whether the viewer may see an item with this owner, access and sharing. */
export function canViewItem(
  viewer: Viewer,
  item: { owner_id: string; access: string },
  sharedGroupIds: readonly string[],
): boolean {
  const { caller } = viewer;
  if (item.access === "public" && (caller || viewer.orgIsPublic)) return true;
  if (!caller) return false;
  if (caller.userId === item.owner_id || caller.privileges.has("portal:admin:viewItems")) return true;
  if (item.access === "org" || item.access === "public") return true;
  return sharedGroupIds.some((id) => viewer.groupIds.has(id));
}

/** Whether the viewer may see a group with this owner and access. */
export function canViewGroup(
  viewer: Viewer,
  group: { id: string; owner_id: string; access: string },
): boolean {
  const { caller } = viewer;
  if (group.access === "public" && (caller || viewer.orgIsPublic)) return true;
  if (!caller) return false;
  if (caller.privileges.has("portal:admin:viewGroups") || viewer.groupIds.has(group.id)) return true;
  return group.access === "org" || group.access === "public";
}
