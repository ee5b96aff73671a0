import { describe, expect, it } from "vitest";
import { allRoutes } from "../../src/http/routes/index.js";
import { fuzzRoutes } from "./fuzz/harness.js";

/** Fuzzes every operation of the server (see `fuzz/harness.ts` for what is sent and checked). */

const routes = allRoutes.filter((r, i) => allRoutes.findIndex((o) => o.name === r.name) === i);

describe("the fuzzed routes", () => {
  it("cover every route", () => {
    expect(routes.length).toBe(allRoutes.length);
    expect(routes.length).toBeGreaterThan(90);
  });
});

fuzzRoutes("every operation", routes);
