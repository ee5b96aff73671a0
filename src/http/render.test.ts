import { describe, expect, it } from "vitest";
import { contentDisposition } from "./render.js";

describe("contentDisposition", () => {
  it("gives a printable ASCII name as it is", () => {
    expect(contentDisposition("inline", "data.json")).toBe('inline; filename="data.json"');
  });

  it("gives any other name an ASCII fallback and the UTF-8 name in filename*", () => {
    expect(contentDisposition("attachment", 'données 😀"\\\u0001\r\n.json')).toBe(
      "attachment; filename=\"donn_es ______.json\"; filename*=UTF-8''donn%C3%A9es%20%F0%9F%98%80%22%5C%01%0D%0A.json",
    );
    // A lone surrogate has no UTF-8 form: it becomes U+FFFD instead of failing the answer.
    expect(contentDisposition("inline", "a\uD800b(1)")).toBe(
      "inline; filename=\"a_b(1)\"; filename*=UTF-8''a%EF%BF%BDb%281%29",
    );
  });

  it("yields only characters a header may hold", () => {
    for (const name of ["😀", "\u0000", "\u00ff\u0100", "x\u007f"]) {
      expect(contentDisposition("inline", name)).toMatch(/^[\x20-\x7e]+$/);
    }
  });
});
