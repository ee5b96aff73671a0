/**
 * The search case of `npm run bench`: a portal holding 100,000 items (or `--items N`), searched by
 * owner, tag and type. Seeding writes rows straight into the portal's database, in batches, while
 * the server runs idle: it prepares the case and is not what is measured. The rows look like what the API writes
 * (lower-cased keys, one item_tags row per tag, item_shares for shared items), so the server reads
 * them exactly as its own.
 */
import { randomBytes } from "node:crypto";
import path from "node:path";
import { performance } from "node:perf_hooks";
import SQLite from "better-sqlite3";
import pg from "pg";
import type { LoadCase } from "./load.js";
import type { EngineName, Store } from "./stores.js";

export const CONTENT = {
  /** Items of the search case unless `--items` says otherwise. */
  items: 100_000,
  owners: 100,
  tags: 1_000,
  tagsPerItem: 3,
  groups: 50,
  /** Groups the searching user belongs to, so that `shared` items take the group branch. */
  searcherGroups: 5,
} as const;

/** Twenty real ArcGIS item types, so `type:"..."` values have their usual shape. */
export const ITEM_TYPES = [
  "Feature Service",
  "Web Map",
  "Map Service",
  "Image Service",
  "Vector Tile Service",
  "Web Mapping Application",
  "Dashboard",
  "StoryMap",
  "Web Scene",
  "Scene Service",
  "CSV",
  "Shapefile",
  "File Geodatabase",
  "PDF",
  "Microsoft Excel",
  "GeoJson",
  "KML",
  "Form",
  "Notebook",
  "Hub Site Application",
] as const;

/** Access mix of the seeded items, as cumulative shares: private, shared, org, public. */
const ACCESS_MIX: readonly [string, number][] = [
  ["private", 0.4],
  ["shared", 0.5],
  ["org", 0.75],
  ["public", 1],
];

export const ownerName = (i: number) => `bench_owner_${String(i).padStart(3, "0")}`;
export const tagName = (i: number) => `tag${String(i).padStart(4, "0")}`;

/**
 * Rows per INSERT. On SQLite a multi-row VALUES list (prepared once per width), under its limit
 * of 32,766 variables for the widest table (items, 21 columns); on PostgreSQL one array per column
 * unnested, so a batch is one statement of any length.
 */
const BATCH_ROWS = 1_000;
const PG_BATCH_ROWS = 20_000;
const YEAR_MS = 365 * 24 * 3600 * 1000;

/** A deterministic generator, so every run seeds the same distribution. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const newId = () => randomBytes(16).toString("hex");

interface Sink {
  /** Rows per `insert` call that suit this sink. */
  batchRows: number;
  insert(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void>;
  /**
   * Drops the secondary indexes of `tables` until `finish`, which builds them again: one sorted
   * build instead of a million random insertions into each (the bulk of seeding a million items).
   */
  deferIndexes(tables: readonly string[]): Promise<void>;
  userId(username: string): Promise<string>;
  finish(): Promise<void>;
  abort(): Promise<void>;
}

