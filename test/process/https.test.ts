import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import { Agent, fetch as undiciFetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, form, startTestPortal, type TestPortal } from "../helpers/portico.js";
import {
  createProcessDatabase,
  freePort,
  MAIN,
  type Running,
  run,
  stop,
  waitUntilUp,
} from "../helpers/process.js";

/**
 * HTTPS beside HTTP, as `portico serve` runs it: the ArcGIS Maps SDK turns a portal's
 * `http://host:7080` into `https://host:7443`, so both answer, with the same application.
 */

/** fetch that trusts exactly `ca` (and nothing else: not the system's authorities). */
function trusting(ca: string) {
  const dispatcher = new Agent({ connect: { ca } });
  return {
    get: async (url: string) => {
      const res = await undiciFetch(url, { dispatcher });
      expect(res.status).toBe(200);
      return (await res.json()) as any;
    },
    post: async (url: string, params: Record<string, unknown>) => {
      const res = await undiciFetch(url, { method: "POST", body: form(params), dispatcher });
      expect(res.status).toBe(200);
      return (await res.json()) as any;
    },
    close: () => dispatcher.close(),
  };
}

/** The SHA-256 fingerprint of the certificate a TLS server presents (not checked). */
function presented(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.on("error", reject);
  });
}

/** The log line a server writes once it has started (a little after it answers). */
async function listeningLine(r: Running): Promise<string> {
  for (let waited = 0; waited < 20_000; waited += 20) {
    const line = r
      .output()
      .split("\n")
      .find((l) => l.includes("portico listening at"));
    if (line) return line;
    if (r.child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`not started: ${r.output()}`);
}

/** The HTTPS port a server on `PORTICO_HTTPS_PORT=0` took, from its start-up log line. */
async function httpsPortOf(r: Running): Promise<number> {
  const { httpsAddress } = JSON.parse(await listeningLine(r)) as { httpsAddress?: string };
  const match = /^https:\/\/127\.0\.0\.1:(\d+)$/.exec(httpsAddress ?? "");
  if (!match) throw new Error(`no HTTPS address logged: ${r.output()}`);
  return Number(match[1]);
}

/** Makes a self-signed certificate and key with openssl, for 127.0.0.1 and localhost. */
function opensslPair(dir: string, name: string): { cert: string; key: string } {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
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
      `/CN=${name}`,
      "-addext",
      "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    { stdio: "ignore" },
  );
  return { cert, key };
}

