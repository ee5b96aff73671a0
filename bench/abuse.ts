/**
 * The abuse case of `npm run bench` (`--cases abuse`): the attacks of issue 12, each against a
 * fresh `portico serve` process, each measured twice on the same server: first a quiet window with
 * no attack (the baseline), then the attack. For both it reports the server's peak RSS (VmHWM,
 * reset before each window) and the worst latency of `/health`, probed on a fresh connection
 * every few milliseconds as a load balancer would, an unanswered probe counting for as long as it
 * has waited. A server that dies is reported as such, with how it ended; every attack is cut off
 * after `ABUSE.attackTimeoutMs`.
 */
import { setMaxListeners } from "node:events";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { ADMIN, PortalApi } from "./portal-api.js";
import type { ServerProcess } from "./processes.js";
import { mb, ms, ratio, table } from "./report.js";
import { createStore, type Engine, type Store } from "./stores.js";

export const ABUSE = {
  /** Every attack is cut off after this long: its requests are aborted, its sockets closed. */
  attackTimeoutMs: 60_000,
  /** The window without attack measured before each attack. */
  quietMs: 3_000,
  /** Pause between two `/health` probes. */
  healthIntervalMs: 20,
  /** RSS is sampled this often as well, where the peak cannot be reset. */
  rssIntervalMs: 20,
  bigValueBytes: 100 * 1024 * 1024,
  manyKeys: 1_000_000,
  multipartRequests: 4,
  multipartFileBytes: 95 * 1024 * 1024,
  downloads: 8,
  downloadBytes: 95 * 1024 * 1024,
  badSignIns: 32,
  searchItems: 3_000,
  searchDescriptionBytes: 20 * 1024,
  searchWords: 64,
  searchConcurrency: 4,
  slowConnections: 1_000,
  slowHoldMs: 20_000,
} as const;

/** Peak RSS and the worst `/health` latency over one window. */
export interface Window {
  /** Bytes; undefined where /proc is unavailable. */
  peakRss: number | undefined;
  worstHealthMs: number;
  probes: number;
  /** Probes that got no 200 (refused, reset, timed out). */
  failedProbes: number;
}

export interface AttackFigures {
  name: string;
  engine: Engine;
  /** What the attack's requests got back, in a few words; or why it could not run. */
  outcome: string;
  /** How the server ended when it died during the attack. */
  died: string | undefined;
  attackMs: number;
  baseline: Window | undefined;
  attack: Window | undefined;
  /** A figure of the attack's own (the good sign-in's latency), alone and under attack. */
  extra?: { label: string; baseline: number; attack: number | undefined };
}

interface Context {
  server: ServerProcess;
  token: string;
  /** What `prepare` leaves for `run` (an item id, a user name). */
  state: Record<string, string>;
  say: (line: string) => void;
}

interface RunResult {
  outcome: string;
  extra?: number;
}

interface Attack {
  /** Short name for `--attacks`. */
  id: string;
  name: string;
  /** Prepares the server (not measured). */
  prepare?(ctx: Context): Promise<void>;
  /** Label and measure of a figure taken alone during the quiet window and by `run` under attack. */
  extra?: { label: string; alone(ctx: Context): Promise<number> };
  /** Runs the attack until it ends or `signal` aborts it. */
  run(ctx: Context, signal: AbortSignal): Promise<RunResult>;
}

// ------------------------------------------------------------------------------------ requests

type Body = Buffer | (() => AsyncIterable<Buffer>);

interface Answer {
  /** `ok`, `error <code>`, `HTTP <status>`, or the network error. */
  what: string;
  bytes: number;
}

/** How much of an answer is kept to classify it; the rest is read and discarded. */
const KEEP_BYTES = 4096;

/**
 * One request on a fresh connection. The body is streamed (a generator of chunks), so that the
 * bench does not hold the 100 MB it sends; the answer is read to the end and classified.
 */
