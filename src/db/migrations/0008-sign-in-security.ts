import { type Kysely, sql } from "kysely";
import type { Engine } from "../database.js";

/**
 * Sign-in security (issue 12): the organization's security policy, password history and account
 * lockout.
 *
 * - `organizations.security_policy`: JSON object of the settings `securityPolicy/update` changed;
 *   defaults fill the rest on read, as for `settings`.
 * - `password_history`: every password hash a user has had, newest last; the newest row's
 *   `created` is when the current password was set (for `expirationInDays`), the ones before it
 *   are what `historySize` forbids reusing. Existing accounts get their current hash, dated now:
 *   an upgrade must not expire every password at once.
 * - `sign_in_failures`: consecutive failed sign-ins by lower-case username, whether or not an
 *   account of that name exists (a lockout must not tell which names exist), and until when the
 *   name is locked.
 */
export async function up(db: Kysely<unknown>, _engine: Engine): Promise<void> {
  await db.schema
    .alterTable("organizations")
    .addColumn("security_policy", "text", (c) => c.notNull().defaultTo("{}"))
    .execute();

  await db.schema
    .createTable("password_history")
    .addColumn("user_id", "text", (c) => c.notNull().references("users.id").onDelete("cascade"))
    .addColumn("password_hash", "text", (c) => c.notNull())
    .addColumn("created", "bigint", (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex("password_history_user")
    .on("password_history")
    .columns(["user_id", "created"])
    .execute();
  const now = Date.now();
  await sql`INSERT INTO password_history (user_id, password_hash, created)
            SELECT id, password_hash, ${now} FROM users`.execute(db);

  await db.schema
    .createTable("sign_in_failures")
    .addColumn("username_key", "text", (c) => c.primaryKey())
    .addColumn("failures", "integer", (c) => c.notNull())
    .addColumn("first_failure", "bigint", (c) => c.notNull())
    .addColumn("locked_until", "bigint", (c) => c.notNull())
    .execute();
}
