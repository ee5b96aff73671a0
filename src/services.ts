import { AuthService } from "./auth/auth.service.js";
import { OAuthService } from "./auth/oauth.service.js";
import { type HashingLimits, PasswordHasher, type ScryptCost } from "./auth/password.js";
import { CollaborationService } from "./collaboration/collaboration.service.js";
import { InvitationService } from "./collaboration/invitation.service.js";
import { KeyService } from "./collaboration/key.service.js";
import type { PortalKeys } from "./collaboration/peer.js";
import { PeerEndpoint } from "./collaboration/peer-endpoint.js";
import { SyncService } from "./collaboration/sync.service.js";
import { WorkspaceService } from "./collaboration/workspace.service.js";
import { AppRegistrationService } from "./content/app-registration.service.js";
import { CommentService } from "./content/comment.service.js";
import { ItemService } from "./content/item.service.js";
import { RelationshipService } from "./content/relationship.service.js";
import { ResourceService } from "./content/resource.service.js";
import { SharingService } from "./content/sharing.service.js";
import { UploadService } from "./content/upload.service.js";
import type { Db } from "./db/database.js";
import { ExportService } from "./features/export/export.service.js";
import { FeatureAttachmentService } from "./features/feature-attachments.service.js";
import { FeatureDataService } from "./features/feature-data.service.js";
import { FeatureServices } from "./features/feature-services.service.js";
import { dropServiceStorage } from "./features/layer-store.js";
import { CategorySchemaService } from "./groups/category-schema.service.js";
import { GroupService } from "./groups/group.service.js";
import { GroupNotificationService } from "./groups/group-notification.service.js";
import type { SyncJobs } from "./jobs/sync-jobs.js";
import type { OutboundGuard } from "./outbound/guard.js";
import { PortalService } from "./portal/portal.service.js";
import { RoleService } from "./roles/role.service.js";
import { SearchService } from "./search/search.service.js";
import { NotificationService } from "./users/notification.service.js";
import { findUser, updateUser } from "./users/user.repository.js";
import { UserService } from "./users/user.service.js";
import { payloadUrlCheck } from "./webhooks/attempt.js";
import { WebhookService } from "./webhooks/webhook.service.js";

/** The domain services of one process. Built once at start-up; no container, no globals. */
export interface Services {
  db: Db;
  portal: PortalService;
  auth: AuthService;
  /** OAuth 2.0 grants: authorize, the token endpoint, exchangeToken, platformSelf. */
  oauth: OAuthService;
  /** Registered apps (`oauth2/registerApp` and `oauth2/apps/<client_id>`). */
  apps: AppRegistrationService;
  users: UserService;
  roles: RoleService;
  items: ItemService;
  sharing: SharingService;
  comments: CommentService;
  relationships: RelationshipService;
  resources: ResourceService;
  uploads: UploadService;
  search: SearchService;
  groups: GroupService;
  notifications: NotificationService;
  groupNotifications: GroupNotificationService;
  categorySchemas: CategorySchemaService;
  featureServices: FeatureServices;
  featureData: FeatureDataService;
  featureAttachments: FeatureAttachmentService;
  exports: ExportService;
  webhooks: WebhookService;
  collaborations: CollaborationService;
  collaborationInvitations: InvitationService;
  workspaces: WorkspaceService;
  sync: SyncService;
  peerEndpoint: PeerEndpoint;
  collaborationKeys: KeyService;
}

export interface ServiceOptions {
  /** Every outbound call goes through it (the webhook payload-URL check). */
  guard: OutboundGuard;
  /** This portal's URL as other portals reach it (public URL and context path). */
  portalUrl: () => string;
  /** This portal's signing key (invitation and response files). */
  keys: PortalKeys;
  /** Collaboration's jobs, built before the services: the services hand them work. */
  syncJobs: Pick<SyncJobs, "notifier" | "runner">;
  /** See `Config.searchTimeoutMs`. */
  searchTimeoutMs: number;
  /** Limits of concurrent password hashing (sign-in, password changes). */
  hashing: HashingLimits;
  /** scrypt's cost; `SCRYPT_COST` unless a test portal asks for less (`StartOptions`). */
  hashCost?: Readonly<ScryptCost>;
  /**
   * Woken when webhook notifications are queued: the `WakeUp` the webhook delivery job (built
   * after the services, in `createJobs`) listens to.
   */
  webhookDelivery: { wake(): void };
  /**
   * Exports: where their jobs write files, and the `WakeUp` the export runner (built after the
   * services, in `createJobs`) listens to.
   */
  exports: { workDir: string; wakeUp: { wake(): void } };
  onError: (err: unknown, what: string) => void;
}

export function createServices(db: Db, options: ServiceOptions): Services {
  const portal = new PortalService(db, { findUser });
  // One hasher for the process: its limits bound the memory scrypt takes, whatever asks for it.
  const hasher = new PasswordHasher(options.hashing, options.hashCost);
  const items = new ItemService(db, portal, dropServiceStorage);
  const groups = new GroupService(db, portal, items);
  const { keys } = options;
  const { notifier, runner } = options.syncJobs;
  const featureServices = new FeatureServices(db, items);
  const featureData = new FeatureDataService(db, featureServices);
  const signInSettings = async () => {
    const org = await portal.get();
    return {
      securityPolicy: org.securityPolicy,
      maxTokenMinutes: PortalService.maxTokenMinutes(org.settings),
      allSSL: org.settings.allSSL === true,
    };
  };
  const auth = new AuthService(
    db,
    { signInSettings, findAccount: findUser, recordSignIn: updateUser },
    hasher,
  );
  return {
    db,
    portal,
    auth,
    oauth: new OAuthService(db, auth, signInSettings),
    apps: new AppRegistrationService(db, items),
    users: new UserService(db, portal, hasher, (userId, username, seenBy) =>
      groups.groupsOf(userId, username, seenBy),
    ),
    roles: new RoleService(db),
    items,
    sharing: new SharingService(db, portal, items),
    comments: new CommentService(db, portal, items),
    relationships: new RelationshipService(db, items),
    resources: new ResourceService(db, items),
    uploads: new UploadService(db, items),
    search: new SearchService(db, portal, groups, options.searchTimeoutMs),
    groups,
    notifications: new NotificationService(db),
    groupNotifications: new GroupNotificationService(db, groups),
    categorySchemas: new CategorySchemaService(db, groups),
    featureServices,
    featureData,
    featureAttachments: new FeatureAttachmentService(db, featureData),
    exports: new ExportService(db, items, featureData, options.exports),
    webhooks: new WebhookService(db, portal, {
      checkPayloadUrl: payloadUrlCheck(options.guard, options.portalUrl),
      portalUrl: options.portalUrl,
      delivery: options.webhookDelivery,
    }),
    collaborations: new CollaborationService(db, portal, keys, options.portalUrl, notifier),
    collaborationInvitations: new InvitationService(db, portal, keys, options.portalUrl),
    workspaces: new WorkspaceService(db, portal, notifier),
    sync: new SyncService(db, runner),
    collaborationKeys: new KeyService(db, portal, keys, notifier),
    peerEndpoint: new PeerEndpoint({
      db,
      keys,
      selfId: async () => (await portal.get()).id,
      syncs: runner,
      onError: options.onError,
    }),
  };
}