function send(
  url: string,
  options: {
    method: "GET" | "POST";
    headers?: Record<string, string | number>;
    body?: Body;
    /** The loopback address to send from (the server tells clients apart by address). */
    localAddress?: string;
  },
  signal: AbortSignal,
): Promise<Answer> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (answer: Answer) => {
      if (settled) return;
      settled = true;
      resolve(answer);
    };
    const req = http.request(url, {
      method: options.method,
      headers: options.headers,
      agent: false,
      signal,
      localAddress: options.localAddress,
    });
    req.on("error", (err) =>
      done({
        what: signal.aborted ? "cut off" : ((err as NodeJS.ErrnoException).code ?? err.message),
        bytes: 0,
      }),
    );
    req.on("response", (res) => {
      const kept: Buffer[] = [];
      let bytes = 0;
      res.on("data", (chunk: Buffer) => {
        if (bytes < KEEP_BYTES) kept.push(chunk);
        bytes += chunk.length;
      });
      res.on("error", () => done({ what: signal.aborted ? "cut off" : "answer interrupted", bytes }));
      res.on("end", () => done({ what: classify(res.statusCode ?? 0, Buffer.concat(kept)), bytes }));
    });
    const body = options.body;
    if (body === undefined) req.end();
    else if (Buffer.isBuffer(body)) req.end(body);
    else
      void (async () => {
        try {
          for await (const chunk of body()) {
            if (req.destroyed) return;
            if (!req.write(chunk)) await drained(req);
          }
          req.end();
        } catch {
          req.destroy();
        }
      })();
  });
}

/** Resolves when a request can take more of its body, or is closed. */
function drained(req: http.ClientRequest): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      req.off("drain", done);
      req.off("close", done);
      resolve();
    };
    req.on("drain", done);
    req.on("close", done);
  });
}

function classify(status: number, start: Buffer): string {
  if (status !== 200) return `HTTP ${status}`;
  const text = start.toString("utf8", 0, Math.min(start.length, 512));
  const code = /"error"\s*:\s*\{\s*"code"\s*:\s*(\d+)/.exec(text)?.[1];
  const messageCode = /"messageCode"\s*:\s*"([A-Z]+_\d+)"/.exec(text)?.[1];
  return code ? `error ${code}${messageCode ? ` ${messageCode}` : ""}` : "ok";
}

/** "3 x error 400, 1 x ECONNRESET" */
function tally(answers: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const a of answers) counts.set(a, (counts.get(a) ?? 0) + 1);
  return [...counts].map(([what, n]) => `${n} x ${what}`).join(", ");
}

/** `size` bytes in chunks of one reused megabyte (of `fill`). */
async function* repeated(size: number, fill = 0x61): AsyncIterable<Buffer> {
  const chunk = Buffer.alloc(1024 * 1024, fill);
  for (let left = size; left > 0; left -= chunk.length)
    yield left >= chunk.length ? chunk : chunk.subarray(0, left);
}

/** A multipart/form-data body: fields, then files of `size` bytes each, streamed. */
function multipart(
  fields: Record<string, string>,
  files: { name: string; filename: string; size: number }[],
): { headers: Record<string, string | number>; body: () => AsyncIterable<Buffer> } {
  const boundary = `----portico-bench-${Date.now().toString(36)}`;
  const head = Buffer.from(
    Object.entries(fields)
      .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
      .join(""),
  );
  const fileHead = (f: (typeof files)[number]) =>
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${f.name}"; filename="${f.filename}"\r\n` +
        "Content-Type: application/octet-stream\r\n\r\n",
    );
  const tail = Buffer.from(`--${boundary}--\r\n`);
  const length = head.length + files.reduce((n, f) => n + fileHead(f).length + f.size + 2, 0) + tail.length;
  return {
    headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": length },
    body: async function* () {
      yield head;
      for (const f of files) {
        yield fileHead(f);
        yield* repeated(f.size);
        yield Buffer.from("\r\n");
      }
      yield tail;
    },
  };
}

const form = (params: Record<string, string>) => Buffer.from(new URLSearchParams(params).toString());
const FORM = { "content-type": "application/x-www-form-urlencoded" };

// -------------------------------------------------------------------------------------- attacks

const VICTIM = { username: "abuse_victim", password: "abuse-victim-password-1" };

/**
 * The administrator's sign-in, from 127.0.0.2: another client than the guesses of the sign-in
 * attack (127.0.0.1), as a real user is, so that it meets the hashing queue's fairness between
 * addresses rather than the guesser's own share of it.
 */
async function timedSignIn(ctx: Context, signal?: AbortSignal): Promise<{ ms: number; what: string }> {
  const started = performance.now();
  const answer = await send(
    `${ctx.server.url}/sharing/rest/generateToken`,
    {
      method: "POST",
      headers: FORM,
      localAddress: "127.0.0.2",
      body: form({ f: "json", username: ADMIN.username, password: ADMIN.password, client: "requestip" }),
    },
    signal ?? AbortSignal.timeout(ABUSE.attackTimeoutMs),
  );
  return { ms: performance.now() - started, what: answer.what };
}

