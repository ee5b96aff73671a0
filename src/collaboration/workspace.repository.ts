import { later, type Queryable } from "../db/database.js";
import type { AccessMode, WorkspaceLinkTable, WorkspaceTable } from "../db/schema.js";
import type { WorkspaceConfig } from "./collaboration-types.js";

/** Workspaces of collaborations, the participants' access modes in them and this portal's group links. */

// ---------------------------------------------------------------- workspaces

export interface NewWorkspaceRow {
  id: string;
  collaborationId: string;
  name: string;
  description: string;
  config: WorkspaceConfig;
}

/** A workspace starts with no successful sync (`last_sync_success` -1). */
export async function insertWorkspace(q: Queryable, w: NewWorkspaceRow, now: number): Promise<void> {
  await q
    .insertInto("workspaces")
    .values({
      id: w.id,
      collaboration_id: w.collaborationId,
      name: w.name,
      description: w.description,
      config: JSON.stringify(w.config),
      last_sync_success: -1,
      created: now,
      modified: now,
    })
    .execute();
}

export function workspaceConfig(row: WorkspaceTable): WorkspaceConfig {
  return JSON.parse(row.config) as WorkspaceConfig;
}

export async function updateWorkspace(
  q: Queryable,
  id: string,
  patch: {
    name?: string | undefined;
    description?: string | undefined;
    config?: WorkspaceConfig | undefined;
  },
  now: number,
): Promise<void> {
  await later(
    q,
    q
      .updateTable("workspaces")
      .set({
        ...(patch.name !== undefined ? { name: patch.name } : {}),
        ...(patch.description !== undefined ? { description: patch.description } : {}),
        ...(patch.config !== undefined ? { config: JSON.stringify(patch.config) } : {}),
        modified: now,
      })
      .where("id", "=", id)
      .compile(),
  );
}

/** Its answer is not read: in a transaction on PostgreSQL it travels with the next statement (`later`). */
export async function recordSyncSuccess(q: Queryable, workspaceId: string, at: number): Promise<void> {
  await later(
    q,
    q.updateTable("workspaces").set({ last_sync_success: at }).where("id", "=", workspaceId).compile(),
  );
}

/** The workspace `workspaceId` of collaboration `collaborationId`. */
export function findWorkspace(
  q: Queryable,
  collaborationId: string,
  workspaceId: string,
): Promise<WorkspaceTable | undefined> {
  return q
    .selectFrom("workspaces")
    .selectAll()
    .where("id", "=", workspaceId)
    .where("collaboration_id", "=", collaborationId)
    .executeTakeFirst();
}

export function findWorkspaceById(q: Queryable, workspaceId: string): Promise<WorkspaceTable | undefined> {
  return q.selectFrom("workspaces").selectAll().where("id", "=", workspaceId).executeTakeFirst();
}

/** The workspaces with these ids, in whichever collaboration. */
export function findWorkspacesById(q: Queryable, ids: readonly string[]): Promise<WorkspaceTable[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return q
    .selectFrom("workspaces")
    .selectAll()
    .where("id", "in", [...ids])
    .execute();
}

export async function workspaceNameTaken(
  q: Queryable,
  collaborationId: string,
  name: string,
): Promise<boolean> {
  const same = await q
    .selectFrom("workspaces")
    .select("id")
    .where("collaboration_id", "=", collaborationId)
    .where("name", "=", name)
    .executeTakeFirst();
  return same !== undefined;
}

export function listWorkspaces(q: Queryable, collaborationId: string): Promise<WorkspaceTable[]> {
  return q
    .selectFrom("workspaces")
    .selectAll()
    .where("collaboration_id", "=", collaborationId)
    .orderBy("created")
    .execute();
}

export async function workspaceIdsOf(
  q: Queryable,
  collaborationId: string,
  among?: readonly string[],
): Promise<string[]> {
  if (among?.length === 0) return [];
  let query = q.selectFrom("workspaces").select("id").where("collaboration_id", "=", collaborationId);
  if (among) query = query.where("id", "in", [...among]);
  return (await query.execute()).map((w) => w.id);
}

/** Deletes the workspaces; their modes, links and schedules go with them (cascade). */
export async function deleteWorkspaces(q: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length > 0)
    await q
      .deleteFrom("workspaces")
      .where("id", "in", [...ids])
      .execute();
}

// ---------------------------------------------------------------- access modes

/** Workspace id -> portal id -> access mode. */
export async function modesOf(
  q: Queryable,
  workspaceIds: readonly string[],
): Promise<Map<string, Map<string, AccessMode>>> {
  const out = new Map<string, Map<string, AccessMode>>();
  if (workspaceIds.length === 0) return out;
  const rows = await q
    .selectFrom("workspace_modes")
    .selectAll()
    .where("workspace_id", "in", [...workspaceIds])
    .execute();
  for (const r of rows) {
    const m = out.get(r.workspace_id) ?? new Map<string, AccessMode>();
    out.set(r.workspace_id, m);
    m.set(r.portal_id, r.access_mode);
  }
  return out;
}

