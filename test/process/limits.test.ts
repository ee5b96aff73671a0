import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { createItem, getItemData } from "@esri/arcgis-rest-portal";
import { ArcGISIdentityManager } from "@esri/arcgis-rest-request";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  attack,
  filler,
  MB,
  manyKeys,
  multipart,
  multipartHeaders,
  startTarget,
  type Target,
} from "../helpers/attack.js";
import { ADMIN, startTestPortal, type TestPortal } from "../helpers/portico.js";
import type { Running } from "../helpers/process.js";

/**
 * What one request may take from the server (issue 12, "Resource exhaustion by anonymous
 * callers"): oversized values, a million parameters, multipart bodies sent to operations that take
 * no file, oversized and unused uploads, slow clients. Attacks go to a `portico serve` process, whose
 * memory is read from /proc and which must stay alive; nothing here judges speed.
 */

const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489", "hex");

describe("limits of one request, against a portico serve process", () => {
  let target: Target;
  let node: Running;
  let token: string;

  const origin = () => target.origin;
  const alive = () => target.alive();
  const expectPeakWithin = (bound: number) => target.expectPeakWithin(bound);
  const uploadsLeft = () => {
    const dir = path.join(target.dataDir, "tmp");
    return fs.existsSync(dir) ? fs.readdirSync(dir) : [];
  };

  beforeAll(async () => {
    target = await startTarget("limits");
    ({ node, token } = target);
  }, 60_000);
  afterAll(() => target?.stop());

  it("refuses a 100 MB username to generateToken with the envelope, and stays alive and small", async () => {
    for (const length of [true, false]) {
      const body = () => ["username=", ...filler(100), "&password=x"];
      const sent = attack(
        `${node.base}/generateToken?f=json`,
        {
          "content-type": "application/x-www-form-urlencoded",
          ...(length ? { "content-length": 100 * MB + 20 } : {}),
        },
        body,
      );
      const answer = await sent.answer;
      sent.destroy();
      expect(answer).toBeDefined();
      const error = JSON.parse(answer as string).error;
      expect(error).toMatchObject({ code: 400, messageCode: "GEN_0413" });
      expect(error.message).toContain("1 MB");
      await alive();
    }
    expectPeakWithin(150 * MB);
  }, 120_000);

  for (const kind of ["form", "json"] as const) {
    it(`refuses 1,000,000 ${kind} keys while they arrive; /health answers in the meantime`, async () => {
      // addItem takes bodies of 32 MB, and reads them before it knows the caller when the token
      // comes last: only the parameter count stands between it and a million keys.
      const sent = attack(
        `${node.base}/content/users/${ADMIN.username}/addItem?f=json`,
        { "content-type": kind === "form" ? "application/x-www-form-urlencoded" : "application/json" },
        () => manyKeys(kind, 1_000_000),
        { holdLastByte: true },
      );
      // Everything but the last byte is written (or the answer came first); a server that waits
      // for the whole body to parse it has not answered yet when /health has.
      await sent.written;
      const health = await fetch(`${origin()}/health`);
      expect(health.status).toBe(200);
      const answeredBeforeHealth = sent.answered();
      sent.finish();
      const answer = await sent.answer;
      sent.destroy();
      expect(answeredBeforeHealth).toBe(true);
      const error = JSON.parse(answer as string).error;
      expect(error.code).toBe(400);
      expect(JSON.stringify(error)).toMatch(kind === "form" ? /at most 1000/ : /more than 100000 members/);
      await alive();
    }, 120_000);
  }

  it("refuses 1,000,000 form keys sent with a token in the query that must be looked up, and stays up", async () => {
    // The caller is looked up before the body is bounded; on PostgreSQL that waits on a query,
    // while the body flows into the parameter counter. Its refusal must be answered, not crash
    // the process (it did: an unknown token and a million keys brought the server down).
    for (const tokenInQuery of ["not-a-token-of-this-portal", token]) {
      const sent = attack(
        `${node.base}/content/users/${ADMIN.username}/addItem?f=json&token=${tokenInQuery}`,
        { "content-type": "application/x-www-form-urlencoded" },
        () => manyKeys("form", 1_000_000),
      );
      const answer = await sent.answer;
      sent.destroy();
      const error = JSON.parse(answer as string).error;
      if (tokenInQuery === token) expect(JSON.stringify(error)).toMatch(/at most 1000/);
      else expect(error.code).toBe(498);
      await alive();
    }
  }, 120_000);

  it("refuses four anonymous 2 x 95 MB multipart bodies to /info before reading them", async () => {
    const body = multipart([
      { name: "a", filename: "a.bin", bytes: 95 * MB },
      { name: "b", filename: "b.bin", bytes: 95 * MB },
    ]);
    const attacks = [0, 1, 2, 3].map((i) =>
      attack(
        `${node.base}/info?f=json`,
        multipartHeaders(i % 2 === 0 ? body.length : undefined),
        body.chunks,
      ),
    );
    const answers = await Promise.all(attacks.map((a) => a.answer));
    for (const a of attacks) a.destroy();
    for (const answer of answers) {
      expect(answer).toBeDefined();
      expect(JSON.parse(answer as string).error).toMatchObject({ code: 400, messageCode: "GEN_0415" });
    }
    await alive();
    expectPeakWithin(150 * MB);
  }, 120_000);

  for (const tokenFirst of [true, false]) {
    it(`refuses an addItem thumbnail over its cap naming the field, and leaves no file (token ${tokenFirst ? "first" : "last, as Esri's client sends it"})`, async () => {
      const tokenPart = { name: "token", value: token };
      const parts = [
        ...(tokenFirst ? [tokenPart] : []),
        { name: "f", value: "json" },
        { name: "title", value: "Too big" },
        { name: "type", value: "Image" },
        { name: "thumbnail", filename: "t.png", head: PNG, bytes: 10 * MB + 1 },
        ...(tokenFirst ? [] : [tokenPart]),
      ];
      const body = multipart(parts);
      const sent = attack(
        `${node.base}/content/users/${ADMIN.username}/addItem`,
        multipartHeaders(body.length),
        body.chunks,
      );
      const answer = await sent.answer;
      sent.destroy();
      const error = JSON.parse(answer as string).error;
      expect(error.code).toBe(400);
      expect(error.message).toContain("'thumbnail'");
      expect(error.message).toContain("10 MB");
      expect(uploadsLeft()).toEqual([]);
      const search = await (
        await fetch(`${node.base}/search?f=json&q=title:"Too big"&token=${token}`)
      ).json();
      expect((search as { total: number }).total).toBe(0);
    }, 120_000);
  }

  it("reads past a file field addItem does not take, stores nothing of it, and adds the item", async () => {
    // Larger than any file addItem takes: read past, not kept.
    const body = multipart([
      { name: "f", value: "json" },
      { name: "title", value: "With an unused file" },
      { name: "type", value: "CSV" },
      { name: "text", value: "a,b" },
      { name: "unused", filename: "big.bin", bytes: 105 * MB },
      { name: "token", value: token },
    ]);
    const sent = attack(
      `${node.base}/content/users/${ADMIN.username}/addItem`,
      multipartHeaders(body.length),
      body.chunks,
    );
    const answer = JSON.parse((await sent.answer) as string);
    sent.destroy();
    expect(answer.success).toBe(true);
    const item = (await (
      await fetch(`${node.base}/content/items/${answer.id}?f=json&token=${token}`)
    ).json()) as {
      size: number;
    };
    expect(item.size).toBe(3);
    expect(uploadsLeft()).toEqual([]);
    expectPeakWithin(150 * MB);
    await alive();
  }, 120_000);
});

