import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ANSWER_SIGNATURE_HEADER, answerDocument, PEER_HEADERS } from "../../src/collaboration/peer.js";
import { generateKeyPair, signDocument } from "../../src/collaboration/signing.js";
import {
  addItem,
  collaborate,
  groupItems,
  type Linked,
  ok,
  PEER_ENV,
  self,
  startPeer,
  sync,
} from "../helpers/collaboration.js";
import { startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * A peer that signs with its real key but sends what no portal would: oversized, mislabelled,
 * unrequested or unsafe items, and calls that probe for collaborations. Every item a peer sends
 * passes the public API's item rules on the receiver; a bad item fails alone with its reason, a
 * malformed call fails whole, and the portal goes on working.
 */

const MB = 1024 * 1024;
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
const portals: TestPortal[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) s.close();
  await Promise.all(portals.map((p) => p.stop()));
});

async function peer(options: { logs?: unknown[] } = {}) {
  const { logs } = options;
  const p = logs
    ? await startTestPortal({
        env: { ...PEER_ENV, PORTICO_LOG_LEVEL: "warn" },
        logger: {
          stream: new Writable({
            write(chunk, _enc, done) {
              for (const line of String(chunk).split("\n").filter(Boolean)) logs.push(JSON.parse(line));
              done();
            },
          }),
        },
      })
    : await startPeer();
  portals.push(p);
  return p;
}

const orgId = async (p: TestPortal) => (await ok(p.get(self, {}, p.adminToken), "portals/self")).id as string;
const privateKey = async (p: TestPortal) =>
  (await p.portico.db.kysely.selectFrom("portal_keys").select("private_key").executeTakeFirstOrThrow())
    .private_key;

/** A signed call as `from` would make it, with its real key unless `key` is given. */
async function peerCall(
  to: TestPortal,
  envelope: { collaborationId: string; from: string; to: string; op: string; body: Record<string, unknown> },
  key: string,
): Promise<any> {
  const full = { ...envelope, issued: Date.now(), nonce: randomUUID() };
  const res = await fetch(`${to.api}/portico/peer/${envelope.op}?f=json`, {
    method: "POST",
    // A guest names itself in headers, as `PeerClient.call` does, or a large body is refused unread.
    headers: {
      "content-type": "application/json",
      [PEER_HEADERS.collaboration]: envelope.collaborationId,
      [PEER_HEADERS.from]: envelope.from,
    },
    body: JSON.stringify({ envelope: full, signature: signDocument(full, key) }),
  });
  return res.json();
}

/** An item package as a guest sends it in `apply`, valid unless overridden. */
function pkg(id: string, over: Record<string, unknown> = {}) {
  const data = Buffer.from(JSON.stringify({ id }));
  return {
    id,
    version: 1,
    title: `item ${id}`,
    type: "GeoJson",
    typeKeywords: [],
    description: "",
    snippet: "",
    tags: ["t"],
    url: null,
    properties: null,
    size: data.length,
    data: { name: "data.json", contentType: "application/json", content: data.toString("base64") },
    thumbnail: null,
    ...over,
  };
}

const hex = (n: number) => n.toString(16).padStart(32, "0");

