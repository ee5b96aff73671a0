import type { Reporter, RunnerTask, RunnerTestFile } from "vitest/node";

/**
 * Ends the run with one plain line, `N passed, N failed` (and skipped, if any), that tools reading
 * the log can parse without knowing vitest's own layout. It uses `onFinished`, the hook vitest's
 * default reporter prints its own summary in, so this line comes last.
 */
export default class SummaryReporter implements Reporter {
  onFinished(files: RunnerTestFile[] = [], errors: unknown[] = []): void {
    const counts = { passed: 0, failed: errors.length, skipped: 0 };
    const visit = (task: RunnerTask) => {
      if (task.type === "suite") {
        // A file or suite that failed before running its tests (a beforeAll) fails once more.
        if (task.result?.state === "fail" && task.tasks.every((t) => t.result?.state !== "fail"))
          counts.failed++;
        for (const child of task.tasks) visit(child);
        return;
      }
      const state = task.result?.state;
      if (state === "pass") counts.passed++;
      else if (state === "fail") counts.failed++;
      else counts.skipped++;
    };
    for (const file of files) visit(file);
    // Every engine's project ran files: vitest 3.2.7 with reused workers and fewer minWorkers than
    // maxWorkers was seen to end the second project's workers and skip its files without a failure
    // (see vitest.config.ts). A whole-suite run (more than one file) must not pass that way.
    if (files.length > 1) {
      const engines = ["sqlite", ...(process.env.PORTICO_TEST_DATABASE_URL ? ["postgres"] : [])];
      for (const engine of engines) {
        if (!files.some((file) => file.projectName === engine)) {
          process.stdout.write(`\nno test file ran on ${engine}: the run is incomplete\n`);
          counts.failed++;
          process.exitCode = 1;
        }
      }
    }
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : "";
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
  }
}
