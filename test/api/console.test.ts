import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP } from "../../src/http/console.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * The console's page and its built-in OAuth app (test/browser/console.test.ts clicks through the
 * console itself): visiting it registers `portico-console` with this portal's console address as
 * its redirect URI, so the authorize page accepts exactly that address and no other; its answers
 * carry the strict CSP; its asset route serves no file outside its folder.
 */
describe("the console's page and built-in app", () => {
  let portal: TestPortal;
  let origin: string;
  const authorize = (redirectUri: string) =>
    fetch(
      `${portal.api}/oauth2/authorize?${new URLSearchParams({
        client_id: "portico-console",
        response_type: "code",
        redirect_uri: redirectUri,
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
      })}`,
    ).then((r) => r.text());

  beforeAll(async () => {
    portal = await startTestPortal();
    origin = portal.portico.address;
  });
  afterAll(() => portal?.stop());

  it("registers the console's app on the first visit, for the console's own address only", async () => {
    expect(await authorize(`${origin}/portico/console/`)).toContain("no app is registered");
    const res = await fetch(`${origin}/portico/console/`);
    // Built (npm run build) or not, the answer is the console's, with its policy.
    expect([200, 404]).toContain(res.status);
    expect(res.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(await authorize(`${origin}/portico/console/`)).toContain('name="password"');
    expect(await authorize("https://attacker.example/portico/console/")).toContain("not registered");
    // Its item is an Application of the first administrator, found like any other.
    const found = await portal.get("/search", { q: 'title:"Portico console"' }, portal.adminToken);
    expect(found.results.map((i: { type: string }) => i.type)).toEqual(["Application"]);
    // A second visit registers nothing more.
    await fetch(`${origin}/portico/console/`);
    const again = await portal.get("/search", { q: 'title:"Portico console"' }, portal.adminToken);
    expect(again.total).toBe(1);
  });

  it("serves no file outside its assets", async () => {
    // (`%2E%2E` alone is no test: fetch normalizes it to `..` before sending.)
    for (const file of ["..%2F..%2Fpackage.json", "..%5C..%5Cpackage.json", ".hidden", "a%2Fb.js"]) {
      const res = await fetch(`${origin}/portico/console/assets/${file}`);
      expect(res.status).toBe(404);
      expect(await res.text()).not.toContain("portico");
    }
  });
});