describe("HTTPS", () => {
  let dir: string;
  let database: Awaited<ReturnType<typeof createProcessDatabase>>;
  const envFor = (dataDir: string, db = database): Record<string, string> => ({
    PORTICO_DATA_DIR: dataDir,
    PORTICO_LOG_LEVEL: "info",
    PORTICO_ADMIN_USERNAME: ADMIN.username,
    PORTICO_ADMIN_PASSWORD: ADMIN.password,
    ...(db ? { DATABASE_URL: db.url } : {}),
  });

  beforeAll(async () => {
    expect(fs.existsSync(MAIN), "run `npm run build` first (npm test does)").toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-https-"));
    database = await createProcessDatabase("portico_https");
    opensslPair(dir, "a");
    opensslPair(dir, "b");
  });
  afterAll(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await database?.drop();
  });

  it("serves the same portal over HTTPS with a self-signed certificate made once, shown once, and kept", async () => {
    const dataDir = path.join(dir, "self-signed");
    // A database of its own: this test turns allSSL on, which the others' plain HTTP would meet.
    const db = await createProcessDatabase("portico_https_ssl");
    const env = { ...envFor(dataDir, db), PORTICO_HTTPS_PORT: "0" };
    const first = run({ ...env, PORTICO_PORT: String(await freePort()) });
    let client: ReturnType<typeof trusting> | undefined;
    try {
      await waitUntilUp(first);
      const certFile = path.join(dataDir, "tls", "portico.crt");
      const keyFile = path.join(dataDir, "tls", "portico.key");
      const certificate = fs.readFileSync(certFile, "utf8");
      const fingerprint = new X509Certificate(certificate).fingerprint256;
      expect(first.output()).toContain(`certificate: ${certFile}\n  SHA-256 fingerprint: ${fingerprint}\n`);
      expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
      // Not a line of the key is printed or logged.
      const keyLines = fs
        .readFileSync(keyFile, "utf8")
        .split("\n")
        .filter((l) => l && !l.startsWith("-----"));
      for (const line of keyLines) expect(first.output()).not.toContain(line);

      const httpsPort = await httpsPortOf(first);
      expect(await presented(httpsPort)).toBe(fingerprint);
      const secure = `https://127.0.0.1:${httpsPort}/sharing/rest`;

      // Without PORTICO_PUBLIC_URL the URLs handed out are the HTTPS ones, on either listener.
      const overHttp = (await (await fetch(`${first.base}/info?f=json`)).json()) as any;
      expect(overHttp.authInfo.tokenServicesUrl).toBe(`${secure}/generateToken`);
      client = trusting(certificate);
      const overHttps = await client.get(`${secure}/info?f=json`);
      expect(overHttps).toEqual(overHttp);

      // A client that trusts only the system's authorities refuses the certificate.
      await expect(undiciFetch(`${secure}/info?f=json`)).rejects.toThrow();

      // The handlers see HTTPS as HTTPS: allSSL may be turned on there (never over plain HTTP),
      // after which plain HTTP is refused and HTTPS still served.
      const signedIn = await client.post(`${secure}/generateToken`, {
        username: ADMIN.username,
        password: ADMIN.password,
        client: "requestip",
        f: "json",
      });
      const token = signedIn.token as string;
      expect(token).toBeTypeOf("string");
      expect(signedIn.ssl).toBe(false);
      const turnedOn = await client.post(`${secure}/portals/self/update`, { allSSL: true, token, f: "json" });
      expect(turnedOn.success, JSON.stringify(turnedOn)).toBe(true);
      const refused = (await (await fetch(`${first.base}/portals/self?f=json&token=${token}`)).json()) as any;
      expect(refused.error.code).toBe(403);
      expect(refused.error.message).toBe("SSL Required");
      expect((await client.get(`${secure}/portals/self?f=json&token=${token}`)).allSSL).toBe(true);
      // Both listeners close on SIGTERM, the client's idle keep-alive connection included.
      expect(await stop(first)).toBe(0);
      await client.close();
      client = undefined;

      const second = run({ ...env, PORTICO_PORT: String(await freePort()) });
      try {
        // Plain HTTP answers allSSL's error, with HTTP status 200 as every ArcGIS error.
        await waitUntilUp(second);
        const port = await httpsPortOf(second);
        expect(second.output()).not.toContain("self-signed certificate");
        expect(fs.readFileSync(certFile, "utf8")).toBe(certificate);
        expect(await presented(port)).toBe(fingerprint);
        client = trusting(certificate);
        expect((await client.get(`https://127.0.0.1:${port}/sharing/rest/info?f=json`)).owningSystemUrl).toBe(
          `https://127.0.0.1:${port}`,
        );
        expect(await stop(second)).toBe(0);
      } finally {
        if (second.child.exitCode === null) second.child.kill("SIGKILL");
      }
    } finally {
      if (first.child.exitCode === null) first.child.kill("SIGKILL");
      await client?.close();
      await db?.drop();
    }
  });

  it("serves the operator's certificate and key, and an explicit public URL wins over the HTTPS address", async () => {
    const dataDir = path.join(dir, "given");
    const pair = opensslPair(dir, "given");
    const httpPort = await freePort();
    const r = run({
      ...envFor(dataDir),
      PORTICO_PORT: String(httpPort),
      PORTICO_HTTPS_PORT: "0",
      PORTICO_TLS_CERT: pair.cert,
      PORTICO_TLS_KEY: pair.key,
      PORTICO_PUBLIC_URL: "https://gis.example.com/",
    });
    const certificate = fs.readFileSync(pair.cert, "utf8");
    const client = trusting(certificate);
    try {
      await waitUntilUp(r);
      const port = await httpsPortOf(r);
      expect(await presented(port)).toBe(new X509Certificate(certificate).fingerprint256);
      const info = await client.get(`https://127.0.0.1:${port}/sharing/rest/info?f=json`);
      expect(info.authInfo.tokenServicesUrl).toBe("https://gis.example.com/sharing/rest/generateToken");
      expect(r.output()).not.toContain("self-signed certificate");
      expect(fs.existsSync(path.join(dataDir, "tls"))).toBe(false);
      expect(await stop(r)).toBe(0);
    } finally {
      if (r.child.exitCode === null) r.child.kill("SIGKILL");
      await client.close();
    }
  });

  it("keeps the HTTP address as the public URL when HTTPS is off", async () => {
    const port = await freePort();
    const r = run({
      ...envFor(path.join(dir, "off")),
      PORTICO_PORT: String(port),
      PORTICO_HTTPS_PORT: "off",
    });
    try {
      await waitUntilUp(r);
      const info = (await (await fetch(`${r.base}/info?f=json`)).json()) as any;
      expect(info.authInfo.tokenServicesUrl).toBe(`http://127.0.0.1:${port}/sharing/rest/generateToken`);
      expect(JSON.parse(await listeningLine(r)).httpsAddress).toBeUndefined();
      expect(fs.existsSync(path.join(dir, "off", "tls"))).toBe(false);
      expect(await stop(r)).toBe(0);
    } finally {
      if (r.child.exitCode === null) r.child.kill("SIGKILL");
    }
  });

  it.each([
    [
      "a certificate without a key",
      () => ({ PORTICO_TLS_CERT: path.join(dir, "a.crt") }),
      /invalid setting PORTICO_TLS_KEY: set both/,
    ],
    [
      "a certificate file that does not exist",
      () => ({ PORTICO_TLS_CERT: path.join(dir, "missing.crt"), PORTICO_TLS_KEY: path.join(dir, "a.key") }),
      /invalid setting PORTICO_TLS_CERT: cannot read .*missing\.crt: ENOENT/,
    ],
    [
      "a key path that is a directory",
      () => ({ PORTICO_TLS_CERT: path.join(dir, "a.crt"), PORTICO_TLS_KEY: dir }),
      /invalid setting PORTICO_TLS_KEY: cannot read .*: EISDIR/,
    ],
    [
      "the key of another certificate",
      () => ({ PORTICO_TLS_CERT: path.join(dir, "a.crt"), PORTICO_TLS_KEY: path.join(dir, "b.key") }),
      /invalid setting PORTICO_TLS_KEY: .*b\.key is not the private key of the certificate in .*a\.crt/,
    ],
    [
      "an HTTPS port that is not one",
      () => ({ PORTICO_HTTPS_PORT: "secure" }),
      /invalid setting PORTICO_HTTPS_PORT/,
    ],
  ])("stops with exit status 2 on %s, naming the setting", async (_what, settings, message) => {
    const r = run({
      ...envFor(path.join(dir, "refused")),
      PORTICO_PORT: "0",
      PORTICO_HTTPS_PORT: "0",
      ...settings(),
    });
    expect(await r.exited).toBe(2);
    expect(r.output()).toMatch(message);
    expect(r.output()).not.toContain("PRIVATE KEY");
  });

  it("fails to start, naming the setting, when the HTTPS port is taken", async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      const r = run({
        ...envFor(path.join(dir, "taken")),
        PORTICO_PORT: String(await freePort()),
        PORTICO_HTTPS_PORT: String(port),
      });
      expect(await r.exited).toBe(1);
      expect(r.output()).toContain(`HTTPS cannot listen on 127.0.0.1 port ${port} (PORTICO_HTTPS_PORT)`);
      expect(r.output()).toContain("EADDRINUSE");
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});

