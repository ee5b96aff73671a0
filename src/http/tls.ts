import { generateKeyPairSync, type KeyObject, randomBytes, sign, X509Certificate } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import ipaddr from "ipaddr.js";

/**
 * The self-signed certificate portico serves HTTPS with when the operator gives none, as Portal
 * for ArcGIS does at installation: made once, kept in the data directory, shown once.
 *
 * Node can parse certificates but not make them, so this module writes the few DER structures of
 * one (RFC 5280) itself rather than pulling in an ASN.1 library for them: an EC P-256 key, signed
 * with ECDSA-SHA256, the names as subjectAltName (which is all browsers read), serverAuth as its
 * extended key usage, and CA:FALSE (Firefox refuses a CA certificate as a server's).
 */

/** 825 days: the longest validity macOS and iOS accept for a TLS server certificate. */
export const SELF_SIGNED_DAYS = 825;

export interface TlsMaterial {
  cert: string;
  key: string;
}

export interface SelfSigned extends TlsMaterial {
  certFile: string;
  keyFile: string;
  /** SHA-256 of the certificate, as browsers show it: colon-separated upper-case hex. */
  fingerprint: string;
  notAfter: Date;
  /** Whether this start made it (and should say so). */
  created: boolean;
}

/** Makes a self-signed certificate for `names` (host names and IP addresses), valid from now on. */
export function selfSignedCertificate(
  names: readonly string[],
  { now = new Date(), days = SELF_SIGNED_DAYS }: { now?: Date; days?: number } = {},
): TlsMaterial {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  // A random serial: two certificates with the same issuer name and serial (two portals, or a
  // certificate made again) make Firefox refuse the second. Positive, without a leading zero.
  const serial = randomBytes(16);
  serial[0] = ((serial[0] as number) & 0x7f) | 0x40;
  const cn = `portico on ${os.hostname()}`.slice(0, 64);
  const name = sequence(set(sequence(oid("2.5.4.3"), der(0x0c, Buffer.from(cn, "utf8")))));
  const ecdsaWithSha256 = sequence(oid("1.2.840.10045.4.3.2"));
  // An hour back: a client whose clock is a little behind must not see it "not yet valid".
  const notBefore = new Date(now.getTime() - 3600_000);
  const notAfter = new Date(now.getTime() + days * 86_400_000);
  const tbs = sequence(
    der(0xa0, der(0x02, Buffer.from([2]))), // version 3
    der(0x02, serial),
    ecdsaWithSha256,
    name,
    sequence(time(notBefore), time(notAfter)),
    name,
    publicKey.export({ type: "spki", format: "der" }),
    der(
      0xa3,
      sequence(
        extension("2.5.29.19", true, sequence()), // basicConstraints: not a CA
        extension("2.5.29.37", false, sequence(oid("1.3.6.1.5.5.7.3.1"))), // serverAuth
        extension("2.5.29.17", false, sequence(...names.map(generalName))),
      ),
    ),
  );
  const signature = sign("sha256", tbs, privateKey); // DER-encoded (r, s) for EC keys
  const cert = sequence(tbs, ecdsaWithSha256, der(0x03, Buffer.from([0]), signature));
  return { cert: pem("CERTIFICATE", cert), key: keyPem(privateKey) };
}

/**
 * The names the generated certificate is made for: loopback in every spelling a developer types,
 * this machine's name, the listening host when it is a particular one, and the public URL's host.
 */
export function certificateNames(options: { httpsHost: string; publicUrl: string | undefined }): string[] {
  const names = ["localhost", "127.0.0.1", "::1", os.hostname()];
  if (!["0.0.0.0", "::", "[::]"].includes(options.httpsHost)) names.push(options.httpsHost);
  if (options.publicUrl) names.push(new URL(options.publicUrl).hostname);
  const usable = names
    .map((n) => n.replace(/^\[|\]$/g, "").toLowerCase())
    .filter((n) => net.isIP(n) !== 0 || /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(n));
  return [...new Set(usable)];
}

/**
 * The certificate in `dir` (`portico.crt`, `portico.key`), made on the first call. It is written
 * into a directory of its own that is then renamed into place: nodes that share a data directory
 * and start together cannot mix one's key with another's certificate, and the loser of the rename
 * takes the winner's.
 */
