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
    minWorkers: 1,
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
      },
    })),
  },
});
