import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findInvalidRows } from "../../helpers/invariants.js";
import { engine, startTestPortal, type TestPortal } from "../../helpers/portico.js";
import { type Receiver, startReceiver } from "../../helpers/receiver.js";
import { areaRoutes, type FuzzArea } from "./areas.js";
import { FuzzFixtures } from "./fixtures.js";
import { buildRequest, type Request } from "./requests.js";
import { hash, Rng, SEED } from "./values.js";

/**
 * Fuzzes every operation of the server, one area of routes per test file (`areas.ts`; a new route
 * is fuzzed without touching the tests): each route, at each of its paths, with each of its
 * methods, gets requests with random, malformed and oversized parameters: bad JSON, wrong types,
 * huge strings, unicode, injection-looking text, unknown and real ids, duplicated and unknown
 * parameters, broken bodies. Valid-looking values (real fixture ids, values the route's own specs
 * accept) are mixed in so that requests also reach the services and the database.
 *
 * Every answer must be a success or the error envelope, never a 5xx status or an error of code
 * 500; after each route the database must hold no invalid row (`helpers/invariants.ts`), and the
 * rule broken is reported against the route whose requests broke it. Failures are collected and
 * reported per route, each with the request as sent (method, URL, caller, every parameter).
 *
 * Reproducible: a seeded PRNG makes every choice (`PORTICO_FUZZ_SEED`, printed at the start; a
 * fixed default for CI), each route and round drawing from its own stream (seed, route name,
 * round), so the same kinds of values go to the same routes in every run; ids are the fixtures'
 * of that run. Callers and fixtures that requests destroy are put back before the next route.
 *
 * `PORTICO_FUZZ_VERBOSE=1` prints how each route answered (successes, error codes), to see how deep
 * the requests reach.
 */

/**
 * Rounds over the area's routes: each round draws new values, and finds what the earlier rounds'
 * writes left (items with odd files, new groups and services) for its reads.
 */
const ROUNDS = 3;
/** Requests per path and method in each round. */
const CASES = 6;
/** Operations that take a password hash it or verify it (scrypt, a few hundred ms): fewer cases. */
const EXPENSIVE_CASES = 2;

/** Why an answer is not acceptable, or undefined when it is. */
function judge(request: Request, res: Response, text: string): string | undefined {
  // Node's HTTP parser refuses a request line and headers over 16 KiB before any of portico runs;
  // clients send long requests as POST.
  if (res.status === 431 && request.url.length > 15_000) return undefined;
  return problemOf(res, text);
}

function problemOf(res: Response, text: string): string | undefined {
  if (res.status >= 500) return `HTTP ${res.status}: ${text.slice(0, 300)}`;
  const type = res.headers.get("content-type") ?? "";
  // Files (item data, invitation files) are served as they are; `nosniff` marks them.
  const file = res.headers.get("x-content-type-options") === "nosniff";
  if (type.startsWith("application/json") && !file) {
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      return `unparsable JSON answer: ${text.slice(0, 200)}`;
    }
    const error = body?.error;
    if (error !== undefined) {
      if (typeof error !== "object" || error === null || typeof error.code !== "number") {
        return `not the error envelope: HTTP ${res.status} ${text.slice(0, 300)}`;
      }
      if (error.code === 500) return `internal error: ${text.slice(0, 300)}`;
      if (typeof error.message !== "string" || error.message === "")
        return `error without a message: ${text}`;
    }
  } else if (type.startsWith("text/html") && /&quot;code&quot;: 500,/.test(text)) {
    return `internal error in an HTML answer: ${text.slice(0, 300)}`;
  }
  return undefined;
}

/** How a route answered, for PORTICO_FUZZ_VERBOSE=1: `success`, the HTTP status, or the error's code. */
function outcomeOf(res: Response, text: string): string {
  if (res.status !== 200) return `HTTP ${res.status}`;
  try {
    const error = JSON.parse(text)?.error;
    return error ? `${error.code} ${error.messageCode ?? ""}` : "success";
  } catch {
    return "success";
  }
}

/**
 * Fuzzes the routes of an area (`areas.ts`) against a portal of their own, with the fixtures they
 * need, in `ROUNDS` rounds. Each area's test file calls this once.
 */
