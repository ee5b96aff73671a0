import { getEventListeners } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { OutboundGuard, OutboundRefused } from "./guard.js";

const guard = new OutboundGuard([]);
const refused = (address: string) => guard.refusal(address) !== undefined;

describe("the outbound address guard", () => {
  it("lets public unicast addresses through", () => {
    for (const address of [
      "1.1.1.1",
      "8.8.8.8",
      "93.184.216.34",
      "100.63.255.255",
      "100.128.0.0",
      "172.32.0.1",
      "2606:4700:4700::1111",
      "2a00:1450:4001:81b::200e",
      "2001:4860:4860::8888",
      // Public IPv4 written as IPv6 the two ways that reach it.
      "::ffff:8.8.8.8",
      "::ffff:808:808",
      "64:ff9b::8.8.8.8",
      "64:ff9b::808:808",
    ]) {
      expect(guard.refusal(address), address).toBeUndefined();
    }
  });

  it("refuses every special-purpose IPv4 range", () => {
    for (const address of [
      "0.0.0.0",
      "0.1.2.3",
      "10.0.0.1",
      "100.64.0.1",
      "127.0.0.1",
      "127.255.255.254",
      "169.254.169.254",
      "172.16.0.1",
      "172.31.255.255",
      "192.0.0.8",
      "192.0.2.1",
      "192.31.196.1",
      "192.52.193.1",
      "192.88.99.1",
      "192.168.1.1",
      "192.175.48.1",
      "198.18.0.1",
      "198.51.100.1",
      "203.0.113.1",
      "224.0.0.1",
      "239.255.255.250",
      "240.0.0.1",
      "255.255.255.255",
    ]) {
      expect(refused(address), address).toBe(true);
    }
  });

  it("refuses loopback, unspecified, link-local, site-local, unique-local and multicast IPv6", () => {
    for (const address of [
      "::",
      "::1",
      "fe80::1",
      "fe80::1%eth0",
      "febf:ffff::1",
      "fec0::1",
      "feff::1",
      "fc00::1",
      "fd12:3456:789a::1",
      "ff02::1",
      "ff0e::1",
    ]) {
      expect(refused(address), address).toBe(true);
    }
  });

  it("refuses IPv4-compatible addresses, in dotted and in hex form", () => {
    for (const address of [
      "::127.0.0.1",
      "::7f00:1",
      "::169.254.169.254",
      "::a9fe:a9fe",
      "::10.0.0.1",
      // Deprecated whatever the IPv4 address: not public unicast either.
      "::8.8.8.8",
      "::808:808",
    ]) {
      expect(guard.refusal(address), address).toMatch(/is an ipv4Compatible address/);
    }
  });

  it("judges an IPv4-mapped or NAT64 address by the IPv4 address it stands for", () => {
    for (const address of [
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::ffff:169.254.169.254",
      "::ffff:10.0.0.1",
      "64:ff9b::127.0.0.1",
      "64:ff9b::7f00:1",
      "64:ff9b::a9fe:a9fe",
      "64:ff9b::192.168.0.1",
    ]) {
      expect(guard.refusal(address), address).toMatch(
        /stands for (127|169\.254|10|192\.168)\.[\d.]+, an? (loopback|linkLocal|private) address/,
      );
    }
  });

  it("refuses tunnels and translations whose far end it cannot judge", () => {
    for (const address of [
      // 6to4 (embeds 8.8.8.8), Teredo, local-use NAT64, IPv4-translated.
      "2002:808:808::1",
      "2002:7f00:1::1",
      "2001:0:4136:e378:8000:63bf:3fff:fdd2",
      "64:ff9b:1::808:808",
      "::ffff:0:808:808",
    ]) {
      expect(refused(address), address).toBe(true);
    }
  });

  it("refuses documentation, benchmarking, ORCHID, discard and other IETF-reserved IPv6 ranges", () => {
    for (const address of [
      "2001:db8::1",
      "3fff::1",
      "2001:2::1",
      "2001:3::1",
      "2001:4:112::1",
      "2001:10::1",
      "2001:20::1",
      "2001:30::1",
      "2620:4f:8000::1",
      "100::1",
      "100::ffff:ffff:ffff:ffff",
      "5f00::1",
    ]) {
      expect(refused(address), address).toBe(true);
    }
  });

  it("refuses IPv6 outside 2000::/3, where no global unicast address is allocated", () => {
    for (const address of ["1::1", "400::1", "4000::1", "8000::1", "e000::1", "1::127.0.0.1"]) {
      expect(guard.refusal(address), address).toMatch(/is an (unallocated|ipv4Compatible) address/);
    }
  });

  it("names the range and the setting that would allow it", () => {
    expect(guard.refusal("169.254.169.254")).toBe(
      "169.254.169.254 is a linkLocal address; outbound calls reach only public addresses unless PORTICO_OUTBOUND_ALLOW covers it",
    );
    expect(guard.refusal("not-an-address")).toBe("not-an-address is not an IP address");
  });

  it("lets through what PORTICO_OUTBOUND_ALLOW lists, and only that", () => {
    const allowing = new OutboundGuard(["127.0.0.0/8", "fd00::/8", "10.1.2.3"]);
    expect(allowing.refusal("127.0.0.1")).toBeUndefined();
    expect(allowing.refusal("::ffff:127.0.0.1")).toBeUndefined();
    expect(allowing.refusal("64:ff9b::7f00:1")).toBeUndefined();
    expect(allowing.refusal("fd00::1")).toBeUndefined();
    expect(allowing.refusal("10.1.2.3")).toBeUndefined();
    expect(allowing.refusal("10.1.2.4")).toBeDefined();
    expect(allowing.refusal("::1")).toBeDefined();
    expect(allowing.refusal("169.254.169.254")).toBeDefined();
    // An IPv4-compatible address is no IPv4 address: an IPv4 entry does not allow it.
    expect(allowing.refusal("::127.0.0.1")).toBeDefined();
    expect(new OutboundGuard(["::7f00:1"]).refusal("::127.0.0.1")).toBeUndefined();
  });
});

