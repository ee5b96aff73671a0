import { describe, expect, it } from "vitest";
import { FeedCache } from "./cache.js";
import { ChangeFeed } from "./change-feed.js";

describe("FeedCache", () => {
  it("drops only the changed subject's entries, also after a key moved to another subject", async () => {
    const feed = await ChangeFeed.start({ connection: undefined, schema: undefined });
    const cache = new FeedCache<string, { user: string }>(feed, ["auth"], (v) => v.user);
    cache.keep("t1", { user: "u1" }, cache.mark());
    cache.keep("t2", { user: "u1" }, cache.mark());
    cache.keep("t3", { user: "u2" }, cache.mark());
    cache.keep("t3", { user: "u1" }, cache.mark());
    cache.keep("t4", { user: "u2" }, cache.mark());
    feed.publish(["auth:u2"]);
    expect([cache.peek("t1"), cache.peek("t2"), cache.peek("t3"), cache.peek("t4")]).toEqual([
      { user: "u1" },
      { user: "u1" },
      { user: "u1" },
      undefined,
    ]);
    cache.delete("t1");
    feed.publish(["auth:u1"]);
    expect([cache.peek("t2"), cache.peek("t3")]).toEqual([undefined, undefined]);
    cache.keep("t5", { user: "u3" }, cache.mark());
    feed.publish(["auth"]);
    expect(cache.peek("t5")).toBeUndefined();
    await feed.close();
  });
});