export interface Mode {
  workspaceId: string;
  portalId: string;
  mode: AccessMode;
}

export async function insertModes(q: Queryable, modes: readonly Mode[]): Promise<void> {
  if (modes.length === 0) return;
  await later(
    q,
    q
      .insertInto("workspace_modes")
      .values(modes.map((m) => ({ workspace_id: m.workspaceId, portal_id: m.portalId, access_mode: m.mode })))
      .compile(),
  );
}

export async function setMode(q: Queryable, m: Mode): Promise<void> {
  await q
    .deleteFrom("workspace_modes")
    .where("workspace_id", "=", m.workspaceId)
    .where("portal_id", "=", m.portalId)
    .execute();
  await insertModes(q, [m]);
}

/** Replaces every access mode of a workspace. */
export async function replaceModes(q: Queryable, workspaceId: string, modes: readonly Mode[]): Promise<void> {
  await later(q, q.deleteFrom("workspace_modes").where("workspace_id", "=", workspaceId).compile());
  await insertModes(q, modes);
}

export async function deleteModesOf(q: Queryable, workspaceIds: readonly string[], portalId: string) {
  if (workspaceIds.length > 0)
    await q
      .deleteFrom("workspace_modes")
      .where("workspace_id", "in", [...workspaceIds])
      .where("portal_id", "=", portalId)
      .execute();
}

/** A participant's access modes in the workspaces of its collaboration, by workspace id. */
export async function participantModes(
  q: Queryable,
  collaborationId: string,
  portalId: string,
): Promise<Record<string, AccessMode>> {
  const modes = await q
    .selectFrom("workspace_modes as m")
    .innerJoin("workspaces as w", "w.id", "m.workspace_id")
    .select(["m.workspace_id", "m.access_mode"])
    .where("w.collaboration_id", "=", collaborationId)
    .where("m.portal_id", "=", portalId)
    .execute();
  return Object.fromEntries(modes.map((m) => [m.workspace_id, m.access_mode]));
}

/** The participants that have an access mode in a workspace, with that mode. */
export function workspaceParticipants(q: Queryable, workspace: WorkspaceTable) {
  return q
    .selectFrom("workspace_modes as m")
    .innerJoin("collaboration_participants as p", (j) =>
      j.onRef("p.portal_id", "=", "m.portal_id").on("p.collaboration_id", "=", workspace.collaboration_id),
    )
    .select(["m.portal_id", "m.access_mode", "p.portal_name", "p.role"])
    .where("m.workspace_id", "=", workspace.id)
    .execute();
}

// ---------------------------------------------------------------- group links

export interface Link {
  workspaceId: string;
  groupId: string;
  realtime: boolean;
  copyFeatureData: boolean;
  copyByRefIfCopyFail: boolean;
}

export function findLink(q: Queryable, workspaceId: string): Promise<WorkspaceLinkTable | undefined> {
  return q
    .selectFrom("workspace_links")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}

export async function groupLinkedElsewhere(
  q: Queryable,
  groupId: string,
  workspaceId: string,
): Promise<boolean> {
  const elsewhere = await q
    .selectFrom("workspace_links")
    .select("workspace_id")
    .where("group_id", "=", groupId)
    .where("workspace_id", "!=", workspaceId)
    .executeTakeFirst();
  return elsewhere !== undefined;
}

/** Writes a workspace's link on this portal: `replacing` the one it has, or its first. */
export async function saveLink(q: Queryable, link: Link, replacing: boolean, now: number): Promise<void> {
  const row = {
    workspace_id: link.workspaceId,
    group_id: link.groupId,
    realtime: link.realtime ? 1 : 0,
    copy_feature_data: link.copyFeatureData ? 1 : 0,
    copy_by_ref_if_copy_fail: link.copyByRefIfCopyFail ? 1 : 0,
    modified: now,
  };
  if (replacing)
    await q.updateTable("workspace_links").set(row).where("workspace_id", "=", link.workspaceId).execute();
  else await q.insertInto("workspace_links").values(row).execute();
}

export async function deleteLink(q: Queryable, workspaceId: string): Promise<void> {
  await q.deleteFrom("workspace_links").where("workspace_id", "=", workspaceId).execute();
}

/** The links with realtime sync on, with their workspace's collaboration and this portal's role in it. */
export function realtimeLinks(q: Queryable) {
  return q
    .selectFrom("workspace_links as l")
    .innerJoin("workspaces as w", "w.id", "l.workspace_id")
    .innerJoin("collaborations as c", "c.id", "w.collaboration_id")
    .select(["l.workspace_id", "l.group_id", "w.collaboration_id", "c.role"])
    .where("l.realtime", "=", 1)
    .execute();
}