/** Words of the search case's descriptions, and 64 that appear in none of them. */
const VOCABULARY = Array.from({ length: 2000 }, (_, i) => `word${i.toString(36)}`);

/** A body of a million parameters, as a form or as JSON; built once. */
const manyKeysBodies = new Map<"form" | "json", Buffer>();
function manyKeysBody(kind: "form" | "json"): Buffer {
  let body = manyKeysBodies.get(kind);
  if (!body) {
    body =
      kind === "form"
        ? Buffer.from(`f=json&${Array.from({ length: ABUSE.manyKeys }, (_, i) => `k${i}=1`).join("&")}`)
        : Buffer.from(
            `{"f":"json",${Array.from({ length: ABUSE.manyKeys }, (_, i) => `"k${i}":1`).join(",")}}`,
          );
    manyKeysBodies.set(kind, body);
  }
  return body;
}

const ATTACKS: Attack[] = [
  {
    id: "big-value",
    name: "100 MB form value to generateToken",
    async run(ctx, signal) {
      const prefix = Buffer.from("f=json&password=x&username=");
      const answer = await send(
        `${ctx.server.url}/sharing/rest/generateToken`,
        {
          method: "POST",
          headers: { ...FORM, "content-length": prefix.length + ABUSE.bigValueBytes },
          body: async function* () {
            yield prefix;
            yield* repeated(ABUSE.bigValueBytes);
          },
        },
        signal,
      );
      return { outcome: answer.what };
    },
  },
  {
    id: "form-keys",
    name: "1,000,000 form keys to generateToken",
    // Built before the window: building it is the bench's own work, and it would hold up the
    // bench's /health probes, not the server's answers.
    prepare: async () => void manyKeysBody("form"),
    async run(ctx, signal) {
      const body = manyKeysBody("form");
      const answer = await send(
        `${ctx.server.url}/sharing/rest/generateToken`,
        { method: "POST", headers: FORM, body },
        signal,
      );
      return { outcome: `${answer.what} (${mb(body.length)} body)` };
    },
  },
  {
    id: "json-keys",
    name: "1,000,000 JSON keys to generateToken",
    prepare: async () => void manyKeysBody("json"),
    async run(ctx, signal) {
      const body = manyKeysBody("json");
      const answer = await send(
        `${ctx.server.url}/sharing/rest/generateToken`,
        { method: "POST", headers: { "content-type": "application/json" }, body },
        signal,
      );
      return { outcome: `${answer.what} (${mb(body.length)} body)` };
    },
  },
  {
    id: "multipart",
    name: "4 anonymous 2 x 95 MB multipart to info",
    async run(ctx, signal) {
      const answers = await Promise.all(
        Array.from({ length: ABUSE.multipartRequests }, () => {
          const m = multipart({ f: "json" }, [
            { name: "file", filename: "a.bin", size: ABUSE.multipartFileBytes },
            { name: "file2", filename: "b.bin", size: ABUSE.multipartFileBytes },
          ]);
          return send(`${ctx.server.url}/sharing/rest/info`, { method: "POST", ...m }, signal);
        }),
      );
      return { outcome: tally(answers.map((a) => a.what)) };
    },
  },
  {
    id: "downloads",
    name: "8 concurrent downloads of a 95 MB item",
    async prepare(ctx) {
      const m = multipart({ f: "json", token: ctx.token, title: "Big", type: "CSV" }, [
        { name: "file", filename: "big.csv", size: ABUSE.downloadBytes },
      ]);
      const answer = await new Promise<string>((resolve, reject) => {
        const req = http.request(`${ctx.server.url}/sharing/rest/content/users/${ADMIN.username}/addItem`, {
          method: "POST",
          headers: m.headers,
          agent: false,
        });
        req.on("error", reject);
        req.on("response", (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        });
        void (async () => {
          for await (const chunk of m.body()) {
            if (!req.write(chunk)) await drained(req);
          }
          req.end();
        })();
      });
      const id = (JSON.parse(answer) as { id?: string }).id;
      if (!id) throw new Error(`uploading the 95 MB item failed: ${answer.slice(0, 300)}`);
      ctx.state.item = id;
    },
    async run(ctx, signal) {
      const url = `${ctx.server.url}/sharing/rest/content/items/${ctx.state.item}/data?token=${ctx.token}`;
      const answers = await Promise.all(
        Array.from({ length: ABUSE.downloads }, () => send(url, { method: "GET" }, signal)),
      );
      const complete = answers.filter((a) => a.bytes === ABUSE.downloadBytes).length;
      return { outcome: `${complete} of ${ABUSE.downloads} complete; ${tally(answers.map((a) => a.what))}` };
    },
  },
  {
    id: "sign-ins",
    name: "32 bad sign-ins while a good one runs",
    async prepare(ctx) {
      await new PortalApi(ctx.server.url).createUser(ctx.token, VICTIM.username, "org_user");
    },
    extra: { label: "good sign-in", alone: async (ctx) => (await timedSignIn(ctx)).ms },
    async run(ctx, signal) {
      const bad = Array.from({ length: ABUSE.badSignIns }, (_, i) =>
        send(
          `${ctx.server.url}/sharing/rest/generateToken`,
          {
            method: "POST",
            headers: FORM,
            body: form({ f: "json", username: VICTIM.username, password: `wrong-${i}`, client: "requestip" }),
          },
          signal,
        ),
      );
      // The good sign-in starts once the bad ones are all on their way.
      await sleep(50);
      const good = await timedSignIn(ctx, signal);
      const answers = await Promise.all(bad);
      return {
        outcome: `good: ${good.what}; bad: ${tally(answers.map((a) => a.what))}`,
        extra: good.what === "ok" ? good.ms : undefined,
      };
    },
  },
  {
    id: "search",
    name: "4 concurrent 64-OR-word searches, 3,000 items",
    async prepare(ctx) {
      let next = 0;
      let seed = 1;
      const random = () => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
      };
      const description = () => {
        const words: string[] = [];
        let size = 0;
        while (size < ABUSE.searchDescriptionBytes) {
          const w = VOCABULARY[Math.floor(random() * VOCABULARY.length)] as string;
          words.push(w);
          size += w.length + 1;
        }
        return words.join(" ");
      };
      const worker = async () => {
        while (next < ABUSE.searchItems) {
          const i = next++;
          const body = form({
            f: "json",
            token: ctx.token,
            title: `Abuse item ${i}`,
            type: "Web Map",
            tags: `t${i % 50}`,
            snippet: `snippet ${i}`,
            description: description(),
          });
          const answer = await send(
            `${ctx.server.url}/sharing/rest/content/users/${ADMIN.username}/addItem`,
            { method: "POST", headers: FORM, body },
            AbortSignal.timeout(30_000),
          );
          if (answer.what !== "ok") throw new Error(`seeding item ${i}: ${answer.what}`);
        }
      };
      const started = performance.now();
      await Promise.all(Array.from({ length: 8 }, worker));
      ctx.say(
        `    seeded ${ABUSE.searchItems} items with 20 KB descriptions in ${ms(performance.now() - started)}`,
      );
    },
    async run(ctx, signal) {
      const q = Array.from({ length: ABUSE.searchWords }, (_, i) => `absent${i}x`).join(" OR ");
      const url = `${ctx.server.url}/sharing/rest/search?${new URLSearchParams({ f: "json", q, num: "10", token: ctx.token })}`;
      const answers = await Promise.all(
        Array.from({ length: ABUSE.searchConcurrency }, async () => {
          const started = performance.now();
          const a = await send(url, { method: "GET" }, signal);
          return { what: a.what, ms: performance.now() - started };
        }),
      );
      return {
        outcome: `${tally(answers.map((a) => a.what))}; slowest ${ms(Math.max(...answers.map((a) => a.ms)))}`,
      };
    },
  },
  {
    id: "slow-loris",
    name: `slow-loris: ${ABUSE.slowConnections} slow connections for ${ABUSE.slowHoldMs / 1000} s`,
    async run(ctx, signal) {
      const { port } = new URL(ctx.server.url);
      const sockets: net.Socket[] = [];
      let refused = 0;
      let closedByServer = 0;
      let ending = false;
      const open = (i: number) =>
        new Promise<void>((resolve) => {
          const socket = net.connect(Number(port), "127.0.0.1");
          let connected = false;
          socket.setNoDelay(true);
          socket.on("error", () => {
            if (!connected) refused++;
            resolve();
          });
          socket.once("connect", () => {
            connected = true;
            // Half send headers that never end; half a body that never arrives.
            socket.write(
              i % 2 === 0
                ? "GET /sharing/rest/info HTTP/1.1\r\nHost: x\r\n"
                : "POST /sharing/rest/generateToken HTTP/1.1\r\nHost: x\r\n" +
                    `Content-Type: ${FORM["content-type"]}\r\nContent-Length: 1000000\r\n\r\nf=json&`,
            );
            sockets.push(socket);
            resolve();
          });
          socket.once("close", () => {
            if (connected && !ending) closedByServer++;
          });
        });
      for (let i = 0; i < ABUSE.slowConnections; i += 100) {
        await Promise.all(
          Array.from({ length: Math.min(100, ABUSE.slowConnections - i) }, (_, j) => open(i + j)),
        );
      }
      const until = performance.now() + ABUSE.slowHoldMs;
      let tick = 0;
      while (performance.now() < until && !signal.aborted) {
        await sleep(1000);
        tick++;
        for (const [i, socket] of sockets.entries()) {
          if (socket.destroyed) continue;
          socket.write(i % 2 === 0 ? `X-Slow-${tick}: 1\r\n` : "a");
        }
      }
      ending = true;
      const stillOpen = sockets.filter((socket) => !socket.destroyed).length;
      for (const socket of sockets) socket.destroy();
      return {
        outcome: `${stillOpen} still open at the end, ${closedByServer} closed by the server, ${refused} failed to connect`,
      };
    },
  },
];

