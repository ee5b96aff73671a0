import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.js";

describe("loadConfig", () => {
  it("uses the documented defaults", () => {
    const c = loadConfig([], {}, "/srv/portico");
    expect(c).toMatchObject({
      port: 7080,
      host: "127.0.0.1",
      httpsPort: 7443,
      httpsHost: "127.0.0.1",
      tls: undefined,
      publicUrl: undefined,
      contextPath: "",
      dataDir: "/srv/portico/data",
      databaseUrl: undefined,
      databaseQueryTimeoutSeconds: 60,
      databasePoolSize: 20,
      postgis: "auto",
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
    [{ PORTICO_HTTPS_PORT: "65536" }, "PORTICO_HTTPS_PORT"],
    [{ PORTICO_HTTPS_PORT: "no" }, "PORTICO_HTTPS_PORT"],
    [{ PORTICO_HTTPS_PORT: "7080" }, "PORTICO_HTTPS_PORT"],
    [{ PORTICO_PORT: "8000", PORTICO_HTTPS_PORT: "8000" }, "PORTICO_HTTPS_PORT"],
    [{ PORTICO_HTTPS_HOST: "bad host" }, "PORTICO_HTTPS_HOST"],
    [{ PORTICO_TLS_CERT: "/etc/portico/cert.pem" }, "PORTICO_TLS_KEY"],
    [{ PORTICO_TLS_KEY: "/etc/portico/key.pem" }, "PORTICO_TLS_CERT"],
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
    [{ DATABASE_URL: "postgres://db/portico", PORTICO_POSTGIS: "yes" }, "PORTICO_POSTGIS"],
    [{ PORTICO_POSTGIS: "on" }, "PORTICO_POSTGIS"],
  ])("refuses %o naming %s", (env, setting) => {
    expect(() => loadConfig([], env)).toThrow(ConfigError);
    expect(() => loadConfig([], env)).toThrow(new RegExp(`^${setting}:`));
  });

  it("reads PORTICO_POSTGIS with PostgreSQL, and off without it", () => {
    expect(loadConfig([], { DATABASE_URL: "postgres://db/portico", PORTICO_POSTGIS: "on" }).postgis).toBe(
      "on",
    );
    expect(loadConfig(["--postgis", "off"], { DATABASE_URL: "postgres://db/portico" }).postgis).toBe("off");
    expect(loadConfig([], { PORTICO_POSTGIS: "off" }).postgis).toBe("off");
  });

  it("refuses unknown flags", () => {
    expect(() => loadConfig(["--prot", "1"], {})).toThrow(/arguments/);
  });
});

describe("HTTPS settings", () => {
  let dir: string;
  /** A certificate and its key made by openssl, and a second key of no certificate. */
  const files = { cert: "", key: "", otherKey: "", notPem: "" };

  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-config-tls-"));
    files.cert = path.join(dir, "cert.pem");
    files.key = path.join(dir, "key.pem");
    files.otherKey = path.join(dir, "other-key.pem");
    files.notPem = path.join(dir, "not.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=config-test",
        "-keyout",
        files.key,
        "-out",
        files.cert,
      ],
      { stdio: "ignore" },
    );
    execFileSync(
      "openssl",
      ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", files.otherKey],
      {
        stdio: "ignore",
      },
    );
    fs.writeFileSync(files.notPem, "hello\n");
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("turns HTTPS off with 'off', and takes any port, 0 included, and its own host", () => {
    expect(loadConfig([], { PORTICO_HTTPS_PORT: "off" }).httpsPort).toBeUndefined();
    expect(loadConfig([], { PORTICO_HTTPS_PORT: "0", PORTICO_PORT: "0" }).httpsPort).toBe(0);
    const c = loadConfig(["--https-port", "8443", "--https-host", "0.0.0.0"], { PORTICO_HOST: "::1" });
    expect(c).toMatchObject({ host: "::1", httpsPort: 8443, httpsHost: "0.0.0.0" });
    // Without a host of its own, HTTPS listens where HTTP does.
    expect(loadConfig([], { PORTICO_HOST: "::1" }).httpsHost).toBe("::1");
  });

  it("reads the certificate and key files, relative to the working directory", () => {
    const c = loadConfig([], { PORTICO_TLS_CERT: "cert.pem", PORTICO_TLS_KEY: "key.pem" }, dir);
    expect(c.tls?.certFile).toBe(files.cert);
    expect(c.tls?.keyFile).toBe(files.key);
    expect(c.tls?.cert).toBe(fs.readFileSync(files.cert, "utf8"));
    expect(c.tls?.key).toBe(fs.readFileSync(files.key, "utf8"));
  });

  it.each([
    [
      "a missing certificate file",
      { cert: "missing.pem", key: "key.pem" },
      /^PORTICO_TLS_CERT: cannot read .*missing\.pem: ENOENT/,
    ],
    [
      "a missing key file",
      { cert: "cert.pem", key: "missing.pem" },
      /^PORTICO_TLS_KEY: cannot read .*missing\.pem: ENOENT/,
    ],
    [
      "a certificate that is not PEM",
      { cert: "not.pem", key: "key.pem" },
      /^PORTICO_TLS_CERT: .*not a PEM certificate/,
    ],
    [
      "a key that is not PEM",
      { cert: "cert.pem", key: "not.pem" },
      /^PORTICO_TLS_KEY: .*not an unencrypted PEM private key/,
    ],
    [
      "the key of another certificate",
      { cert: "cert.pem", key: "other-key.pem" },
      /^PORTICO_TLS_KEY: .*not the private key of the certificate/,
    ],
    [
      "a certificate given the key as certificate",
      { cert: "key.pem", key: "key.pem" },
      /^PORTICO_TLS_CERT: /,
    ],
  ])("refuses %s, naming the setting", (_what, given, message) => {
    const env = { PORTICO_TLS_CERT: given.cert, PORTICO_TLS_KEY: given.key };
    expect(() => loadConfig([], env, dir)).toThrow(ConfigError);
    expect(() => loadConfig([], env, dir)).toThrow(message);
  });

  it("refuses a certificate while HTTPS is off", () => {
    expect(() =>
      loadConfig(
        [],
        { PORTICO_HTTPS_PORT: "off", PORTICO_TLS_CERT: "cert.pem", PORTICO_TLS_KEY: "key.pem" },
        dir,
      ),
    ).toThrow(/^PORTICO_TLS_CERT: is set but HTTPS is off/);
  });
});