/** Opens the store's database next to the running server: a second SQLite connection (WAL) or a PostgreSQL client. */
async function openSink(engine: EngineName, store: Store): Promise<Sink> {
  if (engine === "sqlite") {
    const dataDir = store.env.PORTICO_DATA_DIR as string;
    const db = new SQLite(path.join(dataDir, "portico.sqlite"));
    db.pragma("busy_timeout = 10000");
    // The rows are consistent by construction; checking each foreign key would look up its parent.
    db.pragma("foreign_keys = OFF");
    // Pages of the transaction stay in memory rather than spilling to the WAL before the COMMIT.
    db.pragma("cache_size = -262144");
    db.exec("BEGIN IMMEDIATE");
    const statements = new Map<string, SQLite.Statement>();
    let deferred: { name: string; sql: string }[] = [];
    return {
      batchRows: BATCH_ROWS,
      async deferIndexes(tables) {
        deferred = db
          .prepare(
            `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN (${tables.map(() => "?").join(", ")})`,
          )
          .all(...tables) as { name: string; sql: string }[];
        for (const index of deferred) db.exec(`DROP INDEX "${index.name}"`);
      },
      async insert(table, columns, rows) {
        if (rows.length === 0) return;
        const key = `${table}|${columns.length}|${rows.length}`;
        let statement = statements.get(key);
        if (!statement) {
          const tuple = `(${columns.map(() => "?").join(", ")})`;
          statement = db.prepare(
            `INSERT INTO ${table} (${columns.join(", ")}) VALUES ${rows.map(() => tuple).join(", ")}`,
          );
          statements.set(key, statement);
        }
        statement.run(...rows.flat());
      },
      async userId(username) {
        const row = db.prepare("SELECT id FROM users WHERE username_key = ?").get(username.toLowerCase()) as
          | { id: string }
          | undefined;
        if (!row) throw new Error(`no user ${username}`);
        return row.id;
      },
      async finish() {
        for (const index of deferred) db.exec(index.sql);
        db.exec("COMMIT");
        db.pragma("wal_checkpoint(TRUNCATE)");
        db.close();
      },
      async abort() {
        if (db.inTransaction) db.exec("ROLLBACK");
        db.close();
      },
    };
  }
  const client = new pg.Client({ connectionString: store.env.DATABASE_URL });
  await client.connect();
  await client.query("BEGIN");
  await client.query("SET LOCAL maintenance_work_mem = '256MB'");
  const { rows: roles } = await client.query<{ super: boolean }>(
    "SELECT rolsuper AS super FROM pg_roles WHERE rolname = current_user",
  );
  // A superuser can skip the foreign-key triggers (one lookup of the parent per row); the rows
  // are consistent by construction.
  if (roles[0]?.super) await client.query("SET LOCAL session_replication_role = replica");
  let deferred: { name: string; definition: string }[] = [];
  const types = new Map<string, Map<string, string>>();
  const typesOf = async (table: string) => {
    let known = types.get(table);
    if (!known) {
      const { rows } = await client.query<{ column_name: string; type: string }>(
        `SELECT a.attname AS column_name, format_type(a.atttypid, a.atttypmod) AS type
         FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`,
        [table],
      );
      known = new Map(rows.map((r) => [r.column_name, r.type]));
      types.set(table, known);
    }
    return known;
  };
  return {
    batchRows: PG_BATCH_ROWS,
    async deferIndexes(tables) {
      ({ rows: deferred } = await client.query<{ name: string; definition: string }>(
        `SELECT i.relname AS name, pg_get_indexdef(x.indexrelid) AS definition
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
         WHERE t.relname = ANY($1) AND t.relnamespace = current_schema()::regnamespace
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)`,
        [tables],
      ));
      for (const index of deferred) await client.query(`DROP INDEX "${index.name}"`);
    },
    async insert(table, columns, rows) {
      if (rows.length === 0) return;
      // One array per column, unnested into rows: a batch of any size is one statement with as
      // many parameters as columns (about ten times faster than a VALUES list of $n).
      const known = await typesOf(table);
      const arrays = columns.map((_, c) => rows.map((r) => r[c]));
      const casts = columns.map((column, c) => {
        const type = known.get(column);
        if (!type) throw new Error(`no column ${table}.${column}`);
        return `$${c + 1}::${type}[]`;
      });
      await client.query(
        `INSERT INTO ${table} (${columns.join(", ")}) SELECT * FROM unnest(${casts.join(", ")})`,
        arrays,
      );
    },
    async userId(username) {
      const { rows } = await client.query<{ id: string }>("SELECT id FROM users WHERE username_key = $1", [
        username.toLowerCase(),
      ]);
      if (!rows[0]) throw new Error(`no user ${username}`);
      return rows[0].id;
    },
    async finish() {
      for (const index of deferred) await client.query(index.definition);
      await client.query("COMMIT");
      // What autovacuum does on its own shortly after a bulk load; without it the planner would
      // see empty tables, index-only scans would still visit the heap, and the figures would
      // measure the minute after a bulk load rather than a portal in use.
      await client.query("VACUUM ANALYZE");
      await client.end();
    },
    async abort() {
      await client.query("ROLLBACK").catch(() => {});
      await client.end();
    },
  };
}

async function insertBatched(sink: Sink, table: string, columns: readonly string[], rows: unknown[][]) {
  for (let i = 0; i < rows.length; i += sink.batchRows) {
    await sink.insert(table, columns, rows.slice(i, i + sink.batchRows));
  }
}

/**
 * Seeds owners, groups and items. `searcher` (an existing user) joins a few groups, so that its
 * searches see some `shared` items through group membership, as a real member would.
 */