/** The attacks' short names, in the order they run (`--attacks` picks some). */
export const ATTACK_IDS: readonly string[] = ATTACKS.map((a) => a.id);

// ------------------------------------------------------------------------------------ measuring

/** Resets the peak RSS (VmHWM) of a process; false where the kernel does not let us. */
function resetPeak(pid: number): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** Probes `/health` and samples RSS until `stop` is called. */
function watch(
  server: ServerProcess,
  watchers: Set<{ stop(): Promise<Window> }>,
): { stop(): Promise<Window> } {
  const reset = resetPeak(server.pid);
  let sampledPeak = 0;
  let running = true;
  let worst = 0;
  let probes = 0;
  let failed = 0;
  let inFlightSince: number | undefined;
  const rss = setInterval(() => {
    // A process that has died but is not reaped yet has a status file without memory figures.
    const m = server.memory();
    if (m && Number.isFinite(m.rss)) sampledPeak = Math.max(sampledPeak, m.rss);
  }, ABUSE.rssIntervalMs);
  const loop = (async () => {
    while (running) {
      inFlightSince = performance.now();
      const status = await healthStatus(server.url);
      const took = performance.now() - inFlightSince;
      inFlightSince = undefined;
      probes++;
      worst = Math.max(worst, took);
      if (status !== 200) failed++;
      if (status === 0 && server.ended()) break;
      await sleep(ABUSE.healthIntervalMs);
    }
  })();
  const watcher = {
    async stop() {
      watchers.delete(watcher);
      running = false;
      // A probe still waiting counts for as long as it has waited.
      if (inFlightSince !== undefined) worst = Math.max(worst, performance.now() - inFlightSince);
      clearInterval(rss);
      const m = server.memory();
      const finite = (n: number | undefined) => (n !== undefined && Number.isFinite(n) ? n : 0);
      const peak = Math.max(sampledPeak, reset ? finite(m?.peak) : 0, finite(m?.rss)) || undefined;
      const window: Window = { peakRss: peak, worstHealthMs: worst, probes, failedProbes: failed };
      // The last probe is left to finish on its own (at most its timeout) when the server stalls.
      void loop;
      return window;
    },
  };
  watchers.add(watcher);
  return watcher;
}

