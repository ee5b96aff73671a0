/**
 * The physical limit of the features case: the least a server can do to answer an envelope query
 * of the portico layer. It reads the same rows from the same database with the same SQL engine
 * and settings and the same spatial index (the layer's R*Tree on SQLite, opened read-only beside
 * the running portal and memory-mapped as portico maps it; its GiST index through a pg pool of
 * portico's size on PostgreSQL), and answers them as JSON built by concatenation, the stored
 * geometry text spliced in as it is. No portico code: no parameter checks, no authentication, no
 * query model, no projection.
 *
 * `GET /query?bbox=xmin,ymin,xmax,ymax` answers `{"features":[{"attributes":{...},"geometry":{...}}]}`
 * in object id order, at most `LIMIT` features (portico's default maxRecordCount), like portico.
 * Settings come from the environment: BENCH_PORT, BENCH_TABLE (the layer's table), and either
 * BENCH_SQLITE_FILE or BENCH_DATABASE_URL.
 */
import http from "node:http";
import SQLite from "better-sqlite3";
import pg from "pg";

const LIMIT = 2000;
/** Portico's pool size (src/db/database.ts), so both wait on PostgreSQL alike. */
const PG_POOL = 20;

const port = Number(process.env.BENCH_PORT);
const table = process.env.BENCH_TABLE ?? "";
const sqliteFile = process.env.BENCH_SQLITE_FILE;
const databaseUrl = process.env.BENCH_DATABASE_URL;
if (!Number.isInteger(port) || port <= 0 || !/^fl_[0-9a-f]{32}_\d+$/.test(table)) {
  process.stderr.write("direct-server: set BENCH_PORT and BENCH_TABLE\n");
  process.exit(2);
}

interface Row {
  objectid: number | string;
  f_name: string | null;
  f_pop: number | null;
  f_value: number | null;
  f_date: number | string | null;
  shape: string | null;
}

type Box = [number, number, number, number];

const COLUMNS = "objectid, f_name, f_pop, f_value, f_date, shape";

/** Rows meeting the box, in object id order, one more than LIMIT to tell whether there are more. */
function openRows(): (box: Box) => Promise<Row[]> {
  if (sqliteFile) {
    const db = new SQLite(sqliteFile, { readonly: true, fileMustExist: true });
    // The setting portico's own connections read with (src/db/database.ts): the limit is the
    // engine's, not a difference of configuration.
    db.pragma(`mmap_size = ${256 * 1024 * 1024}`);
    const statement = db.prepare(
      `SELECT ${COLUMNS} FROM "${table}" WHERE objectid IN (SELECT id FROM "${table}_rt"
         WHERE xmax >= ? AND xmin <= ? AND ymax >= ? AND ymin <= ?)
       AND maxx >= ? AND minx <= ? AND maxy >= ? AND miny <= ? ORDER BY objectid LIMIT ${LIMIT + 1}`,
    );
    return async ([xmin, ymin, xmax, ymax]) =>
      statement.all(xmin, xmax, ymin, ymax, xmin, xmax, ymin, ymax) as Row[];
  }
  if (!databaseUrl) {
    process.stderr.write("direct-server: set BENCH_SQLITE_FILE or BENCH_DATABASE_URL\n");
    process.exit(2);
  }
  const pool = new pg.Pool({ connectionString: databaseUrl, max: PG_POOL });
  const text = `SELECT ${COLUMNS} FROM "${table}" t
    WHERE box(point(t.minx, t.miny), point(t.maxx, t.maxy)) && box(point($1::float8, $2::float8), point($3::float8, $4::float8))
    ORDER BY objectid LIMIT ${LIMIT + 1}`;
  // A named statement: each connection parses and plans it once.
  return async (box) => (await pool.query<Row>({ name: "envelope", text, values: box })).rows;
}

const rowsIn = openRows();

function answer(rows: Row[]): string {
  const exceeded = rows.length > LIMIT;
  let out = '{"features":[';
  const n = Math.min(rows.length, LIMIT);
  for (let i = 0; i < n; i++) {
    const r = rows[i] as Row;
    if (i > 0) out += ",";
    // bigint columns come from pg as decimal strings: they are spliced as the numbers they spell.
    out += `{"attributes":{"OBJECTID":${r.objectid},"name":${JSON.stringify(r.f_name)},"pop":${r.f_pop},"value":${r.f_value},"date":${r.f_date}},"geometry":${r.shape ?? "null"}}`;
  }
  return `${out}]${exceeded ? ',"exceededTransferLimit":true' : ""}}`;
}

const server = http.createServer((req, res) => {
  req.resume();
  const url = new URL(req.url ?? "/", "http://localhost");
  const box = (url.searchParams.get("bbox") ?? "").split(",").map(Number);
  if (url.pathname !== "/query" || box.length !== 4 || box.some((v) => !Number.isFinite(v))) {
    res.writeHead(url.pathname === "/" ? 200 : 400, { "content-type": "text/plain" });
    res.end(url.pathname === "/" ? "ok" : "GET /query?bbox=xmin,ymin,xmax,ymax");
    return;
  }
  rowsIn(box as Box).then(
    (rows) => {
      const body = answer(rows);
      res.writeHead(200, {
        "content-type": "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(body),
      });
      res.end(body);
    },
    (err: Error) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(err.message);
    },
  );
});
server.keepAliveTimeout = 72_000;
server.listen(port, "127.0.0.1");
process.on("SIGTERM", () => server.close(() => process.exit(0)));
