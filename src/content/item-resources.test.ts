import { describe, expect, it } from "vitest";
import { PorticoError } from "../errors.js";
import { checkResourcePath, resourcePath, resourceType } from "./item-resources.js";

const refused = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return err instanceof PorticoError;
  }
  return false;
};

describe("resource paths", () => {
  it("joins a folder and a name, trimming slashes around the folder", () => {
    expect(resourcePath("fileName", "images/", "a.png")).toBe("images/a.png");
    expect(resourcePath("fileName", "/a/b", "c.json")).toBe("a/b/c.json");
    expect(resourcePath("fileName", undefined, "c.json")).toBe("c.json");
  });

  it.each([
    "..",
    "../x.json",
    "a/../b.json",
    "./a.json",
    ".hidden",
    "a//b.json",
    "a\\b.json",
    "a/b/",
    "a%2Fb",
    "x\u0000.json",
    "a/b/c/d/e/f.json",
    "a".repeat(256),
    " lead.json",
    "trail.json ",
  ])("refuses %j", (path) => {
    expect(refused(() => checkResourcePath("resource", path))).toBe(true);
  });

  it("takes four folders, spaces and brackets inside names", () => {
    expect(refused(() => checkResourcePath("resource", "a/b/c/d/my file (1).json"))).toBe(false);
  });
});

describe("resource types", () => {
  it("stores images as images only when their bytes are", () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(resourceType("a.png", png)).toBe("image/png");
    expect(resourceType("a.png", Buffer.from("<svg"))).toBe("application/octet-stream");
    expect(resourceType("a.JSON", Buffer.alloc(0))).toBe("application/json");
    expect(resourceType("noextension", Buffer.alloc(0))).toBe("application/octet-stream");
  });
});
