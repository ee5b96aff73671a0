import { Ajv } from "ajv";
import { sql } from "kysely";
import { BUILT_IN_ROLES, baseRoleOf, isPrivilege } from "../../src/auth/privileges.js";
import { LOCKOUT_RULE_RANGES, PASSWORD_RULE_RANGES } from "../../src/auth/security-policy.js";
import { USERNAME_PATTERN } from "../../src/auth/username.js";
import { FILE_CHUNK_BYTES } from "../../src/content/file-store.js";
import { checkResourcePath, MAX_RESOURCES_PER_ITEM } from "../../src/content/item-resources.js";
import { RELATIONSHIP_TYPES } from "../../src/content/relationship-types.js";
import { MAX_PART_NUMBER } from "../../src/content/upload.service.js";
import type { Db } from "../../src/db/database.js";
import {
  addToDefinitionSchema,
  checkUpdateDefinition,
  updateDefinitionSchema,
} from "../../src/features/service-definition.js";
import { httpUrlProblem } from "../../src/outbound/guard.js";
import { isSettingName, ORG_SETTINGS, SETTING_NAMES } from "../../src/portal/org-settings.js";
import { parseTrigger } from "../../src/webhooks/triggers.js";

/**
 * Database invariants: what every row must satisfy whatever requests came before. Each broken rule
 * is reported per offending row (`rule: table row: detail`), so a failure names the table, the row
 * and the rule. Rules SQL can state run as a few UNION ALL queries; the rest (JSON shapes, keys,
 * settings, definitions) run in JavaScript on rows read once per table. Used after every fuzzed
 * route (`test/api/fuzz/harness.ts`); `test/api/fuzz/invariant-checker.test.ts` proves each rule
 * can fail by planting bad rows in a throwaway store.
 *
 * Foreign keys declared in the migrations are checked on SQLite with `PRAGMA foreign_key_check`;
 * every relationship, declared or not, is also checked with an explicit orphan query, which is
 * the only check for those without a constraint (workspace links to groups, copies to items,
 * notifications to events) and works the same on both engines.
 */

type Row = Record<string, any>;

const ajv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true });
const validServiceDefinition = ajv.compile(updateDefinitionSchema);
const validLayers = ajv.compile(addToDefinitionSchema);

/** Relationships: child table and column, parent table and column; `when` limits the children checked. */
const RELATIONSHIPS: readonly [string, string, string, string, string?][] = [
  ["users", "role_id", "roles", "id"],
  ["tokens", "user_id", "users", "id"],
  ["password_history", "user_id", "users", "id"],
  ["folders", "owner_id", "users", "id"],
  ["items", "owner_id", "users", "id"],
  ["items", "folder_id", "folders", "id"],
  ["item_tags", "item_id", "items", "id"],
  ["item_categories", "item_id", "items", "id"],
  ["user_notifications", "user_id", "users", "id"],
  ["notification_quotas", "sender_id", "users", "id"],
  ["group_category_schemas", "group_id", "groups", "id"],
  ["item_files", "item_id", "items", "id"],
  ["item_file_chunks", "file_id", "item_files", "file_id"],
  ["groups", "owner_id", "users", "id"],
  ["group_members", "group_id", "groups", "id"],
  ["group_members", "user_id", "users", "id"],
  ["group_invitations", "group_id", "groups", "id"],
  ["group_invitations", "user_id", "users", "id"],
  ["group_applications", "group_id", "groups", "id"],
  ["group_applications", "user_id", "users", "id"],
  ["item_shares", "item_id", "items", "id"],
  ["item_shares", "group_id", "groups", "id"],
  ["comments", "item_id", "items", "id"],
  ["item_relationships", "origin_id", "items", "id"],
  ["item_relationships", "destination_id", "items", "id"],
  ["feature_services", "item_id", "items", "id"],
  ["feature_attachments", "item_id", "items", "id"],
  ["feature_attachment_chunks", "file_id", "feature_attachments", "file_id"],
  ["notifications", "webhook_id", "webhooks", "id"],
  // A ping has no event (`event_id` empty); every other notification delivers a recorded one.
  ["notifications", "event_id", "events", "id", "c.event_id <> ''"],
  ["notification_attempts", "notification_id", "notifications", "id"],
  ["collaboration_participants", "collaboration_id", "collaborations", "id"],
  ["collaboration_invitations", "collaboration_id", "collaborations", "id"],
  ["workspaces", "collaboration_id", "collaborations", "id"],
  ["workspace_modes", "workspace_id", "workspaces", "id"],
  ["workspace_links", "workspace_id", "workspaces", "id"],
  ["workspace_links", "group_id", "groups", "id"],
  ["collaboration_copies", "workspace_id", "workspaces", "id"],
  ["collaboration_copies", "item_id", "items", "id"],
  ["sync_schedules", "workspace_id", "workspaces", "id"],
];