/** One GET /health on a fresh connection: its status, or 0 when nothing answered. */
function healthStatus(origin: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(`${origin}/health`, { agent: false, timeout: ABUSE.attackTimeoutMs }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", () => resolve(0));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
  });
}

/** Runs every attack against its own fresh server of `engine`. */
export async function measureAbuse(
  engine: Engine,
  start: (store: Store) => Promise<ServerProcess>,
  say: (line: string) => void,
  only?: ReadonlySet<string>,
): Promise<AttackFigures[]> {
  const figures: AttackFigures[] = [];
  for (const attack of ATTACKS) {
    if (only && !only.has(attack.id)) continue;
    figures.push(await measureOne(engine, attack, start, say));
    const f = figures.at(-1) as AttackFigures;
    say(
      `  ${engine.name}: ${f.name}: ${f.died ? `SERVER DIED (${f.died}); ` : ""}${f.outcome}` +
        (f.attack && f.baseline
          ? `; peak RSS ${rssOf(f.baseline)} -> ${rssOf(f.attack)}, ` +
            `worst /health ${ms(f.baseline.worstHealthMs)} -> ${ms(f.attack.worstHealthMs)}`
          : ""),
    );
  }
  return figures;
}

async function measureOne(
  engine: Engine,
  attack: Attack,
  start: (store: Store) => Promise<ServerProcess>,
  say: (line: string) => void,
): Promise<AttackFigures> {
  const figures: AttackFigures = {
    name: attack.name,
    engine,
    outcome: "",
    died: undefined,
    attackMs: 0,
    baseline: undefined,
    attack: undefined,
  };
  const store = await createStore(engine);
  let server: ServerProcess | undefined;
  const watchers = new Set<{ stop(): Promise<Window> }>();
  try {
    server = await start(store);
    const token = await new PortalApi(server.url).signIn(ADMIN.username, ADMIN.password);
    const ctx: Context = { server, token, state: {}, say };
    await attack.prepare?.(ctx);
    // Lets the collector and the allocator settle after preparing, before the quiet window.
    await sleep(500);

    const quiet = watch(server, watchers);
    const alone = attack.extra ? await attack.extra.alone(ctx) : undefined;
    await sleep(ABUSE.quietMs);
    figures.baseline = await quiet.stop();

    const during = watch(server, watchers);
    const controller = new AbortController();
    // Every request of an attack listens to this one signal (32 sign-ins, 8 downloads...).
    setMaxListeners(1000, controller.signal);
    const timer = setTimeout(() => controller.abort(), ABUSE.attackTimeoutMs);
    // A server that dies ends the attack at once: nothing is left to wait for.
    const death = setInterval(() => {
      if (server?.ended()) controller.abort();
    }, 100);
    const started = performance.now();
    let result: RunResult;
    try {
      result = await attack.run(ctx, controller.signal);
    } finally {
      clearTimeout(timer);
      clearInterval(death);
    }
    figures.attackMs = performance.now() - started;
    figures.attack = await during.stop();
    // A crash can take a moment to be noticed (an abort writes its report first).
    await sleep(200);
    figures.died = server.ended();
    const cut =
      controller.signal.aborted && !figures.died ? ` (cut off after ${ABUSE.attackTimeoutMs / 1000} s)` : "";
    figures.outcome = `${result.outcome}${cut}`;
    if (attack.extra && alone !== undefined) {
      figures.extra = { label: attack.extra.label, baseline: alone, attack: result.extra };
    }
    if (figures.died) {
      const tail = server
        .output()
        .slice(-3)
        .map((l) => l.slice(0, 200));
      if (tail.length) say(`    the server's last lines: ${tail.join(" | ")}`);
    }
  } catch (err) {
    // The server may have died while being prepared (a 95 MB upload): that is a figure too.
    await sleep(200);
    figures.died = server?.ended();
    figures.outcome = `${figures.died ? "died while preparing" : "not measured"}: ${(err as Error).message}`;
  } finally {
    for (const watcher of [...watchers]) await watcher.stop();
    await server?.stop();
    await store.destroy();
  }
  return figures;
}

