import type { Transaction } from "kysely";
import { type Caller, requirePrivilege } from "../auth/caller.js";
import {
  impossiblePolicy,
  type LockoutPolicy,
  type PasswordPolicy,
  type SecurityPolicy,
  type StoredSecurityPolicy,
  securityPolicyOf,
} from "../auth/security-policy.js";
import { FeedCache } from "../db/cache.js";
import type { Db, Queryable } from "../db/database.js";
import type { Database } from "../db/schema.js";
import { errors } from "../errors.js";
import { newId } from "../ids.js";
import {
  findOrganization,
  insertOrganizationIfAbsent,
  lockOrganization,
  saveSecurityPolicy,
  saveSettings,
} from "./org.repository.js";
import {
  DEFAULT_MAX_TOKEN_MINUTES,
  defaultSettings,
  helperServices,
  type OrgSettings,
  PUBLIC_SETTING_NAMES,
  privilegesFor,
  SETTING_NAMES,
  type SettingName,
} from "./org-settings.js";

export interface Organization {
  id: string;
  settings: OrgSettings;
  /** `portals/<id>/securityPolicy`: password rules and account lockout. */
  securityPolicy: SecurityPolicy;
  created: number;
  modified: number;
}

export interface SettingsUpdate {
  /** Settings sent with a value. */
  changes: Partial<OrgSettings>;
  /** Settings sent empty; they are reset to their default only when `clearEmptyFields` is true. */
  empty: SettingName[];
  clearEmptyFields: boolean;
  /** Whether the update itself came over HTTPS: turning `allSSL` on over plain HTTP is refused. */
  secure: boolean;
}

const DEFAULT_SETTINGS: Readonly<OrgSettings> = deepFreeze(defaultSettings());