export async function seedContent(
  engine: EngineName,
  store: Store,
  searcher: string,
  itemCount: number = CONTENT.items,
): Promise<void> {
  const sink = await openSink(engine, store);
  try {
    const random = mulberry32(20_240_601);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)] as T;
    const now = Date.now();

    const ownerIds: string[] = [];
    const users: unknown[][] = [];
    for (let i = 0; i < CONTENT.owners; i++) {
      const id = newId();
      const name = ownerName(i);
      ownerIds.push(id);
      // No usable password hash: these accounts own content and never sign in.
      users.push([
        ...[id, name, name, `Owner ${i}`, "Owner", String(i), `${name}@example.com`, "", "!", "org_user"],
        ...[null, 0, "arcgis", "creatorUT", "org", null, null, null, "[]", now, now, 0],
      ]);
    }
    await insertBatched(
      sink,
      "users",
      [
        "id",
        "username",
        "username_key",
        "full_name",
        "first_name",
        "last_name",
        "email",
        "description",
        "password_hash",
        "role",
        "role_id",
        "disabled",
        "provider",
        "user_type",
        "access",
        "culture",
        "region",
        "units",
        "tags",
        "created",
        "modified",
        "last_login",
      ],
      users,
    );

    const searcherId = await sink.userId(searcher);
    const groupIds: string[] = [];
    const groups: unknown[][] = [];
    const members: unknown[][] = [];
    for (let g = 0; g < CONTENT.groups; g++) {
      const id = newId();
      const ownerIndex = g % CONTENT.owners;
      groupIds.push(id);
      const title = `Bench group ${g}`;
      groups.push([
        id,
        ownerIds[ownerIndex],
        ownerName(ownerIndex),
        title,
        title.toLowerCase(),
        "",
        "",
        "[]",
        g % 3 === 0 ? "public" : g % 3 === 1 ? "org" : "private",
        0,
        0,
        0,
        "title",
        "asc",
        now,
        now,
      ]);
      members.push([id, ownerIds[ownerIndex], ownerName(ownerIndex), "owner", now]);
      if (g < CONTENT.searcherGroups) members.push([id, searcherId, searcher, "member", now]);
    }
    await insertBatched(
      sink,
      "groups",
      [
        "id",
        "owner_id",
        "owner",
        "title",
        "title_key",
        "description",
        "snippet",
        "tags",
        "access",
        "is_invitation_only",
        "is_view_only",
        "protected",
        "sort_field",
        "sort_order",
        "created",
        "modified",
      ],
      groups,
    );
    await insertBatched(
      sink,
      "group_members",
      ["group_id", "user_id", "username", "member_type", "joined"],
      members,
    );

    await sink.deferIndexes(["items", "item_tags", "item_shares"]);
    const itemColumns = [
      "id",
      "owner_id",
      "owner",
      "owner_key",
      "folder_id",
      "title",
      "title_key",
      "type",
      "type_key",
      "type_keywords",
      "description",
      "snippet",
      "tags",
      "url",
      "properties",
      "access",
      "protected",
      "size",
      "thumbnail",
      "created",
      "modified",
    ];
    for (let start = 0; start < itemCount; start += sink.batchRows) {
      const items: unknown[][] = [];
      const tags: unknown[][] = [];
      const shares: unknown[][] = [];
      for (let i = start; i < Math.min(start + sink.batchRows, itemCount); i++) {
        // Ascending ids (the item's number, then random hex; 32 characters as the API makes):
        // the primary keys of items and item_tags, which stay during seeding, grow at their end.
        const id = `${i.toString(16).padStart(8, "0")}${randomBytes(12).toString("hex")}`;
        const ownerIndex = Math.floor(random() * CONTENT.owners);
        const type = pick(ITEM_TYPES);
        const itemTags = new Set<string>();
        while (itemTags.size < CONTENT.tagsPerItem)
          itemTags.add(tagName(Math.floor(random() * CONTENT.tags)));
        const r = random();
        const access = ACCESS_MIX.find(([, upTo]) => r < upTo)?.[0] ?? "private";
        const modified = now - Math.floor(random() * YEAR_MS);
        const title = `Bench item ${i}`;
        items.push([
          id,
          ownerIds[ownerIndex],
          ownerName(ownerIndex),
          ownerName(ownerIndex),
          null,
          title,
          title.toLowerCase(),
          type,
          type.toLowerCase(),
          "[]",
          `Seeded item ${i} of type ${type}`,
          `Item ${i}`,
          JSON.stringify([...itemTags]),
          null,
          null,
          access,
          0,
          0,
          null,
          modified - Math.floor(random() * YEAR_MS),
          modified,
        ]);
        // With the item's search columns, as `replaceTags` writes them (migration 0004).
        for (const tag of itemTags) tags.push([id, tag, modified, access, ownerIds[ownerIndex]]);
        if (access === "shared") shares.push([id, pick(groupIds)]);
      }
      await insertBatched(sink, "items", itemColumns, items);
      // A turn of the event loop per batch, so that Ctrl-C (the bench's SIGINT handler) is heard.
      await new Promise((resolve) => setImmediate(resolve));
      await insertBatched(sink, "item_tags", ["item_id", "tag_key", "modified", "access", "owner_id"], tags);
      await insertBatched(sink, "item_shares", ["item_id", "group_id"], shares);
    }
    await sink.finish();
  } catch (err) {
    await sink.abort();
    throw err;
  }
}

