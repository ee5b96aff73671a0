import type { Generated } from "kysely";

/**
 * Table types shared by SQLite and PostgreSQL. Both engines store the same column types:
 * booleans as integers 0/1, timestamps as epoch milliseconds (bigint), and structured values as
 * JSON text, so that one set of queries serves both.
 */
export interface Database {
  organizations: OrganizationTable;
  users: UserTable;
  roles: RoleTable;
  tokens: TokenTable;
  oauth_apps: OAuthAppTable;
  oauth_codes: OAuthCodeTable;
  oauth_refresh_tokens: OAuthRefreshTokenTable;
  oauth_app_tokens: OAuthAppTokenTable;
  events: EventTable;
  folders: FolderTable;
  items: ItemTable;
  item_tags: ItemTagTable;
  item_categories: ItemCategoryTable;
  user_notifications: UserNotificationTable;
  notification_quotas: NotificationQuotaTable;
  group_category_schemas: GroupCategorySchemaTable;
  item_search_docs: ItemSearchDocTable;
  item_files: ItemFileTable;
  item_file_chunks: ItemFileChunkTable;
  groups: GroupTable;
  group_members: GroupMemberTable;
  group_invitations: GroupInvitationTable;
  group_applications: GroupApplicationTable;
  item_shares: ItemShareTable;
  item_relationships: ItemRelationshipTable;
  export_jobs: ExportJobTable;
  comments: CommentTable;
  feature_services: FeatureServiceTable;
  feature_layers: FeatureLayerTable;
  feature_attachments: FeatureAttachmentTable;
  feature_attachment_chunks: FeatureAttachmentChunkTable;
  webhooks: WebhookTable;
  notifications: NotificationTable;
  notification_attempts: NotificationAttemptTable;
  webhook_settings: WebhookSettingsTable;
  portal_keys: PortalKeyTable;
  collaborations: CollaborationTable;
  collaboration_participants: ParticipantTable;
  collaboration_invitations: InvitationTable;
  workspaces: WorkspaceTable;
  workspace_modes: WorkspaceModeTable;
  workspace_links: WorkspaceLinkTable;
  collaboration_copies: CopyTable;
  collaboration_data_copies: DataCopyTable;
  collaboration_layer_cursors: LayerCursorTable;
  collaboration_layer_sends: LayerCursorTable;
  collaboration_applied_moments: AppliedMomentTable;
  collaboration_feature_moments: FeatureMomentTable;
  feature_deletes: FeatureDeleteTable;
  sync_jobs: SyncJobTable;
  sync_schedules: SyncScheduleTable;
  peer_nonces: PeerNonceTable;
  peer_notices: PeerNoticeTable;
  realtime_prints: RealtimePrintTable;
  sync_deferred: SyncDeferredTable;
  password_history: PasswordHistoryTable;
  sign_in_failures: SignInFailureTable;
}

export interface OrganizationTable {
  id: string;
  /** Always 1: a unique column that makes concurrent first start-ups create one organization. */
  singleton: number;
  /** JSON object holding every setting of the organization update operation. */
  settings: string;
  /** JSON object of the security policy settings that were set (migration 0008). */
  security_policy: Generated<string>;
  created: number;
  modified: number;
}

export interface UserTable {
  id: string;
  username: string;
  /** Lower-case username: ArcGIS usernames are unique regardless of case. */
  username_key: string;
  full_name: string;
  first_name: string;
  last_name: string;
  email: string;
  description: string;
  password_hash: string;
  /** Built-in role: org_admin, org_publisher or org_user. For a custom role, the role it derives from. */
  role: string;
  role_id: string | null;
  disabled: number;
  provider: string;
  user_type: string;
  access: string;
  culture: string | null;
  region: string | null;
  units: string | null;
  /** JSON array of strings. */
  tags: string;
  created: number;
  modified: number;
  last_login: number;
  /** JSON object the user keeps with `setProperties` (0012); null until the first. */
  properties: string | null;
}

