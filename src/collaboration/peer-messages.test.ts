import { describe, expect, it } from "vitest";
import {
  admitApply,
  admitExport,
  answerProblem,
  base64Bytes,
  type CallLimits,
  checkPackage,
  compileAllSchemas,
  MB,
  requestProblem,
} from "./peer-messages.js";

const GIF = Buffer.from("GIF89a\u0001\u0000\u0001\u0000", "latin1");

function pkg(id: string, over: Record<string, unknown> = {}) {
  return {
    id,
    version: 1,
    title: `t ${id}`,
    type: "GeoJson",
    typeKeywords: ["a"],
    description: "",
    snippet: "",
    tags: ["x", "y"],
    url: "https://example.com/x",
    properties: { a: 1 },
    size: 3,
    data: {
      name: "d.json",
      contentType: "application/json",
      content: Buffer.from("{}\n").toString("base64"),
    },
    thumbnail: null,
    ...over,
  };
}

const limits = (budget = 100 * MB): CallLimits => ({
  maxItemBytes: MB,
  limitName: "the workspace's maxItemSizeInMB",
  budget: { bytes: budget },
});

const reasonOf = (raw: unknown) => {
  const c = checkPackage(raw, MB, "the limit");
  return c.ok ? undefined : c.result.reason;
};

describe("base64Bytes", () => {
  it("measures canonical base64 and refuses anything else", () => {
    expect(base64Bytes(Buffer.from("hello").toString("base64"))).toBe(5);
    expect(base64Bytes("")).toBe(0);
    expect(base64Bytes("aGk=")).toBe(2);
    expect(base64Bytes("aGk")).toBe(undefined);
    expect(base64Bytes("<script>")).toBe(undefined);
    expect(base64Bytes("aG=k")).toBe(undefined);
  });
});