const ENUMS: readonly [string, string, readonly (string | number)[]][] = [
  ["users", "role", BUILT_IN_ROLES],
  ["users", "access", ["private", "org", "public"]],
  ["users", "disabled", [0, 1]],
  ["users", "provider", ["arcgis"]],
  ["users", "units", ["english", "metric"]],
  ["items", "access", ["private", "shared", "org", "public"]],
  ["items", "protected", [0, 1]],
  ["item_tags", "access", ["private", "shared", "org", "public"]],
  ["item_relationships", "type", Object.keys(RELATIONSHIP_TYPES)],
  ["groups", "access", ["private", "org", "public"]],
  ["groups", "is_invitation_only", [0, 1]],
  ["groups", "is_view_only", [0, 1]],
  ["groups", "protected", [0, 1]],
  ["groups", "sort_field", ["title", "owner", "avgrating", "numviews", "created", "modified"]],
  ["groups", "sort_order", ["asc", "desc"]],
  ["group_members", "member_type", ["owner", "admin", "member"]],
  ["feature_services", "is_view", [0, 1]],
  ["webhooks", "is_active", [0, 1]],
  ["webhooks", "changes", ["allChanges", "manualChanges"]],
  ["notifications", "status", ["pending", "delivered", "failed"]],
  ["collaborations", "role", ["host", "guest"]],
  ["collaboration_participants", "role", ["host", "guest"]],
  ["collaboration_participants", "status", ["active", "pending"]],
  ["collaboration_participants", "delete_contributed", [0, 1]],
  ["collaboration_participants", "delete_received", [0, 1]],
  ["collaboration_invitations", "status", ["pending", "accepted", "invalidated"]],
  ["workspace_modes", "access_mode", ["send", "receive", "sendAndReceive"]],
  ["workspace_links", "realtime", [0, 1]],
  ["workspace_links", "copy_feature_data", [0, 1]],
  ["workspace_links", "copy_by_ref_if_copy_fail", [0, 1]],
  ["sync_jobs", "exec_type", ["manual", "scheduled", "realtime"]],
  [
    "sync_jobs",
    "status",
    ["submitted", "started", "in_progress", "failed", "completed_with_failures", "completed"],
  ],
  ["sync_schedules", "state", ["active", "paused", "completed"]],
];

/** Text columns that must never be empty. */
const REQUIRED_TEXT: readonly [string, string][] = [
  ["organizations", "id"],
  ["users", "username"],
  ["users", "password_hash"],
  ["password_history", "password_hash"],
  ["users", "user_type"],
  ["roles", "name"],
  ["folders", "title"],
  ["items", "title"],
  ["items", "type"],
  ["groups", "title"],
  ["comments", "comment"],
  ["comments", "owner"],
  ["feature_services", "name"],
  ["webhooks", "name"],
  ["webhooks", "payload_url"],
  ["events", "source"],
  ["events", "operation"],
  ["events", "object_id"],
  ["collaborations", "name"],
  ["workspaces", "name"],
  ["collaboration_participants", "portal_url"],
  ["collaboration_invitations", "guest_portal_url"],
];

/** Lower-case key columns that must follow the column they are the key of. */
const KEYS: readonly [string, string, string][] = [
  ["users", "username_key", "username"],
  ["roles", "name_key", "name"],
  ["folders", "title_key", "title"],
  ["items", "title_key", "title"],
  ["items", "type_key", "type"],
  ["items", "owner_key", "owner"],
  ["groups", "title_key", "title"],
  ["feature_services", "name_key", "name"],
];

/**
 * Text columns that must hold no NUL character: PostgreSQL cannot store one, so a row SQLite
 * accepted with it could not exist on the other engine. (JSON columns are checked parsed: their
 * text holds NUL escaped.)
 */
const NO_NUL: readonly [string, readonly string[]][] = [
  ["users", ["username", "full_name", "first_name", "last_name", "email", "description"]],
  ["roles", ["name", "description"]],
  ["folders", ["title"]],
  ["items", ["title", "type", "description", "snippet", "url"]],
  ["item_files", ["kind", "name", "content_type", "access"]],
  ["feature_attachments", ["name", "content_type", "keywords"]],
  ["groups", ["title", "description", "snippet"]],
  ["comments", ["comment"]],
  ["webhooks", ["name", "payload_url", "secret"]],
  ["collaborations", ["name", "description"]],
  ["workspaces", ["name", "description"]],
];

/** The column that names a row in a report, where it is not `id`. */
const ROW_NAME: Readonly<Record<string, string>> = {
  feature_services: "item_id",
  item_files: "item_id",
  feature_attachments: "file_id",
  collaboration_participants: "portal_id",
};

type JsonShape = "object" | "array" | "strings" | "object?";
const SHAPE_NAMES: Record<JsonShape, string> = {
  object: "an object",
  "object?": "an object",
  array: "an array",
  strings: "an array of strings",
};

/** JSON text columns and the shape each must parse to; no string in them may hold NUL. */
const JSON_COLUMNS: readonly [string, string, JsonShape][] = [
  ["organizations", "settings", "object"],
  ["organizations", "security_policy", "object"],
  ["users", "tags", "strings"],
  ["roles", "privileges", "strings"],
  ["events", "properties", "object"],
  ["items", "type_keywords", "strings"],
  ["items", "tags", "strings"],
  ["items", "properties", "object?"],
  ["groups", "tags", "strings"],
  ["feature_services", "definition", "object"],
  ["feature_services", "layers", "array"],
  ["feature_services", "tables", "array"],
  ["webhooks", "events", "strings"],
  ["webhooks", "config", "object"],
  ["notifications", "payload", "object"],
  ["collaboration_participants", "contact", "object"],
  ["collaboration_invitations", "workspaces", "object"],
  ["collaboration_invitations", "file", "object"],
  ["workspaces", "config", "object"],
  ["sync_jobs", "results", "array"],
];