describe("HTTPS in process: one application behind both listeners", () => {
  let portal: TestPortal;
  let certificate: string;
  let secureApi: string;
  let client: ReturnType<typeof trusting>;
  beforeAll(async () => {
    portal = await startTestPortal({
      // A short headers timeout for the slow client; the request timeout, which is also how long a
      // connection may be silent while its answer is computed, long enough for a sign-in's hash.
      env: {
        PORTICO_HTTPS_PORT: "0",
        PORTICO_HEADERS_TIMEOUT_SECONDS: "1",
        PORTICO_REQUEST_TIMEOUT_SECONDS: "20",
      },
      keepStore: true,
    });
    certificate = fs.readFileSync(path.join(portal.store.dataDir, "tls", "portico.crt"), "utf8");
    secureApi = `${portal.portico.httpsAddress}/sharing/rest`;
    client = trusting(certificate);
  });
  afterAll(async () => {
    await client?.close();
    await portal?.portico.close().catch(() => undefined);
    await portal?.store.destroy();
  });

  it("answers the same over both, through the same hooks, limits and error handling", async () => {
    expect(portal.portico.httpsAddress).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(portal.portico.publicUrl).toBe(portal.portico.httpsAddress);
    const dispatcher = new Agent({ connect: { ca: certificate } });
    try {
      const both = async (
        p: string,
        init: { method?: string; body?: string; headers?: Record<string, string> } = {},
      ) => {
        const plain = await fetch(`${portal.api}${p}`, init);
        const secure = await undiciFetch(`${secureApi}${p}`, { ...init, dispatcher });
        return { plain, secure, plainBody: await plain.json(), secureBody: await secure.json() };
      };
      const self = await both("/portals/self?f=json"); // anonymous: what a sign-in page needs
      expect(self.secureBody).toEqual(self.plainBody);
      expect((self.secureBody as any).allSSL).toBe(false);
      const notFound = await both("/no/such/thing?f=json"); // the not-found handler
      const tooLarge = await both("/info", {
        method: "POST",
        // Over the 1 MB limit of a route without one of its own: the body-limit error.
        body: `f=json&x=${"x".repeat(2_100_000)}`,
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      expect((notFound.secureBody as any).error.messageCode).toBe("GEN_0404");
      expect((tooLarge.secureBody as any).error.messageCode).toBe("GEN_0413");
      for (const c of [self, notFound, tooLarge]) {
        expect(c.secureBody).toEqual(c.plainBody);
        for (const header of ["x-content-type-options", "referrer-policy"]) {
          expect(c.secure.headers.get(header)).toBeTruthy();
          expect(c.secure.headers.get(header)).toBe(c.plain.headers.get(header));
        }
      }
      const traced = await undiciFetch(`${secureApi}/info?f=json`, {
        dispatcher,
        headers: { "x-request-id": "tls-1" },
      });
      expect(traced.headers.get("x-request-id")).toBe("tls-1");
    } finally {
      await dispatcher.close();
    }
  });

  it("cuts a TLS client that trickles its headers, as on plain HTTP", async () => {
    const port = Number(new URL(secureApi).port);
    const cut = await new Promise<"cut">((resolve) => {
      const socket = tls.connect({ host: "127.0.0.1", port, ca: certificate }, () =>
        socket.write("POST /sharing/rest/info HTTP/1.1\r\nHost: x\r\n"),
      );
      const timer = setInterval(() => {
        if (!socket.destroyed && socket.writable) socket.write("a");
      }, 200);
      socket.on("data", () => {});
      socket.on("error", () => {});
      socket.on("close", () => {
        clearInterval(timer);
        resolve("cut");
      });
    });
    expect(cut).toBe("cut");
    // Cut by the 1 s headers timeout: the 20 s request timeout would come after this test's own.
  }, 15_000);

  it("closes both listeners on close, an idle keep-alive connection included", async () => {
    // A connection kept open by the client: close() returns only once it is gone.
    expect((await client.get(`${secureApi}/info?f=json`)).authInfo).toBeDefined();
    const port = Number(new URL(secureApi).port);
    await portal.portico.close();
    const refused = (target: number) =>
      new Promise<string>((resolve) => {
        const socket = net.connect(target, "127.0.0.1", () => {
          socket.destroy();
          resolve("connected");
        });
        socket.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
      });
    expect(await refused(port)).toBe("ECONNREFUSED");
    expect(await refused(Number(new URL(portal.api).port))).toBe("ECONNREFUSED");
  });
});
