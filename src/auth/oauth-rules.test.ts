import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  challengeRefusal,
  OOB_REDIRECT,
  originOf,
  redirectUriRefusal,
  redirectUriRegistered,
  verifierMatches,
  withAnswer,
} from "./oauth-rules.js";

const verifier = "a".repeat(20) + "B-._~".repeat(5);
const s256 = createHash("sha256").update(verifier).digest("base64url");

describe("PKCE", () => {
  it("accepts the verifier of an S256 challenge and refuses any other", () => {
    expect(verifierMatches(verifier, s256, "S256")).toBe(true);
    expect(verifierMatches(`${verifier}x`, s256, "S256")).toBe(false);
    expect(verifierMatches(s256, s256, "S256")).toBe(false);
  });
  it("accepts a plain challenge only with the same verifier", () => {
    expect(verifierMatches(verifier, verifier, "plain")).toBe(true);
    expect(verifierMatches(verifier, s256, "plain")).toBe(false);
  });
  it("refuses verifiers shorter than 43 characters or with other characters", () => {
    const short = "a".repeat(42);
    expect(verifierMatches(short, short, "plain")).toBe(false);
    const odd = `${"a".repeat(43)}!`;
    expect(verifierMatches(odd, odd, "plain")).toBe(false);
  });
  it("refuses unknown challenge methods and malformed challenges", () => {
    expect(challengeRefusal(s256, "S256")).toBeUndefined();
    expect(challengeRefusal(s256, "S512")).toMatch(/S256 or plain/);
    expect(challengeRefusal("short", "S256")).toMatch(/43 to 128/);
  });
});

describe("redirect URIs", () => {
  it("registers web and native URIs, refuses fragments, credentials and script schemes", () => {
    expect(redirectUriRefusal("https://app.example.com/cb")).toBeUndefined();
    expect(redirectUriRefusal("my-app://auth")).toBeUndefined();
    expect(redirectUriRefusal(OOB_REDIRECT)).toBeUndefined();
    expect(redirectUriRefusal("/relative")).toMatch(/absolute/);
    expect(redirectUriRefusal("https://app.example.com/cb#x")).toMatch(/fragment/);
    expect(redirectUriRefusal("https://u:p@app.example.com/cb")).toMatch(/credentials/);
    expect(redirectUriRefusal("javascript:alert(1)")).toMatch(/scheme/);
  });
  it("matches registered URIs exactly, never by prefix or case", () => {
    const registered = ["https://app.example.com/cb"];
    expect(redirectUriRegistered("https://app.example.com/cb", registered)).toBe(true);
    expect(redirectUriRegistered("https://app.example.com/cb/evil", registered)).toBe(false);
    expect(redirectUriRegistered("https://APP.example.com/cb", registered)).toBe(false);
    expect(redirectUriRegistered("https://app.example.com/cb?x=1", registered)).toBe(false);
    expect(redirectUriRegistered(OOB_REDIRECT, registered)).toBe(true);
  });
  it("adds the answer to the query or the fragment", () => {
    expect(withAnswer("https://a.example/cb", { code: "c", state: "s t" }, "query")).toBe(
      "https://a.example/cb?code=c&state=s+t",
    );
    expect(withAnswer("https://a.example/cb?x=1", { code: "c" }, "query")).toBe(
      "https://a.example/cb?x=1&code=c",
    );
    expect(withAnswer("https://a.example/cb", { access_token: "t" }, "fragment")).toBe(
      "https://a.example/cb#access_token=t",
    );
  });
  it("knows the origin of web URIs only", () => {
    expect(originOf("https://a.example:8443/cb")).toBe("https://a.example:8443");
    expect(originOf("my-app://auth")).toBeUndefined();
  });
});