describe("limits of one request, in process", () => {
  let portal: TestPortal;
  beforeAll(async () => {
    portal = await startTestPortal({
      // Short enough for the slow clients below to be cut within the test's time, long enough
      // that an ordinary request of a starved process (two cores, several test files) is not.
      env: { PORTICO_HEADERS_TIMEOUT_SECONDS: "3", PORTICO_REQUEST_TIMEOUT_SECONDS: "6" },
    });
  });
  afterAll(async () => {
    await portal?.stop();
  });

  const port = () => Number(new URL(portal.api).port);

  /** Opens a connection, sends `head`, then one byte of `trickle` every 200 ms until the server cuts it. */
  const slowClient = (head: string, trickle: string) =>
    new Promise<"cut">((resolve) => {
      const socket = net.connect(port(), "127.0.0.1", () => socket.write(head));
      let i = 0;
      const timer = setInterval(() => {
        if (!socket.destroyed && socket.writable) socket.write(trickle[i++ % trickle.length] as string);
      }, 200);
      socket.on("data", () => {});
      socket.on("error", () => {});
      socket.on("close", () => {
        clearInterval(timer);
        resolve("cut");
      });
    });

  it("cuts a client that trickles its headers, and one that trickles its body", async () => {
    await expect(
      slowClient("POST /sharing/rest/info HTTP/1.1\r\nHost: x\r\n", "X-Slow: aaaaaaaaaaaaaaaaaaaa"),
    ).resolves.toBe("cut");
    await expect(
      slowClient(
        "POST /sharing/rest/info HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n",
        "f=json&",
      ),
    ).resolves.toBe("cut");
    // The server still answers others.
    expect((await portal.get("/info")).authInfo).toBeDefined();
  }, 30_000);

  it("adds an item with a file through Esri's client (token sent after the file)", async () => {
    const member = await portal.addUser("limits_esri", "org_publisher");
    const session = await ArcGISIdentityManager.signIn({
      username: member.username,
      password: member.password,
      portal: portal.api,
    });
    const created = await createItem({
      item: { title: "Esri upload", type: "CSV", tags: ["esri"] },
      file: new Blob(["name,value\nx,1\n"], { type: "text/csv" }),
      filename: "values.csv",
      authentication: session,
    } as Parameters<typeof createItem>[0]);
    expect(created.success).toBe(true);
    const data = await getItemData(created.id, { authentication: session, rawResponse: true });
    expect(await (data as Response).text()).toBe("name,value\nx,1\n");
    expect(fs.readdirSync(path.join(portal.store.dataDir, "tmp"))).toEqual([]);
  });

  it("refuses a query string of more than 1,000 parameters, and names the body limit when it is exceeded", async () => {
    const query = Array.from({ length: 1001 }, (_, i) => `k${i}=1`).join("&");
    const many: any = await (await fetch(`${portal.api}/info?f=json&${query}`)).json();
    expect(many.error).toMatchObject({ code: 400, messageCode: "PARAM_0004" });
    const big: any = await (
      await fetch(`${portal.api}/community/createGroup?f=json&token=${portal.adminToken}`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: `title=x&description=${"d".repeat(2 * MB)}`,
      })
    ).json();
    expect(big.error).toMatchObject({ code: 400, messageCode: "GEN_0413" });
    expect(big.error.message).toContain("1 MB");
  });
});