describe("checkUrl", () => {
  it("refuses every way a URL can write a refused address literal", () => {
    for (const url of [
      "http://127.0.0.1/",
      "http://127.1/",
      "http://127.0.0.1./",
      "http://0x7f000001/",
      "http://0x7f.0.0.1/",
      "http://2130706433/",
      "http://0177.0.0.1/",
      "http://017700000001/",
      "http://169.254.169.254/latest/meta-data/",
      "http://0xa9fea9fe/",
      "http://0/",
      "http://[::1]/",
      "http://[::]/",
      "http://[::127.0.0.1]/",
      "http://[::169.254.169.254]/",
      "http://[::ffff:127.0.0.1]:8080/",
      "http://[::ffff:a9fe:a9fe]/",
      "http://[64:ff9b::127.0.0.1]/",
      "http://[fec0::1]/",
      "http://[100::1]/",
      "http://[fe80::1]/",
      "http://[fd00::1]/",
      "http://[2002:7f00:1::1]/",
      "https://\u2460\u2461\u2466.0.0.1/",
    ]) {
      expect(() => guard.checkUrl(url), url).toThrow(OutboundRefused);
    }
  });

  it("accepts public literals and names, which are checked again once resolved", () => {
    for (const url of ["https://8.8.8.8/hook", "https://[2606:4700::1111]/", "https://hooks.example.com/x"]) {
      expect(guard.checkUrl(url).href).toBe(new URL(url).href);
    }
  });

  it("refuses what is not an http(s) URL without credentials", () => {
    for (const url of ["ftp://8.8.8.8/", "file:///etc/passwd", "http://user:pw@8.8.8.8/", "nonsense"]) {
      expect(() => guard.checkUrl(url), url).toThrow(OutboundRefused);
    }
  });
});