async function itemCount(p: TestPortal): Promise<number> {
  const r = await p.portico.db.kysely
    .selectFrom("items")
    .select((eb) => eb.fn.countAll().as("n"))
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

describe("a hostile guest", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  let hostId: string;
  let guestId: string;
  let guestKey: string;
  const hostLogs: any[] = [];

  beforeAll(async () => {
    [host, guest] = await Promise.all([peer({ logs: hostLogs }), peer()]);
    linked = await collaborate(host, [{ portal: guest, mode: "sendAndReceive" }], {
      config: { maxItemSizeInMB: 1 },
    });
    [hostId, guestId, guestKey] = await Promise.all([orgId(host), orgId(guest), privateKey(guest)]);
  }, 60_000);

  const apply = (items: unknown[]) =>
    peerCall(
      host,
      {
        collaborationId: linked.collaborationId,
        from: guestId,
        to: hostId,
        op: "apply",
        body: { workspaceId: linked.workspaceId, items },
      },
      guestKey,
    );

  it("fails each unsound item with its reason and stores only the sound one", async () => {
    const before = await itemCount(host);
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(document.domain)"/>');
    const big = Buffer.alloc(5 * MB, 0x61);
    const hostile = {
      [hex(1)]: [
        pkg(hex(1), {
          size: 0,
          data: { name: "big.json", contentType: "application/json", content: big.toString("base64") },
        }),
        /maxItemSizeInMB/,
      ],
      [hex(2)]: [pkg(hex(2), { title: "t".repeat(200_000) }), /'title' must be at most 250 characters/],
      [hex(3)]: [
        pkg(hex(3), { tags: Array.from({ length: 3000 }, (_, i) => `tag${i}`) }),
        /'tags' must have at most 128 entries/,
      ],
      [hex(4)]: [pkg(hex(4), { url: "javascript:alert(document.domain)" }), /'url' must be an absolute http/],
      [hex(5)]: [
        pkg(hex(5), {
          thumbnail: { name: "t.png", contentType: "image/png", content: svg.toString("base64") },
        }),
        /thumbnail must be a PNG, GIF or JPEG/,
      ],
      [hex(7)]: [pkg(hex(7), { typeKeywords: "not a list" }), /must be array at typeKeywords/],
      [hex(8)]: [pkg(hex(8), { properties: { x: "y".repeat(1100 * 1024) } }), /'properties' must be at most/],
      [hex(9)]: [
        pkg(hex(9), { data: { name: "d", contentType: "text/html", content: "<script>x</script>" } }),
        /not base64/,
      ],
    } as const;
    const good = pkg(hex(10), {
      thumbnail: { name: "t.png", contentType: "text/html", content: PNG.toString("base64") },
    });
    const r = await apply([...Object.values(hostile).map(([p]) => p), good]);
    expect(r.error, JSON.stringify(r.error)).toBeUndefined();
    const byId = new Map((r.results as any[]).map((x) => [x.id, x]));
    for (const [id, [, reason]] of Object.entries(hostile)) {
      expect(byId.get(id), id).toMatchObject({ ok: false });
      expect(byId.get(id).reason, id).toMatch(reason);
      // A result carries at most a title's worth of what the peer sent.
      expect(byId.get(id).title.length).toBeLessThanOrEqual(250);
    }
    expect(byId.get(hex(10))).toMatchObject({ ok: true, action: "created" });

    expect(await itemCount(host)).toBe(before + 1);
    const stored = (await groupItems(host, linked.hostGroup)).get(`item ${hex(10)}`);
    // The size is what arrived, the thumbnail's type what its bytes are.
    expect(stored.size).toBe(Buffer.from(JSON.stringify({ id: hex(10) })).length);
    const thumb = await fetch(
      `${host.api}/content/items/${stored.id}/info/${stored.thumbnail}?token=${host.adminToken}`,
    );
    expect(thumb.headers.get("content-type")).toMatch(/^image\/png/);

    // One definition of a valid item: the public API refuses the same URL.
    const viaApi = await host.post(
      "/content/users/admin_user/addItem",
      { title: "x", type: "Web Mapping Application", url: "javascript:alert(document.domain)" },
      host.adminToken,
    );
    expect(viaApi.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
    expect(viaApi.error.message).toMatch(/'url': must be an absolute http or https URL/);
  });

  it("refuses a whole call of more items than a call carries, or holding NUL, storing nothing", async () => {
    const before = await itemCount(host);
    const r = await apply(Array.from({ length: 3000 }, (_, i) => pkg(hex(1000 + i))));
    expect(r.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
    expect(r.error.message).toMatch(/'envelope'.*must NOT have more than 100 items/);
    const nul = await apply([pkg(hex(999), { description: "a\u0000b" }), pkg(hex(998))]);
    expect(nul.error.message).toMatch(/'envelope'.*NUL/);
    expect(await itemCount(host)).toBe(before);
  });

  it("fails items past 16 MB in one call, and items sent twice", async () => {
    const before = await itemCount(host);
    const chunk = Buffer.alloc(900 * 1024, 0x62).toString("base64");
    const items = Array.from({ length: 20 }, (_, i) =>
      pkg(hex(5000 + i), {
        data: { name: "d.bin", contentType: "application/octet-stream", content: chunk },
      }),
    );
    const r = await apply([...items, pkg(hex(5000))]);
    const failed = (r.results as any[]).filter((x) => !x.ok);
    // 18 items of 900 KB fit in 16 MB; the 19th and 20th do not, and the last was sent already.
    expect(failed.map((x) => x.reason).sort()).toEqual([
      "refused: sent twice in one call",
      expect.stringMatching(/more than 16 MB/),
      expect.stringMatching(/more than 16 MB/),
    ]);
    expect(await itemCount(host)).toBe(before + 18);
  });

  it("a real guest sync reports the host's refusals in syncStatus, and the portals go on", async () => {
    // The guest's own item lies about its size and holds a script URL: written past the API.
    const liar = await addItem(guest, "liar", linked.guestGroups[0], { text: "z".repeat(2 * MB) });
    const script = await addItem(guest, "script", linked.guestGroups[0]);
    await guest.portico.db.kysely.updateTable("items").set({ size: 0 }).where("id", "=", liar).execute();
    await guest.portico.db.kysely
      .updateTable("items")
      .set({ url: "javascript:alert(1)" })
      .where("id", "=", script)
      .execute();
    await addItem(guest, "fine", linked.guestGroups[0]);
    const status = await sync(guest, linked);
    const send = status.participantTasks.find((t: any) => t.direction === "send");
    const failed = Object.fromEntries(send.failed.map((f: any) => [f.title, f.reason]));
    expect(failed.liar).toMatch(/2\.0 MB received.*maxItemSizeInMB/);
    expect(failed.script).toMatch(/'url' must be an absolute http or https URL/);
    expect(send.succeeded.map((s: any) => s.title)).toContain("fine");
    const onHost = await groupItems(host, linked.hostGroup);
    expect(onHost.has("fine")).toBe(true);
    expect(onHost.has("liar")).toBe(false);
    expect(onHost.has("script")).toBe(false);
    expect((await fetch(`${host.api.replace("/sharing/rest", "")}/health`)).status).toBe(200);
  });

  it("answers an unknown collaboration exactly as a bad signature, and logs which", async () => {
    const unknown = await peerCall(
      host,
      { collaborationId: hex(77), from: guestId, to: hostId, op: "state", body: {} },
      guestKey,
    );
    const forged = await peerCall(
      host,
      { collaborationId: linked.collaborationId, from: guestId, to: hostId, op: "state", body: {} },
      generateKeyPair().privateKey,
    );
    const stranger = await peerCall(
      host,
      { collaborationId: linked.collaborationId, from: hex(78), to: hostId, op: "state", body: {} },
      generateKeyPair().privateKey,
    );
    expect(unknown.error).toMatchObject({ code: 498, messageCode: "COLLAB_0498" });
    expect(forged.error).toEqual(unknown.error);
    expect(stranger.error).toEqual(unknown.error);
    const refusals = hostLogs.filter((l) => l.msg === "peer call refused").map((l) => l.err?.message);
    expect(refusals).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^no collaboration with this id exists here/),
        expect.stringMatching(/^the signature does not match/),
        expect.stringMatching(/^the caller is not a participant/),
      ]),
    );
  });
});

