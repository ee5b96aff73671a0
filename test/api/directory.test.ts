import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DirectoryBrowser, hiddenValue, hrefsOf, urlsOf } from "../helpers/directory.js";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";
import { createSampleService } from "../helpers/sample-layers.js";

/**
 * The API directory (README, The API directory): every resource's `f=html` page with its fields
 * and links, operation forms, and the sign-in whose cookie opens the directory's pages and forms
 * but never the API itself.
 */
describe("the API directory (f=html)", () => {
  let portal: TestPortal;
  let receiver: Receiver;
  let origin: string;
  let member: { username: string; password: string; token: string };
  let admin: DirectoryBrowser;
  const XSS = `<script>alert("t")</script><img src=x onerror=alert(1)>`;
  let itemId: string;
  let groupId: string;
  let roleId: string;
  let webhookId: string;
  let collaborationId: string;
  let workspaceId: string;

  beforeAll(async () => {
    portal = await startTestPortal({ env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.0/8" } });
    receiver = await startReceiver();
    origin = new URL(portal.api).origin;
    member = await portal.addUser("dir_member", "org_publisher");
    const item = await portal.post(
      `/content/users/${member.username}/addItem`,
      { title: XSS, type: "Web Map", text: "{}", description: `<b onmouseover="x">${XSS}</b>`, tags: "a" },
      member.token,
    );
    itemId = item.id;
    await portal.post(`/content/items/${itemId}/share`, { everyone: false, org: true }, member.token);
    groupId = (
      await portal.post("/community/createGroup", { title: "Surveyors", access: "org" }, portal.adminToken)
    ).group.id;
    roleId = (await portal.post("/portals/self/createRole", { name: "Analyst" }, portal.adminToken)).id;
    webhookId = (
      await portal.post(
        "/portals/self/webhooks/createWebhook",
        { name: "hook", url: receiver.url, changes: "manualChanges", events: "/users/nobody_listens" },
        portal.adminToken,
      )
    ).webhook.id;
    const collaboration = await portal.post(
      "/portals/self/createCollaboration",
      { name: "Partners", description: "d", workspaceName: "Roads", portalGroupId: groupId },
      portal.adminToken,
    );
    collaborationId = collaboration.collaboration.id;
    workspaceId = collaboration.collaboration.workspaceIds[0];
    await createSampleService(portal, member, "Sites", { points: [], zones: [] }, { maxRecordCount: 100 });
    admin = new DirectoryBrowser(origin);
    expect(await admin.signIn(ADMIN.username, ADMIN.password)).toBe("/sharing/rest?f=html");
  }, 120_000);
  afterAll(async () => {
    await portal?.stop();
    await receiver?.close();
  });

  const session = () => admin.cookies.get("portico_directory") as string;

  describe("sign-in", () => {
    it("sets an HttpOnly, SameSite=Strict cookie for the portal's paths, without Secure over HTTP", async () => {
      const browser = new DirectoryBrowser(origin);
      const { html } = await browser.get("/sharing/rest/login?next=/sharing/rest/portals/self");
      const res = await browser.request("/sharing/rest/login", {
        method: "POST",
        body: new URLSearchParams({
          directory_form: hiddenValue(html, "directory_form") as string,
          next: hiddenValue(html, "next") as string,
          username: member.username,
          password: member.password,
        }),
      });
      expect(res.res.status).toBe(302);
      expect(res.res.headers.get("location")).toBe("/sharing/rest/portals/self?f=html");
      const cookie = res.res.headers.getSetCookie().find((c) => c.startsWith("portico_directory="));
      expect(cookie).toMatch(/; Path=\/; Max-Age=\d+; HttpOnly; SameSite=Strict$/);
      expect(res.res.headers.get("cache-control")).toBe("no-store");
      const self = await browser.get("/sharing/rest/community/self?f=html");
      expect(self.html).toContain(`Signed in as <strong>${member.username}</strong>`);
      expect(self.html).toContain("<dt>username</dt><dd>dir_member</dd>");
    });

    it("opens f=html pages, but never an f=json or pjson request, nor as a token", async () => {
      const page = await admin.get("/sharing/rest/portals/self/roles?f=html");
      expect(page.html).toContain("Analyst");
      for (const f of ["json", "pjson"]) {
        const json = await admin.get(`/sharing/rest/portals/self/roles?f=${f}`);
        expect(JSON.parse(json.html).error.code).toBe(499);
      }
      const post = await admin.post("/sharing/rest/community/createGroup", { f: "json", title: "by cookie" });
      expect(JSON.parse(post.html).error.code).toBe(499);
      // The cookie's value is no bearer token, in a parameter or a header, for any format.
      const asToken = await fetch(`${portal.api}/community/self?f=json&token=${session()}`);
      expect(((await asToken.json()) as any).error.code).toBe(498);
      const asBearer = await fetch(`${portal.api}/community/self?f=json`, {
        headers: { authorization: `Bearer ${session()}` },
      });
      expect(((await asBearer.json()) as any).error.code).toBe(498);
      const htmlToken = await fetch(`${portal.api}/community/self?f=html&token=${session()}`);
      expect(await htmlToken.text()).toContain("Error 498");
    });

    it("refuses a sign-in post without the form's secret and cookie (login CSRF)", async () => {
      const browser = new DirectoryBrowser(origin);
      const { res, html } = await browser.post("/sharing/rest/login", {
        directory_form: "forged",
        username: member.username,
        password: member.password,
      });
      expect(res.status).toBe(200);
      expect(html).toContain("The sign-in form was not sent from this page");
      expect(browser.cookies.has("portico_directory")).toBe(false);
    });

    it("shows a wrong password on the form and sets no cookie", async () => {
      const browser = new DirectoryBrowser(origin);
      expect(await browser.signIn(member.username, "wrong-password")).toBeNull();
      expect(browser.cookies.has("portico_directory")).toBe(false);
      expect(browser.pages.at(-1)?.html).toContain("Invalid username or password");
    });

    it("sends the browser back only to a path of the portal's own API roots", async () => {
      for (const next of [
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
        "/sharing/rest/../../x",
        "/other",
      ]) {
        const browser = new DirectoryBrowser(origin);
        expect(await browser.signIn(member.username, member.password, next)).toBe("/sharing/rest?f=html");
      }
      const browser = new DirectoryBrowser(origin);
      expect(
        await browser.signIn(member.username, member.password, "/rest/services/Sites/FeatureServer"),
      ).toBe("/rest/services/Sites/FeatureServer?f=html");
    });

    it("signs out only from the directory's form, and ends the session for good", async () => {
      const browser = new DirectoryBrowser(origin);
      await browser.signIn(member.username, member.password);
      const cookie = browser.cookies.get("portico_directory") as string;
      const forged = await browser.post("/sharing/rest/logout", {});
      expect(forged.html).toContain("was not sent from this portal");
      expect(browser.cookies.get("portico_directory")).toBe(cookie);
      const page = await browser.get("/sharing/rest/logout");
      const out = await browser.post("/sharing/rest/logout", {
        directory_csrf: hiddenValue(page.html, "directory_csrf") as string,
      });
      expect(out.res.status).toBe(302);
      expect(browser.cookies.has("portico_directory")).toBe(false);
      // The old cookie, replayed, is nobody's.
      const replay = await browser.request("/sharing/rest/community/self?f=html", {
        cookie: `portico_directory=${cookie}`,
      });
      expect(replay.html).toContain("Error 499");
    });
  });

  describe("resource pages", () => {
    const linksOf = async (path: string) => {
      const { html } = await admin.get(path);
      return { html, links: hrefsOf(html) };
    };

    it("portal: its fields, child resources and operations", async () => {
      const { html, links } = await linksOf("/sharing/rest/portals/self?f=html");
      expect(html).toContain("<dt>portalName</dt>");
      for (const child of [
        "roles",
        "webhooks",
        "collaborations",
        "users",
        "settings",
        "securityPolicy",
        "update",
        "createRole",
      ]) {
        expect(links).toContain(`/sharing/rest/portals/self/${child}?f=html`);
      }
      expect(html).toMatch(/<h2>Operations<\/h2>.*portals\/self\/update\?f=html/s);
    });

    it("users: fields, child resources, operations and the user's content", async () => {
      const { html, links } = await linksOf(`/sharing/rest/community/users/${member.username}?f=html`);
      expect(html).toContain(`<dt>username</dt><dd>${member.username}</dd>`);
      expect(links).toContain(`/sharing/rest/community/users/${member.username}/tags?f=html`);
      expect(links).toContain(`/sharing/rest/community/users/${member.username}/update?f=html`);
      expect(links).toContain(`/sharing/rest/content/users/${member.username}?f=html`);
    });

    it("groups: fields, owner, members and operations", async () => {
      const { html, links } = await linksOf(`/sharing/rest/community/groups/${groupId}?f=html`);
      expect(html).toContain("<dt>title</dt><dd>Surveyors</dd>");
      expect(links).toContain(`/sharing/rest/community/users/${ADMIN.username}?f=html`);
      expect(links).toContain(`/sharing/rest/community/groups/${groupId}/users?f=html`);
      expect(links).toContain(`/sharing/rest/community/groups/${groupId}/update?f=html`);
      expect(links).toContain(`/sharing/rest/content/groups/${groupId}?f=html`);
    });

    it("items: fields escaped, the owner, and the owner's operations on the item", async () => {
      const { html, links } = await linksOf(`/sharing/rest/content/items/${itemId}?f=html`);
      expect(html).not.toContain("<script>alert");
      expect(html).not.toContain("<img src=x");
      expect(html).not.toContain('<b onmouseover="x">');
      expect(html).toContain(
        "&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;",
      );
      expect(links).toContain(`/sharing/rest/community/users/${member.username}?f=html`);
      expect(links).toContain(`/sharing/rest/content/items/${itemId}/data?f=html`);
      // The owner's address of the item (ArcGIS's user item), whose page has the operations on it.
      const userItem = `/sharing/rest/content/users/${member.username}/items/${itemId}`;
      expect(links).toContain(`${userItem}?f=html`);
      const owned = await linksOf(`${userItem}?f=html`);
      expect(owned.html).not.toContain("<script>alert");
      expect(owned.links).toContain(`${userItem}/update?f=html`);
      expect(owned.links).toContain(`${userItem}/share?f=html`);
      // A search lists it, linked by its id, escaped there too.
      const search = await linksOf(`/sharing/rest/search?f=html&q=${encodeURIComponent(`id:${itemId}`)}`);
      expect(search.links).toContain(`/sharing/rest/content/items/${itemId}?f=html`);
      expect(search.html).not.toContain("<script>alert");
    });

    it("roles: the list links each role, a role its privileges", async () => {
      const { links } = await linksOf("/sharing/rest/portals/self/roles?f=html");
      expect(links).toContain(`/sharing/rest/portals/self/roles/${roleId}?f=html`);
      const role = await linksOf(`/sharing/rest/portals/self/roles/${roleId}?f=html`);
      expect(role.html).toContain("<dt>name</dt><dd>Analyst</dd>");
      expect(role.links).toContain(`/sharing/rest/portals/self/roles/${roleId}/privileges?f=html`);
      expect(role.links).toContain(`/sharing/rest/portals/self/roles/${roleId}/update?f=html`);
    });

    it("webhooks: the list links each webhook, a webhook its status and operations", async () => {
      const { links } = await linksOf("/sharing/rest/portals/self/webhooks?f=html");
      expect(links).toContain(`/sharing/rest/portals/self/webhooks/${webhookId}?f=html`);
      expect(links).toContain("/sharing/rest/portals/self/webhooks/settings?f=html");
      expect(links).toContain("/sharing/rest/portals/self/webhooks/createWebhook?f=html");
      const hook = await linksOf(`/sharing/rest/portals/self/webhooks/${webhookId}?f=html`);
      expect(hook.html).toContain("<dt>name</dt><dd>hook</dd>");
      expect(hook.links).toContain(
        `/sharing/rest/portals/self/webhooks/${webhookId}/notificationStatus?f=html`,
      );
      expect(hook.links).toContain(`/sharing/rest/portals/self/webhooks/${webhookId}/delete?f=html`);
    });

    it("collaborations: collaboration, workspaces and a workspace", async () => {
      const base = "/sharing/rest/portals/self/collaborations";
      expect((await linksOf(`${base}?f=html`)).links).toContain(`${base}/${collaborationId}?f=html`);
      const collaboration = await linksOf(`${base}/${collaborationId}?f=html`);
      expect(collaboration.links).toContain(`${base}/${collaborationId}/workspaces?f=html`);
      expect(collaboration.links).toContain(`${base}/${collaborationId}/inviteParticipant?f=html`);
      expect(collaboration.links).toContain(`${base}/${collaborationId}/removeParticipation?f=html`);
      const workspaces = await linksOf(`${base}/${collaborationId}/workspaces?f=html`);
      expect(workspaces.links).toContain(`${base}/${collaborationId}/workspaces/${workspaceId}?f=html`);
      const workspace = await linksOf(`${base}/${collaborationId}/workspaces/${workspaceId}?f=html`);
      expect(workspace.html).toContain("<dt>name</dt><dd>Roads</dd>");
    });

    it("feature services: the service links its layers and operations, a layer its query", async () => {
      const service = await linksOf("/rest/services/Sites/FeatureServer?f=html");
      expect(service.html).toContain("Points");
      expect(service.links).toContain("/rest/services/Sites/FeatureServer/0?f=html");
      expect(service.links).toContain("/rest/services/Sites/FeatureServer/1?f=html");
      expect(service.links).toContain("/rest/services/Sites/FeatureServer/layers?f=html");
      expect(service.links).toContain("/rest/services/Sites/FeatureServer/applyEdits?f=html");
      expect(service.links).toContain("/rest/admin/services/Sites/FeatureServer?f=html");
      const layer = await linksOf("/rest/services/Sites/FeatureServer/0?f=html");
      expect(layer.html).toContain("<dt>name</dt><dd>Points</dd>");
      expect(layer.links).toContain("/rest/services/Sites/FeatureServer/0/query?f=html");
      expect(layer.links).toContain("/rest/services/Sites/FeatureServer/0/addFeatures?f=html");
    });

    it("an anonymous visitor is shown the way to sign in, not the resource", async () => {
      const browser = new DirectoryBrowser(origin);
      const { html } = await browser.get("/sharing/rest/portals/self/roles?f=html");
      expect(html).toContain("Error 499");
      expect(hrefsOf(html)).toContain("/sharing/rest/login?next=%2Fsharing%2Frest%2Fportals%2Fself%2Froles");
    });
  });

  describe("operation forms", () => {
    it("a POST-only operation answers its form at GET f=html, and only there", async () => {
      const { html } = await admin.get("/sharing/rest/community/createGroup?f=html");
      expect(html).toMatch(
        /<form class="op" method="post" action="\/sharing\/rest\/community\/createGroup">/,
      );
      expect(html).toContain('<input type="hidden" name="f" value="html">');
      expect(hiddenValue(html, "directory_csrf")).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(html).toMatch(/<label for="p-title">title <span class="hint">\(string, required\)/);
      expect(html).toMatch(/<select id="p-access" name="access">.*<option value="org">/s);
      const json = await fetch(`${portal.api}/community/createGroup?f=json`);
      expect(((await json.json()) as any).error.messageCode).toBe("GEN_0404");
    });

    it("submits with POST and shows the answer; the change is made as the signed-in user", async () => {
      const { html } = await admin.get("/sharing/rest/community/createGroup?f=html");
      const answer = await admin.post("/sharing/rest/community/createGroup", {
        f: "html",
        directory_csrf: hiddenValue(html, "directory_csrf") as string,
        title: "Made in the directory",
        access: "org",
      });
      expect(answer.html).toContain("Answer of groups.create");
      expect(answer.html).toContain("<dt>success</dt><dd>true</dd>");
      expect(answer.html).toContain("Made in the directory");
      const id = /<dt>id<\/dt><dd><a href="\/sharing\/rest\/community\/groups\/([0-9a-f]{32})\?f=html">/.exec(
        answer.html,
      )?.[1];
      expect(id).toBeDefined();
      const found = await portal.get(
        "/community/groups",
        { q: '"Made in the directory"' },
        portal.adminToken,
      );
      expect(found.results.map((g: any) => [g.id, g.owner])).toEqual([[id, ADMIN.username]]);
    });

    it("shows a refused operation's error envelope readably", async () => {
      const { html } = await admin.get("/sharing/rest/community/createGroup?f=html");
      const answer = await admin.post("/sharing/rest/community/createGroup", {
        f: "html",
        directory_csrf: hiddenValue(html, "directory_csrf") as string,
      });
      expect(answer.html).toContain("Error 400");
      expect(answer.html).toContain("Missing required parameter &#39;title&#39;.");
    });

    it("refuses a form posted with the cookie but a missing or wrong CSRF value", async () => {
      for (const csrf of [
        undefined,
        "wrong",
        hiddenValue((await admin.get("/sharing/rest/login")).html, "directory_form"),
      ]) {
        const title = `forged ${csrf ?? "none"}`;
        const answer = await admin.post("/sharing/rest/community/createGroup", {
          f: "html",
          title,
          ...(csrf === undefined ? {} : { directory_csrf: csrf }),
        });
        expect(answer.html).toContain("Error 403");
        expect(answer.html).toContain("not sent from this portal&#39;s directory page");
        const found = await portal.get("/community/groups", { q: `"${title}"` }, portal.adminToken);
        expect(found.total).toBe(0);
      }
    });

    it("shows the form of an operation a GET would run, without running it", async () => {
      const url = `/sharing/rest/portals/self/collaborations/${collaborationId}/removeParticipation?f=html`;
      const { html } = await admin.get(url);
      expect(html).toMatch(/<form class="op" method="post" action="[^"]*\/removeParticipation">/);
      const still = await portal.get(
        `/portals/self/collaborations/${collaborationId}`,
        {},
        portal.adminToken,
      );
      expect(still.id).toBe(collaborationId);
    });

    it("generateToken's answer is not stored and its token is in no link", async () => {
      const browser = new DirectoryBrowser(origin);
      const form = await browser.get("/sharing/rest/generateToken?f=html");
      expect(form.html).toMatch(/<input type="password" id="p-password" name="password"/);
      const answer = await browser.post("/sharing/rest/generateToken", {
        f: "html",
        username: member.username,
        password: member.password,
        client: "requestip",
      });
      expect(answer.res.headers.get("cache-control")).toBe("no-store");
      const token = /<dt>token<\/dt><dd>([^<]+)<\/dd>/.exec(answer.html)?.[1] as string;
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      for (const url of urlsOf(answer.html)) expect(url).not.toContain(token);
    });
  });

  it("puts no token and no session into any URL of any page it answered", async () => {
    // Also a page opened with a token in its URL (as ArcGIS clients may): its links carry none.
    const withToken = await admin.get(`/sharing/rest/portals/self?f=html&token=${portal.adminToken}`);
    expect(withToken.html).toContain("<dt>portalName</dt>");
    const secrets = [portal.adminToken, member.token, session()];
    expect(admin.pages.length).toBeGreaterThan(20);
    for (const { url, html } of admin.pages) {
      for (const link of urlsOf(html)) {
        expect(link, url).not.toMatch(/token=/i);
        for (const secret of secrets) expect(link, url).not.toContain(secret);
      }
    }
  });
});