/** A search answer with at least one result: every rotated value matches something. */
function isSearchAnswer(body: string): boolean {
  return body.startsWith('{"query":') && !body.includes('"total":0,') && body.includes('"results":[{');
}

/** A search case, and how to run each of its queries once before it is measured. */
export interface SearchCase extends LoadCase {
  /**
   * Sends every query of the rotation once, `parallel` at a time, checking each answer; returns
   * the milliseconds it took. Totals are cached per query and viewer until the next change, so
   * this is where the counts are made: the measurement then sees what a portal in use sees
   * between changes (pages read fresh, totals cached), at any size of the rotation.
   */
  prime(parallel: number): Promise<number>;
}

/** GET `/sharing/rest/search` rotating over `values`, one query per request. */
export function searchCase(
  name: string,
  origin: string,
  token: string,
  values: readonly string[],
  q: (value: string) => string,
): SearchCase {
  let sent = 0;
  const pathOf = (value: string) =>
    `/sharing/rest/search?${new URLSearchParams({ f: "json", q: q(value), token })}`;
  return {
    name,
    url: `${origin}${pathOf(values[0] as string)}`,
    requests: [
      {
        method: "GET",
        setupRequest: (request) => ({ ...request, path: pathOf(values[sent++ % values.length] as string) }),
      },
    ],
    verify: isSearchAnswer,
    async prime(parallel) {
      const started = performance.now();
      let next = 0;
      const worker = async () => {
        while (next < values.length) {
          const path = pathOf(values[next++] as string);
          const body = await (await fetch(`${origin}${path}`)).text();
          if (!isSearchAnswer(body)) throw new Error(`${name}: ${path} answered ${body.slice(0, 200)}`);
        }
      };
      await Promise.all(Array.from({ length: parallel }, worker));
      return performance.now() - started;
    },
  };
}

/** `100k`, `1M`: the size of a search case in its name. */
export function itemsLabel(items: number): string {
  if (items >= 1_000_000 && items % 1_000_000 === 0) return `${items / 1_000_000}M`;
  if (items >= 1_000 && items % 1_000 === 0) return `${items / 1_000}k`;
  return String(items);
}

export function searchCases(
  engine: EngineName,
  origin: string,
  token: string,
  items: number = CONTENT.items,
): SearchCase[] {
  const owners = Array.from({ length: CONTENT.owners }, (_, i) => ownerName(i));
  const tags = Array.from({ length: CONTENT.tags }, (_, i) => tagName(i));
  const size = itemsLabel(items);
  return [
    searchCase(`search owner: ${size} [${engine}]`, origin, token, owners, (v) => `owner:${v}`),
    searchCase(`search tags: ${size} [${engine}]`, origin, token, tags, (v) => `tags:${v}`),
    searchCase(`search type: ${size} [${engine}]`, origin, token, ITEM_TYPES, (v) => `type:"${v}"`),
  ];
}

/**
 * POST `createService`, each request naming a new service (names are unique per portal), so that
 * every request commits an item, its service definition and its event.
 */
export function createServiceCase(
  engine: EngineName,
  origin: string,
  token: string,
  username: string,
): LoadCase {
  const path = `/sharing/rest/content/users/${encodeURIComponent(username)}/createService`;
  const run = randomBytes(4).toString("hex");
  let sent = 0;
  return {
    name: `createService POST [${engine}]`,
    url: `${origin}${path}`,
    requests: [
      {
        method: "POST",
        path,
        headers: { "content-type": "application/x-www-form-urlencoded" },
        setupRequest: (request) => ({
          ...request,
          body: new URLSearchParams({
            createParameters: JSON.stringify({ name: `bench_svc_${run}_${sent++}` }),
            outputType: "featureService",
            tags: "bench",
            f: "json",
            token,
          }).toString(),
        }),
      },
    ],
    verify: (body) => body.includes('"success":true') && body.includes('"serviceItemId":'),
  };
}
