import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { json, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Requests the router or the body parsers refuse before any route runs still get the ArcGIS
 * error envelope (found by the fuzz suite, test/api/fuzz/, which covers them at random; these pin
 * them down).
 */
describe("errors raised before a route runs", () => {
  let portal: TestPortal;
  beforeAll(async () => {
    portal = await startTestPortal();
  });
  afterAll(async () => {
    await portal?.stop();
  });

  it("answers a path that is not valid percent-encoding with the envelope, without echoing the token", async () => {
    for (const bad of ["%zz", "%ED%A0%80", "%"]) {
      const res = await fetch(`${portal.api}/content/items/${bad}?f=json&token=${portal.adminToken}`);
      expect(res.status).toBe(200);
      const body = await json(res);
      expect(body.error).toMatchObject({ code: 400, messageCode: "GEN_0404" });
      expect(JSON.stringify(body)).not.toContain(portal.adminToken);
    }
  });

  it("keeps the connection's headers on an error answered before the request is complete (not found)", async () => {
    // Answered within Node's request event, before the request is marked complete: a request
    // without a body must not be taken for one whose body was left unread.
    for (const connection of ["keep-alive", "close"]) {
      const headers = await new Promise<http.IncomingHttpHeaders>((resolve, reject) => {
        const req = http.get(`${portal.api}/no/such/operation?f=json`, { headers: { connection } }, (res) => {
          res.resume();
          resolve(res.headers);
        });
        req.on("error", reject);
      });
      expect(headers.connection).toBe(connection);
      if (connection === "keep-alive") expect(headers["keep-alive"]).toMatch(/timeout=\d+/);
    }
  });

  it("routes path segments as long as the longest username, and refuses longer ones with the envelope", async () => {
    const longest = `u${"x".repeat(127)}`;
    const user = await portal.get(`/community/users/${longest}`, {}, portal.adminToken);
    expect(user.error.code).toBe(400);
    expect(user.error.messageCode).not.toBe("GEN_0404");
    const tooLong = await portal.get(`/community/users/${"x".repeat(1100)}`, {}, portal.adminToken);
    expect(tooLong.error).toMatchObject({ code: 400, messageCode: "GEN_0404" });
  });

  it("refuses a multipart body without a boundary, a JSON body nested too deep, and NUL in a path", async () => {
    const multipart = await json(
      await fetch(`${portal.api}/portals/self/update?f=json&token=${portal.adminToken}`, {
        method: "POST",
        headers: { "content-type": "multipart/form-data" },
        body: "name=x",
      }),
    );
    expect(multipart.error).toMatchObject({ code: 400, messageCode: "GEN_0400" });
    expect(multipart.error.details[0]).toContain("boundary");

    const deep = `{"name":${"[".repeat(5000)}${"]".repeat(5000)}}`;
    const nested = await json(
      await fetch(`${portal.api}/portals/self/update?f=json&token=${portal.adminToken}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: deep,
      }),
    );
    expect(nested.error.code).toBe(400);
    expect(nested.error.message).toContain("'name'");

    const nul = await portal.get("/community/groups/%00", {}, portal.adminToken);
    expect(nul.error.code).toBe(400);
    expect(JSON.stringify(nul.error)).toContain("NUL");
  });
});
