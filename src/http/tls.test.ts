import { execFileSync } from "node:child_process";
import { createPrivateKey, X509Certificate } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { certificateNames, loadOrCreateSelfSigned, selfSignedCertificate } from "./tls.js";

describe("selfSignedCertificate", () => {
  it("makes a certificate for the names given, signed by its own key, not a CA, for 825 days", () => {
    const now = new Date("2026-03-01T12:00:00Z");
    const { cert, key } = selfSignedCertificate(["localhost", "127.0.0.1", "::1", "gis.example.com"], {
      now,
    });
    const x509 = new X509Certificate(cert);
    expect(x509.subjectAltName).toBe(
      "DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, DNS:gis.example.com",
    );
    expect(x509.ca).toBe(false);
    expect(x509.issuer).toBe(x509.subject);
    expect(x509.verify(x509.publicKey)).toBe(true);
    expect(x509.checkPrivateKey(createPrivateKey(key))).toBe(true);
    expect(x509.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]); // extended key usage: serverAuth
    // 825 days = 365 (to 2027-03-01) + 366 (to 2028-03-01, over 29 February) + 94 (31 + 30 + 31
    // + 2: to 3 June); valid from an hour before now.
    expect(new Date(x509.validTo).toISOString()).toBe("2028-06-03T12:00:00.000Z");
    expect(new Date(x509.validFrom).toISOString()).toBe("2026-03-01T11:00:00.000Z");
  });

  it("writes dates from 2050 on as GeneralizedTime, which OpenSSL reads back", () => {
    const { cert } = selfSignedCertificate(["localhost"], {
      now: new Date("2049-12-01T00:00:00Z"),
      days: 60,
    });
    expect(new Date(new X509Certificate(cert).validTo).toISOString()).toBe("2050-01-30T00:00:00.000Z");
  });

  it("gives every certificate another serial number", () => {
    const serial = () => new X509Certificate(selfSignedCertificate(["localhost"]).cert).serialNumber;
    expect(serial()).not.toBe(serial());
  });

  it("passes OpenSSL's strict verification as its own trust anchor, for a server", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-tls-verify-"));
    try {
      const file = path.join(dir, "cert.pem");
      fs.writeFileSync(file, selfSignedCertificate(["localhost", "127.0.0.1"]).cert);
      const out = execFileSync("openssl", [
        "verify",
        "-x509_strict",
        "-purpose",
        "sslserver",
        "-CAfile",
        file,
        file,
      ]).toString();
      expect(out.trim()).toBe(`${file}: OK`);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("certificateNames", () => {
  it("names loopback, this machine, a particular listening host and the public URL's host, once each", () => {
    const names = certificateNames({
      httpsHost: "192.168.10.5",
      publicUrl: "https://GIS.example.com:7443/portal",
    });
    expect(names).toEqual([
      ...new Set([
        "localhost",
        "127.0.0.1",
        "::1",
        os.hostname().toLowerCase(),
        "192.168.10.5",
        "gis.example.com",
      ]),
    ]);
  });

  it("leaves out wildcard addresses", () => {
    expect(certificateNames({ httpsHost: "0.0.0.0", publicUrl: undefined })).not.toContain("0.0.0.0");
    expect(certificateNames({ httpsHost: "::", publicUrl: "https://[::1]:7443" })).toEqual([
      ...new Set(["localhost", "127.0.0.1", "::1", os.hostname().toLowerCase()]),
    ]);
  });
});

describe("loadOrCreateSelfSigned", () => {
  let dataDir: string;
  let dir: string;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-tls-"));
    dir = path.join(dataDir, "tls");
  });
  afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it("makes the certificate once, with a key only its owner may read, and reuses it", async () => {
    const first = await loadOrCreateSelfSigned(dir, ["localhost"]);
    expect(first.created).toBe(true);
    expect(first.certFile).toBe(path.join(dir, "portico.crt"));
    expect(fs.statSync(first.keyFile).mode & 0o777).toBe(0o600);
    expect(fs.statSync(dir).mode & 0o077).toBe(0);
    expect(first.fingerprint).toBe(new X509Certificate(fs.readFileSync(first.certFile)).fingerprint256);
    expect(first.fingerprint).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);

    const again = await loadOrCreateSelfSigned(dir, ["localhost", "other.example.com"]);
    expect(again.created).toBe(false);
    expect(again.fingerprint).toBe(first.fingerprint);
    expect(again.key).toBe(first.key);
    // Nothing of the staging directories is left beside it.
    expect(fs.readdirSync(dataDir)).toEqual(["tls"]);
  });

  it("gives starts that race one certificate", async () => {
    const all = await Promise.all([1, 2, 3].map(() => loadOrCreateSelfSigned(dir, ["localhost"])));
    expect(all.filter((c) => c.created)).toHaveLength(1);
    expect(new Set(all.map((c) => c.fingerprint)).size).toBe(1);
    const onDisk = new X509Certificate(fs.readFileSync(path.join(dir, "portico.crt")));
    expect(onDisk.checkPrivateKey(createPrivateKey(fs.readFileSync(path.join(dir, "portico.key"))))).toBe(
      true,
    );
  });

  it("makes one in an empty directory", async () => {
    fs.mkdirSync(dir);
    expect((await loadOrCreateSelfSigned(dir, ["localhost"])).created).toBe(true);
  });

  it("refuses a directory with a certificate but no key, or other files only, saying what to do", async () => {
    const made = await loadOrCreateSelfSigned(dir, ["localhost"]);
    fs.rmSync(made.keyFile);
    await expect(loadOrCreateSelfSigned(dir, ["localhost"])).rejects.toThrow(
      /has a certificate but no key; remove the directory/,
    );
    fs.rmSync(made.certFile);
    fs.writeFileSync(path.join(dir, "notes.txt"), "mine");
    await expect(loadOrCreateSelfSigned(dir, ["localhost"])).rejects.toThrow(
      /holds other files but not portico\.crt and portico\.key/,
    );
  });
});
