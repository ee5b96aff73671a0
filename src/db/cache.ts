import type { ChangeFeed, Topic } from "./change-feed.js";

/**
 * A read-through cache that the change feed empties when any of its topics changes. It answers
 * only while the feed is reliable; a load that overlaps an invalidation is returned but not kept,
 * so a stale value can never outlive the change that made it stale.
 */
export class FeedCache<K, V> {
  private readonly entries = new Map<K, V>();
  /**
   * The keys of each subject's entries (with `subjectOf`): a change of one subject (every write
   * changes its user's `auth:`) drops them without a pass over every entry.
   */
  private readonly bySubject = new Map<string, Set<K>>();
  private generation = 0;

  /**
   * `subjectOf` names the subject an entry is about (a user id); a change of one subject then
   * drops only that subject's entries. Without it, any change of the topics empties the cache.
   */
  constructor(
    private readonly feed: ChangeFeed,
    topics: readonly Topic[],
    private readonly subjectOf?: (value: V) => string,
    private readonly maxEntries = 10_000,
  ) {
    for (const topic of topics) {
      feed.subscribe(topic, (subject) => {
        this.generation++;
        if (subject === undefined || !this.subjectOf) {
          this.clear();
          return;
        }
        const keys = this.bySubject.get(subject);
        if (keys === undefined) return;
        this.bySubject.delete(subject);
        for (const key of keys) this.entries.delete(key);
      });
    }
  }

  /** The cached value, or `load()`'s; `undefined` results are not kept (unknown keys stay misses). */
  async get(key: K, load: () => Promise<V | undefined>): Promise<V | undefined> {
    const hit = this.peek(key);
    if (hit !== undefined) return hit;
    const since = this.mark();
    const value = await load();
    this.keep(key, value, since);
    return value;
  }

  /** The cached value, if there is one and the feed is reliable; nothing is loaded. */
  peek(key: K): V | undefined {
    return this.feed.reliable ? this.entries.get(key) : undefined;
  }

  /**
   * For callers that load a value together with other work (`get` loads it alone): taken before
   * the load starts, and handed to `keep` with what was loaded.
   */
  mark(): number {
    return this.generation;
  }

  /**
   * Keeps `value`, loaded after `since` (from `mark`), unless the cache was emptied meanwhile: the
   * value may then predate the change. `undefined` is not kept.
   */
  keep(key: K, value: V | undefined, since: number): void {
    if (value !== undefined && this.feed.reliable && since === this.generation) {
      if (this.entries.size >= this.maxEntries) this.clear();
      this.delete(key);
      this.entries.set(key, value);
      if (this.subjectOf) {
        const subject = this.subjectOf(value);
        let keys = this.bySubject.get(subject);
        if (keys === undefined) {
          keys = new Set();
          this.bySubject.set(subject, keys);
        }
        keys.add(key);
      }
    }
  }

  delete(key: K): void {
    const value = this.entries.get(key);
    if (value === undefined) return;
    this.entries.delete(key);
    if (this.subjectOf) {
      const subject = this.subjectOf(value);
      const keys = this.bySubject.get(subject);
      keys?.delete(key);
      if (keys?.size === 0) this.bySubject.delete(subject);
    }
  }

  private clear(): void {
    this.entries.clear();
    this.bySubject.clear();
  }
}