describe("post", () => {
  const guards: OutboundGuard[] = [];
  afterEach(async () => {
    await Promise.all(guards.splice(0).map((g) => g.close()));
  });
  const post = (g: OutboundGuard, url: string) =>
    g.post(url, {
      headers: {},
      body: "{}",
      connectTimeoutMs: 2000,
      totalTimeoutMs: 4000,
      maxResponseBytes: 16,
    });

  it("refuses a name that resolves only to refused addresses, before connecting", async () => {
    const g = new OutboundGuard([]);
    guards.push(g);
    await expect(post(g, "http://localhost:9/")).rejects.toThrow(/localhost resolves to .*loopback/);
  });

  /** A receiver on loopback that reads requests and answers none. */
  const silentReceiver = async () => {
    const server = http.createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
      close: () => {
        server.closeAllConnections();
        return new Promise((resolve) => server.close(resolve));
      },
    };
  };

  it("ends an exchange without an answer at its total timeout, as a timeout", async () => {
    const g = new OutboundGuard(["127.0.0.1/32"]);
    guards.push(g);
    const receiver = await silentReceiver();
    try {
      const failure = await g
        .post(receiver.url, {
          headers: {},
          body: "{}",
          connectTimeoutMs: 2000,
          totalTimeoutMs: 200,
          maxResponseBytes: 16,
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(failure).toMatchObject({ name: "TimeoutError" });
    } finally {
      await receiver.close();
    }
  });

  it("ends an exchange when the caller's signal aborts, with its reason, and lets go of the signal", async () => {
    const g = new OutboundGuard(["127.0.0.1/32"]);
    guards.push(g);
    const receiver = await silentReceiver();
    try {
      const caller = new AbortController();
      const options = {
        headers: {},
        body: "{}",
        connectTimeoutMs: 2000,
        totalTimeoutMs: 10_000,
        maxResponseBytes: 16,
      };
      const exchange = g.post(receiver.url, { ...options, signal: caller.signal }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
      const reason = new Error("shutting down");
      caller.abort(reason);
      expect(await exchange).toBe(reason);
      expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
      // Already aborted: refused before anything is sent.
      expect(
        await g.post(receiver.url, { ...options, signal: caller.signal }).catch((err: unknown) => err),
      ).toBe(reason);
    } finally {
      await receiver.close();
    }
  });

  it("ends an exchange whose answer has begun with the caller's reason, whatever that reason is", async () => {
    const g = new OutboundGuard(["127.0.0.1/32"]);
    guards.push(g);
    let started!: () => void;
    const answering = new Promise<void>((resolve) => {
      started = resolve;
    });
    // Headers and part of a body, then nothing: the exchange is under way when the caller aborts.
    const server = http.createServer((_req, res) => {
      res.writeHead(200);
      res.write("partial", () => started());
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const caller = new AbortController();
      const exchange = g
        .post(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
          headers: {},
          body: "{}",
          connectTimeoutMs: 2000,
          totalTimeoutMs: 10_000,
          maxResponseBytes: 64,
          signal: caller.signal,
        })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      await answering;
      caller.abort("shutting down");
      expect(await exchange).toBe("shutting down");
      expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("reads an answer up to its cap, with its status and headers, and a short one whole", async () => {
    const g = new OutboundGuard(["127.0.0.1/32"]);
    guards.push(g);
    const server = http.createServer((req, res) => {
      const long = req.url === "/long";
      res.writeHead(long ? 503 : 200, { "retry-after": "7", "x-twice": ["a", "b"] });
      // The long answer is written in many chunks, more than the cap and the socket's buffers.
      if (long) for (let i = 0; i < 64; i++) res.write("é".repeat(4096));
      res.end(long ? "" : "short");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const options = { headers: {}, body: "{}", connectTimeoutMs: 2000, totalTimeoutMs: 4000 };
      const long = await g.post(`${origin}/long`, { ...options, maxResponseBytes: 16 });
      expect(long.status).toBe(503);
      expect(long.headers["retry-after"]).toBe("7");
      expect(long.headers["x-twice"]).toEqual(["a", "b"]);
      expect(long.excerpt).toBe("é".repeat(8));
      // The same URL again (its check remembered), and a short answer read to its end.
      const short = await g.post(`${origin}/short`, { ...options, maxResponseBytes: 16 });
      expect(short).toMatchObject({ status: 200, excerpt: "short" });
      expect((await g.post(`${origin}/long`, { ...options, maxResponseBytes: 3 })).excerpt).toBe("é\uFFFD");
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("refuses a hex or IPv4-compatible literal at connection time too", async () => {
    const g = new OutboundGuard([]);
    guards.push(g);
    await expect(post(g, "http://0x7f000001:9/")).rejects.toBeInstanceOf(OutboundRefused);
    await expect(post(g, "http://[::127.0.0.1]:9/")).rejects.toBeInstanceOf(OutboundRefused);
  });
});
