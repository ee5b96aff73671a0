import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.js";

describe("loadConfig", () => {
  it("uses the documented defaults", () => {
    const c = loadConfig([], {}, "/srv/portico");
    expect(c).toMatchObject({
      port: 7080,
      host: "127.0.0.1",
      publicUrl: undefined,
      contextPath: "",
      dataDir: "/srv/portico/data",
      databaseUrl: undefined,
      databaseQueryTimeoutSeconds: 60,
      outboundAllow: [],
      trustProxy: false,
      requestTimeoutSeconds: 300,
      headersTimeoutSeconds: 30,
      preAuthBodyBudgetMB: 128,
      preAuthUploadBudgetMB: 1024,
    });
  });

  it("lets flags win over environment variables", () => {
    const c = loadConfig(["--port", "9000", "--context-path", "portal/"], { PORTICO_PORT: "8000" }, "/");
    expect(c.port).toBe(9000);
    expect(c.contextPath).toBe("/portal");
  });

  it("normalises the public URL and parses CIDR lists", () => {
    const c = loadConfig([], {
      PORTICO_PUBLIC_URL: "https://gis.example.com/",
      PORTICO_OUTBOUND_ALLOW: "10.0.0.0/8, 127.0.0.1",
      PORTICO_TRUST_PROXY: "127.0.0.1",
    });
    expect(c.publicUrl).toBe("https://gis.example.com");
    expect(c.outboundAllow).toEqual(["10.0.0.0/8", "127.0.0.1"]);
    expect(c.trustProxy).toEqual(["127.0.0.1"]);
  });

  it.each([
    [{ PORTICO_PORT: "70000" }, "PORTICO_PORT"],
    [{ PORTICO_PREAUTH_BODY_BUDGET_MB: "-1" }, "PORTICO_PREAUTH_BODY_BUDGET_MB"],
    [{ PORTICO_PREAUTH_BODY_BUDGET_MB: "65537" }, "PORTICO_PREAUTH_BODY_BUDGET_MB"],
    [{ PORTICO_PREAUTH_BODY_BUDGET_MB: "3" }, "PORTICO_PREAUTH_BODY_BUDGET_MB"],
    [{ PORTICO_PREAUTH_UPLOAD_BUDGET_MB: "-1" }, "PORTICO_PREAUTH_UPLOAD_BUDGET_MB"],
    [{ PORTICO_HOST: "bad host" }, "PORTICO_HOST"],
    [{ PORTICO_PUBLIC_URL: "not a url" }, "PORTICO_PUBLIC_URL"],
    [{ DATABASE_URL: "sqlite:///x" }, "DATABASE_URL"],
    [{ PORTICO_OUTBOUND_ALLOW: "300.0.0.0/8" }, "PORTICO_OUTBOUND_ALLOW"],
    [{ PORTICO_ADMIN_USERNAME: "admin_user" }, "PORTICO_ADMIN_PASSWORD"],
    [{ PORTICO_ADMIN_USERNAME: "admin_user", PORTICO_ADMIN_PASSWORD: "short" }, "PORTICO_ADMIN_PASSWORD"],
    [{ PORTICO_LOG_LEVEL: "loud" }, "PORTICO_LOG_LEVEL"],
    [{ PORTICO_REQUEST_TIMEOUT_SECONDS: "0" }, "PORTICO_REQUEST_TIMEOUT_SECONDS"],
    [{ PORTICO_HEADERS_TIMEOUT_SECONDS: "x" }, "PORTICO_HEADERS_TIMEOUT_SECONDS"],
    [
      { PORTICO_REQUEST_TIMEOUT_SECONDS: "10", PORTICO_HEADERS_TIMEOUT_SECONDS: "20" },
      "PORTICO_HEADERS_TIMEOUT_SECONDS",
    ],
    [{ PORTICO_DATABASE_QUERY_TIMEOUT_SECONDS: "1.5" }, "PORTICO_DATABASE_QUERY_TIMEOUT_SECONDS"],
  ])("refuses %o naming %s", (env, setting) => {
    expect(() => loadConfig([], env)).toThrow(ConfigError);
    expect(() => loadConfig([], env)).toThrow(new RegExp(`^${setting}:`));
  });

  it("refuses unknown flags", () => {
    expect(() => loadConfig(["--prot", "1"], {})).toThrow(/arguments/);
  });
});
