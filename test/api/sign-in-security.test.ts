import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, form, startTestPortal, type TestPortal } from "../helpers/portico.js";

/**
 * Sign-in security (issue 12): tokens bound to a referer or an address, the organization's
 * security policy (password rules, expiration, history), account lockout, and the cap on
 * concurrent password hashing.
 */

/** POSTs as a client at `ip` (the portal trusts 127.0.0.1 as a proxy), with optional extra headers. */
async function postFrom(
  portal: TestPortal,
  path: string,
  params: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<any> {
  const url = path.startsWith("http") ? path : `${portal.api}${path}`;
  const res = await fetch(url, { method: "POST", body: form({ f: "json", ...params }), headers });
  expect(res.status).toBe(200);
  return res.json();
}

/** scrypt runs take seconds each when the machine's two cores are shared by several test runs. */
const SLOW = 180_000;

const fromIp = (ip: string, more: Record<string, string> = {}) => ({ "x-forwarded-for": ip, ...more });

describe("tokens bound to a referer or an address", () => {
  let portal: TestPortal;

  beforeAll(async () => {
    portal = await startTestPortal({ env: { PORTICO_TRUST_PROXY: "127.0.0.1" } });
  }, SLOW);
  afterAll(async () => {
    await portal.stop();
  }, SLOW);

  const self = (token: string, headers: Record<string, string>) =>
    postFrom(portal, "/community/self", { token }, headers);

  it(
    "accepts a referer token only from pages of the same origin under the referer's path",
    async () => {
      const { token } = await postFrom(portal, "/generateToken", {
        ...ADMIN,
        client: "referer",
        referer: "https://app.example.com/maps",
      });
      expect(typeof token).toBe("string");
      expect(await self(token, { referer: "https://app.example.com/maps/viewer.html" })).toMatchObject({
        username: ADMIN.username,
      });
      expect(await self(token, { referer: "https://app.example.com/maps" })).toMatchObject({
        username: ADMIN.username,
      });
      for (const referer of [
        "https://evil.example.com/maps/viewer.html",
        "http://app.example.com/maps/viewer.html",
        "https://app.example.com/other/",
        "https://app.example.com/mapsX",
      ]) {
        expect((await self(token, { referer })).error, referer).toMatchObject({ code: 498 });
      }
      expect((await self(token, {})).error).toMatchObject({ code: 498, messageCode: "GWM_0003" });
      // The Bearer header is held to the same rule as the token parameter.
      const bearer = await fetch(`${portal.api}/community/self?f=json`, {
        headers: { authorization: `Bearer ${token}`, referer: "https://evil.example.com/" },
      }).then((r) => r.json() as Promise<any>);
      expect(bearer.error).toMatchObject({ code: 498 });
    },
    SLOW,
  );

  it(
    "accepts an ip token only from that address, and a requestip token only from the requester's",
    async () => {
      const { token } = await postFrom(
        portal,
        "/generateToken",
        { ...ADMIN, client: "ip", ip: "10.20.30.40" },
        fromIp("10.0.0.9"),
      );
      expect(await self(token, fromIp("10.20.30.40"))).toMatchObject({ username: ADMIN.username });
      expect((await self(token, fromIp("10.20.30.41"))).error).toMatchObject({ code: 498 });
      expect((await self(token, fromIp("10.0.0.9"))).error).toMatchObject({ code: 498 });

      const own = await postFrom(
        portal,
        "/generateToken",
        { ...ADMIN, client: "requestip" },
        fromIp("10.1.1.1"),
      );
      expect(await self(own.token, fromIp("10.1.1.1"))).toMatchObject({ username: ADMIN.username });
      expect((await self(own.token, fromIp("10.1.1.2"))).error).toMatchObject({ code: 498 });
    },
    SLOW,
  );

  it(
    "compares IPv6 addresses in their canonical form",
    async () => {
      const { token } = await postFrom(portal, "/generateToken", {
        ...ADMIN,
        client: "ip",
        ip: "2001:0DB8:0000::0001",
      });
      expect(await self(token, fromIp("2001:db8::1"))).toMatchObject({ username: ADMIN.username });
      expect((await self(token, fromIp("2001:db8::2"))).error).toMatchObject({ code: 498 });
    },
    SLOW,
  );

  it(
    "holds a server-token exchange (generateToken with serverUrl) to the token's binding",
    async () => {
      const serverUrl = portal.api.replace(/\/sharing\/rest$/, "");
      const exchange = (token: string, headers: Record<string, string>) =>
        postFrom(portal, "/generateToken", { serverUrl, token }, headers);
      const own = await postFrom(
        portal,
        "/generateToken",
        { ...ADMIN, client: "requestip" },
        fromIp("10.5.5.5"),
      );
      expect((await exchange(own.token, fromIp("10.5.5.6"))).error).toMatchObject({
        code: 498,
        messageCode: "GWM_0003",
      });
      expect((await exchange(own.token, fromIp("10.5.5.5"))).token).toBe(own.token);

      const app = await postFrom(portal, "/generateToken", {
        ...ADMIN,
        client: "referer",
        referer: "https://app.example.com",
      });
      expect((await exchange(app.token, {})).error).toMatchObject({ code: 498 });
      expect((await exchange(app.token, { referer: "https://evil.example.com/" })).error).toMatchObject({
        code: 498,
      });
      expect((await exchange(app.token, { referer: "https://app.example.com/viewer" })).token).toBe(
        app.token,
      );
    },
    SLOW,
  );

  it(
    "requires the referer or address a token is to be bound to",
    async () => {
      const noReferer = await postFrom(portal, "/generateToken", { ...ADMIN, client: "referer" });
      expect(noReferer.error).toMatchObject({ code: 400, details: ["'referer' is required."] });
      const noIp = await postFrom(portal, "/generateToken", { ...ADMIN, client: "ip" });
      expect(noIp.error).toMatchObject({ code: 400, details: ["'ip' is required."] });
      const badIp = await postFrom(portal, "/generateToken", { ...ADMIN, client: "ip", ip: "example.com" });
      expect(badIp.error.details[0]).toMatch(/^'ip' must be an IPv4 or IPv6 address/);
    },
    SLOW,
  );
});

describe("the organization's security policy", () => {
  let portal: TestPortal;
  let member: { username: string; password: string; token: string };
  const portaladmin = () => portal.api.replace(/\/sharing\/rest$/, "/portaladmin");

  beforeAll(async () => {
    portal = await startTestPortal();
    member = await portal.addUser("policy_member");
  }, SLOW);
  afterAll(async () => {
    await portal.stop();
  }, SLOW);

  const update = (params: Record<string, unknown>, token = portal.adminToken) =>
    portal.post("/portals/self/securityPolicy/update", params, token);
  const createUser = (username: string, password: string) =>
    portal.post(
      `${portaladmin()}/security/users/createUser`,
      { username, password, firstname: "P", lastname: "M", email: `${username}@example.com` },
      portal.adminToken,
    );

  it(
    "answers the ArcGIS resource to members and lets only security administrators change it",
    async () => {
      expect(await portal.get("/portals/self/securityPolicy", {}, member.token)).toEqual({
        passwordPolicy: { type: "default", minLength: 8, created: -1, modified: -1 },
        lockoutPolicy: {
          maxFailedAttempts: 5,
          failedAttemptsWindowInMinutes: 15,
          lockoutDurationInMinutes: 15,
        },
      });
      expect((await portal.get("/portals/self/securityPolicy")).error).toMatchObject({ code: 499 });
      expect((await update({ minLength: 20 }, member.token)).error).toMatchObject({ code: 403 });
      expect((await portal.post("/portals/self/securityPolicy/reset", {}, member.token)).error).toMatchObject(
        {
          code: 403,
        },
      );
      expect((await update({ minLength: 7 })).error.details[0]).toMatch(/^'minLength' must be/);
      expect((await update({ historySize: 25 })).error.details[0]).toMatch(/^'historySize' must be/);
      expect((await update({ expirationInDays: 0 })).error.details[0]).toMatch(/^'expirationInDays' must be/);
    },
    SLOW,
  );

  it(
    "refuses a password breaking any rule, naming the password parameter and the rule, wherever it is set",
    async () => {
      expect(
        await update({ minLength: 10, minUpper: 1, minLower: 1, minLetter: 3, minDigit: 2, minOther: 1 }),
      ).toEqual({ success: true });
      const policy = await portal.get("/portals/self/securityPolicy", {}, portal.adminToken);
      expect(policy.passwordPolicy).toMatchObject({
        type: "custom",
        minLength: 10,
        minUpper: 1,
        minLower: 1,
        minLetter: 3,
        minDigit: 2,
        minOther: 1,
      });

      const breaking: Record<string, string> = {
        minLength: "Ab1-Ab1-9",
        minUpper: "ab12-abcdef",
        minLower: "AB12-ABCDEF",
        minLetter: "Ab123456-!!",
        minDigit: "Abc1-abcdef",
        minOther: "Abc12abcdef",
      };
      for (const [rule, password] of Object.entries(breaking)) {
        const created = await createUser(`policy_${rule.toLowerCase()}`, password);
        expect(created.error, rule).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
        expect(created.error.details[0]).toMatch(
          /^'password' does not meet the organization's password policy/,
        );
        expect(created.error.details[0]).toContain(`(${rule})`);
        // Every other rule is met: only this one is named.
        expect(created.error.details[0].match(/\(min\w+\)/g)).toEqual([`(${rule})`]);
      }
      const good = "Abc12-defgh";
      expect(await createUser("policy_good_user", good)).toMatchObject({ success: true });

      // An administrator's reset, a member's own change, and a change at sign-in.
      const reset = await portal.post(
        `/community/users/${member.username}/update`,
        { password: "weakweakweak" },
        portal.adminToken,
      );
      expect(reset.error.details[0]).toMatch(/^'password' does not meet.*\(minUpper\)/);
      const own = await portal.post(
        `/community/users/${member.username}/update`,
        { password: "weakweakweak", oldPassword: member.password },
        member.token,
      );
      expect(own.error.details[0]).toMatch(/^'password' does not meet.*\(minDigit\)/);
      const atSignIn = await portal.post("/generateToken", {
        username: "policy_good_user",
        password: good,
        client: "requestip",
        newPassword: "weakweakweak",
      });
      expect(atSignIn.error.details[0]).toMatch(/^'newPassword' does not meet.*\(minOther\)/);
      // Nothing was written: the old passwords still work.
      await portal.signIn("policy_good_user", good);
      member.token = await portal.signIn(member.username, member.password);

      expect(await portal.post("/portals/self/securityPolicy/reset", {}, portal.adminToken)).toEqual({
        success: true,
      });
      expect(
        (await portal.get("/portals/self/securityPolicy", {}, portal.adminToken)).passwordPolicy.type,
      ).toBe("default");
      expect(await createUser("policy_after_reset", "weakweakweak")).toMatchObject({ success: true });
    },
    SLOW,
  );

  it(
    "clears a rule sent empty and keeps rules not sent",
    async () => {
      expect(await update({ minDigit: 2, minUpper: 1 })).toEqual({ success: true });
      expect(await update({ minDigit: "" })).toEqual({ success: true });
      const policy = (await portal.get("/portals/self/securityPolicy", {}, portal.adminToken)).passwordPolicy;
      expect(policy.minDigit).toBeUndefined();
      expect(policy.minUpper).toBe(1);
      await portal.post("/portals/self/securityPolicy/reset", {}, portal.adminToken);
    },
    SLOW,
  );

  it(
    "refuses reusing one of the last historySize passwords",
    async () => {
      expect(await update({ historySize: 2 })).toEqual({ success: true });
      const u = await portal.addUser("history_user");
      const change = async (from: string, to: string) => {
        const token = await portal.signIn(u.username, from);
        return portal.post(
          `/community/users/${u.username}/update`,
          { password: to, oldPassword: from },
          token,
        );
      };
      const same = await change(u.password, u.password);
      expect(same.error).toMatchObject({ code: 400, messageCode: "PARAM_0002" });
      expect(same.error.details[0]).toMatch(
        /^'password' must differ from the last 2 passwords.*\(historySize\)/,
      );
      expect(await change(u.password, "second-password")).toMatchObject({ success: true });
      expect((await change("second-password", u.password)).error.details[0]).toMatch(/historySize/);
      expect(await change("second-password", "third-password")).toMatchObject({ success: true });
      // Three passwords back is out of a history of 2.
      expect(await change("third-password", u.password)).toMatchObject({ success: true });
      // The hashes kept are never in an answer.
      const shown = JSON.stringify(await portal.get(`/community/users/${u.username}`, {}, portal.adminToken));
      expect(shown).not.toContain("scrypt$");
      await portal.post("/portals/self/securityPolicy/reset", {}, portal.adminToken);
    },
    SLOW,
  );

  it(
    "refuses sign-in with an expired password until it is changed at sign-in",
    async () => {
      const u = await portal.addUser("expiry_user");
      expect(await update({ expirationInDays: 30 })).toEqual({ success: true });
      await portal.signIn(u.username, u.password);
      // The password was set 31 days ago.
      const { id } = await portal.portico.db.kysely
        .selectFrom("users")
        .select("id")
        .where("username", "=", u.username)
        .executeTakeFirstOrThrow();
      await portal.portico.db.kysely
        .updateTable("password_history")
        .set({ created: Date.now() - 31 * 86_400_000 })
        .where("user_id", "=", id)
        .execute();

      const expired = await portal.post("/generateToken", {
        username: u.username,
        password: u.password,
        client: "requestip",
      });
      expect(expired.error).toMatchObject({ code: 400, messageCode: "GWM_0010" });
      expect(expired.error.details[0]).toMatch(/password has expired and must be changed.*newPassword/);
      // A wrong password is still just wrong: the expiry says nothing to someone without it.
      const wrong = await portal.post("/generateToken", {
        username: u.username,
        password: "nope-nope-1",
        client: "requestip",
      });
      expect(wrong.error.messageCode).toBe("GWM_0007");

      const changed = await portal.post("/generateToken", {
        username: u.username,
        password: u.password,
        newPassword: "a-fresh-password",
        client: "requestip",
      });
      expect(typeof changed.token).toBe("string");
      expect(await portal.get("/community/self", {}, changed.token)).toMatchObject({ username: u.username });
      await portal.signIn(u.username, "a-fresh-password");
      expect(
        (
          await portal.post("/generateToken", {
            username: u.username,
            password: u.password,
            client: "requestip",
          })
        ).error.messageCode,
      ).toBe("GWM_0007");
      await portal.post("/portals/self/securityPolicy/reset", {}, portal.adminToken);
    },
    SLOW,
  );
});

describe("account lockout", () => {
  let portal: TestPortal;

  beforeAll(async () => {
    portal = await startTestPortal();
  }, SLOW);
  afterAll(async () => {
    await portal.stop();
  }, SLOW);

  const signIn = (username: string, password: string) =>
    portal.post("/generateToken", { username, password, client: "requestip" });
  /** Fewer attempts than the default keep these tests to a few scrypt runs on a loaded machine. */
  const lockAfter = async (maxFailedAttempts: number) =>
    expect(
      await portal.post("/portals/self/securityPolicy/update", { maxFailedAttempts }, portal.adminToken),
    ).toEqual({ success: true });
  const fail = async (username: string, times: number) => {
    for (let i = 0; i < times; i++) {
      expect((await signIn(username, `wrong-password-${i}`)).error.messageCode).toBe("GWM_0007");
    }
  };

  it(
    "locks a username after 5 consecutive failures: the right password is then refused",
    async () => {
      const u = await portal.addUser("locked_user");
      await fail(u.username, 5);
      const locked = await signIn(u.username, u.password);
      expect(locked.error).toMatchObject({
        code: 400,
        messageCode: "GWM_0009",
        message: "Unable to generate token.",
      });
      expect(locked.error.details[0]).toMatch(/locked\. Try again in 15 minutes/);

      // Administrators see it on the user resource, and in the user list.
      const seen = await portal.get(`/community/users/${u.username}`, {}, portal.adminToken);
      expect(seen).toMatchObject({ locked: true, failedLoginAttempts: 5 });
      expect(seen.lockedUntil).toBeGreaterThan(Date.now() + 14 * 60_000);
      const listed = await portal.get("/portals/self/users", { num: 100 }, portal.adminToken);
      expect(listed.users.find((x: any) => x.username === u.username)).toMatchObject({ locked: true });
      // Members do not.
      const other = await portal.addUser("lock_watcher");
      expect(await portal.get(`/community/users/${u.username}`, {}, other.token)).not.toHaveProperty(
        "locked",
      );

      // Enabling the account is how an administrator unlocks it.
      expect(await portal.post(`/community/users/${u.username}/enable`, {}, portal.adminToken)).toEqual({
        success: true,
      });
      expect(typeof (await signIn(u.username, u.password)).token).toBe("string");
      expect(await portal.get(`/community/users/${u.username}`, {}, portal.adminToken)).toMatchObject({
        locked: false,
        lockedUntil: -1,
        failedLoginAttempts: 0,
      });
    },
    SLOW,
  );

  it(
    "holds under parallel guesses: of 10 wrong passwords and the right one sent at once, at most 5 are checked, and the name ends locked",
    async () => {
      await portal.post("/portals/self/securityPolicy/reset", {}, portal.adminToken);
      const u = await portal.addUser("burst_target");
      // The order in which the server takes parallel requests is not known: the assertions are
      // about counts and the end state, not about which request came first.
      const answers = await Promise.all([
        ...Array.from({ length: 10 }, (_, i) => signIn(u.username, `wrong-burst-${i}`)),
        signIn(u.username, u.password),
      ]);
      const outcomes = answers.map((a) => (typeof a.token === "string" ? "token" : a.error?.messageCode));
      const right = outcomes[10];
      // Each answer is a password checked (wrong, or the token) or the lock, which checks nothing.
      expect(outcomes.filter((o) => o !== "GWM_0007" && o !== "GWM_0009" && o !== "token")).toEqual([]);
      const checked = outcomes.filter((o) => o !== "GWM_0009").length;
      expect(checked).toBeLessThanOrEqual(5);
      expect(outcomes.filter((o) => o === "GWM_0009").length).toBeGreaterThanOrEqual(6);
      // The right password is either refused as locked, or was checked before the lock and signed
      // in; either way the burst leaves the name locked, and the right password is refused now.
      expect(right === "GWM_0009" || right === "token").toBe(true);
      expect((await signIn(u.username, u.password)).error?.messageCode).toBe("GWM_0009");
      expect(await portal.get(`/community/users/${u.username}`, {}, portal.adminToken)).toMatchObject({
        locked: true,
      });
    },
    SLOW,
  );

  it(
    "counts only consecutive failures: a success starts the count again",
    async () => {
      await lockAfter(3);
      const u = await portal.addUser("streak_user");
      await fail(u.username, 2);
      await portal.signIn(u.username, u.password);
      await fail(u.username, 2);
      expect(typeof (await signIn(u.username, u.password)).token).toBe("string");
    },
    SLOW,
  );

  it(
    "unlocks when the lockout ends, and after an administrator's password reset",
    async () => {
      await lockAfter(2);
      const u = await portal.addUser("timed_user");
      await fail(u.username, 2);
      expect((await signIn(u.username, u.password)).error.messageCode).toBe("GWM_0009");
      // The lock ran out (the row as the clock would leave it 15 minutes later).
      await portal.portico.db.kysely
        .updateTable("sign_in_failures")
        .set({ locked_until: Date.now() - 1, first_failure: Date.now() - 16 * 60_000 })
        .where("username_key", "=", u.username)
        .execute();
      expect(typeof (await signIn(u.username, u.password)).token).toBe("string");
      // Failures after a lock ran out start a new count: one is not enough to lock again.
      await fail(u.username, 2);
      await portal.portico.db.kysely
        .updateTable("sign_in_failures")
        .set({ locked_until: Date.now() - 1 })
        .where("username_key", "=", u.username)
        .execute();
      await fail(u.username, 1);
      expect(typeof (await signIn(u.username, u.password)).token).toBe("string");

      await fail(u.username, 2);
      expect(
        await portal.post(
          `/community/users/${u.username}/update`,
          { password: "reset-by-admin" },
          portal.adminToken,
        ),
      ).toMatchObject({ success: true });
      expect(typeof (await signIn(u.username, "reset-by-admin")).token).toBe("string");
    },
    SLOW,
  );

  it(
    "answers a locked unknown username exactly as a locked account, so lockout reveals no usernames",
    async () => {
      await lockAfter(2);
      const u = await portal.addUser("known_user");
      await fail(u.username, 2);
      await fail("nobody_by_this_name", 2);
      const known = await signIn(u.username, "wrong-password-x");
      const unknown = await signIn("nobody_by_this_name", "wrong-password-x");
      expect(unknown).toEqual(known);
      expect(known.error.messageCode).toBe("GWM_0009");
    },
    SLOW,
  );

  it(
    "takes the attempts, window and duration from the security policy",
    async () => {
      expect(
        await portal.post(
          "/portals/self/securityPolicy/update",
          { maxFailedAttempts: 2, lockoutDurationInMinutes: 3 },
          portal.adminToken,
        ),
      ).toEqual({ success: true });
      const u = await portal.addUser("policy_locked");
      await fail(u.username, 2);
      const locked = await signIn(u.username, u.password);
      expect(locked.error.details[0]).toMatch(/Try again in 3 minutes/);
      expect(
        (
          await portal.post(
            "/portals/self/securityPolicy/update",
            { maxFailedAttempts: 0 },
            portal.adminToken,
          )
        ).error.details[0],
      ).toMatch(/^'maxFailedAttempts' must be/);
      await portal.post("/portals/self/securityPolicy/reset", {}, portal.adminToken);
    },
    SLOW,
  );
});

describe("password hashing cap", () => {
  let portal: TestPortal;

  beforeAll(async () => {
    portal = await startTestPortal({
      // The queue fills only while hashes take as long as real ones.
      fullPasswordHashing: true,
      env: {
        PORTICO_TRUST_PROXY: "127.0.0.1",
        PORTICO_PASSWORD_HASH_CONCURRENCY: "1",
        // Each address may hold a quarter of the queue: 2.
        PORTICO_PASSWORD_HASH_QUEUE: "8",
      },
    });
  }, SLOW);
  afterAll(async () => {
    await portal.stop();
  }, SLOW);

  it(
    "keeps the hashing queue bounded under a flood of bad sign-ins, refusing the excess at once, and serves a real sign-in",
    async () => {
      // This portal hashes as a real one does.
      const admin = await portal.portico.db.kysely
        .selectFrom("users")
        .select("password_hash")
        .where("username", "=", ADMIN.username)
        .executeTakeFirstOrThrow();
      expect(admin.password_hash).toMatch(/^scrypt\$16\$8\$2\$/);
      const auth = portal.portico.services.auth;
      let maxRunning = 0;
      let maxQueued = 0;
      const sampler = setInterval(() => {
        maxRunning = Math.max(maxRunning, auth.hashingLoad.running);
        maxQueued = Math.max(maxQueued, auth.hashingLoad.queued);
      }, 1);
      // Distinct unknown usernames: the lockout of one name is no help against this flood.
      const flood = Array.from({ length: 24 }, (_, i) =>
        postFrom(
          portal,
          "/generateToken",
          { username: `guess_${i}_user`, password: "guessed-password", client: "requestip" },
          fromIp("203.0.113.66"),
        ),
      );
      const real = postFrom(
        portal,
        "/generateToken",
        { ...ADMIN, client: "requestip" },
        fromIp("198.51.100.7"),
      );
      const answers = await Promise.all(flood);
      const realAnswer = await real;
      clearInterval(sampler);

      expect(typeof realAnswer.token).toBe("string");
      const codes = answers.map((a) => a.error?.messageCode);
      expect(codes.every((c) => c === "GWM_0007" || c === "GWM_0011")).toBe(true);
      const busy = answers.find((a) => a.error?.messageCode === "GWM_0011");
      expect(busy?.error).toMatchObject({
        code: 400,
        message: "Too many sign-in attempts are being processed. Try again in a moment.",
      });
      // An attempt is counted before it waits for hashing; one refused as busy is given back.
      const counted = await portal.portico.db.kysely
        .selectFrom("sign_in_failures")
        .select(["username_key", "failures"])
        .where("username_key", "like", "guess_%_user")
        .execute();
      const failuresOf = new Map(counted.map((r) => [r.username_key, Number(r.failures)]));
      expect(codes.map((c, i) => [c, failuresOf.get(`guess_${i}_user`) ?? 0])).toEqual(
        codes.map((c) => [c, c === "GWM_0007" ? 1 : 0]),
      );
      expect(maxRunning).toBeLessThanOrEqual(1);
      expect(maxQueued).toBeLessThanOrEqual(8);
      expect(auth.hashingLoad).toEqual({ running: 0, queued: 0 });
    },
    SLOW,
  );

  it(
    "counts the addresses of one IPv6 /64 as one client: a flood from many of them holds one share of the queue",
    async () => {
      const auth = portal.portico.services.auth;
      let maxQueued = 0;
      const sampler = setInterval(() => {
        maxQueued = Math.max(maxQueued, auth.hashingLoad.queued);
      }, 1);
      // 24 addresses of one /64 (what a single subscriber is given), one guess each.
      const flood = Array.from({ length: 24 }, (_, i) =>
        postFrom(
          portal,
          "/generateToken",
          { username: `v6_guess_${i}_user`, password: "guessed-password", client: "requestip" },
          fromIp(`2001:db8:66:1::${(i + 1).toString(16)}`),
        ),
      );
      const real = postFrom(
        portal,
        "/generateToken",
        { ...ADMIN, client: "requestip" },
        fromIp("2001:db8:77:1::1"),
      );
      const answers = await Promise.all(flood);
      const realAnswer = await real;
      clearInterval(sampler);

      expect(typeof realAnswer.token).toBe("string");
      const codes = answers.map((a) => a.error?.messageCode);
      expect(codes.filter((c) => c !== "GWM_0007" && c !== "GWM_0011")).toEqual([]);
      // The /64's share (2 of 8) and the real sign-in: never a queue the /64 fills.
      expect(maxQueued).toBeLessThanOrEqual(3);
      expect(auth.hashingLoad).toEqual({ running: 0, queued: 0 });
    },
    SLOW,
  );
});
