import { describe, expect, it } from "vitest";
import { csrfMatches, csrfOf, directoryTokenOf, returnPath, signInCookie } from "./session.js";

describe("returnPath", () => {
  it("keeps a path of the portal's API roots", () => {
    expect(returnPath("/sharing/rest/portals/self", "")).toBe("/sharing/rest/portals/self");
    expect(returnPath("/gis/rest/services/A/FeatureServer/0", "/gis")).toBe(
      "/gis/rest/services/A/FeatureServer/0",
    );
    expect(returnPath("/portaladmin", "")).toBe("/portaladmin");
  });

  it("sends anything else to the directory's root: other sites, other paths, climbing out", () => {
    for (const next of [
      undefined,
      "",
      "//evil.example/sharing/rest",
      "https://evil.example/sharing/rest",
      "/\\evil.example",
      "\\\\evil.example",
      "/sharing/rest/../../elsewhere",
      "/sharing/rest/%2e%2e/%2e%2e/x",
      "/sharing/rest/a%2f..%2fb",
      "/sharing/restx",
      "/elsewhere",
      "/sharing/rest/\r\nLocation: x",
      "javascript:alert(1)",
      `/sharing/rest/${"a".repeat(3000)}`,
    ]) {
      expect(returnPath(next, ""), String(next)).toBe("/sharing/rest");
    }
    expect(returnPath("/sharing/rest/portals/self", "/gis")).toBe("/gis/sharing/rest");
  });
});

describe("the session's CSRF value", () => {
  it("is derived from the session, differs from its stored hash, and is checked exactly", () => {
    const token = "a".repeat(43);
    const csrf = csrfOf(token);
    expect(csrf).not.toBe(token);
    expect(csrfOf("b".repeat(43))).not.toBe(csrf);
    expect(csrfMatches(csrf, token)).toBe(true);
    expect(csrfMatches(undefined, token)).toBe(false);
    expect(csrfMatches("", token)).toBe(false);
    expect(csrfMatches(`${csrf}x`, token)).toBe(false);
    expect(csrfMatches(csrfOf("b".repeat(43)), token)).toBe(false);
  });
});

describe("the cookie", () => {
  it("is HttpOnly and SameSite=Strict everywhere, Secure over HTTPS", () => {
    expect(signInCookie("t", { contextPath: "", maxAgeSeconds: 60, secure: false })).toBe(
      "portico_directory=t; Path=/; Max-Age=60; HttpOnly; SameSite=Strict",
    );
    expect(signInCookie("t", { contextPath: "/gis", maxAgeSeconds: 60, secure: true })).toBe(
      "portico_directory=t; Path=/gis; Max-Age=60; HttpOnly; SameSite=Strict; Secure",
    );
  });

  it("is read from a Cookie header only when plausible", () => {
    expect(directoryTokenOf("a=1; portico_directory=abc")).toBe("abc");
    expect(directoryTokenOf("portico_directory=")).toBeUndefined();
    expect(directoryTokenOf(`portico_directory=${"x".repeat(200)}`)).toBeUndefined();
    expect(directoryTokenOf(undefined)).toBeUndefined();
  });
});
