import fs from "node:fs";
import autocannon from "autocannon";

export interface LoadCase {
  name: string;
  /** Target URL; for a GET case also the request sent. */
  url: string;
  /** Request generator for cases whose every request differs (autocannon `requests`). */
  requests?: autocannon.Request[];
  /**
   * True for an answer the case expects. ArcGIS-style APIs report failures as HTTP 200 with an
   * `error` object, so status codes alone would count a failing server as fast and healthy.
   */
  verify(body: string): boolean;
  /**
   * Awaited after the warm-up and after the measurement: the load generator abandons its requests
   * in flight when it stops, and a slow server would otherwise still be serving them while the
   * next measurement runs.
   */
  settle?: () => Promise<void>;
  /**
   * The server's process id, when it runs on this machine: its CPU time over the measurement is
   * then reported per answer, a figure that neighbours on a shared machine skew far less than
   * requests per second.
   */
  serverPid?: number;
  /**
   * The database server's processes that serve the portal (PostgreSQL backends on this machine),
   * read after the warm-up: their CPU time is reported per answer beside the server's.
   */
  databasePids?: () => Promise<number[]>;
}

export interface LoadSettings {
  connections: number;
  durationS: number;
  warmupS: number;
}

export interface LoadResult {
  name: string;
  /** Mean requests per second over the measured seconds. */
  rps: number;
  /** Latency percentiles in milliseconds. */
  p50: number;
  p99: number;
  /** Answers received during the measurement. */
  answers: number;
  /** Connection errors and timeouts. */
  errors: number;
  non2xx: number;
  /** Answers `verify` rejected. */
  rejected: number;
  /** The first few rejected bodies, to show why. */
  samples: string[];
  /** Microseconds of the server's CPU time (user and system) per answer, when its pid is known. */
  cpuUsPerAnswer: number | undefined;
  /** The same for the database server's processes (`databasePids`), when known. */
  dbCpuUsPerAnswer?: number | undefined;
}

const SAMPLES_KEPT = 3;
const SAMPLE_CHARS = 300;

/** Runs an unmeasured warm-up, then the measured load; connections are fresh for each. */
export async function runLoad(c: LoadCase, settings: LoadSettings): Promise<LoadResult> {
  if (settings.warmupS > 0) {
    await fire(c, settings.connections, settings.warmupS);
    await c.settle?.();
  }
  const dbPids = (await c.databasePids?.()) ?? [];
  const dbBefore = sumCpuSeconds(dbPids);
  const cpuBefore = c.serverPid === undefined ? undefined : cpuSeconds(c.serverPid);
  const { result, samples } = await fire(c, settings.connections, settings.durationS);
  const cpuAfter = c.serverPid === undefined ? undefined : cpuSeconds(c.serverPid);
  const dbAfter = sumCpuSeconds(dbPids);
  await c.settle?.();
  const answers = result["1xx"] + result["2xx"] + result["3xx"] + result["4xx"] + result["5xx"];
  return {
    name: c.name,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    answers,
    errors: result.errors,
    non2xx: result.non2xx,
    rejected: result.mismatches,
    samples,
    cpuUsPerAnswer:
      cpuBefore === undefined || cpuAfter === undefined || answers === 0
        ? undefined
        : ((cpuAfter - cpuBefore) * 1e6) / answers,
    dbCpuUsPerAnswer:
      dbPids.length === 0 || dbBefore === undefined || dbAfter === undefined || answers === 0
        ? undefined
        : ((dbAfter - dbBefore) * 1e6) / answers,
  };
}

/** CPU seconds of `pids` together; undefined when one of them cannot be read (it ended). */
function sumCpuSeconds(pids: readonly number[]): number | undefined {
  if (pids.length === 0) return undefined;
  let sum = 0;
  for (const pid of pids) {
    const s = cpuSeconds(pid);
    if (s === undefined) return undefined;
    sum += s;
  }
  return sum;
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** User and system CPU seconds a process has used, from /proc; undefined without /proc. */
export function cpuSeconds(pid: number): number | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    // No /proc (macOS) or the process is gone: the figure is simply not reported.
    return undefined;
  }
  // Fields after the command name, which is in parentheses and may hold spaces: utime and stime
  // are the 14th and 15th fields of the line, the 12th and 13th after the name.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

async function fire(c: LoadCase, connections: number, seconds: number) {
  const samples: string[] = [];
  const result = await autocannon({
    url: c.url,
    connections,
    duration: seconds,
    ...(c.requests ? { requests: c.requests } : {}),
    verifyBody: (body) => {
      const text = String(body ?? "");
      if (c.verify(text)) return true;
      if (samples.length < SAMPLES_KEPT) samples.push(text.slice(0, SAMPLE_CHARS));
      return false;
    },
  });
  return { result, samples };
}

/**
 * utime + stime of each PostgreSQL backend connected to `databases` (their process titles name
 * the database), ms by pid; undefined without /proc. The server's own processes (WAL writer,
 * checkpointer), shared with whatever else uses the server, are left out.
 */
export function postgresCpuMs(databases: readonly string[]): Map<number, number> | undefined {
  let pids: string[];
  try {
    pids = fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  const byPid = new Map<number, number>();
  for (const pid of pids) {
    let title: string;
    try {
      title = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue; // The process ended meanwhile.
    }
    if (!title.startsWith("postgres:") || !databases.some((name) => title.includes(` ${name} `))) continue;
    const seconds = cpuSeconds(Number(pid));
    if (seconds !== undefined) byPid.set(Number(pid), seconds * 1000);
  }
  return byPid;
}
