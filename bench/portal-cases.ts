import type { LoadCase } from "./load.js";
import type { Engine } from "./stores.js";

/** The read and write cases, shared by the single-node load section and the multi-node case. */

export const READ_PATH = "/sharing/rest/portals/self";
export const WRITE_PATH = "/sharing/rest/portals/self/updateUserRole";

/** The signed-in `portals/self` view; checked cheaply so the verifier does not slow the client. */
export function isSignedInPortal(body: string): boolean {
  return body.startsWith('{"id":') && body.includes('"user":{');
}

/** @param how how the portal was started, when not as the bench starts it (`npm start`). */
export function readCase(engine: Engine, origin: string, token: string, how?: string): LoadCase {
  return {
    name: `portals/self GET${how ? `, ${how}` : ""} [${engine.name}]`,
    url: `${origin}${READ_PATH}?${new URLSearchParams({ f: "json", token })}`,
    verify: isSignedInPortal,
  };
}

/**
 * Role changes rotating over the user pool. Users start as org_user and each pass over the pool
 * flips every role, so each request commits a real change (and its event) rather than a no-op.
 * With fewer connections than users, no two requests in flight name the same user.
 */
export function writeCase(engine: Engine, origin: string, token: string, users: string[]): LoadCase {
  let sent = 0;
  return {
    name: `updateUserRole POST [${engine.name}]`,
    url: `${origin}${WRITE_PATH}`,
    requests: [
      {
        method: "POST",
        path: WRITE_PATH,
        headers: { "content-type": "application/x-www-form-urlencoded" },
        setupRequest: (request) => {
          const i = sent++;
          const user = users[i % users.length]!;
          const role = Math.floor(i / users.length) % 2 === 0 ? "org_publisher" : "org_user";
          return { ...request, body: new URLSearchParams({ user, role, f: "json", token }).toString() };
        },
      },
    ],
    verify: (body) => {
      try {
        return JSON.parse(body).success === true;
      } catch {
        return false;
      }
    },
  };
}
