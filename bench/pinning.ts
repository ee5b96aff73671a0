/**
 * CPU pinning for the scale-out case (`--pin`): portico's nodes on some cores, the load generator
 * (this process) and PostgreSQL on the others, so that one node and N nodes are measured on the
 * same cores. With the nodes sharing cores they had alone, N nodes / 1 node says what the second
 * node costs (coordination: the change feed, the shared caches' invalidations), not what the
 * machine's other tenants did; with a core per node it would say what scaling out buys.
 *
 * PostgreSQL's processes are pinned with `taskset -a -p` (the server and every backend; new
 * backends inherit the server's mask) and put back on every core afterwards, also when the run is
 * interrupted.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";

export interface Pinning {
  /** Cores of portico's nodes, as taskset's list (`0`, `0-1`). */
  nodeCores: string;
  /** Cores of the load generator and PostgreSQL. */
  otherCores: string;
  pinNode(pid: number): void;
  /** Puts this process and PostgreSQL back on every core. */
  release(): void;
}

function taskset(args: string[]): void {
  execFileSync("taskset", args, { stdio: "ignore" });
}

function postgresPids(): number[] {
  // The server (postmaster) and its backends: processes whose executable is postgres.
  return fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "postgres";
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * Pins this process and PostgreSQL to the upper half of the cores (at least one), leaving the
 * lower half for portico's nodes; throws when taskset is missing or there is one core.
 */
export function pinCores(): Pinning {
  const cores = os.availableParallelism();
  if (cores < 2) throw new Error("--pin needs at least 2 cores");
  try {
    execFileSync("taskset", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error("--pin needs taskset (util-linux)");
  }
  const nodeCount = Math.floor(cores / 2);
  const range = (from: number, to: number) => (from === to ? `${from}` : `${from}-${to}`);
  const nodeCores = range(0, nodeCount - 1);
  const otherCores = range(nodeCount, cores - 1);
  const all = range(0, cores - 1);
  const pgPids = postgresPids();
  if (pgPids.length === 0) throw new Error("--pin found no PostgreSQL process on this machine");
  taskset(["-a", "-c", "-p", otherCores, String(process.pid)]);
  for (const pid of pgPids) {
    try {
      taskset(["-a", "-c", "-p", otherCores, String(pid)]);
    } catch {
      // A backend that ended meanwhile.
    }
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    for (const pid of [process.pid, ...postgresPids()]) {
      try {
        taskset(["-a", "-c", "-p", all, String(pid)]);
      } catch {
        // Gone meanwhile.
      }
    }
  };
  process.once("exit", release);
  return {
    nodeCores,
    otherCores,
    pinNode: (pid) => taskset(["-a", "-c", "-p", nodeCores, String(pid)]),
    release,
  };
}
