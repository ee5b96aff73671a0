import { describe, expect, it } from "vitest";
import { OutboundRefused } from "../outbound/guard.js";
import { describeFailure } from "./attempt.js";

describe("describeFailure", () => {
  it("gives the guard's reason for a refused destination", () => {
    expect(describeFailure(new OutboundRefused("10.0.0.1 is a private-use address"))).toBe(
      "refused: 10.0.0.1 is a private-use address",
    );
  });

  it("says timed out for the attempt's own limit and for a cut-off", () => {
    expect(
      describeFailure(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
    ).toBe("timed out");
    expect(describeFailure(new DOMException("This operation was aborted", "AbortError"))).toBe("timed out");
  });

  it("names the network error's code with its message, from the error or its cause", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 203.0.113.5:443"), {
      code: "ECONNREFUSED",
    });
    expect(describeFailure(refused)).toBe("ECONNREFUSED: connect ECONNREFUSED 203.0.113.5:443");
    const wrapped = new TypeError("fetch failed", {
      cause: Object.assign(new Error("getaddrinfo ENOTFOUND hooks.invalid"), { code: "ENOTFOUND" }),
    });
    expect(describeFailure(wrapped)).toBe("ENOTFOUND: getaddrinfo ENOTFOUND hooks.invalid");
  });

  it("falls back to the message, or the value itself", () => {
    expect(describeFailure(new Error("socket hang up"))).toBe("socket hang up");
    expect(describeFailure("odd")).toBe("odd");
  });
});