export function fuzzArea(area: FuzzArea): void {
  const routes = areaRoutes(area);
  describe(`fuzz the ${area} routes (${engine}, seed ${SEED})`, () => {
    let portal: TestPortal;
    let receiver: Receiver;
    let fixtures: FuzzFixtures;
    let started = 0;
    const timing = { fixtures: 0, requests: 0, invariants: 0 };
    let requests = 0;
    /** Transactions begun (every write is one), and how many there were at the last invariant check. */
    let writes = 0;
    let checkedAtWrites = -1;
    /** Rules already broken, so each route is blamed only for what its own requests broke. */
    let knownInvalid = new Set<string>();
    /** Outcomes per route (`success`, or the error's messageCode), printed with PORTICO_FUZZ_VERBOSE=1. */
    const outcomes = new Map<string, Map<string, number>>();

    async function send(routeName: string, request: Request): Promise<string | undefined> {
      requests++;
      try {
        const res = await fetch(request.url, {
          method: request.method,
          headers: request.headers,
          ...(request.body !== undefined ? { body: request.body } : {}),
        });
        const text = await res.text();
        const counts = outcomes.get(routeName) ?? new Map<string, number>();
        const outcome = outcomeOf(res, text);
        counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
        outcomes.set(routeName, counts);
        return judge(request, res, text);
      } catch (err) {
        return `no answer: ${(err as Error).message} ${(err as { cause?: Error }).cause?.message ?? ""}`;
      }
    }

    beforeAll(async () => {
      console.log(`fuzz: seed ${SEED} (set PORTICO_FUZZ_SEED=${SEED} to repeat this run), ${ROUNDS} rounds`);
      started = Date.now();
      receiver = await startReceiver();
      // Loopback is allowed to this host only, for the fixture webhook's receiver.
      portal = await startTestPortal({ env: { PORTICO_OUTBOUND_ALLOW: "127.0.0.1/32" } });
      const db = portal.portico.db;
      const transaction = db.transaction.bind(db);
      db.transaction = ((work, options) => {
        writes++;
        return transaction(work, options);
      }) as typeof db.transaction;
      fixtures = await FuzzFixtures.create(portal, receiver.url, () => writes);
      knownInvalid = new Set(await findInvalidRows(portal.portico.db));
      expect([...knownInvalid]).toEqual([]);
    }, 60_000);

    afterAll(async () => {
      console.log(
        `fuzz: ${requests} requests to the ${area} routes in ${((Date.now() - started) / 1000).toFixed(1)} s (${engine})`,
      );
      console.log(
        `fuzz: ${Object.entries(timing)
          .map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`)
          .join(", ")}`,
      );
      if (process.env.PORTICO_FUZZ_VERBOSE === "1") {
        for (const [name, counts] of outcomes) {
          console.log(`fuzz: ${name}: ${[...counts].map(([o, n]) => `${o} ${n}`).join(", ")}`);
        }
      }
      await portal?.stop();
      await receiver?.close();
    });

    // Rounds run over all the area's routes in turn, so that what one round's writes made (items
    // with odd files, groups, services) is there for the next round's reads.
    for (let round = 0; round < ROUNDS; round++) {
      describe(`round ${round + 1} of ${ROUNDS}`, () => {
        for (const route of routes) {
          it(`${route.name} answers every fuzzed request with a success or the error envelope`, async () => {
            let t = performance.now();
            await fixtures.ensure();
            timing.fixtures += performance.now() - t;
            t = performance.now();
            const failures: string[] = [];
            const paths = typeof route.path === "string" ? [route.path] : [...route.path];
            const expensive = Object.keys(route.params).some((name) => /password/i.test(name));
            const rng = new Rng((SEED ^ hash(route.name)) + round * 0x9e3779b9);
            for (const path of paths) {
              for (const method of route.methods) {
                for (let i = 0; i < (expensive ? EXPENSIVE_CASES : CASES); i++) {
                  const request = buildRequest(fixtures, route, path, method, rng);
                  const problem = await send(route.name, request);
                  if (problem) failures.push(`case ${i}: ${request.summary}\n    -> ${problem}`);
                }
              }
            }
            timing.requests += performance.now() - t;
            // Checked again only when something was written since the last check (the final test
            // checks everything regardless).
            if (writes !== checkedAtWrites) {
              checkedAtWrites = writes;
              t = performance.now();
              const invalid = await findInvalidRows(portal.portico.db);
              timing.invariants += performance.now() - t;
              const fresh = invalid.filter((v) => !knownInvalid.has(v));
              knownInvalid = new Set(invalid);
              for (const v of fresh) failures.push(`invalid row after ${route.name}: ${v}`);
            }
            if (failures.length > 0) expect.fail(`${failures.length} failure(s):\n${failures.join("\n")}`);
          });
        }
      });
    }

    it("leaves no invalid row in the database", async () => {
      // Background work (webhook deliveries, the dispatcher) has had the whole run to write too.
      expect(await findInvalidRows(portal.portico.db)).toEqual([]);
    });
  });
}
