import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";
import { bundled } from "./bundle.js";
import { type PageServer, startPageServer } from "./page-server.js";

/**
 * The ArcGIS Maps SDK for JavaScript (@arcgis/core) in Chromium against portico over HTTPS: the
 * portal, items, a FeatureLayer's queries and edits, a MapView whose layer view holds the
 * features, and a signed-in member's private layer.
 *
 * The SDK, esbuild and Playwright live in a package of their own (test/browser/package.json) so
 * that the root install stays small; `npm test` installs it first, `.ci/run` Debian's chromium.
 * Without them this test fails and says what to install: it is part of the suite, not optional.
 */

const HERE = import.meta.dirname;
const NODE_MODULES = path.join(HERE, "node_modules");
const CHROMIUM = ["/usr/bin/chromium", "/usr/lib/chromium/chromium"];

/** The little of playwright-core's API used here (the package is not installed at the root). */
interface Browser {
  newContext(options: object): Promise<BrowserContext>;
  close(): Promise<void>;
}
interface BrowserContext {
  newPage(): Promise<Page>;
  route(url: string, handler: (route: Route) => unknown): Promise<void>;
}
interface Route {
  request(): Request;
  continue(): Promise<void>;
  abort(): Promise<void>;
}
interface Request {
  url(): string;
  method(): string;
  postData(): string | null;
  failure(): { errorText: string } | null;
}
interface Page {
  on(event: "console", fn: (m: { type(): string; text(): string }) => void): void;
  on(event: "pageerror", fn: (e: Error) => void): void;
  on(event: "request" | "requestfailed", fn: (r: Request) => void): void;
  goto(url: string): Promise<unknown>;
  waitForFunction(fn: string, arg?: unknown, options?: { timeout: number }): Promise<unknown>;
  evaluate<T>(fn: (arg: any) => T, arg: unknown): Promise<Awaited<T>>;
}

function playwright(): { launch(options: object): Promise<Browser> } {
  for (const name of ["playwright-core", "esbuild", "@arcgis/core"]) {
    if (!fs.existsSync(path.join(NODE_MODULES, name, "package.json"))) {
      throw new Error(
        `${name} is missing from test/browser: run \`npm install --prefix test/browser\` (npm test does).`,
      );
    }
  }
  return createRequire(path.join(HERE, "package.json"))("playwright-core").chromium;
}

function chromiumPath(): string {
  const found = CHROMIUM.find((p) => fs.existsSync(p));
  if (!found) throw new Error("Chromium is not installed: `apt-get install chromium` (.ci/run does).");
  return found;
}

const R = 6378137;
/** Web Mercator of a longitude/latitude, from the formulas. */
const mercator = (lon: number, lat: number) => [
  (R * lon * Math.PI) / 180,
  R * Math.log(Math.tan(Math.PI / 4 + (lat * Math.PI) / 360)),
];

const FIELDS = [
  { name: "name", type: "esriFieldTypeString", length: 20 },
  { name: "kind", type: "esriFieldTypeString", length: 4 },
  { name: "rank", type: "esriFieldTypeInteger" },
  { name: "value", type: "esriFieldTypeDouble" },
];

/**
 * `columns` × `rows` points half a degree apart from (5°E, 45°N); rank 1.. row by row, kind
 * a/b/c in turn, value rank / 4.
 */
function grid(columns: number, rows: number) {
  return Array.from({ length: columns * rows }, (_, i) => ({
    attributes: {
      name: `P${String(i + 1).padStart(3, "0")}`,
      kind: ["a", "b", "c"][i % 3],
      rank: i + 1,
      value: (i + 1) / 4,
    },
    geometry: { x: 5 + (i % columns) * 0.5, y: 45 + Math.floor(i / columns) * 0.5 },
  }));
}

/** 300 points from (5°E, 45°N) to (14.5°E, 52°N): 100 of each kind. */
const POINTS = grid(20, 15);
/** 12 points of a member's private service. */
const PRIVATE_POINTS = grid(4, 3);

