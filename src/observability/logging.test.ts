import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { AccessLog, BatchedOutput, loggedRequest, requestChildLogger } from "./logging.js";

function capture(level = "info") {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level },
    new Writable({
      write(chunk, _enc, done) {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  );
  return { lines, logger };
}

describe("request loggers", () => {
  it("bind the request id to every line, and to their children's", () => {
    const { lines, logger } = capture();
    const log = requestChildLogger(logger, { reqId: "r-1" }, {});
    log.info("first");
    log.error({ detail: 1 }, "second");
    log.child({ part: "x" }).warn("third");
    expect(lines.map((l) => [l.msg, l.reqId, l.level])).toEqual([
      ["first", "r-1", 30],
      ["second", "r-1", 50],
      ["third", "r-1", 40],
    ]);
    expect(lines[1]?.detail).toBe(1);
    expect(lines[2]?.part).toBe("x");
  });

  it("write nothing below the level, and take the level they are given", () => {
    const { lines, logger } = capture("warn");
    const log = requestChildLogger(logger, { reqId: "r-2" }, {});
    expect(log.level).toBe("warn");
    log.info("dropped");
    log.debug("dropped");
    expect(lines).toHaveLength(0);
    log.level = "debug";
    log.debug("kept");
    expect(lines.map((l) => [l.msg, l.reqId])).toEqual([["kept", "r-2"]]);
    const quiet = requestChildLogger(logger, { reqId: "r-3" }, { level: "error" });
    expect(quiet.level).toBe("error");
    quiet.warn("dropped");
    expect(lines).toHaveLength(1);
  });

  it("carry their own id once, and a line naming another keeps that one", () => {
    const { lines, logger } = capture();
    requestChildLogger(logger, { reqId: "inner" }, {}).info("line");
    logger.info({ reqId: "named" }, "named line");
    logger.info("background");
    expect(lines.map((l) => [l.msg, l.reqId])).toEqual([
      ["line", "inner"],
      ["named line", "named"],
      ["background", undefined],
    ]);
    expect(lines.slice(0, 2).map((l) => JSON.stringify(l).match(/"reqId"/g)?.length)).toEqual([1, 1]);
  });
});

describe("the access line", () => {
  // The parts of a request and a reply the line reads; Fastify's own objects in a served request.
  function served(logger: pino.Logger, url: string, elapsedTime: number) {
    const request = { id: "req-1", method: "GET", url, ip: "10.0.0.9", server: { log: logger } };
    const reply = { statusCode: 200, elapsedTime };
    return [request as unknown as FastifyRequest, reply as unknown as FastifyReply] as const;
  }

  it("is the line pino writes for the same fields, URL secrets redacted", () => {
    // Strings that need escaping in JSON, and plain ones (quoted as they are).
    for (const [url, redacted] of [
      [
        '/a?f=json&token=s3cr3t&q="quoted" \\ é\u2028\u0001',
        '/a?f=json&token=[REDACTED]&q="quoted" \\ é\u2028\u0001',
      ],
      [
        "/sharing/rest/portals/self?f=json&token=s3cr3t",
        "/sharing/rest/portals/self?f=json&token=[REDACTED]",
      ],
    ]) {
      const { lines, logger } = capture();
      const [request, reply] = served(logger, url as string, 0.25);
      new AccessLog().requestCompleted(null, request, reply);
      logger.info(
        { reqId: "req-1", req: loggedRequest(request), res: { statusCode: 200 }, responseTime: 0.25 },
        "request completed",
      );
      expect(lines).toHaveLength(2);
      const [built, byPino] = lines.map(({ time, ...rest }) => ({ ...rest, time: typeof time }));
      expect(built).toEqual(byPino);
      expect(built).toMatchObject({
        level: 30,
        pid: process.pid,
        req: { method: "GET", url: redacted, remoteAddress: "10.0.0.9" },
        time: "number",
      });
    }
  });

  it("is not written, and nothing throws, when the server logs nothing (logger: false)", async () => {
    const app = Fastify({ logger: false });
    try {
      const request = { id: "req-1", method: "GET", url: "/a", ip: "10.0.0.9", server: app };
      const reply = { statusCode: 200, elapsedTime: 1 };
      expect(() =>
        new AccessLog().requestCompleted(
          null,
          request as unknown as FastifyRequest,
          reply as unknown as FastifyReply,
        ),
      ).not.toThrow();
    } finally {
      await app.close();
    }
  });

  it("is written only at info or below, and says null for a time it does not have", () => {
    const quiet = capture("warn");
    new AccessLog().requestCompleted(null, ...served(quiet.logger, "/a", 1));
    expect(quiet.lines).toHaveLength(0);
    const { lines, logger } = capture("debug");
    new AccessLog().requestCompleted(null, ...served(logger, "/a", Number.NaN));
    expect(lines).toHaveLength(1);
    expect(lines[0]?.responseTime).toBeNull();
  });

  it("writes the time taken in milliseconds to the microsecond", () => {
    const { lines, logger } = capture();
    for (const ms of [1234.56789, 0.0004, 0.0396, 7]) {
      new AccessLog().requestCompleted(null, ...served(logger, "/a", ms));
    }
    expect(lines.map((l) => l.responseTime)).toEqual([1234.568, 0, 0.04, 7]);
  });

  it("has no address, as pino writes it, for a request whose socket is gone", () => {
    const { lines, logger } = capture();
    const [request, reply] = served(logger, "/a", 0.25);
    (request as { ip: string | undefined }).ip = undefined;
    new AccessLog().requestCompleted(null, request, reply);
    logger.info(
      { reqId: "req-1", req: loggedRequest(request), res: { statusCode: 200 }, responseTime: 0.25 },
      "request completed",
    );
    const [built, byPino] = lines.map(({ time, ...rest }) => rest);
    expect(built).toEqual(byPino);
    expect(built?.req).toStrictEqual({ method: "GET", url: "/a" });
  });
});

describe("batched standard output", () => {
  function file() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-log-"));
    const name = path.join(dir, "out.log");
    const fd = fs.openSync(name, "w");
    return {
      fd,
      text: () => fs.readFileSync(name, "utf8"),
      done: () => {
        fs.closeSync(fd);
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const settled = async (read: () => string, expected: string) => {
    for (let i = 0; i < 200 && read() !== expected; i++) await new Promise((r) => setTimeout(r, 5));
    return read();
  };

  it("writes the lines it holds together, in order, shortly after", async () => {
    const out = file();
    try {
      const dest = new BatchedOutput(out.fd);
      dest.write("one\n");
      dest.write("two\n");
      dest.write("three\n");
      expect(out.text()).toBe("");
      expect(await settled(out.text, "one\ntwo\nthree\n")).toBe("one\ntwo\nthree\n");
      dest.write("four\n");
      expect(await settled(out.text, "one\ntwo\nthree\nfour\n")).toBe("one\ntwo\nthree\nfour\n");
    } finally {
      out.done();
    }
  });

  it("writes to a pipe the lines of each turn together, in order", async () => {
    // A pipe can wait on its reader: it gets the asynchronous writes (a file gets synchronous ones).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "portico-log-"));
    const fifo = path.join(dir, "pipe");
    execFileSync("mkfifo", [fifo]);
    const reader = spawn("cat", [fifo], { stdio: ["ignore", "pipe", "inherit"] });
    let text = "";
    reader.stdout.on("data", (chunk) => {
      text += String(chunk);
    });
    // Opening a pipe to write waits for its reader: `cat` above.
    const fd = fs.openSync(fifo, "w");
    try {
      expect(fs.fstatSync(fd).isFIFO()).toBe(true);
      const dest = new BatchedOutput(fd);
      for (let i = 0; i < 1000; i++) dest.write(`line ${i}\n`);
      await new Promise((resolve) => setImmediate(resolve));
      dest.write("after\n");
      const expected = `${Array.from({ length: 1000 }, (_, i) => `line ${i}\n`).join("")}after\n`;
      expect(await settled(() => text, expected)).toBe(expected);
    } finally {
      fs.closeSync(fd);
      reader.kill();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("writes to a file at once, together and in order, once 64 KB are held", () => {
    const out = file();
    try {
      const dest = new BatchedOutput(out.fd);
      const line = `${"x".repeat(1023)}\n`;
      for (let i = 0; i < 63; i++) dest.write(line);
      expect(out.text()).toBe("");
      dest.write(line);
      expect(out.text()).toBe(line.repeat(64));
    } finally {
      out.done();
    }
  });

  it("writes what it holds synchronously when asked (at exit)", () => {
    const out = file();
    try {
      const dest = new BatchedOutput(out.fd);
      dest.write("last\n");
      dest.write("words\n");
      dest.flushSync();
      expect(out.text()).toBe("last\nwords\n");
    } finally {
      out.done();
    }
  });

  it("drops lines beyond its cap and says how many", () => {
    const out = file();
    try {
      const dest = new BatchedOutput(out.fd, 10);
      dest.write("0123456789\n");
      dest.write("dropped\n");
      dest.write("dropped too\n");
      dest.flushSync();
      const lines = out.text().trimEnd().split("\n");
      expect(lines[0]).toBe("0123456789");
      expect(JSON.parse(lines[1] ?? "{}")).toMatchObject({
        level: 40,
        msg: "2 log lines dropped: standard output did not take them",
      });
      expect(lines).toHaveLength(2);
    } finally {
      out.done();
    }
  });
});