const short = (value: unknown): string => {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text === undefined
    ? String(value)
    : text.length > 80
      ? `${text.slice(0, 80)}…(${text.length})`
      : text;
};

function parseJson(text: unknown): { ok: true; value: unknown } | { ok: false } {
  if (typeof text !== "string") return { ok: false };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

function hasNul(value: unknown): boolean {
  if (typeof value === "string") return value.includes("\u0000");
  if (Array.isArray(value)) return value.some(hasNul);
  if (typeof value === "object" && value !== null) {
    return Object.entries(value).some(([k, v]) => k.includes("\u0000") || hasNul(v));
  }
  return false;
}

/** The columns the JavaScript rules read, by table. */
function readsByTable(): Map<string, Set<string>> {
  const reads = new Map<string, Set<string>>();
  const add = (table: string, ...columns: string[]) =>
    reads.set(table, new Set([...(reads.get(table) ?? []), ...columns]));
  for (const [table, key, column] of KEYS) add(table, key, column);
  for (const [table, column] of JSON_COLUMNS) add(table, column);
  for (const [table, columns] of NO_NUL) add(table, ...columns);
  return reads;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The text a client sends for a stored setting value: what the setting's spec parses. */
function asParam(value: unknown): string {
  return typeof value === "string"
    ? value
    : typeof value === "object"
      ? JSON.stringify(value)
      : String(value);
}

/**
 * Every rule broken by a row of the database, one line each (`rule: table row: detail`); empty
 * when the database is valid.
 */
export async function findInvalidRows(db: Db): Promise<string[]> {
  const q = db.kysely;
  const out: string[] = [];
  const bad = (rule: string, where: string, detail = "") =>
    out.push(`${rule}: ${where}${detail ? `: ${detail}` : ""}`);
  const select = async (text: string): Promise<Row[]> => (await sql.raw(text).execute(q)).rows as Row[];

  if (db.engine === "sqlite") {
    for (const r of await select("PRAGMA foreign_key_check")) {
      bad("foreign key", `${r.table} rowid ${r.rowid}`, `no row in ${r.parent}`);
    }
  }

  await Promise.all([
    // One query per kind of rule (a UNION ALL of one branch per column): few round trips.
    (async () => {
      const branches = RELATIONSHIPS.map(
        ([child, column, parent, parentColumn, when]) =>
          `SELECT '${child}.${column}' AS c, '${parent}' AS p, c.${column} AS v FROM ${child} c
           WHERE c.${column} IS NOT NULL${when ? ` AND ${when}` : ""}
           AND NOT EXISTS (SELECT 1 FROM ${parent} p WHERE p.${parentColumn} = c.${column})`,
      );
      for (const r of await select(branches.join(" UNION ALL "))) {
        bad("orphan", `${r.c} = ${short(r.v)}`, `no ${r.p} row`);
      }
    })(),
    (async () => {
      // An item file is its data, its thumbnail, a file of its info folder (`updateinfo`), one of
      // its resources (`addResources`), or the mark and the parts of an upload in parts.
      for (const r of await select(
        `SELECT item_id, kind FROM item_files
         WHERE kind NOT IN ('data', 'thumbnail', 'upload') AND kind NOT LIKE 'info/%'
           AND kind NOT LIKE 'resources/%' AND kind NOT LIKE 'parts/%'`,
      )) {
        bad("item file kind", String(r.item_id), `kind ${short(r.kind)}`);
      }
      // Parts belong to an upload under way (its mark, which holds no bytes); numbers 1 to 10,000.
      for (const r of await select(
        `SELECT p.item_id, p.kind FROM item_files p WHERE p.kind LIKE 'parts/%'
         AND NOT EXISTS (SELECT 1 FROM item_files u WHERE u.item_id = p.item_id AND u.kind = 'upload')`,
      )) {
        bad("item upload part", String(r.item_id), `${short(r.kind)} without an upload under way`);
      }
      for (const r of await select(`SELECT item_id, kind FROM item_files WHERE kind LIKE 'parts/%'`)) {
        const n = Number(String(r.kind).slice("parts/".length));
        if (!/^parts\/\d{5}$/.test(String(r.kind)) || n < 1 || n > MAX_PART_NUMBER) {
          bad("item upload part", String(r.item_id), `kind ${short(r.kind)}`);
        }
      }
      for (const r of await select(
        `SELECT item_id, size FROM item_files WHERE kind = 'upload' AND size <> 0`,
      )) {
        bad("item upload mark", String(r.item_id), `holds ${r.size} bytes`);
      }
    })(),
    (async () => {
      // A resource has when it was added and an access; other files have neither (0015). Its path
      // passed the checks of item-resources.ts, so it never climbs out of its item.
      for (const r of await select(
        `SELECT item_id, kind, created, access FROM item_files
         WHERE (kind LIKE 'resources/%' AND (created IS NULL OR access IS NULL OR access NOT IN ('inherit', 'private')))
            OR (kind NOT LIKE 'resources/%' AND (created IS NOT NULL OR access IS NOT NULL))`,
      )) {
        bad("item resource", String(r.item_id), `${short(r.kind)}: created ${r.created}, access ${r.access}`);
      }
      for (const r of await select(`SELECT item_id, kind FROM item_files WHERE kind LIKE 'resources/%'`)) {
        const path = String(r.kind).slice("resources/".length);
        try {
          checkResourcePath("resource", path);
        } catch {
          bad("item resource path", String(r.item_id), short(path));
        }
      }
      // At most MAX_RESOURCES_PER_ITEM resources per item.
      for (const r of await select(
        `SELECT item_id, COUNT(*) AS n FROM item_files WHERE kind LIKE 'resources/%' GROUP BY item_id HAVING COUNT(*) > ${MAX_RESOURCES_PER_ITEM}`,
      )) {
        bad("item resources", String(r.item_id), `${r.n} resources`);
      }
    })(),
    (async () => {
      const branches = ENUMS.map(([table, column, allowed]) => {
        const list = allowed.map((v) => (typeof v === "number" ? String(v) : `'${v}'`)).join(", ");
        return `SELECT '${table}.${column}' AS c, CAST(${column} AS TEXT) AS v, COUNT(*) AS n FROM ${table}
                WHERE ${column} IS NOT NULL AND ${column} NOT IN (${list}) GROUP BY ${column}`;
      });
      for (const r of await select(branches.join(" UNION ALL "))) {
        bad("enum", r.c, `${Number(r.n)} row(s) hold ${short(r.v)}`);
      }
    })(),
    (async () => {
      const branches = REQUIRED_TEXT.map(
        ([table, column]) =>
          `SELECT '${table}.${column}' AS c, COUNT(*) AS n FROM ${table} WHERE ${column} IS NULL OR ${column} = ''`,
      );
      for (const r of await select(branches.join(" UNION ALL "))) {
        if (Number(r.n) > 0) bad("required text", r.c, `${Number(r.n)} row(s) empty`);
      }
    })(),
    // Rules checked in JavaScript, on rows read once per table.
    ...[...readsByTable()].map(async ([table, columns]) => {
      const name = ROW_NAME[table] ?? "id";
      const rows = await select(`SELECT ${[...new Set([name, ...columns])].join(", ")} FROM ${table}`);
      for (const r of rows) {
        for (const [t, key, column] of KEYS) {
          // Compared here: SQLite's lower() folds ASCII only, JavaScript's toLowerCase() Unicode.
          if (t === table && r[key] !== String(r[column]).toLowerCase()) {
            bad("key", `${table}.${key}`, `${short(r[key])} for ${short(r[column])}`);
          }
        }
        for (const [t, column, shape] of JSON_COLUMNS) {
          if (t !== table || (shape === "object?" && r[column] === null)) continue;
          const where = `${table}.${column} of ${short(r[name])}`;
          const parsed = parseJson(r[column]);
          if (!parsed.ok) {
            bad("json", where, `not JSON: ${short(r[column])}`);
            continue;
          }
          const v = parsed.value;
          const fits =
            shape === "array"
              ? Array.isArray(v)
              : shape === "strings"
                ? Array.isArray(v) && v.every((e) => typeof e === "string")
                : isObject(v);
          if (!fits) bad("json", where, `not ${SHAPE_NAMES[shape]}: ${short(r[column])}`);
          if (hasNul(v)) bad("nul", where, "holds U+0000");
        }
        for (const [t, textColumns] of NO_NUL) {
          if (t !== table) continue;
          for (const column of textColumns) {
            if (hasNul(r[column])) bad("nul", `${table}.${column} of ${short(r[name])}`, "holds U+0000");
          }
        }
      }
    }),
    checkOrganization(select, bad),
    checkUsers(select, bad),
    checkContent(select, bad),
    checkGroups(select, bad),
    checkServices(select, bad),
    checkWebhooks(select, bad),
    checkCollaborations(select, bad),
  ]);
  return out.sort();
}

type Select = (text: string) => Promise<Row[]>;
type Bad = (rule: string, where: string, detail?: string) => void;

async function checkOrganization(select: Select, bad: Bad) {
  const orgs = await select("SELECT id, settings, security_policy FROM organizations");
  if (orgs.length !== 1) bad("organization", "organizations", `${orgs.length} rows instead of one`);
  for (const org of orgs) {
    const parsed = parseJson(org.settings);
    if (!parsed.ok || !isObject(parsed.value)) continue;
    const settings = parsed.value;
    for (const name of Object.keys(settings)) {
      if (!isSettingName(name)) bad("setting", `organizations.settings.${short(name)}`, "unknown setting");
    }
    // A stored value must be the default or one the setting's own parameter spec accepts.
    for (const name of SETTING_NAMES) {
      const def = ORG_SETTINGS[name] as { spec: { parse(raw: string): { ok: boolean } }; default: unknown };
      // Settings never changed are not stored: the default applies.
      if (!(name in settings)) continue;
      const value = settings[name];
      if (JSON.stringify(value) === JSON.stringify(def.default)) continue;
      if (value === null || value === "" || !def.spec.parse(asParam(value)).ok) {
        bad("setting", `organizations.settings.${name}`, `invalid value ${short(value)}`);
      }
    }
    checkSecurityPolicy(org.security_policy, bad);
  }
}

/** Every stored rule is one the update operation accepts: in its range, or null where allowed. */
function checkSecurityPolicy(text: string, bad: Bad) {
  const parsed = parseJson(text);
  if (!parsed.ok || !isObject(parsed.value)) return;
  const stored = parsed.value as Record<string, unknown>;
  const groups: [string, Record<string, { min: number; max: number; nullable?: boolean }>][] = [
    ["passwordPolicy", PASSWORD_RULE_RANGES],
    ["lockoutPolicy", LOCKOUT_RULE_RANGES],
  ];
  for (const name of Object.keys(stored)) {
    if (!["passwordPolicy", "lockoutPolicy", "modified"].includes(name)) {
      bad("security policy", `organizations.security_policy.${short(name)}`, "unknown key");
    }
  }
  for (const [group, ranges] of groups) {
    const rules = stored[group];
    if (rules === undefined) continue;
    if (!isObject(rules)) {
      bad("security policy", `organizations.security_policy.${group}`, "not an object");
      continue;
    }
    for (const [rule, value] of Object.entries(rules as Record<string, unknown>)) {
      const range = ranges[rule];
      const ok =
        range !== undefined &&
        ((value === null && range.nullable === true) ||
          (Number.isInteger(value) && (value as number) >= range.min && (value as number) <= range.max));
      if (!ok)
        bad(
          "security policy",
          `organizations.security_policy.${group}.${short(rule)}`,
          `invalid value ${short(value)}`,
        );
    }
  }
}

async function checkUsers(select: Select, bad: Bad) {
  const users = await select(
    `SELECT u.id, u.username, u.email, u.role, u.role_id, u.culture, u.region, u.first_name, u.last_name,
            u.disabled, r.privileges AS role_privileges
     FROM users u LEFT JOIN roles r ON r.id = u.role_id`,
  );
  for (const u of users) {
    const where = `users ${short(u.username)}`;
    if (!USERNAME_PATTERN.test(String(u.username)))
      bad("username", where, "does not match the username rule");
    // The first administrator, made at start-up, has no e-mail address; any other is one.
    if (u.email !== "" && (!/^[^\s@]+@[^\s@]+$/.test(String(u.email)) || [...String(u.email)].length > 254)) {
      bad("email", where, short(u.email));
    }
    if (u.culture !== null && !/^[a-z]{2,3}(-[A-Za-z]{2,4})?$/.test(String(u.culture))) {
      bad("culture", where, short(u.culture));
    }
    if (u.region !== null && !/^[A-Za-z]{2,3}$/.test(String(u.region))) bad("region", where, short(u.region));
    for (const column of ["first_name", "last_name"]) {
      if ([...String(u[column])].length > 128) bad("length", `${where}.${column}`, "longer than 128");
    }
    // A custom role's holders carry the built-in role it derives from (`setPrivileges` keeps it).
    if (u.role_id !== null && typeof u.role_privileges === "string") {
      const privileges = parseJson(u.role_privileges);
      if (privileges.ok && Array.isArray(privileges.value)) {
        const base = baseRoleOf(privileges.value as string[]);
        if (base !== u.role)
          bad("role", where, `role ${u.role} but custom role ${u.role_id} derives ${base}`);
      }
    }
  }
  const admins = users.filter(
    (u) => u.role === "org_admin" && u.role_id === null && Number(u.disabled) === 0,
  );
  if (admins.length === 0) bad("administrator", "users", "no enabled default administrator");

  for (const r of await select("SELECT id, privileges FROM roles")) {
    const parsed = parseJson(r.privileges);
    if (!parsed.ok || !Array.isArray(parsed.value)) continue;
    const unknown = parsed.value.filter((p) => typeof p !== "string" || !isPrivilege(p));
    if (unknown.length > 0) bad("privilege", `roles ${short(r.id)}`, `unknown ${short(unknown)}`);
  }
  for (const t of await select("SELECT user_id, created, expires FROM tokens")) {
    if (Number(t.expires) <= Number(t.created))
      bad("token", `tokens of ${short(t.user_id)}`, "expires before it was made");
  }
}

async function checkContent(select: Select, bad: Bad) {
  for (const f of await select("SELECT id, title FROM folders")) {
    if (/[/\\"<>]/.test(String(f.title))) bad("folder title", `folders ${short(f.id)}`, short(f.title));
  }
  const mismatched = await select(
    `SELECT i.id, i.owner, u.username FROM items i JOIN users u ON u.id = i.owner_id WHERE i.owner <> u.username`,
  );
  for (const r of mismatched)
    bad("owner", `items ${r.id}`, `owner ${short(r.owner)} but owner_id is ${short(r.username)}`);
  const foreignFolders = await select(
    `SELECT i.id FROM items i JOIN folders f ON f.id = i.folder_id WHERE f.owner_id <> i.owner_id`,
  );
  for (const r of foreignFolders) bad("folder", `items ${r.id}`, "in a folder of another user");
  for (const r of await select(`SELECT id, size FROM items WHERE size < 0`))
    bad("size", `items ${r.id}`, String(r.size));

  // `access` is derived from the shares (sharing.service.ts): shared means some group holds it,
  // private that none does.
  const shared = await select(
    `SELECT i.id, i.access FROM items i WHERE
       (i.access = 'shared' AND NOT EXISTS (SELECT 1 FROM item_shares s WHERE s.item_id = i.id))
       OR (i.access = 'private' AND EXISTS (SELECT 1 FROM item_shares s WHERE s.item_id = i.id))`,
  );
  for (const r of shared) bad("access", `items ${r.id}`, `access ${r.access} does not match its shares`);

  // item_tags holds one row per lower-cased tag, with copies of the item's search columns (0004).
  const items = await select("SELECT id, tags, modified, access, owner_id FROM items");
  const tagRows = await select("SELECT item_id, tag_key, modified, access, owner_id FROM item_tags");
  const byItem = new Map<string, Row[]>();
  for (const t of tagRows) byItem.set(t.item_id, [...(byItem.get(t.item_id) ?? []), t]);
  for (const item of items) {
    const parsed = parseJson(item.tags);
    if (!parsed.ok || !Array.isArray(parsed.value)) continue;
    const want = [...new Set((parsed.value as unknown[]).map((t) => String(t).toLowerCase()))].sort();
    const rows = byItem.get(item.id) ?? [];
    const have = rows.map((t) => String(t.tag_key)).sort();
    if (JSON.stringify(want) !== JSON.stringify(have)) {
      bad("tags", `item_tags of ${item.id}`, `${short(have)} for tags ${short(want)}`);
    }
    for (const t of rows) {
      if (
        Number(t.modified) !== Number(item.modified) ||
        t.access !== item.access ||
        t.owner_id !== item.owner_id
      ) {
        bad("tags", `item_tags of ${item.id}`, "copies of modified, access or owner_id differ from the item");
        break;
      }
    }
  }
  // item_categories holds the lower-cased keys of the item's categories (0014); an extent is four
  // numbers in WGS 84 with its minima at most its maxima, or none at all.
  const categoryItems = await select(
    "SELECT id, categories, extent_xmin, extent_ymin, extent_xmax, extent_ymax FROM items",
  );
  const categoryRows = await select("SELECT item_id, category_key FROM item_categories");
  const keysOf = new Map<string, string[]>();
  for (const r of categoryRows)
    keysOf.set(r.item_id, [...(keysOf.get(r.item_id) ?? []), String(r.category_key)]);
  for (const item of categoryItems) {
    const parsed = parseJson(item.categories);
    if (!parsed.ok || !Array.isArray(parsed.value)) {
      bad("categories", `items ${item.id}`, `categories ${short(item.categories)} is not a JSON array`);
    } else {
      const want = [...new Set((parsed.value as unknown[]).map((t) => String(t).toLowerCase()))].sort();
      const have = (keysOf.get(item.id) ?? []).sort();
      if (JSON.stringify(want) !== JSON.stringify(have)) {
        bad("categories", `item_categories of ${item.id}`, `${short(have)} for categories ${short(want)}`);
      }
    }
    const box = [item.extent_xmin, item.extent_ymin, item.extent_xmax, item.extent_ymax];
    if (box.every((v) => v === null)) continue;
    const [xmin, ymin, xmax, ymax] = box.map(Number) as [number, number, number, number];
    if (
      box.some((v) => v === null) ||
      !(xmin >= -180 && xmin <= xmax && xmax <= 180 && ymin >= -90 && ymin <= ymax && ymax <= 90)
    ) {
      bad("extent", `items ${item.id}`, short(JSON.stringify(box)));
    }
  }
  // A file's bytes are its chunks (0007): numbered from 0 without a gap, each of FILE_CHUNK_BYTES
  // but the last, adding up to the file's size; an item's size is its data's.
  const files = await select(
    `SELECT f.item_id, f.kind, f.size, i.size AS item_size, COUNT(c.seq) AS n,
            COALESCE(SUM(length(c.data)), 0) AS bytes, COALESCE(MIN(c.seq), 0) AS first, COALESCE(MAX(c.seq), -1) AS last
     FROM item_files f JOIN items i ON i.id = f.item_id
     LEFT JOIN item_file_chunks c ON c.file_id = f.file_id
     GROUP BY f.item_id, f.kind, f.size, i.size`,
  );
  for (const f of files) {
    const where = `item_files ${f.item_id} ${f.kind}`;
    const size = Number(f.size);
    const n = Math.ceil(size / FILE_CHUNK_BYTES);
    if (Number(f.bytes) !== size)
      bad("file", where, `size ${size} but its chunks hold ${Number(f.bytes)} bytes`);
    if (Number(f.n) !== n || Number(f.first) !== 0 || Number(f.last) !== n - 1) {
      bad("file", where, `chunks ${Number(f.first)}..${Number(f.last)} (${Number(f.n)}) for ${n}`);
    }
    if (f.kind === "data" && Number(f.item_size) !== size) {
      bad("file", where, `the item's size is ${Number(f.item_size)} but its data holds ${size} bytes`);
    }
  }
  const shortChunks = await select(
    `SELECT c.file_id, c.seq, length(c.data) AS len FROM item_file_chunks c JOIN item_files f ON f.file_id = c.file_id
     WHERE (c.seq + 1) * ${FILE_CHUNK_BYTES} < f.size AND length(c.data) <> ${FILE_CHUNK_BYTES}`,
  );
  for (const c of shortChunks)
    bad("file", `item_file_chunks ${c.file_id} ${c.seq}`, `${Number(c.len)} bytes`);

  for (const c of await select("SELECT id, comment FROM comments")) {
    if ([...String(c.comment)].length > 2048) bad("length", `comments ${c.id}`, "longer than 2048");
  }
}

async function checkGroups(select: Select, bad: Bad) {
  const mismatched = await select(
    `SELECT g.id, g.owner, u.username FROM groups g JOIN users u ON u.id = g.owner_id WHERE g.owner <> u.username`,
  );
  for (const r of mismatched)
    bad("owner", `groups ${r.id}`, `owner ${short(r.owner)} but owner_id is ${short(r.username)}`);
  // Each group has exactly one member of type owner: its owner.
  const owners = await select(
    `SELECT g.id, g.owner_id, (SELECT COUNT(*) FROM group_members m WHERE m.group_id = g.id AND m.member_type = 'owner') AS n,
            (SELECT COUNT(*) FROM group_members m WHERE m.group_id = g.id AND m.member_type = 'owner' AND m.user_id = g.owner_id) AS own
     FROM groups g`,
  );
  for (const r of owners) {
    if (Number(r.n) !== 1 || Number(r.own) !== 1) {
      bad(
        "group owner",
        `groups ${r.id}`,
        `${Number(r.n)} owner member(s), owner among them: ${Number(r.own) === 1}`,
      );
    }
  }
  const names = await select(
    `SELECT 'group_members' AS t, m.group_id AS g, m.username AS name, u.username AS actual FROM group_members m JOIN users u ON u.id = m.user_id WHERE m.username <> u.username
     UNION ALL
     SELECT 'group_invitations', i.group_id, i.username, u.username FROM group_invitations i JOIN users u ON u.id = i.user_id WHERE i.username <> u.username
     UNION ALL
     SELECT 'group_applications', a.group_id, a.username, u.username FROM group_applications a JOIN users u ON u.id = a.user_id WHERE a.username <> u.username`,
  );
  for (const r of names) bad("username", `${r.t} of ${r.g}`, `${short(r.name)} for user ${short(r.actual)}`);
  // Inviting a member is refused and joining removes the invitation: none is left for a member.
  const stale = await select(
    `SELECT i.group_id, i.username FROM group_invitations i
     WHERE EXISTS (SELECT 1 FROM group_members m WHERE m.group_id = i.group_id AND m.user_id = i.user_id)`,
  );
  for (const r of stale)
    bad("invitation", `group_invitations of ${r.group_id}`, `${short(r.username)} is already a member`);
  // Every way of joining drops the request to join: none is left for a member.
  const answered = await select(
    `SELECT a.group_id, a.username FROM group_applications a
     WHERE EXISTS (SELECT 1 FROM group_members m WHERE m.group_id = a.group_id AND m.user_id = a.user_id)`,
  );
  for (const r of answered)
    bad("application", `group_applications of ${r.group_id}`, `${short(r.username)} is already a member`);
}

async function checkServices(select: Select, bad: Bad) {
  const services = await select(
    `SELECT f.item_id, f.name, f.definition, f.layers, f.tables, i.type FROM feature_services f LEFT JOIN items i ON i.id = f.item_id`,
  );
  for (const s of services) {
    const where = `feature_services ${short(s.name)}`;
    if (!/^[A-Za-z0-9_]{1,128}$/.test(String(s.name)))
      bad("service name", where, "not letters, digits and _");
    if (s.type !== null && s.type !== "Feature Service")
      bad("service item", where, `item type ${short(s.type)}`);
    const definition = parseJson(s.definition);
    if (definition.ok && isObject(definition.value)) {
      const reason = validServiceDefinition(definition.value)
        ? checkUpdateDefinition(definition.value)
        : ajv.errorsText(validServiceDefinition.errors);
      if (reason) bad("service definition", where, reason);
    }
    const layers = parseJson(s.layers);
    const tables = parseJson(s.tables);
    if (layers.ok && tables.ok && Array.isArray(layers.value) && Array.isArray(tables.value)) {
      const both = { layers: layers.value, tables: tables.value };
      if (!validLayers(both)) bad("service layers", where, ajv.errorsText(validLayers.errors));
      const ids = [...layers.value, ...tables.value].map((l: any) => l?.id);
      if (ids.some((id) => !Number.isSafeInteger(id) || id < 0))
        bad("service layers", where, `ids ${short(ids)}`);
      if (new Set(ids).size !== ids.length) bad("service layers", where, `duplicate ids ${short(ids)}`);
    }
  }
  await checkAttachments(select, bad);
}

/**
 * Attachments (0011) belong to a stored layer and to a feature that exists (deleting either
 * deletes them), and their bytes are their chunks, as an item file's are.
 */
async function checkAttachments(select: Select, bad: Bad) {
  const layers = await select(
    `SELECT DISTINCT a.item_id, a.layer_id, l.table_name FROM feature_attachments a
     LEFT JOIN feature_layers l ON l.item_id = a.item_id AND l.layer_id = a.layer_id`,
  );
  for (const l of layers) {
    const where = `feature_attachments of ${l.item_id} layer ${Number(l.layer_id)}`;
    if (l.table_name === null) {
      bad("attachment", where, "the layer has no storage");
      continue;
    }
    // Table names are made by the server from an item id and a layer id (`tableName`).
    if (!/^fl_[0-9a-f]{32}_\d+$/.test(String(l.table_name))) continue;
    const orphans = await select(
      `SELECT a.object_id FROM feature_attachments a
       WHERE a.item_id = '${l.item_id}' AND a.layer_id = ${Number(l.layer_id)}
       AND NOT EXISTS (SELECT 1 FROM ${l.table_name} f WHERE f.objectid = a.object_id)`,
    );
    for (const o of orphans) bad("attachment", where, `feature ${Number(o.object_id)} does not exist`);
  }
  const files = await select(
    `SELECT a.file_id, a.size, COUNT(c.seq) AS n, COALESCE(SUM(length(c.data)), 0) AS bytes
     FROM feature_attachments a LEFT JOIN feature_attachment_chunks c ON c.file_id = a.file_id
     GROUP BY a.file_id, a.size`,
  );
  for (const f of files) {
    const size = Number(f.size);
    if (Number(f.bytes) !== size || Number(f.n) !== Math.ceil(size / FILE_CHUNK_BYTES)) {
      bad(
        "file",
        `feature_attachments ${f.file_id}`,
        `size ${size} but ${Number(f.n)} chunks of ${Number(f.bytes)} bytes`,
      );
    }
  }
}

async function checkWebhooks(select: Select, bad: Bad) {
  for (const w of await select("SELECT id, payload_url, changes, events, config FROM webhooks")) {
    const where = `webhooks ${w.id}`;
    const urlProblem = httpUrlProblem(String(w.payload_url));
    if (urlProblem) bad("webhook url", where, `${short(w.payload_url)} ${urlProblem}`);
    const events = parseJson(w.events);
    if (events.ok && Array.isArray(events.value)) {
      if (events.value.length === 0) bad("webhook events", where, "subscribes to nothing");
      for (const uri of events.value) {
        if (typeof uri === "string" && typeof parseTrigger(uri) === "string") {
          bad("webhook events", where, `${short(uri)} is not a trigger URI`);
        }
      }
    }
    const config = parseJson(w.config);
    if (config.ok && isObject(config.value)) {
      const { deactivationPolicy, sendSecretHeader, ...rest } = config.value as Record<string, any>;
      if (Object.keys(rest).length > 0) bad("webhook config", where, `unknown ${short(Object.keys(rest))}`);
      if (sendSecretHeader !== undefined && typeof sendSecretHeader !== "boolean") {
        bad("webhook config", where, "sendSecretHeader is not a boolean");
      }
      if (
        deactivationPolicy !== undefined &&
        !(
          Number.isInteger(deactivationPolicy?.numberOfFailures) &&
          Number.isInteger(deactivationPolicy?.daysInPast) &&
          deactivationPolicy.numberOfFailures >= 1 &&
          deactivationPolicy.daysInPast >= 1
        )
      ) {
        bad("webhook config", where, `deactivationPolicy ${short(deactivationPolicy)}`);
      }
    }
  }
  for (const s of await select(
    "SELECT notification_attempts AS a, timeout_seconds AS t, elapsed_seconds AS e FROM webhook_settings",
  )) {
    const [a, t, e] = [Number(s.a), Number(s.t), Number(s.e)];
    if (!(a >= 0 && a <= 5 && t >= 0 && t <= 60 && e >= 1 && e <= 100)) {
      bad("webhook settings", "webhook_settings", `attempts ${a}, timeout ${t}, elapsed ${e}`);
    }
  }
}

async function checkCollaborations(select: Select, bad: Bad) {
  const hosts = await select(
    `SELECT c.id, (SELECT COUNT(*) FROM collaboration_participants p WHERE p.collaboration_id = c.id AND p.role = 'host') AS n
     FROM collaborations c`,
  );
  for (const r of hosts)
    if (Number(r.n) !== 1) bad("collaboration", `collaborations ${r.id}`, `${Number(r.n)} hosts`);
  for (const w of await select("SELECT id, config FROM workspaces")) {
    const config = parseJson(w.config);
    if (!config.ok || !isObject(config.value)) continue;
    const c = config.value as Record<string, unknown>;
    const inRange = (v: unknown, max: number) =>
      typeof v === "number" && Number.isFinite(v) && v > 0 && v <= max;
    if (!inRange(c.maxItemSizeInMB, 1024) || !inRange(c.maxReplicationPackageSizeInMB, 102400)) {
      bad("workspace config", `workspaces ${w.id}`, short(c));
    }
  }
  const modes = await select(
    `SELECT m.workspace_id, m.portal_id FROM workspace_modes m JOIN workspaces w ON w.id = m.workspace_id
     WHERE NOT EXISTS (SELECT 1 FROM collaboration_participants p
                       WHERE p.collaboration_id = w.collaboration_id AND p.portal_id = m.portal_id)`,
  );
  for (const r of modes)
    bad("orphan", `workspace_modes of ${r.workspace_id}`, `portal ${short(r.portal_id)} takes no part`);
  for (const s of await select("SELECT workspace_id, interval_ms, repeat_count FROM sync_schedules")) {
    if (!(Number(s.interval_ms) > 0) || Number(s.repeat_count) < -1) {
      bad(
        "schedule",
        `sync_schedules ${s.workspace_id}`,
        `interval ${s.interval_ms}, repeat ${s.repeat_count}`,
      );
    }
  }
}
