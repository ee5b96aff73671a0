import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * The API directory (README, The API directory) in Chromium, as a person uses it: from a page to
 * the sign-in page and back, a link followed, an operation's form filled and submitted, and each
 * page checked by axe-core for serious accessibility faults. A screenshot of each page is kept
 * under test-artifacts/ (not committed). The packages are test/browser's (see maps-sdk.test.ts).
 */

const HERE = import.meta.dirname;
const NODE_MODULES = path.join(HERE, "node_modules");
const CHROMIUM = ["/usr/bin/chromium", "/usr/lib/chromium/chromium"];
const ARTIFACTS = path.join(HERE, "..", "..", "test-artifacts");

interface Browser {
  newContext(options: object): Promise<BrowserContext>;
  close(): Promise<void>;
}
interface BrowserContext {
  newPage(): Promise<Page>;
  addInitScript(script: { content: string }): Promise<void>;
  cookies(): Promise<{ name: string; httpOnly: boolean; sameSite: string; value: string }[]>;
}
interface Page {
  on(event: "request", fn: (r: { url(): string }) => void): void;
  on(event: "console", fn: (m: { type(): string; text(): string }) => void): void;
  goto(url: string): Promise<unknown>;
  url(): string;
  fill(selector: string, value: string): Promise<void>;
  selectOption(selector: string, value: string): Promise<unknown>;
  click(selector: string): Promise<void>;
  waitForURL(url: string | RegExp, options?: { timeout: number }): Promise<void>;
  textContent(selector: string): Promise<string | null>;
  evaluate<T>(fn: (arg: any) => T, arg?: unknown): Promise<Awaited<T>>;
  screenshot(options: { path: string; fullPage: boolean }): Promise<unknown>;
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

function packages(): { chromium: { launch(options: object): Promise<Browser> }; axe: string } {
  for (const name of ["playwright-core", "axe-core"]) {
    if (!fs.existsSync(path.join(NODE_MODULES, name, "package.json"))) {
      throw new Error(`${name} is missing from test/browser: run \`npm install --prefix test/browser\`.`);
    }
  }
  const require = createRequire(path.join(HERE, "package.json"));
  return {
    chromium: require("playwright-core").chromium,
    axe: fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8"),
  };
}

function chromiumPath(): string {
  const found = CHROMIUM.find((p) => fs.existsSync(p));
  if (!found) throw new Error("Chromium is not installed: `apt-get install chromium` (.ci/run does).");
  return found;
}

describe("the API directory in a browser", () => {
  let portal: TestPortal;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let origin: string;
  const urls: string[] = [];
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    const { chromium, axe } = packages();
    portal = await startTestPortal();
    origin = new URL(portal.api).origin;
    browser = await chromium.launch({ executablePath: chromiumPath() });
    context = await browser.newContext({});
    // axe-core goes in as the browser's own script, before the page's: the pages' policy allows no
    // script (and must not be loosened for a test).
    await context.addInitScript({ content: axe });
    page = await context.newPage();
    page.on("request", (r) => urls.push(r.url()));
    page.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await portal?.stop();
  });

  /** axe-core's serious and critical findings on the page shown, after keeping its screenshot. */
  async function check(name: string): Promise<AxeViolation[]> {
    await page.screenshot({ path: path.join(ARTIFACTS, `directory-${name}.png`), fullPage: true });
    const violations = await page.evaluate(
      async () => (await (globalThis as any).axe.run((globalThis as any).document)).violations,
    );
    return (violations as AxeViolation[]).filter((v) => v.impact === "serious" || v.impact === "critical");
  }

  it("signs in from a page, follows a link, submits an operation's form, with no serious accessibility fault", async () => {
    await page.goto(`${origin}/sharing/rest/portals/self/roles?f=html`);
    expect(await page.textContent("main")).toContain("Error 499");
    expect(await check("needs-sign-in")).toEqual([]);

    // The page's link to the sign-in, which brings the browser back here.
    await page.click("main a[href^='/sharing/rest/login']");
    await page.waitForURL(/\/sharing\/rest\/login\?next=/);
    expect(await check("sign-in")).toEqual([]);
    await page.fill("#username", ADMIN.username);
    await page.fill("#password", ADMIN.password);
    await page.click("main button[type=submit]");
    await page.waitForURL(`${origin}/sharing/rest/portals/self/roles?f=html`);
    expect(await page.textContent("header")).toContain(`Signed in as ${ADMIN.username}`);
    const cookie = (await context.cookies()).find((c) => c.name === "portico_directory");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    // Script on the page could not read it.
    expect(await page.evaluate(() => (globalThis as any).document.cookie)).not.toContain("portico_directory");

    await page.goto(`${origin}/sharing/rest/portals/self?f=html`);
    expect(await page.textContent("main")).toContain("portalName");
    expect(await check("portal")).toEqual([]);

    // A link to a child resource.
    await page.click("a[href='/sharing/rest/portals/self/webhooks?f=html']");
    await page.waitForURL(`${origin}/sharing/rest/portals/self/webhooks?f=html`);
    expect(await page.textContent("h1")).toBe("/sharing/rest/portals/self/webhooks");

    // An operation's form, filled and submitted.
    await page.goto(`${origin}/sharing/rest/community/createGroup?f=html`);
    expect(await check("form")).toEqual([]);
    await page.fill("#p-title", "Made in Chromium");
    await page.selectOption("#p-access", "org");
    await page.click("main button[type=submit]");
    await page.waitForURL(`${origin}/sharing/rest/community/createGroup`);
    expect(await page.textContent("h1")).toBe("Answer of groups.create");
    expect(await page.textContent("main")).toContain("Made in Chromium");
    expect(await check("answer")).toEqual([]);
    const found = await portal.get("/community/groups", { q: '"Made in Chromium"' }, portal.adminToken);
    expect(found.total).toBe(1);

    // Sign out from the header's button.
    await page.click("header button[type=submit]");
    await page.waitForURL(`${origin}/sharing/rest?f=html`);
    expect(await page.textContent("header")).toContain("Sign in");

    // Nothing the browser asked for carried a token, nor did the pages break their policy.
    expect(urls.filter((u) => /[?&]token=/i.test(u))).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
