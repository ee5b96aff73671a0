/**
 * When a sync schedule fires: at its start time, then every interval after it. A schedule that
 * was paused, or whose node was down, resumes at its next fire time rather than catching up.
 */

/** The first fire time at or after `now`: start, start + interval, ... */
export function nextFire(start: number, intervalMs: number, now: number): number {
  if (now <= start) return start;
  const k = Math.ceil((now - start) / intervalMs);
  return start + k * intervalMs;
}
