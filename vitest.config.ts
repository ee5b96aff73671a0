import { defineConfig } from "vitest/config";

/**
 * The whole suite runs once per database engine: SQLite always, PostgreSQL when
 * PORTICO_TEST_DATABASE_URL is set (`.ci/run` sets it). Each test file gets its own SQLite file or
 * PostgreSQL schema, so files run in parallel without sharing state.
 */
const engines = ["sqlite", ...(process.env.PORTICO_TEST_DATABASE_URL ? ["postgres"] : [])];

export default defineConfig({
  test: {
    // Vitest's default on this 2-core machine is one worker, which runs the files one after
    // another. Most of a file's time is spent waiting (on spawned servers, loopback receivers,
    // PostgreSQL, timers), so a few files side by side use the cores without overloading them.
    maxWorkers: 3,
    // As many as the maximum: with fewer, vitest 3.2's recycling of the kept worker processes
    // between the two projects (see `poolOptions`) rejects with "Terminating worker thread" and the
    // second project's files never run (vitest-dev/vitest#8564 describes the same error).
    minWorkers: 3,
    // Worker processes are kept from one test file to the next (the pool's `isolate: false`), while
    // each file still gets its own module graph (each project's `isolate: true` below): a file's
    // src/ and test/ modules are evaluated afresh, only node_modules (Fastify, Kysely, pg, ajv,
    // jsts, ...), loaded natively, stay loaded in the process. Loading those again for each of
    // the ~216 files was about 1 to 1.5 s of CPU per file, most of a small file's time (8 API files
    // on one worker: 47.8 s wall, 23.5 s CPU isolated; 24.9 s, 14.7 s so). Vitest then runs the
    // projects one after the other (all SQLite files, then all PostgreSQL files or the reverse).
    poolOptions: { forks: { isolate: false } },
    reporters: ["default", "./test/helpers/summary-reporter.ts"],
    projects: engines.map((engine) => ({
      test: {
        name: engine,
        // Unit tests beside the code need no database server: they run once, with SQLite.
        include: engine === "sqlite" ? ["src/**/*.test.ts", "test/**/*.test.ts"] : ["test/**/*.test.ts"],
        // Several nodes share one database only on PostgreSQL (SQLite is one process per data
        // directory), and only a database server can go away under a running node. PostGIS is a
        // PostgreSQL extension.
        // The ArcGIS Maps SDK test (test/browser) runs once, on SQLite: it checks portico's HTTP
        // answers, the same on both engines, and a second Chromium would crowd the two cores. The
        // fuzz areas' check reads only the route tables, so it too runs once.
        exclude:
          engine === "sqlite"
            ? [
                "test/process/cluster.test.ts",
                "test/process/database-loss.test.ts",
                "test/api/postgis.test.ts",
                "**/node_modules/**",
              ]
            : ["test/browser/**", "test/api/fuzz/areas.test.ts", "**/node_modules/**"],
        env: { PORTICO_TEST_ENGINE: engine },
        setupFiles: ["./test/setup/no-keep-alive.ts"],
        testTimeout: 30_000,
        hookTimeout: 30_000,
        pool: "forks",
        // Fresh modules per file, in a reused process: see the pool's `isolate` above. (A project
        // would otherwise inherit the pool's `false` and share src/ modules between files.)
        isolate: true,
      },
    })),
  },
});