export interface RoleTable {
  id: string;
  name: string;
  name_key: string;
  description: string;
  /** JSON array of privilege strings. */
  privileges: string;
  created: number;
  modified: number;
}

/** Every password hash a user has had (migration 0008); the newest is the current password. */
export interface PasswordHistoryTable {
  user_id: string;
  password_hash: string;
  created: number;
}

/**
 * Consecutive failed sign-ins by lower-case username, known or not (migration 0008). A success
 * deletes the row; `locked_until` is 0 when the name is not locked.
 */
export interface SignInFailureTable {
  username_key: string;
  failures: number;
  /** When the first failure of the current run happened: the window counts from it. */
  first_failure: number;
  locked_until: number;
}

export interface TokenTable {
  /** SHA-256 of the token: a database leak does not leak usable tokens. */
  token_hash: string;
  user_id: string;
  created: number;
  expires: number;
  client: string;
  referer: string;
  /** The registered app the token was made for (0016); null for `generateToken`'s. */
  client_id: Generated<string | null>;
}

/** A registered app (0016): an item of type Application with OAuth 2.0 credentials. */
export interface OAuthAppTable {
  client_id: string;
  item_id: string;
  /** browser | server | native | multiple */
  app_type: string;
  /** JSON array of strings. */
  redirect_uris: string;
  /** JSON array of strings. */
  http_referrers: string;
  /** JSON array of strings. */
  privileges: string;
  /** SHA-256 of the client secret. */
  secret_hash: string;
  registered: number;
  modified: number;
}

/** An authorization code, by its SHA-256 (0016). */
export interface OAuthCodeTable {
  code_hash: string;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  code_challenge: string | null;
  code_challenge_method: string | null;
  /** What the refresh token made from the code lives, in minutes (authorize's `expiration`). */
  refresh_minutes: number;
  created: number;
  expires: number;
}

/** A refresh token, by its SHA-256 (0016). */
export interface OAuthRefreshTokenTable {
  token_hash: string;
  client_id: string;
  user_id: string;
  created: number;
  expires: number;
}

/** A token of `client_credentials`, by its SHA-256 (0016): it acts for no user. */
export interface OAuthAppTokenTable {
  token_hash: string;
  client_id: string;
  created: number;
  expires: number;
}

/**
 * The transactional outbox. Every change that webhooks report writes its row here in the same
 * transaction as the change itself; delivery reads from it.
 */
export interface EventTable {
  seq: Generated<number>;
  id: string;
  occurred: number;
  source: string;
  operation: string;
  /** The id of the object the event is about (item id, group id, username, role id). */
  object_id: string;
  /** Who made the change; empty for changes made by the system itself (first start-up). */
  actor_id: string;
  actor_username: string;
  /** JSON object of additional payload properties (`interface.md` §6). */
  properties: string;
  /** The most specific trigger URI, e.g. `/users/jdoe/updateUserRole`; subscriptions match prefixes. */
  uri: string;
  /** 1 once the dispatcher has turned the event into notifications (migration 0005). */
  dispatched: Generated<number>;
}

export interface FolderTable {
  id: string;
  owner_id: string;
  title: string;
  title_key: string;
  created: number;
}

export interface ItemTable {
  id: string;
  owner_id: string;
  owner: string;
  owner_key: string;
  folder_id: string | null;
  title: string;
  title_key: string;
  type: string;
  type_key: string;
  /** JSON array of strings. */
  type_keywords: string;
  description: string;
  snippet: string;
  /** JSON array of strings. */
  tags: string;
  url: string | null;
  /** JSON object, or null. */
  properties: string | null;
  /** private | shared | org | public */
  access: string;
  protected: number;
  size: number;
  thumbnail: string | null;
  created: number;
  modified: number;
  /** WGS 84 extent (0014); all four null when the item has none. */
  extent_xmin: number | null;
  extent_ymin: number | null;
  extent_xmax: number | null;
  extent_ymax: number | null;
  /** JSON array of category paths (0014); `item_categories` holds their lower-case keys. */
  categories: Generated<string>;
}

/** One category of an item, lower-case, for search (0014). */
export interface ItemCategoryTable {
  item_id: string;
  category_key: string;
}

