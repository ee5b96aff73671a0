import { randomBytes } from "node:crypto";
import { hashToken, newSecret } from "../auth/auth.service.js";
import type { Caller } from "../auth/caller.js";
import { actorOf, makeCaller } from "../auth/caller.js";
import {
  type AppRow,
  deleteApp,
  findApp,
  findAppOfItem,
  insertApp,
  updateApp,
} from "../auth/oauth.repository.js";
import { type AppType, MAX_REDIRECT_URIS } from "../auth/oauth-rules.js";
import type { Db } from "../db/database.js";
import { errors } from "../errors.js";
import { recordEvent } from "../events/outbox.js";
import type { ItemService } from "./item.service.js";

/** The item type an app is registered on (ArcGIS: `registerApp` takes an Application item). */
export const APPLICATION_TYPE = "Application";

export interface AppSettings {
  appType: AppType;
  redirectUris: readonly string[];
  httpReferrers: readonly string[];
  privileges: readonly string[];
}

/**
 * The client id of the administration console (`/portico/console/`, README "Console"): a built-in
 * browser app, registered by the portal itself with the console's own address as its only kind of
 * redirect URI, so the console signs in through `oauth2/authorize` with PKCE like any app.
 */
export const CONSOLE_CLIENT_ID = "portico-console";

/** A registered app as ArcGIS answers it (`oauth2/apps/<client_id>`); the secret only when made. */
export interface RegisteredApp {
  itemId: string;
  client_id: string;
  client_secret?: string;
  appType: string;
  redirect_uris: string[];
  httpReferrers: string[];
  privileges: string[];
  registered: number;
  modified: number;
}

function registeredApp(row: AppRow | Omit<AppRow, "owner" | "owner_id" | "title">): RegisteredApp {
  return {
    itemId: row.item_id,
    client_id: row.client_id,
    appType: row.app_type,
    redirect_uris: JSON.parse(row.redirect_uris) as string[],
    httpReferrers: JSON.parse(row.http_referrers) as string[],
    privileges: JSON.parse(row.privileges) as string[],
    registered: Number(row.registered),
    modified: Number(row.modified),
  };
}

/**
 * A client id: 16 characters of letters and digits, as ArcGIS's look. It names the app in URLs
 * and is no secret.
 */
function newClientId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return [...randomBytes(16)].map((b) => alphabet[b % alphabet.length]).join("");
}

/**
 * Registering items of type Application as OAuth 2.0 apps (`oauth2/registerApp`), reading,
 * updating and unregistering them. The client secret is stored as its SHA-256 and shown once,
 * when it is made. Deleting the item unregisters the app and ends its grants (the cascade).
 */
export class AppRegistrationService {
  constructor(
    private readonly db: Db,
    private readonly items: ItemService,
  ) {}

  /**
   * Registers the console's built-in app, or adds `redirectUri` to it: its item (type Application,
   * "Portico console") belongs to the first default administrator, as a registered app needs an
   * item. Nothing is made before an administrator exists (nobody could sign in to the console).
   * Deleting the item unregisters it; the next visit of the console registers it again.
   */
  async ensureConsoleApp(redirectUri: string): Promise<void> {
    const existing = await findApp(this.db.kysely, CONSOLE_CLIENT_ID);
    if (existing && (JSON.parse(existing.redirect_uris) as string[]).includes(redirectUri)) return;
    try {
      await this.db.transaction(async (trx) => {
        const now = Date.now();
        const app = await findApp(trx, CONSOLE_CLIENT_ID);
        if (app) {
          // Nodes with different public addresses each add theirs; the oldest go past the limit.
          const uris = [...(JSON.parse(app.redirect_uris) as string[]), redirectUri].slice(
            -MAX_REDIRECT_URIS,
          );
          await updateApp(trx, CONSOLE_CLIENT_ID, { redirect_uris: JSON.stringify(uris), modified: now });
          return;
        }
        const admin = await trx
          .selectFrom("users")
          .select(["id", "username"])
          .where("role", "=", "org_admin")
          .where("role_id", "is", null)
          .orderBy("created")
          .limit(1)
          .executeTakeFirst();
        if (!admin) return;
        const owner = makeCaller({
          userId: admin.id,
          username: admin.username,
          role: "org_admin",
          roleId: null,
          rolePrivileges: null,
        });
        const { id } = await this.items.insertIn(trx, owner, admin.username, undefined, {
          title: "Portico console",
          type: APPLICATION_TYPE,
          typeKeywords: ["Registered App", "Portico Console"],
          snippet: "The portal's administration console (built in; registered by the portal).",
        });
        await insertApp(trx, {
          client_id: CONSOLE_CLIENT_ID,
          item_id: id,
          app_type: "browser",
          redirect_uris: JSON.stringify([redirectUri]),
          http_referrers: "[]",
          privileges: "[]",
          // A browser app keeps no secret; this one is made and thrown away.
          secret_hash: hashToken(newSecret()),
          registered: now,
          modified: now,
        });
      });
    } catch (err) {
      // Two nodes (or two first visits) registering it at once: one of them did.
      if (!(await findApp(this.db.kysely, CONSOLE_CLIENT_ID))) throw err;
    }
  }

