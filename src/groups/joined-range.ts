/**
 * The `joined` parameter of `userList`: a time stamp (epoch ms) alone, or a range `from,to` with
 * either end left out (`from,` or `,to`). Rest-js sends an array of two numbers as `from,to`.
 * Answers the inclusive bounds, or the reason the text is none of these.
 */
export function parseJoinedRange(text: string): { from?: number; to?: number } | string {
  const parts = text.split(",").map((part) => part.trim());
  if (parts.length > 2) return "must be a time stamp or a range 'from,to' of time stamps (epoch ms)";
  const bounds: (number | undefined)[] = [];
  for (const part of parts) {
    if (part === "") {
      bounds.push(undefined);
      continue;
    }
    if (!/^-?\d{1,15}$/.test(part)) return `has '${part}', which is not a time stamp in epoch milliseconds`;
    bounds.push(Number(part));
  }
  const [from, to] = parts.length === 1 ? [bounds[0], bounds[0]] : bounds;
  if (from === undefined && to === undefined) return "must give at least one end of the range";
  if (from !== undefined && to !== undefined && from > to) return "has its start after its end";
  return { ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) };
}
