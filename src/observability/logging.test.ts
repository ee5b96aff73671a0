import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { requestChildLogger } from "./logging.js";

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