describe("the ArcGIS Maps SDK for JavaScript in Chromium", () => {
  let portal: TestPortal;
  let pages: PageServer;
  let browser: Browser | undefined;
  let page: Page;
  let owner: { username: string; password: string; token: string };
  const services: Record<string, { itemId: string; url: string; objectIds: number[] }> = {};
  /** Requests to portico. */
  const requests: { method: string; url: URL; body: string }[] = [];
  /**
   * Errors of the page (console errors, uncaught exceptions), failed requests, requests that would
   * leave the machine. The page's warnings are only shown with a failure: Chromium warns of
   * software WebGL's slow paths as it likes.
   */
  const problems: string[] = [];
  const warnings: string[] = [];
  const steps: string[] = [];

  /** Creates a point layer's service through the REST API and fills it; over plain HTTP (Node refuses the self-signed certificate). */
  async function createService(name: string, points: typeof POINTS, everyone: boolean) {
    const created = await portal.post(
      `/content/users/${owner.username}/createService`,
      {
        createParameters: { name, capabilities: "Query,Create,Update,Delete,Editing" },
        outputType: "featureService",
      },
      owner.token,
    );
    expect(created.success, JSON.stringify(created)).toBe(true);
    // The service URL handed out is the HTTPS one, which is what the SDK wants.
    const url: string = created.serviceurl;
    expect(url).toBe(`${portal.portico.httpsAddress}/rest/services/${name}/FeatureServer`);
    const plain = url.replace(portal.portico.httpsAddress!, portal.portico.address);
    const added = await portal.post(
      `${plain.replace("/rest/services/", "/rest/admin/services/")}/addToDefinition`,
      {
        addToDefinition: {
          layers: [
            {
              name: "Points",
              geometryType: "esriGeometryPoint",
              spatialReference: { wkid: 4326 },
              fields: FIELDS,
            },
          ],
        },
      },
      owner.token,
    );
    expect(added.success, JSON.stringify(added)).toBe(true);
    const edits = await portal.post(`${plain}/0/applyEdits`, { adds: points }, owner.token);
    expect(edits.addResults?.length, JSON.stringify(edits).slice(0, 500)).toBe(points.length);
    if (everyone) {
      const shared = await portal.post(
        `/content/users/${owner.username}/items/${created.itemId}/share`,
        { everyone: true },
        owner.token,
      );
      expect(shared.notSharedWith, JSON.stringify(shared)).toEqual([]);
    }
    services[name] = {
      itemId: created.itemId,
      url,
      objectIds: edits.addResults.map((r: { objectId: number }) => r.objectId),
    };
  }

  /** Calls `window.portico[name](config)` in the page; a failure says which step and what the page logged. */
  async function inPage(name: string, config: object): Promise<any> {
    steps.length = 0;
    try {
      return await page.evaluate(([fn, c]) => (globalThis as any).portico[fn](c), [name, config]);
    } catch (err) {
      throw new Error(
        `${(err as Error).message}\nsteps: ${steps.join(" / ")}\nproblems:\n${problems.join("\n")}\nwarnings:\n${warnings.join("\n")}\nrequests:\n${requests.map((r) => `${r.method} ${r.url}`).join("\n")}`,
      );
    }
  }

  beforeAll(async () => {
    const chromium = playwright();
    const executablePath = chromiumPath();
    const app = await bundled(HERE, "page.js");

    // The organization is public, as one whose public items anonymous visitors see.
    portal = await startTestPortal({ env: { PORTICO_HTTPS_PORT: "0" } });
    expect(await portal.post("/portals/self/update", { access: "public" }, portal.adminToken)).toMatchObject({
      success: true,
    });
    owner = await portal.addUser("sdk_owner", "org_publisher");
    await createService("Grid", POINTS, true);
    await createService("Private", PRIVATE_POINTS, false);

    pages = await startPageServer({
      html: fs.readFileSync(path.join(HERE, "page.html"), "utf8"),
      folders: { "/app/": app, "/assets/": path.join(NODE_MODULES, "@arcgis/core/assets") },
    });
    browser = await chromium.launch({
      executablePath,
      // The MapView draws with WebGL2; a machine without a GPU has it from SwiftShader.
      args: ["--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
    });
    // portico's certificate is self-signed, made for this run: the browser is told to accept it.
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    // Nothing may leave the machine: a request elsewhere (the SDK's CDN, fonts) is a problem.
    await context.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === "127.0.0.1" || url.protocol === "data:" || url.protocol === "blob:") {
        return route.continue();
      }
      problems.push(`blocked request to ${url.href}`);
      return route.abort();
    });
    page = await context.newPage();
    page.on("console", (m) => {
      if (m.type() === "info" && m.text().startsWith("step: ")) steps.push(m.text().slice(6));
      else if (m.type() === "error") problems.push(`console error: ${m.text()}`);
      else if (m.type() === "warning") warnings.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
    page.on("request", (r) => {
      if (r.url().startsWith(portal.portico.httpsAddress!)) {
        requests.push({ method: r.method(), url: new URL(r.url()), body: r.postData() ?? "" });
      }
    });
    page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
    await page.goto(pages.origin);
    await page
      .waitForFunction("window.portico !== undefined", undefined, { timeout: 30_000 })
      .catch((err) => {
        throw new Error(
          `the page did not load: ${err.message}\n${problems.join("\n")}\nmissing: ${pages.missing.join(" ")}`,
        );
      });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await pages?.close();
    await portal?.stop();
  });

  it("reads the portal and a public item, queries and edits its layer, and draws it in a MapView", async () => {
    const grid = services.Grid!;
    const [x0, y0] = mercator(4, 44);
    const [x1, y1] = mercator(15.5, 53);
    const [first, second] = grid.objectIds as [number, number]; // P001 (kind a), P002 (kind b)
    const out = await inPage("publicLayer", {
      portalUrl: portal.portico.httpsAddress,
      itemId: grid.itemId,
      layerUrl: `${grid.url}/0`,
      where: "kind = 'a'",
      // Columns 0-4 (5°E to 7°E) of rows 0-2 (45°N to 46°N): 15 points.
      box: { xmin: 4.9, ymin: 44.9, xmax: 7.2, ymax: 46.2 },
      added: {
        point: { x: 10.25, y: 48.25 },
        attributes: { name: "Added", kind: "a", rank: 1000, value: 1.5 },
      },
      viewExtent: { xmin: x0, ymin: y0, xmax: x1, ymax: y1 },
      updated: { OBJECTID: second, kind: "a" },
      deleted: first,
      // 301 after the add, less P001; of kind a: 100 + Added + P002 - P001.
      expectAfterEdits: { count: 300, countWhere: 101 },
    });

    expect(out.portal).toEqual({
      isPortal: true,
      name: "portico",
      restUrl: `${portal.portico.httpsAddress}/sharing/rest`,
    });
    expect(out.item).toEqual({ type: "Feature Service", title: "Grid", url: grid.url, access: "public" });
    expect(out.fromItem).toEqual({
      url: grid.url,
      layerId: 0,
      title: "Grid",
      geometryType: "point",
      count: 300,
    });
    expect(out.layer).toEqual({
      geometryType: "point",
      objectIdField: "OBJECTID",
      fields: ["OBJECTID", "name", "kind", "rank", "value"],
      operations: { query: true, add: true, update: true, delete: true },
      pbf: true,
      editingEnabled: true,
      fullExtent: { xmin: 5, ymin: 45, xmax: 14.5, ymax: 52, wkid: 4326 },
    });
    expect(out.count).toBe(300);
    expect(out.countWhere).toBe(100);
    expect(out.countInBox).toBe(15);
    expect(out.features).toEqual({
      length: 300,
      first: {
        attributes: { OBJECTID: grid.objectIds[299], name: "P300", kind: "c", rank: 300, value: 75 },
        x: 14.5,
        y: 52,
      },
    });
    expect(out.extent).toEqual({
      count: 300,
      extent: { xmin: 5, ymin: 45, xmax: 14.5, ymax: 52, wkid: 4326 },
    });
    expect([...out.objectIds].sort((a: number, b: number) => a - b)).toEqual(grid.objectIds);

    expect(out.added).toHaveLength(1);
    expect(out.added[0].error).toBeNull();
    const addedId = out.added[0].objectId;
    expect(grid.objectIds).not.toContain(addedId);
    expect(out.countAfterAdd).toBe(301);
    expect(out.addedBack).toEqual([
      {
        attributes: { OBJECTID: addedId, name: "Added", kind: "a", rank: 1000, value: 1.5 },
        x: 10.25,
        y: 48.25,
      },
    ]);

    expect(out.viewWkid).toBe(3857);
    expect(out.layerView).toEqual({ count: 301, countWhere: 101 });
    expect(out.edits).toEqual({
      updated: [{ objectId: second, error: null }],
      deleted: [{ objectId: first, error: null }],
    });
    expect(out.layerViewAfterEdits).toEqual({ count: 300, countWhere: 101 });
    expect(out.countAfterEdits).toBe(300);

    // The layer view asked for its features as quantized PBF in the view's coordinate system.
    const tiles = requests
      .map((r) => r.url)
      .filter((u) => u.pathname.endsWith("/Grid/FeatureServer/0/query") && u.searchParams.get("f") === "pbf");
    expect(tiles.some((u) => ["3857", "102100"].includes(u.searchParams.get("outSR") ?? ""))).toBe(true);
    expect(tiles.some((u) => u.searchParams.has("quantizationParameters"))).toBe(true);
    expect(problems).toEqual([]);
    expect(pages.missing).toEqual([]);
  }, 60_000);

  it("uses a signed-in member's token for the member's private service", async () => {
    const priv = services.Private!;
    const signIn = await portal.post("/generateToken", {
      username: owner.username,
      password: owner.password,
      client: "requestip",
    });
    expect(signIn.token).toBeTypeOf("string");
    const out = await inPage("signedIn", {
      portalUrl: portal.portico.httpsAddress,
      itemId: priv.itemId,
      username: owner.username,
      token: signIn.token,
      expires: signIn.expires,
      added: { point: { x: 6, y: 46 }, attributes: { name: "Mine", kind: "b", rank: 13, value: 3.25 } },
    });
    expect(out.layer).toEqual({ url: priv.url, layerId: 0, geometryType: "point" });
    expect(out.count).toBe(12);
    expect(out.added).toHaveLength(1);
    expect(out.added[0].error).toBeNull();
    expect(out.countAfterAdd).toBe(13);
    // The SDK asked the service without a token first, was refused, learnt from the server's
    // /rest/info that the portal owns it, and exchanged the portal's token for one for the server
    // (portico's is the same token); its queries and edits then carried it.
    const paths = requests.map((r) => `${r.method} ${r.url.pathname}`);
    expect(paths).toContain("GET /rest/info");
    expect(paths).toContain("POST /sharing/rest/generateToken");
    const tokenOf = (r: (typeof requests)[number]) =>
      r.url.searchParams.get("token") ?? new URLSearchParams(r.body).get("token");
    const operations = requests.filter((r) =>
      /\/Private\/FeatureServer\/0\/(query|applyEdits)$/.test(r.url.pathname),
    );
    expect(operations.map((r) => `${r.method} ${r.url.pathname.split("/").pop()}`)).toEqual([
      "GET query",
      "POST applyEdits",
      "GET query",
    ]);
    for (const r of operations) expect(tokenOf(r)).toBe(signIn.token);
    expect(problems).toEqual([]);
  }, 60_000);
});