  async register(caller: Caller, itemId: string, settings: AppSettings): Promise<RegisteredApp> {
    const now = Date.now();
    const secret = newSecret();
    const clientId = newClientId();
    const app = await this.db.transaction(async (trx) => {
      const item = await this.items.mustOwnOrAdminister(trx, caller, caller.username, itemId, "");
      if (item.owner_id !== caller.userId) throw errors.itemNotFound(itemId);
      if (item.type !== APPLICATION_TYPE) {
        throw errors.invalidParameter(
          "itemId",
          `must be an item of type ${APPLICATION_TYPE}, not ${item.type}`,
        );
      }
      if (await findAppOfItem(trx, itemId)) {
        throw errors.conflict(`Item '${itemId}' is already registered as an app.`);
      }
      const row = {
        client_id: clientId,
        item_id: itemId,
        app_type: settings.appType,
        redirect_uris: JSON.stringify(settings.redirectUris),
        http_referrers: JSON.stringify(settings.httpReferrers),
        privileges: JSON.stringify(settings.privileges),
        secret_hash: hashToken(secret),
        registered: now,
        modified: now,
      };
      await insertApp(trx, row);
      await recordEvent(
        trx,
        { source: "item", operation: "update", objectId: itemId, actor: actorOf(caller) },
        now,
      );
      return row;
    });
    return { ...registeredApp(app), client_secret: secret };
  }

  /** The app, for its item's owner and administrators who may change the item; else not found. */
  private async mustManage(
    trx: Parameters<Parameters<Db["transaction"]>[0]>[0],
    caller: Caller,
    clientId: string,
    adminPrivilege: string,
  ): Promise<AppRow> {
    const app = await findApp(trx, clientId);
    if (!app) throw errors.oauth("invalid_client", "Invalid client_id: no app is registered with it.");
    await this.items.mustOwnOrAdminister(trx, caller, app.owner, app.item_id, adminPrivilege);
    return app;
  }

  async get(caller: Caller, clientId: string): Promise<RegisteredApp> {
    return this.db.transaction(async (trx) =>
      registeredApp(await this.mustManage(trx, caller, clientId, "portal:admin:viewItems")),
    );
  }

  /** `registeredAppInfo` of an item: its app, for those who may see the app. */
  async ofItem(caller: Caller, username: string, itemId: string): Promise<RegisteredApp> {
    return this.db.transaction(async (trx) => {
      await this.items.mustOwnOrAdminister(trx, caller, username, itemId, "portal:admin:viewItems");
      const app = await findAppOfItem(trx, itemId);
      if (!app) throw errors.invalidParameter("itemId", `item '${itemId}' is not registered as an app`);
      return registeredApp(app);
    });
  }

  async update(caller: Caller, clientId: string, change: Partial<AppSettings>): Promise<RegisteredApp> {
    const now = Date.now();
    return this.db.transaction(async (trx) => {
      const app = await this.mustManage(trx, caller, clientId, "portal:admin:updateItems");
      await updateApp(trx, clientId, {
        ...(change.appType !== undefined ? { app_type: change.appType } : {}),
        ...(change.redirectUris !== undefined ? { redirect_uris: JSON.stringify(change.redirectUris) } : {}),
        ...(change.httpReferrers !== undefined
          ? { http_referrers: JSON.stringify(change.httpReferrers) }
          : {}),
        ...(change.privileges !== undefined ? { privileges: JSON.stringify(change.privileges) } : {}),
        modified: Math.max(now, Number(app.modified) + 1),
      });
      await recordEvent(
        trx,
        { source: "item", operation: "update", objectId: app.item_id, actor: actorOf(caller) },
        now,
      );
      const updated = await findApp(trx, clientId);
      return registeredApp(updated as AppRow);
    });
  }

  /** Unregisters the app: its codes, refresh tokens and tokens end with it. */
  async unregister(caller: Caller, clientId: string): Promise<{ itemId: string }> {
    return this.db.transaction(
      async (trx) => {
        const app = await this.mustManage(trx, caller, clientId, "portal:admin:updateItems");
        await deleteApp(trx, clientId);
        await recordEvent(trx, {
          source: "item",
          operation: "update",
          objectId: app.item_id,
          actor: actorOf(caller),
        });
        return { itemId: app.item_id };
      },
      // The app's tokens may be held in any node's cache of token holders.
      { changes: ["auth"] },
    );
  }
}