export async function loadOrCreateSelfSigned(dir: string, names: readonly string[]): Promise<SelfSigned> {
  const certFile = path.join(dir, "portico.crt");
  const keyFile = path.join(dir, "portico.key");
  const existing = await readPair(certFile, keyFile);
  if (existing) return describe(existing, certFile, keyFile, false);

  await fs.promises.mkdir(path.dirname(dir), { recursive: true });
  const staging = await fs.promises.mkdtemp(`${dir}.new-`);
  try {
    const made = selfSignedCertificate(names);
    // Created with its final mode: the key is never readable by others, not even for a moment.
    await fs.promises.writeFile(path.join(staging, "portico.key"), made.key, { mode: 0o600, flag: "wx" });
    await fs.promises.writeFile(path.join(staging, "portico.crt"), made.cert, { mode: 0o644, flag: "wx" });
    try {
      // Replaces `dir` only when it is missing or empty.
      await fs.promises.rename(staging, dir);
      return describe(made, certFile, keyFile, true);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
    }
  } finally {
    await fs.promises.rm(staging, { recursive: true, force: true });
  }
  const theirs = await readPair(certFile, keyFile);
  if (!theirs) {
    throw new Error(
      `${dir} holds other files but not portico.crt and portico.key; move them away to let portico make a certificate there, or set PORTICO_TLS_CERT and PORTICO_TLS_KEY`,
    );
  }
  return describe(theirs, certFile, keyFile, false);
}

async function readPair(certFile: string, keyFile: string): Promise<TlsMaterial | undefined> {
  const read = (file: string) =>
    fs.promises.readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
  const [cert, key] = await Promise.all([read(certFile), read(keyFile)]);
  if (cert === undefined && key === undefined) return undefined;
  if (cert === undefined || key === undefined) {
    throw new Error(
      `${path.dirname(certFile)} has ${cert === undefined ? "a key but no certificate" : "a certificate but no key"}; remove the directory to let portico make a new certificate`,
    );
  }
  return { cert, key };
}

function describe(material: TlsMaterial, certFile: string, keyFile: string, created: boolean): SelfSigned {
  const x509 = new X509Certificate(material.cert);
  return {
    ...material,
    certFile,
    keyFile,
    fingerprint: x509.fingerprint256,
    notAfter: new Date(x509.validTo),
    created,
  };
}

// DER encoding of the few ASN.1 types a certificate needs (X.690).

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  let length: Buffer;
  if (body.length < 0x80) {
    length = Buffer.from([body.length]);
  } else {
    const bytes: number[] = [];
    for (let n = body.length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
    length = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), length, body]);
}

const sequence = (...content: Buffer[]) => der(0x30, ...content);
const set = (...content: Buffer[]) => der(0x31, ...content);

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split(".").map(Number);
  const bytes = [40 * first + second];
  for (const arc of rest) {
    const base128 = [arc & 0x7f];
    for (let n = Math.floor(arc / 128); n > 0; n = Math.floor(n / 128)) base128.unshift((n & 0x7f) | 0x80);
    bytes.push(...base128);
  }
  return der(0x06, Buffer.from(bytes));
}

/** UTCTime before 2050, GeneralizedTime from then on, as RFC 5280 requires. */
function time(date: Date): Buffer {
  const digits = `${date.toISOString().slice(0, 19).replace(/[-T:]/g, "")}Z`;
  return date.getUTCFullYear() < 2050
    ? der(0x17, Buffer.from(digits.slice(2), "ascii"))
    : der(0x18, Buffer.from(digits, "ascii"));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [der(0x01, Buffer.from([0xff]))] : []), der(0x04, value));
}

/** A subjectAltName entry: iPAddress [7] for an address, dNSName [2] otherwise. */
function generalName(name: string): Buffer {
  return net.isIP(name) !== 0
    ? der(0x87, Buffer.from(ipaddr.parse(name).toByteArray()))
    : der(0x82, Buffer.from(name, "ascii"));
}

function pem(label: string, body: Buffer): string {
  const lines = body.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

function keyPem(key: KeyObject): string {
  return key.export({ type: "pkcs8", format: "pem" }).toString();
}