describe("checkPackage", () => {
  it("measures the size on the bytes received and reads the thumbnail's type from them", () => {
    const c = checkPackage(
      pkg("a", {
        size: 0,
        thumbnail: { name: "t.png", contentType: "text/html", content: GIF.toString("base64") },
      }),
      MB,
      "x",
    );
    expect(c.ok && c.item.size).toBe(3);
    expect(c.ok && c.item.thumbnail?.contentType).toBe("image/gif");
  });

  it("refuses what the public API refuses, naming the field", () => {
    expect(reasonOf(pkg("a", { title: "" }))).toMatch(/'title' is empty/);
    expect(reasonOf(pkg("a", { snippet: "s".repeat(2049) }))).toMatch(/'snippet' must be at most 2048/);
    expect(reasonOf(pkg("a", { tags: ["a,b"] }))).toMatch(/'tags' entry 'a,b'/);
    expect(reasonOf(pkg("a", { typeKeywords: ["k".repeat(257)] }))).toMatch(/'typeKeywords'/);
    expect(reasonOf(pkg("a", { url: "data:text/html,<script>" }))).toMatch(/'url' must be an absolute http/);
    expect(reasonOf(pkg("a", { description: "a\u0000b" }))).toMatch(/'description' must not contain the NUL/);
    let deep: unknown = 1;
    for (let i = 0; i < 150; i++) deep = { d: deep };
    expect(reasonOf(pkg("a", { properties: deep }))).toMatch(/'properties' must not nest deeper/);
    expect(reasonOf(pkg("a", { version: 1.5 }))).toMatch(/must be integer at version/);
    expect(reasonOf(pkg("a/b"))).toMatch(/at id/);
    expect(reasonOf({ id: "a" })).toMatch(/lacks 'version'/);
    expect(reasonOf("junk")).toMatch(/must be object/);
    expect(
      reasonOf(pkg("a", { data: { name: "x\u0000.html", contentType: "text/html", content: "" } })),
    ).toMatch(/data's name must not contain the NUL/);
    expect(
      reasonOf(pkg("a", { data: { name: "d", contentType: "text/html\r\nX: y", content: "" } })),
    ).toMatch(/content type must be a media type/);
    const svg = Buffer.from("<svg onload='alert(1)'/>").toString("base64");
    expect(
      reasonOf(pkg("a", { thumbnail: { name: "t.png", contentType: "image/png", content: svg } })),
    ).toMatch(/PNG, GIF or JPEG/);
  });

  it("refuses data over the item limit without decoding it", () => {
    const content = "A".repeat(Math.ceil((MB + 1) / 3) * 4);
    expect(reasonOf(pkg("a", { size: 1, data: { name: "d", contentType: "text/plain", content } }))).toMatch(
      /its data \(1\.0 MB received\) is over the limit/,
    );
  });
});

describe("admitApply", () => {
  it("keeps a call within 16 MB and the package budget, and refuses an id sent twice", () => {
    const chunk = Buffer.alloc(900 * 1024).toString("base64");
    const items = Array.from({ length: 20 }, (_, i) =>
      pkg(`i${i}`, { data: { name: "d", contentType: "application/octet-stream", content: chunk } }),
    );
    const { accepted, refused } = admitApply([...items, pkg("i0")], limits());
    expect(accepted).toHaveLength(18);
    expect(refused.map((r) => r.id)).toEqual(["i18", "i19", "i0"]);

    const small = admitApply(items.slice(0, 3), limits(2 * 900 * 1024));
    expect(small.accepted.map((i) => i.id)).toEqual(["i0", "i1"]);
    expect(small.refused[0]?.reason).toMatch(/maxReplicationPackageSizeInMB/);
  });
});

describe("admitExport", () => {
  const offered = new Map([
    ["a", { size: 3, title: "A" }],
    ["b", { size: 3, title: "B" }],
    ["c", { size: 3, title: "C" }],
  ]);

  it("accepts only requested ids, once each, and fails what the answer left out", () => {
    const r = admitExport(
      [
        { id: "a", state: "present", item: pkg("a") },
        { id: "a", state: "present", item: pkg("a") },
        { id: "z", state: "present", item: pkg("z") },
        { id: "b", state: "present", item: pkg("other") },
      ],
      ["a", "b", "c"],
      limits(),
      offered,
    );
    expect(r.accepted.map((i) => i.id)).toEqual(["a"]);
    expect(Object.fromEntries(r.refused.map((x) => [x.title, x.reason]))).toEqual({
      "t a": "refused: the host sent an item that was not requested",
      "t z": "refused: the host sent an item that was not requested",
      "t other": "refused: the host's package names another item",
      C: "the host's answer left this item out",
    });
  });

  it("charges the budget for bytes beyond what the offer claimed", () => {
    const big = Buffer.alloc(1000).toString("base64");
    const budget = limits(500);
    const r = admitExport(
      [
        {
          id: "a",
          state: "present",
          item: pkg("a", { data: { name: "d", contentType: "text/plain", content: big } }),
        },
        { id: "b", state: "deleted" },
      ],
      ["a", "b"],
      budget,
      offered,
    );
    expect(r.accepted).toEqual([]);
    expect(r.refused[0]?.reason).toMatch(/maxReplicationPackageSizeInMB/);
    expect(r.gone).toEqual([{ id: "b", state: "deleted" }]);
    expect(budget.budget.bytes).toBe(500);
  });
});

describe("message shapes", () => {
  it("checks bodies of known operations and answers of every call", () => {
    expect(requestProblem("export", { workspaceId: "w", ids: Array(101).fill("a") })).toMatch(/100 items/);
    expect(requestProblem("withdraw", { workspaceId: "w", gone: [{ id: "a", state: "gone" }] })).toMatch(
      /allowed values/,
    );
    expect(requestProblem("offer", { workspaceId: "w" })).toBe(undefined);
    expect(requestProblem("no-such-op", {})).toBe(undefined);
    expect(answerProblem("offer", { items: [{ id: "a", version: 1, size: -1, title: "t" }] })).toMatch(
      /size/,
    );
    expect(answerProblem("holdings", { holdings: { a: "x" } })).toMatch(/integer/);
    expect(answerProblem("apply", { results: [{ id: "a", title: "t", ok: "yes" }] })).toMatch(/boolean/);
    expect(answerProblem("nudge", {})).toMatch(/not an operation/);
  });
});

describe("the protocol's schemas", () => {
  it("all compile (they are compiled at first use when serving)", () => {
    expect(() => compileAllSchemas()).not.toThrow();
  });
});