/** A built-in notification of a user (0014): stored and listed, never mailed. */
export interface UserNotificationTable {
  id: string;
  user_id: string;
  type: string;
  subject: string;
  message: string;
  /** JSON object: what the notification is about (group id and title, sender). */
  data: string;
  created: number;
}

/** Notifications a user sent in the current hour (0019), against the per-sender quota. */
export interface NotificationQuotaTable {
  sender_id: string;
  window_start: number;
  sent: number;
}

/** A group's category schema (0014), as the JSON document assignCategorySchema took. */
export interface GroupCategorySchemaTable {
  group_id: string;
  schema: string;
  modified: number;
}

/** One row per tag of an item, with copies of the item's columns a `tags:` search reads (0004). */
export interface ItemTagTable {
  item_id: string;
  tag_key: string;
  modified: number;
  access: string;
  owner_id: string;
}

/**
 * SQLite only (0009): the stable integer that is an item's rowid in the FTS5 table `item_words`.
 * `item_words` itself (FTS5 on SQLite, one `tsvector` per field on PostgreSQL) is written and
 * read with engine-specific SQL in `content/word-index.ts` and `search/search.repository.ts`.
 */
export interface ItemSearchDocTable {
  doc: Generated<number>;
  item_id: string;
}

export interface ItemFileTable {
  item_id: string;
  /**
   * data | thumbnail | info/<path> (files of the item's info folder, `updateinfo`) |
   * resources/<path> (the item's resources, `addResources`)
   */
  kind: string;
  name: string;
  content_type: string;
  /** This version of the file; its bytes are the `item_file_chunks` rows of this id (0007). */
  file_id: string;
  /** Bytes in all its chunks. */
  size: number;
  /** When a resource (`resources/<path>`) was added; null for other kinds (0015). */
  created: number | null;
  /** A resource's access, `inherit` or `private`; null for other kinds (0015). */
  access: string | null;
}

/** A file's bytes in pieces of `FILE_CHUNK_BYTES` (the last one shorter), `seq` from 0 (0007). */
export interface ItemFileChunkTable {
  file_id: string;
  seq: number;
  data: Buffer;
}

export interface GroupTable {
  id: string;
  owner_id: string;
  owner: string;
  title: string;
  title_key: string;
  description: string;
  snippet: string;
  /** JSON array of strings. */
  tags: string;
  /** private | org | public */
  access: string;
  is_invitation_only: number;
  is_view_only: number;
  protected: number;
  sort_field: string;
  sort_order: string;
  created: number;
  modified: number;
  /** ArcGIS's `autoJoin` (0012): members of the organization join without approval. */
  auto_join: Generated<number>;
}

export interface GroupMemberTable {
  group_id: string;
  user_id: string;
  username: string;
  /** owner | admin | member */
  member_type: string;
  joined: number;
}

export interface GroupInvitationTable {
  id: string;
  group_id: string;
  user_id: string;
  username: string;
  invited_by: string;
  created: number;
}

/** A request to join a group that needs approval (0012). */
export interface GroupApplicationTable {
  group_id: string;
  user_id: string;
  username: string;
  received: number;
}

export interface ItemShareTable {
  item_id: string;
  group_id: string;
}

/** A typed link from an origin item to a destination item (0013); goes with either item. */
export interface ItemRelationshipTable {
  origin_id: string;
  destination_id: string;
  /** One of the relationship types ArcGIS documents, e.g. `Map2Service`. */
  type: string;
  /** User id of who added it: only they may delete it. */
  created_by: string;
  created: number;
}

/** An export's background job (0017): what to write into its item, and how far it got. */
export interface ExportJobTable {
  job_id: string;
  item_id: string;
  service_item_id: string;
  format: string;
  parameters: string;
  only_created_by: string | null;
  /** processing | completed | failed */
  status: string;
  message: string;
  /** How many times a node took the job up. */
  attempts: number;
  /** Until when the node that took it up holds it; 0 when none has. */
  lease_until: number;
  created: number;
  modified: number;
}

