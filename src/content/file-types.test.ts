import { describe, expect, it } from "vitest";
import { imageType, servedType } from "./file-types.js";

describe("servedType", () => {
  it.each([
    ["text/html", "application/octet-stream"],
    ["text/html; charset=utf-8", "application/octet-stream"],
    ["TEXT/HTML", "application/octet-stream"],
    ["application/xhtml+xml", "application/octet-stream"],
    ["image/svg+xml", "application/octet-stream"],
    ["text/xml", "application/octet-stream"],
    ["application/xml", "application/octet-stream"],
    ["text/xsl", "application/octet-stream"],
    ["text/javascript", "application/octet-stream"],
    ["application/javascript", "application/octet-stream"],
    ["application/x-javascript", "application/octet-stream"],
    ["text/css", "application/octet-stream"],
    ["application/wasm", "application/octet-stream"],
    ["multipart/x-mixed-replace; boundary=x", "application/octet-stream"],
    ["", "application/octet-stream"],
    ["not a type", "application/octet-stream"],
    ["text/plain\r\nSet-Cookie: x=1", "application/octet-stream"],
  ])("serves active or malformed %j as an octet-stream attachment", (stored, type) => {
    expect(servedType(stored)).toEqual({ contentType: type, disposition: "attachment" });
  });

  it.each([
    ["application/pdf", "application/pdf"],
    ["text/csv", "text/csv"],
    ["application/zip", "application/zip"],
    ["application/geo+json", "application/geo+json"],
    ["image/tiff", "image/tiff"],
    ["application/octet-stream", "application/octet-stream"],
  ])(
    "serves %j, which browsers do not run but is not on the inline list, as an attachment",
    (stored, type) => {
      expect(servedType(stored)).toEqual({ contentType: type, disposition: "attachment" });
    },
  );

  it.each([
    ["image/png", "image/png"],
    ["image/jpeg", "image/jpeg"],
    ["image/gif", "image/gif"],
    ["image/webp", "image/webp"],
    ["application/json", "application/json"],
    ["application/json; charset=utf-8", "application/json"],
    ["text/plain", "text/plain"],
    ["text/plain; charset=utf-8", "text/plain; charset=utf-8"],
    ['text/plain; charset="ISO-8859-1"', "text/plain; charset=iso-8859-1"],
    ["text/plain; charset=utf-7", "text/plain"],
    ["text/plain; charset=<script>", "text/plain"],
  ])("shows %j inline as %j", (stored, type) => {
    expect(servedType(stored)).toEqual({ contentType: type, disposition: "inline" });
  });
});

describe("imageType", () => {
  it("recognises PNG, JPEG and GIF by their first bytes", () => {
    expect(imageType(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]))).toBe("image/png");
    expect(imageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe("image/jpeg");
    expect(imageType(Buffer.from("GIF89a..."))).toBe("image/gif");
    expect(imageType(Buffer.from("GIF87a"))).toBe("image/gif");
  });

  it("recognises nothing else, whatever it claims to be", () => {
    expect(imageType(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'))).toBe(
      undefined,
    );
    expect(imageType(Buffer.from("<html>"))).toBe(undefined);
    expect(imageType(Buffer.from("RIFF\0\0\0\0WEBP"))).toBe(undefined);
    expect(imageType(Buffer.from([0x89, 0x50, 0x4e]))).toBe(undefined);
    expect(imageType(Buffer.alloc(0))).toBe(undefined);
  });
});
