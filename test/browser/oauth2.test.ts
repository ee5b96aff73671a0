import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerTestApp } from "../helpers/oauth.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";
import { bundled } from "./bundle.js";
import { type PageServer, startPageServer } from "./page-server.js";

/**
 * The OAuth 2.0 authorize flow in Chromium, as a user goes through it: an application on its own
 * origin signs in with rest-js's beginOAuth2 (PKCE, no popup), lands on portico's sign-in page,
 * the user fills the form, the browser comes back with a code, and completeOAuth2 gives a session
 * that reads the user. The packages are test/browser's (see maps-sdk.test.ts).
 */

const HERE = import.meta.dirname;
const NODE_MODULES = path.join(HERE, "node_modules");
const CHROMIUM = ["/usr/bin/chromium", "/usr/lib/chromium/chromium"];

interface Browser {
  newContext(options: object): Promise<BrowserContext>;
  close(): Promise<void>;
}
interface BrowserContext {
  newPage(): Promise<Page>;
}
interface Frame {
  url(): string;
  $(selector: string): Promise<unknown | null>;
}
interface Page {
  on(event: "request", fn: (r: { url(): string }) => void): void;
  on(event: "pageerror", fn: (e: Error) => void): void;
  goto(url: string): Promise<unknown>;
  url(): string;
  fill(selector: string, value: string): Promise<void>;
  click(selector: string): Promise<void>;
  waitForSelector(selector: string, options?: { timeout: number }): Promise<unknown>;
  waitForFunction(fn: string, arg?: unknown, options?: { timeout: number }): Promise<unknown>;
  evaluate<T>(fn: (arg: any) => T, arg?: unknown): Promise<Awaited<T>>;
  frames(): Frame[];
  mainFrame(): Frame;
}

function playwright(): { launch(options: object): Promise<Browser> } {
  for (const name of ["playwright-core", "esbuild"]) {
    if (!fs.existsSync(path.join(NODE_MODULES, name, "package.json"))) {
      throw new Error(`${name} is missing from test/browser: run \`npm install --prefix test/browser\`.`);
    }
  }
  return createRequire(path.join(HERE, "package.json"))("playwright-core").chromium;
}

function chromiumPath(): string {
  const found = CHROMIUM.find((p) => fs.existsSync(p));
  if (!found) throw new Error("Chromium is not installed: `apt-get install chromium` (.ci/run does).");
  return found;
}

describe("OAuth 2.0 in a browser", () => {
  let portal: TestPortal;
  let pages: PageServer;
  let browser: Browser;
  let page: Page;
  let member: { username: string; password: string; token: string };
  const urls: string[] = [];
  const errors: string[] = [];

  beforeAll(async () => {
    const chromium = playwright();
    const app = await bundled(HERE, "oauth-page.js");
    portal = await startTestPortal();
    member = await portal.addUser("browser_member");
    pages = await startPageServer({
      html: fs.readFileSync(path.join(HERE, "oauth-page.html"), "utf8"),
      folders: { "/app/": app },
    });
    browser = await chromium.launch({ executablePath: chromiumPath() });
    page = await (await browser.newContext({})).newPage();
    page.on("request", (r) => urls.push(r.url()));
    page.on("pageerror", (e) => errors.push(e.message));
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await pages?.close();
    await portal?.stop();
  });

  it("signs in through the sign-in page with beginOAuth2 and completeOAuth2 (PKCE)", async () => {
    const registered = await registerTestApp(portal, member.token, member.username, [`${pages.origin}/`]);
    await page.goto(
      `${pages.origin}/?${new URLSearchParams({ portal: portal.api, client: registered.client_id })}`,
    );
    // rest-js sends the browser to portico's page.
    await page.waitForSelector("#username", { timeout: 30_000 });
    const signInUrl = new URL(page.url());
    expect(`${signInUrl.origin}${signInUrl.pathname}`).toBe(`${portal.api}/oauth2/authorize`);
    expect(signInUrl.searchParams.get("code_challenge_method")).toBe("S256");

    await page.fill("#username", member.username);
    await page.fill("#password", member.password);
    await page.click("button[type=submit]");
    await page.waitForFunction("window.result !== undefined", undefined, { timeout: 30_000 });
    const result = await page.evaluate(() => (globalThis as any).result);
    expect(result.error, errors.join("\n")).toBeUndefined();
    expect(result).toMatchObject({
      username: member.username,
      user: member.username,
      self: member.username,
      hasRefreshToken: true,
      platformSelf: { username: member.username, tokenWorks: true },
    });
    // With response_type=code the token is in no address the browser went to (the app's pages,
    // the sign-in page): only the code came back in one. (rest-js's own API calls put the token
    // in their query string, a choice of that client.)
    const visited = urls.filter((u) => u.startsWith(pages.origin) || u.startsWith(`${portal.api}/oauth2/`));
    expect(visited.filter((u) => u.includes(result.token))).toEqual([]);
    expect(visited.filter((u) => /access_token=|[?&#]token=/.test(u))).toEqual([]);
    expect(visited.some((u) => u.startsWith(`${pages.origin}/?code=`))).toBe(true);
    // The password went in no URL either.
    expect(urls.filter((u) => u.includes(encodeURIComponent(member.password)))).toEqual([]);
    // The token works outside the browser too, for the same user.
    expect((await portal.get("/community/self", {}, result.token)).username).toBe(member.username);
  });

  it("the sign-in page cannot be framed by another site", async () => {
    const registered = await registerTestApp(portal, member.token, member.username, [`${pages.origin}/`]);
    const authorize = `${portal.api}/oauth2/authorize?${new URLSearchParams({
      client_id: registered.client_id,
      redirect_uri: `${pages.origin}/`,
      response_type: "code",
    })}`;
    await page.goto(`${pages.origin}/`);
    await page.evaluate(
      (src: string) =>
        new Promise<void>((resolve) => {
          const doc = (globalThis as any).document;
          const frame = doc.createElement("iframe");
          frame.onload = () => resolve();
          frame.src = src;
          doc.body.append(frame);
          setTimeout(resolve, 5000);
        }),
      authorize,
    );
    const framed = page.frames().filter((f) => f !== page.mainFrame());
    expect(framed.length).toBe(1);
    // The browser refused to show it: the frame holds no form.
    expect(await (framed[0] as Frame).$("#username")).toBeNull();
  });
});