export interface CommentTable {
  id: string;
  item_id: string;
  owner: string;
  comment: string;
  created: number;
  modified: number;
}

export interface FeatureServiceTable {
  item_id: string;
  name: string;
  name_key: string;
  /** JSON object: the service-level definition. */
  definition: string;
  /** JSON array of layer definitions. */
  layers: string;
  /** JSON array of table definitions. */
  tables: string;
  is_view: number;
  created: number;
  modified: number;
  /** Migration 0028: 1 for a collaboration copy that refuses every edit (not bidirectional). */
  read_only: Generated<number>;
}

/** The stored layers of hosted services (migration 0010); their rows are in `fl_*` tables. */
export interface FeatureLayerTable {
  item_id: string;
  layer_id: number;
  table_name: string;
  last_edit_date: number;
  data_last_edit_date: number;
  next_object_id: number;
  /** The next attachment id to give in the layer (migration 0011). */
  next_attachment_id: Generated<number>;
}

/**
 * Files attached to features of hosted layers (migration 0011), one row per attachment; its bytes
 * are the `feature_attachment_chunks` rows of its `file_id`.
 */
export interface FeatureAttachmentTable {
  /** The service's item. */
  item_id: string;
  layer_id: number;
  /** The feature it is attached to. */
  object_id: number;
  /** Unique in the layer, never reused (`feature_layers.next_attachment_id`). */
  attachment_id: number;
  /** `{UPPER-CASE GUID}`, kept when the file is replaced. */
  global_id: string;
  name: string;
  content_type: string;
  keywords: string;
  /** This version of the file; a replaced file gets a new id. */
  file_id: string;
  size: number;
}

/** An attachment's bytes in pieces of `FILE_CHUNK_BYTES`, as `item_file_chunks` (0011). */
export interface FeatureAttachmentChunkTable {
  file_id: string;
  seq: number;
  data: Buffer;
}

/** Organization webhooks (migration 0005). */
export interface WebhookTable {
  id: string;
  name: string;
  payload_url: string;
  secret: string;
  is_active: number;
  changes: string;
  /** JSON array of trigger URIs. */
  events: string;
  /** JSON object: `deactivationPolicy` and portico's delivery options. */
  config: string;
  owner_id: string;
  modified_id: string;
  /** Start of the failure count of the deactivation policy: creation or the last activation. */
  count_since: number;
  created: number;
  modified: number;
}

export type NotificationStatus = "pending" | "delivered" | "failed";

/** One payload for one webhook, attempted until delivered or out of attempts. */
export interface NotificationTable {
  id: string;
  webhook_id: string;
  /** The outbox event delivered; empty for a ping. */
  event_id: string;
  payload: string;
  status: NotificationStatus;
  /** Attempts since the notification was (re)queued. */
  attempts: number;
  /** Attempts ever made; numbers the attempt rows across redeliveries. */
  total_attempts: number;
  next_attempt: number;
  /** Until when the node that claimed it works on it; afterwards any node may take it over. */
  lease_until: number;
  created: number;
  completed: number | null;
  last_status: number | null;
  last_response: string;
}

export interface NotificationAttemptTable {
  notification_id: string;
  attempt: number;
  started: number;
  duration_ms: number;
  status_code: number | null;
  error: string;
  response_excerpt: string;
}

export interface WebhookSettingsTable {
  singleton: number;
  notification_attempts: number;
  timeout_seconds: number;
  elapsed_seconds: number;
  modified: number;
}

/** Distributed collaboration (migration 0006); see the migration for what each table is for. */
export interface PortalKeyTable {
  id: string;
  public_key: string;
  private_key: string;
  created: number;
  /** Migration 0026: when a key was replaced (0 for the current one), and revoked (0: not). */
  retired: Generated<number>;
  revoked: Generated<number>;
}

export interface CollaborationTable {
  id: string;
  name: string;
  description: string;
  role: "host" | "guest";
  host_portal_id: string;
  created: number;
  modified: number;
}

