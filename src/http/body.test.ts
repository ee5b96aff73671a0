import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { describe, expect, it } from "vitest";
import { formTooLong, ParameterCounter } from "./body.js";

describe("parameter counts", () => {
  it("tells a form over the limit from a bounded split", () => {
    expect(formTooLong("a=1&b=2", 2)).toBe(false);
    expect(formTooLong("a=1&b=2&c=3", 2)).toBe(true);
    expect(formTooLong("&".repeat(10_000_000), 1000)).toBe(true);
  });

  const count = async (kind: "form" | "json", chunks: string[], max: number) => {
    let out = "";
    try {
      await pipeline(
        Readable.from(chunks.map((c) => Buffer.from(c))),
        new ParameterCounter(kind, max, () => new Error("too many")),
        async (source) => {
          for await (const chunk of source) out += chunk;
        },
      );
      return out;
    } catch (err) {
      return (err as Error).message;
    }
  };

  it("counts separators across chunks and fails the stream when there are too many", async () => {
    expect(await count("form", ["a=1&", "b=2"], 1)).toBe("a=1&b=2");
    expect(await count("form", ["a=1&", "b=2&c"], 1)).toBe("too many");
    // Commas in JSON strings, escaped quotes included, and strings split across chunks are no members.
    expect(await count("json", ['{"a":"x,\\"', ',y","b":1}'], 1)).toBe('{"a":"x,\\",y","b":1}');
    expect(await count("json", ['{"a":1,', '"b":2,"c":3}'], 1)).toBe("too many");
    expect(await count("json", ['["\\', '",",1,2]'], 1)).toBe("too many");
  });
});