function deepFreeze<T>(value: T): T {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Version reported as `currentVersion` (the REST version of ArcGIS Enterprise 11.3). */
export const REST_VERSION = "2024.1";
export const ENTERPRISE_VERSION = "11.3.0";

/**
 * The organization and its settings. The stored JSON holds only settings that were set; defaults
 * fill the rest on read, so a setting added in a later version needs no data migration.
 */
export class PortalService {
  /** Every request reads the organization (CORS, allSSL); it changes rarely. */
  private readonly cache: FeedCache<"org", Organization>;

  constructor(
    private readonly db: Db,
    private readonly accounts: {
      /** The account of a username in any case (the contacts setting names administrators). */
      findUser(q: Queryable, username: string): Promise<{ role: string; disabled: number } | undefined>;
    },
  ) {
    this.cache = new FeedCache(db.feed, ["org"], undefined, 1);
  }

  /** Creates the organization on first start; safe when several nodes start at once. */
  async ensureOrganization(): Promise<Organization> {
    const now = Date.now();
    await this.db.transaction(
      (trx) => insertOrganizationIfAbsent(trx, { id: newId(), settings: "{}", created: now, modified: now }),
      { changes: ["org"] },
    );
    return this.get();
  }

  /** The organization; shared between requests, so frozen. */
  /**
   * The organization when it is cached (almost always): read without a promise by the hook every
   * request runs first. `undefined`: ask `get`.
   */
  cached(): Organization | undefined {
    return this.cache.peek("org");
  }

  async get(): Promise<Organization> {
    const org = await this.cache.get("org", async () => {
      const row = await findOrganization(this.db.kysely);
      if (!row) return undefined;
      return deepFreeze({
        id: row.id,
        settings: { ...DEFAULT_SETTINGS, ...(JSON.parse(row.settings) as Partial<OrgSettings>) },
        securityPolicy: securityPolicyOf(row.security_policy),
        created: row.created,
        modified: row.modified,
      });
    });
    if (!org) throw new Error("the organization has not been created; run migrations and start-up first");
    return org;
  }

  /** Maximum token lifetime in minutes, after the organization's `maxTokenExpirationMinutes`. */
  static maxTokenMinutes(settings: OrgSettings): number {
    const max = settings.maxTokenExpirationMinutes as number;
    return max > 0 ? max : DEFAULT_MAX_TOKEN_MINUTES;
  }

  async update(caller: Caller | null, update: SettingsUpdate): Promise<{ orgId: string }> {
    const cleared = update.clearEmptyFields ? update.empty : [];
    const touched = [...(Object.keys(update.changes) as SettingName[]), ...cleared];
    // Each group of settings has its own administrative privilege (ArcGIS custom admin roles).
    for (const privilege of privilegesFor(touched)) requirePrivilege(caller, privilege);

    return this.db.transaction(
      async (trx) => {
        await lockOrganization(trx, this.db.engine);
        const row = await findOrganization(trx);
        if (!row) throw new Error("the organization has not been created");

        const stored = JSON.parse(row.settings) as Partial<OrgSettings>;
        if (update.changes.allSSL === true && stored.allSSL !== true && !update.secure) {
          throw errors.invalidParameter(
            "allSSL",
            "can only be turned on over HTTPS: it would lock out every plain-HTTP client, this one included",
          );
        }
        for (const name of cleared) delete stored[name];
        Object.assign(stored, update.changes);
        const merged = { ...DEFAULT_SETTINGS, ...stored };

        await this.checkCrossFieldRules(trx, merged, update.changes);
        await saveSettings(trx, row.id, JSON.stringify(stored), Math.max(Date.now(), row.modified + 1));
        return { orgId: row.id };
      },
      { changes: ["org"] },
    );
  }

  /**
   * `securityPolicy/update`: the rules sent replace the stored ones (null clears a rule, as an
   * empty value does in ArcGIS); rules not sent stay as they are.
   */
  async updateSecurityPolicy(
    caller: Caller | null,
    changes: { passwordPolicy: Partial<PasswordPolicy>; lockoutPolicy: Partial<LockoutPolicy> },
  ): Promise<void> {
    await this.writeSecurityPolicy(caller, (stored) => {
      const next: StoredSecurityPolicy = {
        passwordPolicy: { ...stored.passwordPolicy, ...changes.passwordPolicy },
        lockoutPolicy: { ...stored.lockoutPolicy, ...changes.lockoutPolicy },
        modified: Math.max(Date.now(), (stored.modified ?? 0) + 1),
      };
      const impossible = impossiblePolicy(securityPolicyOf(JSON.stringify(next)).passwordPolicy);
      if (impossible) throw errors.invalidParameter("minLength", `cannot be met: the policy ${impossible}`);
      return next;
    });
  }

  /** `securityPolicy/reset`: back to the defaults. */
  async resetSecurityPolicy(caller: Caller | null): Promise<void> {
    await this.writeSecurityPolicy(caller, () => ({}));
  }

  /** Replaces the stored security policy with what `next` makes of it, the organization locked. */
  private async writeSecurityPolicy(
    caller: Caller | null,
    next: (stored: StoredSecurityPolicy) => StoredSecurityPolicy | Record<string, never>,
  ): Promise<void> {
    requirePrivilege(caller, "portal:admin:manageSecurity");
    await this.db.transaction(
      async (trx) => {
        await lockOrganization(trx, this.db.engine);
        const row = await findOrganization(trx);
        if (!row) throw new Error("the organization has not been created");
        const stored = JSON.parse(row.security_policy) as StoredSecurityPolicy;
        await saveSecurityPolicy(trx, row.id, JSON.stringify(next(stored)));
      },
      { changes: ["org"] },
    );
  }

  /** Rules that involve more than one setting or other records; checked on the merged result. */
  private async checkCrossFieldRules(
    trx: Transaction<Database>,
    merged: OrgSettings,
    changes: Partial<OrgSettings>,
  ): Promise<void> {
    const trusted = new Set(merged.authorizedCrossOriginDomains as string[]);
    const missing = (merged.authorizedCrossOriginNoCorsDomains as string[]).filter((d) => !trusted.has(d));
    if (missing.length > 0) {
      throw errors.invalidParameter(
        "authorizedCrossOriginNoCorsDomains",
        `lists ${missing.join(", ")}, which must also be in authorizedCrossOriginDomains`,
      );
    }
    if (changes.contacts !== undefined) {
      for (const username of changes.contacts as string[]) {
        const user = await this.accounts.findUser(trx, username);
        if (user?.role !== "org_admin" || user.disabled) {
          throw errors.invalidParameter(
            "contacts",
            `entry '${username}' is not an administrator of the organization`,
          );
        }
      }
    }
  }
}

/**
 * `portals/self` is read by every client on every page load. The view depends only on the
 * (frozen, cached) organization and signed-in user, so it is built once per pair and frozen, and
 * the renderer serializes it once; a change to either makes new objects, and these entries are
 * collected with the old ones. The host name is the process's public address, the same for
 * every request.
 */
const views = new WeakMap<Organization, { anonymous?: object; byUser: WeakMap<object, object> }>();

export function cachedPortalView(
  org: Organization,
  self: Record<string, unknown> | undefined,
  portalHostname: string,
): object {
  let entry = views.get(org);
  if (!entry) {
    entry = { byUser: new WeakMap() };
    views.set(org, entry);
  }
  const cached = self ? entry.byUser.get(self) : entry.anonymous;
  if (cached) return cached;
  const view = Object.freeze(
    portalView(org, { signedIn: self !== undefined, portalHostname, ...(self ? { user: self } : {}) }),
  );
  if (self) entry.byUser.set(self, view);
  else entry.anonymous = view;
  return view;
}

/**
 * The `portals/self` resource (`wire.md` §3). Anonymous callers of a private organization see only
 * what a sign-in page needs; the third-party basemap key is shown to anonymous callers only when
 * `canShareVendorPublic` says so.
 */
export function portalView(
  org: Organization,
  opts: { signedIn: boolean; portalHostname: string; user?: unknown },
): Record<string, unknown> {
  const { settings } = org;
  const visible: SettingName[] =
    opts.signedIn || settings.access === "public" ? SETTING_NAMES : [...PUBLIC_SETTING_NAMES];
  const shown: Record<string, unknown> = {};
  for (const name of visible) shown[name] = settings[name];
  if (!opts.signedIn && !settings.canShareVendorPublic) delete shown.vendorKey;
  return {
    id: org.id,
    isPortal: true,
    portalMode: "singletenant",
    portalName: settings.name,
    ...shown,
    portalHostname: opts.portalHostname,
    currentVersion: REST_VERSION,
    enterpriseVersion: ENTERPRISE_VERSION,
    supportsOAuth: false,
    helperServices: opts.signedIn || settings.access === "public" ? helperServices(settings) : {},
    created: org.created,
    modified: org.modified,
    ...(opts.user !== undefined ? { user: opts.user } : {}),
  };
}

/**
 * The `portals/<id>/settings` resource: the organization's configuration as the caller may see it
 * (the ArcGIS reference lists helper services, allowed redirect URIs and the information banner).
 * Built from the same settings as `portals/self`, with the same rule: anonymous callers of a
 * private organization see no helper services and no redirect URIs. portico keeps no banner or
 * access notice, so both are shown disabled.
 */
export function portalSettingsView(org: Organization, signedIn: boolean): Record<string, unknown> {
  const { settings } = org;
  const open = signedIn || settings.access === "public";
  return {
    allowedRedirectUris: open ? settings.allowedRedirectUris : [],
    defaultExtent: open ? settings.defaultExtent : null,
    helperServices: open ? helperServices(settings) : {},
    informationalBanner: { enabled: false, text: "", bgColor: "", fontColor: "" },
    accessNotice: null,
    notificationsEnabled: settings.notificationsEnabled,
  };
}
