import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { onCleanup } from "./cleanup.js";

export interface ServerSpec {
  /** Label in messages, e.g. "portico (sqlite)". */
  name: string;
  /** Arguments to `node`: a script and its arguments. */
  args: string[];
  /** The child's whole environment (not merged with ours, see `cleanEnv`). */
  env: Record<string, string>;
  port: number;
  /** Path polled until it answers 200, e.g. `/sharing/rest/info?f=json`. */
  readyPath: string;
  readyTimeoutMs?: number;
  /**
   * A file that receives the child's stdout, as `npm start > portico.log` would; for servers that
   * log every request, so that the bench process (which runs the load generator) does not spend
   * its CPU reading their lines. Otherwise stdout is read like stderr, its last lines kept.
   */
  stdoutFile?: string;
}

export interface ServerProcess {
  name: string;
  pid: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Milliseconds from spawn until the first successful answer on the ready path. */
  readyMs: number;
  /** Resident set size now and at its peak, in bytes; undefined where /proc is unavailable. */
  memory(): { rss: number; peak: number } | undefined;
  /** CPU time the process has used so far (user + system), ms; undefined without /proc. */
  cpuMs(): number | undefined;
  /** The last lines the process wrote (stdout and stderr together). */
  output(): string[];
  /** How the process ended ("exit code 134", "signal SIGKILL"), or undefined while it runs. */
  ended(): string | undefined;
  stop(): Promise<void>;
}

/** How often readiness is polled; also the resolution of the start-up time. */
const POLL_INTERVAL_MS = 10;
const OUTPUT_LINES_KEPT = 40;
const STOP_GRACE_MS = 5000;

/**
 * A port nobody listens on right now. Another process could take it before the server binds it,
 * but portico prints its address only in a log line, so asking for port 0 would mean parsing logs.
 */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== "object" || address === null) throw new Error("no port assigned");
  return address.port;
}

/**
 * Our environment without portico's settings, so that a developer's PORTICO_* or DATABASE_URL
 * cannot change what is measured; each server gets exactly the settings the bench chooses.
 */
export function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined || key.startsWith("PORTICO_") || key === "DATABASE_URL") continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

/** Spawns a server process and waits until it answers; the clock starts just before spawning. */
export async function startServer(spec: ServerSpec): Promise<ServerProcess> {
  const url = `http://127.0.0.1:${spec.port}`;
  const lines: string[] = [];
  const started = performance.now();
  const stdout = spec.stdoutFile === undefined ? "pipe" : fs.openSync(spec.stdoutFile, "a");
  const child = spawn(process.execPath, spec.args, { env: spec.env, stdio: ["ignore", stdout, "pipe"] });
  // The child has its own copy of the descriptor.
  if (typeof stdout === "number") fs.closeSync(stdout);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const unregister = onCleanup(() => stopChild(child, exited));
  keepLines(child, lines);

  const stop = async () => {
    unregister();
    await stopChild(child, exited);
  };
  try {
    const deadline = started + (spec.readyTimeoutMs ?? 30_000);
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`${spec.name} exited (${child.exitCode ?? child.signalCode}) before answering`);
      }
      const status = await probe(`${url}${spec.readyPath}`);
      if (status === 200) break;
      if (performance.now() > deadline) throw new Error(`${spec.name} did not answer within the time limit`);
      await sleep(POLL_INTERVAL_MS);
    }
  } catch (err) {
    await stop();
    const tail = lines.length ? `\n  ${lines.slice(-10).join("\n  ")}` : "";
    throw new Error(`${(err as Error).message}${tail}`);
  }
  const readyMs = performance.now() - started;
  if (child.pid === undefined) throw new Error(`${spec.name} has no process id`);
  const pid = child.pid;

  return {
    name: spec.name,
    pid,
    url,
    readyMs,
    memory: () => readMemory(pid),
    cpuMs: () => readCpuMs(pid),
    output: () => (spec.stdoutFile === undefined ? [...lines] : [...lastLines(spec.stdoutFile), ...lines]),
    ended: () =>
      child.exitCode !== null
        ? `exit code ${child.exitCode}`
        : child.signalCode !== null
          ? `signal ${child.signalCode}`
          : undefined,
    stop,
  };
}

/** SIGTERM for a clean shutdown (portico closes its database), SIGKILL if it hangs. */
async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** The last lines of a log file, read from its end. */
function lastLines(file: string): string[] {
  // Gone once the server's store is removed.
  if (!fs.existsSync(file)) return [];
  const fd = fs.openSync(file, "r");
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, OUTPUT_LINES_KEPT * 1024);
    const buffer = Buffer.alloc(length);
    fs.readSync(fd, buffer, 0, length, size - length);
    return buffer
      .toString("utf8")
      .split("\n")
      .filter((line) => line.trim() !== "")
      .slice(-OUTPUT_LINES_KEPT);
  } finally {
    fs.closeSync(fd);
  }
}

function keepLines(child: ChildProcess, lines: string[]) {
  const add = (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line.trim() === "") continue;
      lines.push(line);
      if (lines.length > OUTPUT_LINES_KEPT) lines.shift();
    }
  };
  child.stdout?.on("data", add);
  child.stderr?.on("data", add);
}

/**
 * One GET without keep-alive (a fresh connection per poll, as a client would see the server come
 * up); the status code, or 0 when nothing answered.
 */
function probe(url: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: 1000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", () => resolve(0));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
  });
}

/** utime + stime of /proc/<pid>/stat, in ms (clock ticks of 10 ms on Linux). */
function readCpuMs(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

function readMemory(pid: number): { rss: number; peak: number } | undefined {
  let status: string;
  try {
    status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return undefined;
  }
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: kib("VmRSS") * 1024, peak: kib("VmHWM") * 1024 };
}
