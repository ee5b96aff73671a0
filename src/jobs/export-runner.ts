import fs from "node:fs";
import path from "node:path";
import type { ExportService } from "../features/export/export.service.js";
import type { WakeUp } from "./wake-up.js";

export interface ExportRunnerOptions {
  exports: Pick<ExportService, "nextDue" | "run">;
  /** Woken by the export service when it queues a job. */
  wakeUp: Pick<WakeUp, "listen">;
  /** The directory jobs write their files in (`ExportService`'s). */
  workDir: string;
  /** How often it looks for jobs nobody holds (a node that died leaves its job for others). */
  pollMs?: number;
  onError: (err: unknown, what: string) => void;
}

/**
 * Runs export jobs, one at a time on this node: the job queued by a request here as soon as it
 * is woken, and, polling, any job whose node stopped renewing its lease (a crash, a restart), on
 * whichever node finds it first. At stop it stops taking jobs and hands the running one back at
 * its next page.
 */
export class ExportRunner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /** A wake-up arrived while a pass ran: look again when it ends. */
  private again = false;
  private stopping = false;

  constructor(private readonly options: ExportRunnerOptions) {
    options.wakeUp.listen(() => this.kick());
  }

  async start(): Promise<void> {
    // Files of jobs that ended with a crash; a running job of another process has a fresh directory.
    await fs.promises.mkdir(this.options.workDir, { recursive: true });
    for (const entry of await fs.promises.readdir(this.options.workDir)) {
      const full = path.join(this.options.workDir, entry);
      const stat = await fs.promises.stat(full).catch(() => undefined);
      if (stat && Date.now() - stat.mtimeMs > 24 * 3_600_000)
        await fs.promises.rm(full, { recursive: true, force: true });
    }
    this.timer = setInterval(() => this.kick(), this.options.pollMs ?? 10_000);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /** Starts a pass unless one runs (which then looks again when it ends). */
  private kick(): void {
    if (this.stopping) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .catch((err: unknown) => this.options.onError(err, "export runner"))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  /** Runs due jobs until none is left. */
  private async pass(): Promise<void> {
    while (!this.stopping) {
      const jobId = await this.options.exports.nextDue();
      if (!jobId) return;
      await this.options.exports.run(jobId, () => this.stopping, this.options.onError);
    }
  }
}