const rssOf = (w: Window | undefined) => (w?.peakRss === undefined ? "-" : mb(w.peakRss));

/** The summary table: each attack's figures beside the same server's without attack. */
export function abuseTable(figures: readonly AttackFigures[]): string {
  const rss = rssOf;
  const rows = figures.map((f) => {
    const rssRatio =
      f.baseline?.peakRss && f.attack?.peakRss ? ratio(f.attack.peakRss / f.baseline.peakRss) : "-";
    const healthRatio =
      f.baseline && f.attack ? ratio(f.attack.worstHealthMs / Math.max(f.baseline.worstHealthMs, 0.1)) : "-";
    const extra = f.extra
      ? `${f.extra.label} ${ms(f.extra.baseline)} -> ${f.extra.attack === undefined ? "failed" : ms(f.extra.attack)}`
      : "";
    return [
      f.name,
      f.engine.name,
      f.died ? `SERVER DIED (${f.died})` : f.outcome.startsWith("not measured") ? "NOT MEASURED" : "survived",
      rss(f.baseline),
      rss(f.attack),
      rssRatio,
      f.baseline ? ms(f.baseline.worstHealthMs) : "-",
      f.attack ? ms(f.attack.worstHealthMs) : "-",
      healthRatio,
      f.attack ? `${f.attack.failedProbes}/${f.attack.probes}` : "-",
      extra,
    ];
  });
  return table(
    [
      "attack",
      "engine",
      "server",
      "RSS quiet",
      "RSS attack",
      "ratio",
      "/health quiet",
      "/health attack",
      "ratio",
      "failed probes",
      "other",
    ],
    rows,
    3,
  );
}
