/**
 * Runs at most `concurrency` tasks at once; the others wait in a bounded queue, served round-robin
 * by key (the address a sign-in comes from), so one source sending many requests delays another
 * source's request by at most one of its own per free slot, however many it sent. A task that
 * would make the queue longer than `maxQueued`, or its key's share longer than `maxQueuedPerKey`,
 * is refused at once with `busy()`: waiting callers hold memory and sockets, and a caller told to
 * try again is better served than one left waiting behind a flood.
 */
export interface FairLimiterOptions {
  concurrency: number;
  maxQueued: number;
  maxQueuedPerKey: number;
  /** The error a refused task gets. */
  busy: () => Error;
}

export class FairLimiter {
  private running = 0;
  private queued = 0;
  /** Waiting tasks by key; the map's order is the rotation (a served key moves to the end). */
  private readonly queues = new Map<string, Array<() => void>>();

  constructor(private readonly options: FairLimiterOptions) {
    if (options.concurrency < 1) throw new Error("FairLimiter needs a concurrency of 1 at least");
  }

  /** Tasks running and waiting now (for tests and metrics). */
  get load(): { running: number; queued: number } {
    return { running: this.running, queued: this.queued };
  }

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    if (this.running >= this.options.concurrency || this.queued > 0) {
      const mine = this.queues.get(key);
      if (this.queued >= this.options.maxQueued || (mine?.length ?? 0) >= this.options.maxQueuedPerKey) {
        throw this.options.busy();
      }
      await new Promise<void>((resolve) => {
        if (mine) mine.push(resolve);
        else this.queues.set(key, [resolve]);
        this.queued++;
      });
    } else {
      this.running++;
    }
    try {
      return await task();
    } finally {
      this.next();
    }
  }

  /** Hands the finished task's slot to the first waiting key in the rotation, or frees it. */
  private next(): void {
    const first = this.queues.entries().next();
    if (first.done) {
      this.running--;
      return;
    }
    const [key, waiting] = first.value;
    const resume = waiting.shift() as () => void;
    this.queues.delete(key);
    if (waiting.length > 0) this.queues.set(key, waiting);
    this.queued--;
    // The slot passes to the resumed task: `running` stays as it is.
    resume();
  }
}