describe("a fake host", () => {
  let host: TestPortal;
  let guest: TestPortal;
  let linked: Linked;
  /** Rewrites the host's answer to `export` (signed again with the host's key); the others pass through. */
  let rewrite: (answer: any, ids: string[]) => any = (a) => a;

  beforeAll(async () => {
    [host, guest] = await Promise.all([peer(), peer()]);
    linked = await collaborate(host, [{ portal: guest, mode: "receive" }], {
      config: { maxItemSizeInMB: 1 },
    });
    // The guest reaches its host through this server, which answers as the host would, altered.
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        const body = Buffer.concat(chunks);
        const upstream = await fetch(`${host.portico.address}${req.url}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            [PEER_HEADERS.collaboration]: String(req.headers[PEER_HEADERS.collaboration]),
            [PEER_HEADERS.from]: String(req.headers[PEER_HEADERS.from]),
          },
          body,
        });
        let text = await upstream.text();
        if (req.url?.includes("/portico/peer/export")) {
          const ids = JSON.parse(body.toString()).envelope.body.ids as string[];
          text = JSON.stringify(rewrite(JSON.parse(text), ids));
        }
        // A host that signs with its real key: whatever it answers carries its valid signature.
        const signedBy = signDocument(
          answerDocument(JSON.parse(body.toString()), 200, text),
          await privateKey(host),
        );
        res
          .writeHead(200, { "content-type": "application/json", [ANSWER_SIGNATURE_HEADER]: signedBy })
          .end(text);
      });
    });
    servers.push(proxy);
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const { port } = proxy.address() as AddressInfo;
    await guest.portico.db.kysely
      .updateTable("collaboration_participants")
      .set({ portal_url: `http://127.0.0.1:${port}` })
      .where("collaboration_id", "=", linked.collaborationId)
      .where("role", "=", "host")
      .execute();
  }, 60_000);

  const receiveTask = (status: any) => status.participantTasks.find((t: any) => t.direction === "receive");

  it("refuses an answer with 2,002 items for one requested, storing nothing", async () => {
    await addItem(host, "wanted", linked.hostGroup);
    rewrite = (answer) => {
      const [first] = answer.items;
      const extra = Array.from({ length: 2001 }, (_, i) => ({
        id: hex(9000 + i),
        state: "present",
        item: { ...first.item, id: hex(9000 + i), title: `unrequested ${i}` },
      }));
      return { items: [...answer.items, ...extra] };
    };
    const before = await itemCount(guest);
    const task = receiveTask(await sync(guest, linked));
    expect(task.status).toBe("failed");
    expect(task.error).toMatch(/refused/);
    expect(task.notProcessed.map((i: any) => i.title)).toEqual(["wanted"]);
    expect(await itemCount(guest)).toBe(before);
  });

  it("fails unrequested, oversized and left-out items alone, and stores what was asked for", async () => {
    await addItem(host, "huge", linked.hostGroup);
    await addItem(host, "dropped", linked.hostGroup);
    rewrite = (answer, ids) => {
      const items = answer.items.map((e: any) => {
        if (e.item?.title === "huge")
          return {
            ...e,
            item: {
              ...e.item,
              data: { ...e.item.data, content: Buffer.alloc(20 * MB, 0x63).toString("base64") },
            },
          };
        if (e.item?.title === "dropped")
          return { id: hex(4242), state: "present", item: { ...e.item, id: hex(4242), title: "intruder" } };
        return e;
      });
      expect(ids).toHaveLength(3);
      return { items };
    };
    const before = await itemCount(guest);
    const task = receiveTask(await sync(guest, linked));
    expect(task.status).toBe("completed_with_failures");
    expect(task.succeeded.map((i: any) => i.title)).toEqual(["wanted"]);
    const failed = Object.fromEntries(task.failed.map((f: any) => [f.title, f.reason]));
    expect(failed, JSON.stringify(task.failed)).toHaveProperty("intruder");
    expect(failed.huge).toMatch(/20\.0 MB received\) is over the workspace's maxItemSizeInMB/);
    expect(failed.intruder).toMatch(/not requested/);
    expect(Object.values(failed)).toContainEqual(expect.stringMatching(/left this item out/));
    expect(await itemCount(guest)).toBe(before + 1);
    expect([...(await groupItems(guest, linked.guestGroups[0] as string)).keys()]).toEqual(["wanted"]);

    // Still working: with honest answers, the rest arrives.
    rewrite = (a) => a;
    const again = receiveTask(await sync(guest, linked));
    expect(again.status).toBe("completed");
    expect([...(await groupItems(guest, linked.guestGroups[0] as string)).keys()].sort()).toEqual([
      "dropped",
      "huge",
      "wanted",
    ]);
  });
});