export interface ParticipantTable {
  collaboration_id: string;
  portal_id: string;
  role: "host" | "guest";
  portal_url: string;
  portal_name: string;
  public_key: string;
  contact: string;
  delete_contributed: number;
  delete_received: number;
  status: "active" | "pending";
  /** Migration 0026: JSON array of `RetiredKey` (collaboration/peer.ts). */
  retired_keys: string;
  created: number;
  modified: number;
}

export interface InvitationTable {
  id: string;
  collaboration_id: string;
  guest_portal_url: string;
  workspaces: string;
  expires: number;
  status: "pending" | "accepted" | "invalidated";
  digest: string;
  file: string;
  guest_portal_id: string | null;
  created: number;
  modified: number;
}

export interface WorkspaceTable {
  id: string;
  collaboration_id: string;
  name: string;
  description: string;
  config: string;
  last_sync_success: number;
  created: number;
  modified: number;
}

export type AccessMode = "send" | "receive" | "sendAndReceive";

export interface WorkspaceModeTable {
  workspace_id: string;
  portal_id: string;
  access_mode: AccessMode;
}

export interface WorkspaceLinkTable {
  workspace_id: string;
  group_id: string;
  realtime: number;
  copy_feature_data: number;
  copy_by_ref_if_copy_fail: number;
  modified: number;
}

export interface CopyTable {
  workspace_id: string;
  origin_portal_id: string;
  origin_item_id: string;
  item_id: string;
  origin_version: number;
}

/** Received hosted services and how they arrived (migration 0023). */
export interface DataCopyTable {
  item_id: string;
  mode: "copy" | "reference";
  reason: string | null;
  origin_modified: number;
}

/** How far each layer of a received copy has come (migration 0023). */
export interface LayerCursorTable {
  item_id: string;
  layer_id: number;
  rows_moment: number;
  rows_oid: number;
  deletes_moment: number;
  deletes_oid: number;
}

/** Tombstones of deleted features, by the moment of their deletion (migration 0023). */
export interface FeatureDeleteTable {
  item_id: string;
  layer_id: number;
  object_id: number;
  edit_moment: number;
  /** Migration 0027: the feature's GlobalID, when its layer has them. */
  global_id: string | null;
}

/** Moments at which a layer stored what a sync brought from a peer (migration 0027). */
export interface AppliedMomentTable {
  item_id: string;
  layer_id: number;
  moment: number;
  portal_id: string;
}

/** The source's edit moment of a feature a sync wrote, while its row keeps `row_moment` (migration 0027). */
export interface FeatureMomentTable {
  item_id: string;
  layer_id: number;
  object_id: number;
  row_moment: number;
  edit_moment: number;
}

export type SyncStatus =
  | "submitted"
  | "started"
  | "in_progress"
  | "failed"
  | "completed_with_failures"
  | "completed";

export interface SyncJobTable {
  id: string;
  workspace_id: string;
  collaboration_id: string;
  exec_type: "manual" | "scheduled" | "realtime";
  status: SyncStatus;
  created: number;
  start_time: number;
  end_time: number;
  heartbeat: number;
  summary: string;
  results: string;
}

export interface SyncScheduleTable {
  workspace_id: string;
  start_time: number;
  interval_ms: number;
  repeat_count: number;
  fired: number;
  next_fire: number;
  state: "active" | "paused" | "completed";
  modified: number;
}

export interface PeerNonceTable {
  nonce: string;
  expires: number;
}

/** Collaboration's notice outbox and cluster-wide sync state (migration 0025). */
export interface PeerNoticeTable {
  id: string;
  collaboration_id: string;
  to_portal_id: string;
  portal_url: string;
  callee_keys: string;
  op: string;
  body: string;
  sign_with: string;
  created: number;
  attempts: number;
  next_attempt: number;
  lease_until: number;
  last_error: string;
}

export interface RealtimePrintTable {
  workspace_id: string;
  print: string;
  modified: number;
}

export interface SyncDeferredTable {
  workspace_id: string;
  collaboration_id: string;
  exec_type: "scheduled" | "realtime";
  created: number;
}
