import { describe, expect, it } from "vitest";
import { redactUrl } from "./redact.js";

describe("redactUrl", () => {
  it("leaves a URL without secrets as it is", () => {
    for (const url of [
      "/sharing/rest/info",
      "/sharing/rest/info?",
      "/sharing/rest/search?q=title%3Aroads&num=10&f=json",
      "/sharing/rest/search?q=tokens&f=json&tokenish=1&mytoken=2",
      "/sharing/rest/info?token",
      "/sharing/rest/info?f=json&&",
    ]) {
      expect(redactUrl(url)).toBe(url);
    }
  });

  it("redacts the value of every secret parameter, whatever its position", () => {
    expect(redactUrl("/a?token=abc")).toBe("/a?token=[REDACTED]");
    expect(redactUrl("/a?f=json&token=abc&num=2")).toBe("/a?f=json&token=[REDACTED]&num=2");
    expect(redactUrl("/a?token=abc&token=def")).toBe("/a?token=[REDACTED]&token=[REDACTED]");
    expect(redactUrl("/a?token=")).toBe("/a?token=[REDACTED]");
    expect(redactUrl("/a?token=a=b=c&f=json")).toBe("/a?token=[REDACTED]&f=json");
  });

  it("knows the names that carry credentials in ArcGIS and OAuth requests", () => {
    for (const name of [
      "token",
      "auth_token",
      "access_token",
      "refresh_token",
      "serverToken",
      "password",
      "oldPassword",
      "newPassword",
      "securityAnswer",
      "secret",
      "client_secret",
      "code",
      "apiKey",
    ]) {
      expect(redactUrl(`/a?f=json&${name}=s3cr3t`), name).toBe(`/a?f=json&${name}=[REDACTED]`);
    }
  });

  it("compares names decoded and case-insensitively, keeping the name as it was sent", () => {
    expect(redactUrl("/a?%74oken=s3cr3t")).toBe("/a?%74oken=[REDACTED]");
    expect(redactUrl("/a?%74%6F%6B%65%6E=s3cr3t")).toBe("/a?%74%6F%6B%65%6E=[REDACTED]");
    expect(redactUrl("/a?%74%6f%6b%65%6e=s3cr3t")).toBe("/a?%74%6f%6b%65%6e=[REDACTED]");
    expect(redactUrl("/a?TOKEN=s3cr3t")).toBe("/a?TOKEN=[REDACTED]");
    expect(redactUrl("/a?Auth%5FToken=s3cr3t")).toBe("/a?Auth%5FToken=[REDACTED]");
    expect(redactUrl("/a?client%5fsecret=s3cr3t")).toBe("/a?client%5fsecret=[REDACTED]");
    expect(redactUrl("/a?pass%77ord=s3cr3t&f=json")).toBe("/a?pass%77ord=[REDACTED]&f=json");
  });

  it("redacts a secret name even when the rest of the query is not valid percent-encoding", () => {
    expect(redactUrl("/a?q=%E0%A4%A&%74oken=s3cr3t")).toBe("/a?q=%E0%A4%A&%74oken=[REDACTED]");
    expect(redactUrl("/a?token=%ZZs3cr3t")).toBe("/a?token=[REDACTED]");
  });

  it("does not take a name that only decodes to a secret name twice, or with other bytes, for one", () => {
    // The server decodes once: `%2574oken` is the parameter `%74oken`, which is not a token.
    expect(redactUrl("/a?%2574oken=x")).toBe("/a?%2574oken=x");
    expect(redactUrl("/a?token%00=x")).toBe("/a?token%00=x");
    expect(redactUrl("/a?to+ken=x")).toBe("/a?to+ken=x");
  });

  it("keeps a question mark inside the query and the path untouched", () => {
    expect(redactUrl("/a/b?c?token=x&token=y")).toBe("/a/b?c?token=x&token=[REDACTED]");
    expect(redactUrl("/content/items/token=abc/data?f=json")).toBe("/content/items/token=abc/data?f=json");
  });
});
