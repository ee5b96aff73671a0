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
  events: EventTable;
}

export interface OrganizationTable {
  id: string;
  /** Always 1: a unique column that makes concurrent first start-ups create one organization. */
  singleton: number;
  /** JSON object holding every setting of the organization update operation. */
  settings: string;
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

export interface TokenTable {
  /** SHA-256 of the token: a database leak does not leak usable tokens. */
  token_hash: string;
  user_id: string;
  created: number;
  expires: number;
  client: string;
  referer: string;
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
}
