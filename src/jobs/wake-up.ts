/**
 * A wake-up call from code that leaves work for a background job (a service queueing webhook
 * notifications) to that job. Both are given the same one when they are built, so neither holds
 * the other and neither can be built half-connected. A call before the job listens, or after it
 * stopped, is dropped: jobs look for work when they start and poll as a backstop.
 */
export class WakeUp {
  private readonly listeners = new Set<() => void>();

  /** Work is waiting. */
  wake(): void {
    for (const listener of this.listeners) listener();
  }

  /** For the job: `listener` runs on every call of `wake`. */
  listen(listener: () => void): void {
    this.listeners.add(listener);
  }
}
