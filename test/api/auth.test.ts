import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashToken } from "../../src/auth/auth.service.js";
import { ADMIN, json, outbox, startTestPortal, type TestPortal } from "../helpers/portico.js";

describe("sign-in and tokens", () => {
  let portal: TestPortal;
  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal.stop();
  });

  it("answers info with the token service URL", async () => {
    const info = await portal.get("/info");
    expect(info.authInfo).toEqual({
      tokenServicesUrl: `${portal.api}/generateToken`,
      isTokenBasedSecurity: true,
    });
    expect(info.owningSystemUrl).toBe(portal.api.replace(/\/sharing\/rest$/, ""));
  });

  it("issues a token with the requested expiration", async () => {
    const before = Date.now();
    const r = await portal.post("/generateToken", {
      ...ADMIN,
      client: "referer",
      referer: "x",
      expiration: 30,
    });
    expect(typeof r.token).toBe("string");
    expect(r.ssl).toBe(false);
    expect(r.expires).toBeGreaterThanOrEqual(before + 30 * 60_000);
    expect(r.expires).toBeLessThanOrEqual(Date.now() + 30 * 60_000);
  });

  it("refuses a wrong password and an unknown user with the same answer", async () => {
    const wrong = await portal.post("/generateToken", { username: ADMIN.username, password: "nope-nope" });
    const unknown = await portal.post("/generateToken", { username: "nobody_here", password: "nope-nope" });
    expect(wrong).toEqual({
      error: {
        code: 400,
        messageCode: "GWM_0007",
        message: "Unable to generate token.",
        details: ["Invalid username or password."],
      },
    });
    expect(unknown).toEqual(wrong);
  });

  it("names the missing parameter", async () => {
    const r = await portal.post("/generateToken", { username: ADMIN.username });
    expect(r.error.code).toBe(400);
    expect(r.error.message).toContain("'password'");
  });

  it("accepts the token as a parameter, an X-Esri-Authorization header and an Authorization header", async () => {
    const url = `${portal.api}/community/self?f=json`;
    const byParam = await json(await fetch(`${url}&token=${portal.adminToken}`));
    const byEsri = await json(
      await fetch(url, { headers: { "X-Esri-Authorization": `Bearer ${portal.adminToken}` } }),
    );
    const byAuth = await json(
      await fetch(url, { headers: { Authorization: `Bearer ${portal.adminToken}` } }),
    );
    for (const r of [byParam, byEsri, byAuth]) expect(r.username).toBe(ADMIN.username);
  });

  it("answers 499 without a token and 498 with a bad one, with HTTP status 200", async () => {
    const res = await fetch(`${portal.api}/community/self?f=json`);
    expect(res.status).toBe(200);
    expect((await json(res)).error).toMatchObject({ code: 499, message: "Token Required." });
    const bad = await portal.get("/community/self", {}, "not-a-token");
    expect(bad.error).toMatchObject({ code: 498, message: "Invalid token." });
  });

  it("answers 498 for an expired token", async () => {
    const token = await portal.signIn(ADMIN.username, ADMIN.password);
    // Age the token in the database rather than waiting for it to run out.
    await portal.portico.db.kysely
      .updateTable("tokens")
      .set({ expires: Date.now() - 1 })
      .where("token_hash", "=", hashToken(token))
      .execute();
    expect((await portal.get("/community/self", {}, token)).error).toMatchObject({ code: 498 });
  });

  it("records signin and signout events and ends a revoked token", async () => {
    const token = await portal.signIn(ADMIN.username, ADMIN.password);
    expect((await portal.post("/oauth2/revokeToken", { auth_token: token })).success).toBe(true);
    expect((await portal.get("/community/self", {}, token)).error.code).toBe(498);
    const events = await outbox(portal);
    const ops = events.filter((e) => e.object_id === ADMIN.username).map((e) => e.operation);
    expect(ops).toContain("signin");
    expect(ops.at(-1)).toBe("signout");
    const signout = events.at(-1)!;
    expect(signout.uri).toBe(`/users/${ADMIN.username}/signout`);
    expect(signout.actor_username).toBe(ADMIN.username);
  });

  it("renders pjson, pjsonm and html, and refuses an unknown format", async () => {
    const pretty = await fetch(`${portal.api}/info?f=pjson`);
    expect(await pretty.text()).toContain('\n  "owningSystemUrl"');
    const prettyM = await fetch(`${portal.api}/info?f=pjsonm`);
    expect(await prettyM.text()).toContain('\n  "owningSystemUrl"');
    const html = await fetch(`${portal.api}/info?f=html`);
    expect(html.headers.get("content-type")).toContain("text/html");
    expect(await html.text()).toContain("tokenServicesUrl");
    const bad = await portal.get("/info", { f: "xml" });
    expect(bad.error.message).toContain("'f'");
  });

  it("answers an unknown path with the error envelope", async () => {
    const r = await portal.get("/no/such/thing");
    expect(r.error.code).toBe(400);
  });
});
