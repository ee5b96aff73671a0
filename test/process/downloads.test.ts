import { createHash, randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MB, memory } from "../helpers/attack.js";
import { ADMIN, form } from "../helpers/portico.js";
import { createProcessDatabase, freePort, type Running, run, waitUntilUp } from "../helpers/process.js";

/**
 * Downloads of item data stream from the database a chunk at a time: eight concurrent downloads
 * of a 95 MB item must neither hold the item in memory once per download (they added 720 MB and
 * stalled the server) nor keep `/health` waiting. Run against `portico serve`, as an operator
 * runs it, so that the RSS measured is the server's alone.
 */
const SIZE = 95 * MB;
const DOWNLOADS = 8;
/**
 * Generous: streamed, each download holds about a chunk (1 MiB) and its socket's buffers. Holding
 * the item once per download, the fault this guards against, adds 8 x 95 MB.
 *
 * PostgreSQL sends a chunk as 2 MB of hex text, which pg turns into a string and then a 1 MB Buffer:
 * ~3 MB of garbage per chunk, which V8 collects in batches (external memory). A loop of 8 concurrent
 * 1 MiB bytea reads with pg alone, no server, grew its RSS by 112-164 MB (peak `arrayBuffers`
 * 85-104 MB); this test's server grew by 103-134 MB on a quiet machine and up to 170 MB beside the
 * parallel suite. Its bound allows for that garbage; SQLite's reads make none of it.
 */
const rssGrowthBound = (onPostgres: boolean) => (onPostgres ? 220 : 150) * MB;

describe("streamed downloads", () => {
  let dataDir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  let server: Running;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-downloads-"));
    database = await createProcessDatabase("portico_downloads");
    server = run({
      PORTICO_PORT: String(await freePort()),
      PORTICO_DATA_DIR: dataDir,
      PORTICO_LOG_LEVEL: "warn",
      PORTICO_ADMIN_USERNAME: ADMIN.username,
      PORTICO_ADMIN_PASSWORD: ADMIN.password,
      ...(database ? { DATABASE_URL: database.url } : {}),
    });
    await waitUntilUp(server);
  });
  afterAll(async () => {
    if (server?.child.exitCode === null) server.child.kill("SIGKILL");
    await server?.exited;
    fs.rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  const post = async (p: string, params: Record<string, unknown>) => {
    const url = p.startsWith("/portaladmin")
      ? `${server.base.replace("/sharing/rest", "")}${p}`
      : `${server.base}${p}`;
    const answer = (await (
      await fetch(url, { method: "POST", body: form({ f: "json", ...params }) })
    ).json()) as any;
    if (answer.error) throw new Error(`${p}: ${JSON.stringify(answer.error)}`);
    return answer;
  };

  it("serves 8 concurrent downloads of a 95 MB item with bounded memory, the same bytes, and /health answered meanwhile", async () => {
    const { token: adminToken } = await post("/generateToken", { ...ADMIN, client: "requestip" });
    await post("/portaladmin/security/users/createUser", {
      username: "dl_publisher",
      password: "dl-publisher-pw1",
      firstname: "Down",
      lastname: "Loader",
      email: "dl@example.com",
      role: "org_publisher",
      token: adminToken,
    });
    const { token } = await post("/generateToken", {
      username: "dl_publisher",
      password: "dl-publisher-pw1",
      client: "requestip",
    });

    const content = randomBytes(SIZE);
    const digest = createHash("sha256").update(content).digest("hex");
    const upload = new FormData();
    for (const [k, v] of Object.entries({ f: "json", token, title: "Large", type: "Shapefile" }))
      upload.append(k, v);
    upload.append("file", new Blob([content], { type: "application/zip" }), "large.zip");
    const added = (await (
      await fetch(`${server.base}/content/users/dl_publisher/addItem`, { method: "POST", body: upload })
    ).json()) as any;
    expect(added.success).toBe(true);

    const pid = server.child.pid as number;
    const baseline = memory(pid).rss;
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, memory(pid).rss);
    }, 10);

    // Each event in the order it happened: when /health answered, when each download ended.
    const order: string[] = [];
    try {
      const responses = await Promise.all(
        Array.from({ length: DOWNLOADS }, () =>
          fetch(`${server.base}/content/items/${added.id}/data?token=${token}`),
        ),
      );
      const downloads = responses.map(async (res, i) => {
        expect(res.headers.get("content-length")).toBe(String(SIZE));
        const hash = createHash("sha256");
        let bytes = 0;
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          hash.update(chunk);
          bytes += chunk.length;
        }
        order.push(`download ${i}`);
        return { bytes, digest: hash.digest("hex") };
      });
      // Sent while every download is under way: their answers have started, none has ended.
      const health = fetch(`${server.base.replace("/sharing/rest", "")}/health`).then(async (res) => {
        order.push("health");
        return res.status;
      });
      const [status, results] = await Promise.all([health, Promise.all(downloads)]);
      expect(status).toBe(200);
      for (const r of results) expect(r).toEqual({ bytes: SIZE, digest });
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, memory(pid).rss);
    expect(order[0]).toBe("health");
    expect(peak - baseline).toBeLessThan(rssGrowthBound(database !== undefined));
    expect(server.child.exitCode).toBe(null);
  }, 240_000);
});
