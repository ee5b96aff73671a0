import type { Queryable } from "../db/database.js";
import type { AccessMode, ParticipantTable, SyncJobTable } from "../db/schema.js";

/**
 * The shapes distributed collaboration (`wire.md` §8) works with, shared by its services, its
 * repository, the routes and the sync jobs.
 */

/**
 * Every collaboration operation needs it, on either side: the routes declare it (so the pipeline
 * refuses before validation) and the services check it again, both from this one name.
 */
export const COLLABORATION_PRIVILEGE = "portal:admin:manageCollaborations" as const;
export const ACCESS_MODES = ["send", "receive", "sendAndReceive"] as const satisfies readonly AccessMode[];

export const sends = (mode: AccessMode | undefined) => mode === "send" || mode === "sendAndReceive";
export const receives = (mode: AccessMode | undefined) => mode === "receive" || mode === "sendAndReceive";

export interface Contact {
  firstName: string;
  lastName: string;
  email: string;
}

export interface WorkspaceConfig {
  maxItemSizeInMB: number;
  maxReplicationPackageSizeInMB: number;
  bidirectionalSyncCapable: boolean;
}

export const DEFAULT_WORKSPACE_CONFIG: WorkspaceConfig = {
  maxItemSizeInMB: 1024,
  maxReplicationPackageSizeInMB: 5120,
  bidirectionalSyncCapable: true,
};

export interface NewWorkspace {
  name: string;
  description: string;
  portalGroupId?: string | undefined;
  accessMode?: AccessMode | undefined;
  config?: Partial<WorkspaceConfig> | undefined;
}

export interface GroupLinkUpdate {
  portalGroupId?: string | undefined;
  enableRealtimeSync?: boolean | undefined;
  copyFeatureServiceData?: boolean | undefined;
  copyByRefIfCopyFail?: boolean | undefined;
}

/** The state of a collaboration the host gives a guest (peer call `state`). */
export interface HostState {
  collaboration: { id: string; name: string; description: string };
  workspaces: {
    id: string;
    name: string;
    description: string;
    config: WorkspaceConfig;
    modes: Record<string, AccessMode>;
  }[];
  participants: {
    portalId: string;
    role: "host" | "guest";
    portalUrl: string;
    portalName: string;
    deleteContributed: boolean;
    deleteReceived: boolean;
  }[];
}

/** Whom a notice goes to: a participant as this portal knows it when the notice is queued. */
export type NoticeRecipient = Pick<ParticipantTable, "portal_id" | "portal_url" | "public_key">;

/**
 * Tells another portal of a collaboration about a change that ends replication there, that there
 * is something to sync, or that this portal's key changed. The notice is queued in `trx`, the
 * transaction of the change that causes it, and delivered at least once, with retries, whether or
 * not the other portal is up now (`src/jobs/peer-notifier.ts`).
 */
export interface Notifier {
  tell(
    trx: Queryable,
    to: NoticeRecipient,
    collaborationId: string,
    op: string,
    body: Record<string, unknown>,
    options?: { signWith?: string },
  ): Promise<void>;
}

/** Starts syncs: what the sync service and the peer endpoint need of the sync runner. */
export interface SyncStarter {
  /** Inserts a job; answers its id, or the running job that kept it from starting. */
  submit(
    collaborationId: string,
    workspaceId: string,
    execType: SyncJobTable["exec_type"],
  ): Promise<string | SyncJobTable>;
  /** Runs a submitted job; settles when it has ended. */
  launch(jobId: string, collaborationId: string, workspaceId: string): Promise<void>;
  /** Starts a scheduled or realtime sync; when one runs, it starts once that one ends. */
  startBackground(
    collaborationId: string,
    workspaceId: string,
    execType: SyncJobTable["exec_type"],
  ): Promise<void>;
}
