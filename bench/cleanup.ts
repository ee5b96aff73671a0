/**
 * Things to undo however the run ends (server processes, temporary directories, PostgreSQL
 * databases). Each resource registers itself and unregisters once released normally, so an
 * interrupted or crashed run still leaves nothing behind.
 */
const pending = new Set<() => Promise<void> | void>();

export function onCleanup(release: () => Promise<void> | void): () => void {
  pending.add(release);
  return () => pending.delete(release);
}

/** Releases everything still registered, newest first (servers before the stores they use). */
export async function cleanupAll(): Promise<void> {
  const releases = [...pending].reverse();
  pending.clear();
  for (const release of releases) {
    try {
      await release();
    } catch (err) {
      process.stderr.write(`bench: cleanup failed: ${(err as Error).message}\n`);
    }
  }
}
